"""Seeded synthetic run-to-failure engines in the C-MAPSS layout, so everything runs without NASA's files.

Each engine gets a life of L cycles and a wear ``h(t) = (exp(a t / L) - 1) / (exp(a) - 1)``,
t = 1..L, with a random rate a: slow at first, accelerating, exactly 1 at failure (the
exponential degradation of Saxena et al. 2008, "Damage Propagation Modeling for Aircraft Engine
Run-to-Failure Simulation", PHM 2008). A sensor reads

    baseline + engine offset + drift x h(t) + noise,

rounded to the decimals C-MAPSS records. Baselines, noise, drifts (signed: the direction the
sensor moves on FD001's training engines) and offsets are FD001-like figures measured on early
and late cycles of its engines. Sensors 1, 5, 6, 10, 16, 18 and 19 carry no signal, as in FD001:
exact constants, except P15 which, like FD001's, reads 21.60 instead of 21.61 in about 2% of cycles.

Command line: ``python -m seq2seq.rul.synthetic --out DIR [--engines N] [--seed S]`` writes
``train_SYN.txt``, ``test_SYN.txt`` and ``RUL_SYN.txt`` in the original formats.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from seq2seq.catalog import sensor
from seq2seq.rul.cmapss import Engine, write_cmapss, write_rul

# One row per sensor 1..21: (baseline, noise std, drift at failure, engine offset std, decimals).
_SENSORS = np.array([
    (518.67, 0.0, 0.0, 0.0, 2),  # T2, constant
    (642.38, 0.27, 1.3, 0.2, 2),  # T24
    (1587.0, 3.8, 15.0, 2.4, 2),  # T30
    (1402.8, 3.8, 25.0, 4.0, 2),  # T50
    (14.62, 0.0, 0.0, 0.0, 2),  # P2, constant
    (21.61, 0.0, 0.0, 0.0, 2),  # P15, constant but for rare 21.60 readings
    (553.95, 0.38, -2.4, 0.45, 2),  # P30
    (2388.06, 0.03, 0.17, 0.045, 2),  # Nf
    (9056.0, 4.0, 40.0, 7.0, 2),  # Nc
    (1.30, 0.0, 0.0, 0.0, 2),  # epr, constant
    (47.36, 0.097, 0.76, 0.14, 2),  # Ps30
    (521.9, 0.29, -2.0, 0.4, 2),  # phi
    (2388.06, 0.029, 0.17, 0.045, 2),  # NRf
    (8137.4, 3.0, 28.0, 7.0, 2),  # NRc: rises on average on FD001 (on 57 of its 100 engines)
    (8.418, 0.019, 0.10, 0.017, 4),  # BPR
    (0.03, 0.0, 0.0, 0.0, 2),  # farB, constant
    (392.3, 0.9, 3.9, 0.7, 0),  # htBleed, recorded in whole units
    (2388.0, 0.0, 0.0, 0.0, 2),  # Nf_dmd, constant
    (100.0, 0.0, 0.0, 0.0, 2),  # PCNfR_dmd, constant
    (38.93, 0.097, -0.47, 0.085, 2),  # W31
    (23.359, 0.058, -0.28, 0.05, 4),  # W32
])
BASELINE, NOISE, DRIFT, OFFSET, DECIMALS = _SENSORS.T  # each (21,)
P15_LOW_READING = (6, 21.60, 0.02)  # (sensor, value, probability per cycle)
SETTING_NOISE = (0.0022, 0.0003)  # std of operational settings 1 and 2 around 0; setting 3 is 100
WEAR_RATE = (2.5, 5.0)  # range of the exponent a of h(t)
TEST_KEPT = 0.1  # a test engine keeps at least this fraction of its life


def synthetic_engines(
    n_engines: int = 100,
    seed: int = 0,
    min_life: int = 120,
    max_life: int = 300,
    drift: dict[int, dict[str | int, float]] | None = None,
) -> list[Engine]:
    """``n_engines`` engines run to failure, units 1..n, lives in [min_life, max_life]; the same for a seed.

    ``drift={3: {"T30": 4.0}}`` adds to sensor T30 of unit 3 an extra ``4.0 x noise std x h(t)``
    (negative: downwards); every other reading is the same as without it.
    """
    return _generate(np.random.default_rng(seed), n_engines, min_life, max_life, drift or {})


def synthetic_test_set(
    n_engines: int = 100,
    seed: int = 0,
    min_life: int = 120,
    max_life: int = 300,
    drift: dict[int, dict[str | int, float]] | None = None,
) -> tuple[list[Engine], np.ndarray]:
    """Test engines cut at a random cycle, as ``test_FD00x.txt``, with their true RULs (B,) as ``RUL_FD00x.txt``.

    Drawn from a stream separate from ``synthetic_engines(seed=seed)``, so they are other engines.
    Each keeps between TEST_KEPT of its life and all but its last cycle (RUL >= 1).
    """
    rng = np.random.default_rng([seed, 1])
    engines = _generate(rng, n_engines, min_life, max_life, drift or {})
    kept = [int(rng.integers(max(1, math.ceil(TEST_KEPT * e.length)), e.length)) for e in engines]
    cut = [Engine(e.unit, e.cycles[:n], e.settings[:n], e.sensors[:n]) for e, n in zip(engines, kept, strict=True)]
    rul = np.array([e.length - n for e, n in zip(engines, kept, strict=True)], dtype=np.float64)
    return cut, rul


def wear(length: int, rate: float) -> np.ndarray:
    """h(t) = (exp(rate t / L) - 1) / (exp(rate) - 1) for t = 1..L: (L,) increasing, 1 at the last cycle."""
    t = np.arange(1, length + 1)
    return np.expm1(rate * t / length) / np.expm1(rate)


def _generate(
    rng: np.random.Generator, n_engines: int, min_life: int, max_life: int, drift: dict[int, dict[str | int, float]]
) -> list[Engine]:
    if n_engines < 1:
        raise ValueError(f"n_engines must be at least 1, got {n_engines}")
    if not 2 <= min_life <= max_life:
        raise ValueError(f"need 2 <= min_life <= max_life, got {min_life} and {max_life}")
    extra = _extra_drift(drift, n_engines)  # (n_engines, 21)
    lives = rng.integers(min_life, max_life + 1, size=n_engines)
    return [_engine(rng, unit, int(life), extra[unit - 1]) for unit, life in enumerate(lives, 1)]


def _engine(rng: np.random.Generator, unit: int, life: int, extra: np.ndarray) -> Engine:
    """One history; the draws do not depend on ``extra``, so a drift changes nothing else."""
    h = wear(life, rng.uniform(*WEAR_RATE))[:, None]  # (L, 1)
    offset = rng.normal(0.0, 1.0, size=21) * OFFSET  # (21,)
    noise = rng.normal(0.0, 1.0, size=(life, 21)) * NOISE  # (L, 21)
    sensors = BASELINE + offset + (DRIFT + extra * NOISE) * h + noise  # (L, 21)
    column, low, probability = P15_LOW_READING
    sensors[rng.random(life) < probability, column - 1] = low
    sensors = np.stack([np.round(sensors[:, k], int(DECIMALS[k])) for k in range(21)], axis=1)  # (L, 21)
    settings = np.column_stack([
        np.round(rng.normal(0.0, SETTING_NOISE[0], size=life), 4),
        np.round(rng.normal(0.0, SETTING_NOISE[1], size=life), 4),
        np.full(life, 100.0),
    ])  # (L, 3)
    # + 0.0 turns the -0.0 that rounding leaves for tiny negatives into 0.0, as the files write it
    return Engine(unit, np.arange(1, life + 1, dtype=np.int64), settings + 0.0, sensors)


def _extra_drift(drift: dict[int, dict[str | int, float]], n_engines: int) -> np.ndarray:
    """(n_engines, 21) extra drift at failure in noise stds; KeyError/ValueError name what is wrong."""
    extra = np.zeros((n_engines, 21))
    for unit, by_sensor in drift.items():
        if not 1 <= unit <= n_engines:
            raise ValueError(f"drift: unit {unit} is not one of the engines 1..{n_engines}")
        for key, amount in by_sensor.items():
            found = sensor(key)
            if NOISE[found.index - 1] == 0:
                raise ValueError(f"drift: sensor {found.symbol} is constant in C-MAPSS; choose a sensor that varies")
            extra[unit - 1, found.index - 1] = amount
    return extra


def main(argv: list[str] | None = None) -> int:
    """Write a synthetic training file, test file and RUL file into ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m seq2seq.rul.synthetic", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for train_SYN.txt, test_SYN.txt and RUL_SYN.txt")
    parser.add_argument("--engines", type=int, default=100, help="engines in each of the training and test files")
    parser.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same files")
    args = parser.parse_args(argv)
    if args.engines < 1:
        parser.error("--engines must be at least 1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_cmapss(out / "train_SYN.txt", synthetic_engines(args.engines, seed=args.seed))
    test, rul = synthetic_test_set(args.engines, seed=args.seed)
    write_cmapss(out / "test_SYN.txt", test)
    write_rul(out / "RUL_SYN.txt", rul)
    print(f"wrote {args.engines} training and {args.engines} test engines to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

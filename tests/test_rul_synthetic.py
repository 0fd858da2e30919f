"""Synthetic engines: the real C-MAPSS layout, determinism, FD001-like degradation and injectable drift."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from seq2seq.catalog import sensor
from seq2seq.config import RulConfig
from seq2seq.rul.cmapss import read_cmapss, read_rul, write_cmapss
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.synthetic import NOISE, main, synthetic_engines, synthetic_test_set, wear

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FD001 = SHARED / "data" / "cmapss" / "train_FD001.txt"
UP = ("T24", "T30", "T50", "Nf", "Nc", "Ps30", "NRf", "NRc", "BPR", "htBleed")
DOWN = ("P30", "phi", "W31", "W32")
CONSTANT = (1, 5, 6, 10, 16, 18, 19)


@pytest.fixture(scope="module")
def engines():
    return synthetic_engines(20, seed=5, min_life=100, max_life=200)


def _late_minus_early(engine, symbol: str, cycles: int = 20) -> float:
    column = engine.sensors[:, sensor(symbol).index - 1]
    return float(column[-cycles:].mean() - column[:cycles].mean())


def test_written_engines_have_the_26_column_layout_and_read_back(engines, tmp_path):
    path = tmp_path / "train_SYN.txt"
    write_cmapss(path, engines)
    assert {len(line.split()) for line in path.read_text().splitlines()} == {26}
    back = read_cmapss(path)
    assert [e.unit for e in back] == list(range(1, 21))
    assert all(np.array_equal(a.sensors, b.sensors) and np.array_equal(a.cycles, b.cycles)
               for a, b in zip(engines, back, strict=True))


def test_lives_lie_in_range_with_cycles_counted_from_one(engines):
    assert all(100 <= e.length <= 200 and e.cycles.tolist() == list(range(1, e.length + 1)) for e in engines)


def test_the_same_seed_gives_the_same_engines():
    first, again, other = (synthetic_engines(3, seed=s, min_life=20, max_life=40) for s in (1, 1, 2))
    assert all(np.array_equal(a.sensors, b.sensors) and np.array_equal(a.settings, b.settings)
               for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0].sensors[:20], other[0].sensors[:20])


def test_wear_grows_from_near_zero_to_one_at_failure():
    h = wear(150, 4.0)
    assert h.shape == (150,) and np.all(np.diff(h) > 0) and h[0] < 0.01 and h[-1] == pytest.approx(1.0)


@pytest.mark.parametrize(("symbols", "sign"), [(UP, 1), (DOWN, -1)])
def test_sensors_degrade_in_fd001_directions_on_most_engines(engines, symbols, sign):
    for symbol in symbols:
        moved = sum(sign * _late_minus_early(engine, symbol) > 0 for engine in engines)
        assert moved >= 0.9 * len(engines), symbol


def test_constant_sensors_are_dropped_by_the_preprocessor(engines):
    assert Preprocessor.fit(engines, RulConfig()).kept_sensors == [k for k in range(1, 22) if k not in CONSTANT]
    assert all(len(np.unique(np.concatenate([e.sensors[:, k - 1] for e in engines]))) <= 2 for k in CONSTANT)


def test_drift_moves_only_the_named_sensor_of_the_named_engine():
    plain = synthetic_engines(8, seed=2, min_life=80, max_life=120)
    drifted = synthetic_engines(8, seed=2, min_life=80, max_life=120, drift={3: {"T30": 4.0}})
    column = sensor("T30").index - 1
    for a, b in zip(plain, drifted, strict=True):
        difference = b.sensors - a.sensors  # (L, 21)
        if a.unit != 3:
            assert not difference.any()
            continue
        assert not np.delete(difference, column, axis=1).any()
        assert np.all(np.diff(difference[:, column]) >= -0.011)  # grows with wear, up to rounding
        assert difference[-1, column] == pytest.approx(4.0 * NOISE[column], abs=0.011)


def test_a_drifting_engine_deviates_most_in_its_named_sensor():
    drifted = synthetic_engines(20, seed=9, min_life=100, max_life=200, drift={7: {"W31": -8.0}})
    deviations = [-_late_minus_early(engine, "W31") for engine in drifted]
    assert int(np.argmax(deviations)) == 6


@pytest.mark.parametrize(("drift", "expected"), [({0: {"T30": 1.0}}, ValueError), ({1: {"T2": 1.0}}, ValueError),
                                                 ({1: {"T99": 1.0}}, KeyError)])
def test_an_invalid_drift_is_rejected(drift, expected):
    with pytest.raises(expected):
        synthetic_engines(2, drift=drift)


def test_test_set_engines_stop_before_failure_with_their_true_rul():
    engines, rul = synthetic_test_set(10, seed=4, min_life=50, max_life=90)
    assert rul.shape == (10,) and np.all(rul >= 1)
    assert all(50 <= e.length + r <= 90 and e.length >= 5 for e, r in zip(engines, rul, strict=True))
    again, rul_again = synthetic_test_set(10, seed=4, min_life=50, max_life=90)
    assert np.array_equal(rul, rul_again) and np.array_equal(engines[0].sensors, again[0].sensors)
    train = synthetic_engines(10, seed=4, min_life=50, max_life=90)
    assert not np.array_equal(engines[0].sensors[:5], train[0].sensors[:5])  # other engines than training


def test_command_line_writes_readable_train_test_and_rul_files(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "syn"), "--engines", "4", "--seed", "3"]) == 0
    train = read_cmapss(tmp_path / "syn" / "train_SYN.txt")
    test = read_cmapss(tmp_path / "syn" / "test_SYN.txt")
    rul = read_rul(tmp_path / "syn" / "RUL_SYN.txt", [engine.unit for engine in test])
    assert len(train) == len(test) == 4 and np.all(rul >= 1)
    assert "wrote 4 training and 4 test engines" in capsys.readouterr().out


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared is absent (a clone without the shared data)")
def test_the_synthetic_directions_are_those_of_most_fd001_engines():
    real = read_cmapss(FD001)  # the core speeds are the least consistent: Nc rises on 71 engines, NRc on 57
    for symbols, sign in ((UP, 1), (DOWN, -1)):
        for symbol in symbols:
            assert sum(sign * _late_minus_early(engine, symbol) > 0 for engine in real) > len(real) / 2, symbol

"""Sensor scaling: which sensors the RUL model reads and how they are scaled, fitted on training engines only.

Shapes (legend: seq2seq/__init__.py): L cycles of one engine, F kept sensors.

The standard C-MAPSS protocol (Saxena et al. 2008; e.g. Zheng et al. 2017, "Long Short-Term Memory
Network for Remaining Useful Life Estimation"): sensors constant on the training data are dropped,
the others are z-scored with statistics of the training engines only. Operational settings are not
used: FD001 runs at one operating condition. With ``rul.smoothing`` a > 0 the scaled readings are
smoothed exponentially along each engine's history, causally (cycle t sees cycles <= t only, so a
truncated test engine reads as its training twin did). ``seq2seq.rul.windows`` cuts the scaled
histories into the model's windows and targets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from seq2seq.catalog import SENSORS
from seq2seq.config import RulConfig
from seq2seq.errors import CheckpointError, DataError, FleetError
from seq2seq.rul.cmapss import Engine

# A sensor is constant when its standard deviation on the training data is below this fraction of
# its recording resolution (the smallest step between two distinct recorded values): what varies is
# then rounding, not signal. FD001's sensor 6 (P15) reads 21.61 and, in 2% of rows, 21.60: its
# standard deviation is 0.14 steps. The least varying informative sensor, htBleed, spreads 1.5 steps.
RESOLUTION_FRACTION = 0.5


@dataclass(frozen=True)
class Preprocessor:
    """Which sensors the model reads and how they are scaled; fitted on training engines only."""

    kept_sensors: list[int]  # 1-based sensor indices, increasing; F of them
    mean: list[float]  # (F,) training mean of each kept sensor
    std: list[float]  # (F,) training standard deviation (population) of each kept sensor, > 0
    window: int  # W, cycles per window the model was trained with
    smoothing: float = 0.0  # exponential smoothing weight of the past, in [0, 1); 0 = none (checkpoints before it)

    @classmethod
    def fit(cls, engines: Sequence[Engine], config: RulConfig) -> Preprocessor:
        """Keep the sensors that vary on ``engines`` (see RESOLUTION_FRACTION) and z-score them."""
        if not engines:
            raise FleetError("no training engines to fit the preprocessing on")
        _check_finite(engines)
        sensors = np.concatenate([engine.sensors for engine in engines])  # (sum L, 21)
        kept = [k for k in range(1, len(SENSORS) + 1) if _varies(sensors[:, k - 1])]
        if not kept:
            raise FleetError("no sensor varies on the training engines")
        columns = sensors[:, np.array(kept) - 1]  # (sum L, F)
        return cls(kept, columns.mean(axis=0).tolist(), columns.std(axis=0).tolist(), config.window, config.smoothing)

    @property
    def n_features(self) -> int:
        """F, the number of kept sensors."""
        return len(self.kept_sensors)

    def transform(self, engine: Engine) -> np.ndarray:
        """The kept sensors of ``engine``, z-scored: (L, F) float32. A reading that is NaN or inf, or
        whose z-score is (a reading far beyond the training range overflows float32), is a DataError."""
        _check_finite([engine])
        columns = engine.sensors[:, np.array(self.kept_sensors) - 1]  # (L, F)
        with np.errstate(over="ignore"):  # an overflow is found and reported below
            scaled = ((columns - np.array(self.mean)) / np.array(self.std)).astype(np.float32)
        bad = ~np.isfinite(scaled)
        if bad.any():
            row, column = np.argwhere(bad)[0]
            sensor = self.kept_sensors[column]
            raise DataError(
                f"engine {engine.unit}: cycle {engine.cycles[row]}: sensor {sensor} ({SENSORS[sensor - 1].symbol}) "
                f"reads {columns[row, column]:.6g}, too far beyond the training range to scale "
                f"(mean {self.mean[column]:.6g}, std {self.std[column]:.6g})"
            )
        return smooth(scaled, self.smoothing)

    def state_dict(self) -> dict:
        """Plain lists, ints and floats, for a checkpoint."""
        return {"kept_sensors": list(self.kept_sensors), "mean": list(self.mean), "std": list(self.std),
                "window": self.window, "smoothing": self.smoothing}

    @classmethod
    def from_state_dict(cls, state: dict) -> Preprocessor:
        """The preprocessor saved by ``state_dict``; a malformed state is a CheckpointError."""
        where = "checkpoint preprocessor state"
        keys = ("kept_sensors", "mean", "std", "window")
        if not isinstance(state, dict) or set(state) - {"smoothing"} != set(keys):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise CheckpointError(f"{where}: expected keys {', '.join(keys)} (and smoothing), got {got}")
        kept, mean, std, window = (state[key] for key in keys)
        smoothing = state.get("smoothing", 0.0)  # absent in checkpoints written before it: none
        if not (isinstance(kept, list) and kept and all(_is_int(k) and 1 <= k <= len(SENSORS) for k in kept)
                and kept == sorted(set(kept))):
            raise CheckpointError(f"{where}: kept_sensors must be increasing sensor numbers 1..21, got {kept!r}")
        for name, values in (("mean", mean), ("std", std)):
            if not (isinstance(values, list) and len(values) == len(kept)
                    and all(_is_number(v) and math.isfinite(v) for v in values)):
                raise CheckpointError(f"{where}: {name} must be {len(kept)} finite numbers, got {values!r}")
        if any(s <= 0 for s in std):
            raise CheckpointError(f"{where}: std must be positive, got {std!r}")
        if not (_is_int(window) and window >= 1):
            raise CheckpointError(f"{where}: window must be a whole number >= 1, got {window!r}")
        if not (_is_number(smoothing) and 0 <= smoothing < 1):
            raise CheckpointError(f"{where}: smoothing must be a number in [0, 1), got {smoothing!r}")
        return cls(list(kept), [float(m) for m in mean], [float(s) for s in std], window, float(smoothing))


def smooth(values: np.ndarray, a: float) -> np.ndarray:
    """Causal exponential smoothing down the cycles of (L, F) ``values``: s_0 = x_0, s_t = a s_(t-1) + (1 - a) x_t."""
    if a == 0 or len(values) == 0:
        return values
    smoothed = np.empty_like(values)
    smoothed[0] = values[0]
    for t in range(1, len(values)):  # L is a few hundred cycles: a loop of vector steps
        smoothed[t] = a * smoothed[t - 1] + (1 - a) * values[t]
    return smoothed


def _varies(column: np.ndarray) -> bool:
    """Whether a sensor's spread exceeds rounding: std >= RESOLUTION_FRACTION x its smallest recorded step."""
    distinct = np.unique(column)
    if len(distinct) < 2:
        return False
    return bool(column.std() >= RESOLUTION_FRACTION * np.diff(distinct).min())


def _check_finite(engines: Sequence[Engine]) -> None:
    for engine in engines:
        bad = ~np.isfinite(engine.sensors)  # (L, 21)
        if bad.any():
            row, column = np.argwhere(bad)[0]
            symbol = SENSORS[column].symbol
            raise DataError(
                f"engine {engine.unit}: cycle {engine.cycles[row]}: sensor {column + 1} ({symbol}) is "
                f"{engine.sensors[row, column]} (readings must be finite numbers)"
            )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)

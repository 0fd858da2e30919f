"""Alerts from what the RUL model looked at.

Shapes (legend: seq2seq/__init__.py): W window cycles, F kept sensors, L cycles of history.

For the last window of an engine, each kept sensor's deviation from the engine's own early
(healthy) cycles is weighted by the model's temporal attention:

    d_tf     = x_tf - mean(x_1f .. x_bf)          b = BASELINE_CYCLES (at most a quarter of L)
    signed_f = sum_t alpha_t d_tf                 direction: up when > 0
    score_f  = sum_t alpha_t |d_tf|               ranking of the sensors

in the z-score units of the training data. The strongest sensors become alerts described by the
catalog (the one source of sensor phrases), e.g. ``hpc outlet temperature rising sharply``, with
the cycle where the weighted deviation peaked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seq2seq.catalog import sensor, sensor_alert
from seq2seq.errors import counted

BASELINE_CYCLES = 20  # early cycles taken as the engine's healthy reference
MIN_BASELINE = 5  # ... at the least: one to four noisy cycles as the reference raised alerts from noise alone
MIN_HISTORY = 4 * MIN_BASELINE  # cycles of history an engine needs for alerts (its reference is its first quarter)
MIN_DEVIATION = 0.5  # |signed deviation| (training std) below which a sensor raises no alert
MODERATE_FROM = 1.0  # |signed deviation| from which an alert is "moderate"
SHARP_FROM = 2.0  # ... and from which it is "sharp"
MAX_ALERTS = 3  # strongest sensors reported per engine


@dataclass(frozen=True)
class Alert:
    symbol: str  # catalog sensor symbol, e.g. "T30"
    direction: str  # "up" | "down"
    strength: str  # "slight" | "moderate" | "sharp"
    deviation: float  # attention-weighted signed deviation, in training standard deviations
    score: float  # attention-weighted absolute deviation (the ranking key)
    cycle: int  # the cycle where the weighted deviation peaked
    phrase: str  # the catalog's alert phrase

    def line(self, health: str) -> str:
        """The alert as the translator reads it, prefixed with the health state."""
        return f"{health}: {self.phrase}"


def strength_of(deviation: float) -> str:
    size = abs(deviation)
    return "sharp" if size >= SHARP_FROM else "moderate" if size >= MODERATE_FROM else "slight"


def weighted_deviations(values: np.ndarray, attention: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """values (L, F) normalised history; attention (n,) over its last n = min(L, W) cycles.

    Returns signed (F,), score (F,) and, per sensor, the index into ``values`` of its peak (F,).
    """
    L = values.shape[0]
    n = attention.shape[0]
    baseline = values[: max(1, min(BASELINE_CYCLES, L // 4))].mean(axis=0)  # (F,)
    deviation = values[L - n:] - baseline  # (n, F)
    weighted = attention[:, None] * deviation  # (n, F)
    peak = np.abs(weighted).argmax(axis=0) + (L - n)  # (F,)
    return weighted.sum(axis=0), np.abs(weighted).sum(axis=0), peak


def engine_alerts(values: np.ndarray, cycles: np.ndarray, attention: np.ndarray, kept_sensors: list[int],
                  max_alerts: int = MAX_ALERTS) -> tuple[list[Alert], dict[str, float]]:
    """Alerts for one engine (strongest first) and every kept sensor's signed deviation by symbol.

    ``attention`` covers the real (unpadded) cycles of the last window, oldest first. A history shorter than
    ``MIN_HISTORY`` raises none (``too_short``): its reference would be a cycle or two, and noise would read as a trend.
    """
    signed, score, peak = weighted_deviations(values, attention)
    symbols = [sensor(index).symbol for index in kept_sensors]
    deviations = {symbol: float(value) for symbol, value in zip(symbols, signed, strict=True)}
    if too_short(len(values)):
        return [], deviations
    alerts = []
    for f in np.argsort(-score, kind="stable")[:max_alerts]:
        if abs(signed[f]) < MIN_DEVIATION:
            continue
        direction = "up" if signed[f] > 0 else "down"
        strength = strength_of(float(signed[f]))
        alerts.append(Alert(symbols[f], direction, strength, float(signed[f]), float(score[f]),
                            int(cycles[peak[f]]), sensor_alert(symbols[f], direction, strength)))
    return alerts, deviations


def too_short(cycles: int) -> str:
    """Why an engine with ``cycles`` cycles of history raises no alert; "" when it has enough to be judged."""
    if cycles >= MIN_HISTORY:
        return ""
    return (f"only {counted(cycles, 'cycle')} of history: alerts need at least {MIN_HISTORY} (the first quarter, "
            f"{MIN_BASELINE} cycles or more, as the engine's healthy reference); too few to tell a trend from noise")

"""Alerts: attention-weighted deviations from the engine's early cycles, described by the catalog."""

from __future__ import annotations

import numpy as np
import pytest

from seq2seq.catalog import DIRECTIONS, SENSORS, STRENGTHS, sensor_alert
from seq2seq.rul.alerts import MIN_DEVIATION, MIN_HISTORY, engine_alerts, strength_of, too_short, weighted_deviations

KEPT = [2, 3, 4, 7, 11]  # T24, T30, T50, P30, Ps30


def history(length: int = 80, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 0.1, size=(length, len(KEPT)))


def uniform_attention(n: int) -> np.ndarray:
    return np.full(n, 1.0 / n)


def test_the_drifting_sensor_ranks_first_with_its_direction():
    values = history()
    values[-30:, 1] += np.linspace(0.0, 3.0, 30)  # T30 climbs in the last window
    values[-30:, 3] -= np.linspace(0.0, 1.5, 30)  # P30 falls, less
    alerts, deviations = engine_alerts(values, np.arange(1, 81), uniform_attention(30), KEPT)
    assert [(a.symbol, a.direction) for a in alerts[:2]] == [("T30", "up"), ("P30", "down")]
    assert deviations["T30"] > 1.0 and deviations["P30"] < -0.5
    assert all(51 <= a.cycle <= 80 for a in alerts)


def test_alerts_are_catalog_phrases_only():
    values = history(seed=1)
    values[-30:, :] += np.linspace(0.0, 2.5, 30)[:, None] * np.array([1, -1, 1, -1, 1])
    alerts, _ = engine_alerts(values, np.arange(80), uniform_attention(30), KEPT)
    catalog = {sensor_alert(s.symbol, d, k) for s in SENSORS for d in DIRECTIONS for k in STRENGTHS}
    assert alerts and all(a.phrase in catalog for a in alerts)
    assert all(a.line("critical") == f"critical: {a.phrase}" for a in alerts)


def test_a_healthy_engine_raises_no_alert():
    alerts, _ = engine_alerts(history(seed=2), np.arange(80), uniform_attention(30), KEPT)
    assert alerts == []


def test_attention_decides_which_cycles_count():
    values = history(seed=3)
    values[-5:, 0] += 4.0  # a late spike in T24 ...
    spike_only = np.r_[np.zeros(25), np.full(5, 0.2)]
    elsewhere = np.r_[np.full(25, 1 / 25), np.zeros(5)]
    assert weighted_deviations(values, spike_only)[0][0] > 3.0
    assert abs(weighted_deviations(values, elsewhere)[0][0]) < MIN_DEVIATION  # ... that attention ignored


def test_short_histories_use_only_their_real_cycles():
    values = history(length=12, seed=4)
    signed, score, peak = weighted_deviations(values, uniform_attention(12))
    assert signed.shape == score.shape == peak.shape == (len(KEPT),)
    assert (peak < 12).all()


@pytest.mark.parametrize("length", range(1, MIN_HISTORY + 2))
def test_a_history_too_short_for_a_reference_raises_no_alert_and_says_why(length):
    values = history(length=length, seed=5)
    values[-max(1, length // 2):, 1] += 3.0  # T30 jumps in the later cycles
    alerts, deviations = engine_alerts(values, np.arange(1, length + 1), uniform_attention(min(length, 30)), KEPT)
    assert set(deviations) == {"T24", "T30", "T50", "P30", "Ps30"}  # the figures still have their deviations
    if length < MIN_HISTORY:
        noun = "cycle" if length == 1 else "cycles"
        assert alerts == [] and too_short(length).startswith(f"only {length} {noun} of history")
    else:
        assert alerts[0].symbol == "T30" and too_short(length) == ""


@pytest.mark.parametrize(("deviation", "strength"), [(0.6, "slight"), (-1.2, "moderate"), (2.0, "sharp"),
                                                     (-7.0, "sharp")])
def test_strength_thresholds(deviation, strength):
    assert strength_of(deviation) == strength

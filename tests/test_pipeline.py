"""Sensors -> alerts -> recommendations in one call, with the figures people look at."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from support import DRIFT_SENSOR, DRIFT_UNIT, trained, trained_rul

from seq2seq.catalog import DIRECTIONS, SENSORS, STRENGTHS, sensor_alert
from seq2seq.recommender import Recommender
from seq2seq.rul import monitor as monitor_module
from seq2seq.rul.alerts import BASELINE_CYCLES
from seq2seq.rul.cmapss import Engine, read_cmapss
from seq2seq.rul.monitor import BEYOND_CAP, EngineMonitor, beyond_training
from seq2seq.rul.windows import HEALTH_STATES, health_state
from seq2seq.serving.figures import attention_figure, deviation_figure, recommendation_figures

CATALOG = {sensor_alert(s.symbol, d, k) for s in SENSORS for d in DIRECTIONS for k in STRENGTHS}


@pytest.fixture(scope="module")
def rul_run(tmp_path_factory):
    return trained_rul(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def monitor(rul_run) -> EngineMonitor:
    return EngineMonitor.from_checkpoint(rul_run.output_dir / "best.pt")


@pytest.fixture(scope="module")
def reports(rul_run, monitor, tmp_path_factory):
    recommender = Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)
    return {engine.unit: monitor.analyse(engine, recommender) for engine in read_cmapss(rul_run.train)[:6]}


def test_report_holds_rul_health_and_attention_over_the_last_window(reports, monitor):
    for report in reports.values():
        assert report.rul >= 0 and report.health in HEALTH_STATES
        assert sum(report.health_probabilities.values()) == pytest.approx(1.0, abs=1e-5)
        assert len(report.attention) == len(report.window_cycles) == min(monitor.preprocessor.window,
                                                                         len(report.rul_trend))
        assert sum(report.attention) == pytest.approx(1.0, abs=1e-5)
        assert report.window_cycles[-1] == report.rul_trend[-1][0]


def test_alerts_are_catalog_phrases_and_name_the_drifted_sensor(reports):
    drifted = reports[DRIFT_UNIT]
    assert drifted.alerts and drifted.alerts[0].symbol == DRIFT_SENSOR and drifted.alerts[0].direction == "up"
    for report in reports.values():
        assert all(alert.phrase in CATALOG for alert in report.alerts)
        assert report.alert_lines() == [f"{report.health}: {a.phrase}" for a in report.alerts]


def test_each_alert_gets_a_recommendation_with_its_own_heatmap(reports):
    drifted = reports[DRIFT_UNIT]
    assert len(drifted.recommendations) == len(drifted.alerts)
    for alert, recommendation in zip(drifted.alerts, drifted.recommendations, strict=True):
        assert recommendation.alert == alert.phrase and recommendation.text
        figure = recommendation_figures(recommendation, words=False)[0]
        np.testing.assert_allclose(figure.axes[0].images[0].get_array(), recommendation.candidates[0].attention)


def test_without_a_translator_there_are_alerts_but_no_recommendations(rul_run, monitor):
    engine = read_cmapss(rul_run.train)[DRIFT_UNIT - 1]
    report = monitor.analyse(engine)
    assert report.alerts and report.recommendations == []


def test_a_reading_far_beyond_the_fleet_is_warned_about_and_ordinary_engines_get_no_warning(rul_run, monitor, reports):
    """A typo (1e6 for a temperature near 640) moved a real engine from critical to degrading without a word."""
    assert not [w for report in reports.values() for w in report.warnings if w.startswith("sensor ")]
    engine = read_cmapss(rul_run.train)[0]
    kept = monitor.preprocessor.kept_sensors[0]
    engine.sensors[5, kept - 1] = 1e6  # one cycle of one kept sensor
    [warning] = monitor.analyse(engine).warnings
    symbol = SENSORS[kept - 1].symbol
    assert warning.startswith(f"sensor {symbol} reads 1e+06 at cycle {engine.cycles[5]}, ")
    assert "training standard deviations from the fleet's mean: a faulty reading?" in warning


def test_a_history_starting_past_its_reference_cycles_is_warned_about(rul_run, monitor):
    """FD001 engine 1 from cycle 140 called its three sharp drifts moderate: its first cycles were worn already."""
    engine = read_cmapss(rul_run.train)[0]
    for start, warned in ((0, False), (BASELINE_CYCLES - 1, False), (BASELINE_CYCLES, True)):  # cycle start + 1
        late = Engine(engine.unit, engine.cycles[start:], engine.settings[start:], engine.sensors[start:])
        said = [w for w in monitor.analyse(late).warnings if w.startswith("the history starts at cycle")]
        assert said == ([f"the history starts at cycle {start + 1}: the alerts compare the last cycles with its first "
                         "ones, which may be worn already, so the alerts may read weaker than the wear is"]
                        if warned else [])


def test_a_rul_well_past_the_longest_the_model_learned_is_warned_about(rul_run, monitor, reports, monkeypatch):
    """An FD001 engine saved with whole-number readings read "RUL 157 cycles, healthy" (cap 125) at 46, unwarned."""
    assert not [w for report in reports.values() for w in report.warnings if "beyond the longest" in w]
    cap = monitor.config.rul_cap
    assert beyond_training(BEYOND_CAP * cap, monitor.config) == []
    predicted = monitor_module.predict
    monkeypatch.setattr(monitor_module, "predict", lambda model, x, mask: dataclasses.replace(
        predicted(model, x, mask), rul=torch.full((x.shape[0],), BEYOND_CAP * cap + 1)))  # (L,)
    warnings = monitor.analyse(read_cmapss(rul_run.train)[0]).warnings
    assert f"the predicted RUL of {BEYOND_CAP * cap + 1:.0f} cycles is beyond the longest the model learned ({cap}): " \
           "these readings are unlike its training data" in " | ".join(warnings)


@pytest.mark.parametrize(("kept", "words"), [
    ([*range(20), *range(170, 182)], "cycles 21-170 are missing from the history: the model reads the cycles either"),
    ([*range(20), *range(21, 40)], "cycle 21 is missing from the history"),
    ([*range(10), *range(12, 20), *range(25, 40), *range(41, 50)], "cycles 11-12 and 2 more gaps are missing"),
], ids=["one-long-gap", "one-cycle", "three-gaps"])
def test_a_history_that_skips_cycles_is_warned_about(rul_run, monitor, kept, words):
    """Cycles 1-20 then 181-192 of an FD001 engine were read as 32 cycles of wear, the RUL given without a word."""
    engine = read_cmapss(rul_run.train)[0]
    cut = Engine(engine.unit, engine.cycles[kept], engine.settings[kept], engine.sensors[kept])
    [warning] = [w for w in monitor.analyse(cut).warnings if "missing" in w]
    assert warning.startswith(words)
    assert not [w for w in monitor.analyse(engine).warnings if "missing" in w]


def test_a_long_history_assessed_in_chunks_gives_the_report_of_one_piece_and_tells_its_progress(rul_run, monitor,
                                                                                                   monkeypatch):
    """A 50,000-cycle history took 1.1 GB with every window built at once, and said nothing for 20 s."""
    engine = read_cmapss(rul_run.train)[0]
    times = 3 * 512 // len(engine.cycles) + 1  # past three chunks of 512
    long = Engine(engine.unit, np.arange(1, times * len(engine.cycles) + 1), np.tile(engine.settings, (times, 1)),
                  np.tile(engine.sensors, (times, 1)))
    monkeypatch.setattr(monitor_module, "CHUNK_WINDOWS", 10**9)
    whole = monitor.analyse(long)
    monkeypatch.setattr(monitor_module, "CHUNK_WINDOWS", 512)
    told = []
    chunked = monitor.analyse(long, progress=told.append)
    assert chunked == whole
    assert told == [512, 512, 512, len(long.cycles) - 3 * 512]


@pytest.mark.parametrize(("called", "rul", "shown", "warned"), [
    ("degrading", 27.0, "critical", True), ("critical", 33.0, "critical", True),
    ("degrading", 99.1, "degrading", True), ("healthy", 120.0, "healthy", False),
    ("critical", 30.0, "critical", False), ("degrading", 30.5, "degrading", False),
])
def test_the_health_shown_is_the_more_severe_of_the_call_and_the_rul_band_and_a_disagreement_is_said(
        monitor, called, rul, shown, warned):
    """Bands of the default config: critical at RUL <= 30, degrading at <= 80."""
    health, warnings = monitor.health(HEALTH_STATES.index(called), rul)
    assert health == shown and bool(warnings) == warned
    if warned:
        assert warnings == [f"the health call ({called}) and the RUL of {rul:.0f} cycles "
                            f"({HEALTH_STATES[health_state(rul, monitor.config)]} band) disagree: shown as {shown}, "
                            "the more severe"]


def test_every_report_s_health_agrees_with_its_rul_band_or_is_more_severe_and_says_so(reports, monitor):
    for report in reports.values():
        band = health_state(report.rul, monitor.config)
        assert HEALTH_STATES.index(report.health) >= band
        said = [w for w in report.warnings if w.startswith("the health call")]
        assert bool(said) == (HEALTH_STATES.index(report.health) != band or
                              max(report.health_probabilities, key=report.health_probabilities.get) != report.health)


def test_figures_show_the_attention_the_trend_and_the_deviations(reports):
    report = reports[DRIFT_UNIT]
    trend_axes, window_axes, sensor_axes = attention_figure(report).axes
    assert len(trend_axes.lines[0].get_xdata()) == len(report.rul_trend)
    heights = [bar.get_height() for bar in window_axes.patches]
    np.testing.assert_allclose(heights, report.attention)
    assert [line.get_label() for line in sensor_axes.lines] == [a.symbol for a in report.alerts]
    bars = deviation_figure(report).axes[0]
    assert [t.get_text() for t in bars.get_yticklabels()] == list(report.deviations)

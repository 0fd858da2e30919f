"""Hostile sensor values: a number the RUL model cannot hold is refused where it is read, naming file,
line and column; one that overflows when scaled is refused naming engine, cycle and sensor; and a
prediction that is not finite is an error, never a health state (NaN used to read as "healthy")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from support import assert_one_line_error, file_states, run_cli, trained_rul

from seq2seq.config import RulConfig
from seq2seq.errors import DataError
from seq2seq.rul.cmapss import Engine, read_cmapss, write_cmapss
from seq2seq.rul.model import build_rul_model
from seq2seq.rul.monitor import EngineMonitor
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.synthetic import synthetic_engines

SENSOR_COLUMN = 12  # sensor 7 (P30), which varies on synthetic engines
TINY = RulConfig(window=8, conv_channels=4, lstm_hidden=4, attention_hidden=4, dropout=0.0)


def engines_file(tmp_path, value: str | None = None, line: int = 5, column: int = SENSOR_COLUMN):
    """Two synthetic engines in C-MAPSS layout; ``value`` replaces one field of ``line``."""
    path = tmp_path / "engines.txt"
    write_cmapss(path, synthetic_engines(2, seed=4, min_life=40, max_life=60))
    if value is not None:
        lines = path.read_text(encoding="utf-8").splitlines()
        fields = lines[line - 1].split()
        fields[column - 1] = value
        lines[line - 1] = " ".join(fields)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e39", "3.5e38", "1e999"])
def test_a_reading_beyond_float32_is_refused_naming_file_line_and_column(tmp_path, value):
    path = engines_file(tmp_path, value)
    with pytest.raises(DataError) as error:
        read_cmapss(path)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: line 5, column {SENSOR_COLUMN} (sensor 7, P30): "), message


@pytest.mark.parametrize("value", ["1_589.70", "1_0", "\u0661\u0662", "\uff11\uff12"])  # separators, other digits
def test_a_number_only_python_reads_is_not_a_reading(tmp_path, value):
    path = engines_file(tmp_path, value)
    with pytest.raises(DataError, match=f"line 5, column {SENSOR_COLUMN} \\(sensor 7, P30\\): not a number: "):
        read_cmapss(path)


def test_the_largest_float32_reading_is_read(tmp_path):
    path = engines_file(tmp_path, "3.4e38")
    assert read_cmapss(path)[0].sensors[4, 6] == pytest.approx(3.4e38)


@pytest.mark.parametrize("value", [3.4e38, -3.4e38, 2e38])
def test_a_reading_that_overflows_when_scaled_is_refused_naming_engine_cycle_and_sensor(value):
    engines = synthetic_engines(3, seed=4, min_life=40, max_life=60)
    preprocessor = Preprocessor.fit(engines, TINY)
    column = int(np.argmin(preprocessor.std))
    assert abs(value - preprocessor.mean[column]) / preprocessor.std[column] > float(np.finfo(np.float32).max)
    sensor, broken = preprocessor.kept_sensors[column], engines[1]
    broken.sensors[3, sensor - 1] = value
    with pytest.raises(DataError, match=f"engine {broken.unit}: cycle {broken.cycles[3]}: sensor {sensor} "):
        preprocessor.transform(broken)


def test_a_prediction_that_is_not_finite_is_an_error_not_a_health_state():
    engines = synthetic_engines(3, seed=4, min_life=40, max_life=60)
    preprocessor = Preprocessor.fit(engines, TINY)
    model = build_rul_model(TINY, preprocessor.n_features)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(float("nan"))
    monitor = EngineMonitor(model, TINY, preprocessor)
    with pytest.raises(DataError, match="not a finite number") as error:
        monitor.analyse(engines[0])
    assert "healthy" not in str(error.value)


def test_a_programs_engine_of_text_readings_is_refused_as_it_is_made():
    """It was taken, and failed in numpy's isfinite once analysed."""
    with pytest.raises(DataError, match="engine 1: settings must be numbers, got str"):
        Engine(1, [1, 2], [["a"] * 3] * 2, [[0.5] * 21] * 2)
    with pytest.raises(DataError, match="engine 1: sensors must be numbers, got object"):
        Engine(1, [1, 2], [[0.0] * 3] * 2, [[None] * 21] * 2)


@pytest.mark.parametrize(("engine", "recommender", "message"), [
    (None, None, "engine must be a seq2seq.rul.cmapss.Engine, got NoneType"),
    ([1, 2, 3], None, "engine must be a seq2seq.rul.cmapss.Engine, got list"),
    ("engine", "x", "engine must be a seq2seq.rul.cmapss.Engine, got str"),
    (0, "x", "recommender must be a seq2seq.recommender.Recommender or None, got str"),
])
def test_analyse_given_what_is_no_engine_or_translator_says_which(engine, recommender, message):
    """A program's None failed on a missing attribute ``sensors``, a string for the translator on ``recommend``."""
    engines = synthetic_engines(3, seed=4, min_life=40, max_life=60)
    preprocessor = Preprocessor.fit(engines, TINY)
    monitor = EngineMonitor(build_rul_model(TINY, preprocessor.n_features), TINY, preprocessor)
    with pytest.raises(TypeError, match=message.replace(".", r"\.")):
        monitor.analyse(engines[0] if engine == 0 else engine, recommender)


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf", "1e308"])
@pytest.mark.parametrize("command", ["alerts", "evaluate"])
def test_cli_refuses_an_impossible_reading_in_one_line_and_changes_no_file(tmp_path, tmp_path_factory, value,
                                                                           command):
    run = trained_rul(tmp_path_factory.getbasetemp())
    data = tmp_path / "test.txt"
    lines = run.test.read_text(encoding="utf-8").splitlines()
    fields = lines[-1].split()
    fields[SENSOR_COLUMN - 1] = value
    data.write_text("\n".join([*lines[:-1], " ".join(fields)]) + "\n", encoding="utf-8")
    before = file_states(data, run.rul, run.output_dir / "best.pt")
    extra = ["--rul", str(run.rul)] if command == "evaluate" else []
    option = "--test" if command == "evaluate" else "--data"
    result = run_cli("rul", command, "--model", str(run.output_dir / "best.pt"), option, str(data), *extra)
    assert_one_line_error(result, f"{data}: line {len(lines)}, column {SENSOR_COLUMN}")
    assert "healthy" not in result.stdout and "nan" not in result.stdout.lower()
    assert file_states(data, run.rul, run.output_dir / "best.pt") == before


def test_training_engines_none_longer_than_the_critical_band_are_refused_before_any_training(tmp_path):
    """100 engines of 1 cycle trained to "valid RMSE 0.00", and the model called a fresh engine healthy at RUL 0."""
    engines = synthetic_engines(30, seed=3)
    short = [replace(e, cycles=e.cycles[:1], settings=e.settings[:1], sensors=e.sensors[:1]) for e in engines]
    write_cmapss(tmp_path / "short.txt", short)
    result = run_cli("rul", "train", "--data", str(tmp_path / "short.txt"), "--output-dir", str(tmp_path / "run"))
    assert_one_line_error(result, "the longest engine has 1 cycle, no more than critical_below (30)")
    assert not (tmp_path / "run").exists()

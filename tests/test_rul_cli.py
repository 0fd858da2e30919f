"""``seq2seq rul train | evaluate | alerts`` end to end on synthetic engines."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from support import (
    DRIFT_SENSOR,
    DRIFT_UNIT,
    RUL_CONFIG,
    CliResult,
    assert_one_line_error,
    run_cli,
    trained,
    trained_rul,
    training_threads,
)
from test_checkpoint import Filling

from seq2seq import writing
from seq2seq.catalog import sensor
from seq2seq.cli.rul import advice_line
from seq2seq.recommender import Candidate, Recommendation
from seq2seq.rul import train as rul_train
from seq2seq.trust import NOT_ADVICE, UNLIKE_HISTORY


@pytest.fixture(scope="module")
def rul_run(tmp_path_factory):
    return trained_rul(tmp_path_factory.getbasetemp())


def test_train_writes_checkpoints_metrics_and_a_json_summary(rul_run):
    summary = json.loads(rul_run.result.stdout_lines[-1]) if rul_run.result.stdout else None
    for name in ("best.pt", "last.pt", "metrics.jsonl"):
        assert (rul_run.output_dir / name).is_file()
    if summary is not None:  # the session may have trained it for another module already
        assert summary["best_rmse"] > 0 and summary["parameters"] > 0


@pytest.mark.slow
def test_train_defaults_to_synthetic_engines(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 1}}), encoding="utf-8")
    result = run_cli("rul", "train", "--output-dir", str(tmp_path / "run"), "--config", str(config))
    assert result.status == 0, result.stderr
    assert "synthetic engines" in result.stderr and (tmp_path / "run" / "best.pt").is_file()


def test_evaluate_json_scores_one_prediction_per_test_engine(rul_run):
    result = run_cli("rul", "evaluate", "--model", str(rul_run.output_dir / "best.pt"), "--test", str(rul_run.test),
                     "--rul", str(rul_run.rul), "--json")
    assert result.status == 0, result.stderr
    scores = json.loads(result.stdout)
    assert scores["n_engines"] == 10 and scores["rmse"] > 0 and scores["score"] > 0


def test_evaluate_pairs_the_true_lives_with_engines_in_unit_order_whatever_the_test_files_order(rul_run, tmp_path):
    """RUL_FD00x.txt lists lives in unit order; a test file with its engines reversed was scored on wrong pairs."""
    lines = rul_run.test.read_text(encoding="utf-8").splitlines()
    reversed_test = tmp_path / "test_reversed.txt"
    units = sorted({line.split()[0] for line in lines}, key=int, reverse=True)
    reversed_test.write_text("".join(line + "\n" for unit in units for line in lines if line.split()[0] == unit),
                             encoding="utf-8")
    scores = [json.loads(run_cli("rul", "evaluate", "--model", str(rul_run.output_dir / "best.pt"), "--test",
                                 str(test), "--rul", str(rul_run.rul), "--json").stdout) for test in (rul_run.test,
                                                                                                   reversed_test)]
    assert scores[0] == scores[1]


def test_evaluate_gives_each_unit_its_own_line_of_the_rul_file_when_the_test_file_skips_units(rul_run, tmp_path):
    """Units 1 and 3 were scored against lines 1 and 2 without a word."""
    lines = rul_run.test.read_text(encoding="utf-8").splitlines()
    lives = rul_run.rul.read_text(encoding="utf-8").split()
    kept = [line for line in lines if line.split()[0] in ("1", "3")]
    (tmp_path / "test13.txt").write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    (tmp_path / "test12.txt").write_text("".join(line.replace("3", "2", 1) + "\n" if line.split()[0] == "3" else
                                                 line + "\n" for line in kept), encoding="utf-8")  # unit 3 as unit 2
    (tmp_path / "rul12.txt").write_text(f"{lives[0]}\n{lives[2]}\n", encoding="utf-8")

    def evaluate(test: str, rul: Path) -> CliResult:
        return run_cli("rul", "evaluate", "--model", str(rul_run.output_dir / "best.pt"), "--test",
                       str(tmp_path / test), "--rul", str(rul), "--json")

    subset = evaluate("test13.txt", rul_run.rul)
    assert json.loads(subset.stdout) == json.loads(evaluate("test12.txt", tmp_path / "rul12.txt").stdout)
    # a subset is scored, and said so: another test set's truth would be scored without a word otherwise
    assert subset.stderr.strip() == (f"note: {rul_run.rul}: 2 of its {len(lives)} lines used, one per engine of "
                                     f"{tmp_path / 'test13.txt'} (is it this test file's truth?)")
    assert evaluate("test12.txt", tmp_path / "rul12.txt").stderr == ""
    assert_one_line_error(evaluate("test13.txt", tmp_path / "rul12.txt"), "2 lines, and none for unit 3")


def test_evaluate_warns_of_engines_whose_histories_skip_cycles_and_still_scores_them(rul_run, tmp_path):
    """A gap was read as successive cycles without a word: 1-20 then 181-192 scored as 32 cycles of wear."""
    lines = rul_run.test.read_text(encoding="utf-8").splitlines()

    def missing(line: str) -> bool:
        unit, cycle = map(int, line.split()[:2])
        return (unit == 1 and 3 <= cycle <= 5) or (unit == 2 and cycle == 2)

    gappy = tmp_path / "test_gappy.txt"
    gappy.write_text("".join(line + "\n" for line in lines if not missing(line)), encoding="utf-8")
    result = run_cli("rul", "evaluate", "--model", str(rul_run.output_dir / "best.pt"), "--test", str(gappy),
                     "--rul", str(rul_run.rul), "--json")
    assert result.status == 0, result.stderr
    assert json.loads(result.stdout)["n_engines"] == 10
    assert result.stderr.strip().splitlines() == [
        f"warning: {gappy}: units 1..2 skip cycles (unit 1: cycles 3-5 are missing from the history): the model reads "
        "the cycles either side of a gap as successive, so their RUL may be wrong; scored as given"]


def test_evaluate_json_is_strict_json_when_the_score_passes_float_range(rul_run, tmp_path):
    """A true life of 1e30 cycles, uncapped, overflows the PHM08 score: null, never Infinity."""
    lives = rul_run.rul.read_text(encoding="utf-8").split()
    huge = tmp_path / "rul_huge.txt"
    huge.write_text("\n".join(["1e30", *lives[1:]]) + "\n", encoding="utf-8")
    result = run_cli("rul", "evaluate", "--model", str(rul_run.output_dir / "best.pt"), "--test", str(rul_run.test),
                     "--rul", str(huge), "--cap", "0", "--json")
    assert result.status == 0, result.stderr
    scores = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"not strict JSON: {name}"))
    assert scores["score"] is None and scores["rmse"] > 1e4


def test_evaluate_scores_against_the_protocol_s_cap_whatever_the_model_trained_with(rul_run):
    def scored(*cap: str) -> dict:
        result = run_cli("rul", "evaluate", "--model", str(rul_run.output_dir / "best.pt"), "--test",
                         str(rul_run.test), "--rul", str(rul_run.rul), "--json", *cap)
        assert result.status == 0, result.stderr
        return json.loads(result.stdout)

    true = [float(line) for line in rul_run.rul.read_text().split()]
    default, uncapped, low = scored(), scored("--cap", "0"), scored("--cap", "20")
    assert default["cap"] == 125 and uncapped["cap"] == 0 and low["cap"] == 20
    assert (default["rmse"] == uncapped["rmse"]) == (max(true) <= 125)  # the cap is applied to the truth
    assert low["rmse"] != default["rmse"] and min(true) < 20 < max(true)
    bad = run_cli("rul", "evaluate", "--model", str(rul_run.output_dir / "best.pt"), "--test", str(rul_run.test),
                  "--rul", str(rul_run.rul), "--cap", "-1")
    assert bad.status != 0 and "--cap" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("beam", ["0", "51"])
def test_alerts_blame_a_beam_out_of_range_on_its_flag_before_loading_anything(tmp_path, beam):
    result = run_cli("rul", "alerts", "--model", str(tmp_path / "never-read.pt"), "--data", str(tmp_path / "x.txt"),
                     "--translator", str(tmp_path / "never-read-either.pt"), "--beam-size", beam)
    assert_one_line_error(result, f"argument --beam-size: must be in [1, 50], got {beam}")


def test_alerts_json_lists_engines_with_recommendations_in_alert_order(rul_run, tmp_path_factory):
    translator = trained(tmp_path_factory.getbasetemp()).best
    result = run_cli("rul", "alerts", "--model", str(rul_run.output_dir / "best.pt"), "--data", str(rul_run.train),
                     "--translator", str(translator), "--json")
    assert result.status == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["engine"] for row in rows] == list(range(1, 31))
    for row in rows:
        assert set(row) == {"engine", "rul", "health", "alerts", "alert_cycles", "recommendations", "judgements",
                            "note", "warnings"}
        assert row["note"] == "" and row["warnings"] == []  # histories long enough to be judged, readings plausible
        assert len(row["recommendations"]) == len(row["judgements"]) == len(row["alerts"]) == len(row["alert_cycles"])
        assert all({"recommendation", "trust", "verdict", "warning"} <= set(j) for j in row["judgements"])
        assert [j["recommendation"] for j in row["judgements"]] == row["recommendations"]
        assert all(line.startswith(f"{row['health']}: ") for line in row["alerts"])
    assert sensor(DRIFT_SENSOR).phrase in rows[DRIFT_UNIT - 1]["alerts"][0]


def test_an_engine_whose_readings_cannot_be_scaled_gets_an_error_and_the_others_their_alerts(rul_run, tmp_path):
    """A reading whose z-score overflows stopped the whole job, and with --json nothing was printed for any engine."""
    from seq2seq.rul.cmapss import read_cmapss, write_cmapss
    from seq2seq.rul.monitor import EngineMonitor
    preprocessor = EngineMonitor.from_checkpoint(rul_run.output_dir / "best.pt").preprocessor
    sensor_number = preprocessor.kept_sensors[int(np.argmin(preprocessor.std))]
    engines = read_cmapss(rul_run.test)
    engines[1].sensors[-1, sensor_number - 1] = 3.4e38  # within float32, but not once scaled
    data = tmp_path / "test.txt"
    write_cmapss(data, engines)
    result = run_cli("rul", "alerts", "--model", str(rul_run.output_dir / "best.pt"), "--data", str(data), "--json")
    assert result.status == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["engine"] for row in rows] == [engine.unit for engine in engines]  # every engine, in order
    broken = rows[1]
    assert set(broken) == {"engine", "error"} and "too far beyond the training range" in broken["error"]
    assert all("health" in row for k, row in enumerate(rows) if k != 1)
    assert f"warning: {data}: engine {engines[1].unit}: " in result.stderr


def test_alerts_for_one_engine_as_text(rul_run):
    result = run_cli("rul", "alerts", "--model", str(rul_run.output_dir / "best.pt"), "--data", str(rul_run.train),
                     "--engine", str(DRIFT_UNIT))
    assert result.status == 0, result.stderr
    assert result.stdout_lines[0].startswith(f"engine {DRIFT_UNIT}: RUL ")
    assert sensor(DRIFT_SENSOR).phrase in result.stdout_lines[1]


def test_an_out_of_scope_recommendation_reads_as_a_guess_and_the_others_as_advice_with_their_verdict():
    answer = Candidate("check fan", -1.0, ["check"], torch.ones(1, 1), -1.0)
    guess = Recommendation("kitchen sink blocked", ["k"], [answer], trust=0.13, verdict="out-of-scope")
    expected = f"OUT OF SCOPE, {UNLIKE_HISTORY}; {NOT_ADVICE}: \"check fan\"  [out-of-scope, trust 0.13]"
    assert advice_line(guess) == expected
    advice = replace(guess, trust=0.91, verdict="confident")
    assert advice_line(advice) == "check fan  [confident, trust 0.91]"
    assert advice_line(Recommendation("", [], warning="empty alert")) == "(no recommendation)  [empty alert]"


@pytest.mark.parametrize("fault", ["too few engines", "no sensor varies"])
def test_training_engines_no_model_can_learn_from_are_refused_naming_the_file_before_the_run_starts(tmp_path, fault):
    """The messages named neither the file nor, for a run to --overwrite, left the earlier run alone."""
    from seq2seq.rul.cmapss import write_cmapss
    from seq2seq.rul.synthetic import synthetic_engines
    engines = synthetic_engines(3 if fault == "too few engines" else 30, seed=2, min_life=40, max_life=60)
    if fault == "no sensor varies":
        for engine in engines:
            engine.sensors[:] = 1.0
    data = tmp_path / "fleet.txt"
    write_cmapss(data, engines)
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.pt").write_bytes(b"an earlier run")
    result = run_cli("rul", "train", "--data", str(data), "--output-dir", str(run), "--overwrite", "--epochs", "1")
    words = "3 engines, and training needs more than validation_engines (20)" if fault == "too few engines" \
        else "no sensor varies on the training engines"
    assert_one_line_error(result, f"{data}: {words}")
    assert (run / "best.pt").read_bytes() == b"an earlier run"


@pytest.mark.parametrize("case", ["unknown engine", "bad data file", "corrupt model"])
def test_bad_input_is_one_line_and_exit_2(rul_run, tmp_path, case):
    model, data = str(rul_run.output_dir / "best.pt"), str(rul_run.train)
    extra = []
    if case == "unknown engine":
        extra = ["--engine", "999"]
    elif case == "bad data file":
        data = str(tmp_path / "bad.txt")
        (tmp_path / "bad.txt").write_text("1 1 0.1 0.2\n", encoding="utf-8")
    else:
        model = str(tmp_path / "corrupt.pt")
        (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    result = run_cli("rul", "alerts", "--model", model, "--data", data, *extra)
    assert result.status == 2
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith("seq2seq: error: ")


def test_a_small_model_fits_synthetic_engines_far_better_than_the_mean(rul_run):
    """The held-out validation engines scored at 30/50/70/90 % of their lives (the validation protocol):
    RMSE well below always answering the training mean."""
    from seq2seq.rul.cmapss import read_cmapss
    from seq2seq.rul.evaluate import evaluate_windows, rmse
    from seq2seq.rul.monitor import EngineMonitor
    from seq2seq.rul.runs import split_engines
    from seq2seq.rul.windows import training_set, truncated_windows

    monitor = EngineMonitor.from_checkpoint(rul_run.output_dir / "best.pt")
    train, valid = split_engines(read_cmapss(rul_run.train), monitor.config)
    held_out = truncated_windows(valid, monitor.preprocessor, monitor.config)
    mean = training_set(train, monitor.preprocessor, monitor.config).rul.mean()
    assert evaluate_windows(monitor.model, held_out).rmse < 0.5 * rmse(mean.expand_as(held_out.rul), held_out.rul)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA (CI has none)")
def test_overwrite_onto_a_device_the_machine_lacks_is_refused_before_the_earlier_run_is_deleted(rul_run, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "best.pt").write_bytes(b"an earlier run")
    result = run_cli("rul", "train", "--data", str(rul_run.train), "--output-dir", str(run), "--config",
                     str(rul_run.config), "--epochs", "1", "--overwrite", "--device", "cuda")
    assert_one_line_error(result, "--device cuda: no CUDA device is available")
    assert (run / "best.pt").read_bytes() == b"an earlier run"
    result = run_cli("rul", "train", "--data", str(rul_run.train), "--output-dir", str(tmp_path / "new"), "--config",
                     str(rul_run.config), "--epochs", "1", "--device", "cuda")
    assert_one_line_error(result, "--device cuda")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("where", ["notes.txt", "notes.txt/run"])
def test_an_output_dir_that_is_or_lies_under_a_file_is_refused_before_any_log_line(rul_run, tmp_path, where):
    (tmp_path / "notes.txt").write_text("keep me\n", encoding="utf-8")
    result = run_cli("rul", "train", "--data", str(rul_run.train), "--output-dir", str(tmp_path / where), "--config",
                     str(rul_run.config), "--epochs", "1")
    assert_one_line_error(result, f"{tmp_path / 'notes.txt'}: is a file, but {tmp_path / where} needs it to be a "
                                  "folder")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "keep me\n"


# A run's folder: never replaced silently; --resume, --overwrite


def test_a_second_run_into_the_same_folder_is_refused_until_told_to_resume_or_overwrite(rul_run, tmp_path):
    first = run_cli("rul", "train", "--data", str(rul_run.train), "--output-dir", str(tmp_path / "run"), "--config",
                    str(rul_run.config), "--epochs", "1", "--device", "cpu")
    assert first.status == 0, first.stderr
    kept = (tmp_path / "run" / "best.pt").read_bytes()
    again = ["rul", "train", "--data", str(rul_run.train), "--output-dir", str(tmp_path / "run"), "--config",
             str(rul_run.config), "--epochs", "1", "--device", "cpu"]
    assert_one_line_error(run_cli(*again), f"{tmp_path / 'run'} already holds a training run (best.pt)", "--resume",
                          "--overwrite")
    assert (tmp_path / "run" / "best.pt").read_bytes() == kept
    assert_one_line_error(run_cli(*again, "--resume", "--overwrite"), "--resume and --overwrite exclude each other")
    assert_one_line_error(run_cli(*again[:5], str(tmp_path / "empty"), *again[6:], "--resume"),
                          f"--resume: nothing to resume in {tmp_path / 'empty'} (no last.pt)")
    replaced = run_cli(*again, "--overwrite")
    assert replaced.status == 0, replaced.stderr
    assert [json.loads(line)["epoch"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()] == [1]


def test_a_disk_that_fills_mid_run_is_one_line_naming_the_file_and_resume_goes_on_from_the_last_whole_epoch(
        rul_run, tmp_path, monkeypatch):
    fdopen, opened = os.fdopen, []

    def filling(fd, mode):  # epoch 1's best.pt and last.pt fit; then the disk is full
        opened.append(fd)
        return fdopen(fd, mode) if len(opened) <= 2 else Filling(fdopen(fd, mode), 0)

    command = ["rul", "train", "--data", str(rul_run.train), "--output-dir", str(tmp_path / "run"), "--config",
               str(rul_run.config), "--epochs", "3", "--device", "cpu"]
    monkeypatch.setattr(writing.os, "fdopen", filling)
    failed = run_cli(*command)
    monkeypatch.undo()
    last_line = failed.stderr.rstrip("\n").rsplit("\n", 1)[-1]  # after the run's log lines
    assert failed.status == 2 and "Traceback" not in failed.stderr, failed.stderr
    assert last_line.startswith(f"seq2seq: error: {tmp_path / 'run'}/") and last_line.endswith(
        ": cannot write (No space left on device)"), last_line
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["best.pt", "last.pt", "metrics.jsonl"]  # no temp
    resumed = run_cli(*command, "--resume")
    assert resumed.status == 0, resumed.stderr
    epochs = [json.loads(line)["epoch"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2, 3]  # epoch 2, cut short by the full disk, trained again once


def test_a_recipe_cut_short_by_ctrl_c_resumes_keeping_its_finished_members(rul_run, tmp_path, monkeypatch):
    config = tmp_path / "members.json"
    config.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 2, "members": 2}}), encoding="utf-8")
    argv = ["rul", "train", "--data", str(rul_run.train), "--config", str(config), "--device", "cpu", "--output-dir"]
    with training_threads():
        whole = run_cli(*argv, str(tmp_path / "whole"))
        assert whole.status == 0, whole.stderr
        real, calls = rul_train._train_epoch, []

        def cut(*args, **kwargs):  # Ctrl-C in the second member's second epoch
            calls.append(1)
            if len(calls) == 4:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(rul_train, "_train_epoch", cut)
            stopped = run_cli(*argv, str(tmp_path / "cut"))
        assert stopped.status == 130
        assert stopped.stderr.splitlines()[-1] == "seq2seq: interrupted; continue with --resume"
        first = (tmp_path / "cut" / "member-1" / "last.pt").stat().st_mtime_ns
        assert not (tmp_path / "cut" / "best.pt").exists()
        resumed = run_cli(*argv, str(tmp_path / "cut"), "--resume")
    assert resumed.status == 0, resumed.stderr
    assert "member 1/2 (seed 1) had finished" in resumed.stderr and "after epoch 1" in resumed.stderr
    assert (tmp_path / "cut" / "member-1" / "last.pt").stat().st_mtime_ns == first  # not trained again
    whole_weights = torch.load(tmp_path / "whole" / "best.pt", weights_only=True)
    cut_weights = torch.load(tmp_path / "cut" / "best.pt", weights_only=True)
    assert same(whole_weights["weights"], cut_weights["weights"])  # the same ensemble as the run never stopped
    assert same(whole_weights["ensemble_weights"], cut_weights["ensemble_weights"])
    assert json.loads(resumed.stdout_lines[-1])["epochs"] == 4
    config.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 2, "members": 2, "window": 20}}))
    other = run_cli(*argv, str(tmp_path / "cut"), "--resume")  # finished members, too, must be of this recipe
    assert other.status == 2 and "member-1/best.pt was trained with window 30, not 20" in other.error_lines[-1]


def test_resume_asking_fewer_members_than_the_run_trained_is_refused_and_writes_nothing(rul_run, tmp_path):
    """The ensemble would have been written without its last member's run, without a word."""
    config = tmp_path / "members.json"
    argv = ["rul", "train", "--data", str(rul_run.train), "--config", str(config), "--device", "cpu", "--output-dir",
            str(tmp_path / "run")]
    config.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 1, "members": 3}}), encoding="utf-8")
    with training_threads():
        assert run_cli(*argv).status == 0
    (tmp_path / "run" / "best.pt").unlink()  # as if cut short before the ensemble was written
    before = {path: path.stat().st_mtime_ns for path in (tmp_path / "run").rglob("*")}
    config.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 1, "members": 2}}), encoding="utf-8")
    assert_one_line_error(run_cli(*argv, "--resume"), f"--resume: {tmp_path / 'run' / 'member-3' / 'last.pt'} is a "
                          "member of this run, which members 2 leaves out")
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "run").rglob("*")} == before


def same(a, b) -> bool:
    """Whether two state dicts (or lists of them) hold the same tensors under the same names."""
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)

"""The command line end to end: train, translate and evaluate on a tiny model, and every user error
as one ``seq2seq: error:`` line with exit status 2."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from support import (
    EPOCHS,
    MAX_SOURCE_LENGTH,
    TINY_PAIRS,
    TinyRun,
    assert_one_line_error,
    file_states,
    run_cli,
    tiny_data,
    train_args,
    trained,
    training_threads,
    tsv,
)

from seq2seq import cli
from seq2seq.attention import ATTENTION_NAMES
from seq2seq.corpus import read_parallel
from seq2seq.evaluate import score_corpus, selective_scores
from seq2seq.files import MAX_LINE_BYTES, held_folder
from seq2seq.recommender import Candidate, Recommender
from seq2seq.serving.layout import n_best_line
from seq2seq.train import Trainer
from seq2seq.trust import NOT_ADVICE, UNLIKE_HISTORY

ROOT = Path(__file__).resolve().parents[1]
ALERTS = ["pump vibration high", "fan speed low", "valve stuck closed", "oil level low", "motor current high"]
LONG_ALERT = " ".join(["compressor temperature high"] * 4)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> TinyRun:
    return trained(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def recommender(run) -> Recommender:
    return Recommender.from_checkpoint(run.best)


@pytest.fixture(scope="module")
def resumed(run, tmp_path_factory) -> dict[str, dict]:
    """The run's training, interrupted after one epoch and resumed to the end in another folder."""
    output_dir = tmp_path_factory.mktemp("resumed")
    with training_threads():  # as the shared run was trained
        first = run_cli(*train_args(run.data, output_dir, "--epochs", "1"))
        second = run_cli(*train_args(run.data, output_dir, "--resume"))
    assert first.status == 0 and second.status == 0, first.stderr + second.stderr
    return {"output_dir": output_dir, "first": json.loads(first.stdout), "second": json.loads(second.stdout),
            "log": second.stderr}


def translate(run: TinyRun, lines: bytes, *options: str):
    return run_cli("translate", "--model", str(run.best), *options, stdin=lines)


def tiny_train_command(tmp_path: Path, run: TinyRun, train: Path, *options: str) -> list[str]:
    """One epoch on ``train`` (also the dev file unless ``options`` name one), tiny model."""
    dev = [] if "--dev" in options else ["--dev", str(train)]
    return ["train", "--train", str(train), *dev, "--config", str(run.data.config),
            "--output-dir", str(tmp_path / "out"), "--device", "cpu", "--epochs", "1", *options]


# train


def test_the_seq2seq_program_runs_main_with_what_it_imported_frozen(monkeypatch):
    frozen = []
    monkeypatch.setattr(cli, "main", lambda: frozen.append(gc.get_freeze_count()) or 0)
    interrupt = signal.getsignal(signal.SIGINT)
    try:
        assert cli.command() == 0
    finally:
        gc.unfreeze()  # this test process goes on
        signal.signal(signal.SIGINT, interrupt)  # which the program, its work done, ignores
    assert frozen[0] > 10_000  # torch alone holds more objects
    assert 'seq2seq = "seq2seq.cli:command"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # the script
    main_module = (Path(cli.__file__).parents[1] / "__main__.py").read_text(encoding="utf-8")
    assert "SystemExit(command())" in main_module


def test_train_writes_best_last_and_metrics_and_prints_a_json_summary(run):
    assert run.best.is_file() and run.last.is_file()
    records = [json.loads(line) for line in (run.output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [record["epoch"] for record in records] == list(range(1, EPOCHS + 1))
    assert all(isinstance(record["dev_bleu"], float) for record in records)
    summary = json.loads(run.result.stdout)
    assert summary["output_dir"] == str(run.output_dir)
    assert summary["steps"] == records[-1]["step"] > 0
    assert summary["epochs"] == EPOCHS and summary["stopped"] == "epochs"


def test_train_refuses_to_replace_an_existing_run_without_resume_or_overwrite(run, tmp_path):
    output_dir = tmp_path / "run"
    shutil.copytree(run.output_dir, output_dir)
    before = (output_dir / "last.pt").read_bytes()
    result = run_cli(*train_args(run.data, output_dir))
    line = assert_one_line_error(result, str(output_dir), "--resume", "--overwrite")
    assert "already holds a training run" in line
    assert (output_dir / "last.pt").read_bytes() == before


def test_a_run_killed_before_its_first_checkpoint_is_refused_on_resume_with_the_way_out(run, tmp_path):
    """Its metrics.jsonl made a rerun say "pass --resume", and --resume said "nothing to resume": round and round."""
    output_dir = tmp_path / "run"
    output_dir.mkdir()
    (output_dir / "metrics.jsonl").write_text('{"epoch": 1, "step": 5}\n', encoding="utf-8")
    assert_one_line_error(run_cli(*train_args(run.data, output_dir)), "already holds a training run (metrics.jsonl)")
    assert_one_line_error(run_cli(*train_args(run.data, output_dir, "--resume")),
                          f"--resume: nothing to resume in {output_dir} (no last.pt); the run there "
                          "(metrics.jsonl) left nothing to continue from: start it over with --overwrite")


def test_resume_and_overwrite_exclude_each_other(run, tmp_path):
    output_dir = tmp_path / "run"
    shutil.copytree(run.output_dir, output_dir)
    assert_one_line_error(run_cli(*train_args(run.data, output_dir, "--resume", "--overwrite")), "--resume")


def test_a_folder_with_best_pt_but_no_last_pt_is_a_run_and_is_not_replaced_silently(run, tmp_path):
    output_dir = tmp_path / "run"  # a run killed while saving its first last.pt, or one whose last.pt was deleted
    shutil.copytree(run.output_dir, output_dir)
    (output_dir / "last.pt").unlink()
    before = file_states(output_dir / "best.pt", output_dir / "metrics.jsonl")
    result = run_cli(*train_args(run.data, output_dir))
    assert_one_line_error(result, f"{output_dir} already holds a training run (best.pt)", "--overwrite")
    assert file_states(*before) == before


@pytest.mark.parametrize("refused", [["--vocab-size", "5"], ["--attention", "luong-dot", "--encoder-hidden", "7"]])
def test_overwrite_refused_on_the_way_leaves_the_earlier_run_as_it_was(run, tmp_path, refused):
    output_dir = tmp_path / "run"
    shutil.copytree(run.output_dir, output_dir)
    before = file_states(*(output_dir / name for name in ("best.pt", "last.pt", "metrics.jsonl")))
    result = run_cli(*train_args(run.data, output_dir, "--overwrite", *refused))
    assert_one_line_error(result)
    assert file_states(*before) == before


def test_a_training_file_whose_every_target_is_too_long_is_refused_not_trained_for_no_steps(run, tmp_path):
    config = json.loads(run.data.config.read_text(encoding="utf-8"))
    config["train"] = {**config.get("train", {}), "max_target_length": 2}
    (tmp_path / "short.json").write_text(json.dumps(config), encoding="utf-8")
    result = run_cli(*train_args(run.data, tmp_path / "out"), "--config", str(tmp_path / "short.json"))
    assert_one_line_error(result, f"{run.data.train}: no pair to train on: all ", "have a target over 2 pieces")
    assert not (tmp_path / "out" / "best.pt").exists()


@pytest.mark.parametrize("extra", [[], ["--overwrite"], ["--resume"]])
def test_a_second_run_into_a_folder_a_run_is_writing_is_refused_and_deletes_nothing(run, tmp_path, extra):
    """Two train runs into one --output-dir interleaved their metrics.jsonl, and an --overwrite deleted the first's
    files as it wrote them; rul train likewise."""
    output_dir = tmp_path / "run"
    output_dir.mkdir()
    (output_dir / "metrics.jsonl").write_text('{"step": 5}\n', encoding="utf-8")
    refusal = f"{output_dir}: another training run is writing there now; wait for it to end, or choose another"
    with held_folder(output_dir):  # as the first run holds it
        assert_one_line_error(run_cli(*train_args(run.data, output_dir, *extra)), refusal)
        assert_one_line_error(run_cli("rul", "train", "--output-dir", str(output_dir), "--epochs", "1", *extra),
                              refusal)
    assert [p.name for p in output_dir.iterdir()] == ["metrics.jsonl"]
    assert (output_dir / "metrics.jsonl").read_text(encoding="utf-8") == '{"step": 5}\n'
    with held_folder(tmp_path / "new"):  # made for the lock, and left as found: not at all
        pass
    assert not (tmp_path / "new").exists()


def test_sigterm_during_training_keeps_what_ctrl_c_keeps_and_resume_goes_on(run, tmp_path):
    output_dir, metrics = tmp_path / "run", tmp_path / "run" / "metrics.jsonl"

    def terminate_after_an_epoch() -> None:  # as timeout, docker stop or a scheduler would
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (metrics.is_file() and metrics.read_text(encoding="utf-8")):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_after_an_epoch)
    harmless = signal.signal(signal.SIGTERM, lambda number, frame: None)  # a late signal must not end pytest
    try:
        killer.start()
        result = run_cli(*train_args(run.data, output_dir, "--epochs", "100000"))
        killer.join()
    finally:
        signal.signal(signal.SIGTERM, harmless)
    assert (result.status, result.error_lines[-1]) == (143, "seq2seq: terminated; continue with --resume")
    state = torch.load(output_dir / "last.pt", weights_only=True)["training_state"]
    assert state["step"] > 0  # saved at the batch it was on, not lost with the process
    resumed = run_cli(*train_args(run.data, output_dir, "--resume", "--epochs", str(state["epoch"] + 1)))
    assert resumed.status == 0, resumed.stderr


def test_a_dev_split_of_training_alerts_is_warned_about_for_the_scope_threshold_it_fits(run, tmp_path):
    warning = f"warning: {run.data.dev}: {len(TINY_PAIRS)} of its {len(TINY_PAIRS)} alerts are in {run.data.train} too"
    overlap, few = run.result.stderr.splitlines()[-2:]  # said last, beside the result they qualify
    assert overlap.startswith(warning)  # the tiny dev pairs are training pairs
    assert few == (f"warning: {run.data.dev}: trust and the out-of-scope threshold were fitted on {len(TINY_PAIRS)} "
                   "dev pairs, too few to rely on (the threshold flags 1% of them); a few hundred make them stable")
    fresh = tmp_path / "fresh.tsv"
    fresh.write_text(tsv([("pump bearing noisy", "inspect pump bearing"), ("fan blade chipped", "replace fan blade")]),
                     encoding="utf-8")
    result = run_cli(*train_args(run.data, tmp_path / "out", "--dev", str(fresh), "--epochs", "1"))
    assert result.status == 0 and "too (the same file?)" not in result.stderr
    assert "were fitted on 2 dev pairs, too few" in result.stderr


def test_a_validation_logged_but_not_saved_before_a_kill_is_not_in_metrics_twice_after_resume(run, tmp_path):
    output_dir = tmp_path / "run"
    with training_threads():
        assert run_cli(*train_args(run.data, output_dir, "--epochs", "1")).status == 0
        metrics = output_dir / "metrics.jsonl"
        [first] = metrics.read_text(encoding="utf-8").splitlines()
        # the next validation logged, then the process killed before its last.pt, mid-way through another line
        ahead = json.loads(first) | {"epoch": 2, "step": json.loads(first)["step"] * 2}
        with metrics.open("a", encoding="utf-8") as file:
            file.write(json.dumps(ahead) + "\n" + '{"epoch": 3, "st')
        assert run_cli(*train_args(run.data, output_dir, "--resume", "--epochs", "2")).status == 0
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    assert [r["epoch"] for r in records] == [1, 2] and records[0] == json.loads(first)
    assert records[1]["step"] == ahead["step"]  # the same step, made again


def test_a_run_that_stopped_early_resumed_after_a_kill_while_finishing_only_finishes(run, tmp_path):
    """A kill (or a full disk) while best.pt got its case memory left a last.pt past its patience; --resume trained on
    from there to another best.pt. It now keeps the run's model and gives it its memory."""
    output_dir = tmp_path / "run"
    with training_threads():
        first = run_cli(*train_args(run.data, output_dir, "--epochs", "40", "--patience", "1"))
        assert first.status == 0 and json.loads(first.stdout)["stopped"] == "early stopping", first.stderr
        best = torch.load(output_dir / "best.pt", weights_only=True)
        torch.save({k: v for k, v in best.items() if k != "memory"}, output_dir / "best.pt")  # as the kill left it
        metrics = (output_dir / "metrics.jsonl").read_text(encoding="utf-8")
        again = run_cli(*train_args(run.data, output_dir, "--epochs", "40", "--patience", "1", "--resume"))
        assert again.status == 0 and "the run had stopped early" in again.stderr, again.stderr
        finished = torch.load(output_dir / "best.pt", weights_only=True)
        assert (output_dir / "metrics.jsonl").read_text(encoding="utf-8") == metrics
        assert json.loads(again.stdout)["steps"] == json.loads(first.stdout)["steps"]
        assert all(torch.equal(t, finished["weights"][k]) for k, t in best["weights"].items())
        assert "memory" in finished


def test_resume_continues_from_the_saved_step(resumed):
    assert resumed["first"]["epochs"] == 1 and resumed["second"]["epochs"] == EPOCHS
    assert resumed["second"]["steps"] > resumed["first"]["steps"] > 0
    assert f"at step {resumed['first']['steps']}" in resumed["log"]


def test_resumed_run_ends_with_exactly_the_weights_of_an_uninterrupted_run(run, resumed):
    uninterrupted = torch.load(run.last, weights_only=True)
    continued = torch.load(resumed["output_dir"] / "last.pt", weights_only=True)
    assert uninterrupted["weights"].keys() == continued["weights"].keys()
    for name, tensor in uninterrupted["weights"].items():
        assert torch.equal(tensor, continued["weights"][name]), name
    assert resumed["second"]["steps"] == json.loads(run.result.stdout)["steps"]


def test_ctrl_c_in_the_middle_of_an_update_resumes_to_exactly_the_weights_of_a_run_never_stopped(run, tmp_path,
                                                                                                  monkeypatch):
    dropout = ("--dropout", "0.3")  # masks drawn in each update: one redone would draw others
    real_step, calls = Trainer.train_step, []

    def interrupted(self, batch):  # Ctrl-C arrives once the third update is done, before it is counted
        result = real_step(self, batch)
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return result

    with training_threads():
        whole = run_cli(*train_args(run.data, tmp_path / "whole", *dropout))
        monkeypatch.setattr(Trainer, "train_step", interrupted)
        stopped = run_cli(*train_args(run.data, tmp_path / "stopped", *dropout))
        monkeypatch.undo()
        resumed = run_cli(*train_args(run.data, tmp_path / "stopped", *dropout, "--resume"))
    assert (whole.status, stopped.status, resumed.status) == (0, 130, 0), stopped.stderr + resumed.stderr
    assert torch.load(tmp_path / "stopped" / "last.pt", weights_only=True)["training_state"]["step"] == json.loads(
        whole.stdout)["steps"]
    expected = torch.load(tmp_path / "whole" / "last.pt", weights_only=True)["weights"]
    continued = torch.load(tmp_path / "stopped" / "last.pt", weights_only=True)["weights"]
    assert all(torch.equal(tensor, continued[name]) for name, tensor in expected.items())


def test_empty_training_rows_are_skipped_with_a_warning_and_training_runs(run, tmp_path):
    rows = [*TINY_PAIRS, ("", "replace pump"), ("pump leak", "  ")]
    train = tmp_path / "holes.tsv"
    train.write_text(tsv(rows), encoding="utf-8")
    result = run_cli(*tiny_train_command(tmp_path, run, train, "--dev", str(run.data.dev)))
    assert result.status == 0, result.stderr
    assert f"skipped 2 of {len(rows)} pairs" in result.stderr
    assert (tmp_path / "out" / "last.pt").is_file()


def _maintnet(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "maintnet.tsv"
    path.write_text(tsv([(str(i), *pair) for i, pair in enumerate(TINY_PAIRS)], ("ident", "problem", "action")),
                    encoding="utf-8")
    return path, []


def _jsonl(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in TINY_PAIRS), encoding="utf-8")
    return path, []


def _aligned_text(tmp_path: Path) -> tuple[Path, list[str]]:
    source, target = tmp_path / "pairs.src", tmp_path / "pairs.tgt"
    source.write_text("".join(s + "\n" for s, _ in TINY_PAIRS), encoding="utf-8")
    target.write_text("".join(t + "\n" for _, t in TINY_PAIRS), encoding="utf-8")
    return source, ["--train-target", str(target), "--dev-target", str(target)]


def _chosen_columns(tmp_path: Path) -> tuple[Path, list[str]]:
    # The default columns are present but empty: reading them would leave no usable pair.
    path = tmp_path / "columns.tsv"
    path.write_text(tsv([(" ", " ", s, t) for s, t in TINY_PAIRS], ("source", "target", "alert", "repair")),
                    encoding="utf-8")
    return path, ["--source-column", "alert", "--target-column", "repair"]


@pytest.mark.parametrize("layout", [_maintnet, _jsonl, _aligned_text, _chosen_columns],
                         ids=["maintnet-columns", "jsonl", "aligned-text-files", "chosen-columns"])
def test_training_reads_each_data_layout(layout, run, tmp_path):
    train, options = layout(tmp_path)
    result = run_cli(*tiny_train_command(tmp_path, run, train, *options))
    assert result.status == 0, result.stderr
    assert f"{len(TINY_PAIRS)} pairs;" in result.stderr
    assert "skipped" not in result.stderr
    assert (tmp_path / "out" / "last.pt").is_file()


# translate


def test_translate_writes_one_line_per_input_line_in_input_order(run, recommender):
    result = translate(run, "".join(alert + "\n" for alert in ALERTS).encode())
    assert result.status == 0, result.stderr
    assert result.stdout_lines == [recommender.translate([alert])[0] for alert in ALERTS]


def test_translate_without_a_final_newline_or_with_crlf_reads_the_same_lines(run):
    plain = translate(run, "".join(alert + "\n" for alert in ALERTS).encode())
    crlf = translate(run, "\r\n".join(ALERTS).encode())
    assert crlf.stdout_lines == plain.stdout_lines


def test_empty_input_line_gives_an_empty_output_line_without_shifting_the_rest(run, recommender):
    result = translate(run, f"{ALERTS[0]}\n\n   \n{ALERTS[1]}\n".encode())
    assert result.status == 0
    assert result.stdout_lines == [recommender.translate([ALERTS[0]])[0], "", "", recommender.translate([ALERTS[1]])[0]]
    assert result.error_lines == []


def test_non_utf8_input_line_gives_an_empty_output_line_and_a_warning_naming_it(run, recommender):
    result = translate(run, ALERTS[0].encode() + b"\n\xff\xfe pump\n" + ALERTS[1].encode() + b"\n")
    assert result.status == 0
    assert result.stdout_lines == [recommender.translate([ALERTS[0]])[0], "", recommender.translate([ALERTS[1]])[0]]
    assert len(result.error_lines) == 1
    assert "line 2" in result.error_lines[0] and "UTF-8" in result.error_lines[0]


def test_over_long_alert_is_translated_with_a_truncation_warning_naming_the_line(run, recommender):
    assert len(recommender.tokenizer.encode_source(LONG_ALERT)) > MAX_SOURCE_LENGTH
    result = translate(run, f"{ALERTS[0]}\n{LONG_ALERT}\n".encode())
    assert result.status == 0
    assert result.stdout_lines == recommender.translate([ALERTS[0], LONG_ALERT])
    truncated = [line for line in result.error_lines if "truncated" in line]
    assert len(truncated) == 1 and f"to {MAX_SOURCE_LENGTH} pieces" in truncated[0]
    assert all(line.startswith("warning: stdin: line 2: ") for line in result.error_lines)  # (and out of scope)


def test_an_n_best_line_has_as_many_fields_whatever_number_of_distinct_answers_the_beam_found():
    """A beam can end with fewer distinct answers than --n-best asks (repeats are removed): lines of different
    lengths broke readers that split on tabs; the CSV already pads its columns."""
    candidates = [Candidate(text, score, [], torch.zeros(0, 0), score) for text, score in (("a b", -0.5), ("c", -1))]
    assert n_best_line(candidates, 4).split("\t") == ["a b", "-0.5000", "c", "-1.0000", "", "", "", ""]
    assert n_best_line(candidates, 1) == "a b\t-0.5000"


def test_n_best_prints_tab_separated_text_and_score_pairs_best_first(run):
    result = translate(run, "".join(alert + "\n" for alert in ALERTS).encode(), "--n-best", "2", "--beam-size", "3")
    assert result.status == 0, result.stderr
    assert len(result.stdout_lines) == len(ALERTS)
    for line in result.stdout_lines:
        fields = line.split("\t")
        assert len(fields) == 4, line
        scores = [float(fields[1]), float(fields[3])]
        assert scores == sorted(scores, reverse=True)


def test_n_best_larger_than_the_beam_is_a_one_line_error(run):
    assert_one_line_error(translate(run, b"pump\n", "--n-best", "3", "--beam-size", "2"),
                          "argument --n-best: must be in [1, beam_size], got 3")


# evaluate


def test_evaluate_json_prints_one_object_with_scores_signatures_and_count(run):
    result = run_cli("evaluate", "--model", str(run.best), "--data", str(run.data.dev), "--json")
    assert result.status == 0, result.stderr
    assert len(result.stdout_lines) == 1
    report = json.loads(result.stdout)
    assert all(type(report[name]) is float for name in ("bleu", "chrf", "ter"))
    assert set(report["signature"]) == {"bleu", "chrf", "ter"}
    assert type(report["n"]) is int and report["n"] == len(TINY_PAIRS)
    selective = report["selective"]
    assert [row["coverage"] for row in selective] == [1.0, 0.9, 0.8, 0.6, 0.4]
    assert (selective[0]["bleu"], selective[0]["chrf"]) == pytest.approx((report["bleu"], report["chrf"]))


def test_selective_scores_keep_the_most_trusted_share(recommender, run):
    corpus = read_parallel(run.data.dev)
    answers = recommender.recommend([e.source for e in corpus.examples])
    rows = selective_scores(answers, corpus, (1.0, 0.5))
    most_trusted = sorted(range(len(answers)), key=lambda i: -answers[i].trust)[:round(len(answers) / 2)]
    half = score_corpus([answers[i].text for i in sorted(most_trusted)],
                        [corpus.examples[i].target for i in sorted(most_trusted)])
    assert rows[1] == {"coverage": 0.5, "bleu": half.bleu, "chrf": half.chrf}


def test_translate_json_gives_one_object_per_line_with_trust_verdict_and_past_cases(run):
    alerts = ["pump vibration high", "", "the quick brown fox"]
    result = translate(run, "\n".join(alerts).encode() + b"\n", "--json", "--similar", "2")
    assert result.status == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout_lines]
    assert [line["alert"] for line in lines] == alerts
    first = lines[0]
    assert {"recommendation", "score", "trust", "verdict", "similar"} <= set(first)
    assert first["verdict"] in ("confident", "uncertain", "out-of-scope") and 0.0 <= first["trust"] <= 1.0
    assert [set(case) for case in first["similar"]] == [{"alert", "action", "similarity"}] * 2
    assert first["similar"][0] == {"alert": "pump vibration high", "action": "inspect pump bearings",
                                   "similarity": pytest.approx(1.0, abs=1e-4)}
    assert (lines[1]["recommendation"], lines[1]["verdict"], lines[1]["similar"]) == ("", None, [])
    assert lines[2]["verdict"] == "out-of-scope"


@pytest.mark.parametrize("options", [["--similar", "2"], ["--similar", "3", "--n-best", "1"],
                                     ["--similar", "1", "--input", "x.txt", "--output", "y.csv"]])
def test_similar_without_json_is_a_one_line_error_not_ignored(run, options):
    assert_one_line_error(translate(run, b"pump vibration high\n", *options), "argument --similar: only with --json")


def test_translate_json_with_a_file_is_a_one_line_error(run, tmp_path):
    assert_one_line_error(translate(run, b"", "--json", "--input", str(run.data.dev), "--output",
                                    str(tmp_path / "o.tsv")), "--json")


def test_evaluate_writes_the_hypotheses_it_scored(run, recommender, tmp_path):
    hypotheses = tmp_path / "hyp.txt"
    result = run_cli("evaluate", "--model", str(run.best), "--data", str(run.data.dev),
                     "--hypotheses", str(hypotheses))
    assert result.status == 0 and "BLEU" in result.stdout
    assert hypotheses.read_text(encoding="utf-8").splitlines() == recommender.translate([s for s, _ in TINY_PAIRS])


def test_evaluate_hypotheses_keep_a_line_for_each_skipped_pair_so_they_line_up_with_the_targets(run, recommender,
                                                                                                tmp_path):
    sources, targets = tmp_path / "src.txt", tmp_path / "tgt.txt"
    pairs = [*TINY_PAIRS[:2], ("", "replace pump"), TINY_PAIRS[2], ("fan speed low", ""), TINY_PAIRS[3]]
    sources.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    targets.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    hypotheses = tmp_path / "hyp.txt"
    result = run_cli("evaluate", "--model", str(run.best), "--data", str(sources), "--data-target", str(targets),
                     "--hypotheses", str(hypotheses))
    assert result.status == 0, result.stderr
    kept = recommender.translate([s for s, _ in TINY_PAIRS[:4]])
    assert hypotheses.read_text(encoding="utf-8").splitlines() == [*kept[:2], "", kept[2], "", kept[3]]


# errors: one line, exit status 2, naming the file


def test_missing_training_file_is_a_one_line_error(run, tmp_path):
    missing = tmp_path / "nope.tsv"
    assert_one_line_error(run_cli(*tiny_train_command(tmp_path, run, missing)), str(missing), "not found")


def test_missing_column_error_lists_the_columns_found(run, tmp_path):
    train = tmp_path / "columns.tsv"
    train.write_text(tsv(TINY_PAIRS, ("message", "fix")), encoding="utf-8")
    line = assert_one_line_error(run_cli(*tiny_train_command(tmp_path, run, train)), str(train))
    assert "message, fix" in line


def test_malformed_row_error_names_its_line(run, tmp_path):
    train = tmp_path / "bad.tsv"
    train.write_text(tsv(TINY_PAIRS[:3]) + "pump\tfix\textra\n", encoding="utf-8")
    assert_one_line_error(run_cli(*tiny_train_command(tmp_path, run, train)), str(train), "line 5")


def test_non_utf8_data_file_error_names_its_line(run, tmp_path):
    train = tmp_path / "latin1.tsv"
    train.write_bytes(tsv(TINY_PAIRS[:3]).encode() + "pump\tcheck pump bearings \u00b0C\n".encode("latin-1"))
    assert_one_line_error(run_cli(*tiny_train_command(tmp_path, run, train)), str(train), "line 5", "UTF-8")


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_corrupt_checkpoint_is_a_one_line_error(command, run, tmp_path):
    checkpoint = tmp_path / "cut.pt"
    data = run.best.read_bytes()
    checkpoint.write_bytes(data[: len(data) // 2])
    extra = ["--data", str(run.data.dev)] if command == "evaluate" else []
    assert_one_line_error(run_cli(command, "--model", str(checkpoint), *extra, stdin=b"pump\n"), str(checkpoint))


def test_unknown_key_in_a_config_file_is_a_one_line_error(run, tmp_path):
    config = tmp_path / "typo.json"
    config.write_text(json.dumps({"model": {"hiden_size": 8}}), encoding="utf-8")
    result = run_cli(*tiny_train_command(tmp_path, run, run.data.dev, "--config", str(config)))
    assert_one_line_error(result, str(config), "hiden_size")


def test_unknown_attention_name_exits_2_listing_the_choices(run, tmp_path):
    result = run_cli(*tiny_train_command(tmp_path, run, run.data.dev, "--attention", "luong-cosine"))
    assert result.status == 2
    assert "luong-cosine" in result.stderr
    assert all(name in result.stderr for name in ATTENTION_NAMES)


# a real process


def test_python_m_seq2seq_translates_stdin_to_stdout(run):
    process = subprocess.run([sys.executable, "-m", "seq2seq", "translate", "--model", str(run.best)],
                             input="".join(alert + "\n" for alert in ALERTS[:2]).encode(),
                             capture_output=True, cwd=ROOT, timeout=300)
    assert process.returncode == 0, process.stderr.decode()
    assert process.stdout.decode().split("\n")[:-1] == Recommender.from_checkpoint(run.best).translate(ALERTS[:2])


@pytest.mark.slow  # a second interpreter start-up; the stdin test covers python -m
def test_python_m_seq2seq_error_exits_2_with_one_stderr_line_and_no_traceback(run, tmp_path):
    missing = tmp_path / "missing.pt"
    process = subprocess.run([sys.executable, "-m", "seq2seq", "evaluate", "--model", str(missing),
                              "--data", str(run.data.dev)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert process.returncode == 2
    assert process.stdout == ""
    assert process.stderr.splitlines() == [f"seq2seq: error: {missing}: checkpoint not found"]


@pytest.mark.parametrize("stdin", [
    b"pump vibration high\rbelt worn\rfan speed low\r",  # old Mac endings
    b"pump vibration high\r\nbelt worn\nfan speed low",  # mixed, no final line break
])
def test_every_line_ending_on_stdin_ends_an_alert(run, recommender, stdin):
    result = translate(run, stdin)
    assert result.status == 0, result.stderr
    assert result.stdout_lines == recommender.translate(["pump vibration high", "belt worn", "fan speed low"])


def test_an_out_of_scope_alert_is_answered_in_its_line_and_called_a_guess_on_stderr(run, recommender):
    alerts = ["pump vibration high", "the quick brown fox"]
    assert [r.verdict == "out-of-scope" for r in recommender.recommend(alerts)] == [False, True]
    result = translate(run, "".join(alert + "\n" for alert in alerts).encode())
    assert result.status == 0 and result.stdout_lines == recommender.translate(alerts)  # the lines keep their places
    guess = f"warning: stdin: line 2: out of scope, {UNLIKE_HISTORY}: the recommendation written is {NOT_ADVICE}"
    assert guess in result.error_lines and not any("line 1" in line for line in result.error_lines)
    as_json = translate(run, b"the quick brown fox\n", "--json")  # its JSON says "verdict" itself
    assert not any("out of scope" in line for line in as_json.error_lines)


def test_an_endless_stdin_line_is_skipped_with_a_warning_and_the_next_line_answered(run, recommender):
    result = translate(run, b"x" * (MAX_LINE_BYTES * 3) + b"\nbelt worn\n")
    assert result.status == 0
    assert result.stdout_lines == ["", *recommender.translate(["belt worn"])]
    assert "line 1: line longer than" in result.stderr


def test_an_output_dir_under_a_file_is_a_one_line_error(run, tmp_path):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("keep me\n", encoding="utf-8")
    result = run_cli(*train_args(tiny_data(tmp_path / "data"), blocker / "run"))
    assert_one_line_error(result, str(blocker))
    assert blocker.read_text(encoding="utf-8") == "keep me\n"


def test_counts_in_messages_are_singular_for_one():
    from seq2seq.errors import counted

    assert [counted(n, "engine") for n in (0, 1, 2, 1200)] == ["0 engines", "1 engine", "2 engines", "1,200 engines"]


@pytest.mark.parametrize(("given", "missing", "what"), [("--train", "--dev", "held-out pairs that choose best.pt"),
                                                        ("--dev", "--train", "pairs to train on")])
def test_a_training_file_without_its_dev_file_or_the_other_way_round_is_refused_before_anything_is_written(
        tmp_path, given, missing, what):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("source\ttarget\nfan speed low\tcheck fan\n", encoding="utf-8")
    result = run_cli("train", given, str(pairs), "--output-dir", str(tmp_path / "run"), "--epochs", "1")
    assert_one_line_error(result, f"{given} needs {missing}: the {what}")
    assert "(without both, the embedded corpus is used for both)" in result.error_lines[0]
    assert not (tmp_path / "run").exists()


def test_a_dev_split_the_vocabulary_cannot_read_a_word_of_is_one_line_not_a_traceback(run, tmp_path):
    dev = tmp_path / "dev.tsv"
    dev.write_text(tsv([("温度 高い", "確認"), ("ضغط منخفض", "فحص")]), encoding="utf-8")
    result = run_cli(*tiny_train_command(tmp_path, run, run.data.train, "--dev", str(dev)))
    assert result.status == 2 and "Traceback" not in result.stderr
    assert result.error_lines[-1].startswith(f"seq2seq: error: {dev}: no dev alert has a piece the model's vocabulary "
                                             "knows, so there is no answer to fit trust on")

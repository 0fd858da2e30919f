"""The scripts' arguments: checked before any work, refused in one line, and never a folder or database deleted
that the script did not make; and the attention benchmark runs every attention type."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import SCRIPTS, TINY_PAIRS, CliResult, file_states, load_script, tiny_data, trained, tsv

from seq2seq.attention import ATTENTION_NAMES
from seq2seq.cli import run_script
from seq2seq.cli.train import configs
from seq2seq.rul.cmapss import write_cmapss
from seq2seq.rul.synthetic import synthetic_engines

ROOT = SCRIPTS.parent


def run(name: str, argv: list[str], monkeypatch, capsys) -> CliResult:
    """``python scripts/NAME.py ARGV`` in this process, as its ``__main__`` runs it: status, stdout, stderr."""
    module = load_script(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    try:
        status = run_script(module.main, name)
    except SystemExit as exit:  # argparse, or a script's own exit
        status = exit.code if isinstance(exit.code, int) else 1
    printed = capsys.readouterr()
    return CliResult(status, printed.out, printed.err)


def assert_refused(result: CliResult, *words: str) -> str:
    """Exit status 2 and one error line (after argparse's usage, if any) naming ``words``; no traceback."""
    assert result.status == 2, (result.status, result.stderr)
    errors = [line for line in result.error_lines if "error: " in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def foreign_folder(folder: Path) -> dict[Path, bytes | None]:
    """``folder`` holding files no script made (a feedback database, notes); their bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("feedback.sqlite", "records"), ("feedback.sqlite-wal", "wal"), ("notes.txt", "mine")):
        (folder / name).write_text(text, encoding="utf-8")
    return file_states(*folder.iterdir())


# -- benchmark_feedback.py and feedback_crash_test.py: the --work folder -------------------------------------------
@pytest.mark.parametrize("model", ["missing", "present"])
def test_benchmark_feedback_never_deletes_a_work_folder_it_did_not_make(model, tmp_path, monkeypatch, capsys):
    before = foreign_folder(tmp_path / "work")
    checkpoint = tmp_path / "model.pt"
    if model == "present":
        checkpoint.write_bytes(b"not read: the folder is refused first")
    data = tiny_data(tmp_path / "data")
    result = run("benchmark_feedback", ["--model", str(checkpoint), "--alerts", str(data.dev), "--dev", str(data.dev),
                                        "--work", str(tmp_path / "work")], monkeypatch, capsys)
    assert_refused(result, str(checkpoint) if model == "missing" else "--work")
    assert file_states(*before) == before


def test_benchmark_feedback_defaults_are_the_repository_s_files_whatever_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = load_script("benchmark_feedback").parser().parse_args([])
    assert [Path(args.model), Path(args.alerts), Path(args.dev)] == [
        ROOT / "runs" / "default" / "translator.pt", ROOT / "data" / "test.tsv", ROOT / "data" / "dev.tsv"]


@pytest.mark.slow  # fine-tunes the tiny translator twice
def test_benchmark_feedback_empties_only_the_folder_it_made_itself(tmp_path_factory, tmp_path, monkeypatch, capsys):
    tiny = trained(tmp_path_factory.getbasetemp())
    work = tmp_path / "work"
    argv = ["--model", str(tiny.best), "--alerts", str(tiny.data.dev), "--dev", str(tiny.data.dev), "--corrections",
            "2", "--work", str(work), "--", "--epochs", "1"]
    first = run("benchmark_feedback", argv, monkeypatch, capsys)
    assert first.status == 0, first.stderr
    assert json.loads(first.stdout_lines[-1])["corrections"] == 2
    (work / "left over.txt").write_text("from the first run", encoding="utf-8")
    second = run("benchmark_feedback", argv, monkeypatch, capsys)
    assert second.status == 0, second.stderr
    assert not (work / "left over.txt").exists() and (work / "corrections.tsv").is_file()


def test_the_crash_test_never_deletes_a_feedback_database_it_did_not_make(tmp_path, monkeypatch, capsys):
    before = foreign_folder(tmp_path / "default")
    model = tmp_path / "model.pt"
    model.write_bytes(b"not read: the folder is refused first")
    result = run("feedback_crash_test", ["--model", str(model), "--rul-model", str(model), "--work",
                                         str(tmp_path / "default"), "--timeout", "60"], monkeypatch, capsys)
    assert_refused(result, "--work", str(tmp_path / "default"))
    assert file_states(*before) == before


def test_the_crash_test_says_why_the_app_did_not_start(tmp_path_factory, tmp_path):
    """It threw the app's words away: "exited with status 2 before serving", and no reason."""
    model = str(trained(tmp_path_factory.getbasetemp()).best)
    with pytest.raises(SystemExit, match=r"exited with status 2 before serving: gradio_app: error: .*not a rul-model"):
        load_script("feedback_crash_test").start_app(tmp_path / "feedback.sqlite", model, model, 120)


# -- benchmark_attention.py ----------------------------------------------------------------------------------------
def equal_sizes_config(path: Path, decoder_hidden: int = 8) -> Path:
    """A tiny config shaped like scripts/configs/maintnet.json: the encoder as wide per direction as the decoder."""
    path.write_text(json.dumps({"model": {"embed_size": 8, "encoder_hidden": 8, "decoder_hidden": decoder_hidden,
                                          "attention_hidden": 8},
                                "train": {"batch_tokens": 60, "epochs": 1}, "tokenizer": {"vocab_size": 60}}))
    return path


def test_luong_dot_gets_an_encoder_half_as_wide_as_its_decoder(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    benchmark = load_script("benchmark_attention")
    config = equal_sizes_config(tmp_path / "config.json")
    for attention in ATTENTION_NAMES:
        model, _, _ = configs(benchmark.config_args(str(config), attention, 1.0))
        assert model.attention == attention and model.decoder_hidden == 8
        assert model.encoder_hidden == (4 if attention == "luong-dot" else 8)


def test_the_attention_benchmark_checks_every_config_before_training_the_first(tmp_path, monkeypatch, capsys):
    data = tiny_data(tmp_path / "data")
    odd = equal_sizes_config(tmp_path / "odd.json", decoder_hidden=9)  # no encoder is half of it
    out = tmp_path / "out"
    result = run("benchmark_attention", ["--train", str(data.train), "--dev", str(data.dev), "--config", str(odd),
                                         "--attention", "bahdanau", "luong-dot", "--minutes", "0.01",
                                         "--output-dir", str(out)], monkeypatch, capsys)
    assert_refused(result, "luong-dot", "decoder_hidden")
    assert not out.exists()


def test_the_attention_benchmark_keeps_earlier_runs_unless_told_to_overwrite(tmp_path, monkeypatch, capsys):
    data, out = tiny_data(tmp_path / "data"), tmp_path / "out"
    (out / "luong-dot").mkdir(parents=True)
    (out / "luong-dot" / "best.pt").write_bytes(b"an earlier run's model")
    before = file_states(out / "luong-dot" / "best.pt")
    result = run("benchmark_attention", ["--train", str(data.train), "--dev", str(data.dev), "--config",
                                         str(equal_sizes_config(tmp_path / "config.json")), "--attention", "bahdanau",
                                         "luong-dot", "--minutes", "0.01", "--output-dir", str(out)],
                 monkeypatch, capsys)
    assert_refused(result, str(out / "luong-dot"), "--overwrite")
    assert file_states(out / "luong-dot" / "best.pt") == before and not (out / "bahdanau").exists()  # none trained


@pytest.mark.slow  # trains four tiny models
def test_the_attention_benchmark_compares_every_attention_type(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.tsv").write_text(tsv(TINY_PAIRS * 4), encoding="utf-8")
    (tmp_path / "dev.tsv").write_text(tsv(TINY_PAIRS), encoding="utf-8")
    result = run("benchmark_attention", ["--train", str(tmp_path / "train.tsv"), "--dev", str(tmp_path / "dev.tsv"),
                                         "--config", str(equal_sizes_config(tmp_path / "config.json")),
                                         "--minutes", "0.01", "--output-dir", str(tmp_path / "out")],
                 monkeypatch, capsys)
    assert result.status == 0, result.stderr
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    assert [row["attention"] for row in rows] == list(ATTENTION_NAMES)
    assert [line.split("|")[1].strip() for line in result.stdout_lines if line.startswith("| ")][1:] == \
        list(ATTENTION_NAMES)


# -- make_figures.py -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["9999", "-1"])
def test_make_figures_names_the_units_of_a_file_without_the_engine(engine, tmp_path, monkeypatch, capsys):
    data = tmp_path / "train_SYN.txt"
    write_cmapss(data, synthetic_engines(3, seed=3, min_life=130, max_life=160))
    result = run("make_figures", ["--rul-model", str(tmp_path / "rul.pt"), "--translator", str(tmp_path / "t.pt"),
                                  "--data", str(data), "--engine", engine, "--out", str(tmp_path / "figures")],
                 monkeypatch, capsys)
    assert_refused(result, f"no engine {engine} (units 1..3)")
    assert not (tmp_path / "figures").exists()


def test_make_figures_writes_the_repository_s_figures_whatever_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = load_script("make_figures").parser().parse_args(["--rul-model", "r", "--translator", "t", "--data", "d",
                                                            "--engine", "3"])
    assert Path(args.out) == ROOT / "data" / "figures"


# -- degenerate arguments ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("script", "argv", "flag"), [
    ("load_test", ["--calls", "0"], "--calls"),
    ("load_test", ["--clients", "10", "0"], "--clients"),
    ("load_test", ["--repeats", "0"], "--repeats"),
    ("benchmark_app", ["--repeats", "0"], "--repeats"),
    ("benchmark_app", ["--alert", ""], "--alert"),
    ("benchmark_app", ["--alert", "  "], "--alert"),
])
def test_an_empty_sweep_or_alert_is_refused_before_anything_loads(script, argv, flag, monkeypatch, capsys):
    result = run(script, ["--model", "/nonexistent/translator.pt", *argv], monkeypatch, capsys)
    assert_refused(result, f"argument {flag}")


def test_benchmark_rul_keeps_an_earlier_run_unless_told_to_overwrite(tmp_path, monkeypatch, capsys):
    data, out = tmp_path / "train_SYN.txt", tmp_path / "run"
    write_cmapss(data, synthetic_engines(6, seed=3, min_life=130, max_life=160))
    out.mkdir()
    (out / "best.pt").write_bytes(b"an earlier run's model")
    before = file_states(out / "best.pt")
    result = run("benchmark_rul", ["--data", str(data), "--minutes", "0.01", "--output-dir", str(out)],
                 monkeypatch, capsys)
    assert_refused(result, str(out), "--overwrite")
    assert file_states(out / "best.pt") == before

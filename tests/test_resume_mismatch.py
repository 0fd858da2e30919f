"""``--resume`` continues a run only as it was started: ``seq2seq train`` and ``seq2seq rul train`` refuse, in one
line naming the run and the difference and writing nothing, a setting that shapes the run or data other than
what it was trained on; how long it trains and where may change, and a run written before runs recorded their
data resumes as before."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
import torch
from support import (
    RUL_CONFIG,
    TINY_PAIRS,
    assert_one_line_error,
    file_states,
    run_cli,
    tiny_data,
    train_args,
    training_threads,
    tsv,
)

from seq2seq.checkpoint import read_checkpoint, save_atomic
from seq2seq.rul.cmapss import write_cmapss
from seq2seq.rul.synthetic import synthetic_engines

REFUSAL = "resume with the run's own settings and data, start over with --overwrite, or choose another --output-dir"


def start(root: Path):
    """A translator run stopped after one epoch in ROOT/run, on the tiny data in ROOT/data: (data, run folder)."""
    data, run = tiny_data(root / "data"), root / "run"
    with training_threads():
        result = run_cli(*train_args(data, run, "--epochs", "1"))
    assert result.status == 0, result.stderr
    return data, run


@pytest.fixture(scope="module")
def started(tmp_path_factory) -> Path:
    """A run of ``start`` for tests to copy (a copy's last.pt names the files of this one)."""
    root = tmp_path_factory.mktemp("started")
    start(root)
    return root


def copy_of(started: Path, tmp_path: Path):
    """A copy of the started run and its data under ``tmp_path``: (data, run folder)."""
    shutil.copytree(started, tmp_path, dirs_exist_ok=True)
    return tiny_data(tmp_path / "data"), tmp_path / "run"


def run_files(run: Path) -> dict[Path, bytes | None]:
    """Every path in the run folder, with a file's bytes."""
    return file_states(*sorted(run.rglob("*")))


def assert_refused(result, run: Path, before: dict, *words: str) -> str:
    """A one-line refusal naming the run's last.pt and ``words``, which left the run folder as it was."""
    line = assert_one_line_error(result, f"--resume: {run / 'last.pt'} was trained ", REFUSAL, *words)
    assert run_files(run) == before
    return line


@pytest.mark.parametrize(("flags", "difference"), [
    (["--attention", "luong-dot", "--encoder-hidden", "16", "--decoder-hidden", "32"],
     "with attention bahdanau, not luong-dot"),
    (["--encoder-hidden", "8"], "with encoder_hidden 16, not 8"),
    (["--dropout", "0.5"], "with dropout 0.3, not 0.5"),
    (["--seed", "7"], "with seed 1, not 7"),
    (["--vocab-size", "70"], "with vocab_size 80, not 70"),
], ids=["attention", "encoder-hidden", "dropout", "seed", "vocab-size"])
def test_resume_with_another_model_train_or_tokenizer_setting_is_refused_in_one_line(started, tmp_path, flags,
                                                                                     difference):
    data, run = copy_of(started, tmp_path)
    before = run_files(run)
    assert_refused(run_cli(*train_args(data, run, "--resume", *flags)), run, before, difference)


def test_every_changed_setting_is_named_in_the_one_line(started, tmp_path):
    data, run = copy_of(started, tmp_path)
    line = assert_refused(run_cli(*train_args(data, run, "--resume", "--attention", "luong-general", "--dropout",
                                              "0.5")), run, run_files(run))
    assert "with attention bahdanau, not luong-general, and with dropout 0.3, not 0.5;" in line


def test_resume_on_another_training_file_is_refused_in_one_line(started, tmp_path):
    data, run = copy_of(started, tmp_path)
    other = tmp_path / "other.tsv"
    other.write_text(tsv(TINY_PAIRS[::-1] * 4), encoding="utf-8")
    before = run_files(run)
    assert_refused(run_cli(*train_args(data, run, "--resume", "--train", str(other))), run, before,
                   f"on another --train file ({(started / 'data' / 'train.tsv').resolve()}, not {other.resolve()})")


def test_resume_after_the_training_file_was_edited_is_refused_in_one_line(tmp_path):
    data, run = start(tmp_path)
    data.train.write_text(tsv(TINY_PAIRS * 3), encoding="utf-8")
    assert_refused(run_cli(*train_args(data, run, "--resume")), run, run_files(run),
                   "on another --train file (its content has changed since the run started)")


def test_resume_after_the_dev_file_was_edited_is_refused_in_one_line(tmp_path):
    data, run = start(tmp_path)
    data.dev.write_text(tsv(TINY_PAIRS[:20]), encoding="utf-8")
    line = assert_refused(run_cli(*train_args(data, run, "--resume")), run, run_files(run),
                          "on another --dev file (its content has changed since the run started)")
    assert "--train" not in line


def test_resume_reading_other_columns_is_refused_in_one_line(started, tmp_path):
    data, run = copy_of(started, tmp_path)
    swapped = run_cli(*train_args(data, run, "--resume", "--source-column", "target", "--target-column", "source"))
    assert_refused(swapped, run, run_files(run), "on other pairs of the same --train file",
                   "on other pairs of the same --dev file", "--source-column or --target-column")


def test_resume_with_the_same_settings_and_data_goes_on_training_longer(started, tmp_path):
    data, run = copy_of(started, tmp_path)
    moved = tmp_path / "moved.tsv"  # the same content under another name is the same data
    shutil.copyfile(data.train, moved)
    with training_threads():
        result = run_cli(*train_args(data, run, "--resume", "--epochs", "2", "--max-minutes", "30", "--train",
                                     str(moved), "--source-column", "source"))  # the column read before, named
    assert result.status == 0, result.stderr
    assert json.loads(result.stdout)["epochs"] == 2 and "resumed" in result.stderr
    assert read_checkpoint(run / "last.pt")["training_state"]["fingerprint"]["--train"]["path"] == str(moved.resolve())


def test_a_checkpoint_without_a_fingerprint_resumes_as_before_and_records_one(started, tmp_path):
    """A last.pt written before runs recorded their data: its settings are checked (it stores them), its data
    cannot be; it resumes to the very weights the same run with a fingerprint reaches, and records the data."""
    data, run = copy_of(started, tmp_path / "new")
    old_data, old = copy_of(started, tmp_path / "old")
    payload = read_checkpoint(old / "last.pt")
    del payload["training_state"]["fingerprint"]
    save_atomic(payload, old / "last.pt")
    assert_refused(run_cli(*train_args(old_data, old, "--resume", "--dropout", "0.5")), old, run_files(old),
                   "with dropout 0.3, not 0.5")
    with training_threads():
        results = [run_cli(*train_args(d, r, "--resume", "--epochs", "2")) for d, r in ((data, run), (old_data, old))]
    assert all(result.status == 0 for result in results), [result.stderr for result in results]
    new_weights, old_weights = (read_checkpoint(r / "last.pt")["weights"] for r in (run, old))
    assert all(torch.equal(tensor, old_weights[name]) for name, tensor in new_weights.items())
    old_data.train.write_text(tsv(TINY_PAIRS * 3), encoding="utf-8")  # from now on, its data is checked too
    assert_refused(run_cli(*train_args(old_data, old, "--resume", "--epochs", "3")), old, run_files(old),
                   "on another --train file (its content has changed since the run started)")


# seq2seq rul train


def rul_start(root: Path) -> Path:
    """A RUL run of one epoch in ROOT/run on 30 synthetic engines in ROOT/train.txt; ROOT."""
    root.mkdir(parents=True, exist_ok=True)
    write_cmapss(root / "train.txt", synthetic_engines(30, seed=3))
    (root / "config.json").write_text(json.dumps(RUL_CONFIG), encoding="utf-8")
    result = run_cli(*rul_args(root, "--epochs", "1"))
    assert result.status == 0, result.stderr
    return root


def rul_args(root: Path, *extra: str) -> list[str]:
    return ["rul", "train", "--data", str(root / "train.txt"), "--config", str(root / "config.json"),
            "--output-dir", str(root / "run"), "--device", "cpu", *extra]


def test_rul_resume_on_another_or_an_edited_data_file_or_another_setting_is_refused_in_one_line(tmp_path):
    run = rul_start(tmp_path) / "run"
    before = run_files(run)
    write_cmapss(tmp_path / "other.txt", synthetic_engines(30, seed=4))
    other = rul_args(tmp_path, "--epochs", "2", "--resume")
    other[other.index("--data") + 1] = str(tmp_path / "other.txt")
    started, given = ((tmp_path / name).resolve() for name in ("train.txt", "other.txt"))
    assert_refused(run_cli(*other), run, before, f"on another --data file ({started}, not {given})")
    synthetic = rul_args(tmp_path, "--epochs", "2", "--resume")
    del synthetic[2:4]
    assert_refused(run_cli(*synthetic), run, before, f"on another --data file ({started}, not the default)")
    assert_refused(run_cli(*rul_args(tmp_path, "--epochs", "2", "--seed", "4", "--resume")), run, before,
                   "with seed 1, not 4")
    write_cmapss(tmp_path / "train.txt", synthetic_engines(30, seed=5))
    assert_refused(run_cli(*rul_args(tmp_path, "--epochs", "2", "--resume")), run, before,
                   "on another --data file (its content has changed since the run started)")


def fed_pipe(path: Path, source: Path) -> threading.Thread:
    """A named pipe at ``path`` that gives ``source``'s bytes to its next reader (a thread writes them)."""
    if not path.exists():
        os.mkfifo(path)
    feeder = threading.Thread(target=lambda: path.write_bytes(source.read_bytes()), daemon=True)
    feeder.start()
    return feeder


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_rul_resume_on_another_fleet_through_the_same_pipe_is_refused_in_one_line(tmp_path):
    """A pipe has no SHA-256 to prove it the same: what was read from it is compared instead."""
    rul_start(tmp_path)
    write_cmapss(tmp_path / "other.txt", synthetic_engines(30, seed=4))
    pipe, run = tmp_path / "engines.fifo", tmp_path / "run"
    shutil.rmtree(run)
    first = rul_args(tmp_path, "--epochs", "1")
    first[first.index("--data") + 1] = str(pipe)
    fed_pipe(pipe, tmp_path / "train.txt")
    assert run_cli(*first).status == 0
    before = run_files(run)
    again = rul_args(tmp_path, "--epochs", "2", "--resume")
    again[again.index("--data") + 1] = str(pipe)
    fed_pipe(pipe, tmp_path / "other.txt")
    assert_refused(run_cli(*again), run, before, "on other data through the same --data (")
    fed_pipe(pipe, tmp_path / "train.txt")
    same = run_cli(*again)  # the same fleet through the pipe goes on
    assert same.status == 0, same.stderr


def test_rul_resume_with_the_same_data_goes_on_and_an_old_checkpoint_resumes_on_any(tmp_path):
    rul_start(tmp_path / "same")
    shutil.copytree(tmp_path / "same", tmp_path / "old")
    same = run_cli(*rul_args(tmp_path / "same", "--epochs", "2", "--max-minutes", "30", "--resume"))
    assert same.status == 0, same.stderr
    assert json.loads(same.stdout_lines[-1])["epochs"] == 2
    payload = torch.load(tmp_path / "old" / "run" / "last.pt", weights_only=True)
    del payload["training_state"]["fingerprint"]
    save_atomic(payload, tmp_path / "old" / "run" / "last.pt")
    write_cmapss(tmp_path / "old" / "train.txt", synthetic_engines(30, seed=5))  # only what it stores is checked
    old = run_cli(*rul_args(tmp_path / "old", "--epochs", "2", "--resume"))
    assert old.status == 0, old.stderr
    assert json.loads(old.stdout_lines[-1])["epochs"] == 2

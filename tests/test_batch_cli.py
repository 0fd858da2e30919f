"""``seq2seq translate --input`` on the command line: summary, workers, one-line errors."""

from __future__ import annotations

import json

import pytest
import torch
from support import LOG_ALERTS, assert_same_rows, csv_input, read_csv, run_cli, trained

from seq2seq.fast.threads import one_core_workers
from seq2seq.recommender import Recommender


@pytest.fixture(scope="module")
def recommender(tmp_path_factory) -> Recommender:
    return Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)


def test_cli_translates_a_file_and_prints_the_summary(recommender, tmp_path, tmp_path_factory):
    model = trained(tmp_path_factory.getbasetemp()).best
    result = run_cli("translate", "--model", str(model), "--input", str(csv_input(tmp_path)),
                     "--output", str(tmp_path / "out.jsonl"))
    assert result.status == 0 and result.stdout == ""
    assert f"out.jsonl: {len(LOG_ALERTS)} rows: {len(LOG_ALERTS)} translated, 0 with errors; " in result.error_lines[-1]
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [w["recommendation"] for w in written] == recommender.translate(LOG_ALERTS)


def test_cli_workers_of_one_core_each_write_the_rows_of_one_worker(tmp_path, tmp_path_factory):
    model = trained(tmp_path_factory.getbasetemp()).best
    rows, threads = {}, torch.get_num_threads()
    for workers in (1, 3):
        output = tmp_path / f"out-{workers}.csv"
        result = run_cli("translate", "--model", str(model), "--input", str(csv_input(tmp_path)),
                         "--output", str(output), "--batch-size", "2", "--workers", str(workers))
        assert result.status == 0, result.stderr
        rows[workers] = read_csv(output)
        assert torch.get_num_threads() == threads  # the one-core workers leave the process's count as it was
    assert_same_rows(rows[3], rows[1])


@pytest.mark.parametrize(("options", "words"), [
    (["--column", "nope"], ["no column 'nope'", "columns found: id, source, note"]),
    (["--resume", "--output", "/dev/null/x.csv", "--input", "missing.csv"], ["missing.csv: file not found"]),
    (["--workers", "-1"], ["--workers must be in [0, 256] (0: one per core), got -1"]),
    (["--workers", "100000"], ["--workers must be in [0, 256] (0: one per core), got 100000"]),
])
def test_cli_unusable_input_is_one_error_line_with_exit_status_2(tmp_path, tmp_path_factory, options, words):
    model = trained(tmp_path_factory.getbasetemp()).best
    defaults = ["--input", str(csv_input(tmp_path)), "--output", str(tmp_path / "out.csv")]
    result = run_cli("translate", "--model", str(model), *defaults, *options)
    assert result.status == 2
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith("seq2seq: error: ")
    assert all(word in result.error_lines[0] for word in words), result.error_lines
    assert not (tmp_path / "out.csv").exists()


def test_cli_input_of_unknown_type_names_the_format_flag_and_loads_no_model(tmp_path):
    log = tmp_path / "alerts.log"
    log.write_text("pump low\n", encoding="utf-8")
    result = run_cli("translate", "--model", str(tmp_path / "none.pt"), "--input", str(log), "--output",
                     str(tmp_path / "out.csv"))
    assert result.status == 2
    assert result.error_lines == [f"seq2seq: error: {log}: unknown file type '.log': expected .csv, .tsv, .jsonl or "
                                  ".txt (or pass --format csv|tsv|jsonl|txt)"]
    assert sorted(tmp_path.iterdir()) == [log]


@pytest.mark.parametrize(("output", "words"), [
    ("out.json", "out.json: unknown file type '.json' for --output: expected .csv, .tsv, .jsonl or .txt (or no "
                 "extension, for the input's format)"),
    ("newdir/", "newdir/: names a folder; --output needs a file name"),
    ("/dev/null", "/dev/null: is not a regular file (a device or a pipe); give the name of a file to write"),
], ids=["unknown-extension", "trailing-slash", "device"])
def test_cli_an_output_the_job_would_write_wrongly_is_refused_before_the_model_loads(tmp_path, output, words):
    log = tmp_path / "alerts.csv"
    log.write_text("source\npump low\n", encoding="utf-8")
    result = run_cli("translate", "--model", str(tmp_path / "none.pt"), "--input", str(log), "--output",
                     output if output.startswith("/") else f"{tmp_path}/{output}")
    assert result.status == 2
    assert result.error_lines == [f"seq2seq: error: {'' if output.startswith('/') else f'{tmp_path}/'}{words}"]
    assert sorted(tmp_path.iterdir()) == [log]


def test_cli_file_options_without_input_are_an_error(tmp_path_factory):
    model = trained(tmp_path_factory.getbasetemp()).best
    result = run_cli("translate", "--model", str(model), "--output", "x.csv")
    assert result.status == 2
    assert result.error_lines == ["seq2seq: error: --output: only with --input "
                                  "(without it, alerts are read from stdin)"]


def test_one_core_workers_run_on_one_intra_op_thread_and_restore_the_count():
    before = torch.get_num_threads()
    with one_core_workers(3):
        assert torch.get_num_threads() == 1
    with one_core_workers(1):
        assert torch.get_num_threads() == before
    assert torch.get_num_threads() == before

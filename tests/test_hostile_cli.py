"""The command line's own streams and flags under hostile use: a path flag left empty, a reader that closes
stdout early, a full stdout, stdin that is not UTF-8, and the words of a few refusals. Each refusal is one
line with exit status 2 (a closed pipe: a quiet end), never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import assert_one_line_error, run_cli, trained

from seq2seq import cli
from seq2seq.recommender import Recommender

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return trained(tmp_path_factory.getbasetemp()).best


@pytest.mark.parametrize(("argv", "flag"), [
    (["translate", "--model", "m.pt", "--input", ""], "--input"),
    (["translate", "--model", "m.pt", "--input", "in.csv", "--output", ""], "--output"),
    (["translate", "--model", "m.pt", "--input", "in.csv", "--output", "o.csv", "--attention-out", ""],
     "--attention-out"),
    (["translate", "--model", "m.pt", "--input", "in.csv", "--output", "o.csv", "--heatmaps", ""], "--heatmaps"),
    (["translate", "--model", ""], "--model"),
    (["evaluate", "--model", "m.pt", "--data", "d.tsv", "--hypotheses", ""], "--hypotheses"),
    (["evaluate", "--model", "m.pt", "--data", ""], "--data"),
    (["train", "--output-dir", ""], "--output-dir"),
    (["train", "--output-dir", "run", "--config", ""], "--config"),
    (["average", "--inputs", "a.pt", "b.pt", "--output", ""], "--output"),
    (["ensemble", "--inputs", "a.pt", "", "--output", "e.pt"], "--inputs"),
    (["feedback", "export", "--db", "f.sqlite", "--output", ""], "--output"),
    (["feedback", "stats", "--db", ""], "--db"),
])
def test_an_empty_path_is_refused_naming_its_flag_and_nothing_is_written(tmp_path, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)  # an empty path would otherwise be the current folder
    assert_one_line_error(run_cli(*argv), f"argument {flag}: empty path")
    assert list(tmp_path.iterdir()) == []


def test_a_reader_that_closes_stdout_early_ends_the_job_quietly(model, tmp_path):
    alerts = tmp_path / "alerts.txt"
    alerts.write_text("pump vibration high\n" * 5000, encoding="utf-8")  # more JSON than a pipe holds
    with alerts.open("rb") as stdin:
        process = subprocess.Popen([sys.executable, "-m", "seq2seq", "translate", "--model", str(model), "--json"],
                                   cwd=ROOT, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout.readline()  # as `| head -1`: one line, then the reader is gone
        process.stdout.close()
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=300)
    assert (status, stderr) == (141, "")  # as a shell tool ended by SIGPIPE: no traceback, no message


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stdout_is_a_one_line_error_naming_it(model):
    with open("/dev/full", "wb") as full:
        process = subprocess.run([sys.executable, "-m", "seq2seq", "translate", "--model", str(model)], cwd=ROOT,
                                 input=b"pump vibration high\n", stdout=full, stderr=subprocess.PIPE, timeout=300)
    assert process.returncode == 2
    assert process.stderr.decode().splitlines() == ["seq2seq: error: stdout: cannot write (No space left on device)"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_stdin_in_utf16_or_utf32_is_refused_as_a_file_is(model, tmp_path, encoding):
    text = "pump vibration high\nbelt worn\n".encode(encoding)  # with a byte-order mark, as PowerShell writes it
    source = tmp_path / "in.txt"
    source.write_bytes(text)
    from_file = assert_one_line_error(run_cli("translate", "--model", str(model), "--input", str(source),
                                              "--output", str(tmp_path / "out.txt")))
    result = run_cli("translate", "--model", str(model), stdin=text)
    from_stdin = assert_one_line_error(result, "seq2seq: error: stdin: ")
    assert from_stdin.removeprefix("seq2seq: error: stdin") == from_file.removeprefix(f"seq2seq: error: {source}")
    assert result.stdout == ""


def test_a_utf8_byte_order_mark_on_stdin_is_not_part_of_the_first_alert(model):
    plain = run_cli("translate", "--model", str(model), "--json", stdin=b"pump vibration high\n")
    marked = run_cli("translate", "--model", str(model), "--json", stdin=b"\xef\xbb\xbfpump vibration high\n")
    assert marked.status == 0 and marked.stdout == plain.stdout


@pytest.mark.parametrize("workers", ["-1", "257"])
def test_workers_out_of_range_are_refused_on_stdin_as_with_a_file(model, workers):
    result = run_cli("translate", "--model", str(model), "--workers", workers, stdin=b"pump vibration high\n")
    assert_one_line_error(result, f"--workers must be in [0, 256] (0: one per core), got {workers}")


def test_a_stdin_line_of_nul_bytes_past_the_first_is_an_empty_alert_that_says_why(model):
    result = run_cli("translate", "--model", str(model), stdin=b"pump vibration high\n\x00\x00\nbelt worn\n")
    assert result.status == 0, result.stderr
    assert result.stdout_lines[1] == "" and len(result.stdout_lines) == 3
    assert result.error_lines == ["warning: stdin: line 2: empty alert: only control characters (U+0000 first), "
                                  "read as spaces"]


def test_json_on_stdin_gives_an_undecodable_line_its_own_warning_and_keeps_every_line_in_place(model):
    result = run_cli("translate", "--model", str(model), "--json",
                     stdin=b"pump vibration high\ncaf\xe9 pump\n\nbelt worn\n")
    assert result.status == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout_lines]
    assert [line["alert"] for line in lines] == ["pump vibration high", "caf\\xe9 pump", "", "belt worn"]
    assert [line["warning"] for line in lines] == [None, "not valid UTF-8 (byte 0xe9 at column 4)", "empty alert", None]
    assert lines[1]["recommendation"] == "" and lines[1]["score"] is None
    expected = Recommender.from_checkpoint(model).translate(["pump vibration high", "belt worn"])
    assert [lines[0]["recommendation"], lines[3]["recommendation"]] == expected
    assert result.error_lines == ["warning: stdin: line 2: not valid UTF-8 (byte 0xe9 at column 4); empty "
                                  "recommendation written"]


def test_n_best_refusals_name_no_beam_the_user_did_not_choose(model):
    zero = assert_one_line_error(run_cli("translate", "--model", "never-read.pt", "--n-best", "0", stdin=b"pump\n"),
                                 "--n-best", "got 0")
    assert "beam_size is" not in zero
    beam = Recommender.from_checkpoint(model).search.beam_size
    wide = run_cli("translate", "--model", str(model), "--n-best", str(beam + 2), stdin=b"pump\n")
    assert_one_line_error(wide, f"the model's beam size is {beam}", f"pass --beam-size {beam + 2}")


def test_feedback_without_a_subcommand_names_the_subcommands():
    line = assert_one_line_error(run_cli("feedback"), "{export,stats}")
    assert "feedback_command" not in line


@pytest.mark.parametrize("after_s", [0.25, 0.5, 1.0, 1.5])
def test_ctrl_c_while_torch_is_still_loading_is_answered_in_one_line(after_s):
    # torch alone takes over a second to import; the package itself loads nothing (seq2seq/__init__.py). Not
    # earlier: the interpreter's own start-up (site, before any code of the project runs) took 0.1 s on a busy
    # two-core machine, and a Ctrl-C there is Python's traceback, whatever a program does.
    child = subprocess.Popen([sys.executable, "-m", "seq2seq", "translate", "--model", "m.pt"], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        child.wait(after_s)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=60)
    assert (child.returncode, stderr) in [(130, "seq2seq: interrupted\n"),
                                          (2, "seq2seq: error: m.pt: checkpoint not found\n")]  # a machine that fast


def test_a_program_started_with_ctrl_c_ignored_keeps_it_ignored_while_loading():
    """A job a script put in the background ("&") starts with Ctrl-C ignored, and ignores it once loaded; while
    loading it was ended all the same."""
    ignored = ["sh", "-c", 'trap "" INT; exec "$0" -m seq2seq translate --model m.pt', sys.executable]
    child = subprocess.Popen(ignored, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        child.wait(0.5)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=60)
    assert (child.returncode, stderr) == (2, "seq2seq: error: m.pt: checkpoint not found\n")


def test_the_program_ignores_ctrl_c_once_its_work_is_done_rather_than_print_torch_s_exit_handlers():
    probe = ("import signal, seq2seq.cli as cli; cli.main = lambda: 0; status = cli.command(); "
             "print(status, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          cwd=ROOT).stdout == "0 True\n"


@pytest.mark.parametrize("fault", [RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                                                "68719476736 bytes. Error code 12 (Cannot allocate memory)"),
                                   MemoryError()], ids=["torch", "python"])
def test_sizes_that_do_not_fit_in_memory_are_one_line_naming_what_to_make_smaller(tmp_path, monkeypatch, fault):
    def allocating(args):
        raise fault

    monkeypatch.setattr(cli, "run_train", allocating)
    result = run_cli("train", "--output-dir", str(tmp_path / "run"))
    assert_one_line_error(result, "out of memory", "try smaller model sizes (model.embed_size, encoder_hidden, "
                                  "decoder_hidden) or batches (train.batch_tokens, --batch-size)")


def test_resume_is_advised_after_a_stop_only_where_there_is_something_to_resume(tmp_path):
    run = argparse.Namespace(command="train", output_dir=str(tmp_path / "run"))
    assert not cli._resumable(run, False)  # a recipe stopped while its members were starting
    (tmp_path / "run" / "member-2").mkdir(parents=True)
    (tmp_path / "run" / "member-2" / "last.pt").write_bytes(b"")
    assert cli._resumable(run, False) and not cli._resumable(run, True)  # torchrun training: not resumable split
    job = argparse.Namespace(command="translate", input="in.csv", output=str(tmp_path / "out.csv"))
    assert not cli._resumable(job, False)  # stopped while the model loaded: no output yet
    (tmp_path / "out.csv").write_text("source\n", encoding="utf-8")
    assert cli._resumable(job, False) and cli._resumable(job, True)


def test_a_file_name_holding_an_escape_or_a_line_break_is_shown_escaped_in_one_line(tmp_path):
    name = tmp_path / "log\x1b[31m\nnext.log"  # a type no reader knows: refused before any model loads
    name.write_text("pump low\n", encoding="utf-8")
    result = run_cli("translate", "--model", str(tmp_path / "none.pt"), "--input", str(name), "--output",
                     str(tmp_path / "out.csv"))
    assert_one_line_error(result, "log\\x1b[31m\\nnext.log: unknown file type '.log'")

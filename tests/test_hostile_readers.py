"""Hostile input files: a file that is not UTF-8 text or names a column twice is refused in one line
(its bytes escaped in the message); a line too long to hold is read in bounded memory and flagged as a
bad row, and the job goes on; an alert with no known word gets a warning, not a confident answer."""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support import (
    LOG_ALERTS,
    assert_one_line_error,
    csv_input,
    file_states,
    read_csv,
    run_cli,
    trained,
    write_csv,
)

from seq2seq.errors import DataError
from seq2seq.files import MAX_LINE_BYTES, read_lines
from seq2seq.recommender import Recommender
from seq2seq.serving.batch import translate_file
from seq2seq.serving.incident_log import read_columns

LONG = MAX_LINE_BYTES + 1000  # a field or line just over the limit
CSV_TEXT = "source,note\npump vibration high,a\nbelt worn,b\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return trained(tmp_path_factory.getbasetemp()).best


@pytest.fixture(scope="module")
def recommender(model) -> Recommender:
    return Recommender.from_checkpoint(model)


def translate(model: Path, source: Path, output: Path, *options: str):
    return run_cli("translate", "--model", str(model), "--input", str(source), "--output", str(output), *options)


NOT_TEXT = [
    ("utf16.csv", CSV_TEXT.encode("utf-16"), "UTF-16 text (byte-order mark ff fe)"),
    ("utf16be.tsv", codecs.BOM_UTF16_BE + "source\tx\npump\t1\n".encode("utf-16-be"), "UTF-16 text"),
    ("utf32.jsonl", '{"source": "pump"}\n'.encode("utf-32"), "UTF-32 text"),
    ("nomark.csv", CSV_TEXT.encode("utf-16-le"), "a NUL byte on line 1"),
    ("image.csv", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "binary file"),
    ("late.tsv", b"source\tx\npump\t1\nfan\0\t2\n", "a NUL byte on line 3"),
]


@pytest.mark.parametrize(("name", "data", "words"), NOT_TEXT, ids=[case[0] for case in NOT_TEXT])
def test_a_file_that_is_not_utf8_text_is_refused_in_one_line_and_nothing_is_written(model, tmp_path, name, data,
                                                                                    words):
    source = tmp_path / name
    source.write_bytes(data)
    output = tmp_path / f"out{source.suffix}"
    before = file_states(source, output)
    line = assert_one_line_error(translate(model, source, output), str(source), words)
    assert "columns found" not in line
    assert file_states(source, output) == before


def test_an_endless_device_is_refused_at_once(model, tmp_path):
    assert_one_line_error(translate(model, Path("/dev/zero"), tmp_path / "out.txt", "--format", "txt"),
                          "/dev/zero: not UTF-8 text")
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize(("name", "data", "words"), NOT_TEXT, ids=[case[0] for case in NOT_TEXT])
def test_training_and_sensor_readers_refuse_the_same_files(tmp_path, name, data, words):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataError, match=f"{re.escape(str(path))}: .*{re.escape(words)}"):
        read_lines(path)


@pytest.mark.parametrize(("name", "text", "words"), [
    ("dup.csv", "source,note,note\npump,a,b\n", "column 'note' appears twice (columns 2 and 3)"),
    ("dup.tsv", "source\tsource\npump\tfan\n", "column 'source' appears twice"),
    ("spaced.csv", "id,source, source \n1,pump,fan\n", "column 'source' appears twice"),
    ("dup.jsonl", '{"source": "pump", "source": "fan"}\n', "line 1: key 'source' appears twice"),
    ("late.jsonl", '{"source": "pump"}\n{"source": "fan", "x": {"a": 1, "a": 2}}\n', "line 2: key 'a' appears twice"),
])
def test_a_column_named_twice_is_refused_rather_than_silently_resolved(model, tmp_path, name, text, words):
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    output = tmp_path / f"out{source.suffix}"
    assert_one_line_error(translate(model, source, output), words)
    assert not output.exists() or output.suffix == ".jsonl"  # a later JSON line fails once rows are written


@pytest.mark.parametrize("header", [b"id,\x1b[31mred\x1b[0m", b"id,bell\x07", b"id,form\x0cfeed", b"id,\xc2\x9bcsi",
                                    b"id,rtl\xe2\x80\xaeoverride"])
def test_control_bytes_of_a_header_reach_the_message_escaped(model, tmp_path, header):
    source = tmp_path / "in.csv"
    source.write_bytes(header + b",x\n1,2,3\n")
    result = translate(model, source, tmp_path / "out.csv")
    assert_one_line_error(result, "columns found: id, ")
    assert not any(ch in result.stderr for ch in "\x1b\x07\x0c\x9b\u202e"), repr(result.stderr)
    assert "\\x" in result.stderr or "\\u" in result.stderr


def test_a_header_that_is_not_utf8_is_a_problem_with_the_file_not_garbage_columns(model, tmp_path):
    source = tmp_path / "in.csv"
    source.write_bytes("problème,x\nfan,1\n".encode("latin-1"))
    line = assert_one_line_error(translate(model, source, tmp_path / "out.csv"), "line 1: the header is unreadable",
                                 "not valid UTF-8 (byte 0xe8")
    assert "columns found" not in line


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "txt"])
def test_a_line_too_long_to_hold_is_a_flagged_row_and_the_job_goes_on(recommender, tmp_path, fmt):
    alerts = [LOG_ALERTS[0], "x" * LONG, LOG_ALERTS[1]]
    source = tmp_path / f"in.{fmt}"
    if fmt == "csv":
        write_csv(source, [[str(i), alert, "note"] for i, alert in enumerate(alerts)])
    elif fmt == "tsv":
        source.write_text("".join(f"{i}\t{a}\n" for i, a in enumerate(["source", *alerts])), encoding="utf-8")
    elif fmt == "jsonl":
        source.write_text("".join(json.dumps({"source": a}) + "\n" for a in alerts), encoding="utf-8")
    else:
        source.write_text("".join(a + "\n" for a in alerts), encoding="utf-8")
    before = file_states(source)
    summary = translate_file(recommender, source, tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert len(rows) == 3 and (summary.rows, summary.errors) == (3, 1)
    assert rows[1]["recommendation"] == "" and f"longer than {MAX_LINE_BYTES} bytes" in rows[1]["error"]
    line = 3 if fmt in ("csv", "tsv") else 2  # its fields are empty, the id too: the input line finds its record
    assert rows[1]["error"].endswith(f"(input line {line}: its fields are left empty here)")
    assert [rows[0]["recommendation"], rows[2]["recommendation"]] == recommender.translate(LOG_ALERTS[:2])
    assert file_states(source) == before


def test_a_long_line_inside_a_quoted_csv_field_flags_that_record_only(recommender, tmp_path):
    source = tmp_path / "in.csv"
    source.write_text(f'id,source,note\n1,{LOG_ALERTS[0]},"a\n{"y" * LONG}\nend"\n2,{LOG_ALERTS[1]},"odd ""quote\n'
                      f'{"z" * LONG}"""\n3,{LOG_ALERTS[2]},plain\n', encoding="utf-8")
    translate_file(recommender, source, tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert [bool(row["error"]) for row in rows] == [True, True, False]
    assert rows[2]["recommendation"] == recommender.translate([LOG_ALERTS[2]])[0]


def test_a_200_kb_quoted_csv_field_flags_its_row_from_the_cli(model, tmp_path):
    source = write_csv(tmp_path / "in.csv", [["1", LOG_ALERTS[0], "a"], ["2", LOG_ALERTS[1], "b" * 200_000],
                                             ["3", LOG_ALERTS[2], "c"]])
    result = translate(model, source, tmp_path / "out.csv")
    assert result.status == 0, result.stderr
    rows = read_csv(tmp_path / "out.csv")
    assert [row["id"] for row in rows] == ["1", "", "3"]  # the fields of a line too long to read stay empty
    assert [bool(row["error"]) for row in rows] == [False, True, False]


@pytest.mark.parametrize("alert", ["🔥🔥🔥", "🔥 💧 ⚠", "жжж 中文"])  # zero-width spaces alone: an empty alert
def test_an_alert_with_no_known_word_gets_a_warning_and_an_out_of_scope_verdict_not_an_answer(recommender, alert):
    result = recommender.recommend([alert, LOG_ALERTS[0], " "])
    assert result[0].text == "" and "no word of the alert is known" in result[0].warning
    assert (result[0].verdict, result[0].trust, result[0].similar) == ("out-of-scope", 0.0, [])  # not null: unlike all
    assert result[1].text and result[1].warning is None
    assert (result[2].verdict, result[2].trust) == (None, None)  # an empty alert is no alert to judge


def test_a_csv_of_csv_input_keeps_its_rows(recommender, tmp_path):
    """The bounded reader reads an ordinary file exactly as before."""
    source = csv_input(tmp_path)
    translate_file(recommender, source, tmp_path / "out.csv")
    assert [row["source"] for row in read_csv(tmp_path / "out.csv")] == LOG_ALERTS


MEMORY_CHILD = """
import resource, sys
import seq2seq.cli
size = int(open('/proc/self/status').read().split('VmSize:')[1].split()[0]) * 1024
limit = size + int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
raise SystemExit(seq2seq.cli.main(sys.argv[2:]))
"""
MEMORY_MARGIN = 1 << 30  # address space beyond the loaded program: model, threads, one bounded line
ENDLESS = 3 << 29  # bytes of one line: more than the margin, so holding it whole would fail


@pytest.mark.slow
def test_an_endless_line_is_read_in_bounded_memory(model, tmp_path):
    """Under an address-space limit smaller than the line, the job ends with the line flagged."""
    fifo = tmp_path / "endless.txt"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("wb") as pipe:
            pipe.write(LOG_ALERTS[0].encode() + b"\n")
            block = b"a" * (1 << 20)
            for _ in range(ENDLESS // len(block)):
                pipe.write(block)
            pipe.write(b"\n" + LOG_ALERTS[1].encode() + b"\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    output = tmp_path / "out.csv"
    argv = ["translate", "--model", str(model), "--input", str(fifo), "--output", str(output), "--format", "txt",
            "--workers", "1"]
    child = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(MEMORY_MARGIN), *argv], capture_output=True,
                           text=True, timeout=300, env={**os.environ, "MALLOC_ARENA_MAX": "2"})
    writer.join(timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]
    rows = read_csv(output)
    assert [row["source"] for row in rows] == [LOG_ALERTS[0], "", LOG_ALERTS[1]]
    assert "longer than" in rows[1]["error"] and rows[0]["recommendation"] and rows[2]["recommendation"]


NOT_UTF8 = {"latin-1": b"caf\xe9", "cp1252-quotes": b"\x93bolt\x94", "cut-sequence": b"temp \xc3",
            "overlong": b"\xc0\xaf", "lone-continuation": b"\x80 high"}  # the first non-ASCII byte is the bad one
LINE_STARTS = {"csv": "1,pump ", "tsv": "1\tpump ", "jsonl": '{"id": 1, "source": "pump ', "txt": "pump "}


def _fault(bad: bytes, fmt: str) -> str:
    """How a line ``LINE_STARTS[fmt] + bad`` is named: its first byte that is not ASCII, and the column of it."""
    start = next(i for i, byte in enumerate(bad) if byte > 0x7f)
    return f"not valid UTF-8 (byte 0x{bad[start]:02x} at column {len(LINE_STARTS[fmt]) + start + 1})"


def _log_with(fmt: str, bad: bytes) -> bytes:
    """Three rows of ``fmt`` whose second holds ``bad``, a byte sequence that is not UTF-8."""
    alerts = [LOG_ALERTS[0].encode(), b"pump " + bad, LOG_ALERTS[1].encode()]
    if fmt == "csv":
        return b"id,source\n" + b"".join(b"%d,%s\n" % (i, a) for i, a in enumerate(alerts))
    if fmt == "tsv":
        return b"id\tsource\n" + b"".join(b"%d\t%s\n" % (i, a) for i, a in enumerate(alerts))
    if fmt == "jsonl":
        return b"".join(b'{"id": %d, "source": "%s"}\n' % (i, a) for i, a in enumerate(alerts))
    return b"".join(a + b"\n" for a in alerts)


@pytest.mark.parametrize("bad", NOT_UTF8.values(), ids=NOT_UTF8.keys())
@pytest.mark.parametrize("fmt, out", [("csv", "csv"), ("tsv", "tsv"), ("jsonl", "csv"), ("txt", "csv"),
                                      ("txt", "txt")])  # JSONL output escapes them: test_jsonl_output_...
def test_a_row_that_is_not_utf8_is_flagged_and_written_back_with_its_bytes(model, recommender, tmp_path, fmt, out,
                                                                             bad):
    source = tmp_path / f"in.{fmt}"
    source.write_bytes(_log_with(fmt, bad))
    before = file_states(source)
    result = translate(model, source, tmp_path / f"out.{out}")
    assert result.status == 0, result.stderr
    assert file_states(source) == before
    written = (tmp_path / f"out.{out}").read_bytes()
    fault = f"line {2 if fmt in ('txt', 'jsonl') else 3}: {_fault(bad, fmt)}"
    translations = recommender.translate(LOG_ALERTS[:2])
    if out == "txt":  # one recommendation per line, the row's fault on stderr with its line
        assert written.decode("utf-8").split("\n") == [translations[0], "", translations[1], ""]
        assert any(fault in line for line in result.error_lines), result.stderr
        return
    assert b"pump " + bad in written  # never replaced by U+FFFD: the bytes as they came
    lines = written.split(b"\n")[:-1]
    assert len(lines) == 3 + (out != "jsonl")  # every row, in order
    assert [line.decode("utf-8") for i, line in enumerate(lines) if i != len(lines) - 2]  # the others are UTF-8
    assert _fault(bad, fmt).encode() in lines[-2]
    for line, translation in zip((lines[-3], lines[-1]), translations, strict=True):
        assert translation.encode() in line


@pytest.mark.parametrize("bad", NOT_UTF8.values(), ids=NOT_UTF8.keys())
def test_a_stdin_line_that_is_not_utf8_gets_an_empty_line_and_a_warning_naming_it(model, bad):
    result = run_cli("translate", "--model", str(model),
                     stdin=b"%s\npump %s\n%s\n" % (LOG_ALERTS[0].encode(), bad, LOG_ALERTS[1].encode()))
    assert result.status == 0 and len(result.stdout_lines) == 3 and result.stdout_lines[1] == ""
    assert result.error_lines == [f"warning: stdin: line 2: {_fault(bad, 'txt')}; empty recommendation written"]


@pytest.mark.parametrize("escape", ["\\ud800", "\\udce9", "\\udfff x"])
@pytest.mark.parametrize("key", ["source", "note"])
def test_a_json_escape_for_half_a_character_is_refused_in_one_line(model, tmp_path, escape, key):
    source = tmp_path / "in.jsonl"
    source.write_text(f'{{"id": 1, "{key}": "{escape}"}}\n{{"source": "belt worn", "note": ""}}\n', encoding="utf-8")
    before = file_states(source, tmp_path / "out.jsonl")
    result = translate(model, source, tmp_path / "out.jsonl")
    assert_one_line_error(result, f"{source}: line 1: the escape '{escape[:6]}' is half of a character")
    assert file_states(source, tmp_path / "out.jsonl") == before


def unescaped(text: str) -> bytes:
    """The bytes ``text`` stands for by the documented escape rule: each ``\\xNN`` one byte, the rest UTF-8."""
    return re.sub(rb"\\x([0-9a-f]{2})", lambda kept: bytes.fromhex(kept.group(1).decode()), text.encode("utf-8"))


def jsonl_rows(path: Path) -> list[dict]:
    """Every line of a JSONL output read by a strict reader: UTF-8, each line one JSON object."""
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").split("\n")[:-1]]


@pytest.mark.parametrize("bad", NOT_UTF8.values(), ids=NOT_UTF8.keys())
@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "txt"])
def test_jsonl_output_of_a_row_not_utf8_is_json_that_gives_back_its_bytes_by_the_escape_rule(model, recommender,
                                                                                           tmp_path, fmt, bad):
    source, output = tmp_path / f"in.{fmt}", tmp_path / "out.jsonl"
    source.write_bytes(_log_with(fmt, bad))
    result = translate(model, source, output)
    assert result.status == 0, result.stderr
    rows = jsonl_rows(output)
    assert [unescaped(row["source"]) for row in rows] == [LOG_ALERTS[0].encode(), b"pump " + bad,
                                                           LOG_ALERTS[1].encode()]  # every row, in order
    assert [row["error"] for row in rows] == ["", _fault(bad, fmt), ""]
    assert [rows[0]["recommendation"], rows[2]["recommendation"]] == recommender.translate(LOG_ALERTS[:2])
    if fmt != "txt":
        assert [row["id"] for row in rows] == (["0", "1", "2"] if fmt != "jsonl" else [0, 1, 2])


@pytest.mark.parametrize("bad", NOT_UTF8.values(), ids=NOT_UTF8.keys())
@pytest.mark.parametrize("out", ["jsonl", "csv"])
def test_a_jsonl_log_whose_first_record_is_not_utf8_has_it_as_a_bad_row_not_a_bad_header(model, recommender,
                                                                                       tmp_path, out, bad):
    source, output = tmp_path / "in.jsonl", tmp_path / f"out.{out}"
    source.write_bytes(b'{"source": "pump %s"}\n{"source": "%s"}\n' % (bad, LOG_ALERTS[0].encode()))
    result = translate(model, source, output)
    assert result.status == 0, result.stderr
    start = next(i for i, byte in enumerate(bad) if byte > 0x7f)
    column = len('{"source": "pump ') + start + 1
    fault = f"not valid UTF-8 (byte 0x{bad[start]:02x} at column {column})"
    rows = jsonl_rows(output) if out == "jsonl" else list(csv.DictReader(output.read_bytes().decode(
        "utf-8", "surrogateescape").splitlines()))
    assert [row["error"] for row in rows] == [fault, ""]
    assert [row["recommendation"] for row in rows] == ["", *recommender.translate(LOG_ALERTS[:1])]
    if out == "jsonl":
        assert unescaped(rows[0]["source"]) == b"pump " + bad
    else:
        assert b"pump " + bad in output.read_bytes()  # table output keeps the bytes as they came


@pytest.mark.parametrize(("records", "recommended"), [
    ([b'{"text": "caf\xe9"}', b'{"source": "%s"}', b'{"text": "belt worn"}'], [False, True, False]),
    ([b'{"x": 1, "problem": "caf\xe9"}', b'{"x": 2, "problem": "%s"}'], [False, True]),
], ids=["source-seen-first-at-line-2", "problem"])
def test_without_a_named_key_the_alert_key_is_chosen_at_the_first_readable_jsonl_record(recommender, tmp_path,
                                                                                       records, recommended):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(record.replace(b"%s", LOG_ALERTS[0].encode()) + b"\n" for record in records))
    translate_file(recommender, source, tmp_path / "out.jsonl")
    rows = jsonl_rows(tmp_path / "out.jsonl")
    assert [bool(row["recommendation"]) for row in rows] == recommended
    assert rows[0]["error"].startswith("not valid UTF-8")


def test_a_jsonl_key_ambiguous_after_an_unreadable_first_record_is_refused_before_anything_is_written(model,
                                                                                                    tmp_path):
    source, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b'{"text": "caf\xe9"}\n{"text": "pump low"}\n{"source": "belt worn"}\n')
    before = file_states(source, output, tmp_path / "out.jsonl.job.json")
    assert_one_line_error(translate(model, source, output), f"{source}: line 3: key 'source' makes the alert key "
                          "ambiguous: line 2 took 'text'")
    assert file_states(source, output, tmp_path / "out.jsonl.job.json") == before


def test_a_jsonl_log_from_a_pipe_whose_first_record_is_not_utf8_goes_on(recommender, tmp_path):
    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b'{"source": "caf\xe9"}\n{"source": "%s"}\n'
                                                             % LOG_ALERTS[0].encode(),))
    writer.start()
    summary = translate_file(recommender, fifo, tmp_path / "out.jsonl")
    writer.join()
    rows = jsonl_rows(tmp_path / "out.jsonl")
    assert (summary.rows, summary.errors) == (2, 1) and unescaped(rows[0]["source"]) == b"caf\xe9"
    assert rows[1]["recommendation"] == recommender.translate(LOG_ALERTS[:1])[0]


@pytest.mark.parametrize("data", ['{"source": "caf\u00e9"}\n'.encode("utf-16"), '{"source": "pump"}\n'.encode(
    "utf-16-le")], ids=["utf-16", "utf-16-no-mark"])
def test_a_jsonl_file_that_is_not_utf8_text_is_still_refused_whole_not_read_as_bad_rows(model, tmp_path, data):
    source = tmp_path / "in.jsonl"
    source.write_bytes(data)
    assert_one_line_error(translate(model, source, tmp_path / "out.jsonl"), f"{source}: ", "UTF-")
    assert not (tmp_path / "out.jsonl").exists()


def test_the_keys_offered_for_a_jsonl_log_skip_a_first_record_that_is_not_utf8(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"caf\xe9": "x"}\n{"id": 1, "text": "pump low"}\n')
    assert read_columns(source) == ["id", "text"]

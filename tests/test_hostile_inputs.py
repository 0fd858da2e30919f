"""Hostile inputs that json, csv, sqlite or torch would read without a word, or with their own words: each is
refused in one line naming the file and where, or read as the user meant (old Mac line endings); and a
recommendation shown beside engine alerts keeps what says whether to act on it."""

from __future__ import annotations

import io
import itertools
import json
import pickle
import sqlite3
import warnings
from pathlib import Path

import pytest
from support import assert_one_line_error, file_states, run_cli, trained, trained_rul

from seq2seq.checkpoint import read_checkpoint
from seq2seq.corpus import read_parallel
from seq2seq.errors import CheckpointError, DataError
from seq2seq.files import MAX_LINE_BYTES, read_lines
from seq2seq.jsonl import json_records
from seq2seq.jsontext import MAX_JSON_DEPTH
from seq2seq.serving.feedback import Feedback
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.serving.incident_log import count_rows, open_log, read_columns, read_rows


def rows_of(path: Path, fmt: str) -> tuple[int, list]:
    """(count_rows, the rows read) of an incident log."""
    with open_log(path) as file:
        counted = count_rows(file, fmt)
        _, rows = read_rows(file, path, fmt, None)
        return counted, list(rows)


# -- JSON: numbers and nesting json cannot read or write back ----------------------------------------------
@pytest.mark.parametrize("line, words", [
    ('{"source": "pump low", "id": 1' + "0" * 5000 + "}", "invalid JSON (a number of 5001 digits; at most 4300)"),
    ('{"source": "pump low", "x": ' + "[" * 60000 + "]" * 60000 + "}", "nested more than"),
    ('{"x": ' + "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1) + "}", f"nested more than {MAX_JSON_DEPTH}"),
    ('{"source": "pump low", "r": NaN}', "invalid JSON (NaN is not a JSON number"),
    ('{"source": "pump low", "r": -Infinity}', "invalid JSON (-Infinity is not a JSON number"),
    ('{"source": "pump low", "r": 1e400}', "invalid JSON (the number 1e400 is beyond the float range"),
])
def test_a_jsonl_line_json_cannot_hold_or_write_back_is_refused_naming_the_line(tmp_path, line, words):
    path = tmp_path / "x.jsonl"
    with pytest.raises(DataError) as caught:
        list(json_records(path, ['{"source": "fine"}', "", line]))
    assert str(caught.value).startswith(f"{path}: line 3: ") and words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_ordinary_json_numbers_are_read_as_json_reads_them(tmp_path):
    line = '{"source": "a", "f": 0.1, "e": 1e300, "i": 123456789012345678901234567890, "n": -0, "d": [[1]]}'
    assert [record for _, record, _ in json_records(tmp_path / "x.jsonl", [line])] == [json.loads(line)]


# -- line endings ---------------------------------------------------------------------------------------------
def test_old_mac_line_endings_end_lines_in_text_files(tmp_path):
    source, target = tmp_path / "x.src", tmp_path / "x.tgt"
    source.write_bytes(b"pump low\rfan low\r\rbelt worn")
    target.write_bytes(b"a\r\nb\rc\rd\n")
    assert read_lines(source) == ["pump low", "fan low", "", "belt worn"]
    assert len(read_parallel(source).examples) + len(read_parallel(source).skipped) == 4


def test_a_txt_incident_log_with_old_mac_line_endings_gives_one_row_per_line(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"pump low\rfan low\r\xe9 bad\rbelt worn\r")
    counted, rows = rows_of(path, "txt")
    assert counted == len(rows) == 4
    assert [(row.line, row.alert) for row in rows] == [(1, "pump low"), (2, "fan low"), (3, None), (4, "belt worn")]
    assert rows[2].error.startswith("not valid UTF-8 (byte 0xe9 at column 1)")


def test_a_txt_incident_log_of_old_mac_lines_over_the_line_limit_gives_one_row_per_line(tmp_path):
    path = tmp_path / "log.txt"
    alerts = [f"alert {n} pump low" for n in range(MAX_LINE_BYTES // 8)]
    path.write_bytes("\r".join(alerts).encode() + b"\r")
    assert path.stat().st_size > MAX_LINE_BYTES
    counted, rows = rows_of(path, "txt")
    assert counted == len(rows) == len(alerts)
    assert [(row.line, row.alert, row.error) for row in rows] == [(n, alert, "") for n, alert in enumerate(alerts, 1)]


@pytest.mark.parametrize("name, data", [
    ("log.csv", b"source,note\rpump low,a\rfan low,b\r"),
    ("log.jsonl", b'{"source": "pump low"}\r{"source": "fan low"}\r'),
    ("log.tsv", b"source\tnote\rpump low\ta\r"),
])
def test_a_table_with_old_mac_line_endings_is_refused_in_plain_words(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataError) as caught:
        rows_of(path, name.split(".")[1])
    assert "old Mac line endings" in str(caught.value) and "universal-newline" not in str(caught.value)


# -- the alert key of a JSONL log: the rule (source, else problem, else alert, else the only key) over the log ------
class Unseekable(io.BytesIO):
    """A log that cannot be read ahead, as a pipe."""

    def seekable(self) -> bool:
        return False


@pytest.mark.parametrize("records, line, key, took", [
    ([{"text": "pump low"}, {"source": "fan low"}], 2, "source", "text"),
    ([{"id": 1, "problem": "pump low"}, {"id": 2}, {"id": 3, "problem": "x", "source": "fan low"}], 3, "source",
     "problem"),
    ([{"text": "pump low"}, {"text": "fan low", "note": "x"}], 2, "note", "text"),
])
def test_a_jsonl_log_whose_first_record_takes_another_alert_key_than_the_whole_log_is_refused(tmp_path, records,
                                                                                              line, key, took):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    message = (f"{path}: line {line}: key {key!r} makes the alert key ambiguous: line 1 took {took!r} (source, else "
               "problem, else the only key); name the key that holds the alert")
    with open_log(path) as file, pytest.raises(DataError) as caught:
        read_rows(file, path, "jsonl", None)  # read ahead: refused before a row is read
    assert str(caught.value) == message
    rows = read_rows(Unseekable(path.read_bytes()), path, "jsonl", None)[1]  # a pipe: the rows before it come first
    assert [row.line for row in itertools.islice(rows, line - 1)] == list(range(1, line))
    with pytest.raises(DataError) as caught:
        next(rows)
    assert str(caught.value) == message


def test_naming_the_alert_key_of_a_mixed_jsonl_log_gives_every_row_back(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"text": "pump low"}\n{"source": "fan low", "text": "x"}\n', encoding="utf-8")
    with open_log(path) as file:
        rows = list(read_rows(file, path, "jsonl", "source")[1])
    assert [(row.line, row.alert, row.error) for row in rows] == [(1, None, "no key 'source'"), (2, "fan low", "")]


@pytest.mark.parametrize("lines", [
    ['{"source": "pump low"}', '{"id": 2, "source": "fan low"}', '{"note": "no alert"}', '{"Source": "x"}'],
    ['{"alert": "pump low"}', '{"alert": "fan low"}', "", '{"alert": "belt worn"}'],
    ['{"problem": "pump low", "id": 1}', '{"id": 2, "problem": "fan low", "Problem": "x"}'],
])
def test_a_jsonl_log_whose_records_agree_on_the_alert_key_gives_every_row_back(tmp_path, lines):
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for file in (open_log(path), Unseekable(path.read_bytes())):
        with file:
            assert len(list(read_rows(file, path, "jsonl", None)[1])) == sum(1 for line in lines if line)


def test_the_batch_tab_offers_the_keys_of_every_record_of_a_jsonl_log(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"id": 1, "text": "pump low"}\n\n{"id": 2, "source": "fan low"}\n[1]\n{"late": 3}\n',
                    encoding="utf-8")
    assert read_columns(path) == ["id", "text", "source"]  # up to the line that is no object


# -- tables read as something else ----------------------------------------------------------------------------
@pytest.mark.parametrize("name, header, separator", [
    ("semi.csv", "id;source;note", "semicolons"), ("tabs.csv", "id\tsource\tnote", "tabs"),
    ("commas.tsv", "id,source,note", "commas"),
])
def test_a_lone_column_whose_name_holds_a_separator_is_refused_not_translated_whole(tmp_path, name, header,
                                                                                     separator):
    path = tmp_path / name
    path.write_text(f"{header}\n1{header[2]}pump low{header[2]}x\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        rows_of(path, name.split(".")[1])
    assert str(caught.value).startswith(f"{path}: one column 'id") and f"separated by {separator}?" in str(caught.value)


def test_a_lone_column_without_a_separator_is_still_the_alert_column(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("alert text\npump low\n", encoding="utf-8")
    assert [row.alert for row in rows_of(path, "csv")[1]] == ["pump low"]


@pytest.mark.parametrize("name", ["pairs.tsv", "pairs.csv", "pairs.jsonl"])
def test_a_table_with_a_separate_target_file_is_refused(tmp_path, name):
    table, target = tmp_path / name, tmp_path / "t.tgt"
    table.write_text("source\ttarget\npump\tcheck\n", encoding="utf-8")
    target.write_text("target\ncheck\n", encoding="utf-8")
    with pytest.raises(DataError, match="holds its own targets"):
        read_parallel(table, target_path=target)


# -- feedback databases edited by another program --------------------------------------------------------------
def test_a_read_only_command_leaves_an_empty_file_as_it_was(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    with pytest.raises(DataError, match="empty file, not a feedback database"):
        FeedbackStore(path, create=False)
    assert path.read_bytes() == b""


def test_a_blob_in_a_text_column_is_one_line_naming_the_record(tmp_path):
    path = tmp_path / "feedback.sqlite"
    store = FeedbackStore(path)
    store.add(Feedback.checked("pump low", "check", "wrong", "replace", "Ann"))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE feedback SET correction = X'666f6f' WHERE id = 1")
    db.close()
    with pytest.raises(DataError) as caught:
        FeedbackStore(path, create=False).stats()
    assert str(caught.value) == f"{path}: record 1: correction is not text (found a BLOB)"


@pytest.mark.parametrize("column", ["correction", "alert"])
def test_text_that_is_not_utf8_is_one_line_naming_the_record_and_the_byte(tmp_path, column):
    """SQLite's own error ("Could not decode to UTF-8 column ...") came out as a traceback."""
    path = tmp_path / "feedback.sqlite"
    store = FeedbackStore(path)
    for verdict in ("right", "wrong"):
        store.add(Feedback.checked("pump low", "check", verdict, "replace", "Ann"))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE feedback SET {column} = CAST(X'636166E9' AS TEXT) WHERE id = 2")
    db.close()
    for read in (lambda store: store.stats(), lambda store: store.records()):
        with pytest.raises(DataError) as caught:
            read(FeedbackStore(path, create=False))
        assert str(caught.value) == f"{path}: record 2: {column} is not valid UTF-8 (byte 0xe9 at column 4)"


# -- files that are not checkpoints --------------------------------------------------------------------------
def _not_checkpoints(folder: Path, good: Path) -> dict[str, tuple[Path, str]]:
    data = good.read_bytes()
    files = {"text": (b"pump low\n", "not a checkpoint: a text file"),
             "pickle": (pickle.dumps({"x": 1}), "not a checkpoint written by seq2seq (a pickle, not a zip archive)"),
             "truncated": (data[:5000], "truncated checkpoint (5000 bytes"),
             "empty": (b"", "empty file, not a checkpoint")}
    for name, (content, _) in files.items():
        (folder / f"{name}.pt").write_bytes(content)
    return {name: (folder / f"{name}.pt", words) for name, (_, words) in files.items()}


@pytest.fixture(scope="module")
def translator(tmp_path_factory) -> Path:
    return trained(tmp_path_factory.getbasetemp()).best


def test_a_file_that_is_no_checkpoint_is_said_plainly_and_torch_warns_nothing(tmp_path, translator):
    for path, words in _not_checkpoints(tmp_path, translator).values():
        with warnings.catch_warnings(record=True) as caught_warnings, pytest.raises(CheckpointError) as caught:
            warnings.simplefilter("always")
            read_checkpoint(path)
        assert str(caught.value) == f"{path}: {words}" or str(caught.value).startswith(f"{path}: {words}")
        assert not caught_warnings, [str(w.message) for w in caught_warnings]
        assert "weights_only" not in str(caught.value) and "Errno" not in str(caught.value)


# -- engine alerts with recommendations -----------------------------------------------------------------------
def test_rul_alerts_show_each_recommendation_s_verdict_trust_and_warning(tmp_path_factory, translator):
    rul = trained_rul(tmp_path_factory.getbasetemp())
    common = ["rul", "alerts", "--model", str(rul.output_dir / "best.pt"), "--data", str(rul.train), "--engine", "1",
              "--translator", str(translator)]
    rows = json.loads(run_cli(*common, "--json").stdout)
    recommendations = [r for row in rows for r in row["judgements"]]
    assert recommendations and all(r["verdict"] is not None and r["trust"] is not None for r in recommendations)
    text = run_cli(*common)
    advice = [line for line in text.stdout_lines if "  ->  " in line]
    assert len(advice) == len(recommendations)
    for line, r in zip(advice, recommendations, strict=True):
        assert f"[{r['verdict']}, trust {r['trust']:.2f}" in line
        assert r["warning"] is None or r["warning"] in line


def test_rul_alerts_refuse_a_beam_size_without_a_translator(tmp_path):
    model = tmp_path / "never-read.pt"
    before = file_states(model)
    result = run_cli("rul", "alerts", "--model", str(model), "--data", "x.txt", "--beam-size", "3")
    assert_one_line_error(result, "argument --beam-size: ", "--translator")
    assert file_states(model) == before

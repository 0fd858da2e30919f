"""File mode of translate (seq2seq.serving.batch): rows and columns kept in order, per-row errors, batching,
durable output with exact resume, attention and heatmap companions, and the CLI's one-line errors."""

from __future__ import annotations

import csv
import json
import os
import threading

import numpy as np
import pytest
from support import LOG_ALERTS, LOG_NOTES, MAX_SOURCE_LENGTH, assert_same_rows, csv_input, read_csv, trained, write_csv

from seq2seq.config import SearchConfig
from seq2seq.errors import DataError
from seq2seq.recommender import Recommender
from seq2seq.serving.batch import BatchSummary, translate_file
from seq2seq.serving.destinations import part_path, record_path
from seq2seq.words import word_spans

JUDGED = ["trust", "verdict", "similar_action"]  # how far to trust each row (seq2seq.trust)
LONG_ALERT = " ".join(["compressor temperature high"] * 4)  # over MAX_SOURCE_LENGTH pieces

@pytest.fixture(scope="module")
def recommender(tmp_path_factory) -> Recommender:
    return Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)


def stop_after(rows: int):
    """A progress callback that interrupts the job once ``rows`` rows are written, like Ctrl-C."""

    def progress(done: int, total: int | None) -> None:
        if done >= rows:
            raise KeyboardInterrupt

    return progress


# formats


def test_csv_output_keeps_every_column_and_row_in_order_with_quoting_intact(recommender, tmp_path):
    summary = translate_file(recommender, csv_input(tmp_path), tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert list(rows[0]) == ["id", "source", "note", "recommendation", "score", *JUDGED, "error"]
    assert [(r["id"], r["source"], r["note"]) for r in rows] == [(str(i), a, n) for i, (a, n) in
                                                                 enumerate(zip(LOG_ALERTS, LOG_NOTES, strict=True))]
    assert [r["recommendation"] for r in rows] == recommender.translate(LOG_ALERTS)
    scores = [result.score for result in recommender.recommend(LOG_ALERTS)]
    assert [float(r["score"]) for r in rows] == pytest.approx(scores, abs=1e-4)
    assert all(r["error"] == "" for r in rows)
    assert summary == BatchSummary(len(LOG_ALERTS), len(LOG_ALERTS), 0, 0, summary.seconds)


def test_csv_output_of_a_field_holding_a_lone_carriage_return_reads_back_as_one_row(recommender, tmp_path):
    """The csv module quotes a field for a line feed but not for a lone CR, which every reader takes as a line end:
    unquoted, one row came back as two."""
    path = tmp_path / "in.jsonl"
    notes = ["a\rb", "plain", "c\r\nd"]
    path.write_text("".join(json.dumps({"source": alert, "note": note}) + "\n"
                            for alert, note in zip(LOG_ALERTS, notes, strict=False)), encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert [(r["source"], r["note"]) for r in rows] == list(zip(LOG_ALERTS, notes, strict=False))
    assert [r["recommendation"] for r in rows] == recommender.translate(LOG_ALERTS[:3])


def test_tsv_output_keeps_bare_quotes_and_is_read_without_quote_processing(recommender, tmp_path):
    notes = ['1/2" bolt', '"B" nut missing', "it's", "plain", "x", "y", "z"]
    path = tmp_path / "in.tsv"
    pairs = [("problem", "note"), *zip(LOG_ALERTS, notes, strict=True)]
    path.write_text("".join(f"{alert}\t{note}\n" for alert, note in pairs), encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.tsv")
    lines = [line.split("\t") for line in (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()]
    assert lines[0] == ["problem", "note", "recommendation", "score", *JUDGED, "error"]
    assert [line[:2] for line in lines[1:]] == [list(pair) for pair in zip(LOG_ALERTS, notes, strict=True)]
    assert [line[2] for line in lines[1:]] == recommender.translate(LOG_ALERTS)


def test_tsv_output_of_csv_input_writes_tabs_and_line_breaks_in_fields_as_spaces_and_says_where(recommender,
                                                                                                   tmp_path):
    summary = translate_file(recommender, csv_input(tmp_path), tmp_path / "out.tsv")
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(lines) == 1 + len(LOG_ALERTS)
    rows = [line.split("\t") for line in lines[1:]]
    assert [row[2] for row in rows] == [note.replace("\n", " ").replace("\t", " ") for note in LOG_NOTES]
    flattened = [bool(set(note) & set("\t\r\n")) for note in LOG_NOTES]
    assert [row[-1] for row in rows] == ["column 'note': tab or line break written as a space (TSV cannot hold one; "
                                         "write .csv or .jsonl output to keep it)" if f else "" for f in flattened]
    assert (summary.translated, summary.warned, summary.errors) == (len(LOG_ALERTS), sum(flattened), sum(flattened))
    translate_file(recommender, csv_input(tmp_path), tmp_path / "out.csv")  # CSV holds them: nothing to say
    assert [row["error"] for row in read_csv(tmp_path / "out.csv")] == [""] * len(LOG_ALERTS)


def test_jsonl_output_keeps_every_key_of_each_object_and_adds_the_new_ones(recommender, tmp_path):
    records = [{"id": i, "source": alert, "tags": ["a", {"b": None}], **({"extra": True} if i % 2 else {})}
               for i, alert in enumerate(LOG_ALERTS)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.jsonl")
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    added = ["recommendation", "score", *JUDGED, "error"]
    assert [{k: v for k, v in w.items() if k not in added} for w in written] == records
    assert [list(w)[-len(added):] for w in written] == [added] * len(records)
    assert [w["recommendation"] for w in written] == recommender.translate(LOG_ALERTS)


def test_txt_output_has_one_recommendation_per_line_and_errors_on_stderr(recommender, tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_bytes(f"{LOG_ALERTS[0]}\n\n{LOG_ALERTS[1]}\n".encode() + b"\xff pump\n" + LOG_ALERTS[2].encode())
    summary = translate_file(recommender, path, tmp_path / "out.txt")
    expected = recommender.translate([LOG_ALERTS[0], "", LOG_ALERTS[1], "", LOG_ALERTS[2]])
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "".join(line + "\n" for line in expected)
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [f"warning: {path}: line 2: empty alert",
                        f"warning: {path}: line 4: not valid UTF-8 (byte 0xff at column 1)"]
    assert (summary.rows, summary.translated, summary.errors) == (5, 3, 2)


def test_output_format_follows_the_output_extension_and_txt_input_is_column_source(recommender, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(alert + "\n" for alert in LOG_ALERTS), encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert [r["source"] for r in rows] == LOG_ALERTS
    assert [r["recommendation"] for r in rows] == recommender.translate(LOG_ALERTS)


def test_n_best_adds_numbered_recommendation_and_score_columns(recommender, tmp_path):
    search = SearchConfig(beam_size=3, n_best=2)
    translate_file(recommender, csv_input(tmp_path), tmp_path / "out.csv", search=search)
    rows = read_csv(tmp_path / "out.csv")
    assert list(rows[0])[3:] == ["recommendation", "score", "recommendation_2", "score_2", *JUDGED, "error"]
    for row, result in zip(rows, recommender.recommend(LOG_ALERTS, search), strict=True):
        assert [row["recommendation"], row["recommendation_2"]] == [c.text for c in result.candidates]


@pytest.mark.parametrize(("header", "column", "chosen"), [
    (("id", "problem", "note"), None, "problem"), (("Source", "note"), None, "Source"),
    (("Source", "problem"), None, "problem"),  # exact names first, as seq2seq.corpus chooses
    (("alert",), None, "alert"), (("id", "alert", "note"), "alert", "alert"),
    (("id", "alert", "note"), None, "alert"),  # a feedback export's column: train and evaluate read it so too
    (("problem", "alert"), None, "problem")])
def test_alert_column_is_the_named_one_else_source_then_problem_then_alert_then_the_only_one(recommender, tmp_path,
                                                                                            header, column, chosen):
    rows = [[alert if name == chosen else "x" for name in header] for alert in LOG_ALERTS[:2]]
    translate_file(recommender, write_csv(tmp_path / "in.csv", rows, header), tmp_path / "out.csv", column)
    assert [r["recommendation"] for r in read_csv(tmp_path / "out.csv")] == recommender.translate(LOG_ALERTS[:2])


def test_jsonl_input_to_csv_output_takes_the_first_objects_keys_as_columns(recommender, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"source": "belt worn", "n": 1}\n{"source": "oil level low"}\n{"source": "x", "new": 2}\n',
                    encoding="utf-8")
    with pytest.raises(DataError, match="line 3: key 'new' is not in the first object"):
        translate_file(recommender, path, tmp_path / "out.csv", chunk_rows=2)
    rows = read_csv(tmp_path / "out.csv")  # the chunk before the bad line is kept
    assert [(r["source"], r["n"]) for r in rows] == [("belt worn", "1"), ("oil level low", "")]


EXACT_RECORDS = [  # what json would write back otherwise: 0.1, 100000.0, 0, 1.5, [1.0, {"x": 2.5}], "café"
    '{"source": "belt worn", "f": 0.10000000000000000555, "e": 1E5, "z": -0, "d": 1.50, "n": [1.0e0, {"x": 2.50}], '
    '"i": 123456789012345678901234567890, "s": "caf\\u00e9", "t": true, "u": null}',
    ' { "source" : "oil level low" , "f": -0.0,"e":1e-7 , "z":0,"d":2.50E+3,"n":[ ],"i":-1,"s":"","t":false,"u":{}}\t',
]


def test_jsonl_output_gives_each_record_back_as_written_with_the_new_keys_added(recommender, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(f"{EXACT_RECORDS[0]}\r\n{EXACT_RECORDS[1]}\n{{ }}\n", encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.jsonl")
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[3] == ""
    for record, line in zip([*EXACT_RECORDS, "{ }"], lines, strict=False):
        kept = record.strip().removesuffix("}").rstrip()
        assert line.startswith(kept) and line[len(kept):].startswith(", " if kept != "{" else '"recommendation"')
    written = [json.loads(line) for line in lines[:3]]
    assert [w["recommendation"] for w in written[:2]] == recommender.translate(["belt worn", "oil level low"])
    assert written[2]["error"] == "no key 'source'"


def test_table_output_of_jsonl_gives_each_value_as_written(recommender, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(EXACT_RECORDS) + "\n", encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert [{key: row[key] for key in "fezdnistu"} for row in rows] == [
        {"f": "0.10000000000000000555", "e": "1E5", "z": "-0", "d": "1.50", "n": '[1.0e0, {"x": 2.50}]',
         "i": "123456789012345678901234567890", "s": "café", "t": "true", "u": ""},
        {"f": "-0.0", "e": "1e-7", "z": "0", "d": "2.50E+3", "n": "[ ]", "i": "-1", "s": "", "t": "false", "u": "{}"}]


# rows that cannot be translated


def test_empty_non_utf8_and_over_long_rows_get_their_error_and_the_job_goes_on(recommender, tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(b"id,source\n1,pump vibration high\n2,\n3,pump \xff\xfe high\n"
                     + f"4,{LONG_ALERT}\n5,belt worn\n".encode())
    summary = translate_file(recommender, path, tmp_path / "out.csv")
    assert b"\n3,pump \xff\xfe high," in (tmp_path / "out.csv").read_bytes()  # its bytes as they were
    with (tmp_path / "out.csv").open(encoding="utf-8", errors="surrogateescape", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [r["id"] for r in rows] == ["1", "2", "3", "4", "5"]
    assert [r["recommendation"] for r in rows] == [*recommender.translate(["pump vibration high"]), "", "",
                                                    *recommender.translate([LONG_ALERT, "belt worn"])]
    assert [r["error"] for r in rows[:3]] == ["", "empty alert", "not valid UTF-8 (byte 0xff at column 8)"]
    assert f"to {MAX_SOURCE_LENGTH} pieces" in rows[3]["error"] and rows[4]["error"] == ""
    assert (summary.rows, summary.translated, summary.errors) == (5, 3, 3)


def test_jsonl_rows_with_a_missing_or_non_string_alert_get_an_error(recommender, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"source": "belt worn"}\n{"other": 1}\n{"source": 7}\n{"source": null}\n', encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.jsonl")
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [w["error"] for w in written] == ["", "no key 'source'", "'source' must be a string, found a number",
                                             "empty alert"]
    assert written[1] == {"other": 1, "recommendation": "", "score": None, "trust": None, "verdict": "",
                          "similar_action": "", "error": "no key 'source'"}


# batching


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_output_is_the_same_whatever_the_batch_size_and_chunk_size(recommender, tmp_path, fmt):
    source = csv_input(tmp_path)
    outputs = []
    for batch_size, chunk_rows in [(1, 1), (64, 1024), (2, 3)]:
        output = tmp_path / f"out-{batch_size}-{chunk_rows}.{fmt}"
        translate_file(recommender, source, output, batch_size=batch_size, chunk_rows=chunk_rows)
        rows = read_csv(output) if fmt == "csv" else [json.loads(line) for line in output.read_text().splitlines()]
        outputs.append(rows)
    for rows in outputs[1:]:
        assert_same_rows(rows, outputs[0])


def test_rows_are_translated_while_a_non_seekable_input_is_still_being_written(recommender, tmp_path):
    fifo = tmp_path / "in.txt"
    os.mkfifo(fifo)
    first_chunk_written = threading.Event()
    waited = []

    def write_alerts() -> None:
        with fifo.open("w", encoding="utf-8") as file:
            file.write(f"{LOG_ALERTS[0]}\n{LOG_ALERTS[1]}\n")
            file.flush()
            waited.append(first_chunk_written.wait(timeout=10))
            file.write(f"{LOG_ALERTS[2]}\n")

    def progress(done: int, total: int | None) -> None:
        calls.append((done, total))
        if done == 2:
            first_chunk_written.set()

    calls: list[tuple[int, int | None]] = []
    writer = threading.Thread(target=write_alerts)
    writer.start()
    translate_file(recommender, fifo, tmp_path / "out.txt", chunk_rows=2, progress=progress)
    writer.join()
    assert waited == [True] and calls == [(0, None), (2, None), (3, None)]
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == recommender.translate(LOG_ALERTS[:3])


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "txt"])
def test_progress_total_counts_the_rows_of_a_seekable_input(recommender, tmp_path, fmt):
    source = csv_input(tmp_path) if fmt == "csv" else tmp_path / f"in.{fmt}"  # CSV with a two-line field
    lines = {"tsv": ["id\tsource", *(f"{i}\t{a}" for i, a in enumerate(LOG_ALERTS))],
             "jsonl": [json.dumps({"source": a}) for a in LOG_ALERTS],
             "txt": LOG_ALERTS}
    if fmt != "csv":  # blank lines are not rows (but in txt, where they are), no final line break
        source.write_text(("\n" if fmt == "txt" else "\n\n").join(lines[fmt]), encoding="utf-8")
    calls = []
    translate_file(recommender, source, tmp_path / f"out.{fmt}", chunk_rows=4,
                   progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, len(LOG_ALERTS)), (4, len(LOG_ALERTS)), (len(LOG_ALERTS), len(LOG_ALERTS))]


# durability and resume


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "txt"])
def test_interrupted_job_resumed_gives_exactly_the_bytes_of_an_uninterrupted_run(recommender, tmp_path, fmt):
    """One row per batch in these resume tests: a resumed job batches rows differently from an
    uninterrupted one, and a product over a different number of rows may round differently in the
    last bit (what batching changes is tested above, up to that rounding)."""
    source = csv_input(tmp_path)
    whole, part = tmp_path / f"whole.{fmt}", tmp_path / f"part.{fmt}"
    translate_file(recommender, source, whole, batch_size=1)
    with pytest.raises(KeyboardInterrupt):
        translate_file(recommender, source, part, chunk_rows=2, progress=stop_after(4), batch_size=1)
    assert part.read_bytes() == whole.read_bytes()[:len(part.read_bytes())]
    summary = translate_file(recommender, source, part, chunk_rows=2, resume=True, batch_size=1)
    assert part.read_bytes() == whole.read_bytes()
    assert (summary.skipped_resume, summary.rows) == (4, len(LOG_ALERTS) - 4)


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_table_read_with_a_byte_order_mark_is_written_with_one_and_resumes_with_one(recommender, tmp_path, fmt):
    """Excel on Windows saves "CSV UTF-8" with a mark, and opens a CSV without one in its local code page."""
    source = tmp_path / "in.csv"
    source.write_bytes(b"\xef\xbb\xbf" + csv_input(tmp_path).read_bytes())
    whole, part = tmp_path / f"whole.{fmt}", tmp_path / f"part.{fmt}"
    translate_file(recommender, source, whole, batch_size=1)
    assert whole.read_bytes().startswith(b"\xef\xbb\xbfid") and whole.read_bytes().count(b"\xef\xbb\xbf") == 1
    with pytest.raises(KeyboardInterrupt):
        translate_file(recommender, source, part, chunk_rows=2, progress=stop_after(4), batch_size=1)
    translate_file(recommender, source, part, chunk_rows=2, resume=True, batch_size=1)
    assert part.read_bytes() == whole.read_bytes()
    unmarked = tmp_path / f"unmarked.{fmt}"
    translate_file(recommender, csv_input(tmp_path), unmarked, batch_size=1)
    assert whole.read_bytes() == b"\xef\xbb\xbf" + unmarked.read_bytes()  # the mark and nothing else


def test_an_output_begun_without_the_mark_of_its_input_resumes(recommender, tmp_path):
    """Jobs begun before marks were kept: their header has none, and is this job's all the same."""
    source = tmp_path / "in.csv"
    source.write_bytes(b"\xef\xbb\xbf" + csv_input(tmp_path).read_bytes())
    whole, part = tmp_path / "whole.csv", tmp_path / "part.csv"
    translate_file(recommender, source, whole, chunk_rows=4)
    lines = whole.read_bytes().removeprefix(b"\xef\xbb\xbf").splitlines(keepends=True)
    part.write_bytes(b"".join(lines[:7]))  # the header and 6 rows (none spans two lines), as an older job wrote them
    record_path(part).write_bytes(record_path(whole).read_bytes())
    summary = translate_file(recommender, source, part, chunk_rows=4, resume=True)
    assert part.read_bytes() == b"".join(lines)
    assert summary.skipped_resume == 4


def test_a_job_resumed_mid_chunk_starts_again_at_that_chunk_and_writes_what_a_job_never_stopped_writes(
        recommender, tmp_path):
    source = csv_input(tmp_path)
    whole, part = tmp_path / "whole.csv", tmp_path / "part.csv"
    translate_file(recommender, source, whole, chunk_rows=4)  # 4 rows batched together, as a 1,024-row chunk is
    lines = whole.read_bytes().splitlines(keepends=True)
    part.write_bytes(b"".join(lines[:7]))  # the header and 6 rows (none spans two lines): half the second chunk
    record_path(part).write_bytes(record_path(whole).read_bytes())
    summary = translate_file(recommender, source, part, chunk_rows=4, resume=True)
    assert part.read_bytes() == whole.read_bytes()
    assert (summary.skipped_resume, summary.rows) == (4, len(LOG_ALERTS) - 4)


def test_a_finished_job_resumed_translates_no_row_again(recommender, tmp_path):
    source = csv_input(tmp_path)
    output = tmp_path / "out.csv"
    translate_file(recommender, source, output, chunk_rows=4)  # the last chunk is partial: 7 rows, chunks of 4
    before = output.read_bytes()
    summary = translate_file(recommender, source, output, chunk_rows=4, resume=True)
    assert (summary.skipped_resume, summary.rows, summary.translated) == (len(LOG_ALERTS), 0, 0)
    assert output.read_bytes() == before


def test_a_resume_in_one_process_deletes_the_parts_a_killed_split_job_left_once_it_has_finished(recommender,
                                                                                                 tmp_path):
    source, output, attention = csv_input(tmp_path), tmp_path / "out.csv", tmp_path / "att.jsonl"
    with pytest.raises(KeyboardInterrupt):
        translate_file(recommender, source, output, chunk_rows=2, attention_out=attention, progress=stop_after(2))
    parts = [part_path(path, k) for path in (output, attention) for k in (1, 2)]  # rows the resume translates again
    for part in parts:
        part.write_text("rows of process k\n", encoding="utf-8")
    other = tmp_path / ".out.part9.csv"  # no part of a two- or three-process job: not ours to delete
    other.write_text("keep\n", encoding="utf-8")
    translate_file(recommender, source, output, chunk_rows=2, attention_out=attention, resume=True)
    assert not any(part.exists() for part in parts) and other.read_text(encoding="utf-8") == "keep\n"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_row_cut_anywhere_by_a_kill_is_rewritten_on_resume(recommender, tmp_path, fmt):
    source = csv_input(tmp_path)
    whole, part = tmp_path / f"whole.{fmt}", tmp_path / f"part.{fmt}"
    translate_file(recommender, source, whole, batch_size=1)
    data = whole.read_bytes()
    record_path(part).write_bytes(record_path(whole).read_bytes())  # the record a killed job leaves
    inside_quotes = data.index(b"two") + 4  # in CSV, within the quoted two-line field of row 4
    for cut in sorted({*range(0, len(data), 7), inside_quotes}):
        part.write_bytes(data[:cut])
        translate_file(recommender, source, part, resume=True, batch_size=1)
        assert part.read_bytes() == data, cut


def test_resume_with_attention_out_aligns_both_files_after_a_kill_between_them(recommender, tmp_path):
    source = csv_input(tmp_path)
    translate_file(recommender, source, tmp_path / "whole.csv", attention_out=tmp_path / "whole.jsonl", batch_size=1)
    part, attention = tmp_path / "part.csv", tmp_path / "part.jsonl"
    with pytest.raises(KeyboardInterrupt):
        translate_file(recommender, source, part, chunk_rows=2, attention_out=attention, progress=stop_after(4),
                       batch_size=1)
    with attention.open("ab") as file:  # the next chunk's attention got out, its rows did not
        file.write((tmp_path / "whole.jsonl").read_bytes().splitlines(keepends=True)[4])
    translate_file(recommender, source, part, chunk_rows=2, attention_out=attention, resume=True, batch_size=1)
    assert part.read_bytes() == (tmp_path / "whole.csv").read_bytes()
    assert attention.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()


def test_existing_output_without_resume_is_an_error_and_is_left_alone(recommender, tmp_path):
    output = tmp_path / "out.csv"
    output.write_text("keep me\n")
    with pytest.raises(DataError, match="already exists; use --resume"):
        translate_file(recommender, csv_input(tmp_path), output)
    assert output.read_text() == "keep me\n"


def test_an_output_that_is_a_folder_is_named_as_one_not_sent_to_resume(recommender, tmp_path):
    """"already exists; use --resume" sent users to a resume that found no record of any job."""
    (tmp_path / "out").mkdir()
    with pytest.raises(DataError, match=f"^{tmp_path / 'out'}: is a directory; --output needs a file name$"):
        translate_file(recommender, csv_input(tmp_path), tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_resuming_another_jobs_output_is_an_error(recommender, tmp_path):
    output = tmp_path / "out.csv"
    translate_file(recommender, csv_input(tmp_path), output)
    with pytest.raises(DataError, match="written by another job \\(other search\\)"):
        translate_file(recommender, csv_input(tmp_path), output, search=SearchConfig(beam_size=2, n_best=2),
                       resume=True)


def test_resume_from_a_pipe_is_refused_as_its_rows_cannot_be_proven_the_ones_the_job_began_on(recommender, tmp_path):
    """Its record holds only the pipe's path, alike for any rows sent through it: the resume went on appending."""
    fifo, output = tmp_path / "alerts.txt", tmp_path / "out.txt"
    os.mkfifo(fifo)
    for alerts, resume in ((LOG_ALERTS[:3], False), (LOG_ALERTS[3:], True)):
        feeder = threading.Thread(target=lambda a=alerts: fifo.write_text("".join(f"{x}\n" for x in a)), daemon=True)
        feeder.start()
        if resume:  # refused before a row is read: the feeder's open waits for a reader, which reads them here
            with pytest.raises(DataError, match=r"alerts.txt: --resume needs its --input to be a regular file, and "
                                                r"this one is a pipe or a device"):
                translate_file(recommender, fifo, output, resume=True)
            with fifo.open(encoding="utf-8") as unblock:
                unblock.read()
        else:
            translate_file(recommender, fifo, output)
        feeder.join(timeout=10)
    assert output.read_text(encoding="utf-8").splitlines() == recommender.translate(LOG_ALERTS[:3])


# attention and heatmaps


def test_attention_out_has_one_line_per_row_with_target_by_source_matrices(recommender, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join([LOG_ALERTS[0], "", LONG_ALERT, LOG_ALERTS[1]]) + "\n", encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.txt", attention_out=tmp_path / "attention.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "attention.jsonl").read_text(encoding="utf-8").splitlines()]
    results = recommender.recommend([LOG_ALERTS[0], "", LONG_ALERT, LOG_ALERTS[1]])
    assert [line["row"] for line in lines] == [1, 2, 3, 4]
    for line, result in zip(lines, results, strict=True):
        assert line["source_pieces"] == (result.source_pieces if result.candidates else [])
        assert line["target_pieces"] == (result.candidates[0].target_pieces if result.candidates else [])
        assert len(line["attention"]) == len(line["target_pieces"])
        assert all(len(weights) == len(line["source_pieces"]) for weights in line["attention"])
    assert lines[1] == {"row": 2, "source_pieces": [], "target_pieces": [], "attention": [], "source_words": [],
                        "target_words": [], "word_attention": [], "alternatives": []}
    for line in (lines[0], lines[3]):  # words beside pieces, rows still summing to 1
        assert line["source_words"] == [word for word, _, _ in word_spans(line["source_pieces"])]
        assert line["target_words"] == [word for word, _, _ in word_spans(line["target_pieces"])]
        words = np.array(line["word_attention"])
        assert words.shape == (len(line["target_words"]), len(line["source_words"]))
        np.testing.assert_allclose(words.sum(axis=1), 1.0, atol=1e-3)
        assert json.dumps(line["attention"]) == json.dumps(np.round(np.array(line["attention"]), 4).tolist())


def test_attention_out_carries_each_n_best_alternative_s_own_matrices(recommender, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(LOG_ALERTS[0] + "\n", encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.txt", attention_out=tmp_path / "attention.jsonl",
                   search=SearchConfig(beam_size=3, n_best=3))
    line = json.loads((tmp_path / "attention.jsonl").read_text(encoding="utf-8"))
    result = recommender.recommend([LOG_ALERTS[0]], SearchConfig(beam_size=3, n_best=3))[0]
    assert [line["target_pieces"]] + [a["target_pieces"] for a in line["alternatives"]] == [
        c.target_pieces for c in result.candidates]
    for alternative in line["alternatives"]:
        assert np.array(alternative["word_attention"]).shape == (len(alternative["target_words"]),
                                                                 len(line["source_words"]))


def test_heatmaps_writes_one_png_per_translated_row(recommender, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(f"{LOG_ALERTS[0]}\n\n{LOG_ALERTS[1]}\n", encoding="utf-8")
    translate_file(recommender, path, tmp_path / "out.txt", heatmaps=tmp_path / "maps")
    pngs = sorted((tmp_path / "maps").iterdir())
    assert [p.name for p in pngs] == ["row_000001.png", "row_000003.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)


# unusable input


@pytest.mark.parametrize(("name", "content", "message"), [
    ("in.csv", "id,text\n1,pump\n", "no column 'source' or 'problem' or 'alert' (columns found: id, text)"),
    ("in.tsv", "source\tnote\npump\tx\nbelt\n", "line 3: expected 2 tab-separated fields, found 1"),
    ("in.csv", 'source\n"pump\n', "line 2: malformed comma-separated record"),
    ("in.jsonl", '{"source": "pump"}\n[1]\n', "line 2: expected a JSON object, found an array"),
    ("in.log", "pump\n", "in.log: unknown file type '.log': expected .csv, .tsv, .jsonl or .txt"),
    ("in", "pump\n", "in: no file extension to tell its type: expected .csv, .tsv, .jsonl or .txt"),
])
def test_unusable_input_is_a_one_line_data_error(recommender, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        translate_file(recommender, path, tmp_path / "out.csv")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert "--" not in str(caught.value)  # the UI's Batch tab shows it too, and has no command-line flags


def test_the_summary_counts_the_guesses_out_of_scope_apart_and_their_trust_is_zero(recommender, tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("pump vibration high\nthe quick brown fox\n", encoding="utf-8")
    summary = translate_file(recommender, log, tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert rows[0]["verdict"] != "out-of-scope" and rows[1]["verdict"] == "out-of-scope"  # trust 0 (trust.py)
    assert float(rows[1]["trust"]) == 0.0 < float(rows[0]["trust"])
    assert (summary.translated, summary.out_of_scope) == (2, 1)
    assert summary.summary().startswith("2 rows: 2 translated (1 out of scope: guesses, not advice; ")


def test_a_header_repeated_where_two_logs_were_joined_is_a_row_with_an_error_not_an_alert(recommender, tmp_path):
    log = tmp_path / "joined.csv"
    log.write_bytes("\ufeffid,source\n1,pump vibration high\n\ufeffid,source\n2,belt worn\n".encode())
    summary = translate_file(recommender, log, tmp_path / "out.csv")
    rows = read_csv(tmp_path / "out.csv")
    assert [row["id"] for row in rows] == ["1", "\ufeffid", "2"]
    assert (rows[1]["recommendation"], rows[1]["error"]) == ("", "repeats the header row (two files joined into one?)")
    assert rows[0]["recommendation"] and rows[2]["recommendation"] and (summary.translated, summary.errors) == (2, 1)


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_one_column_sheet_s_empty_cells_are_rows_so_each_row_stays_beside_its_own(recommender, tmp_path, fmt):
    log = tmp_path / f"sheet.{fmt}"
    log.write_text("source\npump vibration high\n\n   \nbelt worn\n\n\n", encoding="utf-8")  # 2 blank at the end
    calls = []
    translate_file(recommender, log, tmp_path / "out.csv", progress=lambda done, total: calls.append(total))
    rows = read_csv(tmp_path / "out.csv")
    assert [row["source"] for row in rows] == ["pump vibration high", "", "   ", "belt worn"]
    assert set(calls) == {4}  # the progress bar's total counts them too
    assert [row["error"] for row in rows] == ["", "empty alert", "empty alert", ""]


def test_a_blank_line_is_no_row_of_a_log_of_several_columns(recommender, tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("id,source\n\n1,pump vibration high\n   \n\n2,belt worn\n", encoding="utf-8")
    translate_file(recommender, log, tmp_path / "out.csv")
    assert [row["id"] for row in read_csv(tmp_path / "out.csv")] == ["1", "2"]


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_bytes_not_utf8_in_another_column_flag_the_row_but_leave_its_alert_answered(recommender, tmp_path, fmt):
    sep = "," if fmt == "csv" else "\t"
    log = tmp_path / f"log.{fmt}"
    log.write_bytes(sep.join(["id", "source", "note"]).encode() + b"\n" + sep.join(["1", "pump vibration high",
                                                                                  "Jos\xe9"]).encode("latin-1")
                    + b"\n" + sep.join(["2", "belt w\xe9rn", "ok"]).encode("latin-1") + b"\n")
    summary = translate_file(recommender, log, tmp_path / f"out.{fmt}")
    written = (tmp_path / f"out.{fmt}").read_bytes()
    assert b"Jos\xe9" in written and b"belt w\xe9rn" in written  # every byte back as it came
    first, second = list(csv.reader(written.decode("latin-1").splitlines()[1:], delimiter=sep))
    assert first[3] == recommender.recommend(["pump vibration high"])[0].text
    assert first[-1].startswith("column 'note': not valid UTF-8 (byte 0xe9 at column ")
    assert second[3] == "" and second[-1].startswith("not valid UTF-8")  # the alert's own bytes: unread
    assert (summary.translated, summary.errors, summary.warned) == (1, 2, 1)


def test_the_summary_of_one_row_says_row_and_a_count_keeps_its_plain_digits():
    assert BatchSummary(1, 1, 0, 0, 2.0).summary() == "1 row: 1 translated, 0 with errors; 2.0 s (0 rows/s)"
    assert BatchSummary(2100, 2100, 0, 0, 1.0).summary().startswith("2100 rows: 2100 translated")


def test_a_jsonl_log_opening_with_records_not_utf8_resumed_gives_exactly_the_bytes_of_an_uninterrupted_run(
        recommender, tmp_path):
    """The first record names no alert key and is not UTF-8: the key is chosen at the first readable record."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"note": "caf\xe9"}\n{"source": "\x93bolt\x94"}\n'
                       + "".join(json.dumps({"source": alert}) + "\n" for alert in LOG_ALERTS[:4]).encode())
    whole, part = tmp_path / "whole.jsonl", tmp_path / "part.jsonl"
    translate_file(recommender, source, whole, batch_size=1)
    with pytest.raises(KeyboardInterrupt):
        translate_file(recommender, source, part, chunk_rows=2, progress=stop_after(2), batch_size=1)
    summary = translate_file(recommender, source, part, chunk_rows=2, resume=True, batch_size=1)
    assert part.read_bytes() == whole.read_bytes()
    assert (summary.skipped_resume, summary.rows, summary.translated) == (2, 4, 4)
    rows = [json.loads(line) for line in whole.read_text(encoding="utf-8").splitlines()]  # UTF-8 JSON throughout
    assert [row.get("note", row.get("source")) for row in rows[:2]] == ["caf\\xe9", "\\x93bolt\\x94"]
    assert [row["recommendation"] for row in rows[2:]] == recommender.translate(LOG_ALERTS[:4])

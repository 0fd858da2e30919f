"""Reading the rows of an incident log (CSV, TSV, JSONL or TXT) for the batch job, as a stream.

Bytes are decoded per line, so a row with bytes that are not UTF-8 becomes a row with an error (its
bytes kept, to be written back as they were) rather than a failed job; so does a row with a line over
``files.MAX_LINE_BYTES``, which is never held in memory whole; a JSONL log has no header, so this holds for its
first record too. A file that is not UTF-8 text (UTF-16, binary: ``files.check_text``), a CSV or TSV header that
is not UTF-8 or too long, and a column name given twice are problems with the file. See ``seq2seq.serving.batch``
for the formats and what happens to each row.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from seq2seq.errors import ConfigError, DataError, shown
from seq2seq.files import (
    BYTES_KEPT,
    KEPT_BYTES,
    SNIFF_BYTES,
    LongLine,
    bounded_lines,
    check_text,
    decode_line,
    line_pieces,
    open_binary,
)
from seq2seq.jsonl import json_records, string_value
from seq2seq.serving.alert_key import ALERT_COLUMNS, AlertKey, check_all
from seq2seq.tables import (
    REPEATED_HEADER,
    blank_record,
    choose_column,
    csv_records,
    field_count_error,
    repeats_header,
    split_tsv,
    tsv_records,
)

FORMATS = ("csv", "tsv", "jsonl", "txt")


@dataclass(frozen=True)
class Row:
    number: int  # 1-based data row (the header is not counted), as in row_000001.png
    line: int  # physical input line where the record starts
    values: list[str] | dict[str, Any]  # fields in column order, or the JSON object
    alert: str | None  # None when the row cannot be translated; error says why
    error: str = ""
    text: str = ""  # a JSONL record's line as read, so that its fields are written back exactly as they were


class UnknownFormat(DataError):
    """A file whose extension names none of FORMATS. The words name the problem only: how to name a format
    is the front end's to say (the CLI's ``--format``; the UI has no such choice)."""


def format_of(path: Path, required: bool) -> str | None:
    """The format ``path``'s extension names; else None, or when ``required`` an UnknownFormat."""
    fmt = path.suffix.lower().removeprefix(".")
    if fmt in FORMATS:
        return fmt
    if not required:
        return None
    found = f"unknown file type {path.suffix!r}" if path.suffix else "no file extension to tell its type"
    raise UnknownFormat(f"{path}: {found}: expected .csv, .tsv, .jsonl or .txt")


# Reading: physical lines are read as bytes and decoded one by one, so a bad byte spoils one row only.


def open_log(path: Path) -> BinaryIO:
    """``path`` opened for reading its rows, once its opening bytes show UTF-8 text (``files.check_text``)."""
    file = open_binary(path, "rb")
    try:
        check_text(path, file.peek(SNIFF_BYTES)[:SNIFF_BYTES])
    except DataError:
        file.close()
        raise
    return file


def _placeholder(line: LongLine, fmt: str) -> bytes:
    """What a line too long to read stands in for: a row of its own that keeps a CSV quote open or shut
    as the line did, so the records after it are read as they are."""
    if fmt == "jsonl":
        return b"{}\n"
    return b'"\n' if fmt == "csv" and line.odd_quotes else b"-\n"


def count_rows(file: BinaryIO, fmt: str) -> int:
    """Rows in the file, cheaply (a CSV record starts on a line begun outside quotes); rewinds the file."""
    count, quoted, one_column, blanks = 0, False, None, 0
    for line in bounded_lines(file, lone_cr=fmt == "txt"):
        raw = _placeholder(line, fmt) if isinstance(line, LongLine) else line
        starts_record = not quoted
        if fmt == "csv":
            quoted ^= raw.count(b'"') % 2 == 1
        if fmt == "txt":
            count += len(line_pieces(raw))
        elif starts_record and raw.strip():
            if one_column is None and fmt != "jsonl":  # the header: one column, and a blank line is a row
                one_column = (b"\t" if fmt == "tsv" else b",") not in raw
            count, blanks = count + 1 + (blanks if one_column else 0), 0
        elif starts_record and one_column:
            blanks += 1  # a row unless only blank lines follow
    file.seek(0)
    return max(0, count - (fmt in ("csv", "tsv")))


def _lines(file: BinaryIO, fmt: str, bad: dict[int, str]) -> Iterator[str]:
    """Lines with their endings (TXT: without, a lone CR ending one as on stdin: ``files.line_pieces``); a line
    that is not UTF-8 keeps its bytes (``files.decode_line``), one too long becomes its placeholder, and
    ``bad[line]`` says what is wrong."""
    number = 0
    for raw in bounded_lines(file, lone_cr=fmt == "txt"):
        if isinstance(raw, LongLine):
            bad[number + 1] = f"{raw.fault()} (input line {number + 1}: its fields are left empty here)"
            raw = _placeholder(raw, fmt)
        raw = raw.removeprefix(codecs.BOM_UTF8) if number == 0 else raw
        for piece in line_pieces(raw) if fmt == "txt" else [raw]:
            number += 1
            text, fault = decode_line(piece)
            if fault:
                bad[number] = fault
            yield text


def _bad_bytes(bad: dict[int, str], start: int, end: int) -> str:
    """Why the record on lines start..end cannot be translated, if a line of it is not UTF-8 (forgets them)."""
    found = [(line, bad.pop(line)) for line in range(start, end + 1) if line in bad]
    if not found:
        return ""
    line, fault = found[0]
    if line == start:
        return fault
    return f"{fault.removesuffix(')')} of line {line})" if fault.endswith(")") else f"{fault} (line {line})"


def read_rows(file: BinaryIO, path: Path, fmt: str, column: str | None) -> tuple[list[str], Iterator[Row]]:
    """The input's columns (a JSONL file: its first object's keys) and its rows, read lazily."""
    bad: dict[int, str] = {}
    lines = _lines(file, fmt, bad)
    if fmt == "txt":
        if column is not None:
            raise ConfigError(f"{path}: --column applies to csv, tsv and jsonl input, not txt")
        return ["source"], _txt_rows(lines, bad)
    if fmt == "jsonl":
        return _read_jsonl(file, path, lines, bad, column)
    records = (csv_records if fmt == "csv" else tsv_records)(path, lines, blank=True)
    first = next((record for record in records if not blank_record(record[2])), None)
    if first is None:
        raise DataError(f"{path}: empty file (expected a header row naming the columns)")
    header = first[2]
    _check_header(path, bad, first[0], first[1])
    index = header.index(choose_column(header, column, ALERT_COLUMNS, str(path), "column"))
    if len(header) > 1:  # a blank line is no record of several columns (a spreadsheet writes ",")
        records = (record for record in records if not blank_record(record[2]))
    else:  # but it is a one-column sheet's empty cell: kept as a row, so each row stays beside its own
        records = _blank_rows_before_the_last(records)

    def rows() -> Iterator[Row]:
        for number, (start, end, fields) in enumerate(records, 1):
            error = _bad_bytes(bad, start, end)
            if error.startswith(LongLine.FAULT):  # its fields were never read
                fields = [""] * len(header)
            if len(fields) != len(header):
                raise field_count_error(path, start, len(header), len(fields), fmt == "tsv")
            if error and not error.startswith(LongLine.FAULT) and not KEPT_BYTES.search(fields[index]):
                # Bytes that are not UTF-8 in another column (a name in a cp1252 export): the alert is read, and the
                # row is flagged with a warning naming the column, its bytes written back as they came
                named = next(name for name, field in zip(header, fields, strict=True) if KEPT_BYTES.search(field))
                yield Row(number, start, fields, fields[index], f"column {shown(named.strip())!r}: {error}, kept as "
                          "it came; the alert is read all the same")
                continue
            error = error or (REPEATED_HEADER if repeats_header(fields, header) else "")
            yield Row(number, start, fields, None if error else fields[index], error)

    return header, rows()


def _blank_rows_before_the_last(records: Iterator[tuple[int, int, list[str]]]
                                ) -> Iterator[tuple[int, int, list[str]]]:
    """``records`` less the blank ones after the last that is not: the empty lines that end a file."""
    held: list[tuple[int, int, list[str]]] = []
    for record in records:
        if blank_record(record[2]):
            held.append(record)
            continue
        yield from held
        held.clear()
        yield record


def _check_header(path: Path, bad: dict[int, str], start: int, end: int) -> None:
    """The header names the columns: a fault in its bytes is a problem with the file, not with one row."""
    fault = _bad_bytes(bad, start, end)
    if fault:
        raise DataError(f"{path}: line {start}: the header is unreadable: {fault}")


def _txt_rows(lines: Iterator[str], bad: dict[int, str]) -> Iterator[Row]:
    for number, line in enumerate(lines, 1):
        text, error = line.rstrip("\r\n"), _bad_bytes(bad, number, number)
        text = "" if error.startswith(LongLine.FAULT) else text
        yield Row(number, number, [text], None if error else text, error)


def _read_jsonl(file: BinaryIO, path: Path, lines: Iterator[str], bad: dict[int, str],
                key: str | None) -> tuple[list[str], Iterator[Row]]:
    """A JSONL log has no header: its first record is a row like any other, flagged if its bytes are not UTF-8.
    Its keys are the columns of table output; the alert key is the named one (``key``) or ``AlertKey``'s."""
    records = json_records(path, lines)
    first = next(records, None)
    if first is None:
        return [], iter(())
    keys = list(first[1])
    named = None
    if key is not None:
        try:
            named = choose_column(keys, key, ALERT_COLUMNS, f"{path}: line {first[0]}", "key")
        except DataError:
            named = key  # the first record may lack the key a user named, as any other may: its row says so
    elif file.seekable():  # refused before anything is written; from a pipe, as each record comes
        _look_ahead(file, path)
    alert_key = AlertKey(path, named)
    alert_key.see(first[0], first[1], first[0] not in bad)

    def rows() -> Iterator[Row]:
        for number, (line, record, text) in enumerate(itertools.chain([first], records), 1):
            error = _bad_bytes(bad, line, line)
            chosen = alert_key.see(line, record, not error)
            value, problem = string_value(record, chosen) if chosen is not None else (None, "")
            error = error or problem
            yield Row(number, line, record, None if error else value, error, text)

    return keys, rows()


def _look_ahead(file: BinaryIO, path: Path) -> None:
    """Every record of a seekable ``file`` checked for its alert key (``alert_key.check_all``), then back to where
    it was."""
    where = file.tell()
    file.seek(0)
    bad: dict[int, str] = {}
    try:
        check_all(path, ((line, record, line not in bad)
                         for line, record, _ in json_records(path, _lines(file, "jsonl", bad))))
    finally:
        file.seek(where)


def read_columns(path: Path) -> list[str]:
    """The header of a CSV/TSV file or the keys of a JSONL file's objects (``_jsonl_keys``), to choose from; []
    if unreadable."""
    fmt = format_of(path, False)
    try:
        # A row that is not UTF-8 is a flagged row to the job, not a reason to show no columns (the file is decoded
        # in blocks of 8 KB, so a strict read of the header failed on such a row near it); a header that is not
        # UTF-8 is refused by the job, and shows none.
        with path.open(encoding="utf-8-sig", errors=BYTES_KEPT, newline="") as handle:
            if fmt == "jsonl":
                return _jsonl_keys(path, handle)
            header = split_tsv(next(handle, "")) if fmt == "tsv" else next(csv.reader(handle), []) if fmt == "csv" \
                else []
            return [] if any(KEPT_BYTES.search(name) for name in header) else header
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, csv.Error, AttributeError):
        pass
    return []


def _jsonl_keys(path: Path, lines: Iterable[str]) -> list[str]:
    """The keys of the JSON records on ``lines``, read as the job reads them (``jsonl.json_records``), in order of
    first appearance, up to the first line it would refuse, past records that are not UTF-8 (flagged rows to the
    job): a later record may hold the alert key a user has to name."""
    keys: dict[str, None] = {}
    with contextlib.suppress(ValueError):  # a DataError
        for _, record, line in json_records(path, lines):
            if not KEPT_BYTES.search(line):
                keys.update(dict.fromkeys(record))
    return list(keys)

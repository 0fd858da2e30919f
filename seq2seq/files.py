"""The one reader of user files: bytes to lines, UTF-8 faults, column choice, CSV/TSV/JSONL records.

Every file a user hands in (a training corpus, an incident log, a C-MAPSS history) is read
through these functions, so the same fault gets the same one-line message wherever it occurs,
e.g. ``data/x.tsv: line 17: not valid UTF-8 (byte 0xe9 at column 12)``. Lines and columns are
1-based; columns count characters, as an editor does.

Formats:

- TSV: one record per physical line, fields split on tabs, no quote processing (the IANA
  text/tab-separated-values convention: MaintNet fields such as ``BOLT 1/2" LOOSE`` hold bare
  quotes, which csv quoting would swallow together with every line after them).
- CSV: standard quoting; a quoted field may hold commas, quotes and line breaks.
- JSONL: one JSON object per line.

Blank lines are not records in any of them.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from seq2seq.errors import DataError, file_error


def open_binary(path: Path, mode: str) -> BinaryIO:
    """``path`` opened in binary ``mode``; an OSError becomes a one-line DataError."""
    try:
        return path.open(mode)
    except OSError as err:
        raise file_error(path, err) from None


def utf8_fault(raw: bytes, err: UnicodeDecodeError) -> str:
    """What is wrong with a line that is not UTF-8: "not valid UTF-8 (byte 0xff at column 5)"."""
    column = len(raw[: err.start].decode("utf-8", "replace")) + 1
    return f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {column})"


def read_lines(path: Path) -> list[str]:
    """Physical lines of a UTF-8 file without their endings (a BOM is dropped); a bad byte is a DataError."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise file_error(path, err) from None
    raw_lines = data.removeprefix(codecs.BOM_UTF8).split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        raw = raw.removesuffix(b"\r")
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: line {number}: {utf8_fault(raw, err)}") from None
    return lines


def choose_column(found: list[str], wanted: str | None, defaults: tuple[str, ...], where: str, what: str,
                  taken: tuple[str, ...] = ()) -> str:
    """The name in ``found`` for ``wanted``, else for the first of ``defaults`` present, else the only
    name not ``taken``: exact names first, then ignoring case. A DataError lists the names found."""
    names = (wanted,) if wanted is not None else defaults
    for same in (str.__eq__, lambda a, b: a.casefold() == b.casefold()):
        for name in names:
            for candidate in found:
                if same(candidate.strip(), name):
                    return candidate
    free = [name for name in found if name not in taken]
    if wanted is None and len(free) == 1:
        return free[0]
    raise DataError(f"{where}: no {what} {' or '.join(map(repr, names))} ({what}s found: {', '.join(found)})")


def split_tsv(line: str) -> list[str]:
    """The fields of one TSV line (its line ending removed)."""
    return line.removesuffix("\n").removesuffix("\r").split("\t")


def tsv_records(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, int, list[str]]]:
    """(line, line, fields) of each non-blank TSV line, in the shape of ``csv_records``. A carriage
    return inside a line (an old Mac line break, or a field cut in two) is a DataError: no field holds one."""
    for number, line in enumerate(lines, 1):
        fields = split_tsv(line)
        if any("\r" in field for field in fields):
            raise DataError(f"{path}: line {number}: malformed tab-separated record (a carriage return inside it)")
        if len(fields) > 1 or fields[0].strip():
            yield number, number, fields


def csv_records(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, int, list[str]]]:
    """(first line, last line, fields) of each non-blank CSV record; ``lines`` keep their line endings.

    A malformed record is a one-line DataError naming its first physical line.
    """
    reader = csv.reader(lines, strict=True)
    end = 0
    while True:
        start = end + 1
        try:
            fields = next(reader, None)
        except csv.Error as err:
            raise DataError(f"{path}: line {start}: malformed comma-separated record ({err})") from None
        if fields is None:
            return
        end = reader.line_num
        if fields and (len(fields) > 1 or fields[0].strip()):
            yield start, end, fields


def field_count_error(path: Path, line: int, expected: int, found: int, tsv: bool) -> DataError:
    kind = "tab-separated" if tsv else "comma-separated"
    return DataError(f"{path}: line {line}: expected {expected} {kind} fields, found {found}")


def json_type(value: object) -> str:
    """How an error message names a JSON value's type: "an object", "a number", "null", ..."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def json_objects(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank JSON line; a line that is not a JSON object is a DataError."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: line {number}: invalid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}: line {number}: expected a JSON object, found {json_type(record)}")
        yield number, record


def string_value(record: dict, key: str) -> tuple[str | None, str]:
    """(text, problem) of ``record[key]``: null reads as "", a missing key or a non-string is a problem."""
    if key not in record:
        return None, f"no key {key!r}"
    value = record[key]
    if value is not None and not isinstance(value, str):
        return None, f"{key!r} must be a string, found {json_type(value)}"
    return value or "", ""

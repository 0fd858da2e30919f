"""Reading alert/recommendation pairs from files, with one-line errors that say where.

Formats read by ``read_parallel``:

- ``.tsv``: a header row, then one record per physical line, fields split on tabs. No quoting
  (``csv.QUOTE_NONE``, the IANA text/tab-separated-values convention): MaintNet fields such as
  ``BOLT 1/2" LOOSE`` or ``"B" NUT MISSING`` contain bare quotes, and csv quoting would swallow a
  field that starts with one (and every line after it) until the next quote.
- ``.csv``: a header row, standard csv quoting (quoted fields may hold commas and newlines).
- ``.jsonl``: one JSON object per line.
- two aligned plain-text files, one sentence per line (``x.src`` with ``x.tgt``, or any file with an
  explicit ``target_path``).

Columns (keys) are chosen by name: ``source`` / ``target`` by default, or MaintNet's ``problem`` /
``action`` when those are absent; exact names first, then ignoring case. Blank lines are ignored
in the tabular and JSONL formats. Line numbers in messages are physical lines of the file.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from seq2seq.errors import DataError, file_error
from seq2seq.tokenizer import normalize

EMBEDDED_DATA = Path(__file__).resolve().parent.parent / "data"
SOURCE_NAMES = ("source", "problem")  # default source column / key, in order of preference
TARGET_NAMES = ("target", "action")


@dataclass(frozen=True)
class Example:
    source: str  # raw text, stripped
    target: str  # raw text, stripped
    line: int  # 1-based physical line where the record starts (or record number), for messages


@dataclass
class ParallelCorpus:
    path: str
    examples: list[Example]
    skipped: list[tuple[int, str]]  # (line, reason) of pairs with an empty source or target

    def summary(self) -> str:
        """One line, e.g. "x.tsv: skipped 3 of 120 pairs with an empty source or target (lines 4, 9, 12)"."""
        total = len(self.examples) + len(self.skipped)
        if not self.skipped:
            return f"{self.path}: read {total} pairs, none skipped"
        lines = [str(line) for line, _ in self.skipped[:10]]
        if len(self.skipped) > 10:
            lines.append(f"... {len(self.skipped) - 10} more")
        word = "line" if len(self.skipped) == 1 else "lines"
        return (
            f"{self.path}: skipped {len(self.skipped)} of {total} pairs with an empty source or target "
            f"({word} {', '.join(lines)})"
        )


def read_parallel(
    path: str | Path,
    source_column: str | None = None,
    target_column: str | None = None,
    target_path: str | Path | None = None,
) -> ParallelCorpus:
    """Read alert/recommendation pairs from ``path`` (see the module docstring for the formats).

    Empty pairs (after ``normalize``) are skipped and listed in ``skipped``; every other problem
    is a one-line DataError naming the file and the line.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if target_path is None and suffix in (".tsv", ".csv"):
        delimiter, quoting = ("\t", csv.QUOTE_NONE) if suffix == ".tsv" else (",", csv.QUOTE_MINIMAL)
        records = _read_table(path, delimiter, quoting, source_column, target_column)
    elif target_path is None and suffix == ".jsonl":
        records = _read_jsonl(path, source_column, target_column)
    else:
        if target_path is None:
            target_path = path.with_suffix(".tgt")
            if suffix != ".src" or not target_path.exists():
                raise DataError(
                    f"{path}: unknown format: expected .tsv, .csv, .jsonl, or a .src file with a .tgt beside it"
                )
        records = _read_aligned(path, Path(target_path))
    return _collect(path, records)


def _collect(path: Path, records: Iterator[tuple[int, str, str]]) -> ParallelCorpus:
    examples, skipped = [], []
    for line, source, target in records:
        empty = [side for side, text in (("source", source), ("target", target)) if not normalize(text)]
        if empty:
            skipped.append((line, f"empty {' and '.join(empty)}"))
        else:
            examples.append(Example(source.strip(), target.strip(), line))
    if not examples:
        why = f"all {len(skipped)} have an empty source or target" if skipped else "it holds no records"
        raise DataError(f"{path}: no usable pairs ({why})")
    return ParallelCorpus(str(path), examples, skipped)


def _read_lines(path: Path) -> list[str]:
    """Physical lines of a UTF-8 file without their endings; a bad byte is reported by line and column."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise file_error(path, err) from None
    data = data.removeprefix(codecs.BOM_UTF8)
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    lines = []
    for number, raw in enumerate(raw_lines, 1):
        raw = raw.removesuffix(b"\r")
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            column = len(raw[: err.start].decode("utf-8")) + 1  # in characters, as an editor counts
            raise DataError(
                f"{path}: line {number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {column})"
            ) from None
    return lines


def _choose(available: list[str], wanted: str | None, defaults: tuple[str, ...], where: str, what: str) -> str:
    """The name in ``available`` matching ``wanted`` (or the first default present), exactly or ignoring case."""
    candidates = (wanted,) if wanted is not None else defaults
    for name in candidates:
        if name in available:
            return name
    for name in candidates:
        for found in available:
            if found.casefold() == name.casefold():
                return found
    names = " or ".join(repr(name) for name in candidates)
    raise DataError(f"{where}: no {what} {names} ({what}s found: {', '.join(available)})")


def csv_records(path: Path, lines: Iterable[str], delimiter: str = ",", quoting: int = csv.QUOTE_MINIMAL
                ) -> Iterator[tuple[int, int, list[str]]]:
    """(first line, last line, fields) of each non-blank record; ``lines`` keep their line endings.

    A malformed record is a one-line DataError naming its first physical line.
    """
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting, strict=True)
    kind = "tab-separated" if delimiter == "\t" else "comma-separated"
    end = 0
    while True:
        start = end + 1
        try:
            fields = next(reader, None)
        except csv.Error as err:
            raise DataError(f"{path}: line {start}: malformed {kind} record ({err})") from None
        if fields is None:
            return
        end = reader.line_num
        if fields and (len(fields) > 1 or fields[0].strip()):
            yield start, end, fields


def _read_table(
    path: Path, delimiter: str, quoting: int, source_column: str | None, target_column: str | None
) -> Iterator[tuple[int, str, str]]:
    records = csv_records(path, (line + "\n" for line in _read_lines(path)), delimiter, quoting)
    kind = "tab-separated" if delimiter == "\t" else "comma-separated"
    first = next(records, None)
    if first is None:
        raise DataError(f"{path}: empty file (expected a header row naming the columns)")
    header = [name.strip() for name in first[2]]
    source = header.index(_choose(header, source_column, SOURCE_NAMES, str(path), "column"))
    target = header.index(_choose(header, target_column, TARGET_NAMES, str(path), "column"))
    for start, _, row in records:
        if len(row) != len(header):
            raise DataError(f"{path}: line {start}: expected {len(header)} {kind} fields, found {len(row)}")
        yield start, row[source], row[target]


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


def _read_jsonl(path: Path, source_key: str | None, target_key: str | None) -> Iterator[tuple[int, str, str]]:
    keys = None
    for number, record in json_objects(path, _read_lines(path)):
        where = f"{path}: line {number}"
        if keys is None:  # the first record chooses the keys; every other record must have them
            keys = (
                _choose(list(record), source_key, SOURCE_NAMES, where, "key"),
                _choose(list(record), target_key, TARGET_NAMES, where, "key"),
            )
        texts = []
        for key in keys:
            if key not in record:
                raise DataError(f"{where}: no key {key!r} (keys found: {', '.join(record)})")
            value = record[key]
            if value is not None and not isinstance(value, str):
                raise DataError(f"{where}: {key!r} must be a string, found {json_type(value)}")
            texts.append(value or "")
        yield number, texts[0], texts[1]


def _read_aligned(source_path: Path, target_path: Path) -> Iterator[tuple[int, str, str]]:
    if not target_path.exists():
        raise DataError(f"{target_path}: file not found")
    sources, targets = _read_lines(source_path), _read_lines(target_path)
    if len(sources) != len(targets):
        raise DataError(
            f"{source_path}: {len(sources)} lines but {target_path} has {len(targets)}; "
            f"line {min(len(sources), len(targets)) + 1} has no partner"
        )
    yield from ((number, s, t) for number, (s, t) in enumerate(zip(sources, targets, strict=True), 1))

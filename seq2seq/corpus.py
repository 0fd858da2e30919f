"""Reading alert/recommendation pairs from files, with one-line errors that say where.

Formats read by ``read_parallel`` (parsed by ``seq2seq.files``):

- ``.tsv`` and ``.csv``: a header row naming the columns, then one record per row;
- ``.jsonl``: one JSON object per line;
- two aligned plain-text files, one sentence per line (``x.src`` with ``x.tgt``, or any file with an
  explicit ``target_path``).

Columns (keys) are chosen by ``tables.choose_column``: ``source`` / ``target`` by default, or
MaintNet's ``problem`` / ``action`` when those are absent, or ``alert`` / ``action`` (the technicians'
corrections, ``seq2seq feedback export``). Line numbers in messages are physical
lines of the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from seq2seq.errors import DataError, listed
from seq2seq.files import read_lines
from seq2seq.jsonl import json_records, string_value
from seq2seq.tables import REPEATED_HEADER, choose_column, csv_records, field_count_error, repeats_header, tsv_records
from seq2seq.tokenizer import normalize

EMBEDDED_DATA = Path(__file__).resolve().parent.parent / "data"
SOURCE_NAMES = ("source", "problem", "alert")  # default source column / key, in order of preference
TARGET_NAMES = ("target", "action")


@dataclass(frozen=True)
class Example:
    source: str  # raw text, stripped
    target: str  # raw text, stripped
    line: int  # 1-based physical line where the record starts (or record number), for messages


EMPTY = "an empty source or target"  # why most skipped pairs are skipped


@dataclass
class ParallelCorpus:
    path: str
    examples: list[Example]
    skipped: list[tuple[int, str]]  # (line, reason) of records skipped: an empty source or target, a repeated header

    def summary(self) -> str:
        """One line, e.g. "x.tsv: skipped 3 of 120 pairs with an empty source or target (lines 4, 9, 12)", each
        other reason named apart: "...: 1 with an empty source or target (line 4); 1 repeats the header row ..."."""
        total = len(self.examples) + len(self.skipped)
        if not self.skipped:
            return f"{self.path}: read {total} pairs, none skipped"
        return f"{self.path}: skipped {len(self.skipped)} of {total} pairs{_reasons(self.skipped)}"


def _reasons(skipped: list[tuple[int, str]]) -> str:
    """Why pairs were skipped, each reason with its lines (the first 10): " with an empty source or target (line
    4)" when that is the only one, else ": 1 with an empty source or target (line 4); 2 that repeat the header ..."."""
    by_reason: dict[str, list[int]] = {}
    for line, reason in skipped:
        by_reason.setdefault(EMPTY if reason.startswith("empty ") else reason, []).append(line)

    def lines(found: list[int]) -> str:
        shown_lines = [str(line) for line in found[:10]] + ([f"... {len(found) - 10} more"] if len(found) > 10 else [])
        return f"({'line' if len(found) == 1 else 'lines'} {', '.join(shown_lines)})"

    def said(reason: str, found: list[int]) -> str:  # "1 that repeats the header row", "2 that repeat it"
        verb = reason if len(found) == 1 else reason.replace("repeats ", "repeat ", 1)
        return f"{len(found)} {'with' if reason == EMPTY else 'that'} {verb} {lines(found)}"

    if list(by_reason) == [EMPTY]:
        return f" with {EMPTY} {lines(by_reason[EMPTY])}"
    return ": " + "; ".join(said(reason, found) for reason, found in by_reason.items())


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
    if path.is_dir():  # else named by its missing extension: "unknown format"
        raise DataError(f"{path}: is a directory, not a file")
    suffix = path.suffix.lower()
    if target_path is not None and suffix in (".tsv", ".csv", ".jsonl"):  # else each row is read as one source
        raise DataError(f"{path}: a {suffix} file holds its own targets (in a column or key); "
                        f"the target file {target_path} goes only with a plain-text source file")
    if suffix in (".tsv", ".csv"):
        records = _read_table(path, suffix == ".tsv", source_column, target_column)
    elif suffix == ".jsonl":
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


def _collect(path: Path, records: Iterator[tuple[int, str | None, str]]) -> ParallelCorpus:
    examples, skipped = [], []
    for line, source, target in records:
        if source is None:  # a record that is no pair; ``target`` says why
            skipped.append((line, target))
            continue
        empty = [side for side, text in (("source", source), ("target", target)) if not normalize(text)]
        if empty:
            skipped.append((line, f"empty {' and '.join(empty)}"))
        else:
            examples.append(Example(source.strip(), target.strip(), line))
    if not examples:
        why = f"all {len(skipped)} skipped{_reasons(skipped)}" if skipped else "it holds no records"
        raise DataError(f"{path}: no usable pairs ({why})")
    return ParallelCorpus(str(path), examples, skipped)


def _read_table(path: Path, tsv: bool, source_column: str | None, target_column: str | None
                ) -> Iterator[tuple[int, str | None, str]]:
    lines = read_lines(path)
    records = tsv_records(path, lines) if tsv else csv_records(path, (line + "\n" for line in lines))
    first = next(records, None)
    if first is None:
        raise DataError(f"{path}: empty file (expected a header row naming the columns)")
    header = [name.strip() for name in first[2]]
    source = choose_column(header, source_column, SOURCE_NAMES, str(path), "column")
    target = choose_column(header, target_column, TARGET_NAMES, str(path), "column", taken=(source,))
    source, target = header.index(source), header.index(target)
    for start, _, row in records:
        if len(row) != len(header):
            raise field_count_error(path, start, len(header), len(row), tsv)
        if repeats_header(row, header):
            yield start, None, REPEATED_HEADER  # skipped, and said so
            continue
        yield start, row[source], row[target]


def _read_jsonl(path: Path, source_key: str | None, target_key: str | None) -> Iterator[tuple[int, str, str]]:
    keys = None
    for number, record, _ in json_records(path, read_lines(path)):
        where = f"{path}: line {number}"
        if keys is None:  # the first record chooses the keys; every other record must have them
            source = choose_column(list(record), source_key, SOURCE_NAMES, where, "key")
            keys = (source, choose_column(list(record), target_key, TARGET_NAMES, where, "key", taken=(source,)))
        texts = []
        for key in keys:
            text, problem = string_value(record, key)
            if problem:
                found = f" (keys found: {listed(list(record))})" if key not in record else ""
                raise DataError(f"{where}: {problem}{found}")
            texts.append(text)
        yield number, texts[0], texts[1]


def _read_aligned(source_path: Path, target_path: Path) -> Iterator[tuple[int, str, str]]:
    if not target_path.exists():
        raise DataError(f"{target_path}: file not found")
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise DataError(
            f"{source_path}: {len(sources)} lines but {target_path} has {len(targets)}; "
            f"line {min(len(sources), len(targets)) + 1} has no partner"
        )
    yield from ((number, s, t) for number, (s, t) in enumerate(zip(sources, targets, strict=True), 1))

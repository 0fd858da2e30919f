"""A table's columns and records, from lines ``seq2seq/files.py`` read: which column is asked for (by name,
exactly, then case aside), the header's names distinct, CSV and TSV records with their physical lines, and the
records that are no data (a blank line; the header again, where two files were joined).

TSV is one record per physical line, fields split on tabs, no quote processing (MaintNet fields such as
``BOLT 1/2" LOOSE`` hold bare quotes, which csv quoting would swallow together with every line after them); CSV
is standard quoting, a quoted field holding commas, quotes and line breaks. A fault is a one-line DataError
naming the file and the line.
"""

from __future__ import annotations

import csv
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from seq2seq.errors import DataError, listed, shown
from seq2seq.files import LONE_CR

SEPARATORS = {";": "semicolons", "\t": "tabs", ",": "commas"}  # that a lone column's name may betray


def _folded(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def choose_column(found: list[str], wanted: str | None, defaults: tuple[str, ...], where: str, what: str,
                  taken: tuple[str, ...] = ()) -> str:
    """The name in ``found`` for ``wanted``, else for the first of ``defaults`` present, else the only
    name not ``taken`` when nothing is taken: exact names first, then ignoring case. A DataError lists the names
    found; a name found twice is a DataError (which of the two was meant cannot be told), and so is a name in
    ``taken`` (the source chosen again as the target: a model would learn to copy, a score compare the
    references with themselves). A target is never the column left over: in a file of ids and alerts that would be
    the ids, learned or scored against without a word."""
    check_distinct_names(found, where, what)
    names = (wanted.strip(),) if wanted is not None else defaults  # spaces around a name, as around a header's
    # then ignoring case and Unicode's two spellings of one letter: a Mac writes "Störung" as o and U+0308, a
    # keyboard types it composed, and the two looked alike in the refusal that said neither was there
    for same in (str.__eq__, lambda a, b: _folded(a) == _folded(b)):
        for name in names:
            matches = [candidate for candidate in found if same(candidate.strip(), name)]
            if len(matches) > 1:  # "Source" and "source" for SOURCE: which was meant cannot be told
                raise DataError(f"{where}: {what}s {listed([m.strip() for m in matches])} all read as {name!r} "
                                f"when case is ignored; give the {what}'s name exactly")
            for candidate in matches:
                if candidate in taken:
                    raise DataError(f"{where}: {what} {shown(candidate.strip())!r} is the source {what} "
                                    f"already; the source and the target must be two {what}s")
                return candidate
    free = [name for name in found if name not in taken]
    if wanted is None and len(free) == 1 and not taken:
        _check_separator(found, where, what)
        return free[0]
    raise DataError(f"{where}: no {what} {' or '.join(map(repr, names))} ({what}s found: {listed(found)})")


def _check_separator(found: list[str], where: str, what: str) -> None:
    """DataError when the only column's name holds a separator: the file is split on another character than
    its reader's (a semicolon-separated CSV from a European Excel, a TSV read as CSV), and each whole row
    would be taken for the column's value."""
    if what != "column" or len(found) != 1:
        return
    separator = max(SEPARATORS, key=found[0].count)
    if separator in found[0]:
        raise DataError(f"{where}: one column {shown(found[0])!r}: separated by {SEPARATORS[separator]}? save it "
                        "comma-separated as .csv, or tab-separated as .tsv")


def check_distinct_names(found: list[str], where: str, what: str) -> None:
    """DataError naming the first name in ``found`` that appears twice (after trimming spaces)."""
    seen: dict[str, int] = {}
    for index, name in enumerate(found, 1):
        if name.strip() in seen:
            raise DataError(f"{where}: {what} {shown(name.strip())!r} appears twice ({what}s {seen[name.strip()]} "
                            f"and {index}); rename one")
        seen[name.strip()] = index


REPEATED_HEADER = "repeats the header row (two files joined into one?)"


def repeats_header(fields: list[str], header: list[str]) -> bool:
    """Whether a record below the header is the header again, as ``cat a.csv b.csv`` leaves one (spaces and the
    second file's byte-order mark aside): a row to flag, not an alert to answer or a pair to train on."""
    def names(found: list[str]) -> list[str]:
        return [name.strip().lstrip("\ufeff").strip() for name in found]
    return len(fields) == len(header) and names(fields) == names(header)


def blank_record(fields: list[str]) -> bool:
    """Whether a record is a blank line: no field (csv's reading of an empty line), or one of spaces at most."""
    return len(fields) <= 1 and not "".join(fields).strip()


def split_tsv(line: str) -> list[str]:
    """The fields of one TSV line (its line ending removed)."""
    return line.removesuffix("\n").removesuffix("\r").split("\t")


def tsv_records(path: Path, lines: Iterable[str], blank: bool = False) -> Iterator[tuple[int, int, list[str]]]:
    """(line, line, fields) of each non-blank TSV line (``blank``: each line, a blank one as its one field), in
    the shape of ``csv_records``. A carriage return inside a line (an old Mac line break, or a field cut in two)
    is a DataError: no field holds one."""
    for number, line in enumerate(lines, 1):
        fields = split_tsv(line)
        if any("\r" in field for field in fields):
            raise DataError(f"{path}: line {number}: malformed tab-separated record ({LONE_CR})")
        if blank or not blank_record(fields):
            yield number, number, fields


def csv_records(path: Path, lines: Iterable[str], blank: bool = False) -> Iterator[tuple[int, int, list[str]]]:
    """(first line, last line, fields) of each non-blank CSV record (``blank``: each record, a blank one as its one
    field, "" for an empty line); ``lines`` keep their line endings.

    A malformed record is a one-line DataError naming its first physical line.
    """
    reader = csv.reader(lines, strict=True)
    end = 0
    while True:
        start = end + 1
        try:
            fields = next(reader, None)
        except csv.Error as err:
            raise DataError(f"{path}: line {start}: malformed comma-separated record ({_csv_fault(err)})") from None
        if fields is None:
            return
        end = reader.line_num
        if blank or not blank_record(fields):
            yield start, end, fields or [""]


def _csv_fault(err: csv.Error) -> str:
    """csv's words for a malformed record, except where they would send the user to Python's open()."""
    if "new-line character seen in unquoted field" in str(err):
        return LONE_CR
    return str(err)


def field_count_error(path: Path, line: int, expected: int, found: int, tsv: bool) -> DataError:
    kind = "tab-separated" if tsv else "comma-separated"
    return DataError(f"{path}: line {line}: expected {expected} {kind} fields, found {found}")

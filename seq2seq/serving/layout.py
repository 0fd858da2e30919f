"""How a file job writes each row in the output format: the input's fields as they were, then the added ones.

Every added field follows ``seq2seq.serving.batch``'s module docstring; TSV output splits on tabs as
``seq2seq.files`` reads it, so a field never holds a tab or a line break: they are written as spaces, and the row's
``error`` field names the columns where that happened (``Layout.rows_text``), so no text changes unmarked. A row's
bytes that are not UTF-8 go back as they came in CSV, TSV and TXT output; in JSONL output, which must be UTF-8
JSON, each is written as its escape (``files.escaped``: the text ``caf\\xe9``), as ``translate --json`` does.
``output.Sinks`` appends what a ``Layout`` writes to the files.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import sys
from json.decoder import scanstring
from pathlib import Path
from typing import Any

from tqdm import tqdm

from seq2seq.errors import DataError, listed
from seq2seq.files import KEPT_BYTES, escaped
from seq2seq.recommender import Candidate, Recommendation
from seq2seq.serving.incident_log import Row

BOM = "\ufeff"
_LINE_BREAKS = re.compile(r"[\t\r\n]")
_JSON_SPACE = " \t\r\n"  # what JSON allows between tokens
_SPACE = re.compile(f"[{_JSON_SPACE}]*")


def row_error(row: Row, result: Recommendation | None) -> str:
    """The row's ``error`` field: why it has no recommendation, or its truncation warning; "" when fine."""
    return row.error or (result.warning if result and result.warning else "")


class Layout:
    """How rows are written in the output format: the header and each row with its added fields."""

    def __init__(self, input_path: Path, fmt: str, columns: list[str], n_best: int, marked: bool = False) -> None:
        """``marked``: the input began with a byte-order mark, which a table output then begins with too (Excel on
        Windows writes one and reads a CSV without it as its local code page, accents garbled)."""
        self.input_path, self.fmt, self.columns, self.n_best = input_path, fmt, columns, n_best
        self.marked = marked
        self.known = set(columns)
        pairs = [("recommendation", "score")] + [(f"recommendation_{k}", f"score_{k}") for k in range(2, n_best + 1)]
        self.added = [*itertools.chain.from_iterable(pairs), "trust", "verdict", "similar_action", "error"]
        clash = [name for name in self.added if name in self.known]
        if clash and fmt != "txt":
            raise DataError(f"{input_path}: already has a column {clash[0]!r}, which the result adds; rename it")
        if fmt == "jsonl" and len(self.known) < len(columns):
            raise DataError(f"{input_path}: repeated column names; JSONL output needs distinct keys")

    def header_text(self) -> str:
        if self.fmt not in ("csv", "tsv"):
            return ""
        return (BOM if self.marked else "") + self._table([[*self.columns, *self.added]])

    def rows_text(self, rows: list[Row], results: list[Recommendation | None]) -> tuple[str, list[str]]:
        """The rows as written, and each row's ``error`` field as written: ``row_error``, and in TSV output the
        columns whose text held a tab or line break."""
        pairs = list(zip(rows, results, strict=True))
        if self.fmt in ("csv", "tsv"):
            records = [self._fields(row, result) for row, result in pairs]
            return self._table(records), [record[-1] for record in records]
        line = self._txt_line if self.fmt == "txt" else self._json_line
        return "".join(line(row, result) for row, result in pairs), [row_error(row, result) for row, result in pairs]

    def _added(self, row: Row, result: Recommendation | None) -> list[str | float | None]:
        """recommendation, score, recommendation_2, score_2, ..., trust, verdict, similar_action (the action of
        the most similar past case), error; "" and None where there is none."""
        found = [(candidate.text, round(candidate.score, 4)) for candidate in result.candidates] if result else []
        padded = (found + [("", None)] * self.n_best)[:self.n_best]
        judged: list[str | float | None] = [None, "", ""]
        if result is not None and result.trust is not None:
            judged = [round(result.trust, 4), result.verdict or "", result.similar[0].action if result.similar else ""]
        return [*itertools.chain.from_iterable(padded), *judged, row_error(row, result)]

    def _fields(self, row: Row, result: Recommendation | None) -> list[str]:
        values = row.values
        if isinstance(values, dict):
            extra = next((key for key in values if key not in self.known), None)
            if extra is not None:
                raise DataError(f"{self.input_path}: line {row.line}: key {extra!r} is not in the first object, so "
                                f"{self.fmt} output has no column for it (write .jsonl output to keep every key)")
            texts = _member_texts(row.text) if row.text else {}
            values = [_cell(values.get(key), texts.get(key)) for key in self.columns]
        added = self._added(row, result)
        fields = [*values, *(f"{value:.4f}" if isinstance(value, float) else _cell(value) for value in added)]
        if self.fmt == "tsv":  # the error field is ours, and last
            names = [*self.columns, *self.added][:-1]
            held = [repr(name) for name, field in zip(names, fields, strict=False) if _LINE_BREAKS.search(field)]
            if held:
                note = (f"{'column' if len(held) == 1 else 'columns'} {listed(held)}: tab or line break written as a "
                        "space (TSV cannot hold one; write .csv or .jsonl output to keep it)")
                fields[-1] = "; ".join(filter(None, [fields[-1], note]))
        return fields

    def _json_line(self, row: Row, result: Recommendation | None) -> str:
        """The row as one JSON line, the added keys last. A JSONL record is written as its own text with them
        added, so each of its fields comes back exactly as it was: json would write 0.10000000000000000555 back
        as 0.1, 1E5 as 100000.0 and -0 as 0. Bytes that are not UTF-8 (in a row flagged for them) are written as
        their escapes (``_json_escaped``)."""
        values = row.values
        if not isinstance(values, dict):
            values = dict(zip(self.columns, values, strict=True))
        clash = next((key for key in self.added if key in values), None)
        if clash is not None:  # the first object's keys were checked when the job began; this is a later one
            raise DataError(f"{self.input_path}: line {row.line}: already has a key {clash!r}, which the result adds; "
                            "rename it")
        record = (row.text or json.dumps(values, ensure_ascii=False)).strip(_JSON_SPACE)
        added = json.dumps(dict(zip(self.added, self._added(row, result), strict=True)), ensure_ascii=False)
        line = record.removesuffix("}").rstrip(_JSON_SPACE) + (", " if values else "") + added.removeprefix("{")
        return _json_escaped(line) + "\n"

    def _txt_line(self, row: Row, result: Recommendation | None) -> str:
        error = row_error(row, result)
        if error:  # above a progress bar on stderr, never after its text on the same line
            tqdm.write(f"warning: {self.input_path}: line {row.line}: {error}", file=sys.stderr)
        candidates = result.candidates if result else []
        if self.n_best == 1:
            return _one_line(candidates[0].text if candidates else "") + "\n"
        return n_best_line(candidates, self.n_best) + "\n"

    def _table(self, records: list[list[str]]) -> str:
        if self.fmt == "tsv":
            return "".join("\t".join(_one_line(field) for field in record) + "\n" for record in records)
        buffer = io.StringIO()
        plain, quoted = csv.writer(buffer, lineterminator="\n"), csv.writer(buffer, lineterminator="\n",
                                                                             quoting=csv.QUOTE_ALL)
        for record in records:  # the csv module quotes a field for a line feed but not for a lone carriage return,
            # which every reader takes as a line end: such a record is written with every field quoted
            (quoted if any("\r" in field for field in record) else plain).writerow(record)
        return buffer.getvalue()


def n_best_line(candidates: list[Candidate], n_best: int) -> str:
    """An alert's n-best as one line of ``n_best`` tab-separated (text, score) pairs, best first; pairs past the
    distinct answers found (a beam can end with fewer, repeats removed) left empty, so every line has as many
    fields, as the CSV's columns do."""
    pairs = [f"{_one_line(c.text)}\t{c.score:.4f}" for c in candidates[:n_best]]
    return "\t".join(pairs + ["\t"] * (n_best - len(pairs)))


def _cell(value: Any, text: str | None = None) -> str:
    """A JSON value as a table field: strings as they are, null as empty, anything else as JSON, as ``text``
    (its text in the input) when given."""
    if value is None or isinstance(value, str):
        return value or ""
    return text or json.dumps(value, ensure_ascii=False)


def _member_texts(line: str) -> dict[str, str]:
    """The text of each member's value in ``line``, a JSON object ``jsonl.json_record`` has read."""
    decoder, texts = json.JSONDecoder(), {}
    at = _SPACE.match(line, line.index("{") + 1).end()
    while line[at] == '"':
        key, at = scanstring(line, at + 1)
        start = _SPACE.match(line, _SPACE.match(line, at).end() + 1).end()  # past the colon
        end = decoder.raw_decode(line, start)[1]
        texts[key] = line[start:end]
        at = _SPACE.match(line, end).end()
        at = _SPACE.match(line, at + 1).end() if line[at] == "," else at
    return texts


def _json_escaped(text: str) -> str:
    """JSON ``text`` with each byte that is not UTF-8 written as the JSON for its escape (``files.escaped``),
    ``\\\\xe9``, which JSON reads as the text ``\\xe9``. Such a byte can only be inside a string: JSON's other
    tokens are ASCII."""
    return KEPT_BYTES.sub(lambda kept: json.dumps(escaped(kept.group()))[1:-1], text)


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)

"""The output files of a file job: the translated rows in the output format, the attention lines and the
heatmap PNGs, appended chunk by chunk (flushed and fsynced), and how much of them a resumed job finds done.

Every added field follows ``seq2seq.serving.batch``'s module docstring; TSV output splits on tabs as
``seq2seq.files`` reads it, so a field never holds a tab or a line break (they are written as spaces).
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import os
import re
import sys
from collections.abc import Iterator
from json.decoder import scanstring
from pathlib import Path
from typing import Any, BinaryIO

from tqdm import tqdm

from seq2seq.errors import DataError
from seq2seq.files import BYTES_KEPT, open_binary, split_tsv
from seq2seq.recommender import Recommendation
from seq2seq.serving.figures import heatmap_figure
from seq2seq.serving.incident_log import Row

_LINE_BREAKS = re.compile(r"[\t\r\n]")
_JSON_SPACE = " \t\r\n"  # what JSON allows between tokens
_SPACE = re.compile(f"[{_JSON_SPACE}]*")


def row_error(row: Row, result: Recommendation | None) -> str:
    """The row's ``error`` field: why it has no recommendation, or its truncation warning; "" when fine."""
    return row.error or (result.warning if result and result.warning else "")


class Layout:
    """How rows are written in the output format: the header and each row with its added fields."""

    def __init__(self, input_path: Path, fmt: str, columns: list[str], n_best: int) -> None:
        self.input_path, self.fmt, self.columns, self.n_best = input_path, fmt, columns, n_best
        self.known = set(columns)
        pairs = [("recommendation", "score")] + [(f"recommendation_{k}", f"score_{k}") for k in range(2, n_best + 1)]
        self.added = [*itertools.chain.from_iterable(pairs), "trust", "verdict", "similar_action", "error"]
        clash = [name for name in self.added if name in self.known]
        if clash and fmt != "txt":
            raise DataError(f"{input_path}: already has a column {clash[0]!r}, which the result adds; rename it")
        if fmt == "jsonl" and len(self.known) < len(columns):
            raise DataError(f"{input_path}: repeated column names; JSONL output needs distinct keys")

    def header_text(self) -> str:
        return self._table([[*self.columns, *self.added]]) if self.fmt in ("csv", "tsv") else ""

    def rows_text(self, rows: list[Row], results: list[Recommendation | None]) -> str:
        pairs = zip(rows, results, strict=True)
        if self.fmt == "txt":
            return "".join(self._txt_line(row, result) for row, result in pairs)
        if self.fmt == "jsonl":
            return "".join(self._json_line(row, result) for row, result in pairs)
        return self._table([self._fields(row, result) for row, result in pairs])

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
        return [*values, *(f"{value:.4f}" if isinstance(value, float) else _cell(value) for value in added)]

    def _json_line(self, row: Row, result: Recommendation | None) -> str:
        """The row as one JSON line, the added keys last. A JSONL record is written as its own text with them
        added, so each of its fields comes back exactly as it was: json would write 0.10000000000000000555 back
        as 0.1, 1E5 as 100000.0 and -0 as 0."""
        values = row.values
        if not isinstance(values, dict):
            values = dict(zip(self.columns, values, strict=True))
        clash = next((key for key in self.added if key in values), None)
        if clash is not None:  # the first object's keys were checked when the job began; this is a later one
            raise DataError(f"{self.input_path}: line {row.line}: already has a key {clash!r}, which the result adds; "
                            "rename it")
        record = (row.text or json.dumps(values, ensure_ascii=False)).strip(_JSON_SPACE)
        added = json.dumps(dict(zip(self.added, self._added(row, result), strict=True)), ensure_ascii=False)
        return record.removesuffix("}").rstrip(_JSON_SPACE) + (", " if values else "") + added.removeprefix("{") + "\n"

    def _txt_line(self, row: Row, result: Recommendation | None) -> str:
        error = row_error(row, result)
        if error:  # above a progress bar on stderr, never after its text on the same line
            tqdm.write(f"warning: {self.input_path}: line {row.line}: {error}", file=sys.stderr)
        candidates = result.candidates if result else []
        if self.n_best == 1:
            return _one_line(candidates[0].text if candidates else "") + "\n"
        return "\t".join(f"{_one_line(c.text)}\t{c.score:.4f}" for c in candidates) + "\n"

    def _table(self, records: list[list[str]]) -> str:
        if self.fmt == "tsv":
            return "".join("\t".join(_one_line(field) for field in record) + "\n" for record in records)
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(records)
        return buffer.getvalue()


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


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


class Sinks:
    """The output file, the attention file and the heatmap folder of one job, appended to chunk by chunk.

    On opening, each holds ``done`` complete rows: none for a new job; for a resumed one, the rows
    that all of them hold (a partial row, or rows only some of them got before a kill, are cut away).
    ``checked``: the caller has made sure they are new (a split job); ``with_header=False``: no header.
    """

    def __init__(self, output: Path, layout: Layout, attention: str | Path | None, heatmaps: str | Path | None,
                 resume: bool, checked: bool = False, with_header: bool = True) -> None:
        self.layout = layout
        self.heatmaps = Path(heatmaps) if heatmaps is not None else None
        attention_path = Path(attention) if attention is not None else None
        if not resume and not checked:
            check_new_outputs(output, attention_path, self.heatmaps)
        header = layout.header_text() if with_header else ""
        self.done, end = _complete_rows(output, layout.fmt == "csv", header)
        if attention_path is not None:
            self.done, attention_end = _complete_rows(attention_path, False, "", self.done)
            self.done, end = _complete_rows(output, layout.fmt == "csv", header, self.done)
            self.attention = _append_at(attention_path, attention_end)
        else:
            self.attention = None
        self.output = _append_at(output, end)
        if end == 0:
            with _naming(output):
                _append(self.output, header)
        if self.heatmaps:
            self.heatmaps.mkdir(parents=True, exist_ok=True)

    def write(self, rows: list[Row], results: list[Recommendation | None]) -> None:
        """Heatmaps, then attention lines, then output rows, so the output never runs ahead of the others.

        An OSError (a full disk) names the file it happened on, which a write to an open file does not."""
        text = self.layout.rows_text(rows, results)  # first: a DataError here leaves every file as it was
        if self.heatmaps:
            for row, result in zip(rows, results, strict=True):
                if result and result.candidates:
                    path = self.heatmaps / f"row_{row.number:06d}.png"
                    with _naming(path):
                        _save_heatmap(path, result)
        if self.attention:
            with _naming(Path(self.attention.name)):
                _append(self.attention, "".join(_attention_line(row, result)
                                                for row, result in zip(rows, results, strict=True)))
        with _naming(Path(self.output.name)):
            _append(self.output, text)

    def __enter__(self) -> Sinks:
        return self

    def __exit__(self, *exc: object) -> None:
        for file in (self.attention, self.output):
            if file is not None:
                file.close()


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """Inside the block, an OSError that names no file is raised again naming ``path``."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err


def check_new_outputs(output: Path, attention: Path | None, heatmaps: Path | None) -> None:
    """DataError when a new job's output, attention file or heatmap folder already holds output."""
    for path, option in ((output, "--output"), (attention, "--attention-out")):
        if path is not None and path.exists():
            raise DataError(f"{path}: already exists; use --resume to continue it, or another {option}")
    if heatmaps and heatmaps.is_dir() and next(heatmaps.glob("row_*.png"), None):
        raise DataError(f"{heatmaps}: already holds heatmaps; use --resume, or another --heatmaps")


def _append_at(path: Path, end: int) -> BinaryIO:
    """``path`` opened for writing at byte ``end``, anything after it cut away (created when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    file = open_binary(path, "r+b" if path.exists() else "xb")
    file.truncate(end)
    file.seek(end)
    return file


def _append(file: BinaryIO, text: str) -> None:
    file.write(text.encode("utf-8", BYTES_KEPT))  # a row's bytes that are not UTF-8 go back as they came
    file.flush()
    os.fsync(file.fileno())


def _complete_rows(path: Path, quoted: bool, header: str, limit: int | None = None) -> tuple[int, int]:
    """Complete data rows (at most ``limit``) in a file this module wrote, and the byte offset where they end.

    A partial last row (a killed write) is not counted. A file that starts with another header than
    ``header`` is some other job's output, an error; one without a complete header counts as empty.
    """
    if not path.exists():
        return 0, 0
    with open_binary(path, "rb") as file:
        records = _record_ends(file, quoted)
        rows, end = 0, 0
        if header:
            expected = next(_record_ends(io.BytesIO(header.encode("utf-8")), quoted))[0]
            first = next(records, None)
            if first is None:
                return 0, 0
            if first[0] != expected:
                raise DataError(f"{path}: its header is not this job's (another input, --column or --n-best); "
                                "use another --output")
            end = first[1]
        for _fields, offset in itertools.islice(records, limit):
            rows, end = rows + 1, offset
        return rows, end


def _record_ends(file: BinaryIO, quoted: bool) -> Iterator[tuple[list[str], int]]:
    """(fields, end offset) of each complete record (a CSV record, else a line split on tabs)."""
    end = 0

    def complete_lines() -> Iterator[str]:
        nonlocal end
        for raw in file:
            if not raw.endswith(b"\n"):
                return
            end += len(raw)
            yield raw.decode("utf-8", "replace")

    lines = complete_lines()
    if not quoted:
        yield from ((split_tsv(line), end) for line in lines)
        return
    reader = csv.reader(lines, strict=True)
    try:
        for fields in reader:
            yield fields, end
    except csv.Error as err:  # a quote left open at the end is a record cut by a kill; elsewhere, damage
        if next(lines, None) is not None:
            raise DataError(f"{getattr(file, 'name', 'output')}: line {reader.line_num}: not a CSV record this "
                            f"job wrote ({err})") from None


def _attention_line(row: Row, result: Recommendation | None) -> str:
    best = result.candidates[0] if result and result.candidates else None
    record = {"row": row.number, "source_pieces": result.source_pieces if best and result else [],
              "target_pieces": best.target_pieces if best else [],
              "attention": [[round(w, 4) for w in weights] for weights in best.attention.tolist()] if best else []}
    return json.dumps(record, ensure_ascii=False) + "\n"


def _save_heatmap(path: Path, result: Recommendation) -> None:
    """The best candidate's heatmap, written under a temporary name and renamed, so a PNG is never partial."""
    partial = path.with_name(path.name + ".partial")
    heatmap_figure(result.source_pieces, result.candidates[0]).savefig(partial, format="png")
    os.replace(partial, path)

"""File mode of ``seq2seq translate``: a whole incident log in, every row back with its recommendation.

Formats (``FORMATS``), by file extension or ``fmt`` for the input; the output takes the input's
format unless its own extension names another:

- ``csv``: a header row, standard quoting (fields may hold commas, quotes and line breaks).
- ``tsv``: a header row, one record per physical line, split on tabs, no quote processing (as
  ``seq2seq.corpus`` reads it). A tab or line break in a field written to TSV (possible only when
  the input is CSV or JSONL) is written as a space.
- ``jsonl``: one JSON object per line; every key is kept and the new keys are added.
- ``txt``: one alert per line (its column is ``source`` in other output formats). As output: one
  recommendation per line (``text<TAB>score`` pairs with n-best > 1, as on stdout), an empty line
  for a failed row, and each row's error on stderr with its input line number.

Every input row is written, in order, with ``recommendation``, ``score`` (``recommendation_2``,
``score_2``, ... with n-best > 1) and ``error`` added. ``error`` is empty when fine, the truncation
warning for an alert over the model's limit (translated all the same), or why the row has no
recommendation: an empty alert, bytes that are not UTF-8, a missing or non-string JSON value. A
row's problem never stops the job; a problem with the file (missing, no such column, a malformed
CSV record, a TSV line with the wrong number of fields, a line that is not a JSON object) is a
one-line ``DataError``. Blank lines are not rows, except in ``txt`` input.

The input is streamed in chunks of ``chunk_rows`` rows; each chunk's rows are written whole, then
flushed and fsynced, so memory stays bounded and a killed job loses nothing already written.
``resume=True`` cuts a partial last row left by a kill, skips as many input rows as the output
holds and appends, so the result is byte for byte that of an uninterrupted run.

A job split across processes (torchrun) gives each a ``part``: a contiguous slice of rows in whole
chunks, written to ``part_path(output, rank)`` (the header only by rank 0); ``merge_parts`` then
appends the parts in order, which gives the bytes of a one-process run.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from seq2seq.config import SearchConfig
from seq2seq.errors import ConfigError, DataError
from seq2seq.incident_log import FORMATS, Row, count_rows, format_of, open_binary, read_rows

if TYPE_CHECKING:
    from seq2seq.recommender import Recommendation, Recommender

_LINE_BREAKS = re.compile(r"[\t\r\n]")


@dataclass(frozen=True)
class BatchSummary:
    rows: int  # rows written by this run; the input holds rows + skipped_resume
    translated: int  # rows of this run given a recommendation
    errors: int  # rows of this run with a non-empty error (no recommendation, or a truncated alert)
    skipped_resume: int  # rows already in the output when this run resumed it
    seconds: float

    def summary(self) -> str:
        """One line, e.g. "120 rows: 118 translated, 3 with errors, 40 done before (resume); 2.5 s (48 rows/s)"."""
        resumed = f", {self.skipped_resume} done before (resume)" if self.skipped_resume else ""
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        return (f"{self.rows} rows: {self.translated} translated, {self.errors} with errors{resumed}; "
                f"{self.seconds:.1f} s ({rate:.0f} rows/s)")


def translate_file(recommender: Recommender, input_path: str | Path, output_path: str | Path,
                   column: str | None = None, fmt: str | None = None, search: SearchConfig | None = None,
                   batch_size: int = 64, chunk_rows: int = 1024, resume: bool = False,
                   attention_out: str | Path | None = None, heatmaps: str | Path | None = None,
                   progress: Callable[[int, int | None], None] | None = None,
                   part: slice | None = None, header: bool = True) -> BatchSummary:
    """Translate ``column`` of every row of ``input_path`` into ``output_path`` (see the module docstring).

    ``attention_out`` gets one JSON line per row, ``{"row", "source_pieces", "target_pieces",
    "attention"}`` (best candidate; empty lists for a failed row); ``heatmaps`` one PNG per translated
    row. ``progress(done_rows, total_rows)`` is called after each chunk; the total comes from a line
    count when the input is seekable, else it is None. ``part`` translates only those rows (0-based,
    data rows) into a new file, the caller having checked that the job's destinations are new
    (``check_new_outputs``); ``header=False`` leaves out the header (of all parts but the first).
    """
    started = time.monotonic()
    search = search or SearchConfig()
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if batch_size < 1 or chunk_rows < 1:
        raise ConfigError(f"batch_size and chunk_rows must be at least 1, got {batch_size} and {chunk_rows}")
    if resume and part is not None:
        raise ConfigError("resume and part exclude each other: a split job is resumed in one process")
    input_path, output_path = Path(input_path), Path(output_path)
    in_fmt = fmt or format_of(input_path, "--format")
    out_fmt = format_of(output_path, None) or in_fmt
    if output_path.exists() and input_path.exists() and output_path.samefile(input_path):
        raise DataError(f"{output_path}: is the input file; choose another --output")
    with open_binary(input_path, "rb") as file:
        total = count_rows(file, in_fmt) if file.seekable() else None
        columns, rows = read_rows(file, input_path, in_fmt, column)
        if part is not None:
            rows = itertools.islice(rows, part.start, part.stop)
            total = None if total is None else len(range(total)[part])
        layout = _Layout(input_path, out_fmt, columns, search.n_best)
        with _Sinks(output_path, layout, attention_out, heatmaps, resume, part is not None, header) as sinks:
            skipped = sum(1 for _ in itertools.islice(rows, sinks.done))
            if skipped < sinks.done:
                raise DataError(f"{output_path}: holds {sinks.done} rows but {input_path} has only {skipped}; "
                                "it is not this input's output")
            done, translated, errors = skipped, 0, 0
            if progress:
                progress(done, total)
            while chunk := list(itertools.islice(rows, chunk_rows)):
                results = _recommend(recommender, chunk, search, batch_size)
                sinks.write(chunk, results)
                done += len(chunk)
                translated += sum(1 for result in results if result and result.candidates)
                errors += sum(1 for row, result in zip(chunk, results, strict=True) if _error(row, result))
                if progress:
                    progress(done, total)
    return BatchSummary(done - skipped, translated, errors, skipped, time.monotonic() - started)


def _recommend(recommender: Recommender, chunk: list[Row], search: SearchConfig,
               batch_size: int) -> list[Recommendation | None]:
    """One result per row, None for a row that cannot be translated."""
    found = iter(recommender.recommend([row.alert for row in chunk if row.alert is not None], search, batch_size))
    return [next(found) if row.alert is not None else None for row in chunk]


def _error(row: Row, result: Recommendation | None) -> str:
    return row.error or (result.warning if result and result.warning else "")


# Writing


class _Layout:
    """How rows are written in the output format: the header and each row with its added fields."""

    def __init__(self, input_path: Path, fmt: str, columns: list[str], n_best: int) -> None:
        self.input_path, self.fmt, self.columns, self.n_best = input_path, fmt, columns, n_best
        self.known = set(columns)
        pairs = [("recommendation", "score")] + [(f"recommendation_{k}", f"score_{k}") for k in range(2, n_best + 1)]
        self.added = [*itertools.chain.from_iterable(pairs), "error"]
        clash = [name for name in self.added if name in self.known]
        if clash and fmt != "txt":
            raise DataError(f"{input_path}: already has a column {clash[0]!r}; rename it, or write .txt output")
        if fmt == "jsonl" and len(self.known) < len(columns):
            raise DataError(f"{input_path}: repeated column names; JSONL output needs distinct keys")

    def header_text(self) -> str:
        return self._table([[*self.columns, *self.added]]) if self.fmt in ("csv", "tsv") else ""

    def rows_text(self, rows: list[Row], results: list[Recommendation | None]) -> str:
        pairs = zip(rows, results, strict=True)
        if self.fmt == "txt":
            return "".join(self._txt_line(row, result) for row, result in pairs)
        if self.fmt == "jsonl":
            return "".join(json.dumps(self._object(row, result), ensure_ascii=False) + "\n" for row, result in pairs)
        return self._table([self._fields(row, result) for row, result in pairs])

    def _added(self, row: Row, result: Recommendation | None) -> list[str | float | None]:
        """recommendation, score, recommendation_2, score_2, ..., error; "" and None where there is none."""
        found = [(candidate.text, round(candidate.score, 4)) for candidate in result.candidates] if result else []
        padded = (found + [("", None)] * self.n_best)[:self.n_best]
        return [*itertools.chain.from_iterable(padded), _error(row, result)]

    def _fields(self, row: Row, result: Recommendation | None) -> list[str]:
        values = row.values
        if isinstance(values, dict):
            extra = next((key for key in values if key not in self.known), None)
            if extra is not None:
                raise DataError(f"{self.input_path}: line {row.line}: key {extra!r} is not in the first object, so "
                                f"{self.fmt} output has no column for it (write .jsonl output to keep every key)")
            values = [_cell(values.get(key)) for key in self.columns]
        added = self._added(row, result)
        return [*values, *(f"{value:.4f}" if isinstance(value, float) else _cell(value) for value in added)]

    def _object(self, row: Row, result: Recommendation | None) -> dict[str, Any]:
        values = row.values
        record = dict(values) if isinstance(values, dict) else dict(zip(self.columns, values, strict=True))
        clash = next((key for key in self.added if key in record), None)
        if clash is not None:  # the first object's keys were checked when the job began; this is a later one
            raise DataError(f"{self.input_path}: line {row.line}: already has a key {clash!r}; rename it")
        return {**record, **dict(zip(self.added, self._added(row, result), strict=True))}

    def _txt_line(self, row: Row, result: Recommendation | None) -> str:
        error = _error(row, result)
        if error:
            print(f"warning: {self.input_path}: line {row.line}: {error}", file=sys.stderr)
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


def _cell(value: Any) -> str:
    """A JSON value as a table field: strings as they are, null as empty, anything else as JSON."""
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


class _Sinks:
    """The output file, the attention file and the heatmap folder of one job, appended to chunk by chunk.

    On opening, each holds ``done`` complete rows: none for a new job; for a resumed one, the rows
    that all of them hold (a partial row, or rows only some of them got before a kill, are cut away).
    ``checked``: the caller has made sure they are new (a split job); ``with_header=False``: no header.
    """

    def __init__(self, output: Path, layout: _Layout, attention: str | Path | None, heatmaps: str | Path | None,
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
            _append(self.output, header)
        if self.heatmaps:
            self.heatmaps.mkdir(parents=True, exist_ok=True)

    def write(self, rows: list[Row], results: list[Recommendation | None]) -> None:
        """Heatmaps, then attention lines, then output rows, so the output never runs ahead of the others."""
        text = self.layout.rows_text(rows, results)  # first: a DataError here leaves every file as it was
        if self.heatmaps:
            for row, result in zip(rows, results, strict=True):
                if result and result.candidates:
                    _save_heatmap(self.heatmaps / f"row_{row.number:06d}.png", result)
        if self.attention:
            _append(self.attention, "".join(_attention_line(row, result)
                                            for row, result in zip(rows, results, strict=True)))
        _append(self.output, text)

    def __enter__(self) -> _Sinks:
        return self

    def __exit__(self, *exc: object) -> None:
        for file in (self.attention, self.output):
            if file is not None:
                file.close()


def check_new_outputs(output: Path, attention: Path | None, heatmaps: Path | None) -> None:
    """DataError when a new job's output, attention file or heatmap folder already holds output."""
    for path, option in ((output, "--output"), (attention, "--attention-out")):
        if path is not None and path.exists():
            raise DataError(f"{path}: already exists; use --resume to continue it, or another {option}")
    if heatmaps and heatmaps.is_dir() and next(heatmaps.glob("row_*.png"), None):
        raise DataError(f"{heatmaps}: already holds heatmaps; use --resume, or another --heatmaps")


def part_path(path: Path, index: int) -> Path:
    """Where process ``index`` of a split job writes its part of ``path``: process 0 writes ``path`` itself."""
    return path if index == 0 else path.with_name(f".{path.stem}.part{index}{path.suffix}")


def merge_parts(path: Path, count: int) -> None:
    """Append parts 1 .. count - 1 of ``path`` to it, in order (fsynced), then delete them."""
    parts = [part_path(path, index) for index in range(1, count)]
    with open_binary(path, "ab") as merged:
        for part in parts:
            with open_binary(part, "rb") as file:
                shutil.copyfileobj(file, merged)
        merged.flush()
        os.fsync(merged.fileno())
    for part in parts:
        part.unlink()


def _append_at(path: Path, end: int) -> BinaryIO:
    """``path`` opened for writing at byte ``end``, anything after it cut away (created when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    file = open_binary(path, "r+b" if path.exists() else "xb")
    file.truncate(end)
    file.seek(end)
    return file


def _append(file: BinaryIO, text: str) -> None:
    file.write(text.encode("utf-8"))
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
        yield from ((line.removesuffix("\n").split("\t"), end) for line in lines)
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
    from seq2seq.heatmap import heatmap_figure

    partial = path.with_name(path.name + ".partial")
    heatmap_figure(result.source_pieces, result.candidates[0]).savefig(partial, format="png")
    os.replace(partial, path)

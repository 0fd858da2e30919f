"""The output files of a file job: the translated rows in the output format (``layout.Layout``), the attention
lines and the heatmap PNGs, appended chunk by chunk (flushed and fsynced), and how much of them a resumed job
finds done.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from seq2seq.errors import DataError
from seq2seq.files import BYTES_KEPT, open_binary
from seq2seq.recommender import Candidate, Recommendation
from seq2seq.serving.figures import heatmap_figure
from seq2seq.serving.incident_log import Row
from seq2seq.serving.layout import BOM, Layout
from seq2seq.tables import split_tsv
from seq2seq.words import as_typed, word_attention, word_spans
from seq2seq.writing import sync_folder


class Sinks:
    """The output file, the attention file and the heatmap folder of one job, appended to chunk by chunk.

    Made, they measure ``done``: no rows for a new job; for a resumed one, the complete rows that all of them hold
    (``total``: the input's rows, when known).
    Opened (``with``), each is cut to those rows (a partial row, or rows only some of them got before a kill).
    ``checked``: the caller has made sure they are new (a split job); ``with_header=False``: no header.
    """

    def __init__(self, output: Path, layout: Layout, attention: str | Path | None, heatmaps: str | Path | None,
                 resume: bool, checked: bool = False, with_header: bool = True, chunk_rows: int = 1,
                 total: int | None = None) -> None:
        self.layout = layout
        self.heatmaps = Path(heatmaps) if heatmaps is not None else None
        attention_path = Path(attention) if attention is not None else None
        if not resume and not checked:
            check_new_outputs(output, attention_path, self.heatmaps)
        header = layout.header_text() if with_header else ""
        ends = _row_ends(output, layout.fmt == "csv", header)
        attention_ends = _row_ends(attention_path, False, "") if attention_path is not None else ends
        done = min(len(ends), len(attention_ends)) - 1  # the rows both files hold whole
        # Back to the start of a chunk of ``chunk_rows``: a chunk's alerts are batched together, and a float's last
        # digit can depend on its batch, so a job resumed mid-chunk would not write what a job never stopped writes.
        # All ``total`` rows of the input held: the job had finished, its last chunk whole, and nothing is redone.
        self.done = done if done == total else done - done % chunk_rows
        self._paths, self._header = (output, attention_path), header
        self._ends = (ends[self.done], attention_ends[self.done])
        self.last_kept = b""  # the last row kept, as written
        if self.done:
            with open_binary(output, "rb") as file:
                file.seek(ends[self.done - 1])
                self.last_kept = file.read(ends[self.done] - ends[self.done - 1])
        self.output: BinaryIO | None = None
        self.attention: BinaryIO | None = None

    def check_continues(self, row: Row) -> None:
        """DataError unless the last row kept is what this job writes for ``row``, the input row in its place: an
        output that a hand edit took a row from would be continued from the wrong row, one row given twice."""
        if not self.last_kept or self.layout.fmt == "txt":  # a txt output holds no input to compare
            return
        expected = self.layout.rows_text([row], [None])[0].encode("utf-8", BYTES_KEPT)
        if _input_part(self.layout, self.last_kept) != _input_part(self.layout, expected):
            raise DataError(f"{self._paths[0]}: its row {row.number} does not hold line {row.line} of "
                            f"{self.layout.input_path} as this job wrote it (was the output edited?); use another "
                            "--output, or delete it and its record to start again")

    def write(self, rows: list[Row], results: list[Recommendation | None]) -> list[str]:
        """Heatmaps, then attention lines, then output rows, so the output never runs ahead of the others; returns
        each row's ``error`` field as written.

        An OSError (a full disk) names the file it happened on, which a write to an open file does not."""
        text, errors = self.layout.rows_text(rows, results)  # first: a DataError here leaves every file as it was
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
        return errors

    def __enter__(self) -> Sinks:
        """The files opened, each cut to the rows kept; a new output gets its header."""
        (output, attention), (end, attention_end) = self._paths, self._ends
        if attention is not None:
            self.attention = _append_at(attention, attention_end)
        self.output = _append_at(output, end)
        if end == 0:
            with _naming(output):
                _append(self.output, self._header)
        if self.heatmaps:
            self.heatmaps.mkdir(parents=True, exist_ok=True)
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
        if path is not None and path.is_dir():  # --resume would not help: no job writes a folder there
            raise DataError(f"{path}: is a directory; {option} needs a file name")
        if path is not None and path.exists():
            raise DataError(f"{path}: already exists; use --resume to continue it, or another {option}")
    if heatmaps and heatmaps.is_dir() and next(heatmaps.glob("row_*.png"), None):
        raise DataError(f"{heatmaps}: already holds heatmaps; use --resume, or another --heatmaps")


def _append_at(path: Path, end: int) -> BinaryIO:
    """``path`` opened for writing at byte ``end``, anything after it cut away (created when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    file = open_binary(path, "xb" if created else "r+b")
    if created:
        sync_folder(path.parent)  # the rows synced chunk by chunk are found again after a power cut
    file.truncate(end)
    file.seek(end)
    return file


def _append(file: BinaryIO, text: str) -> None:
    """``text`` written at the file's end and synced; when a write fails (a full disk), the file is cut back to
    where it ended, so that it never ends in half a row that a reader would take for a whole one."""
    data = memoryview(text.encode("utf-8", BYTES_KEPT))  # a row's bytes that are not UTF-8 go back as they came
    descriptor = file.fileno()  # written past the file object, whose buffer would keep the refused bytes
    start = os.lseek(descriptor, 0, os.SEEK_CUR)
    try:
        while data:
            data = data[os.write(descriptor, data):]
        os.fsync(descriptor)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(descriptor, start)
            os.lseek(descriptor, start, os.SEEK_SET)
        raise


def _row_ends(path: Path, quoted: bool, header: str) -> list[int]:
    """Where each complete data row of a file this module wrote ends (byte offsets), after where its header
    ends: element k is the end of the first k rows, so there are len - 1 of them.

    A partial last row (a killed write) is not counted. A file that starts with another header than
    ``header`` is some other job's output, an error; one without a complete header counts as empty.
    """
    if not path.exists():
        return [0]
    with open_binary(path, "rb") as file:
        records = _record_ends(file, quoted)
        ends = [0]
        if header:
            expected = next(_record_ends(io.BytesIO(header.encode("utf-8")), quoted))[0]
            first = next(records, None)
            if first is None:
                return [0]
            if _unmarked(first[0]) != _unmarked(expected):  # an output begun before marks were kept resumes too
                raise DataError(f"{path}: its header is not this job's (another input, --column or --n-best); "
                                "use another --output")
            ends = [first[1]]
        ends.extend(offset for _fields, offset in records)
        return ends


def _unmarked(fields: list[str]) -> list[str]:
    return [fields[0].removeprefix(BOM), *fields[1:]] if fields else fields


def _input_part(layout: Layout, written: bytes) -> object:
    """What a row as written holds of its input row: the input's fields, or a JSON record without the added keys."""
    if layout.fmt == "jsonl":
        try:
            record = json.loads(written)
        except ValueError:
            return None
        return {key: value for key, value in record.items() if key not in layout.added} \
            if isinstance(record, dict) else None
    try:
        fields = next(_record_ends(io.BytesIO(written), layout.fmt == "csv"), ([], 0))[0]
    except DataError:
        return None
    return fields[:len(layout.columns)]


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
    """The row's attention as one JSON line: the best candidate's matrices over pieces and over words (target x
    source, rows summing to 1), each n-best alternative's in ``alternatives``; empty lists for a failed row."""
    candidates = result.candidates if result else []
    source = result.source_pieces if result and candidates else []
    best, *others = [_matrices(source, c) for c in candidates] or [
        {"target_pieces": [], "attention": [], "target_words": [], "word_attention": []}]
    record = {"row": row.number, "source_pieces": source, **best,
              "source_words": as_typed(result.alert, [word for word, _, _ in word_spans(source)]) if result else [],
              "alternatives": others}
    return json.dumps(record, ensure_ascii=False) + "\n"


def _matrices(source_pieces: list[str], candidate: Candidate) -> dict[str, list]:
    """A candidate's target pieces and words and its attention over pieces and over words, rounded to 4 places."""
    pieces = candidate.attention.double().numpy()  # (target pieces, source pieces); rounded as float64, not 32
    _, target_words, words = word_attention(source_pieces, candidate.target_pieces, pieces)
    return {"target_pieces": candidate.target_pieces, "attention": np.round(pieces, 4).tolist(),
            "target_words": target_words, "word_attention": np.round(words, 4).tolist()}


def _save_heatmap(path: Path, result: Recommendation) -> None:
    """The best candidate's heatmap, written under a temporary name and renamed, so a PNG is never partial."""
    partial = path.with_name(path.name + ".partial")
    heatmap_figure(result.source_pieces, result.candidates[0], alert=result.alert).savefig(partial, format="png")
    os.replace(partial, path)

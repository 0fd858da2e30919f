"""File mode of ``seq2seq translate``: a whole incident log in, every row back with its recommendation.

Formats (``FORMATS``), by file extension or ``fmt`` for the input; the output takes the input's
format unless its own extension names another:

- ``csv``: a header row, standard quoting (fields may hold commas, quotes and line breaks). A CSV or TSV
  output begins with a byte-order mark when the input did.
- ``tsv``: a header row, one record per physical line, split on tabs, no quote processing (as
  ``seq2seq.corpus`` reads it). A tab or line break in a field written to TSV (possible only when
  the input is CSV or JSONL) is written as a space, and the row's ``error`` says in which columns.
- ``jsonl``: one JSON object per line; each is written back as its own text, every value as it was written
  (``layout.Layout``), with the new keys added. When no alert key is named, the rule (source, problem,
  alert, the only key) must take the same key over the whole log as over its first readable record, or the file
  is refused.
- ``txt``: one alert per line (its column is ``source`` in other output formats). As output: one
  recommendation per line (``text<TAB>score`` pairs with n-best > 1, as on stdout), an empty line
  for a failed row, and each row's error on stderr with its input line number.

Every input row is written, in order, with ``recommendation``, ``score`` (``recommendation_2``,
``score_2``, ... with n-best > 1) and ``error`` added. ``error`` is empty when fine, the truncation
warning for an alert over the model's limit (translated all the same), the columns whose tabs or line
breaks TSV output wrote as spaces (likewise a warning), or why the row has no
recommendation: an empty alert, bytes that are not UTF-8, a missing or non-string JSON value. A
row's problem never stops the job; a problem with the file (missing, no such column, a malformed
CSV record, a TSV line with the wrong number of fields, a line that is not a JSON object) is a
one-line ``DataError``; met part-way, or when a write fails (a full disk), a ``JobStopped`` that tells
how many rows the output keeps and whether ``resume`` can go on. Blank lines are not rows, except in
``txt`` input.

The input is streamed in chunks of ``chunk_rows`` rows; each chunk's rows are written whole, then
flushed and fsynced, so memory stays bounded and a killed job loses nothing already written.
``resume=True`` cuts a partial last row left by a kill, skips as many input rows as the output
holds and appends, so the result is byte for byte that of an uninterrupted run.

A job split across processes (torchrun) is a layer around this one: ``seq2seq.serving.sharding``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from seq2seq.config import SearchConfig
from seq2seq.errors import ConfigError, DataError, write_error
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.serving.destinations import (
    check_distinct,
    check_resumable_input,
    forget_parts,
    held_record,
    job_record,
    record_path,
)
from seq2seq.serving.incident_log import FORMATS, Row, count_rows, format_of, open_log, read_rows
from seq2seq.serving.layout import BOM, Layout
from seq2seq.serving.output import Sinks, check_new_outputs


@dataclass(frozen=True)
class BatchSummary:
    rows: int  # rows written by this run; the input holds rows + skipped_resume
    translated: int  # rows of this run given a recommendation
    errors: int  # rows of this run with a non-empty error (no recommendation, or a truncated alert)
    skipped_resume: int  # rows already in the output when this run resumed it
    seconds: float
    warned: int = 0  # of the errors, rows translated all the same (a truncated alert): a warning, not a failure
    out_of_scope: int = 0  # of the rows translated, those whose alert is out of scope: a guess, not advice

    def summary(self) -> str:
        """One line, e.g. "120 rows: 118 translated (3 out of scope: guesses, not advice; 1 with a warning), 2 with
        errors, 40 done before (resume); 2.5 s (48 rows/s)"."""
        notes = [f"{self.out_of_scope} out of scope: guesses, not advice"] * bool(self.out_of_scope) + \
            [f"{self.warned} with a warning"] * bool(self.warned)
        warned = f" ({'; '.join(notes)})" if notes else ""
        resumed = f", {self.skipped_resume} done before (resume)" if self.skipped_resume else ""
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        rows = f"{self.rows} row{'s' * (self.rows != 1)}"  # digits as they always were: scripts read this line
        return (f"{rows}: {self.translated} translated{warned}, {self.errors - self.warned} with errors{resumed}; "
                f"{self.seconds:.1f} s ({rate:.0f} rows/s)")


class JobStopped(DataError):
    """A job stopped after it began to write its output: by a problem with its input met part-way (a malformed
    record) or by a write that failed (a full disk). ``kept``: the whole rows its output holds; ``resumable``:
    whether ``resume=True`` can go on as things are (a failed write), or the input must be fixed first, which
    ``resume`` would then refuse (the job record names the input as it was)."""

    def __init__(self, message: str, kept: int, resumable: bool) -> None:
        super().__init__(message)
        self.kept, self.resumable = kept, resumable

    def __reduce__(self) -> tuple[type, tuple[str, int, bool]]:  # as an exception is copied: by its arguments
        return type(self), (str(self), self.kept, self.resumable)


def translate_file(recommender: Recommender, input_path: str | Path, output_path: str | Path,
                   column: str | None = None, fmt: str | None = None, search: SearchConfig | None = None,
                   batch_size: int = 64, chunk_rows: int = 1024, resume: bool = False,
                   attention_out: str | Path | None = None, heatmaps: str | Path | None = None,
                   progress: Callable[[int, int | None], None] | None = None) -> BatchSummary:
    """Translate ``column`` of every row of ``input_path`` into ``output_path`` (see the module docstring).

    ``attention_out`` gets one JSON line per row, ``{"row", "source_pieces", "target_pieces",
    "attention"}`` (best candidate; empty lists for a failed row); ``heatmaps`` one PNG per translated
    row. ``progress(done_rows, total_rows)`` is called after each chunk; the total comes from a line
    count when the input is seekable, else it is None.
    """
    job = FileJob.of(recommender, input_path, output_path, column, fmt, search, batch_size, chunk_rows,
                     attention_out, heatmaps)
    return job.run(resume=resume, progress=progress)


@dataclass(frozen=True)
class FileJob:
    """One file's translation, as a user asked for it; ``run`` does it, whole or (``part``) a slice of rows."""

    recommender: Recommender
    input_path: Path
    output_path: Path
    column: str | None
    fmt: str | None
    search: SearchConfig
    batch_size: int
    chunk_rows: int
    attention_out: Path | None
    heatmaps: Path | None

    @classmethod
    def of(cls, recommender: Recommender, input_path: str | Path, output_path: str | Path,
           column: str | None = None, fmt: str | None = None, search: SearchConfig | None = None,
           batch_size: int = 64, chunk_rows: int = 1024, attention_out: str | Path | None = None,
           heatmaps: str | Path | None = None) -> FileJob:
        """The job from what a user passes (paths as strings, no search meaning the default one)."""
        return cls(recommender, Path(input_path), Path(output_path), column, fmt, search or recommender.search,
                   batch_size, chunk_rows, Path(attention_out) if attention_out else None,
                   Path(heatmaps) if heatmaps else None)

    @property
    def input_format(self) -> str:
        """``fmt``, else the format the input's extension names: an ``UnknownFormat`` when it names none."""
        return self.fmt or format_of(self.input_path, True)

    @contextlib.contextmanager
    def claimed(self, resume: bool) -> Iterator[None]:
        """Before anything is written (``seq2seq.serving.destinations``): every destination is distinct from the
        input and the others; a new job's are new and get its record, a resumed job's record must be this job's.
        No other job may write them until the block ends (the record is locked)."""
        in_fmt = self.input_format
        companions = {"attention_out": self.attention_out, "heatmaps": self.heatmaps}
        settings = {"input_format": in_fmt, "output_format": format_of(self.output_path, False) or in_fmt,
                    "column": self.column, "search": dataclasses.asdict(self.search),
                    **{name: path and os.path.realpath(path) for name, path in companions.items()}}
        writes = {"--output": self.output_path, "--attention-out": self.attention_out,
                  "the job record": record_path(self.output_path)}
        check_distinct({"--input": self.input_path}, writes, self.heatmaps)
        record = job_record(self.input_path, self.recommender, settings)
        with held_record(self.output_path) as held:
            if resume and (self.output_path.exists() or held.found):
                held.check_resumable(record)
            else:
                check_new_outputs(self.output_path, self.attention_out, self.heatmaps)
                held.write(record)
            yield

    def run(self, resume: bool = False, progress: Callable[[int, int | None], None] | None = None,
            part: slice | None = None, header: bool = True) -> BatchSummary:
        """``part`` translates only those rows (0-based data rows) into new files, the caller having checked
        that the job's destinations are new (``check_new_outputs``); ``header=False`` leaves out the header
        (for a layer that splits a job across processes: ``seq2seq.serving.sharding``)."""
        started = time.monotonic()
        if self.fmt is not None and self.fmt not in FORMATS:
            raise ConfigError(f"format must be one of {', '.join(FORMATS)}, got {self.fmt!r}")
        if self.batch_size < 1 or self.chunk_rows < 1:
            raise ConfigError(f"batch_size and chunk_rows must be at least 1, got {self.batch_size} and "
                              f"{self.chunk_rows}")
        if resume and part is not None:
            raise ConfigError("resume and part exclude each other: a split job is resumed in one process")
        input_path, output_path = self.input_path, self.output_path
        in_fmt = self.input_format
        out_fmt = format_of(output_path, False) or in_fmt
        if resume:
            check_resumable_input(input_path)
        with open_log(input_path) as file, contextlib.ExitStack() as held:
            marked = file.peek(3)[:3] == BOM.encode()  # kept in the output (Layout)
            total = count_rows(file, in_fmt) if file.seekable() else None
            columns, rows = read_rows(file, input_path, in_fmt, self.column)
            if part is not None:
                rows = itertools.islice(rows, part.start, part.stop)
                total = None if total is None else len(range(total)[part])
            layout = Layout(input_path, out_fmt, columns, self.search.n_best, marked)
            if part is None:  # a split job is claimed once, for all its parts (seq2seq.serving.sharding)
                held.enter_context(self.claimed(resume))
            try:
                sinks = Sinks(output_path, layout, self.attention_out, self.heatmaps, resume, part is not None, header,
                              self.chunk_rows, total)
                skipped, last = 0, None
                for row in itertools.islice(rows, sinks.done):
                    skipped, last = skipped + 1, row
                if skipped < sinks.done:
                    raise DataError(f"{output_path}: holds {sinks.done} rows but {input_path} has only {skipped}; it "
                                    "is not this input's output")
                if last is not None:  # before any file is cut
                    sinks.check_continues(last)
                with sinks:
                    done, translated, errors, warned, out_of_scope = self._translate_rows(rows, sinks, skipped, total,
                                                                                          progress)
            except OSError as err:  # reading the output, writing its header
                raise JobStopped(unwritten(err, output_path), 0, True) from None
        if resume:  # what a killed split job left beside the output this job has now finished
            for path in (output_path, self.attention_out):
                if path is not None:
                    forget_parts(path)
        return BatchSummary(done - skipped, translated, errors, skipped, time.monotonic() - started, warned,
                            out_of_scope)

    def _translate_rows(self, rows: Iterator[Row], sinks: Sinks, done: int, total: int | None,
                        progress: Callable[[int, int | None], None] | None) -> tuple[int, int, int, int, int]:
        """Rows done (``done`` before), translated, with an error and, of those, translated all the same; and of
        the rows translated, those out of scope.

        A bad record or a failed write on the way is a JobStopped (``kept``: the rows of this job or part)."""
        translated = errors = warned = out_of_scope = 0
        if progress:
            progress(done, total)
        try:
            while chunk := list(itertools.islice(rows, self.chunk_rows)):
                results = _recommend(self.recommender, chunk, self.search, self.batch_size)
                written = sinks.write(chunk, results)  # each row's error field
                done += len(chunk)
                translated += sum(1 for result in results if result and result.candidates)
                out_of_scope += sum(1 for result in results if result and result.candidates
                                    and result.verdict == "out-of-scope")
                failed = [result for result, error in zip(results, written, strict=True) if error]
                errors += len(failed)
                warned += sum(1 for result in failed if result and result.candidates)
                if progress:
                    progress(done, total)
        except OSError as err:  # a full disk
            raise JobStopped(unwritten(err, self.output_path), done, True) from None
        except DataError as err:
            raise JobStopped(str(err), done, False) from None
        return done, translated, errors, warned, out_of_scope


def unwritten(err: OSError, output: Path) -> str:
    """The words for a failed write; ``Sinks`` names the file, a write to an open file does not."""
    return str(write_error(Path(err.filename) if err.filename else output, err))


def _recommend(recommender: Recommender, chunk: list[Row], search: SearchConfig,
               batch_size: int) -> list[Recommendation | None]:
    """One result per row, None for a row that cannot be translated."""
    found = iter(recommender.recommend([row.alert for row in chunk if row.alert is not None], search, batch_size))
    return [next(found) if row.alert is not None else None for row in chunk]

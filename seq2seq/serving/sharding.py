"""A file job split across the processes of a torchrun launch, around ``seq2seq.serving.batch``.

Each process translates a contiguous share of the rows in whole chunks (``World.share``), in rank
order, into a part file (``part_path``); the header is written by rank 0 alone. Rank 0 writes its
share to the output itself and then appends the others' parts (``merge_parts``), so the output has
the bytes of a one-process run. A split job is resumed in one process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from seq2seq.distributed import World
from seq2seq.errors import ConfigError, DataError, Seq2SeqError
from seq2seq.files import open_binary
from seq2seq.serving.batch import BatchSummary, FileJob, JobStopped, unwritten
from seq2seq.serving.destinations import part_path
from seq2seq.serving.incident_log import count_rows, open_log, read_rows


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


def translate_shared(world: World, job: FileJob, progress: Callable[[int, int | None], None] | None = None
                     ) -> BatchSummary:
    """This process's share of ``job``; the summary counts every process's rows (a collective)."""
    with open_log(job.input_path) as file:
        if not file.seekable():
            raise ConfigError(f"{job.input_path}: under torchrun --input must be a regular file (its rows are split)")
        total = count_rows(file, job.input_format)
        # Its header and alert column, refused before rank 0 claims the destinations (writing the job's record),
        # as one process refuses them before its claim: an empty input left a record with no output beside it.
        read_rows(file, job.input_path, job.input_format, job.column)
    destinations = [path for path in (job.output_path, job.attention_out) if path is not None]

    parts = [part_path(path, world.rank) for path in destinations] if not world.is_main else []

    held = contextlib.ExitStack()  # rank 0 holds the job's record from the claim to the end of the merge

    def claim() -> None:
        if world.is_main:
            held.enter_context(job.claimed(resume=False))
            for path in destinations:  # a part is scratch a job deletes: never the input
                clash = next((part for part in (part_path(path, k) for k in range(1, world.size))
                              if part.exists() and part.samefile(job.input_path)), None)
                if clash is not None:
                    raise DataError(f"{clash}: is --input, and a process of this job writes its share of {path} "
                                    "there; rename the input")

    def clear() -> None:
        for part in parts:
            part.unlink(missing_ok=True)  # left by a killed job

    def merge() -> None:
        if world.is_main:
            for path in destinations:
                try:
                    merge_parts(path, world.size)
                except OSError as err:  # a full disk: the parts are kept, and a one-process --resume finishes
                    raise JobStopped(unwritten(err, path), 0, True) from None

    written = 0  # rows in the output itself (rank 0's share), which a stopped job keeps

    def run_mine() -> BatchSummary:
        nonlocal written
        try:
            summary = mine.run(progress=progress, part=world.share(total, job.chunk_rows), header=world.is_main)
        except JobStopped as stopped:
            written = stopped.kept
            raise
        written = summary.rows
        return summary

    # Each step is a World.outcome: nothing is deleted or written before rank 0 has claimed the destinations,
    # rank 0 merges only whole parts, and a refusal on one process (a destination, a malformed row) ends every
    # process, each deleting its part (a split job is resumed in one process, from the output alone).
    with held:
        world.outcome(claim)
        world.outcome(clear)
        attention = part_path(job.attention_out, world.rank) if job.attention_out is not None else None
        mine = dataclasses.replace(job, output_path=part_path(job.output_path, world.rank), attention_out=attention)
        try:
            summary = world.outcome(run_mine)
        except JobStopped as stopped:  # told as a one-process job tells it, of the output rank 0 wrote
            clear()
            kept = int(world.max(float(written) if world.is_main else 0.0))
            raise JobStopped(str(stopped), kept, stopped.resumable) from None
        except Seq2SeqError:
            clear()
            raise
        world.outcome(merge)
        rows, translated, errors, warned, out_of_scope = (
            int(world.sum(count)) for count in
            (summary.rows, summary.translated, summary.errors, summary.warned, summary.out_of_scope))
        return BatchSummary(rows, translated, errors, 0, world.max(summary.seconds), warned, out_of_scope)

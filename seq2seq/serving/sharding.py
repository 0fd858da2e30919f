"""A file job split across the processes of a torchrun launch, around ``seq2seq.serving.batch``.

Each process translates a contiguous share of the rows in whole chunks (``World.share``), in rank
order, into a part file (``part_path``); the header is written by rank 0 alone. Rank 0 writes its
share to the output itself and then appends the others' parts (``merge_parts``), so the output has
the bytes of a one-process run. A split job is resumed in one process.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from seq2seq.distributed import World
from seq2seq.errors import ConfigError
from seq2seq.files import open_binary
from seq2seq.serving.batch import BatchSummary, FileJob
from seq2seq.serving.incident_log import count_rows, open_log


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


def translate_shared(world: World, job: FileJob, progress: Callable[[int, int | None], None] | None = None
                     ) -> BatchSummary:
    """This process's share of ``job``; the summary counts every process's rows (a collective)."""
    with open_log(job.input_path) as file:
        if not file.seekable():
            raise ConfigError(f"{job.input_path}: under torchrun --input must be a regular file (its rows are split)")
        total = count_rows(file, job.input_format)
    destinations = [path for path in (job.output_path, job.attention_out) if path is not None]

    def prepare() -> None:
        if world.is_main:
            job.claim(resume=False)
        else:
            for path in destinations:
                part_path(path, world.rank).unlink(missing_ok=True)  # left by a killed job

    def merge() -> None:
        if world.is_main:
            for path in destinations:
                merge_parts(path, world.size)

    # Each step is a World.outcome: nobody writes before rank 0 has claimed the destinations, rank 0 merges
    # only whole parts, and a refusal on one process (a destination, a malformed row) ends every process.
    world.outcome(prepare)
    attention = part_path(job.attention_out, world.rank) if job.attention_out is not None else None
    mine = dataclasses.replace(job, output_path=part_path(job.output_path, world.rank), attention_out=attention)
    summary = world.outcome(lambda: mine.run(progress=progress, part=world.share(total, job.chunk_rows),
                                             header=world.is_main))
    world.outcome(merge)
    rows, translated, errors, warned, out_of_scope = (
        int(world.sum(count)) for count in
        (summary.rows, summary.translated, summary.errors, summary.warned, summary.out_of_scope))
    return BatchSummary(rows, translated, errors, 0, world.max(summary.seconds), warned, out_of_scope)

"""How many decoding workers, how they share the batches, and torch's intra-op threads while they run.

On a CPU, several one-core worker threads decode batches faster than one thread whose operations
use every core: between its many small operations the other cores sit idle (figures in
docs/benchmarks.md). torch's intra-op thread count is process-wide, so it is changed only inside
``intra_op_threads``' block and restored after it, never as a side effect of a call.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TypeVar

import torch

from seq2seq.errors import ConfigError

S = TypeVar("S")  # what one batch decodes
H = TypeVar("H")  # what decoding it gives
R = TypeVar("R")  # what finishing gives
MAX_WORKERS = 256  # decoding threads, each with a batch in memory: far beyond the cores of any one machine


def worker_count(requested: int, device: torch.device) -> int:
    """``requested`` decoding workers; 0 = one per intra-op thread on a CPU, one on other devices."""
    if not 0 <= requested <= MAX_WORKERS:
        raise ConfigError(f"--workers must be in [0, {MAX_WORKERS}] (0: one per core), got {requested}")
    if device.type != "cpu":
        return requested or 1
    return requested or torch.get_num_threads()


@contextmanager
def intra_op_threads(count: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` inside the block, restored after it (None: left as they are)."""
    if count is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def one_core_workers(workers: int) -> Iterator[None]:
    """The block runs ``workers`` decoding threads of one core each (``workers`` > 1), or as it is."""
    with intra_op_threads(1 if workers > 1 else None):
        yield


def decoded_in_turns(batches: list[list[int]], sources: list[S], decode: Callable[[S], H],
                     finish: Callable[[list[int], list], list[R]], workers: int, together: int
                     ) -> list[tuple[list[int], list[R]]]:
    """(items, ``finish(items, their decoded results)``) for the ``batches`` (lists of item places) in some order,
    each batch's ``sources`` ``decode``d by ``workers`` threads, finished ``together`` batches at a time.

    A worker takes the next batch whenever it is free, and whoever decodes the ``together``-th waiting batch
    finishes those waiting, as does whoever decodes one when fewer batches are left to take than there are
    workers: the last look-ups are small, and run while the others decode. (A split fixed beforehand left one
    worker the longer batches, and the last look-up alone: docs/trust.md, "Judging as workers free".)"""
    # Longest first (the batches come sorted by length): the last to be decoded are the quickest, so that the
    # workers finish together, and their look-ups are the smallest.
    untaken, waiting, done = deque(reversed(list(zip(batches, sources, strict=True)))), [], []
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not untaken:
                    return
                batch, source = untaken.popleft()
            decoded = decode(source)
            with lock:
                waiting.append((batch, decoded))
                if len(waiting) < together and len(untaken) >= workers:
                    continue
                ready, waiting[:] = waiting[:], []
            chunk = [i for places, _ in ready for i in places]
            done.append((chunk, finish(chunk, [one for _, found in ready for one in found])))

    if workers == 1 or len(batches) < 2:
        work()
        return done
    with ThreadPoolExecutor(workers) as pool:
        running = [pool.submit(work) for _ in range(workers)]
        try:
            wait(running, return_when=FIRST_EXCEPTION)
        finally:  # a worker failed, or this thread was interrupted: the others stop after their batch
            with lock:
                untaken.clear()
        for worker in running:
            worker.result()
    return done

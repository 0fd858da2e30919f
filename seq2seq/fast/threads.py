"""How many decoding workers, and torch's intra-op threads while they run.

On a CPU, several one-core worker threads decode batches faster than one thread whose operations
use every core: between its many small operations the other cores sit idle (figures in
docs/benchmarks.md). torch's intra-op thread count is process-wide, so it is changed only inside
``intra_op_threads``' block and restored after it, never as a side effect of a call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from seq2seq.errors import ConfigError

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

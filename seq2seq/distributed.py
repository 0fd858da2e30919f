"""Processes started by torchrun: who this process is, and the few collectives training and translation need.

``torchrun --nproc_per_node=N -m seq2seq ...`` starts N copies of the command with ``RANK``,
``LOCAL_RANK`` and ``WORLD_SIZE`` (and the rendezvous address) in their environment. A command
started without torchrun is a world of one: ``World()``, no process group, and every collective
below returns its argument unchanged, so a single process runs exactly as before.

Backends: gloo on the CPU, NCCL on CUDA, where each process uses ``cuda:LOCAL_RANK``.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from seq2seq.config import resolve_device
from seq2seq.errors import ConfigError, Seq2SeqError

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    rank: int = 0  # this process among all processes, 0 .. size - 1; rank 0 validates, logs and writes
    local_rank: int = 0  # this process on its machine; picks the GPU
    size: int = 1  # processes in the job; 1 = not started by torchrun
    backend: str = ""  # gloo | nccl; "" when there is no process group

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def place(self, device: torch.device) -> torch.device:
        """``device`` for this process: CUDA becomes ``cuda:LOCAL_RANK`` when there are several processes."""
        if self.size > 1 and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    def shard(self, items: Sequence[T]) -> list[T]:
        """Items ``rank, rank + size, ...`` of the first ``len(items) // size * size``: disjoint, equal shares.

        Every process passes the same sequence (an epoch's batches, shuffled alike everywhere); the
        last ``len(items) % size`` items are left out so that all processes take the same number of
        optimiser steps (DDP needs every process in every gradient all-reduce).
        """
        return list(items[self.rank: len(items) - len(items) % self.size: self.size])

    def share(self, total: int, block: int) -> slice:
        """This process's contiguous share of ``total`` rows, in whole blocks of ``block`` rows.

        The shares, in rank order, partition the rows; the last is open-ended, so rows beyond
        ``total`` (an estimate) still belong to someone.
        """
        blocks = -(-total // block)
        start = blocks * self.rank // self.size * block
        stop = blocks * (self.rank + 1) // self.size * block if self.rank < self.size - 1 else None
        return slice(start, stop)

    # -- collectives: every process must call them, in the same order ----------------------
    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()

    def broadcast(self, value: float) -> float:
        """Rank 0's ``value`` on every process."""
        return self._collective(value, None)

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's picklable ``value`` on every process."""
        if self.size == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_object(self, value: T) -> list[T]:
        """Every process's picklable ``value``, in rank order, on rank 0; ``[]`` on the others."""
        if self.size == 1:
            return [value]
        box: list[Any] | None = [None] * self.size if self.is_main else None
        dist.gather_object(value, box, dst=0)
        return box or []

    def outcome(self, action: Callable[[], T]) -> T:
        """``action()``, returned once every process has run its own and learned how the others went: a
        one-line error (``Seq2SeqError``) on any process is raised on all of them (the lowest rank's), so
        that no process waits at a later collective for one that has left."""
        if self.size == 1:
            return action()
        try:
            result, error = action(), None
        except Seq2SeqError as err:
            result, error = None, err
        errors: list[Seq2SeqError | None] = [None] * self.size
        dist.all_gather_object(errors, error)
        first = next((err for err in errors if err is not None), None)
        if first is not None:
            raise first
        return result

    def sum(self, value: float) -> float:
        return self._collective(value, dist.ReduceOp.SUM)

    def max(self, value: float) -> float:
        return self._collective(value, dist.ReduceOp.MAX)

    def any(self, flag: bool) -> bool:
        """True on every process when ``flag`` is true on at least one."""
        return bool(self._collective(float(flag), dist.ReduceOp.MAX))

    def _collective(self, value: float, op: dist.ReduceOp | None) -> float:
        if self.size == 1:
            return value
        device = torch.device("cuda", self.local_rank) if self.backend == "nccl" else torch.device("cpu")
        tensor = torch.tensor([value], dtype=torch.float64, device=device)
        if op is None:
            dist.broadcast(tensor, src=0)
        else:
            dist.all_reduce(tensor, op=op)
        return tensor.item()


ONE_PROCESS = World()  # a command started without torchrun
TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")  # torchrun sets each


def launched_size() -> int:
    """Processes torchrun started for this job (``WORLD_SIZE``), 1 without torchrun."""
    value = os.environ.get("WORLD_SIZE", "1")
    if not value.strip().isdigit() or int(value) < 1:
        raise ConfigError(f"WORLD_SIZE={value!r} is not a number of processes; unset it, or start the command with "
                          "torchrun (docs/gpu-and-torchrun.md)")
    return int(value)


def not_torchrun(size: int) -> str | None:
    """Why this process, told ``WORLD_SIZE`` > 1, was not started by torchrun (which also sets the rank, the
    rendezvous address and its run id), or None. Such a process would fail with a traceback on a missing variable,
    or, given them all by hand, wait for peers that never come, deaf to Ctrl-C, inside the rendezvous."""
    missing = [name for name in TORCHRUN_VARIABLES if not os.environ.get(name)]
    if not missing:
        return None
    return (f"WORLD_SIZE={size} is set, but this process was not started by torchrun ({', '.join(missing)} unset): "
            "start the command with torchrun (docs/gpu-and-torchrun.md), or unset WORLD_SIZE")


def launched_first() -> bool:
    """Whether this is the first process torchrun started (``RANK`` 0), or the only one: the one that says what
    every process would say alike, before the process group exists."""
    return int(os.environ.get("RANK", "0")) == 0


def init_from_env(device_name: str) -> World:
    """Join the process group torchrun describes in the environment: NCCL when ``device_name``
    (auto | cpu | cuda) resolves to CUDA, else gloo. Without torchrun: ``ONE_PROCESS``, nothing resolved."""
    size = launched_size()
    if size == 1:
        return ONE_PROCESS
    if (why := not_torchrun(size)) is not None:
        raise ConfigError(why)
    device = resolve_device(device_name)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise ConfigError(f"process {rank} has local rank {local_rank} but this machine has "
                              f"{torch.cuda.device_count()} CUDA devices; lower --nproc_per_node")
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", rank=rank, world_size=size, device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group("gloo", rank=rank, world_size=size)
    return World(rank, local_rank, size, dist.get_backend())


def close() -> None:
    if dist.is_initialized():
        # A DDP model that ended as cyclic garbage (a trainer and its model refer to each other) holds the group,
        # and with it Gloo's threads. Left to the interpreter's exit, it went during finalisation and the process
        # aborted now and then ("terminate called without an active exception": 2 runs in 37 of the benchmark's
        # torchrun worker, the Python frames gone). Collected here, it goes while the group is still whole.
        gc.collect()
        dist.destroy_process_group()


@contextmanager
def process_group(device_name: str) -> Iterator[World]:
    """``init_from_env(device_name)`` for the length of a ``with`` block; the group is destroyed on leaving it.

    A block that ends normally first waits for every process (a barrier): without it, a process
    that tore its group down while another was still finishing aborted now and then
    ("terminate called without an active exception").
    After an exception there is no barrier, as the other processes may never reach one.
    """
    try:
        world = init_from_env(device_name)
        yield world
        world.barrier()
    finally:
        close()

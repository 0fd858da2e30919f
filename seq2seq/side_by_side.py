"""A recipe's members trained at once, one process each (``train.parallel``).

One member of these small models leaves a GPU idle most of the time: an H100 was busy 7-13% of the
time training one, because each step's many small kernels wait on the host to launch them; the
MaintNet recipe's seven members, trained as seven processes side by side, took 2 min 14 s on it
(docs/gpu-and-torchrun.md). On a CPU the cores are split among the processes.

Each member is trained in a spawned process exactly as ``members.train_members`` trains it in its
own (the same ``build_trainer`` call, tokenizer, seed and budget), so the weights are the same as one
after the other with the same number of threads. A member's log lines and progress bars go to
OUTPUT_DIR/member-K/train.log; this process shows a bar over the members and one line as each ends.
If a member fails, those still running finish (their runs are kept for ``--resume``), the ones not
begun are not started, and the failure is raised; a member's process killed from outside (out of
memory) is a one-line error that says to resume.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import torch

from seq2seq.config import ModelConfig, TokenizerConfig, TrainConfig
from seq2seq.corpus import ParallelCorpus
from seq2seq.errors import Seq2SeqError, Terminated, terminate_as_interrupt
from seq2seq.files import make_folder
from seq2seq.progress import progress_bar
from seq2seq.runs import build_trainer
from seq2seq.tokenizer import Tokenizer
from seq2seq.train import TrainResult

LOG = "train.log"  # in each member's folder


@dataclass(frozen=True)
class Member:
    """One member's run as ``build_trainer`` takes it, in plain picklable parts for a spawned process."""

    index: int  # 0-based place among the recipe's members
    folder: Path
    train: ParallelCorpus
    dev: ParallelCorpus
    model_config: ModelConfig
    config: TrainConfig  # members 1, this member's seed and budget
    tokenizer_config: TokenizerConfig
    resume: bool  # continue the member's last.pt
    overwrite: bool
    cases: ParallelCorpus | None
    tokenizer: dict  # Tokenizer.state_dict() shared by the members


PR_SET_PDEATHSIG = 1  # Linux's prctl option: a signal to this process when its parent dies
_parent: int | None = None  # in a member's process: the recipe's process, which started it


def end_with_parent(parent: int) -> None:
    """In a spawned process, first: SIGTERM when the recipe's process dies (kill -9, out of memory), which a
    member takes as Ctrl-C (its last.pt saved) and then ends; else it trained on, unseen, then waited forever for
    work, and ``--resume`` meanwhile found no member's last.pt and invited ``--overwrite`` under it. Linux only;
    elsewhere a member ends when it next reports."""
    global _parent
    _parent = parent
    with contextlib.suppress(AttributeError, OSError):  # no libc prctl: not Linux
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the line above: no signal will come
        os._exit(128 + signal.SIGTERM)


def train_member(member: Member, threads: int) -> TrainResult:
    """In a spawned process: one member's run, with its log and progress bars in FOLDER/train.log."""
    torch.set_num_threads(threads)
    make_folder(member.folder)
    with (member.folder / LOG).open("a", encoding="utf-8") as handle, contextlib.redirect_stderr(handle), \
            terminate_as_interrupt():  # the recipe's process, terminated, passes SIGTERM on: last.pt is saved
        def log(line: str) -> None:
            print(line, file=handle, flush=True)

        trainer = build_trainer(member.train, member.dev, member.folder, member.model_config, member.config,
                                member.tokenizer_config, member.resume, member.overwrite, log, cases=member.cases,
                                tokenizer=Tokenizer.from_state_dict(member.tokenizer))
        try:
            return trainer.fit()
        except Terminated:
            if _parent is not None and os.getppid() != _parent:  # last.pt is saved; no one is left to tell
                os._exit(128 + signal.SIGTERM)
            raise


def train_side_by_side(start: Callable[[], Member | None], finish: Callable[[Member, TrainResult], None],
                       processes: int, threads: int, total: int, log: Callable[[str], None]) -> None:
    """Run members from ``start()`` (None: no more) in ``processes`` processes of ``threads`` threads each, as
    many at once as there are processes, and hand each result to ``finish`` as it comes; ``total`` members to
    run, for the bar. ``start`` is called only when a process is free, so it can give each its budget then."""
    running: dict[Future, Member] = {}
    failure: BaseException | None = None
    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=end_with_parent,
                               initargs=(os.getpid(),))
    try:
        with progress_bar(total=total, desc="members", unit="member", mininterval=1.0) as bar:
            def say(line: str) -> None:
                with bar.external_write_mode():  # a line above the bar, not after it
                    log(line)

            while True:
                while failure is None and len(running) < processes and (member := start()) is not None:
                    say(f"{member.folder.name}: seed {member.config.seed}, in {member.folder} (its log: "
                        f"{member.folder / LOG})")
                    running[pool.submit(train_member, member, threads)] = member
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    member = running.pop(future)
                    try:
                        result = future.result()
                    except BrokenProcessPool:  # killed from outside (out of memory?): no exception to pass on
                        err = Seq2SeqError(f"{member.folder.name}: its process ended abruptly (killed, or out of "
                                           "memory?); the members that finished are kept: continue with --resume")
                        failure = failure or err
                        continue
                    except Exception as err:  # the others run on; their work is kept for --resume
                        failure = failure or err
                        say(f"{member.folder.name} failed ({err}); see {member.folder / LOG}"
                            + (f"; waiting for the {len(running)} running to finish" if running else ""))
                        continue
                    finish(member, result)
                    bar.update()
                    say(f"{member.folder.name} (seed {member.config.seed}): dev BLEU {result.best_bleu:.2f}, "
                        f"{result.epochs:.0f} epochs, {result.seconds / 60:.1f} min ({result.stopped})")
    except KeyboardInterrupt as stop:  # the members got Ctrl-C too: each saves its last.pt, then all stop
        if isinstance(stop, Terminated):  # SIGTERM came to this process alone: pass it on
            for child in multiprocessing.active_children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGTERM)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    if failure is not None:
        raise failure

"""Shared fixtures: thirty alert/recommendation pairs, a tokenizer trained on them, a file writer.

Test modules import shared helpers from ``support`` only; this file holds the fixtures."""

from __future__ import annotations

import os
import signal

# Before torch loads OpenMP: waiting threads sleep instead of spinning, so a suite sharing its two
# cores with another job (a benchmark, a second suite) does not slow to a crawl (see gradio_app.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from support import TINY_PAIRS, TINY_TOKENIZER_CONFIG

from seq2seq.tokenizer import Tokenizer

# No hypothesis deadline: speed is measured by benchmarks, never by timed assertions (STYLE.md), and a
# first example that warms up torch on a loaded two-core runner must not fail the suite.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# Under pytest-xdist each worker gets its share of the cores: two workers each running two torch threads
# on a two-core runner would spend their time taking turns.
if workers := int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")):
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
# Ctrl-C as a program run from a terminal has it: a suite started in the background by a script's "&" inherits it
# ignored, and the tests that send Ctrl-C to the program, in this process or in a child, would see it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
MAX_WORKERS = 8  # each worker trains the shared tiny models itself and peaks near 1.1 GB


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core, at most MAX_WORKERS (a many-core machine need not have their memory)."""
    return min(MAX_WORKERS, os.cpu_count() or 1)


@pytest.fixture(autouse=True)
def signal_handlers_kept():
    """A test that leaves Ctrl-C's or SIGTERM's handler changed fails, its handlers put back: a later test in the
    same worker that sends itself Ctrl-C would otherwise meet the leftover, and fail far from the cause."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    changed = [signal.Signals(number).name for number, handler in before.items()
               if signal.getsignal(number) is not handler]
    for number, handler in before.items():
        signal.signal(number, handler)
    if changed:
        pytest.fail(f"the test left the handler of {' and '.join(changed)} changed")


@pytest.fixture
def tiny_pairs() -> list[tuple[str, str]]:
    """About thirty short (alert, recommendation) pairs; a fresh list per test."""
    return list(TINY_PAIRS)


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    """A joint unigram tokenizer (vocab_size 60) trained on ``TINY_PAIRS``."""
    sources, targets = zip(*TINY_PAIRS, strict=True)
    return Tokenizer.train(list(sources), list(targets), TINY_TOKENIZER_CONFIG)


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """``write_file(name, content)`` writes text (UTF-8, as given) or bytes under tmp_path; returns the path."""

    def write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
        return path

    return write


@pytest.fixture
def tmp_tsv(write_file) -> Callable[..., Path]:
    """``tmp_tsv(pairs, name="pairs.tsv", header=("source", "target"))`` writes a TSV file; returns the path."""

    def write(
        pairs: Sequence[Sequence[str]], name: str = "pairs.tsv", header: Sequence[str] = ("source", "target")
    ) -> Path:
        rows = [header, *pairs]
        return write_file(name, "".join("\t".join(row) + "\n" for row in rows))

    return write


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run fastest on one thread, and the suite may share its cores with benchmarks."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

"""Progress bars that read well both on a terminal and in a log file.

On a terminal a bar (tqdm: rate and ETA) redraws itself in place. Sent to a file or a pipe
(``nohup seq2seq train ... > train.log``), those redraws would pile up as one endless line of
carriage-return frames; there a bar writes its state as a line of its own every ``LOG_SECONDS``
instead, and nothing for work that ends sooner.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from tqdm import tqdm

LOG_SECONDS = 30.0


def progress_bar(iterable: Iterable | None = None, **options: Any) -> tqdm:
    """``tqdm(iterable, **options)`` on standard error, or in lines every LOG_SECONDS when that is not a terminal."""
    stream = sys.stderr
    if not _is_terminal(stream):
        options.update(file=_Lines(stream, LOG_SECONDS), mininterval=max(options.get("mininterval", 0.1), 1.0))
    return tqdm(iterable, **options)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


class _Lines:
    """A stream for tqdm that turns its frames into whole lines, one every ``every`` seconds at most."""

    def __init__(self, stream: TextIO, every: float) -> None:
        self.stream, self.every, self.last = stream, every, time.monotonic()

    def write(self, text: str) -> int:
        frame = text.replace("\r", "").strip()  # a frame, or blanks that clear one
        now = time.monotonic()
        if frame and now - self.last >= self.every:
            self.stream.write(frame + "\n")
            self.stream.flush()
            self.last = now
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

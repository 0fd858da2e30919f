"""The one way a file is written whole: to a temporary sibling, synced, then renamed over the file it replaces
(``replacing``), with Ctrl-C or SIGTERM held until it is whole. Checkpoints, exports and metrics go
through it; ``seq2seq.files`` reads what users hand in."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from seq2seq.errors import DataError, shown, write_error

PARTIAL = ".partial"  # the suffix of a file ``replacing`` is writing; a leftover one is a write a kill cut short
_UMASK = os.umask(0)  # read once, at import, where no other thread can see it changed for a moment
os.umask(_UMASK)


def write_atomic(path: Path, text: str) -> None:
    """``text`` written to ``path`` as UTF-8 (``replacing``)."""
    with replacing(path) as file:
        file.write(text.encode("utf-8"))


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C or SIGTERM arriving in the block takes effect when it ends: a checkpoint cut inside ``torch.save``
    raised torch's own RuntimeError ("unexpected pos ...") in place of the KeyboardInterrupt that saves last.pt.
    Only the main thread sets handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, lambda number, frame: caught.append(number)) for number in held}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if caught:  # as it would have been handled: KeyboardInterrupt, Terminated, or the default (the end)
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), caught[0])


def sync_folder(folder: Path) -> None:
    """The folder's entries synced to disk: a file just created in it, or renamed into it, is an entry of the folder,
    and without this a power cut could lose the name while the file's own bytes were synced."""
    with contextlib.suppress(OSError):  # a file system that cannot sync a folder: the file itself is synced
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def check_replaceable(path: Path) -> Path:
    """The file that writing ``path`` replaces (a link followed), or a DataError when it is there and is not a
    regular file: checked before a command's work, so that it is refused at once."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        kind = "a folder" if target.is_dir() else "a device or a pipe"
        raise DataError(f"{shown(str(path))}: is not a regular file ({kind}); give the name of a file to write")
    return target


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A binary file whose content, once the block ends, replaces ``path``'s: written to a temporary sibling,
    synced, then renamed over it, so a failed write leaves the old file and a reader never sees half of one.

    A link is followed, so it points at the new file. A device or a pipe (``/dev/full``, ``/dev/null``) is refused:
    the rename would put a plain file where it was, as root too. The file gets the mode a plain ``open`` would
    give it (the old file's, else 0666 less the umask), not ``mkstemp``'s 0600. An OSError (a full disk) is a
    one-line DataError naming ``path``."""
    target = check_replaceable(path)
    try:
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_UMASK
        fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=PARTIAL)
    except OSError as err:
        raise write_error(path, err) from None
    try:
        with signals_held():
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as file:
                yield file
                file.flush()
                os.fsync(file.fileno())
            os.replace(partial, target)
            sync_folder(target.parent)
    except BaseException as err:
        Path(partial).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise write_error(path, err) from None
        raise


def keep_logged(path: Path, key: str, last: float) -> None:
    """Cut a run's JSONL log (metrics.jsonl) back to the records whose ``key`` (step, epoch) is at most ``last``,
    where a resumed run goes on from: a record logged just before a kill stopped its checkpoint is made again, and
    is then not there twice. A line the kill cut short goes too."""
    if not path.is_file():
        return
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if _logged_at(line, key) <= last]
    if len(kept) < len(lines):
        with replacing(path) as file:
            file.write(b"".join(kept))


def _logged_at(line: bytes, key: str) -> float:
    """A log record's ``key``; none (inf) for a line cut short or not a record with that number."""
    try:
        value = json.loads(line)[key] if line.endswith(b"\n") else None
    except (ValueError, KeyError, TypeError):
        return math.inf
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else math.inf

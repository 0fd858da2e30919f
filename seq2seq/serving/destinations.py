"""Where a file job writes, and the record that lets ``--resume`` prove that an output is this job's.

Every file a job writes (the output, the attention file, the heatmap folder's PNGs, the record) is
distinct from the file it reads and from each other, by any name (a link, a relative path): checked
before anything is written, a resumed job included, since a path given twice would be overwritten or
interleaved. A folder a destination needs (the heatmap folder itself included) must not be a file, nor a path
the job reads or writes as one.

When a job starts, it writes a record beside its output, ``<output>.job.json``: the input (path, size
and SHA-256), the model (a SHA-256 of its configuration, vocabularies and weights) and the settings
that shape the output (formats, column, search, companions). ``--resume`` continues an output only
when that record is there and names the same input, model and settings; anything else is a one-line
refusal, so an edited input, another model or another search never mixes into an old output, and
a file that some other program wrote is never taken for a half-done job. The record stays after the
job ends, so resuming a finished job is a no-op. While a job runs it holds a lock on its record
(``held_record``), so a second job on the same output is refused rather than interleaved.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import torch

from seq2seq.errors import DataError, shown
from seq2seq.files import check_folder_path, file_sha256, make_folder
from seq2seq.recommender import Recommender
from seq2seq.writing import sync_folder

RECORD_VERSION = 1
_HEATMAP_NAME = re.compile(r"row_\d+\.png(\.partial)?")


def part_path(path: Path, index: int) -> Path:
    """Where process ``index`` of a job split by torchrun writes its part of ``path`` (``serving.sharding``):
    process 0 writes ``path`` itself."""
    return path if index == 0 else path.with_name(f".{path.stem}.part{index}{path.suffix}")


def forget_parts(path: Path) -> None:
    """Delete the parts of ``path`` a killed split job left, once a job in one process has finished it: they hold
    rows that job translated again."""
    index = 1
    while (part := part_path(path, index)).is_file():
        part.unlink()
        index += 1


def record_path(output: Path) -> Path:
    """Where the record of the job writing ``output`` lives."""
    return output.with_name(output.name + ".job.json")


def check_distinct(reads: dict[str, Path | None], writes: dict[str, Path | None], heatmaps: Path | None) -> None:
    """DataError when a file in ``writes`` (option -> path) is one of ``reads`` (the job's inputs, by option) or
    another of ``writes``; when the ``heatmaps`` folder is one of these files; when a folder one needs (``heatmaps``
    included) is a file, or a file the job reads or writes; or when a file lies where the heatmap PNGs are written."""
    inputs = [(option, path) for option, path in reads.items() if path is not None]
    files = {option: path for option, path in writes.items() if path is not None}
    named = [*inputs, *files.items()]
    destinations = [*files.items(), *([("--heatmaps", heatmaps)] if heatmaps is not None else [])]
    for index, (option, path) in enumerate(destinations, len(inputs)):
        for other_option, other in named[:index]:
            if _same_file(path, other):
                raise DataError(f"{path}: {option} is also {_the(other_option)}; each file a job writes must be "
                                "a file of its own")
        if heatmaps is not None and _same_file(path.parent, heatmaps) and _HEATMAP_NAME.fullmatch(path.name):
            raise DataError(f"{path}: {option} lies in the --heatmaps folder under a heatmap's name")
    for option, path in destinations:
        # the nearest existing ancestor of the path (the path itself for the heatmap folder) must be a folder
        check_folder_path(path if option == "--heatmaps" else path.parent, f"{option} {path}")
        for other_option, other in named:
            if Path(os.path.realpath(other)) in Path(os.path.realpath(path)).parents:
                raise DataError(f"{other}: is {_the(other_option)}, but {option} {path} needs it to be a folder")


def _the(option: str) -> str:
    """How a message names the file an option gives ("the --output"), or one named in words ("the job record")."""
    return option if option.startswith("the ") else f"the {option}"


def _same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def job_record(input_path: Path, recommender: Recommender, settings: dict[str, Any]) -> dict[str, Any]:
    """What identifies a job: its input's contents, its model and the settings that shape its output."""
    return {"version": RECORD_VERSION, "input": _input_identity(input_path), "model": model_digest(recommender),
            "settings": settings}


def _input_identity(path: Path) -> dict[str, Any]:
    """Path, size and SHA-256 of a regular file; only the path of a pipe or device (it cannot be proven)."""
    identity: dict[str, Any] = {"path": os.path.realpath(path)}
    if path.is_file():
        identity.update(size=path.stat().st_size, sha256=file_sha256(path))
    return identity


def check_resumable_input(path: Path) -> None:
    """``--resume`` continues a job only from a regular file, refused before a row is read: a pipe or a device
    cannot be proven to give the rows the job began on (its record holds only the path)."""
    if path.exists() and not path.is_file() and not path.is_dir():  # a missing file or a folder: named when opened
        raise DataError(f"{path}: --resume needs its --input to be a regular file, and this one is a pipe or a "
                        "device, which cannot be proven to give the rows the job began on; save them to a file and "
                        "translate that")


def model_digest(recommender: Recommender) -> str:
    """SHA-256 of the model's configuration, vocabularies and weights (as decoded: a quantized model has its own).

    Computed once per loaded model and kept while it lives: a loaded model is never changed, and hashing
    every weight again for each file job would cost as much as a small job."""
    if recommender not in _DIGESTS:
        _DIGESTS[recommender] = _hash_model(recommender)
    return _DIGESTS[recommender]


_DIGESTS: weakref.WeakKeyDictionary[Recommender, str] = weakref.WeakKeyDictionary()


def _hash_model(recommender: Recommender) -> str:
    digest = hashlib.sha256(repr(recommender.model.config).encode("utf-8"))
    for part in recommender.tokenizer.state_dict().values():
        digest.update(part if isinstance(part, bytes) else repr(part).encode("utf-8"))
    for name, tensor in recommender.model.state_dict().items():
        if isinstance(tensor, torch.Tensor):
            digest.update(name.encode("utf-8"))
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class HeldRecord:
    """The record beside a job's output, open and locked by this job (``held_record``): what it held, and ``write``."""

    def __init__(self, output: Path, file: BinaryIO) -> None:
        self.output, self.path, self.file = output, record_path(output), file
        file.seek(0)
        self.found = file.read()  # b"" when there was none

    def write(self, record: dict[str, Any]) -> None:
        """Make ``record`` the record of a job starting afresh: written in place, since the lock is on this file;
        a kill in the one write leaves a record ``--resume`` calls unreadable, beside an output not yet begun.
        Written past Python's buffer: a write that failed (a full disk) left its bytes there, and closing the file
        tried them again, raising a bare OSError in place of this one line and leaving a record cut short."""
        data, fd = json.dumps(record, indent=1).encode("utf-8") + b"\n", self.file.fileno()
        try:
            os.ftruncate(fd, 0)
            while data:  # opened to append: each write lands at the end
                data = data[os.write(fd, data):]
            os.fsync(fd)
            sync_folder(self.path.parent)
        except OSError as err:  # a full disk
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # no record cut short: an empty one is removed as the job ends
            raise DataError(f"{self.output}: cannot write its job record {self.path.name} ({err.strerror or err})"
                            ) from None

    def check_resumable(self, record: dict[str, Any]) -> None:
        """DataError unless the record found is ``record``: same input, model and settings."""
        if not self.found:
            raise DataError(f"{self.output}: --resume found no record of the job that wrote it ({self.path.name}), so "
                            "it may be another program's file; use another --output, or run without --resume")
        try:
            found = json.loads(self.found.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataError(f"{self.path}: unreadable job record ({shown(str(err))}); use another --output") from None
        if not isinstance(found, dict) or found.get("version") != RECORD_VERSION:
            raise DataError(f"{self.path}: not a job record this version wrote; use another --output")
        differences = _differences(found, record)
        if differences:
            raise DataError(f"{self.output}: was written by another job ({'; '.join(differences)}); use another "
                            "--output, or delete it and its record to start again")


@contextlib.contextmanager
def held_record(output: Path) -> Iterator[HeldRecord]:
    """The record beside ``output``, locked for this job while the block runs (created empty if there is none, in a
    folder made for it), so that two jobs never write one output at once (a job started twice, two ``--resume``):
    the second is a one-line refusal. An empty record is removed at the end: a job refused before it began."""
    path = record_path(output)
    make_folder(output.parent)
    while True:
        try:
            file = path.open("a+b")
        except OSError as err:  # a name too long once ".job.json" is added, no permission
            raise DataError(f"{output}: cannot write its job record {path.name} ({err.strerror or err})") from None
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            file.close()
            raise DataError(f"{output}: another job is writing it now (its record {path.name} is locked); wait for "
                            "that job to end, or use another --output") from None
        if _same_file_as(file, path):
            break
        file.close()  # removed or replaced between the open and the lock: lock the file there now
    try:
        yield HeldRecord(output, file)
    finally:
        with contextlib.suppress(OSError):
            if os.fstat(file.fileno()).st_size == 0:
                path.unlink()
        file.close()


def _same_file_as(file: BinaryIO, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(file.fileno()), path.stat())
    except OSError:
        return False


def _differences(found: dict[str, Any], record: dict[str, Any]) -> list[str]:
    differences = []
    if found.get("input") != record["input"]:
        recorded = found.get("input") or {}
        if recorded.get("path") != record["input"]["path"]:
            differences.append(f"its input was {shown(str(recorded.get('path')))}")
        else:
            differences.append("the input has changed since the job started")
    if found.get("model") != record["model"]:
        differences.append("another model")
    settings = found.get("settings") if isinstance(found.get("settings"), dict) else {}
    changed = [key for key in record["settings"] if settings.get(key) != record["settings"][key]]
    if changed:
        differences.append(f"other {', '.join(changed)}")
    return differences

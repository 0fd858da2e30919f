"""A training run's folder and what ``--resume`` checks before it continues one (``seq2seq train``, a recipe's
members, ``seq2seq rul train``): a run there is never replaced silently, a resumed run is the run that was
started (its settings and data, by ``file_fingerprint``), and a recipe member's ``result.json`` marks it
finished, so that ``--resume`` keeps it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from seq2seq.errors import ConfigError
from seq2seq.files import check_folder_path, file_sha256
from seq2seq.writing import write_atomic

ResultT = TypeVar("ResultT")
RESULT = "result.json"  # in a recipe member's folder once it has finished: --resume keeps that member
RESUMABLE = ("epochs", "max_minutes", "device", "precision", "parallel")  # settings --resume may change: how long,
# where (a device, and the precisions it runs) and how many of a recipe's members train at once


def check_run_folder(folder: Path, resume: bool, overwrite: bool, lasts: list[Path], holds: list[Path],
                     lasts_named: str = "last.pt") -> None:
    """The rule for a training run's OUTPUT_DIR (``seq2seq train``, a recipe's members, ``seq2seq rul train``): a
    run in it is never replaced silently. ``resume`` continues one of the runs' ``lasts`` (``lasts_named`` in
    the message when there is none); without ``resume`` or ``overwrite``, any of ``holds`` there refuses it."""
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other")
    check_folder_path(folder)  # before the run's first log line, which would stand above the refusal
    if resume and not any(path.is_file() for path in lasts):
        # a run stopped before its first last.pt left its log, which "already holds a run" sent here: the way out
        started = next((path for path in holds if path.exists()), None)
        way_out = (f"; the run there ({started.relative_to(folder)}) left nothing to continue from: start it over with "
                   "--overwrite" if started else "")
        raise ConfigError(f"--resume: nothing to resume in {folder} (no {lasts_named}){way_out}")
    found = next((path for path in holds if path.exists()), None)
    if found is not None and not (resume or overwrite):
        raise ConfigError(f"{folder} already holds a training run ({found.relative_to(folder)}); pass --resume to "
                          "continue it, --overwrite to start over, or choose another --output-dir")


def refuse_earlier_runs(folders: Iterable[Path], option: str = "--output-dir") -> None:
    """For a benchmark script, which has no --resume: ConfigError naming the first of ``folders`` that holds a run
    (its best.pt or last.pt), unless the caller passes --overwrite, so that a second run never replaces a first's
    models and figures without a word."""
    for folder in folders:
        found = next((folder / name for name in ("best.pt", "last.pt") if (folder / name).exists()), None)
        if found is not None:
            raise ConfigError(f"{option}: {folder} holds a run ({found.name}); pass --overwrite to replace it, or "
                              "choose another folder")


def file_fingerprint(path: str | Path | None, records: Iterable[Any] = ()) -> dict[str, Any]:
    """What a run reads from ``path``, for ``--resume`` to prove it the same: the file's real path (None: the
    default, such as synthetic engines) and SHA-256, and a SHA-256 of the ``records`` read from it (which columns)."""
    found: dict[str, Any] = {"path": None if path is None else os.path.realpath(path)}
    if path is not None and Path(path).is_file():
        found["sha256"] = file_sha256(Path(path))
    read = hashlib.sha256()
    for record in records:
        read.update(repr(record).encode("utf-8") + b"\n")
    return {**found, "read": read.hexdigest()}


def check_same_run(path: Path, configs: Iterable[tuple[Any, Any]], saved_fingerprint: Any = None,
                   fingerprint: dict[str, Any] | None = None) -> None:
    """``--resume`` continues the run saved in ``path`` only as it was started: each (saved, asked) pair of config
    records alike but for the RESUMABLE fields, and ``fingerprint`` (flag -> ``file_fingerprint``) the data that
    ``saved_fingerprint`` says it was trained on; a checkpoint written before runs kept that (None) is checked on
    its settings alone."""
    differences = [f"with {field.name} {getattr(saved, field.name)}, not {getattr(asked, field.name)}"
                   for saved, asked in configs for field in dataclasses.fields(saved)
                   if field.name not in RESUMABLE and getattr(saved, field.name) != getattr(asked, field.name)]
    if isinstance(saved_fingerprint, dict) and fingerprint is not None:
        found = [_data_difference(flag, saved_fingerprint[flag], now) for flag, now in fingerprint.items()
                 if isinstance(saved_fingerprint.get(flag), dict)]
        differences += [text for text in found if text]
    if differences:
        raise ConfigError(f"--resume: {path} was trained {', and '.join(differences)}; resume with the run's own "
                          "settings and data, start over with --overwrite, or choose another --output-dir")


def _data_difference(flag: str, was: dict[str, Any], now: dict[str, Any]) -> str:
    """How the data read through ``flag`` differs from what the run was trained on ("": the same; a file moved or
    copied elsewhere is the same)."""
    if flag == "--init-from":  # a fine-tuning's start: the file and whether it replays its past cases
        if was.get("sha256") != now.get("sha256"):
            if was.get("path") == now.get("path"):
                return f"from --init-from {now.get('path')} as it was before its content changed"
            return f"from --init-from {was.get('path') or 'none (a fresh run)'}, not {now.get('path') or 'none'}"
        return "" if was.get("read") == now.get("read") else "with the other --no-replay setting"
    if was.get("sha256") != now.get("sha256"):
        if was.get("path") == now.get("path"):
            return f"on another {flag} file (its content has changed since the run started)"
        return f"on another {flag} file ({was.get('path') or 'the default'}, not {now.get('path') or 'the default'})"
    if was.get("read") != now.get("read"):
        if "sha256" not in now:  # a pipe or device: no SHA-256 to compare, so what it gave was compared
            return f"on other data through the same {flag} ({now.get('path')} is not a regular file, and what it " \
                   "gave differs from what the run read)"
        return f"on other pairs of the same {flag} file (another --source-column or --target-column, or target file)"
    return ""


def record_result(folder: Path, result: Any) -> None:
    """FOLDER/result.json (a dataclass's fields), which marks a recipe member finished for ``--resume``: written
    whole or not at all, since a half-written record would block --resume."""
    write_atomic(folder / RESULT, json.dumps(dataclasses.asdict(result)) + "\n")


def read_result(folder: Path, kind: type[ResultT]) -> ResultT:
    """The ``kind`` recorded in FOLDER/result.json by ``record_result``; a damaged record is a one-line error."""
    path = folder / RESULT
    try:
        return kind(**json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as err:  # a JSON fault is a ValueError; other keys, a TypeError
        raise ConfigError(f"{path}: not a finished member's record ({err}); delete it to train that member "
                          "again") from None

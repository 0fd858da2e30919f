"""Self-describing checkpoint files: atomic writes and validated reads, for every model kind.

A checkpoint is a dict of plain types (numbers, strings, bytes, lists, dicts, tensors) with a
``kind`` and a ``format_version``, read with ``torch.load(weights_only=True)``: loading never runs
code from the file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from seq2seq.errors import CheckpointError


def save_atomic(payload: dict[str, Any], path: str | Path) -> None:
    """torch.save to a temporary sibling, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_checkpoint(path: str | Path, kind: str, format_version: int, required: tuple[str, ...]) -> dict[str, Any]:
    """Load a checkpoint and check its kind, format version and ``required`` keys.

    Every failure is a one-line CheckpointError naming the path.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found" if not path.exists() else f"{path}: not a file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a damaged file: zip, pickle, EOF, runtime
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{path}: unreadable checkpoint, truncated or corrupt ({reason[:160]})") from None
    if not isinstance(payload, dict) or payload.get("kind") != kind:
        found = payload.get("kind") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path}: not a {kind} checkpoint (kind: {found!r})")
    if payload.get("format_version") != format_version:
        raise CheckpointError(f"{path}: checkpoint format version {payload.get('format_version')!r}, "
                              f"this program reads version {format_version}")
    missing = [key for key in required if key not in payload]
    if missing:
        raise CheckpointError(f"{path}: checkpoint lacks {', '.join(missing)}")
    return payload

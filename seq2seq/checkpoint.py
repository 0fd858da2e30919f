"""Self-describing checkpoint files: one file holds everything needed to translate or resume.

Layout (plain types only, so ``torch.load(weights_only=True)`` reads it):
    format_version  int, FORMAT_VERSION
    kind            "seq2seq-translator"
    model_config    dict of ModelConfig fields
    train_config    dict of TrainConfig fields
    tokenizer       Tokenizer.state_dict(): config and SentencePiece model bytes
    weights         the model's state_dict
    training_state  optimizer, schedule, generators, counters (for --resume)
Files are written atomically: a temporary file in the same folder, fsync, then rename, so a crash
never leaves a half-written best.pt or last.pt.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from seq2seq.config import ModelConfig, from_dict
from seq2seq.errors import CheckpointError, ConfigError
from seq2seq.model import Seq2Seq, build_model
from seq2seq.tokenizer import Tokenizer

FORMAT_VERSION = 1
KIND = "seq2seq-translator"
REQUIRED_KEYS = ("format_version", "kind", "model_config", "train_config", "tokenizer", "weights")


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


def save_checkpoint(path: str | Path, model: Seq2Seq, tokenizer: Tokenizer, train_config: Any,
                    training_state: dict[str, Any] | None = None) -> None:
    save_atomic({
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "model_config": dataclasses.asdict(model.config),
        "train_config": dataclasses.asdict(train_config),
        "tokenizer": tokenizer.state_dict(),
        "weights": {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()},
        "training_state": training_state or {},
    }, path)


def read_checkpoint(path: str | Path, kind: str = KIND, format_version: int = FORMAT_VERSION) -> dict[str, Any]:
    """Load and validate a checkpoint's top level; every failure is a one-line CheckpointError."""
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
    missing = [key for key in REQUIRED_KEYS if key not in payload]
    if missing:
        raise CheckpointError(f"{path}: checkpoint lacks {', '.join(missing)}")
    return payload


def restore(payload: dict[str, Any], path: str | Path) -> tuple[Seq2Seq, Tokenizer]:
    """Rebuild the model and tokenizer a checkpoint describes, with its weights loaded strictly."""
    try:
        config = from_dict(ModelConfig, payload["model_config"], where=f"{path}: model_config")
        model = build_model(config)
    except ConfigError as err:
        raise CheckpointError(str(err)) from None
    tokenizer = Tokenizer.from_state_dict(payload["tokenizer"], where=f"{path}: tokenizer")
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (config.src_vocab_size, config.tgt_vocab_size):
        raise CheckpointError(f"{path}: tokenizer vocabularies ({tokenizer.src_vocab_size}, "
                              f"{tokenizer.tgt_vocab_size}) do not match the model "
                              f"({config.src_vocab_size}, {config.tgt_vocab_size})")
    try:
        model.load_state_dict(payload["weights"], strict=True)
    except (RuntimeError, TypeError, AttributeError) as err:
        detail = " ".join(str(err).split())
        raise CheckpointError(f"{path}: weights do not match the model config ({detail[:200]})") from None
    return model, tokenizer


def load_model(path: str | Path) -> tuple[Seq2Seq, Tokenizer, dict[str, Any]]:
    """Model (eval mode, on the CPU), tokenizer and the whole payload of a checkpoint file."""
    payload = read_checkpoint(path)
    model, tokenizer = restore(payload, path)
    return model.eval(), tokenizer, payload

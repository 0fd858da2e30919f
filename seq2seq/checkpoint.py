"""Self-describing checkpoint files: one file holds everything needed to translate or resume.

Layout (plain types only, so ``torch.load(weights_only=True)`` reads it):
    format_version  int, FORMAT_VERSION
    kind            "seq2seq-translator"
    model_config    dict of ModelConfig fields
    train_config    dict of TrainConfig fields
    tokenizer       Tokenizer.state_dict(): config and SentencePiece model bytes
    weights         the model's state_dict
    training_state  optimizer, schedule, generators, counters (for --resume)
Files are written atomically (``serialization.save_atomic``), so a crash never leaves a
half-written best.pt or last.pt.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from seq2seq.config import ModelConfig, from_dict
from seq2seq.errors import CheckpointError, ConfigError
from seq2seq.model import Seq2Seq, build_model
from seq2seq.serialization import read_checkpoint as read_file
from seq2seq.serialization import save_atomic
from seq2seq.tokenizer import Tokenizer

FORMAT_VERSION = 1
KIND = "seq2seq-translator"
REQUIRED_KEYS = ("model_config", "train_config", "tokenizer", "weights")


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """A translator checkpoint's validated top level; every failure is a one-line CheckpointError."""
    return read_file(path, KIND, FORMAT_VERSION, REQUIRED_KEYS)


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

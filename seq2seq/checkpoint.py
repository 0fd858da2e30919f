"""Self-describing checkpoint files: one file holds everything needed to translate or resume.

Every model kind is stored the same way: a dict of plain types (numbers, strings, bytes, lists,
dicts, tensors) with a ``kind`` and a ``format_version``, written atomically (temporary sibling,
fsync, rename: a crash never leaves a half-written file) and read with
``torch.load(weights_only=True)``, so loading never runs code from the file. Every failure to read
one is a one-line CheckpointError naming the path.

A translator checkpoint (``kind`` "seq2seq-translator", FORMAT_VERSION):
    model_config    dict of ModelConfig fields
    train_config    dict of TrainConfig fields
    tokenizer       Tokenizer.state_dict(): config and SentencePiece model bytes
    weights         the model's state_dict
    training_state  optimizer, schedule, generators, counters and the data's ``fingerprint`` (for --resume)
and, in files written by ``seq2seq ensemble`` (seq2seq/ensemble.py), ``ensemble_weights``: the
state_dicts of the members after the first (whose are ``weights``); ``seq2seq average`` and
``ensemble`` also record ``combined_from`` (the input files' names and how they were combined).
"""

from __future__ import annotations

import codecs
import dataclasses
import pickle
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from seq2seq.config import ModelConfig, SearchConfig
from seq2seq.config_checks import from_dict
from seq2seq.ensemble import Ensemble
from seq2seq.errors import CheckpointError, checkpoint_fault
from seq2seq.files import SNIFF_BYTES, make_folder
from seq2seq.model import Seq2Seq, build_model
from seq2seq.tokenizer import Tokenizer
from seq2seq.writing import replacing

FORMAT_VERSION = 1
KIND = "seq2seq-translator"
REQUIRED_KEYS = ("model_config", "train_config", "tokenizer", "weights")
ModuleT = TypeVar("ModuleT", bound=nn.Module)
ZIP_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive
PICKLE_MAGIC = b"\x80"  # a pickle of protocol 2 or later (pickle.dump, torch's legacy format)


# -- any model kind ---------------------------------------------------------------------------
def save_atomic(payload: dict[str, Any], path: str | Path) -> None:
    """torch.save to ``path`` through ``writing.replacing``: the old file is left as it was if anything fails, and
    an OSError (a full disk, a folder in the way) is a one-line DataError naming ``path``."""
    path = Path(path)
    make_folder(path.parent)
    with replacing(path) as handle:
        try:
            torch.save(payload, handle)
        except RuntimeError as err:  # torch's zip writer wraps a failed write's OSError (a full disk) in its own
            cause = err.__cause__ or err.__context__
            if isinstance(cause, OSError):
                raise cause from None
            raise


def read_payload(path: str | Path, kind: str, format_version: int, required: tuple[str, ...]) -> dict[str, Any]:
    """Load a checkpoint and check its kind, format version and ``required`` keys."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found" if not path.exists() else f"{path}: not a file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's warnings on a foreign file speak of its API, not the file
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a damaged file: zip, pickle, EOF, OS, runtime
        raise CheckpointError(f"{path}: {_not_loaded(path, err)}") from None
    if damaged := _damaged_record(path):
        raise CheckpointError(f"{path}: damaged checkpoint: its record {damaged} does not match the checksum written "
                              "with it (the file changed after it was saved: a disk, memory or copy fault)")
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


def _damaged_record(path: Path) -> str | None:
    """The first record of a loaded checkpoint whose bytes fail their CRC-32, or None: torch's reader does not check
    them, and a file with 100 bytes flipped in its weights loaded and answered worse without a word."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip()
    except (zipfile.BadZipFile, OSError):  # torch read it; what zipfile cannot is not this check's to judge
        return None


def _not_loaded(path: Path, err: Exception) -> str:
    """What a file torch could not load is, in a user's words rather than torch's (which speak of its API)."""
    try:
        with path.open("rb") as file:
            head = file.read(SNIFF_BYTES)
    except OSError as error:
        return f"cannot read ({error.strerror})"
    if not head:
        return "empty file, not a checkpoint"
    if head.startswith(ZIP_MAGIC):
        if not zipfile.is_zipfile(path):
            return f"truncated checkpoint ({path.stat().st_size} bytes; the end of its zip archive is missing)"
        if isinstance(err, pickle.UnpicklingError):
            return ("unreadable checkpoint: it holds Python objects beyond tensors and plain data, which are never "
                    "loaded (they could run code)")
        return "corrupt checkpoint, or a zip archive that is not a checkpoint"  # torch's words name its internals
    if head.startswith(PICKLE_MAGIC):
        return "not a checkpoint written by seq2seq (a pickle, not a zip archive)"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head)  # its last character may be cut: not final
        text = b"\0" not in head
    except UnicodeDecodeError:
        text = False
    return "not a checkpoint: a text file" if text else "not a checkpoint (neither a zip archive nor text)"


def load_weights(path: str | Path, module: ModuleT, weights: Any, config_name: str) -> ModuleT:
    """``module`` (built from a checkpoint's config) with the checkpoint's weights loaded strictly;
    weights that do not fit, or are not finite, are the checkpoint's fault (CheckpointError). A weight that is
    NaN or infinite (a run that diverged, a damaged file) would answer every alert with an empty recommendation
    and a NaN score, or average into every model made from it."""
    try:
        module.load_state_dict(weights, strict=True)
    except (RuntimeError, TypeError, AttributeError) as err:
        detail = " ".join(str(err).split())
        raise CheckpointError(f"{path}: weights do not match the {config_name} ({detail[:200]})") from None
    for name, tensor in module.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{path}: weight {name} holds NaN or infinity: the checkpoint is damaged (a run "
                                  "that diverged, or an edited file)")
    return module


def cpu_weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().cpu() for name, tensor in module.state_dict().items()}


def members_weights(members: list[nn.Module]) -> dict[str, Any]:
    """The payload's weights of one model or of an ensemble's members: the first's are ``weights``, the others'
    ``ensemble_weights``, so that a single model's file is what it always was."""
    others = {"ensemble_weights": [cpu_weights(m) for m in members[1:]]} if len(members) > 1 else {}
    return {"weights": cpu_weights(members[0]), **others}


def load_members(path: str | Path, payload: dict[str, Any], first: ModuleT, build: Callable[[], ModuleT],
                 what: str) -> list[ModuleT]:
    """``first`` (its ``weights`` loaded) and one model per entry of ``ensemble_weights``, each made by
    ``build()`` and loaded strictly: [first] for a single model."""
    others = payload.get("ensemble_weights", [])
    if not isinstance(others, list):
        raise CheckpointError(f"{path}: ensemble_weights must be a list of members' weights")
    return [first, *[load_weights(path, build(), weights, f"{what} (member {k})")
                     for k, weights in enumerate(others, 2)]]


def count_parameters(module: nn.Module) -> int:
    """Trainable parameters, tied weights counted once."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


# -- translators ------------------------------------------------------------------------------
def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """A translator checkpoint's validated top level."""
    return read_payload(path, KIND, FORMAT_VERSION, REQUIRED_KEYS)


def save_checkpoint(path: str | Path, model: Seq2Seq, tokenizer: Tokenizer, train_config: Any,
                    training_state: dict[str, Any] | None = None) -> None:
    save_atomic({
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "model_config": dataclasses.asdict(model.config),
        "train_config": dataclasses.asdict(train_config),
        "tokenizer": tokenizer.state_dict(),
        "weights": cpu_weights(model),
        "training_state": training_state or {},
    }, path)


def restore(payload: dict[str, Any], path: str | Path) -> tuple[Seq2Seq | Ensemble, Tokenizer]:
    """Rebuild the model (an Ensemble when the file holds several) and tokenizer a checkpoint describes,
    with its weights loaded strictly."""
    with checkpoint_fault():
        config = from_dict(ModelConfig, payload["model_config"], where=f"{path}: model_config")
        model = build_model(config)
    tokenizer = Tokenizer.from_state_dict(payload["tokenizer"], where=f"{path}: tokenizer")
    if (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) != (config.src_vocab_size, config.tgt_vocab_size):
        raise CheckpointError(f"{path}: tokenizer vocabularies ({tokenizer.src_vocab_size}, "
                              f"{tokenizer.tgt_vocab_size}) do not match the model "
                              f"({config.src_vocab_size}, {config.tgt_vocab_size})")
    model = load_weights(path, model, payload["weights"], "model config")
    members = load_members(path, payload, model, lambda: build_model(config), "model config")
    return (Ensemble(members) if len(members) > 1 else model), tokenizer


def search_defaults(payload: dict[str, Any], path: str | Path) -> SearchConfig:
    """The search settings a checkpoint was tuned with (its ``search``, from a config's search section), the
    defaults of translate, evaluate, the UI and the batch job; SearchConfig() for a checkpoint without."""
    with checkpoint_fault():
        return from_dict(SearchConfig, payload.get("search", {}), where=f"{path}: search")


def with_search_defaults(path: str | Path, search: SearchConfig) -> None:
    """Store ``search`` in the checkpoint at ``path`` as its search defaults."""
    save_atomic({**read_checkpoint(path), "search": dataclasses.asdict(search)}, path)


def load_model(path: str | Path) -> tuple[Seq2Seq | Ensemble, Tokenizer, dict[str, Any]]:
    """Model (eval mode, on the CPU), tokenizer and the whole payload of a checkpoint file."""
    payload = read_checkpoint(path)
    model, tokenizer = restore(payload, path)
    return model.eval(), tokenizer, payload

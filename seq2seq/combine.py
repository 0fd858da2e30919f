"""Several translators made into one checkpoint: their ensemble or their weights' average.

``combine_checkpoints`` serves ``seq2seq average | ensemble`` and a recipe's members (``seq2seq.members``). The
inputs must share one tokenizer and one model configuration. The case memory is the first input's; its trust
model was fitted for that input's probabilities, so with ``dev`` it is fitted again for the
combined model (as training fits it); without, the first input's is kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Literal

import torch

from seq2seq.checkpoint import load_model, members_weights
from seq2seq.corpus import ParallelCorpus
from seq2seq.ensemble import Ensemble, average_weights, decoding_config, weights_cosine
from seq2seq.errors import ConfigError
from seq2seq.evaluate import fit_trust_on
from seq2seq.model import Seq2Seq, build_model
from seq2seq.recommender import Recommender
from seq2seq.trust import memory_state, read_memory

RELATED = 0.5  # weights_cosine below which two checkpoints come from unrelated runs (measured: > 0.99 or about 0)


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 of a model's weights, names and values: equal for the same model however its file was reached."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)  # any dtype, bfloat16 too
        digest.update(name.encode("utf-8") + b"\0" + raw.numpy().tobytes())
    return digest.hexdigest()


def combine_checkpoints(paths: list[str | Path], how: Literal["average", "ensemble"],
                        dev: ParallelCorpus | None = None) -> tuple[dict[str, Any], int]:
    """(the combined checkpoint's payload, how many models it combines); ``dev`` refits trust."""
    loaded = [load_model(path) for path in paths]
    first_path, (first_model, tokenizer, payload) = paths[0], loaded[0]
    if how == "average" and (ensembles := [path for path, (model, _, _) in zip(paths, loaded, strict=True)
                                            if isinstance(model, Ensemble)]):
        raise ConfigError(f"{ensembles[0]}: an ensemble, and average takes single checkpoints; an ensemble's members "
                          "are best decoded together")
    members: list[Seq2Seq] = []
    seen: dict[str, str | Path] = {}  # a member's weights' digest -> the input it came from
    for path, (model, _, other) in zip(paths, loaded, strict=True):
        if other["tokenizer"] != payload["tokenizer"]:
            raise ConfigError(f"{path}: its tokenizer differs from {first_path}'s; combined checkpoints must share one "
                              "(train them on one --train file with one tokenizer configuration)")
        if (mine := decoding_config(model.config)) != (theirs := decoding_config(first_model.config)):
            field = next(f.name for f in dataclasses.fields(mine) if getattr(mine, f.name) != getattr(theirs, f.name))
            raise ConfigError(f"{path}: its model configuration differs from {first_path}'s ({field} "
                              f"{getattr(model.config, field)!r}, not {getattr(first_model.config, field)!r})")
        for member in list(model.members) if isinstance(model, Ensemble) else [model]:
            # A copy, a hard link or an ensemble holding an input too would count one model twice, unseen by paths
            if (digest := weights_digest(member)) in seen:
                raise ConfigError(f"--inputs: {path} holds a model {seen[digest]} holds too (a copy, a link, or an "
                                  "ensemble of it); each model counts once")
            seen[digest] = path
            members.append(member)
    if how == "average":
        for path, member in zip(paths[1:], members[1:], strict=True):
            # Runs of other seeds share no basin: the mean of the MaintNet recipe's seven members scored 0.02 BLEU.
            if (cosine := weights_cosine(members[0], member)) < RELATED:
                raise ConfigError(f"{path}: its weights are unrelated to {first_path}'s (cosine {cosine:.2f}), so "
                                  "their mean is no model: average checkpoints of one run, or of runs fine-tuned from "
                                  "one checkpoint; decode separate runs together with seq2seq ensemble")
        combined: Seq2Seq | Ensemble = build_model(members[0].config)
        combined.load_state_dict(average_weights(members))
    else:
        combined = Ensemble(members)
    result: dict[str, Any] = {key: value for key, value in payload.items() if key not in ("ensemble_weights", "memory")}
    result.update(training_state={}, combined_from={"how": how, "inputs": [Path(p).name for p in paths]},
                  **members_weights(members if isinstance(combined, Ensemble) else [combined]))
    memory, trust = read_memory(payload, first_path)
    if memory is not None:
        if dev is not None:
            trust = fit_trust_on(Recommender(combined.eval(), tokenizer), memory, dev, trust.flag_rate)
        result["memory"] = memory_state(memory, trust)
    return result, len(members)

"""Several translator checkpoints made into one payload: their ensemble or their weights' average.

Used by ``seq2seq average | ensemble`` and by training with ``train.members`` > 1. The inputs must
share one tokenizer and one model configuration. The case memory is the first input's; its trust
model was fitted for that input's probabilities, so with ``dev`` it is fitted again for the
combined model (as training fits it); without, the first input's is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from seq2seq.checkpoint import cpu_weights, load_model
from seq2seq.corpus import ParallelCorpus
from seq2seq.ensemble import Ensemble, average_weights
from seq2seq.errors import ConfigError
from seq2seq.evaluate import fit_trust_on
from seq2seq.model import Seq2Seq, build_model
from seq2seq.recommender import Recommender, read_memory


def combine_checkpoints(paths: list[str | Path], how: Literal["average", "ensemble"],
                        dev: ParallelCorpus | None = None) -> tuple[dict[str, Any], int]:
    """(the combined checkpoint's payload, how many models it combines); ``dev`` refits trust."""
    loaded = [load_model(path) for path in paths]
    first_path, (first_model, tokenizer, payload) = paths[0], loaded[0]
    members: list[Seq2Seq] = []
    for path, (model, _, other) in zip(paths, loaded, strict=True):
        if other["tokenizer"] != payload["tokenizer"]:
            raise ConfigError(f"{path}: its tokenizer differs from {first_path}'s; combined checkpoints must share one "
                              "(train them on one --train file with one tokenizer configuration)")
        if model.config != first_model.config:
            raise ConfigError(f"{path}: its model configuration differs from {first_path}'s")
        members += list(model.members) if isinstance(model, Ensemble) else [model]
    if how == "average":
        if any(isinstance(model, Ensemble) for model, _, _ in loaded):
            raise ConfigError("average takes single checkpoints; an ensemble's members are best decoded together")
        combined: Seq2Seq | Ensemble = build_model(members[0].config)
        combined.load_state_dict(average_weights(members))
    else:
        combined = Ensemble(members)
    result: dict[str, Any] = {key: value for key, value in payload.items() if key not in ("ensemble_weights", "memory")}
    result.update(training_state={}, combined_from={"how": how, "inputs": [Path(p).name for p in paths]},
                  weights=cpu_weights(members[0] if isinstance(combined, Ensemble) else combined))
    if isinstance(combined, Ensemble):
        result["ensemble_weights"] = [cpu_weights(member) for member in members[1:]]
    memory, trust = read_memory(payload, first_path)
    if memory is not None:
        if dev is not None:
            trust = fit_trust_on(Recommender(combined.eval(), tokenizer), memory, dev, trust.flag_rate)
        result["memory"] = {"cases": memory.state_dict(), "trust": trust.state_dict()}
    return result, len(members)

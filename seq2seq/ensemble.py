"""Several trained translators as one: an ensemble decoded together, and checkpoint averaging.

**Ensemble.** Members share one tokenizer and one model configuration (runs of one recipe with
different seeds). Each member encodes the alert and decodes step by step on its own state; the
search sees one model whose next-piece distribution is the mean of the members' distributions
(``log mean_k p_k``, the usual ensemble of NMT toolkits) and whose attention is the mean of the
members' attention weights. Every member's rows sum to 1 over the alert's pieces, so the mean's do
too: the heatmap of an ensemble's answer shows where its members looked *on average* (a member
that looked elsewhere is blurred in, not hidden), and the JSON says how many members it averages.

**Averaging.** ``average_weights`` is the element-wise mean of the members' parameters: one model,
as fast as any; it only makes sense for checkpoints of one run (or runs that started from the same
weights), whose parameters lie in one basin.

The search needs of a model only ``encode``, ``step`` and a ``config``; an ensemble's encoded batch
and decoder state are ``Stacked`` members' ones, selected and cropped together.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from seq2seq.config import ModelConfig
from seq2seq.errors import ConfigError


@dataclass(frozen=True)
class Stacked:
    """One batch's encoded alerts or decoder states, one per member, moved together."""

    parts: tuple[Any, ...]

    @property
    def mask(self) -> Tensor:
        return self.parts[0].mask  # (B, S): the same alerts for every member

    def select(self, index: Tensor) -> Stacked:
        return Stacked(tuple(part.select(index) for part in self.parts))

    def head(self, n: int) -> Stacked:
        return Stacked(tuple(part.head(n) for part in self.parts))


def decoding_config(config: ModelConfig) -> ModelConfig:
    """``config`` as far as decoding sees it: dropout acts in training only, so members trained with other rates
    are one network when they decode (and an ensemble stores one configuration for all)."""
    return dataclasses.replace(config, dropout=0.0)


class Ensemble(nn.Module):
    """Members with one configuration decoded as one model (see module)."""

    def __init__(self, members: list[nn.Module]) -> None:
        super().__init__()
        if len(members) < 1:
            raise ConfigError("an ensemble needs at least one member")
        if any(decoding_config(member.config) != decoding_config(members[0].config) for member in members):
            raise ConfigError("ensemble members must share one model configuration")
        self.members = nn.ModuleList(members)
        self.config = members[0].config

    def encode(self, src: Tensor, src_lengths: Tensor, src_mask: Tensor) -> tuple[Stacked, Stacked]:
        encoded, states = zip(*(member.encode(src, src_lengths, src_mask) for member in self.members), strict=True)
        return Stacked(encoded), Stacked(states)

    def step(self, prev: Tensor, state: Stacked, encoded: Stacked) -> tuple[Tensor, Stacked, Tensor]:
        """prev (B,) -> the log of the members' mean next-piece distribution (B, V), next states, the mean
        of their attention weights (B, S)."""
        log_probs, states, weights = [], [], []
        for member, member_state, member_encoded in zip(self.members, state.parts, encoded.parts, strict=True):
            logits, next_state, step_weights = member.step(prev, member_state, member_encoded)
            log_probs.append(torch.log_softmax(logits.float(), dim=-1))
            states.append(next_state)
            weights.append(step_weights)
        mixture = torch.logsumexp(torch.stack(log_probs), dim=0) - math.log(len(self.members))  # (B, V)
        return mixture, Stacked(tuple(states)), torch.stack(weights).mean(dim=0)

    def forward(self, *args: Any) -> Any:
        raise TypeError("an ensemble decodes only (encode, step); train its members one by one")


def weights_cosine(a: nn.Module, b: nn.Module) -> float:
    """Cosine between two models' parameters, all flattened into one vector each (one layout). Checkpoints
    of one run, even its first epoch against its last, are above 0.99; runs of other seeds near 0."""
    x, y = (torch.cat([p.detach().float().flatten() for p in model.parameters()]) for model in (a, b))
    return float(torch.nn.functional.cosine_similarity(x, y, dim=0))


def average_weights(models: list[nn.Module | dict[str, Tensor]], shares: list[float] | None = None
                    ) -> dict[str, Tensor]:
    """The element-wise mean of the models' parameters (and buffers), or of state dicts, which must have one
    layout; with ``shares`` (one per model, summing to 1) the weighted mean."""
    states = [model if isinstance(model, dict) else model.state_dict() for model in models]
    if any(state.keys() != states[0].keys() or any(state[k].shape != states[0][k].shape for k in state)
           for state in states):
        raise ConfigError("averaged checkpoints must have the same parameters and shapes")
    if shares is None:
        return {name: torch.stack([state[name].float() for state in states]).mean(dim=0).to(states[0][name].dtype)
                for name in states[0]}
    if len(shares) != len(states) or abs(sum(shares) - 1.0) > 1e-6:
        raise ValueError(f"shares must be one per model and sum to 1, got {shares}")
    return {name: sum(share * state[name].float() for share, state in zip(shares, states, strict=True))
            .to(states[0][name].dtype) for name in states[0]}

"""Cross-attention mechanisms behind one interface.

Shapes (legend: seq2seq/__init__.py): B batch, S source length, T query steps (1 while decoding
step by step), Q query size, M memory size (2 x encoder hidden), A attention hidden size.

Every mechanism is ``forward(query, keys, values, mask) -> (context, weights)``: a subclass
implements only ``score`` (and, where the keys are a projection of the memory, ``project_keys``,
computed once per source sentence and carried in ``decoder.Encoded``). The base class applies the
mask, the softmax and the weighted sum. Modules hold parameters only, never per-batch state.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seq2seq.errors import ConfigError


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis that gives exactly 0 to positions where ``mask`` is False.

    ``scores`` (..., S); ``mask`` bool, True = real token, broadcastable to ``scores``. Every row
    must have at least one real position (sequences are never empty: they end in EOS).
    """
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


class Attention(nn.Module):
    """Base class: masked softmax over ``score`` and the weighted sum of ``values``."""

    def project_keys(self, memory: Tensor) -> Tensor:
        """Keys for ``score``, computed once per source sentence. (B, S, M) -> (B, S, *)."""
        return memory

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """Unnormalised alignment scores. query (B, T, Q), keys (B, S, *) -> (B, T, S)."""
        raise NotImplementedError

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, T, Q), keys from ``project_keys``, values (B, S, M), mask (B, S) bool.

        Returns context (B, T, M) and weights (B, T, S); each weight row sums to 1 and is 0 where
        ``mask`` is False.
        """
        scores = self.score(query, keys)  # (B, T, S)
        weights = masked_softmax(scores.float(), mask.unsqueeze(1)).to(values.dtype)
        context = torch.bmm(weights, values)  # (B, T, M)
        return context, weights


class AdditiveScore(Attention):
    """score(q, k) = v^T tanh(W_q q + W_k k), with W_k k projected once per sentence."""

    def __init__(self, query_size: int, memory_size: int, hidden_size: int) -> None:
        super().__init__()
        self.key_layer = nn.Linear(memory_size, hidden_size, bias=False)
        self.query_layer = nn.Linear(query_size, hidden_size, bias=False)
        self.energy_layer = nn.Linear(hidden_size, 1, bias=False)

    def project_keys(self, memory: Tensor) -> Tensor:
        return self.key_layer(memory)  # (B, S, A)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        hidden = torch.tanh(self.query_layer(query).unsqueeze(2) + keys.unsqueeze(1))  # (B, T, S, A)
        return self.energy_layer(hidden).squeeze(-1)  # (B, T, S)


class BahdanauAttention(AdditiveScore):
    """Additive attention: e_ij = v^T tanh(W s_{i-1} + U h_j).

    Bahdanau, Cho and Bengio, "Neural Machine Translation by Jointly Learning to Align and
    Translate", ICLR 2015. The query is the decoder state *before* the step (see decoder.py).
    """


class LuongConcatAttention(AdditiveScore):
    """Luong's concat score: score(h_t, h_s) = v^T tanh(W [h_t; h_s]) = v^T tanh(W_1 h_t + W_2 h_s).

    Luong, Pham and Manning, "Effective Approaches to Attention-based Neural Machine
    Translation", EMNLP 2015, eq. 8. The query is the decoder state *after* the step.
    """


class LuongDotAttention(Attention):
    """Luong's dot score: score(h_t, h_s) = h_t^T h_s (Luong et al. 2015, eq. 8).

    Parameter-free; needs the decoder hidden size to equal the memory size.
    """

    def __init__(self, query_size: int, memory_size: int) -> None:
        super().__init__()
        if query_size != memory_size:
            raise ConfigError(
                f"luong-dot scores h_t . h_s and needs decoder_hidden ({query_size}) == "
                f"2 x encoder_hidden ({memory_size}); change one of them or pick another attention"
            )

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(query, keys.transpose(1, 2))  # (B, T, S)


class LuongGeneralAttention(Attention):
    """Luong's general score: score(h_t, h_s) = h_t^T W_a h_s (Luong et al. 2015, eq. 8).

    W_a h_s is projected once per sentence, so each step is one batched matrix product.
    """

    def __init__(self, query_size: int, memory_size: int) -> None:
        super().__init__()
        self.key_layer = nn.Linear(memory_size, query_size, bias=False)

    def project_keys(self, memory: Tensor) -> Tensor:
        return self.key_layer(memory)  # (B, S, Q)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(query, keys.transpose(1, 2))  # (B, T, S)


_MECHANISMS = {
    "bahdanau": lambda query, memory, hidden: BahdanauAttention(query, memory, hidden),
    "luong-dot": lambda query, memory, hidden: LuongDotAttention(query, memory),
    "luong-general": lambda query, memory, hidden: LuongGeneralAttention(query, memory),
    "luong-concat": lambda query, memory, hidden: LuongConcatAttention(query, memory, hidden),
}
ATTENTION_NAMES = tuple(_MECHANISMS)


def build_attention(name: str, query_size: int, memory_size: int, hidden_size: int) -> Attention:
    """The one place where mechanism names are resolved; an unknown name lists the valid ones."""
    if name not in _MECHANISMS:
        raise ConfigError(f"unknown attention {name!r}; valid names: {', '.join(ATTENTION_NAMES)}")
    return _MECHANISMS[name](query_size, memory_size, hidden_size)


def is_luong(name: str) -> bool:
    """Whether ``name`` uses Luong's step order (GRU step first, then attend with the new state)."""
    return name.startswith("luong-")

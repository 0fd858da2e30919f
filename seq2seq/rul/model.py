"""Remaining-useful-life model: Conv1d over time -> BiLSTM -> temporal attention -> two heads.

Shapes (legend: seq2seq/__init__.py): B batch, W window (cycles), F features (sensors), C conv
channels, R LSTM hidden per direction, A attention hidden, Y health classes.

Windows are LEFT-padded: the last column is always the newest cycle and ``mask`` (B, W) bool is
True on real cycles. Padded cycles never influence a real cycle's result, so padding a window
further on the left changes no output:

* Conv1d: padded inputs are zeroed before the convolution, which makes them look exactly like the
  convolution's own zero "same" padding at the start of an unpadded window, and the feature maps
  are zeroed at padded cycles afterwards (ReLU of a bias is not 0).
* BiLSTM: real cycles are moved to the front of each row (a stable sort on the mask keeps their
  order), packed with ``pack_padded_sequence(..., enforce_sorted=False)`` so both directions see
  only real cycles, and moved back to their left-padded places.
* Attention: ``masked_softmax`` gives padded cycles exactly 0 weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.attention import masked_softmax
from seq2seq.config import RulConfig
from seq2seq.errors import ConfigError

HEALTH_CLASSES = 3  # Y: 0 healthy, 1 degrading, 2 critical (thresholds in RulConfig)


@dataclass(frozen=True)
class RulOutput:
    rul: Tensor  # (B,) predicted remaining life in cycles; clamped at >= 0 in eval mode
    health_logits: Tensor  # (B, Y) unnormalised health-class scores
    attention: Tensor  # (B, W) weights over cycles; each row sums to 1, 0 on padded cycles


class TemporalAttention(nn.Module):
    """Additive (Bahdanau-style) self-attention over time that pools a sequence into one vector.

        u_t = tanh(W h_t + b),   e_t = v^T u_t,   alpha = masked_softmax(e, mask),
        c = sum_t alpha_t h_t

    The additive score of Bahdanau, Cho and Bengio, "Neural Machine Translation by Jointly
    Learning to Align and Translate", ICLR 2015, with a learned context vector ``v`` in place of
    the decoder state, as in the attention pooling of Yang et al., "Hierarchical Attention
    Networks for Document Classification", NAACL 2016.
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.projection = nn.Linear(input_size, hidden_size)
        self.energy = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """states (B, W, D), mask (B, W) bool -> context (B, D), weights (B, W).

        Weights sum to 1 over each row and are exactly 0 where ``mask`` is False.
        """
        scores = self.energy(torch.tanh(self.projection(states))).squeeze(-1)  # (B, W)
        weights = masked_softmax(scores.float(), mask).to(states.dtype)
        context = torch.bmm(weights.unsqueeze(1), states).squeeze(1)  # (B, D)
        return context, weights


class RulModel(nn.Module):
    """Predicts remaining useful life (cycles) and a health class from a window of sensor cycles.

    The regression head predicts RUL / rul_cap, a target in [0, 1]; ``forward`` scales it back to
    cycles. The clamp at 0 is applied in eval mode only, so training gradients are never cut off.
    """

    def __init__(self, config: RulConfig, n_features: int) -> None:
        super().__init__()
        self.config = config
        self.n_features = n_features
        self.conv = nn.Conv1d(n_features, config.conv_channels, config.kernel_size,
                              padding=config.kernel_size // 2)
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(config.conv_channels, config.lstm_hidden, num_layers=config.lstm_layers,
                            batch_first=True, bidirectional=True,
                            dropout=config.dropout if config.lstm_layers > 1 else 0.0)
        self.attention = TemporalAttention(2 * config.lstm_hidden, config.attention_hidden)
        self.rul_head = nn.Linear(2 * config.lstm_hidden, 1)
        self.health_head = nn.Linear(2 * config.lstm_hidden, HEALTH_CLASSES)

    def forward(self, x: Tensor, mask: Tensor) -> RulOutput:
        """x (B, W, F) float, mask (B, W) bool (True = real cycle, at least one per row)."""
        features = self.extract(x, mask)  # (B, W, C)
        states = self.encode(features, mask)  # (B, W, 2R)
        context, weights = self.attention(states, mask)  # (B, 2R), (B, W)
        context = self.dropout(context)
        rul = self.rul_head(context).squeeze(-1) * self.config.rul_cap  # (B,)
        if not self.training:
            rul = rul.clamp(min=0.0)
        return RulOutput(rul=rul, health_logits=self.health_head(context), attention=weights)

    def extract(self, x: Tensor, mask: Tensor) -> Tensor:
        """Conv1d features per cycle, 0 at padded cycles. x (B, W, F) -> (B, W, C)."""
        keep = mask.unsqueeze(-1).to(x.dtype)  # (B, W, 1)
        features = self.conv((x * keep).transpose(1, 2)).transpose(1, 2)  # (B, W, C)
        return self.dropout(torch.relu(features)) * keep

    def encode(self, features: Tensor, mask: Tensor) -> Tensor:
        """BiLSTM over the real cycles of each row only. (B, W, C) -> (B, W, 2R), 0 at padded cycles."""
        B, W = features.shape[:2]
        lengths = mask.sum(dim=1)  # (B,)
        if bool((lengths == 0).any()):
            raise ValueError("every window needs at least one real cycle (a mask row is all False)")
        full = lengths == W  # (B,) rows without padding
        if not (self.training and features.device.type == "cpu" and bool(full.any())):
            return self._packed(features, mask, lengths)
        # Rows without padding need no packing, and a dense LSTM trains over twice as fast on a CPU (oneDNN
        # kernels; FD001 windows of 50 cycles, three quarters of them full: docs/recipes.md). The same
        # function, summed in another order. Evaluation keeps the packed path alone, so a saved model's
        # numbers stay exactly what they were; so does CUDA, where cuDNN takes packed batches in one call
        # (the dense path is not measured there).
        states = features.new_zeros(B, W, 2 * self.config.lstm_hidden)  # (B, W, 2R)
        states[full] = self.lstm(features[full])[0]
        if not bool(full.all()):
            states[~full] = self._packed(features[~full], mask[~full], lengths[~full])
        return states

    def _packed(self, features: Tensor, mask: Tensor, lengths: Tensor) -> Tensor:
        """The BiLSTM over each row's real cycles, packed. (B, W, C) -> (B, W, 2R), 0 at padded cycles."""
        W = features.shape[1]
        front = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)  # (B, W) real cycles first
        back = torch.argsort(front, dim=1)  # (B, W) the inverse permutation
        packed = pack_padded_sequence(self._gather(features, front), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        states, _ = self.lstm(packed)
        states, _ = pad_packed_sequence(states, batch_first=True, total_length=W)  # (B, W, 2R)
        return self._gather(states, back)

    @staticmethod
    def _gather(sequence: Tensor, order: Tensor) -> Tensor:
        """Reorder the time axis of each row: out[b, t] = sequence[b, order[b, t]]."""
        return sequence.gather(1, order.unsqueeze(-1).expand(-1, -1, sequence.shape[-1]))


class RulEnsemble(nn.Module):
    """Several RUL models of one recipe (seeds) as one: the mean of their RUL predictions, of their
    health-class probabilities (returned as log-probabilities, which softmax maps back to that mean) and of
    their attention weights (rows still sum to 1 and stay 0 on padded cycles, so alerts read it as one model's)."""

    def __init__(self, members: list[RulModel]) -> None:
        super().__init__()
        if not members:
            raise ConfigError("an ensemble needs at least one member")
        self.members = nn.ModuleList(members)
        self.config, self.n_features = members[0].config, members[0].n_features

    def forward(self, x: Tensor, mask: Tensor) -> RulOutput:
        outputs = [member(x, mask) for member in self.members]
        probabilities = torch.stack([torch.softmax(o.health_logits, dim=-1) for o in outputs]).mean(0)  # (B, Y)
        return RulOutput(rul=torch.stack([o.rul for o in outputs]).mean(0),  # (B,)
                         health_logits=probabilities.log(),
                         attention=torch.stack([o.attention for o in outputs]).mean(0))  # (B, W)


def build_rul_model(config: RulConfig, n_features: int) -> RulModel:
    """The one place a RulConfig becomes modules (its sizes are checked when it is made: config_checks.RANGES)."""
    if n_features < 1:
        raise ConfigError(f"n_features must be at least 1, got {n_features}")
    return RulModel(config, n_features)


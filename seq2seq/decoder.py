"""GRU decoders with cross-attention, in the step order of each attention family.

Shapes: B batch, S source length, T target length, E embedding, H decoder hidden, N layers,
M memory size, V target vocabulary.

Bahdanau family (Bahdanau et al. 2015), one step:
    c_t   = attend(query = s_{t-1}, memory)          previous top-layer state is the query
    s_t   = GRU([emb(y_{t-1}); c_t], s_{t-1})         the context is fed into the GRU input
    o_t   = tanh(W_o [s_t; c_t; emb(y_{t-1})])        deep output before the softmax
Luong family (Luong et al. 2015), one step:
    s_t   = GRU([emb(y_{t-1}); h~_{t-1}], s_{t-1})    input feeding (h~ omitted when switched off)
    c_t   = attend(query = s_t, memory)               the new top-layer state is the query
    h~_t  = tanh(W_c [c_t; s_t])                      the attentional vector, o_t = h~_t
Both: logits_t = W_out dropout(o_t).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seq2seq.attention import Attention
from seq2seq.tokenizer import PAD_ID


@dataclass(frozen=True)
class DecoderState:
    """What one step hands to the next: GRU states and (Luong input feeding) the last h~."""

    hidden: Tensor  # (N, B, H)
    attentional: Tensor | None  # (B, H) or None

    def select(self, index: Tensor) -> DecoderState:
        """Rows ``index`` of the batch (beam back-pointers, dropping finished sentences)."""
        attentional = None if self.attentional is None else self.attentional.index_select(0, index)
        return DecoderState(self.hidden.index_select(1, index), attentional)


@dataclass(frozen=True)
class Encoded:
    """The encoder's output for a batch, with the attention keys projected once per sentence."""

    memory: Tensor  # (B, S, M)
    keys: Tensor  # (B, S, *)
    mask: Tensor  # (B, S) bool, True = real token

    def select(self, index: Tensor) -> Encoded:
        """Rows ``index``; ``repeat_interleave``d indices tile a batch for beam search."""
        return Encoded(self.memory.index_select(0, index), self.keys.index_select(0, index),
                       self.mask.index_select(0, index))


class Decoder(nn.Module):
    """Shared parts: embedding, N-layer GRU, attention, output layer. Subclasses order the step."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, memory_size: int,
                 num_layers: int, dropout: float, attention: Attention, rnn_input_size: int,
                 readout_size: int, tie_embeddings: bool) -> None:
        super().__init__()
        self.attention = attention
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.GRU(rnn_input_size, hidden_size, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.readout = nn.Linear(readout_size, hidden_size)
        self.output = nn.Linear(hidden_size, vocab_size, bias=False)
        if tie_embeddings:
            self.output.weight = self.embed.weight

    def initial_state(self, hidden: Tensor) -> DecoderState:
        """The state before the first step, from the bridged encoder states (N, B, H)."""
        return DecoderState(hidden, None)

    def step_output(self, prev: Tensor, state: DecoderState, encoded: Encoded
                    ) -> tuple[Tensor, DecoderState, Tensor]:
        """One step without the output layer: prev (B,) -> o_t (B, H), state, weights (B, S)."""
        raise NotImplementedError

    def step(self, prev: Tensor, state: DecoderState, encoded: Encoded) -> tuple[Tensor, DecoderState, Tensor]:
        """One decoding step: prev (B,) ids -> logits (B, V), next state, weights (B, S)."""
        output, state, weights = self.step_output(prev, state, encoded)
        return self.output(self.dropout(output)), state, weights

    def forward(self, tgt_in: Tensor, state: DecoderState, encoded: Encoded, feed_mask: Tensor | None = None
                ) -> tuple[Tensor, Tensor]:
        """Teacher-forced decoding from ``state``: tgt_in (B, T) -> logits (B, T, V), weights (B, T, S).

        ``feed_mask`` (B, T) bool: where False, step t is fed the model's own previous argmax
        instead of ``tgt_in[:, t]`` (scheduled sampling; drawn by the training loop).
        """
        outputs, weights = [], []
        prev = tgt_in[:, 0]
        for t in range(tgt_in.size(1)):
            if t > 0:
                prev = tgt_in[:, t]
                if feed_mask is not None:
                    guess = self.output(outputs[-1]).argmax(-1)  # (B,)
                    prev = torch.where(feed_mask[:, t], prev, guess)
            output, state, step_weights = self.step_output(prev, state, encoded)
            outputs.append(output)
            weights.append(step_weights)
        output = torch.stack(outputs, dim=1)  # (B, T, H)
        return self.output(self.dropout(output)), torch.stack(weights, dim=1)  # (B, T, V), (B, T, S)


class BahdanauDecoder(Decoder):
    """Attend with the previous state, feed the context into the GRU (Bahdanau et al. 2015)."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, memory_size: int,
                 num_layers: int, dropout: float, attention: Attention, tie_embeddings: bool) -> None:
        super().__init__(vocab_size, embed_size, hidden_size, memory_size, num_layers, dropout, attention,
                         rnn_input_size=embed_size + memory_size,
                         readout_size=hidden_size + memory_size + embed_size, tie_embeddings=tie_embeddings)

    def step_output(self, prev: Tensor, state: DecoderState, encoded: Encoded
                    ) -> tuple[Tensor, DecoderState, Tensor]:
        embedded = self.dropout(self.embed(prev))  # (B, E)
        query = state.hidden[-1].unsqueeze(1)  # (B, 1, H)
        context, weights = self.attention(query, encoded.keys, encoded.memory, encoded.mask)  # (B, 1, M)
        context = context.squeeze(1)  # (B, M)
        rnn_input = torch.cat([embedded, context], dim=-1).unsqueeze(1)  # (B, 1, E + M)
        output, hidden = self.rnn(rnn_input, state.hidden)  # (B, 1, H)
        readout = torch.cat([output.squeeze(1), context, embedded], dim=-1)  # (B, H + M + E)
        return torch.tanh(self.readout(readout)), DecoderState(hidden, None), weights.squeeze(1)


class LuongDecoder(Decoder):
    """GRU step first, then attend with the new state (Luong et al. 2015), input feeding optional."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, memory_size: int,
                 num_layers: int, dropout: float, attention: Attention, tie_embeddings: bool,
                 input_feeding: bool) -> None:
        super().__init__(vocab_size, embed_size, hidden_size, memory_size, num_layers, dropout, attention,
                         rnn_input_size=embed_size + (hidden_size if input_feeding else 0),
                         readout_size=memory_size + hidden_size, tie_embeddings=tie_embeddings)
        self.input_feeding = input_feeding

    def initial_state(self, hidden: Tensor) -> DecoderState:
        if not self.input_feeding:
            return DecoderState(hidden, None)
        return DecoderState(hidden, hidden.new_zeros(hidden.size(1), hidden.size(2)))  # h~_0 = 0

    def attentional(self, output: Tensor, encoded: Encoded) -> tuple[Tensor, Tensor]:
        """output (B, T, H) GRU states -> h~ (B, T, H), weights (B, T, S)."""
        context, weights = self.attention(output, encoded.keys, encoded.memory, encoded.mask)  # (B, T, M)
        return torch.tanh(self.readout(torch.cat([context, output], dim=-1))), weights

    def step_output(self, prev: Tensor, state: DecoderState, encoded: Encoded
                    ) -> tuple[Tensor, DecoderState, Tensor]:
        embedded = self.dropout(self.embed(prev))  # (B, E)
        if self.input_feeding:
            embedded = torch.cat([embedded, state.attentional], dim=-1)  # (B, E + H)
        output, hidden = self.rnn(embedded.unsqueeze(1), state.hidden)  # (B, 1, H)
        attentional, weights = self.attentional(output, encoded)  # (B, 1, H), (B, 1, S)
        attentional = attentional.squeeze(1)  # (B, H)
        return attentional, DecoderState(hidden, attentional if self.input_feeding else None), weights.squeeze(1)

    def forward(self, tgt_in: Tensor, state: DecoderState, encoded: Encoded, feed_mask: Tensor | None = None
                ) -> tuple[Tensor, Tensor]:
        """Without input feeding, steps do not depend on each other's attention: one GRU call over
        the whole target and batched attention replace the step loop (same result)."""
        if self.input_feeding or feed_mask is not None:
            return super().forward(tgt_in, state, encoded, feed_mask)
        embedded = self.dropout(self.embed(tgt_in))  # (B, T, E)
        output, _ = self.rnn(embedded, state.hidden)  # (B, T, H)
        attentional, weights = self.attentional(output, encoded)  # (B, T, H), (B, T, S)
        return self.output(self.dropout(attentional)), weights  # (B, T, V)

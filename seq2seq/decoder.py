"""GRU decoders with cross-attention, in the step order of each attention family.

Shapes (legend: seq2seq/__init__.py): B batch, S source length, T target length, N real target
positions, E embedding, H decoder hidden, D layers, M memory size, V target vocabulary, X the
first layer's non-token input (context M for Bahdanau, h~ H for Luong input feeding).

Bahdanau family (Bahdanau et al. 2015), one step:
    c_t   = attend(query = s_{t-1}, memory)          previous top-layer state is the query
    s_t   = GRU([emb(y_{t-1}); c_t], s_{t-1})         the context is fed into the GRU input
    o_t   = tanh(W_o [s_t; c_t; emb(y_{t-1})])        deep output before the softmax
Luong family (Luong et al. 2015), one step:
    s_t   = GRU([emb(y_{t-1}); h~_{t-1}], s_{t-1})    input feeding (h~ omitted when switched off)
    c_t   = attend(query = s_t, memory)               the new top-layer state is the query
    h~_t  = tanh(W_c [c_t; s_t])                      the attentional vector, o_t = h~_t
Both: logits_t = W_out dropout(o_t).
With ``copy`` (a pointer-generator: See et al. 2017, gate as in OpenNMT-py's CopyGenerator), the
step's scores are instead the log-probabilities of a mixture that can copy source pieces:
    g_t   = sigmoid(w_g . o_t)                        the share of copying
    P_t   = (1 - g_t) softmax(logits_t) + g_t sum_{s: x_s = w} a_ts
so a part number that the output layer never learnt to write can still come out of the alert.
Log-probabilities are their own log-softmax, so search, loss and ensembles treat both kinds alike.

Each family's step order is written once, in its ``step_output``. The previous token y_{t-1}
enters a step only through a *token path*: ``rnn_step`` (the GRU stack, fed [token; x]) and, for
Bahdanau, ``deep_output``. The decoder is its own token path, on embedded tokens; the folded
decoder of ``seq2seq.fast.folding`` is another, on token ids, that looks the token's share of
those products up in precomputed tables. Both run the same ``step_output``. One shortcut stands beside it: Luong
without input feeding, trained teacher-forced, has steps that do not depend on each other's attention, so
``LuongDecoder.forward`` runs the GRU over the whole target at once and attends for all steps together; a test holds
it equal to the step loop (tests/test_model.py, ``test_teacher_forced_forward_equals_the_loop_over_steps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from seq2seq.attention import Attention
from seq2seq.fast.dropout import Dropout
from seq2seq.tokenizer import PAD_ID


@dataclass(frozen=True)
class DecoderState:
    """What one step hands to the next: GRU states and (Luong input feeding) the last h~."""

    hidden: Tensor  # (D, B, H)
    attentional: Tensor | None  # (B, H) or None

    def select(self, index: Tensor) -> DecoderState:
        """Rows ``index`` of the batch (beam back-pointers, dropping finished sentences)."""
        attentional = None if self.attentional is None else self.attentional.index_select(0, index)
        return DecoderState(self.hidden.index_select(1, index), attentional)

    def head(self, n: int) -> DecoderState:
        """The first ``n`` rows, as views (the sentences still running in a batch sorted by length)."""
        return DecoderState(self.hidden[:, :n], None if self.attentional is None else self.attentional[:n])


@dataclass(frozen=True)
class Encoded:
    """The encoder's output for a batch, with the attention keys projected once per sentence."""

    memory: Tensor  # (B, S, M)
    keys: Tensor  # (B, S, *)
    mask: Tensor  # (B, S) bool, True = real token
    src: Tensor | None = None  # (B, S) source ids, kept for a copying decoder only

    def select(self, index: Tensor) -> Encoded:
        """Rows ``index``; ``repeat_interleave``d indices tile a batch for beam search."""
        return Encoded(self.memory.index_select(0, index), self.keys.index_select(0, index),
                       self.mask.index_select(0, index), None if self.src is None else self.src.index_select(0, index))

    def head(self, n: int) -> Encoded:
        """The first ``n`` rows, as views."""
        return Encoded(self.memory[:n], self.keys[:n], self.mask[:n], None if self.src is None else self.src[:n])


def pack_target(tgt_in: Tensor, tgt_mask: Tensor | None) -> tuple[PackedSequence, Tensor]:
    """tgt_in (B, T) -> its PackedSequence (longest first; ``batch_sizes[t]`` sentences still
    running at step t) and the mask (B, T), all True when ``tgt_mask`` is None."""
    if tgt_mask is None:
        tgt_mask = torch.ones_like(tgt_in, dtype=torch.bool)
    return pack_padded_sequence(tgt_in, tgt_mask.sum(1).cpu(), batch_first=True, enforce_sorted=False), tgt_mask


def unpack_steps(steps: list[Tensor], packed: PackedSequence, total_length: int) -> Tensor:
    """Per-step rows (n_t, *) of a loop over ``packed`` -> (B, T, *) in the batch's order, 0 at padding."""
    padded, _ = pad_packed_sequence(packed._replace(data=torch.cat(steps)), batch_first=True,
                                    total_length=total_length)
    return padded


class TokenPath(Protocol):
    """How the previous token enters a step: on embedded tokens (``Decoder``) or on ids (folded)."""

    def rnn_step(self, token: Tensor, feed: Tensor | None, hidden: Tensor) -> tuple[Tensor, Tensor]:
        """The GRU stack over [token; feed]: feed (B, X) or None, states (D, B, H) -> top output (B, H),
        new states (D, B, H)."""

    def deep_output(self, token: Tensor, top: Tensor, context: Tensor) -> Tensor:
        """Bahdanau's o_t = tanh(W_o [s_t; c_t; emb(y_{t-1})]): top (B, H), context (B, M) -> (B, H)."""


class Decoder(nn.Module):
    """Shared parts: embedding, D-layer GRU, attention, output layer. Subclasses order the step."""

    token_in_readout = False  # whether ``readout`` reads the embedded previous token (Bahdanau's deep output)

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, num_layers: int, dropout: float,
                 attention: Attention, rnn_input_size: int, readout_size: int, tie_embeddings: bool,
                 copy: bool) -> None:
        """``rnn_input_size`` and ``readout_size``: what the subclass's step order feeds the GRU and the readout."""
        super().__init__()
        self.attention = attention
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=PAD_ID)
        self.dropout = Dropout(dropout)
        self.rnn = nn.GRU(rnn_input_size, hidden_size, num_layers, batch_first=True,
                          dropout=dropout if num_layers > 1 else 0.0)
        self.readout = nn.Linear(readout_size, hidden_size)
        self.output = nn.Linear(hidden_size, vocab_size, bias=False)
        if tie_embeddings:
            self.output.weight = self.embed.weight
        self.copy_gate = nn.Linear(hidden_size, 1) if copy else None

    def initial_state(self, hidden: Tensor) -> DecoderState:
        """The state before the first step, from the bridged encoder states (D, B, H)."""
        return DecoderState(hidden, None)

    def step_output(self, token: Tensor, state: DecoderState, encoded: Encoded, path: TokenPath
                    ) -> tuple[Tensor, DecoderState, Tensor]:
        """One step without the output layer: y_{t-1} as ``path`` takes it -> o_t (B, H), state, weights (B, S)."""
        raise NotImplementedError

    def step(self, prev: Tensor, state: DecoderState, encoded: Encoded) -> tuple[Tensor, DecoderState, Tensor]:
        """One decoding step: prev (B,) ids -> logits (B, V), next state, weights (B, S)."""
        output, state, weights = self.step_output(self.dropout(self.embed(prev)), state, encoded, self)
        return self.scores(output, weights, encoded.src), state, weights

    def rnn_step(self, token: Tensor, feed: Tensor | None, hidden: Tensor) -> tuple[Tensor, Tensor]:
        """The token path on embedded tokens (B, E): see ``TokenPath``."""
        rnn_input = token if feed is None else torch.cat([token, feed], dim=-1)  # (B, E + X)
        # cuDNN takes only a contiguous hx, and ``DecoderState.head``'s view of D > 1 layers is not one
        # (the CPU accepts it: a two-layer model failed only on its first CUDA run).
        output, hidden = self.rnn(rnn_input.unsqueeze(1), hidden.contiguous())  # (B, 1, H), (D, B, H)
        return output.squeeze(1), hidden

    def deep_output(self, token: Tensor, top: Tensor, context: Tensor) -> Tensor:
        return torch.tanh(self.readout(torch.cat([top, context, token], dim=-1)))  # (B, H)

    def logits(self, output: Tensor) -> Tensor:
        """o_t (..., H) -> logits (..., V)."""
        return self.output(self.dropout(output))

    def scores(self, output: Tensor, weights: Tensor, src: Tensor | None) -> Tensor:
        """What a step predicts: o_t (n, H), its attention (n, S) over source ids src (n, S) -> logits
        (n, V), or with ``copy`` the log-probabilities of the mixture (module docstring)."""
        return self.mixture(self.logits(output), output, weights, src)

    def mixture(self, logits: Tensor, output: Tensor, weights: Tensor, src: Tensor | None) -> Tensor:
        """``logits`` (n, V) of o_t (n, H), or with ``copy`` the log-probabilities of their mixture with the
        attention (n, S) over src (n, S)."""
        if self.copy_gate is None:
            return logits
        share = torch.sigmoid(self.copy_gate(output).float())  # (n, 1)
        probs = torch.softmax(logits.float(), dim=-1) * (1.0 - share)  # (n, V)
        probs = probs.scatter_add(1, src, weights.float() * share)  # padding has weight 0
        return probs.clamp_min(torch.finfo(probs.dtype).tiny).log()

    def forward(self, tgt_in: Tensor, state: DecoderState, encoded: Encoded, tgt_mask: Tensor | None = None,
                feed_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Teacher-forced decoding from ``state``: tgt_in (B, T) -> o_t (N, H) at the N real positions
        of ``tgt_mask`` (row-major; every position when None), weights (B, T, S), 0 at padding.

        The step loop runs like a packed GRU: sentences sorted longest first, step t over the
        ones still running, so padding costs nothing. ``feed_mask`` (B, T) bool: where False,
        step t is fed the model's own previous argmax instead of ``tgt_in[:, t]`` (scheduled
        sampling; drawn by the training loop).
        """
        packed, tgt_mask = pack_target(tgt_in, tgt_mask)
        order = packed.sorted_indices
        embedded = self.dropout(self.embed(tgt_in.index_select(0, order)))  # (B, T, E), longest first
        state, encoded = state.select(order), encoded.select(order)
        feed = None if feed_mask is None else feed_mask.index_select(0, order)
        outputs, weights = [], []
        for t, n in enumerate(packed.batch_sizes.tolist()):
            state, encoded, step_input = state.head(n), encoded.head(n), embedded[:n, t]  # (n, E)
            if feed is not None and t > 0:
                # what the step before predicts, dropout aside: with copy the mixture's choice, not the generator's
                guess = self.mixture(self.output(outputs[-1][:n]), outputs[-1][:n], weights[-1][:n],
                                     encoded.src).argmax(-1)  # (n,)
                step_input = torch.where(feed[:n, t, None], step_input, self.dropout(self.embed(guess)))
            output, state, step_weights = self.step_output(step_input, state, encoded, self)
            outputs.append(output)
            weights.append(step_weights)
        total = tgt_in.size(1)
        return unpack_steps(outputs, packed, total)[tgt_mask], unpack_steps(weights, packed, total)


class BahdanauDecoder(Decoder):
    """Attend with the previous state, feed the context into the GRU (Bahdanau et al. 2015)."""

    token_in_readout = True

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, memory_size: int,
                 num_layers: int, dropout: float, attention: Attention, tie_embeddings: bool, copy: bool) -> None:
        super().__init__(vocab_size, embed_size, hidden_size, num_layers, dropout, attention,
                         rnn_input_size=embed_size + memory_size,
                         readout_size=hidden_size + memory_size + embed_size, tie_embeddings=tie_embeddings,
                         copy=copy)

    def step_output(self, token: Tensor, state: DecoderState, encoded: Encoded, path: TokenPath
                    ) -> tuple[Tensor, DecoderState, Tensor]:
        query = state.hidden[-1].unsqueeze(1)  # (B, 1, H)
        context, weights = self.attention(query, encoded.keys, encoded.memory, encoded.mask)  # (B, 1, M)
        context = context.squeeze(1)  # (B, M)
        top, hidden = path.rnn_step(token, context, state.hidden)
        return path.deep_output(token, top, context), DecoderState(hidden, None), weights.squeeze(1)


class LuongDecoder(Decoder):
    """GRU step first, then attend with the new state (Luong et al. 2015), input feeding optional."""

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, memory_size: int,
                 num_layers: int, dropout: float, attention: Attention, tie_embeddings: bool, copy: bool,
                 input_feeding: bool) -> None:
        super().__init__(vocab_size, embed_size, hidden_size, num_layers, dropout, attention,
                         rnn_input_size=embed_size + (hidden_size if input_feeding else 0),
                         readout_size=memory_size + hidden_size, tie_embeddings=tie_embeddings, copy=copy)
        self.input_feeding = input_feeding

    def initial_state(self, hidden: Tensor) -> DecoderState:
        if not self.input_feeding:
            return DecoderState(hidden, None)
        return DecoderState(hidden, hidden.new_zeros(hidden.size(1), hidden.size(2)))  # h~_0 = 0

    def attentional(self, context: Tensor, output: Tensor) -> Tensor:
        """h~ = tanh(W_c [c_t; s_t]): context (..., M), GRU state (..., H) -> (..., H)."""
        return torch.tanh(self.readout(torch.cat([context, output], dim=-1)))

    def step_output(self, token: Tensor, state: DecoderState, encoded: Encoded, path: TokenPath
                    ) -> tuple[Tensor, DecoderState, Tensor]:
        top, hidden = path.rnn_step(token, state.attentional, state.hidden)  # h~ is None without input feeding
        query = top.unsqueeze(1)  # (B, 1, H)
        context, weights = self.attention(query, encoded.keys, encoded.memory, encoded.mask)  # (B, 1, M)
        attentional = self.attentional(context.squeeze(1), top)  # (B, H)
        return attentional, DecoderState(hidden, attentional if self.input_feeding else None), weights.squeeze(1)

    def forward(self, tgt_in: Tensor, state: DecoderState, encoded: Encoded, tgt_mask: Tensor | None = None,
                feed_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Without input feeding, steps do not depend on each other's attention: one packed GRU call
        over the whole target and batched attention replace the step loop (same result)."""
        if self.input_feeding or feed_mask is not None:
            return super().forward(tgt_in, state, encoded, tgt_mask, feed_mask)
        packed, tgt_mask = pack_target(tgt_in, tgt_mask)
        embedded = self.dropout(self.embed(packed.data))  # (N, E), packed
        output, _ = self.rnn(packed._replace(data=embedded), state.hidden)
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=tgt_in.size(1))  # (B, T, H)
        context, weights = self.attention(output, encoded.keys, encoded.memory, encoded.mask)  # (B, T, M)
        weights = weights.masked_fill(~tgt_mask.unsqueeze(-1), 0.0)  # (B, T, S)
        return self.attentional(context[tgt_mask], output[tgt_mask]), weights  # (N, H)

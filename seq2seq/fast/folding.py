"""Embeddings folded into per-token tables, for decoding.

While decoding, the previous token y enters a step only through linear maps of its embedding:
the first GRU layer's input gates W_ih [emb(y); x] + b_ih, and for Bahdanau the deep output
W_o [s; c; emb(y)] + b_o. That share, W emb(y) + b, is one fixed row per vocabulary entry, so
``fold_embeddings`` computes it once per model (tables V x 3H, and V x H for the deep output) and a
step looks rows up instead of multiplying. The first encoder layer's input gates W_ih emb(x) + b_ih
are looked up the same way per source token (``FoldedEncoder``). The FLOPs this saves are in
docs/benchmarks.md.

``FoldedDecoder`` is a *token path* of the decoder (``seq2seq.decoder.TokenPath``): the decoder's
own ``step_output`` runs with it, so the step order of each attention family stays written once.
The GRU cells are written out (torch.nn.GRU's equations) so that they can start from looked-up
input gates. Same functions as ``Decoder.step`` and ``Encoder.forward`` up to float rounding
(tests/test_folding.py). For decoding only: the tables are frozen at the weights of the moment and
dropout is off, so wherever gradients are recorded the original modules run instead.

Shapes (legend: seq2seq/__init__.py): B batch, S source length, E embedding, H decoder hidden,
R encoder hidden per direction, M memory, V target vocabulary, D layers, X the first layer's
non-token input.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence


def gru_cell(input_gates: Tensor, hidden: Tensor, weight_hh_t: Tensor, bias_hh: Tensor) -> Tensor:
    """One GRU step (torch.nn.GRU's equations) from the input gates W_ih x + b_ih (B, 3H) and the
    state h (B, H), with the recurrent weight transposed (H, 3H): r, z gates, candidate n, new h."""
    i_r, i_z, i_n = input_gates.chunk(3, dim=1)
    h_r, h_z, h_n = torch.addmm(bias_hh, hidden, weight_hh_t).chunk(3, dim=1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (hidden - n)  # (1 - z) n + z h


def register_table(module: nn.Module, name: str, tensor: Tensor) -> None:
    """A tensor derived from the weights, contiguous; not saved (checkpoints hold the weights themselves)."""
    module.register_buffer(name, tensor.contiguous(), persistent=False)


class FoldedDecoder(nn.Module):
    """A trained decoder whose token path looks up the token's share of its products (see module)."""

    def __init__(self, decoder: nn.Module) -> None:
        super().__init__()
        self.decoder = decoder
        rnn, embed = decoder.rnn, decoder.embed.weight  # (V, E)
        E = embed.size(1)
        with torch.no_grad():
            w_ih = rnn.weight_ih_l0  # (3H, E + X)
            register_table(self, "token_gates", F.linear(embed, w_ih[:, :E], rnn.bias_ih_l0))  # (V, 3H)
            register_table(self, "feed_weight", w_ih[:, E:].t())  # (X, 3H)
            for layer in range(rnn.num_layers):
                register_table(self, f"weight_hh_t{layer}", getattr(rnn, f"weight_hh_l{layer}").t())  # (H, 3H)
            if decoder.token_in_readout:  # deep output W_o [s; c; emb(y)] + b_o
                w_o = decoder.readout.weight  # (H, H + M + E)
                register_table(self, "token_readout", F.linear(embed, w_o[:, -E:], decoder.readout.bias))  # (V, H)
                register_table(self, "state_readout", w_o[:, :-E].t())  # (H + M, H)

    @property
    def attention(self) -> nn.Module:
        return self.decoder.attention

    def initial_state(self, hidden: Tensor):
        return self.decoder.initial_state(hidden)

    def logits(self, output: Tensor) -> Tensor:
        return self.decoder.logits(output)

    def forward(self, *args):
        """Teacher-forced decoding is the decoder's own (training)."""
        return self.decoder(*args)

    def rnn_step(self, prev: Tensor, feed: Tensor | None, hidden: Tensor) -> tuple[Tensor, Tensor]:
        """The token path on ids: prev (B,), feed (B, X) or None, states (D, B, H) -> top (B, H), states (D, B, H)."""
        rnn = self.decoder.rnn
        gates = self.token_gates.index_select(0, prev)  # (B, 3H)
        if feed is not None:
            gates = torch.addmm(gates, feed, self.feed_weight)
        states = []
        for layer in range(rnn.num_layers):
            if layer > 0:  # inter-layer dropout is off at inference
                gates = F.linear(states[-1], getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"bias_ih_l{layer}"))
            states.append(gru_cell(gates, hidden[layer], getattr(self, f"weight_hh_t{layer}"),
                                   getattr(rnn, f"bias_hh_l{layer}")))
        hidden = torch.stack(states)  # (D, B, H)
        return hidden[-1], hidden

    def deep_output(self, prev: Tensor, top: Tensor, context: Tensor) -> Tensor:
        """Bahdanau's deep output with the token's share looked up: prev (B,) -> (B, H)."""
        state = torch.cat([top, context], dim=-1)  # (B, H + M)
        return torch.tanh(torch.addmm(self.token_readout.index_select(0, prev), state, self.state_readout))

    def step(self, prev: Tensor, state, encoded) -> tuple[Tensor, object, Tensor]:
        """As ``Decoder.step``: prev (B,) ids -> logits (B, V), next state, weights (B, S)."""
        decoder = self.decoder
        if torch.is_grad_enabled():
            return decoder.step(prev, state, encoded)
        output, state, weights = decoder.step_output(prev, state, encoded, self)
        return decoder.scores(output, weights, encoded.src), state, weights


class FoldedEncoder(nn.Module):
    """A trained bidirectional encoder whose first layer looks up W_ih emb(x) + b_ih per source token.

    The packed GRU is written out: sentences sorted longest first, step t over the ones still
    running (forwards from the first token, backwards from each sentence's last), so padding is
    never computed and each sentence's result does not depend on the batch around it.
    """

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        rnn = encoder.rnn
        with torch.no_grad():
            for direction in ("", "_reverse"):  # one table (V, 3R) per direction
                weight, bias = getattr(rnn, f"weight_ih_l0{direction}"), getattr(rnn, f"bias_ih_l0{direction}")
                register_table(self, f"token_gates{direction}", F.linear(encoder.embed.weight, weight, bias))

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """As ``Encoder.forward``: src (B, S), lengths (B,) -> memory (B, S, M) zero at padding, final (D, B, M)."""
        if torch.is_grad_enabled() or src.size(0) == 1:  # one sentence: the written-out loop's Python
            return self.encoder(src, lengths)  # overhead outweighs the saved products
        rnn, (B, S) = self.encoder.rnn, src.shape
        packed = pack_padded_sequence(src, lengths.cpu(), batch_first=True, enforce_sorted=False)
        batch_sizes = packed.batch_sizes.tolist()  # sentences running at each step, longest first
        T = len(batch_sizes)  # the longest sentence; steps beyond it are padding everywhere
        src = src.index_select(0, packed.sorted_indices)
        layer_input, finals = None, []
        for layer in range(rnn.num_layers):
            outputs = []
            for direction, steps in (("", range(T)), ("_reverse", reversed(range(T)))):
                if layer == 0:
                    gates = getattr(self, f"token_gates{direction}")[src]  # (B, S, 3R)
                else:  # inter-layer dropout is off at inference
                    gates = F.linear(layer_input, getattr(rnn, f"weight_ih_l{layer}{direction}"),
                                     getattr(rnn, f"bias_ih_l{layer}{direction}"))
                weight_hh_t = getattr(rnn, f"weight_hh_l{layer}{direction}").t()
                bias_hh = getattr(rnn, f"bias_hh_l{layer}{direction}")
                hidden = gates.new_zeros(B, rnn.hidden_size)  # rows keep their last state once finished
                output = gates.new_zeros(B, S, rnn.hidden_size)
                for t in steps:
                    n = batch_sizes[t]
                    hidden[:n] = gru_cell(gates[:n, t], hidden[:n], weight_hh_t, bias_hh)
                    output[:n, t] = hidden[:n]
                outputs.append(output)
                finals.append(hidden)
            layer_input = torch.cat(outputs, dim=-1)  # (B, S, M)
        restore = packed.unsorted_indices
        final = torch.stack(finals).view(rnn.num_layers, 2, B, rnn.hidden_size).transpose(1, 2)  # (D, B, 2, R)
        return layer_input.index_select(0, restore), final.reshape(rnn.num_layers, B, -1).index_select(1, restore)


def fold_embeddings(model: nn.Module) -> nn.Module:
    """A model for decoding, of ``model``'s own class, that shares its modules, with the encoder and the
    decoder's token path folded (see module). Models whose GRUs are not float ``torch.nn.GRU``
    (int8, seq2seq/fast/quantize.py) are returned as they are.
    """
    if hasattr(model, "members"):  # an ensemble (seq2seq/ensemble.py): each member folded
        return type(model)([fold_embeddings(member) for member in model.members]).eval()
    rnns = (model.encoder.rnn, model.decoder.rnn)
    if any(type(rnn) is not nn.GRU or not rnn.weight_ih_l0.is_floating_point() for rnn in rnns):
        return model
    folded = type(model)(model.config, FoldedEncoder(model.encoder), model.bridge, FoldedDecoder(model.decoder))
    return folded.eval()

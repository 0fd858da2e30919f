"""The encoder-decoder: embedding -> bidirectional GRU encoder -> bridge -> attentional GRU decoder.

Shapes (legend: seq2seq/__init__.py): B batch, S source length, T target length, N real target
positions, D layers, M memory size (2 x encoder hidden), H decoder hidden, V target vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seq2seq.attention import build_attention, is_luong
from seq2seq.config import ModelConfig
from seq2seq.decoder import BahdanauDecoder, Decoder, DecoderState, Encoded, LuongDecoder
from seq2seq.encoder import Encoder
from seq2seq.errors import ConfigError


class Bridge(nn.Module):
    """Initial decoder states from the encoder's final states: s_0^l = tanh(W [h_fwd^l; h_bwd^l])."""

    def __init__(self, memory_size: int, hidden_size: int) -> None:
        super().__init__()
        self.layer = nn.Linear(memory_size, hidden_size)

    def forward(self, final: Tensor) -> Tensor:
        """final (D, B, M) -> (D, B, H)."""
        return torch.tanh(self.layer(final))


class Seq2Seq(nn.Module):
    """``encode`` once per source batch; ``forward`` decodes teacher-forced; ``step`` one token."""

    def __init__(self, config: ModelConfig, encoder: Encoder, bridge: Bridge, decoder: Decoder) -> None:
        super().__init__()
        self.config = config
        self.encoder = encoder
        self.bridge = bridge
        self.decoder = decoder

    def encode(self, src: Tensor, src_lengths: Tensor, src_mask: Tensor) -> tuple[Encoded, DecoderState]:
        """src (B, S) -> the encoded batch (keys projected once) and the decoder's initial state."""
        memory, final = self.encoder(src, src_lengths)  # (B, S, M), (D, B, M)
        encoded = Encoded(memory, self.decoder.attention.project_keys(memory), src_mask,
                          src if self.config.copy else None)
        return encoded, self.decoder.initial_state(self.bridge(final))

    def forward(self, src: Tensor, src_lengths: Tensor, src_mask: Tensor, tgt_in: Tensor,
                tgt_mask: Tensor | None = None, feed_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Teacher-forced: tgt_in (B, T) -> logits (N, V) at the N real positions of ``tgt_mask``
        (row-major, so ``tgt_out[tgt_mask]`` are their targets; all B x T positions when None) and
        attention weights (B, T, S), 0 at padding. Padding positions are never computed. With
        ``copy`` the scores are log-probabilities (``Decoder.scores``)."""
        encoded, state = self.encode(src, src_lengths, src_mask)
        outputs, weights = self.decoder(tgt_in, state, encoded, tgt_mask, feed_mask)  # (N, H), (B, T, S)
        if encoded.src is None:
            return self.decoder.logits(outputs), weights
        real = torch.ones_like(tgt_in, dtype=torch.bool) if tgt_mask is None else tgt_mask  # (B, T)
        src_per_step = encoded.src.unsqueeze(1).expand(-1, tgt_in.size(1), -1)  # (B, T, S)
        return self.decoder.scores(outputs, weights[real], src_per_step[real]), weights

    def step(self, prev: Tensor, state: DecoderState, encoded: Encoded) -> tuple[Tensor, DecoderState, Tensor]:
        """prev (B,) -> logits (B, V), next state, weights (B, S): ``Decoder.step``."""
        return self.decoder.step(prev, state, encoded)


def build_model(config: ModelConfig) -> Seq2Seq:
    """Translate a ModelConfig into modules; inconsistent settings raise ConfigError."""
    if config.src_vocab_size <= 0 or config.tgt_vocab_size <= 0:
        raise ConfigError("model: src_vocab_size and tgt_vocab_size must be set (from the tokenizer)")
    if config.tie_embeddings and config.embed_size != config.decoder_hidden:
        raise ConfigError(f"model: tie_embeddings needs embed_size ({config.embed_size}) == "
                          f"decoder_hidden ({config.decoder_hidden})")
    encoder = Encoder(config.src_vocab_size, config.embed_size, config.encoder_hidden, config.num_layers,
                      config.dropout)
    memory = encoder.memory_size
    attention = build_attention(config.attention, config.decoder_hidden, memory, config.attention_hidden)
    shared = dict(vocab_size=config.tgt_vocab_size, embed_size=config.embed_size,
                  hidden_size=config.decoder_hidden, memory_size=memory, num_layers=config.num_layers,
                  dropout=config.dropout, attention=attention, tie_embeddings=config.tie_embeddings,
                  copy=config.copy)
    if is_luong(config.attention):
        decoder: Decoder = LuongDecoder(**shared, input_feeding=config.input_feeding)
    else:
        decoder = BahdanauDecoder(**shared)
    return Seq2Seq(config, encoder, Bridge(memory, config.decoder_hidden), decoder)

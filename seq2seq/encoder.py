"""Bidirectional GRU encoder over packed sequences.

Shapes (legend: seq2seq/__init__.py): B batch, S source length, E embedding, D layers, R hidden per
direction, M = 2R memory size.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.fast.dropout import Dropout
from seq2seq.tokenizer import PAD_ID


class Encoder(nn.Module):
    """Embedding -> dropout -> N-layer bidirectional GRU.

    Padding never reaches the GRU (``pack_padded_sequence``), so the memory of a sentence and its
    final states do not depend on how much the batch around it is padded.
    """

    def __init__(self, vocab_size: int, embed_size: int, hidden_size: int, num_layers: int,
                 dropout: float) -> None:
        super().__init__()
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=PAD_ID)
        self.dropout = Dropout(dropout)
        self.rnn = nn.GRU(embed_size, hidden_size, num_layers, batch_first=True, bidirectional=True,
                          dropout=dropout if num_layers > 1 else 0.0)

    @property
    def memory_size(self) -> int:
        return 2 * self.hidden_size

    def forward(self, src: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S) ids, lengths (B,) -> memory (B, S, M) zero at padding, final (D, B, M).

        ``final[l]`` is layer l's last forward state and first backward state, concatenated.
        """
        B, S = src.shape
        embedded = self.dropout(self.embed(src))  # (B, S, E)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, final = self.rnn(packed)  # final (2D, B, R)
        memory, _ = pad_packed_sequence(outputs, batch_first=True, total_length=S)  # (B, S, M)
        final = final.view(self.num_layers, 2, B, self.hidden_size).transpose(1, 2)  # (D, B, 2, R)
        return memory, final.reshape(self.num_layers, B, self.memory_size)  # (D, B, M)

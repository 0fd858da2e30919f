"""Words from SentencePiece pieces, and attention between words rather than pieces.

Technicians read words ("remove engine"), not pieces ("▁rem", "ove", "▁eng", "ine"). A piece that
starts with SentencePiece's word marker begins a word; the pieces after it, up to the next marker,
belong to it; "</s>" is a word of its own. Between words the attention of a recommendation word to
an alert word is the attention summed over the alert word's pieces (it is the share of the
recommendation piece's attention that went to that word) and averaged over the recommendation
word's pieces (each piece's row sums to 1, so the word's row does too).
"""

from __future__ import annotations

import numpy as np

from seq2seq.tokenizer import EOS_PIECE, WORD_START, normalize


def word_spans(pieces: list[str]) -> list[tuple[str, int, int]]:
    """``(word, start, end)`` for each word, ``pieces[start:end]`` its pieces; together they cover ``pieces``."""
    spans: list[tuple[str, int, int]] = []
    for i, piece in enumerate(pieces):
        starts = i == 0 or piece.startswith(WORD_START) or piece == EOS_PIECE or pieces[i - 1] == EOS_PIECE
        if starts:
            spans.append(("", i, i))
        word, start, _ = spans[-1]
        spans[-1] = (word + (piece if piece == EOS_PIECE else piece.replace(WORD_START, "")), start, i + 1)
    return [(word or "\u2423", start, end) for word, start, end in spans]  # a lone marker reads as a space


def as_typed(alert: str, words: list[str]) -> list[str]:
    """An alert's ``words`` (from its pieces, in the case the model reads: "cyl", "#3") as the technician typed them
    ("CYL", "#3"), each where it is the typed word case aside; "</s>" and any other word stay as they are."""
    typed = normalize(alert).split()
    return [typed[i] if i < len(typed) and typed[i].casefold() == word.casefold() else word
            for i, word in enumerate(words)]


def word_attention(source_pieces: list[str], target_pieces: list[str], attention: np.ndarray,
                   alert: str | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """Alert words, recommendation words and their (target words x source words) attention; with ``alert``, its
    words as typed (``as_typed``)."""
    weights = np.asarray(attention, dtype=np.float64)  # (T, S)
    source, target = word_spans(source_pieces), word_spans(target_pieces)
    if weights.shape != (len(target_pieces), len(source_pieces)):
        raise ValueError(f"attention of shape {weights.shape} does not match {len(target_pieces)} target and "
                         f"{len(source_pieces)} source pieces")
    columns = np.stack([weights[:, start:end].sum(axis=1) for _, start, end in source], axis=1) if source \
        else np.zeros((len(target_pieces), 0))  # (T, Sw)
    rows = [columns[start:end].mean(axis=0) for _, start, end in target]
    matrix = np.stack(rows) if rows else np.zeros((0, len(source)))  # (Tw, Sw)
    source_words = [w for w, _, _ in source]
    return as_typed(alert, source_words) if alert else source_words, [w for w, _, _ in target], matrix

"""Word-level attention: pieces merge exactly at word boundaries and every row still sums to 1."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.tokenizer import EOS_PIECE, WORD_START
from seq2seq.words import as_typed, word_attention, word_spans

piece = st.tuples(st.booleans(), st.text("abcxyz#3/", min_size=1, max_size=3)).map(
    lambda p: (WORD_START if p[0] else "") + p[1])
pieces = st.lists(piece, min_size=1, max_size=12).map(lambda ps: [WORD_START + ps[0].lstrip(WORD_START), *ps[1:]])


def test_spans_join_the_pieces_of_each_word():
    assert word_spans(["\u2581rem", "ove", "\u2581eng", "ine", EOS_PIECE]) == [
        ("remove", 0, 2), ("engine", 2, 4), (EOS_PIECE, 4, 5)]
    assert word_spans(["\u2581", "#3", "\u2581cyl"]) == [("#3", 0, 2), ("cyl", 2, 3)]


@given(pieces, pieces, st.integers(0, 2**32 - 1))
@settings(max_examples=100, deadline=None)
def test_word_rows_sum_to_one_and_columns_merge_at_word_starts(source, target, seed):
    source, target = [*source, EOS_PIECE], [*target, EOS_PIECE]
    rng = np.random.default_rng(seed)
    attention = rng.dirichlet(np.ones(len(source)), size=len(target))  # (T, S), rows sum to 1
    source_words, target_words, matrix = word_attention(source, target, attention)
    assert matrix.shape == (len(target_words), len(source_words))
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0)
    starts = [i for i, p in enumerate(source) if i == 0 or p.startswith(WORD_START) or p == EOS_PIECE]
    assert len(source_words) == len(starts)
    bounds = [*starts, len(source)]
    for w, (start, end) in enumerate(itertools.pairwise(bounds)):  # column w = its pieces' sum
        np.testing.assert_allclose(matrix[-1, w], attention[-1, start:end].sum())
    assert "".join(source_words[:-1]) == "".join(p.replace(WORD_START, "") for p in source[:-1])


def test_a_mismatched_matrix_is_refused():
    with pytest.raises(ValueError, match="does not match"):
        word_attention(["\u2581a", EOS_PIECE], ["\u2581b"], np.ones((2, 2)))


def test_an_alert_s_words_are_shown_as_typed_where_they_are_the_typed_word_case_aside():
    """A model that reads lower case showed 'cyl', 'aft' for 'CYL', 'AFT'."""
    words = ["cyl", "#3", "aft", "baffle", EOS_PIECE]
    assert as_typed("CYL  #3 Aft BAFFLE", words) == ["CYL", "#3", "Aft", "BAFFLE", EOS_PIECE]
    assert as_typed("CYL #3 AFT", ["cyl", "#3", "af"]) == ["CYL", "#3", "af"]  # a word cut by truncation stays
    assert as_typed("ＣＹＬ oil", ["cyl", "oil"]) == ["CYL", "oil"]  # full-width letters read as NFKC does
    assert as_typed("pump low", ["pump", "\u2047", "low"]) == ["pump", "\u2047", "low"]  # out of step: kept as read


def test_word_attention_with_the_alert_gives_its_typed_words_and_the_same_matrix():
    source = [f"{WORD_START}cy", "l", f"{WORD_START}leak", EOS_PIECE]
    target = [f"{WORD_START}fix", EOS_PIECE]
    attention = np.full((2, 4), 0.25)
    plain, _, matrix = word_attention(source, target, attention)
    typed, _, same = word_attention(source, target, attention, "CYL Leak")
    assert (plain, typed) == (["cyl", "leak", EOS_PIECE], ["CYL", "Leak", EOS_PIECE])
    np.testing.assert_array_equal(matrix, same)

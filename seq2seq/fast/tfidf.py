"""A fitted TfidfVectorizer's ``transform``, written out: texts as rows of arrays (``TfidfVectors.rows``).

scikit-learn's and scipy's per-call checks cost several times the arithmetic for one short alert. The rows
are weighed by a loop compiled by numba (``weighed``), for one text and thousands alike, without Python's
lock; ``tests/test_trust.py`` holds them equal to ``transform``, and to plain loops over each text to the
last bit.
"""

from __future__ import annotations

import math
from itertools import chain

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfVectorizer

from seq2seq.fast.compiled import compiled
from seq2seq.fast.cosines import Rows

WORD_CACHE = 65_536  # words whose n-grams are kept; the cache starts again when full


def fit_transform(vectorizer: TfidfVectorizer, texts: list[str]) -> csr_matrix:
    """``vectorizer.fit_transform(texts)`` for a char_wb vectorizer, with the same vocabulary, weights and
    vectors, each distinct word analysed once: a memory's texts repeat their words, and the analysis was
    most of the fit (char_wb n-grams never cross a space). The vectorizer keeps its own analyzer after."""
    params = vectorizer.get_params()
    if params["analyzer"] != "char_wb":
        raise ValueError(f"a char_wb vectorizer is needed, not {params['analyzer']!r}")
    analyse, words = clone(vectorizer).build_analyzer(), {}  # a copy's: it reads the n-gram range when called

    def by_word(text: str) -> list[str]:  # the words' n-grams in turn (a word's case is its own affair)
        grams: list[str] = []
        for word in text.split():
            if (found := words.get(word)) is None:
                found = words[word] = analyse(word)
            grams += found
        return grams

    vectorizer.set_params(analyzer=by_word, ngram_range=(1, 1))  # (1, 1): sklearn warns of any other range
    try:
        return vectorizer.fit_transform(texts)
    finally:
        vectorizer.set_params(analyzer=params["analyzer"], ngram_range=params["ngram_range"])


class TfidfVectors:
    """Sublinear tf times idf, of unit length, for the n-grams a fitted vectorizer knows."""

    def __init__(self, vectorizer: TfidfVectorizer) -> None:
        self.analyse, self.vocabulary = vectorizer.build_analyzer(), vectorizer.vocabulary_
        self.idf = np.asarray(vectorizer.idf_, dtype=np.float64)  # (F,)
        self.grams = len(self.vocabulary)
        self._columns: dict[str, list[int]] = {}  # word -> its known n-grams' columns, in the analyzer's order

    def columns(self, text: str) -> list[int]:
        """The text's known n-grams' columns, in the analyzer's order, repeats included."""
        # char_wb n-grams never cross a space, so a text's n-grams are its words' n-grams in turn, and
        # alerts repeat their words: each word is analysed once (a third of a query's cost before).
        columns: list[int] = []
        for word in text.split():
            known = self._columns.get(word)
            if known is None:
                if len(self._columns) >= WORD_CACHE:
                    self._columns.clear()
                known = self._columns[word] = [j for gram in self.analyse(word)
                                               if (j := self.vocabulary.get(gram)) is not None]
            columns += known
        return columns

    def rows(self, texts: list[str]) -> Rows:
        """The texts' vectors as rows, each text's n-grams in the order first met (none for a text with no
        known n-gram)."""
        per_text = [self.columns(text) for text in texts]
        indptr = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, per_text), np.int64, len(texts)), out=indptr[1:])
        columns = np.fromiter(chain.from_iterable(per_text), np.int64, int(indptr[-1]))
        return Rows(*weighed(indptr, columns, self.idf))


@compiled
def weighed(indptr: np.ndarray, columns: np.ndarray, idf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each text (its known n-grams' columns ``columns[indptr[t]:indptr[t + 1]]``, repeats included), its
    vector as a row: each n-gram once, in the order first met, weighed as ``transform`` weighs it (sublinear tf
    times ``idf``, over the length, its squares added left to right, as plain loops over the text would add)."""
    counts = np.zeros(idf.size, dtype=np.int64)  # (F,) the text's n-grams counted, back to 0 after each text
    row_indptr = np.zeros(indptr.size, dtype=np.int64)
    row_columns = np.empty(columns.size, dtype=np.int64)
    values = np.empty(columns.size)
    size = 0
    for text in range(indptr.size - 1):
        first = size
        for place in range(indptr[text], indptr[text + 1]):
            if counts[columns[place]] == 0:
                row_columns[size] = columns[place]
                size += 1
            counts[columns[place]] += 1
        squares = 0.0
        for entry in range(first, size):
            gram = row_columns[entry]
            n = counts[gram]
            values[entry] = idf[gram] if n == 1 else (1.0 + math.log(n)) * idf[gram]
            squares += values[entry] * values[entry]
            counts[gram] = 0
        norm = math.sqrt(squares)  # > 0 for a text with any n-gram: every idf is at least 1
        for entry in range(first, size):
            values[entry] /= norm
        row_indptr[text + 1] = size
    return row_indptr, row_columns[:size], values[:size]

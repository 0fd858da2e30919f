"""A fitted TfidfVectorizer's ``transform``, written out: for one text as {n-gram column: weight}
(``TfidfVectors.__call__``), and for a batch of texts as rows of arrays (``TfidfVectors.rows``).

scikit-learn's and scipy's per-call checks cost several times the arithmetic for one short alert, and a
batch's vectors are cheaper built as arrays at once than as one dict per alert read back by NumPy;
``tests/test_trust.py`` holds both equal to ``transform``, and the rows equal to the dicts to the last bit.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import chain
from operator import mul

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.base import clone
from sklearn.feature_extraction.text import TfidfVectorizer

from seq2seq.fast.cosines import ARRAYS_FROM, Rows, csr_rows, left_to_right

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
        self.idf = vectorizer.idf_.tolist()
        self._idf = np.asarray(vectorizer.idf_, dtype=np.float64)
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

    def __call__(self, text: str) -> dict[int, float]:
        """The text's vector, its n-grams in the order first met; empty for a text with no known n-gram."""
        counts, idf = Counter(self.columns(text)), self.idf
        weights = [idf[j] if n == 1 else (1.0 + math.log(n)) * idf[j] for j, n in counts.items()]
        norm = math.sqrt(left_to_right(map(mul, weights, weights)))
        return dict(zip(counts, [w / norm for w in weights], strict=True)) if norm > 0 else {}

    def rows(self, texts: list[str]) -> Rows:
        """The texts' vectors as rows, the same numbers in the same order as ``__call__``'s dicts."""
        if len(texts) < ARRAYS_FROM:  # one dict each
            return csr_rows([self(text) for text in texts])
        per_text = [self.columns(text) for text in texts]
        lengths = np.fromiter(map(len, per_text), np.int64, len(texts))
        columns = np.fromiter(chain.from_iterable(per_text), np.int64, int(lengths.sum()))
        owner = np.repeat(np.arange(len(texts)), lengths)
        # Each (text, n-gram) once, in the order first met, with its count: Counter's order and counts. A stable
        # sort finds each key's first place, where its count is put; the places holding one keep the order met.
        keys = owner * self.grams + columns
        by_key = np.argsort(keys, kind="stable")
        ordered = keys[by_key]
        starts = np.flatnonzero(np.diff(ordered, prepend=ordered[:1] - 1))  # (K,) each key's first place in order
        counts = np.zeros(keys.size, dtype=np.int64)
        counts[by_key[starts]] = np.diff(np.append(starts, keys.size))
        first = counts > 0
        owner, columns, counts = owner[first], columns[first], counts[first]
        # 1 + log(n) by math.log, as __call__ has it, once for each count that occurs, then looked up in a table:
        # np.unique(counts, return_inverse=True) took about half of building the vectors (docs/trust.md)
        occurs = np.bincount(counts)  # (largest count + 1,)
        tf = np.zeros(occurs.size)
        seen = np.flatnonzero(occurs)
        tf[seen] = [1.0 + math.log(n) for n in seen.tolist()]
        weights = tf[counts] * self._idf[columns]
        lengths = np.bincount(owner, minlength=len(texts))
        place = np.arange(len(owner)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        squares = np.zeros((len(texts), int(lengths.max(initial=0)) + 1))
        squares[owner, place + 1] = weights * weights
        norms = np.sqrt(np.add.accumulate(squares, axis=1)[:, -1])  # left to right, as __call__ adds
        return Rows(np.concatenate(([0], np.cumsum(lengths))), columns, weights / norms[owner])

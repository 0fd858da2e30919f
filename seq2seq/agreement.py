"""How far actions agree: a generated action with what the nearest past cases did, and those cases among themselves.

The action side of the case memory (``seq2seq.memory``): each distinct past action's TF-IDF vector of
character n-grams, the same kind of vector as the alerts', and dot products of such vectors. The answers of
one alert (the UI's) are scored by plain dict loops; a batch's by arrays, whose fixed cost per call would
outweigh them for a few alerts. Both sum each product in the same order and give the same bits
(tests/test_trust.py).
"""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from seq2seq.fast.cosines import ARRAYS_FROM, Places, Rows, segments, shorter_dot, sum_in_order
from seq2seq.fast.tfidf import TfidfVectors
from seq2seq.tokenizer import normalize

PAST_VECTORS = 4096  # past actions kept as dicts for the dict loops (common actions recur in every shift)


class PastActions:
    """The distinct past actions, each as a vector (``vectorizer``: fitted on the actions, as the memory fits it)."""

    def __init__(self, actions: list[str], vectorizer: TfidfVectorizer) -> None:
        self.vector = TfidfVectors(vectorizer)  # any text's action vector, as a {n-gram: weight} dict
        # Each distinct action's vector once, as rows (a dict per pair was most of a large memory's size):
        # a case's action, and often a translator's answer, is one of them (docs/trust.md, larger histories).
        self._number = {action: a for a, action in enumerate(dict.fromkeys(actions))}
        self._rows = self.vector.rows(list(self._number))  # (A, F) in the dicts' order
        self._dicts: dict[int, dict[int, float]] = {}  # past actions met by the dict loops

    def agreement_and_consensus(self, answers: list[str] | None,
                                cases: list[list[str]]) -> tuple[list[float], list[float]]:
        """Agreement: for each ``answers[i]``, its highest similarity in [0, 1] to the past actions ``cases[i]``
        (none without ``answers``). Consensus: for each list of past actions, most similar case first, how far
        the first agrees with the others (0 with fewer than two). Both from one pass over the actions."""
        numbered = {action: i for i, action in enumerate(dict.fromkeys(answers or []))}  # answers repeat
        texts = [*map(normalize, numbered), *(found[0] if found else "" for found in cases)]  # then firsts
        which = [*(numbered[action] for action in answers or []), *range(len(numbered), len(texts))]
        theirs = [*(cases if answers is not None else []), *(found[1:] for found in cases)]
        past = [self._number.get(text) for text in texts]
        if len(cases) < ARRAYS_FROM:
            vectors = [self.vector(text) if a is None else self._dict(a) for text, a in zip(texts, past, strict=True)]
            both = [min(1.0, max((shorter_dot(vectors[v], self._dict(self._number[action])) for action in found),
                                 default=0.0)) for v, found in zip(which, theirs, strict=True)]
        else:  # the past actions' rows, then the new answers', the vectors renumbered to that order
            new = [v for v, a in enumerate(past) if a is None]
            order = np.argsort(np.array([a is None for a in past]), kind="stable")  # (V,): the past first
            rows = (self._rows.take(np.array([a for a in past if a is not None], dtype=np.int64))
                    + self.vector.rows([texts[v] for v in new]))
            both = self._agreements(rows, np.argsort(order)[which].tolist(), theirs)
        return both[:len(answers or [])], both[len(answers or []):]

    def _dict(self, action: int) -> dict[int, float]:
        """A past action's vector as a dict, kept for the next call (the cache starts again when full)."""
        found = self._dicts.get(action)
        if found is None:
            if len(self._dicts) >= PAST_VECTORS:
                self._dicts.clear()
            found = self._dicts[action] = self._rows.as_dict(action)
        return found

    def _agreements(self, vectors: Rows, which: list[int], cases: list[list[str]]) -> list[float]:
        """For each i, the highest dot product (at most 1) of vector ``which[i]`` with the past actions
        ``cases[i]``, 0 without any. Each product is summed over the shorter vector's n-grams in its order
        (the query's when as long), as a dot of two {n-gram: weight} dicts over the shorter would be."""
        pairs = np.array([self._number[action] for found in cases for action in found], dtype=np.int64)
        counts = np.fromiter(map(len, cases), np.int64, len(cases))
        vector = np.repeat(np.array(which, dtype=np.int64), counts)  # (P,): the vector of each product
        indptr, columns, values = self._rows.indptr, self._rows.columns, self._rows.values
        offsets, owner = segments(indptr, pairs)
        places = Places(vectors, self.vector.grams)
        # A case's action shorter than the vector: its own n-grams, in its order, times the vector's weights.
        theirs = places.weights[vector[owner], places.at(vector[owner], columns[offsets])]
        by_case = np.bincount(owner, weights=values[offsets] * theirs, minlength=pairs.size)
        by_vector = sum_in_order(places, vector, pairs.size, owner, columns[offsets], values[offsets])
        shorter = (indptr[pairs + 1] - indptr[pairs]) < np.diff(vectors.indptr)[vector]
        dots = np.where(shorter, by_case, by_vector).tolist()
        found, start = [], 0
        for end in np.cumsum(counts).tolist():
            found.append(min(1.0, max(dots[start:end], default=0.0)))
            start = end
        return found

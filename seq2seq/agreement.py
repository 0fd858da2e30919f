"""How far actions agree: a generated action with what the nearest past cases did, and those cases among themselves.

The action side of the case memory (``seq2seq.memory``): each distinct past action's TF-IDF vector of
character n-grams, the same kind of vector as the alerts', and dot products of such vectors, summed over
the shorter vector's n-grams in its order by one compiled loop (``seq2seq.fast.cosines.best_dots``), for
the UI's one alert and a file's thousands alike.
"""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from seq2seq.fast.cosines import best_dots
from seq2seq.fast.tfidf import TfidfVectors
from seq2seq.tokenizer import normalize


class PastActions:
    """The distinct past actions, each as a vector (``vectorizer``: fitted on the actions, as the memory fits it)."""

    def __init__(self, actions: list[str], vectorizer: TfidfVectorizer) -> None:
        self.vector = TfidfVectors(vectorizer)  # any texts' action vectors, as rows
        # Each distinct action's vector once, as rows (a dict per pair was most of a large memory's size):
        # a case's action, and often a translator's answer, is one of them (docs/trust.md, larger histories).
        self._number = {action: a for a, action in enumerate(dict.fromkeys(actions))}
        self._rows = self.vector.rows(list(self._number))  # (A, F), in first-seen order

    def agreement_and_consensus(self, answers: list[str] | None,
                                cases: list[list[str]]) -> tuple[list[float], list[float]]:
        """Agreement: for each ``answers[i]``, its highest similarity in [0, 1] to the past actions ``cases[i]``
        (none without ``answers``). Consensus: for each list of past actions, most similar case first, how far
        the first agrees with the others (0 with fewer than two). Both from one pass over the actions."""
        numbered = {action: i for i, action in enumerate(dict.fromkeys(answers or []))}  # answers repeat
        texts = [*map(normalize, numbered), *(found[0] if found else "" for found in cases)]  # then firsts
        theirs = [*(cases if answers is not None else []), *(found[1:] for found in cases)]
        past = [self._number.get(text) for text in texts]
        new = [text for text, a in zip(texts, past, strict=True) if a is None]
        # Each text's row: a past action's own, else the next of the new texts' rows (numbered after the past)
        renumbered = iter(range(len(self._number), len(self._number) + len(new)))
        rows = [a if a is not None else next(renumbered) for a in past]
        which = [*(rows[numbered[action]] for action in answers or []), *rows[len(numbered):]]
        vectors = self.vector.rows(new)
        both = best_dots(self._rows.indptr, self._rows.columns, self._rows.values,
                         vectors.indptr, vectors.columns, vectors.values, np.array(which, dtype=np.int64),
                         np.cumsum([0, *map(len, theirs)], dtype=np.int64),
                         np.array([self._number[action] for found in theirs for action in found], dtype=np.int64),
                         self.vector.grams).tolist()
        return both[:len(answers or [])], both[len(answers or []):]

"""The case memory: the alert -> action pairs a translator was trained on, searchable by similarity.

For each alert, the past cases whose alerts look most like it, with a similarity in [0, 1]: the
cosine between TF-IDF vectors of character n-grams within words (scikit-learn). Character n-grams
match the way technicians abbreviate and misspell ("hyd press lo", "hydraulic pressure low");
``scripts/benchmark_trust.py`` compares this with the translator's own encoder representation
(docs/trust.md). The same kind of vector on the action side says how far a generated action agrees
with what the nearest past cases did.

The memory travels in the checkpoint as plain strings (``state_dict``); the index is rebuilt from
them when the checkpoint loads, deterministically.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from seq2seq.errors import CheckpointError
from seq2seq.tokenizer import normalize

STATE_VERSION = 1


@dataclass(frozen=True)
class Case:
    """One past case: its alert, the action taken, and its similarity to the alert asked about."""

    alert: str
    action: str
    similarity: float  # in [0, 1]; 1 = the same characters


def _vectorizer() -> TfidfVectorizer:
    # n-grams in more than 30% of the texts are left out: they tell few cases apart, and their long
    # postings were most of a look-up's cost (docs/trust.md: the flag rates did not move).
    return TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, max_df=0.3, dtype=np.float32)


class _Vectors:
    """A fitted TfidfVectorizer's ``transform`` of one text, as {n-gram column: weight}.

    Written out because scikit-learn's and scipy's per-call checks cost several times the arithmetic
    for one short alert; ``tests/test_trust.py`` holds it equal to ``transform``.
    """

    def __init__(self, vectorizer: TfidfVectorizer) -> None:
        self.analyse, self.vocabulary = vectorizer.build_analyzer(), vectorizer.vocabulary_
        self.idf = vectorizer.idf_.tolist()

    def __call__(self, text: str) -> dict[int, float]:
        """Sublinear tf times idf, of unit length; empty for a text with no known n-gram."""
        counts = Counter(j for gram in self.analyse(text) if (j := self.vocabulary.get(gram)) is not None)
        weights = {j: (1.0 + math.log(n)) * self.idf[j] for j, n in counts.items()}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        return {j: w / norm for j, w in weights.items()} if norm > 0 else {}


def _dot(a: dict[int, float], b: dict[int, float]) -> float:
    if len(b) < len(a):
        a, b = b, a
    return sum(w * b.get(j, 0.0) for j, w in a.items())


class CaseMemory:
    """Distinct (alert, action) pairs in first-seen order, indexed on both sides."""

    def __init__(self, alerts: list[str], actions: list[str]) -> None:
        if len(alerts) != len(actions):
            raise ValueError(f"{len(alerts)} alerts but {len(actions)} actions")
        pairs = dict.fromkeys((normalize(a), normalize(b))
                              for a, b in zip(alerts, actions, strict=True))
        pairs.pop(("", ""), None)
        if not pairs:
            raise ValueError("a case memory needs at least one alert -> action pair")
        self.alerts, self.actions = [a for a, _ in pairs], [b for _, b in pairs]
        self._alert_index, self._action_index = _vectorizer(), _vectorizer()
        # Each distinct alert once (an alert answered several ways is one column), as postings: for each
        # n-gram the distinct alerts holding it and its weights there, so a query touches only its n-grams.
        distinct = {alert: u for u, alert in enumerate(dict.fromkeys(self.alerts))}
        self._alert_row = np.array([distinct[alert] for alert in self.alerts])  # (N,) pair -> distinct alert
        postings = self._alert_index.fit_transform(list(distinct)).T.tocsr()  # (n-grams, U), columns of unit length
        self._postings = postings.indptr, postings.indices, postings.data.astype(np.float64)
        self._distinct = len(distinct)
        self._action_index.fit(self.actions)
        self.alert_vector, self.action_vector = _Vectors(self._alert_index), _Vectors(self._action_index)
        self._action_vectors = [self.action_vector(action) for action in self.actions]
        self._index = {pair: i for i, pair in enumerate(zip(self.alerts, self.actions, strict=True))}

    def __len__(self) -> int:
        return len(self.alerts)

    def state_dict(self) -> dict:
        return {"version": STATE_VERSION, "alerts": list(self.alerts), "actions": list(self.actions)}

    @classmethod
    def from_state_dict(cls, state: dict, where: str = "case memory") -> CaseMemory:
        try:
            if state["version"] != STATE_VERSION:
                raise CheckpointError(f"{where}: version {state['version']}, this program reads {STATE_VERSION}")
            alerts, actions = state["alerts"], state["actions"]
            if not all(isinstance(text, str) for text in [*alerts, *actions]):
                raise CheckpointError(f"{where}: alerts and actions must be strings")
            return cls(alerts, actions)
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{where}: malformed ({err})") from None

    def nearest(self, alerts: list[str], k: int) -> list[list[Case]]:
        """The ``k`` most similar past cases of each alert, most similar first (ties in memory order)."""
        if not alerts or k < 1:
            return [[] for _ in alerts]
        k = min(k, len(self))
        found = []
        for alert in alerts:  # one query at a time: measured faster than one gather for a whole batch
            similarity = np.clip(self._similarity(self.alert_vector(normalize(alert))), 0.0, 1.0)[self._alert_row]
            # Every case at least as similar as the k-th, ties included: argpartition alone would keep an
            # arbitrary few of many equally similar cases, and a correction (first in memory) could lose.
            kth = similarity[np.argpartition(-similarity, k - 1)[k - 1]]
            top = np.flatnonzero(similarity >= kth)
            best = top[np.lexsort((top, -similarity[top]))][:k]  # most similar first, ties by memory order
            found.append([Case(self.alerts[j], self.actions[j], float(similarity[j])) for j in best.tolist()])
        return found

    def _similarity(self, query: dict[int, float]) -> np.ndarray:
        """Cosine of ``query`` with each distinct alert, (U,): the postings of its n-grams, summed."""
        indptr, indices, data = self._postings
        columns = np.fromiter(query, dtype=np.int64, count=len(query))
        starts, lengths = indptr[columns], indptr[columns + 1] - indptr[columns]
        offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        weights = np.repeat(np.fromiter(query.values(), dtype=np.float64, count=len(query)), lengths)
        return np.bincount(indices[offsets], weights=data[offsets] * weights, minlength=self._distinct)

    def agreement(self, actions: list[str], cases: list[list[Case]]) -> list[float]:
        """For each generated action, its highest similarity in [0, 1] to the actions of its cases."""
        if not actions:
            return []
        return [self._agreement(self.action_vector(normalize(action)), found)
                for action, found in zip(actions, cases, strict=True)]

    def consensus(self, cases: list[list[Case]]) -> list[float]:
        """For each list of cases, most similar first, how far the first case's action agrees with the
        others' (``agreement`` of the past with itself); 0 with fewer than two cases."""
        return [self._agreement(self._vector(found[0]), found[1:]) if found else 0.0 for found in cases]

    def _vector(self, case: Case) -> dict[int, float]:
        return self._action_vectors[self._index[case.alert, case.action]]

    def _agreement(self, vector: dict[int, float], cases: list[Case]) -> float:
        return min(1.0, max((_dot(vector, self._vector(case)) for case in cases), default=0.0))

"""The case memory: the alert -> action pairs a translator was trained on, searchable by similarity.

For each alert, the past cases whose alerts look most like it, with a similarity in [0, 1]: the
cosine between TF-IDF vectors of character n-grams within words (scikit-learn). Character n-grams
match the way technicians abbreviate and misspell ("hyd press lo", "hydraulic pressure low");
``scripts/benchmark_trust.py`` compares this with the translator's own encoder representation
(docs/trust.md). The same kind of vector on the action side says how far a generated action agrees
with what the nearest past cases did (``seq2seq.agreement``). The memory travels in the checkpoint as plain strings
(``state_dict``); the index is rebuilt from them when the checkpoint loads, deterministically.

A query shares some n-gram with nearly every past alert, so scoring them all costs what the decoding
of a batch does. A large memory is therefore searched in two steps (``seq2seq.fast.cosines``): nearly
exact upper bounds on every cosine in float32 for the whole batch, then exact cosines for the few cases
whose bound reaches the k-th best; the answer is the same as scoring every case, to the last bit
(tests/test_trust.py), and an alert the bound does not settle is scored in full.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from seq2seq.agreement import PastActions
from seq2seq.errors import CheckpointError
from seq2seq.fast.cosines import CosineBounds, Places, Rows, largest, runs, segments, sum_in_order
from seq2seq.fast.tfidf import TfidfVectors, fit_transform
from seq2seq.tokenizer import normalize

STATE_VERSION = 1
BOUND_HEAD = 256  # n-grams held by most past alerts, bounded through one dense block (docs/trust.md: 128 to 512)
BOUND_MIN_ALERTS = 1024  # distinct past alerts below which scoring them all is as fast
BOUND_MIN_BATCH = 8  # alerts per call below which the bounds' fixed cost outweighs them: every case is scored
BOUND_ALONE = 16_384  # distinct past alerts from which even one alert is found faster through the bounds
SHORTLIST = 1  # cases scored exactly per alert beyond the k asked for, before the bound is checked (docs/trust.md)
WIDER = 8  # an alert whose bound lets more than WIDER times its shortlist reach its k-th best is scored in full
GROUP_CELLS = 1 << 22  # bounds (alerts x distinct past alerts) one look-up computes at most when batches are grouped
LONG_ACTION = 0.9  # quantile of the past actions' lengths from which an action counts as long (long_answer)
LONG_C = 0.3  # regularisation of long_answer's logistic regression (0.1 to 1 measured alike: docs/trust.md)
WORD = re.compile(r"[^\W_]+")  # a word of an alert, for known_words


@dataclass(frozen=True)
class Case:
    """One past case: its alert, the action taken, and its similarity to the alert asked about."""

    alert: str
    action: str
    similarity: float  # in [0, 1]; 1 = the same characters


def unit_interval(cosines: np.ndarray) -> np.ndarray:
    """Cosines clipped to [0, 1], the range of a similarity (rounded sums can stray just past either end)."""
    return np.minimum(np.maximum(cosines, 0.0), 1.0)  # np.clip is slower


def _fitted(texts: list[str], max_df: float = 0.3) -> tuple[TfidfVectorizer, csr_matrix]:
    """A TF-IDF index of ``texts`` and their vectors (rows of unit length)."""
    # n-grams in more than 30% of the texts are left out: they tell few cases apart, and their long
    # postings were most of a look-up's cost (docs/trust.md: the flag rates did not move). Unless that
    # leaves none: a memory of fewer than four texts, or of actions in a few wordings ("replace pump"
    # and "fix valve" by turns), where every n-gram is in more than 30% of them.
    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, max_df=max_df,
                                 dtype=np.float32)
    try:
        return vectorizer, fit_transform(vectorizer, texts).tocsr()
    except ValueError:  # "max_df corresponds to < documents than min_df", "After pruning, no terms remain"
        if max_df == 1.0:
            raise
        return _fitted(texts, 1.0)


def _long_answers(rows: csr_matrix, actions: list[str]) -> tuple[np.ndarray, float]:
    """Weights (F,) and bias of a logistic regression from each pair's alert n-grams (rows, (N, F)) to
    whether its action is long; fitted when the memory is built, as its index is (docs/trust.md: its cost)."""
    lengths = np.array([len(action) for action in actions])
    long = lengths >= np.quantile(lengths, LONG_ACTION)
    if long.all() or not long.any():  # every action as long as the others: nothing to tell apart
        return np.zeros(rows.shape[1]), math.inf if long.all() else -math.inf
    regression = LogisticRegression(C=LONG_C, max_iter=1000).fit(rows, long)
    return regression.coef_[0].astype(np.float64), float(regression.intercept_[0])


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
        # Each distinct alert once (an alert answered several ways is one column), as postings: for each
        # n-gram the distinct alerts holding it and its weights there, so a query touches only its n-grams.
        distinct = {alert: u for u, alert in enumerate(dict.fromkeys(self.alerts))}
        self._alert_row = np.array([distinct[alert] for alert in self.alerts])  # (N,) pair -> distinct alert
        self._alert_index, fitted = _fitted(list(distinct))  # (U, F) float32, rows of unit length
        postings = fitted.T.tocsr()  # (F, U)
        self._postings = postings.indices, postings.data, postings.indptr.tolist()  # starts as ints, for slicing
        self._rows = fitted  # float32 as fitted, here and in the postings: half the bytes to read, widened exactly
        self._distinct, self._grams = fitted.shape
        self._pairs_of: list[list[int]] = [[] for _ in range(self._distinct)]  # distinct alert -> its pairs
        for pair, row in enumerate(self._alert_row.tolist()):
            self._pairs_of[row].append(pair)
        self._bounds = CosineBounds(fitted, BOUND_HEAD) if self._distinct >= BOUND_MIN_ALERTS else None
        self.alert_vector = TfidfVectors(self._alert_index)
        self.past_actions = PastActions(self.actions, _fitted(self.actions)[0])
        self._long_weights, self._long_bias = _long_answers(fitted[self._alert_row], self.actions)
        self._words = {word for alert in distinct for word in WORD.findall(alert.lower())}

    def __len__(self) -> int:
        return len(self.alerts)

    @property
    def group_size(self) -> int:
        """Alerts worth judging in one look-up: more share its fixed cost, until its arrays (one row of bounds
        per alert over every distinct past alert) outgrow the caches (docs/trust.md, judging four batches)."""
        return max(1, GROUP_CELLS // self._distinct)

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

    def vectors(self, alerts: list[str]) -> Rows:
        """The alerts' TF-IDF vectors, which ``nearest`` and ``long_answer`` take instead of building them again."""
        return self.alert_vector.rows([normalize(alert) for alert in alerts])

    def nearest(self, alerts: list[str], k: int, vectors: Rows | None = None) -> list[list[Case]]:
        """The ``k`` most similar past cases of each alert, most similar first (ties in memory order)."""
        if not alerts or k < 1:
            return [[] for _ in alerts]
        k = min(k, len(self))
        queries = self.vectors(alerts) if vectors is None else vectors
        # A few alerts are scanned in full, unless the memory is large: the bounds' fixed cost per call
        # outweighs what they save.
        bounded = self._bounds is not None and (len(queries) >= BOUND_MIN_BATCH or self._distinct >= BOUND_ALONE)
        found = self._shortlisted(queries, k) if bounded else [None] * len(queries)
        spans = itertools.pairwise(queries.indptr.tolist())
        return [cases if cases is not None else
                self._ranked(self._similarity(queries.columns[start:end].tolist(), queries.values[start:end]), k)
                for cases, (start, end) in zip(found, spans, strict=True)]

    def _ranked(self, similarity: np.ndarray, k: int) -> list[Case]:
        """The ``k`` best cases by ``similarity`` to each distinct alert (U,), ties in memory order."""
        similarity = unit_interval(similarity)[self._alert_row]
        # Every case at least as similar as the k-th, ties included: argpartition alone would keep an
        # arbitrary few of many equally similar cases, and a correction (first in memory) could lose.
        kth = np.partition(similarity, len(similarity) - k)[len(similarity) - k]
        top = np.flatnonzero(similarity >= kth)
        best = top[np.lexsort((top, -similarity[top]))][:k]  # most similar first, ties by memory order
        return [Case(self.alerts[j], self.actions[j], float(similarity[j])) for j in best.tolist()]

    def _shortlisted(self, queries: Rows, k: int) -> list[list[Case] | None]:
        """``nearest`` from the cases whose bound reaches the k-th best exact cosine among the k + SHORTLIST
        of highest bound, for each query where they are few; None for the rest, and an empty query."""
        bounds = self._bounds(queries)  # (B, U)
        n = min(k + SHORTLIST, self._distinct - 1)
        short, beyond = largest(bounds, n)  # (B, n), (B,)
        cosines = self._exact(queries, short)  # (B, n)
        by = np.argsort(-cosines, axis=1, kind="stable")
        short, cosines = np.take_along_axis(short, by, 1), np.take_along_axis(cosines, by, 1)
        found: list[list[Case] | None] = []
        empty = (np.diff(queries.indptr) == 0).tolist()
        for b, (alerts, row) in enumerate(zip(short.tolist(), cosines.tolist(), strict=True)):
            ranked = self._ranked_among(alerts, row, k)
            kth = ranked[-1].similarity if not empty[b] and len(ranked) == k else 0.0
            if kth > 0 and kth <= beyond[b]:  # cases beyond the shortlist may reach it: score them all
                wider = np.flatnonzero(bounds[b] >= kth)
                if wider.size <= WIDER * n:
                    row = self._exact(queries.row(b), wider[None])[0]
                    by = np.argsort(-row, kind="stable")
                    ranked = self._ranked_among(wider[by].tolist(), row[by].tolist(), k)
                else:
                    ranked = []
            # kth > 0: a case of cosine 0 ties with every case that shares no n-gram
            found.append(ranked if kth > 0 and len(ranked) == k else None)
        return found

    def _ranked_among(self, alerts: list[int], cosines: list[float], k: int) -> list[Case]:
        """The ``k`` best cases of some distinct ``alerts``, given in descending order of their cosines
        (clipped to [0, 1]), ties in memory order."""
        chosen: list[tuple[float, int]] = []
        kth = None
        for alert, cosine in zip(alerts, cosines, strict=True):
            if kth is not None and cosine < kth:
                break
            chosen += [(-cosine, pair) for pair in self._pairs_of[alert]]
            if kth is None and len(chosen) >= k:
                kth = cosine  # the k-th best; alerts as similar still come, for their memory order
        chosen.sort()
        return [Case(self.alerts[j], self.actions[j], -negative) for negative, j in chosen[:k]]

    def _exact(self, queries: Rows, alerts: np.ndarray) -> np.ndarray:
        """Cosines (B, n) of each query with its ``alerts`` (B, n), summed one n-gram after another in the
        query's order, as ``_similarity`` sums them, so that both give the same bits; clipped to [0, 1] as
        ``_ranked`` clips them."""
        offsets, owner = segments(self._rows.indptr, alerts.ravel())
        cosines = sum_in_order(Places(queries, self._grams), np.repeat(np.arange(len(queries)), alerts.shape[1]),
                               alerts.size, owner, self._rows.indices[offsets], self._rows.data[offsets])
        return unit_interval(cosines).reshape(alerts.shape)

    def _similarity(self, columns: list[int], values: np.ndarray) -> np.ndarray:
        """Cosine of one query (its n-grams ``columns`` in its order, their ``values``) with each distinct alert,
        (U,): the postings of its n-grams, summed in its order."""
        indices, data, starts = self._postings
        (alerts, weights), stored = runs(starts, columns, indices, data)
        return np.bincount(alerts, weights=weights * np.repeat(values, stored), minlength=self._distinct)

    def known_words(self, alerts: list[str]) -> list[float]:
        """For each alert, the share of its words (runs of letters and digits, case aside) that past alerts used;
        0 for an alert without a word. An alert of mostly new words is about something else (docs/trust.md)."""
        words = [WORD.findall(normalize(alert).lower()) for alert in alerts]
        return [sum(word in self._words for word in found) / len(found) if found else 0.0 for found in words]

    def agreement_and_consensus(self, actions: list[str] | None,
                                cases: list[list[Case]]) -> tuple[list[float], list[float]]:
        """Agreement: for each generated action, its highest similarity in [0, 1] to the actions of its
        cases (none without ``actions``). Consensus: for each list of cases, most similar first, how far the
        first case's action agrees with the others' (0 with fewer than two cases); ``seq2seq.agreement``."""
        return self.past_actions.agreement_and_consensus(actions, [[case.action for case in found] for found in cases])

    def long_answer(self, alerts: list[str], vectors: Rows | None = None) -> list[float]:
        """For each alert, the probability in [0, 1] that the history answered alerts like it at length
        (an action among its longest tenth), from the alert's n-grams. Such actions are narratives
        (MaintNet cuts them at 55 characters, mid-word) that no model words alike, so an answer to
        such an alert is likely off, however sure the model is."""
        rows = self.vectors(alerts) if vectors is None else vectors
        owner = np.repeat(np.arange(len(alerts)), np.diff(rows.indptr))
        logits = np.bincount(owner, weights=self._long_weights[rows.columns] * rows.values, minlength=len(alerts))
        with np.errstate(over="ignore"):  # a one-class memory's bias is infinite: probability 0 or 1
            return (1.0 / (1.0 + np.exp(-(logits + self._long_bias)))).tolist()

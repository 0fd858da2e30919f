"""The case memory: the alert -> action pairs a translator was trained on, searchable by similarity.

For each alert, the past cases whose alerts look most like it, with a similarity in [0, 1]: the
cosine between TF-IDF vectors of character n-grams within words (scikit-learn). Character n-grams
match the way technicians abbreviate and misspell ("hyd press lo", "hydraulic pressure low");
``scripts/benchmark_trust.py`` compares this with the translator's own encoder representation
(docs/trust.md). The same kind of vector on the action side says how far a generated action agrees
with what the nearest past cases did (``seq2seq.agreement``). The memory travels in the checkpoint as plain strings
(``state_dict``); the index is rebuilt from them when the checkpoint loads, deterministically.

A query shares some n-gram with nearly every past alert, so each search scores them all: one compiled loop
over the postings of the query's n-grams (``seq2seq.fast.scan``), which sums each cosine in the query's
order, as the dict loops do, and keeps the k best as it goes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from seq2seq.agreement import PastActions
from seq2seq.errors import CheckpointError
from seq2seq.fast.cosines import Rows
from seq2seq.fast.scan import nearest
from seq2seq.fast.tfidf import TfidfVectors, fit_transform
from seq2seq.tokenizer import normalize, same_text

STATE_VERSION = 1
LONG_ACTION = 0.9  # quantile of the past actions' lengths from which an action counts as long (long_answer)
LONG_C = 0.3  # regularisation of long_answer's logistic regression (0.1 to 1 measured alike: docs/trust.md)
WORD = re.compile(r"[^\W_]+")  # a word of an alert, for known_words
# ... and a run of pictographs, emoji and other symbols beyond Latin-1 ("🔥🔥", "⚠"), a word no past alert used. Left
# out, they made "🔥🔥 engine 🔥" an alert of known words only, answered confidently where "engine" alone is not.
# Latin-1's symbols ("°", "#", "/") stand in real alerts and are still no words.
PICTOGRAPHS = re.compile(r"[^\w\s\x00-\xff]+")


@dataclass(frozen=True)
class Case:
    """One past case: its alert, the action taken, and its similarity to the alert asked about."""

    alert: str
    action: str
    similarity: float  # in [0, 1]; 1 = the same characters


def itself_first(alert: str, cases: list[Case]) -> list[Case]:
    """``cases`` (most similar first) with those whose alert is ``alert`` itself, case and spacing aside, first among
    the equally similar: character n-grams ignore word order, so "#2 CYL INTAKE GASKET LEAKING." found "CYL #2
    INTAKE GASKET LEAKING." ahead of itself, both at similarity 1. Only what is shown is reordered."""
    asked = same_text(alert)
    return sorted(cases, key=lambda case: (-round(case.similarity, 6), same_text(case.alert) != asked))


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
        # float32 as fitted: half the bytes to read, widened exactly where used
        self._postings = postings.indptr, postings.indices, postings.data
        self._distinct = fitted.shape[0]
        self.alert_vector = TfidfVectors(self._alert_index)
        self.past_actions = PastActions(self.actions, _fitted(self.actions)[0])
        self._long_weights, self._long_bias = _long_answers(fitted[self._alert_row], self.actions)
        self._words = {word for alert in distinct for word in WORD.findall(same_text(alert))}
        self._load_compiled()

    def __len__(self) -> int:
        return len(self.alerts)

    def __setstate__(self, state: dict) -> None:
        """Unpickled (the UI's decoding process receives its translator so): the search loaded as when built."""
        self.__dict__.update(state)
        self._load_compiled()

    def _load_compiled(self) -> None:
        """The compiled loops load on their first call in a process (numba's import and cache): paid
        with the index, when the memory is built or unpickled, rather than by the first alert asked about."""
        nearest(*self._postings, np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
                self._alert_row, self._distinct, 1)
        self.past_actions.agreement_and_consensus(None, [])

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
        # case folded as the translators fold it (a Turkish keyboard's İ and ı as I and i); the vectoriser lowers too
        return self.alert_vector.rows([same_text(alert) for alert in alerts])

    def nearest(self, alerts: list[str], k: int, vectors: Rows | None = None) -> list[list[Case]]:
        """The ``k`` most similar past cases of each alert, most similar first, ties in memory order: every case
        as similar as the k-th is weighed, so that a correction (first in memory) is never lost among many equally
        similar old ones."""
        if not alerts or k < 1:
            return [[] for _ in alerts]
        queries = self.vectors(alerts) if vectors is None else vectors
        pairs, similarities = nearest(*self._postings, queries.indptr, queries.columns, queries.values,
                                      self._alert_row, self._distinct, min(k, len(self)))
        return [[Case(self.alerts[j], self.actions[j], s) for j, s in zip(found, near, strict=True)]
                for found, near in zip(pairs.tolist(), similarities.tolist(), strict=True)]

    def known_words(self, alerts: list[str]) -> list[float]:
        """For each alert, the share of its words (runs of letters and digits, case aside; runs of pictographs) that
        past alerts used; 0 for an alert without a word. An alert of mostly new words is about something else
        (docs/trust.md)."""
        folded = [same_text(alert) for alert in alerts]
        words = [WORD.findall(text) + PICTOGRAPHS.findall(text) for text in folded]
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

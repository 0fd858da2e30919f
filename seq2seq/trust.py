"""How far to trust a recommendation: ``trust`` in [0, 1] and a verdict a technician acts on.

Six signals, each cheap beside the decoding:

- the model's own per-piece log-probability of its answer (``log P / pieces``);
- how similar the nearest past case is (``CaseMemory``): an alert unlike every alert in the
  training history is out of the model's scope, whatever it answers;
- whether the answer agrees with what the nearest past cases did (the highest similarity of the
  generated action to their actions);
- how similar the second nearest case is, and whether the nearest cases agree among themselves
  (the highest similarity of the nearest case's action to the next ones'): an alert with several
  close cases that were all fixed the same way is one the history answers well;
- how likely the history answers alerts like this one at length (``CaseMemory.long_answer``): where
  it wrote a narrative ("GROUND RAN A/C, COULD NOT DUPLICATE DISCREP. ..."), not a routine part
  swap, no model words the answer alike (docs/trust.md measures what each signal adds).

``trust`` is a logistic regression over these, fitted on the dev split when training ends, to the
probability that the answer is a usable one (sentence chrF against the reference at least
``GOOD_CHRF``), on standardised signals (the scaling folded into the stored weights). The verdict:
``out-of-scope`` when the nearest case is less similar than the threshold that calls ``flag_rate``
of the in-domain dev alerts out of scope (the rest are in the training history's neighbourhood); an
alert most of whose words no past alert used ("server room UPS beeping" to an aircraft logbook) is
held to a stricter threshold, the similarity that would flag ``UNFAMILIAR_RATE`` of dev, by taking the
difference off its similarity before the test, the one threshold fitted again on those scores; else
``uncertain`` when trust is below one half (the answer is more likely unusable than usable); else
``confident``. An out-of-scope alert's trust is 0 (``TrustModel.judged``), so that trust orders the
verdicts. Fitted values travel in the checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from seq2seq.errors import CheckpointError
from seq2seq.memory import CaseMemory

VERDICTS = ("confident", "uncertain", "out-of-scope")
FEATURES = ("log_prob_per_piece", "nearest_similarity", "agreement", "second_similarity", "neighbour_consensus",
            "long_answer")
FIRST_FEATURES = FEATURES[:3]  # what trust models fitted before second_similarity and consensus read
CASE_FEATURES = FEATURES[:5]  # what trust models fitted before long_answer read
TRUST_NEIGHBOURS = 3  # cases whose actions the answer is compared with (independent of how many are shown)
GOOD_CHRF = 50.0  # a dev answer sharing at least half its character n-grams with the reference is usable
FLAG_RATE = 0.01  # share of in-domain dev alerts called out of scope (docs/trust.md: why not 5%)
UNCERTAIN_BELOW = 0.5  # trust under which an answer is more likely unusable than usable
UNFAMILIAR_BELOW = 0.5  # share of its words past alerts used (CaseMemory.known_words) below which it is unfamiliar
UNFAMILIAR_RATE = 0.05  # an unfamiliar alert is out of scope below the similarity that flags this share of dev
# What an out-of-scope verdict says wherever a recommendation appears (UI, translate, rul alerts).
UNLIKE_HISTORY = "unlike every alert in the training history"
NOT_ADVICE = "the model's guess, not advice"
MIN_SPREAD = 0.01  # a signal varying less than this on dev is not standardised (fit_trust)
MIN_CLASS = 5  # dev answers each class needs before the regression is fitted; else the median splits them


def as_shown(text: str, verdict: str | None) -> str:
    """A recommendation's text where no verdict stands beside it (a heatmap's title, a list to choose from):
    marked as a guess when its alert is out of scope, so that it never reads as advice there either."""
    return f"[out of scope: {NOT_ADVICE}] {text}" if verdict == "out-of-scope" else text


@dataclass(frozen=True)
class TrustModel:
    """A fitted trust model: logistic weights over the signals it names, and the verdict thresholds."""

    weights: tuple[float, ...]
    bias: float
    scope_threshold: float  # nearest-case similarity below which an alert is out of scope
    flag_rate: float = FLAG_RATE  # share of the dev alerts the threshold was fitted to flag
    uncertain_below: float = UNCERTAIN_BELOW
    features: tuple[str, ...] = FEATURES  # which of FEATURES the weights are for, in order
    unfamiliar_penalty: float = 0.0  # similarity taken off an unfamiliar alert's before the scope test (0: before)

    @property
    def unfamiliar_threshold(self) -> float:
        """The nearest similarity below which an alert of mostly new words is out of scope (what the logs say)."""
        return self.scope_threshold + self.unfamiliar_penalty

    def trust(self, features: np.ndarray) -> np.ndarray:
        """``features`` (B, len(FEATURES)) -> trust (B,) in [0, 1]."""
        # Summed signal by signal, in a loop: a matrix-vector product's order depends on how many rows it is
        # given, so an alert's trust would change in its last bits with the batch it came in; and NumPy's fixed
        # cost per call outweighs the arithmetic for the UI's one alert.
        weights = [(FEATURES.index(name), weight) for name, weight in zip(self.features, self.weights, strict=True)]
        logits = []
        for row in features.tolist():
            logit = 0.0
            for column, weight in weights:
                logit += row[column] * weight
            logits.append(logit + self.bias)
        with np.errstate(over="ignore"):  # exp(-z) = inf for a very negative z gives trust 0, as it should
            return 1.0 / (1.0 + np.exp(-np.array(logits, dtype=np.float64)))

    def verdict(self, trust: float, nearest_similarity: float, known_words: float = 1.0) -> str:
        """``known_words``: the share of the alert's words past alerts used (``CaseMemory.known_words``)."""
        if scope_score(nearest_similarity, known_words, self.unfamiliar_penalty) < self.scope_threshold:
            return "out-of-scope"
        return "uncertain" if trust < self.uncertain_below else "confident"

    def judged(self, trust: float, nearest_similarity: float, known_words: float = 1.0) -> tuple[float, str]:
        """The trust and verdict a recommendation carries: ``trust`` as computed, but 0 for an out-of-scope alert.

        The regression was fitted on in-domain dev answers; carried to an alert unlike all of them it can read
        high ("kitchen sink drain blocked": 0.85 with the default translator), and a file filtered or a
        selection ranked by trust must never keep a guess the verdict refused. So trust orders the verdicts:
        out of scope 0, uncertain below ``uncertain_below``, confident from it on.
        """
        verdict = self.verdict(trust, nearest_similarity, known_words)
        return (0.0 if verdict == "out-of-scope" else trust), verdict

    def state_dict(self) -> dict:
        return {**asdict(self), "weights": list(self.weights), "features": list(self.features)}

    @classmethod
    def from_state_dict(cls, state: dict, where: str = "trust model") -> TrustModel:
        try:
            weights = tuple(float(w) for w in state["weights"])
            numbers = {name: float(state[name]) for name in ("bias", "scope_threshold", "flag_rate", "uncertain_below")}
            numbers["unfamiliar_penalty"] = float(state.get("unfamiliar_penalty", 0.0))  # absent: fitted before
            names = tuple(str(name) for name in state.get("features", FIRST_FEATURES))  # absent: fitted before
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{where}: malformed ({err!r})") from None
        if not set(names) <= set(FEATURES) or len(set(names)) != len(names):
            raise CheckpointError(f"{where}: unknown or repeated signals {list(names)} (known: {list(FEATURES)})")
        if len(weights) != len(names) or not all(map(math.isfinite, [*weights, *numbers.values()])):
            raise CheckpointError(f"{where}: expected {len(names)} finite weights and finite thresholds")
        return cls(weights, **numbers, features=names)


def scope_score(nearest_similarity, known_words, penalty: float):
    """What the scope test compares with its threshold: the nearest similarity, less ``penalty`` for an alert
    most of whose words are new (floats or arrays alike, so that fitting and judging subtract the same way)."""
    return nearest_similarity - penalty * (known_words < UNFAMILIAR_BELOW)


def features(per_piece: list[float], nearest: list[float], agreement: list[float], second: list[float],
             consensus: list[float], long_answer: list[float]) -> np.ndarray:
    """The FEATURES of each answer, (B, len(FEATURES)); ``per_piece``: ``Candidate.log_prob_per_piece``."""
    columns = [per_piece, nearest, agreement, second, consensus, long_answer]
    return np.array(columns, dtype=np.float64).T.reshape(len(per_piece), len(FEATURES))


def fit_trust(answer_features: np.ndarray, chrf: list[float], flag_rate: float = FLAG_RATE,
              signals: tuple[str, ...] = FEATURES, known_words: list[float] | None = None) -> TrustModel:
    """Fit the trust model on dev answers: their FEATURES (B, len(FEATURES)) and their sentence chrF
    against the references; the weights read only ``signals`` (the benchmark's ablation). With the alerts'
    ``known_words`` the scope test also weighs unfamiliar alerts (module docstring)."""
    if len(chrf) == 0:
        raise ValueError("fitting trust needs at least one dev answer")
    scores = np.asarray(chrf, dtype=np.float64)
    good = scores >= GOOD_CHRF
    if min(good.sum(), (~good).sum()) < MIN_CLASS:  # nearly all usable (or not): rank against the median
        median = np.median(scores)
        good = scores > median
        if min(good.sum(), (~good).sum()) < MIN_CLASS:  # most answers exact (the median is the best score): a
            good = scores >= median  # regression of exact against the rest, not equal weights
    nearest = answer_features[:, FEATURES.index("nearest_similarity")]
    penalty = 0.0
    if known_words is not None and 0 < flag_rate < UNFAMILIAR_RATE:
        penalty = max(0.0, float(np.quantile(nearest, UNFAMILIAR_RATE, method="lower")
                                 - np.quantile(nearest, flag_rate, method="lower")))
        nearest = scope_score(nearest, np.asarray(known_words), penalty)
    threshold = float(np.quantile(nearest, flag_rate, method="lower")) if flag_rate > 0 else 0.0
    if good.all() or not good.any():  # one class even so: trust follows the signals with equal weights
        return TrustModel((1.0,) * len(signals), -1.0, threshold, flag_rate, features=signals,
                          unfamiliar_penalty=penalty)
    # Standardised, so that the regularisation weighs the signals alike whatever their units; the
    # scaling is folded back into the weights: w . (x - mean) / scale + b = (w / scale) . x + b'.
    # A signal (nearly) constant on dev is left unscaled: dividing by its tiny spread would give it a
    # huge weight that any other value of it, at run time, turns into trust 0 or 1.
    used = answer_features[:, [FEATURES.index(name) for name in signals]]
    mean, scale = used.mean(0), used.std(0)
    scale[scale < MIN_SPREAD] = 1.0
    regression = LogisticRegression(C=1.0).fit((used - mean) / scale, good)
    weights = regression.coef_[0] / scale
    bias = regression.intercept_[0] - float(weights @ mean)
    return TrustModel(tuple(float(w) for w in weights), float(bias), threshold, flag_rate, features=signals,
                      unfamiliar_penalty=penalty)


def memory_state(memory: CaseMemory, trust: TrustModel) -> dict:
    """What a checkpoint carries as its ``memory`` (``read_memory`` reads it back)."""
    return {"cases": memory.state_dict(), "trust": trust.state_dict()}


def read_memory(payload: dict, path: str | Path) -> tuple[CaseMemory | None, TrustModel | None]:
    """The case memory and trust model a checkpoint carries (None, None for one written before them)."""
    if "memory" not in payload:
        return None, None
    state = payload["memory"]
    if not isinstance(state, dict) or not {"cases", "trust"} <= set(state):
        raise CheckpointError(f"{path}: memory must hold cases and trust")
    return (CaseMemory.from_state_dict(state["cases"], f"{path}: memory cases"),
            TrustModel.from_state_dict(state["trust"], f"{path}: memory trust"))

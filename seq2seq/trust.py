"""How far to trust a recommendation: ``trust`` in [0, 1] and a verdict a technician acts on.

Three signals, each cheap beside the decoding:

- the model's own per-piece log-probability of its answer (``log P / pieces``);
- how similar the nearest past case is (``CaseMemory``): an alert unlike every alert in the
  training history is out of the model's scope, whatever it answers;
- whether the answer agrees with what the nearest past cases did (the highest similarity of the
  generated action to their actions).

``trust`` is a logistic regression over these, fitted on the dev split when training ends, to the
probability that the answer is a usable one (sentence chrF against the reference at least
``GOOD_CHRF``). The verdict: ``out-of-scope`` when the nearest case is less similar than the
threshold that calls ``flag_rate`` of the in-domain dev alerts out of scope (the rest are in the
training history's neighbourhood); else ``uncertain`` when trust is below one half (the answer is
more likely unusable than usable); else ``confident``. Fitted values travel in the checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression

from seq2seq.errors import CheckpointError

VERDICTS = ("confident", "uncertain", "out-of-scope")
FEATURES = ("log_prob_per_piece", "nearest_similarity", "agreement")
TRUST_NEIGHBOURS = 3  # cases whose actions the answer is compared with (independent of how many are shown)
GOOD_CHRF = 50.0  # a dev answer sharing at least half its character n-grams with the reference is usable
FLAG_RATE = 0.01  # share of in-domain dev alerts called out of scope (docs/trust.md: why not 5%)
UNCERTAIN_BELOW = 0.5  # trust under which an answer is more likely unusable than usable
MIN_CLASS = 5  # dev answers each class needs before the regression is fitted; else the median splits them


@dataclass(frozen=True)
class TrustModel:
    """A fitted trust model: logistic weights over FEATURES, and the verdict thresholds."""

    weights: tuple[float, ...]
    bias: float
    scope_threshold: float  # nearest-case similarity below which an alert is out of scope
    flag_rate: float = FLAG_RATE  # share of the dev alerts the threshold was fitted to flag
    uncertain_below: float = UNCERTAIN_BELOW

    def trust(self, features: np.ndarray) -> np.ndarray:
        """``features`` (B, len(FEATURES)) -> trust (B,) in [0, 1]."""
        return 1.0 / (1.0 + np.exp(-(features @ np.asarray(self.weights) + self.bias)))

    def verdict(self, trust: float, nearest_similarity: float) -> str:
        if nearest_similarity < self.scope_threshold:
            return "out-of-scope"
        return "uncertain" if trust < self.uncertain_below else "confident"

    def state_dict(self) -> dict:
        return {**asdict(self), "weights": list(self.weights)}

    @classmethod
    def from_state_dict(cls, state: dict, where: str = "trust model") -> TrustModel:
        try:
            weights = tuple(float(w) for w in state["weights"])
            numbers = {name: float(state[name]) for name in ("bias", "scope_threshold", "flag_rate", "uncertain_below")}
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{where}: malformed ({err!r})") from None
        if len(weights) != len(FEATURES) or not all(map(math.isfinite, [*weights, *numbers.values()])):
            raise CheckpointError(f"{where}: expected {len(FEATURES)} finite weights and finite thresholds")
        return cls(weights, **numbers)

def features(log_probs: list[float], pieces: list[int], nearest: list[float], agreement: list[float]) -> np.ndarray:
    """The FEATURES of each answer, (B, len(FEATURES))."""
    per_piece = [lp / max(1, n) for lp, n in zip(log_probs, pieces, strict=True)]
    return np.array([per_piece, nearest, agreement], dtype=np.float64).T.reshape(len(per_piece), len(FEATURES))


def fit_trust(answer_features: np.ndarray, chrf: list[float], flag_rate: float = FLAG_RATE) -> TrustModel:
    """Fit the trust model on dev answers: their FEATURES and their sentence chrF against the references."""
    if len(chrf) == 0:
        raise ValueError("fitting trust needs at least one dev answer")
    scores = np.asarray(chrf, dtype=np.float64)
    good = scores >= GOOD_CHRF
    if min(good.sum(), (~good).sum()) < MIN_CLASS:  # nearly all usable (or not): rank against the median
        good = scores > np.median(scores)
    nearest = answer_features[:, FEATURES.index("nearest_similarity")]
    threshold = float(np.quantile(nearest, flag_rate, method="lower")) if flag_rate > 0 else 0.0
    if good.all() or not good.any():  # one class even so: trust follows the signals with equal weights
        return TrustModel((1.0, 1.0, 1.0), -1.0, threshold, flag_rate)
    regression = LogisticRegression(C=1.0).fit(answer_features, good)
    return TrustModel(tuple(float(w) for w in regression.coef_[0]), float(regression.intercept_[0]), threshold,
                      flag_rate)

"""The recommendations an app recently showed, so that a technician's feedback on one is stored with what it was
shown with (``feedback.Shown``)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from seq2seq.recommender import Recommendation
from seq2seq.serving.feedback import Feedback, Shown

SHOWN_KEPT = 10_000  # recent recommendations an app remembers, to store the score and trust feedback refers to


class ShownRecommendations:
    """The recommendations an app recently showed, so that feedback on one (which names only its alert and
    text, as /feedback's inputs do) is stored with the translator, score and trust it was shown with.
    The SHOWN_KEPT most recent, the latest showing of an (alert, text) pair winning; thread-safe."""

    def __init__(self, kept: int = SHOWN_KEPT) -> None:
        self.kept, self._shown, self._lock = kept, OrderedDict(), threading.Lock()

    def remember(self, translator: str, recommendations: list[Recommendation]) -> None:
        with self._lock:
            for r in recommendations:
                if r.candidates:
                    key = (r.alert.strip(), r.text.strip())
                    self._shown[key] = Shown(translator, r.score, r.trust, r.verdict)
                    self._shown.move_to_end(key)
            while len(self._shown) > self.kept:
                self._shown.popitem(last=False)

    def get(self, feedback: Feedback) -> Shown | None:
        with self._lock:
            return self._shown.get((feedback.alert.strip(), feedback.recommendation.strip()))

"""What the app does with technicians' verdicts: /feedback, and the page's panel of right / wrong buttons.

``feedback.Feedback`` checks a posted record, ``feedback_store.FeedbackStore`` keeps it, and
``shown.ShownRecommendations`` supplies the translator, score and trust it was shown with; ``gradio_app.py``
wires these methods to the Alerts and Engine-health tabs' panels and to the /feedback endpoint.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from seq2seq.recommender import Recommendation
from seq2seq.serving import views
from seq2seq.serving.feedback import Feedback
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.serving.requests import refusal, shown_first, user_errors
from seq2seq.serving.shown import ShownRecommendations
from seq2seq.trust import as_shown


class FeedbackPanel:
    """/feedback and the verdict buttons; without a store (an app started without a feedback database) both
    refuse politely."""

    def __init__(self, store: FeedbackStore | None, shown: ShownRecommendations) -> None:
        self.store, self.shown = store, shown

    def feedback(self, alert: str, recommendation: str, verdict: str, correction: str = "",
                 technician: str = "") -> int:
        """/feedback: a technician's verdict ('right' or 'wrong') on a recommendation, with what they did
        instead and their name (both may be empty); stored, committed and synced, then its record id."""
        if self.store is None:
            raise refusal("This app keeps no feedback (started without a feedback database).")
        with user_errors(self.store.path):
            record = Feedback.checked(alert, recommendation, verdict, correction, technician)
            return self.store.add(record, self.shown.get(record))

    def targets(self, recommendations: list[Recommendation]):
        """The panel for a new answer: its choice of recommendation (those with one), the list it indexes, and no
        correction, saved message or last record left from the answer before (a correction typed for one alert
        was stored against the next)."""
        answered = [r for r in shown_first(recommendations, "/recommend") if r.candidates]
        choices = [(f"{i}. {r.alert} -> {as_shown(r.text, r.verdict)}", i - 1) for i, r in enumerate(answered, 1)]
        return gr.Dropdown(choices=choices, value=0 if choices else None), answered, "", "", None

    def on_button(self, verdict: str, answered: list[Recommendation] | None, index: Any, correction: str,
                  technician: str, last: tuple[tuple, int] | None = None) -> tuple[str, tuple[tuple, int]]:
        """A verdict button: the chosen recommendation's feedback, stored through ``feedback``, and the page's
        ``last`` record (what was posted, its id). The same post again from the page, a double click, is
        answered with that record rather than stored twice: each record counts in ``feedback stats`` and as a
        training pair in ``feedback export``. Another verdict or correction for the recommendation just judged (a
        misclick put right) changes that record rather than stand beside it as its contradiction."""
        if not answered or not isinstance(index, int) or not 0 <= index < len(answered):
            raise refusal("Get a recommendation first, then choose it and say whether it was right.")
        chosen = answered[index]
        posted = (chosen.alert, chosen.text, verdict, correction, technician)
        if last is not None and last[0] == posted:
            record, saved = last[1], "Already saved as"
        elif last is not None and last[0][:2] == posted[:2] and self.store is not None:
            with user_errors(self.store.path):
                record = self.store.revise(last[1], Feedback.checked(*posted))
            saved = "Thank you: changed"  # the record's id is kept
        else:
            record, saved = self.feedback(*posted), "Thank you: saved as"
        return (f"{saved} feedback record {record} ({verdict}: \"{views.as_written(chosen.alert)}\" -> "
                f"\"{views.as_written(chosen.text)}\")."), (posted, record)

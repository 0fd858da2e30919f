"""What technicians said before about an answer the app gives again: the feedback records that marked this very
answer to this very alert wrong (case and spacing aside). A model fine-tuned on its corrections can still give it,
and trust does not know; the technician is told, beside the answer, with what was done instead."""

from __future__ import annotations

from typing import Any

from seq2seq.serving.feedback_store import FeedbackStore, same_text

SHOWN_CORRECTIONS = 3  # distinct corrections shown per answer, newest first


def mark_wrong_answers(store: FeedbackStore | None, items: list[dict[str, Any]]) -> None:
    """Each /recommend item (``views.recommendation_json``) gets ``marked_wrong``: None, or ``{"times": n, "last":
    time, "corrections": [...]}`` when technicians marked its best recommendation to its alert wrong (corrections:
    distinct, newest first, at most SHOWN_CORRECTIONS; a 'wrong' without one adds none)."""
    answers = [item["recommendations"][0]["text"] if item["recommendations"] else "" for item in items]
    records = store.marked_wrong([a for a in answers if a]) if store is not None else []
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for alert, recommendation, correction, time in records:  # newest first
        found.setdefault((same_text(alert), same_text(recommendation)), []).append((correction, time))
    for item, answer in zip(items, answers, strict=True):
        marks = found.get((same_text(item["alert"]), same_text(answer))) if answer else None
        item["marked_wrong"] = None
        if marks:
            corrections = list(dict.fromkeys(c.strip() for c, _ in marks if c.strip()))[:SHOWN_CORRECTIONS]
            item["marked_wrong"] = {"times": len(marks), "last": marks[0][1], "corrections": corrections}

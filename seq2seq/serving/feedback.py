"""Technician feedback on recommendations: what one record says, and the checks a posted one must pass.

A record says, for one recommendation a technician saw: the alert, the translator that answered (a
SHA-256 of its configuration, vocabularies and weights, as ``destinations.model_digest`` computes it),
the recommendation with its score and trust, the technician's verdict (``right`` or ``wrong``), what
they did instead (may be empty) and their name (may be empty). ``feedback_store.FeedbackStore`` keeps them;
``seq2seq feedback export`` turns them into training pairs for ``seq2seq train --init-from``.
"""

from __future__ import annotations

from dataclasses import dataclass

from seq2seq.errors import CONTROLS, DataError, shown, typed_text_fault
from seq2seq.tokenizer import normalize, same_text

VERDICTS = ("right", "wrong")
MAX_TEXT = 10_000  # characters of an alert, recommendation or correction
MAX_NAME = 200  # characters of a technician's name
@dataclass(frozen=True)
class Shown:
    """What the app showed with a recommendation; all None when it did not show it (a program's post)."""

    translator: str | None = None
    score: float | None = None
    trust: float | None = None
    trust_verdict: str | None = None


@dataclass(frozen=True)
class Feedback:
    alert: str
    recommendation: str
    verdict: str  # one of VERDICTS
    correction: str = ""
    technician: str = ""

    @classmethod
    def checked(cls, alert: object, recommendation: object, verdict: object, correction: object = "",
                technician: object = "") -> Feedback:
        """The feedback a user posted, or a one-line DataError saying what is wrong with it."""
        texts = {}
        for name, value, limit in (("alert", alert, MAX_TEXT), ("recommendation", recommendation, MAX_TEXT),
                                   ("correction", correction, MAX_TEXT), ("technician", technician, MAX_NAME)):
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise DataError(f"feedback: {name} must be text, got {type(value).__name__}")
            if len(value) > limit:
                raise DataError(f"feedback: {name} is {len(value):,} characters, at most {limit:,} are accepted; "
                                "nothing was stored")
            if fault := typed_text_fault(value):
                raise DataError(f"feedback: {name} {fault}")
            texts[name] = value
        if isinstance(verdict, str) and same_text(verdict) in VERDICTS:  # "Wrong", " right ": what a program meant
            verdict = same_text(verdict)
        if verdict not in VERDICTS:
            got = shown(verdict) if isinstance(verdict, str) else type(verdict).__name__
            raise DataError(f"feedback: verdict must be 'right' or 'wrong', got {got!r}")
        if not normalize(texts["alert"]):  # blanks, or invisible characters alone (a zero-width space)
            raise DataError("feedback: the alert is empty")
        if verdict == "right" and not normalize(texts["recommendation"]):
            raise DataError("feedback: 'right' needs the recommendation it approves, and it is empty")
        return cls(texts["alert"], texts["recommendation"], verdict, texts["correction"], texts["technician"])

    @property
    def action(self) -> str | None:
        """What was done, as a training target: the correction, else the recommendation marked right, else
        None (a 'wrong' with no correction says what not to do, not what to do); as ``one_line`` writes it."""
        for text in (self.correction, self.recommendation if self.verdict == "right" else ""):
            if normalize(text):  # as training reads it: invisible characters alone are no action
                return one_line(text)
        return None

    @property
    def controls(self) -> bool:
        """Whether a field holds a control character ``checked`` refuses: a record stored before it did."""
        return any(CONTROLS.search(text) for text in (self.alert, self.recommendation, self.correction,
                                                       self.technician))


def one_line(text: str) -> str:
    """``text`` as one field of one line, safe to print: a control character (in a record stored before
    ``Feedback.checked`` refused them) is written as its escape, ``\\x1b``, rather than sent to a terminal or
    dropped; then runs of whitespace (line breaks, tabs) become one space."""
    return " ".join(CONTROLS.sub(lambda control: shown(control.group()), text).split())


@dataclass(frozen=True)
class Record:
    id: int
    time: str
    feedback: Feedback
    shown: Shown


@dataclass(frozen=True)
class Pairs:
    """The training pairs ``seq2seq feedback export`` writes, and what became of the records not among them."""

    pairs: list[tuple[str, str]]  # (alert, action) as one_line writes them
    no_action: int = 0  # 'wrong' with no correction: says what not to do, not what to do
    repeated: int = 0  # an alert's pair again (case and spacing aside): a retried post, a second technician agreeing
    superseded: int = 0  # an alert's action replaced by a newer one
    withdrawn: int = 0  # an alert's action marked 'wrong' later, with nothing to do instead


def training_pairs(records: list[Record], every_record: bool = False) -> Pairs:
    """One pair per alert, case and spacing aside: what the newest record about it says was done, in the order of
    those records. A model learns one answer for an alert, and what technicians say now is what is done now, as
    fine-tuning's replay also holds (docs/feedback.md); a retried post no longer counts twice. ``every_record``:
    each record's pair, oldest first, as exports once did (docs/feedback.md)."""
    if every_record:
        pairs = [(one_line(r.feedback.alert), r.feedback.action) for r in records if r.feedback.action]
        return Pairs(pairs, no_action=len(records) - len(pairs))
    latest: dict[str, tuple[str, str]] = {}
    counts = dict.fromkeys(("no_action", "repeated", "superseded", "withdrawn"), 0)
    for record in sorted(records, key=lambda r: r.id):
        feedback, alert = record.feedback, same_text(record.feedback.alert)
        before = latest.get(alert)
        if feedback.action is None:
            counts["no_action"] += 1
            if before and feedback.verdict == "wrong" and same_text(feedback.recommendation) == same_text(before[1]):
                counts["withdrawn"] += 1
                del latest[alert]
            continue
        if before:
            counts["repeated" if same_text(before[1]) == same_text(feedback.action) else "superseded"] += 1
            del latest[alert]  # placed again, where its newest record is
        latest[alert] = (one_line(feedback.alert), feedback.action)
    return Pairs(list(latest.values()), **counts)

"""JSON views of recommendations and engine reports (what the UI's API returns) and their Markdown pages.

Attention matrices travel as nested lists (target pieces x source pieces), rounded to 5 decimals.
``confidence`` is the per-piece probability exp(log P / pieces); ``share`` is a candidate's part of
the n-best list's probability mass. ``alerts_markdown`` and ``engine_markdown`` render the JSON for
the UI's pages, so a page shows exactly what a program gets.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from seq2seq.recommender import Candidate, Recommendation
from seq2seq.rul.monitor import EngineReport
from seq2seq.tokenizer import same_text
from seq2seq.trust import FLAG_RATE, NOT_ADVICE, UNFAMILIAR_RATE, UNLIKE_HISTORY
from seq2seq.words import word_attention

EXACT = 0.99995  # a past case's similarity at which it is the very alert (rounded to 1.00000 in the JSON)
CONFIDENCE_NOTE = ("score = log P(recommendation | alert), divided by GNMT's length penalty under beam search; "
                   "confidence = per-piece probability exp(log P / pieces), the geometric mean of the probabilities "
                   "of the output pieces; share = the candidate's part of the n-best list's probability mass (the "
                   "list is ranked by score, so under beam search a longer answer may rank above a shorter one with "
                   "more share)")


def recommendation_json(recommendation: Recommendation) -> dict[str, Any]:
    log_probs = [c.log_prob for c in recommendation.candidates]
    top = max(log_probs, default=0.0)
    mass = sum(math.exp(lp - top) for lp in log_probs)
    return {
        "alert": recommendation.alert, "source_pieces": recommendation.source_pieces,
        "warning": recommendation.warning, "trust": recommendation.trust, "verdict": recommendation.verdict,
        "similar": similar_json(recommendation),
        "recommendations": [candidate_json(recommendation.source_pieces, c, top, mass, recommendation.alert)
                            for c in recommendation.candidates],
    }


def similar_json(recommendation: Recommendation) -> list[dict[str, Any]]:
    return [{"alert": case.alert, "action": case.action, "similarity": round(case.similarity, 5)}
            for case in recommendation.similar]


def translation_json(recommendation: Recommendation) -> dict[str, Any]:
    """One line of ``seq2seq translate --json``: the best recommendation, its trust and the past cases."""
    r = recommendation
    return {"alert": r.alert, "recommendation": r.text, "score": r.score if r.candidates else None,
            "trust": r.trust, "verdict": r.verdict, "warning": r.warning,
            "similar": similar_json(r),
            "alternatives": [{"text": c.text, "score": c.score} for c in r.candidates[1:]]}


def candidate_json(source_pieces: list[str], c: Candidate, top: float, mass: float,
                   alert: str | None = None) -> dict[str, Any]:
    """One candidate with its piece-level and word-level attention (target x source, rows summing to 1); the
    alert's words as typed when ``alert`` is given."""
    pieces = c.attention.double().numpy()  # rounded as float64: a float32 rounded to 5 places prints 17 digits
    source_words, target_words, words = word_attention(source_pieces, c.target_pieces, pieces, alert)
    return {
        "text": c.text, "score": c.score, "target_pieces": c.target_pieces,
        "confidence": c.confidence, "share": math.exp(c.log_prob - top) / mass,
        "attention": np.round(pieces, 5).tolist(),  # (target pieces, source pieces)
        "source_words": source_words, "target_words": target_words,
        "word_attention": np.round(words, 5).tolist(),  # (target words, source words)
    }


def engine_json(report: EngineReport, source: str) -> dict[str, Any]:
    return {
        "source": source, "unit": report.unit, "rul": report.rul, "health": report.health, "note": report.note,
        "warnings": report.warnings,
        "health_probabilities": report.health_probabilities, "window_cycles": report.window_cycles,
        "attention": report.attention, "deviations": report.deviations,
        "alerts": [{"line": alert.line(report.health), "phrase": alert.phrase, "symbol": alert.symbol,
                    "direction": alert.direction, "strength": alert.strength, "deviation": alert.deviation,
                    "cycle": alert.cycle} for alert in report.alerts],
        "recommendations": [recommendation_json(r) for r in report.recommendations],
    }


BADGES = {"confident": "**CONFIDENT**", "uncertain": "**UNCERTAIN, check before acting**",
          "out-of-scope": "**OUT OF SCOPE**"}
TRUST_NOTE = ("trust = the probability, fitted on the dev split, that an answer is usable, from the model's "
              "per-piece probability, how similar the nearest past cases are, whether the answer agrees with "
              "what they did, whether they agree among themselves and whether alerts like it were answered at "
              "length (narratives, which no model words alike); out of scope = less similar to every past "
              f"alert than all but {FLAG_RATE:.0%} of the dev alerts ({UNFAMILIAR_RATE:.0%} for an alert most of whose "
              "words no past alert used), and its trust is 0. Answers with higher trust are right more often: "
              "`seq2seq evaluate --json` reports, under \"selective\", the scores of the 90%, 80%, ... of answers "
              "the model is surest of")


# Markdown's punctuation escaped, HTML's as entities, line breaks as spaces: typed or past text shows as written.
_AS_WRITTEN = str.maketrans({**{c: "\\" + c for c in "\\`*_{}[]()#+-.!|~$"}, "<": "&lt;", ">": "&gt;", "&": "&amp;",
                             "\n": " ", "\r": " "})
# The page's renderer links a web address by itself (GitHub's "autolinks"), escapes and all ("https://www\\.faa\\.gov"
# linked to that): its colon as an entity makes it text, shown as written; escaped dots keep "www." and e-mail
# addresses from linking likewise. A link no one wrote as one is not offered to a technician to follow.
_UNLINKED = ("://", "&#58;//")


def as_written(text: str) -> str:
    """Alert, action or file-name text for a Markdown page: shown as written, never as markup (an alert typed as
    ``![x](http://host/x.png)`` would have the browser fetch that address; ``**egt**`` would turn bold), and kept
    in its table cell."""
    return text.translate(_AS_WRITTEN).replace(*_UNLINKED)


def verdict_line(item: dict[str, Any]) -> str:
    """A recommendation's badge, trust and best text (``recommendation_json``), as the Alerts and Engine-health
    tabs show it: out of scope, a struck-through guess beside the reason instead of advice."""
    text = as_written(item["recommendations"][0]["text"])
    if item["verdict"] == "out-of-scope":
        return f"{BADGES['out-of-scope']}: this alert is {UNLIKE_HISTORY}. {NOT_ADVICE.capitalize()}: ~~{text}~~"
    trust = f" (trust {item['trust']:.2f})" if item["trust"] is not None else ""
    return f"{BADGES[item['verdict']]}{trust}: **{text}**{otherwise(item)}"


def marked_line(marked: dict[str, Any]) -> str:
    """What technicians said of this answer to this alert before (``marked.mark_wrong_answers``)."""
    times = "once" if marked["times"] == 1 else f"{marked['times']} times"
    instead = "; ".join(as_written(c) for c in marked["corrections"])
    return (f"**Marked wrong** for this alert by technicians {times} (last {marked['last'][:10]})"
            + (f"; what they did instead: *{instead}*." if instead else "."))


def otherwise(item: dict[str, Any]) -> str:
    """What the history did when a past case is this very alert (similarity 1, case aside) and the answer is none of
    the actions it took for it; "" otherwise.

    The default translator, trained under a time budget, answers many of its own training alerts otherwise than
    their pairs, confidently, the case right beside the answer; on MaintNet such confident answers score as well as
    the others (its history answers one alert many ways). So trust and verdict stay as fitted, and the technician
    is told (docs/trust.md)."""
    same = [case for case in item["similar"] if case["similarity"] >= EXACT]
    if not same or any(same_text(case["action"]) == same_text(item["recommendations"][0]["text"]) for case in same):
        return ""
    return f" — but the history answered this very alert with: *{as_written(same[0]['action'])}*"


def answered_by(translator: str, beam_size: int) -> str:
    """Which translator and search gave the answers on a page: switching the translator leaves the last answer
    on screen until the next is asked for, and it must not pass for the new translator's."""
    search = "greedy search" if beam_size == 1 else f"beam size {beam_size}"
    return f"*Answered by translator {as_written(translator)} ({search}).*"


def alerts_markdown(alerts: list[dict[str, Any]], header: str = "") -> str:
    """Per alert: the best recommendation with its confidence, then (n-best > 1) a table of the alternatives;
    ``header`` (``answered_by``) first."""
    blocks = [header] if header else []
    for i, item in enumerate(alerts, 1):
        lines = [f"#### {i}. {as_written(item['alert'])}"]
        if item["warning"]:
            lines += [f"*{as_written(item['warning'])}*", ""]  # a paragraph of its own, not run into the verdict
        candidates = item["recommendations"]
        if candidates and item["verdict"] == "out-of-scope":
            lines.append(f"{verdict_line(item)}. Check it by hand; the nearest past cases are below.")
        elif candidates:
            lines.append(f"{verdict_line(item)} — confidence {candidates[0]['confidence']:.2f} per piece")
        elif item["verdict"] == "out-of-scope":  # no word the model knows: said as plainly as a guess would be
            lines.append(f"{BADGES['out-of-scope']}: this alert is {UNLIKE_HISTORY}; no recommendation.")
        if item.get("marked_wrong"):
            lines += ["", marked_line(item["marked_wrong"])]
        if item["similar"]:
            lines += ["", "| past alert | action taken | similarity |", "|---|---|---|"]
            lines += [f"| {as_written(c['alert'])} | {as_written(c['action'])} | {c['similarity']:.2f} |"
                      for c in item["similar"]]
        if len(candidates) > 1 and item["verdict"] != "out-of-scope":  # no list of guesses that looks like advice
            lines += ["", "| # | alternative | score | confidence | share |", "|---|---|---|---|---|"]
            lines += [f"| {k} | {as_written(c['text'])} | {c['score']:.3f} | {c['confidence']:.2f} | {c['share']:.1%} |"
                      for k, c in enumerate(candidates, 1)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + f"\n\n<small>{TRUST_NOTE}. {CONFIDENCE_NOTE}</small>"


def engine_markdown(data: dict[str, Any]) -> str:
    """RUL, health and its probabilities, then one line per alert with its recommendation (and, when ``data``
    names it, the translator that gave them)."""
    probabilities = ", ".join(f"{k} {v:.0%}" for k, v in data["health_probabilities"].items())
    lines = [f"### Engine {data['unit']} ({as_written(data['source'])}): RUL {data['rul']:.0f} cycles, "
             f"**{data['health']}**", f"Health state probabilities: {probabilities}.", ""]
    if data["alerts"] and "translator" in data:
        lines[-1:-1] = [answered_by(data["translator"], data["beam_size"])]
    lines += [f"**Warning:** {as_written(warning)}." for warning in data.get("warnings", [])]
    if data["note"]:
        lines.append(f"No alerts: {data['note']}.")
    elif not data["alerts"]:
        lines.append("No sensor deviates enough from its early cycles to raise an alert.")
    for alert, rec in zip(data["alerts"], data["recommendations"] or [None] * len(data["alerts"]), strict=True):
        advice = f" → {verdict_line(rec)}" if rec and rec["recommendations"] else ""
        advice += f" {marked_line(rec['marked_wrong'])}" if rec and rec.get("marked_wrong") else ""
        lines.append(f"- {as_written(alert['line'])} (peak at cycle {alert['cycle']}){advice}")
    return "\n".join(lines)

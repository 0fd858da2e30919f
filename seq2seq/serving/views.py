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

from seq2seq.recommender import Recommendation
from seq2seq.rul.monitor import EngineReport

CONFIDENCE_NOTE = ("score = log P(recommendation | alert), divided by GNMT's length penalty under beam search; "
                   "confidence = per-piece probability exp(log P / pieces), the geometric mean of the probabilities "
                   "of the output pieces; share = the candidate's part of the n-best list's probability mass")


def recommendation_json(recommendation: Recommendation) -> dict[str, Any]:
    log_probs = [c.log_prob for c in recommendation.candidates]
    top = max(log_probs, default=0.0)
    mass = sum(math.exp(lp - top) for lp in log_probs)
    return {
        "alert": recommendation.alert, "source_pieces": recommendation.source_pieces,
        "warning": recommendation.warning,
        "recommendations": [{
            "text": c.text, "score": c.score, "target_pieces": c.target_pieces,
            "confidence": math.exp(lp / max(1, len(c.target_pieces))), "share": math.exp(lp - top) / mass,
            "attention": np.round(c.attention.float().numpy(), 5).tolist(),  # (target pieces, source pieces)
        } for c, lp in zip(recommendation.candidates, log_probs, strict=True)],
    }


def engine_json(report: EngineReport, source: str) -> dict[str, Any]:
    return {
        "source": source, "unit": report.unit, "rul": report.rul, "health": report.health,
        "health_probabilities": report.health_probabilities, "window_cycles": report.window_cycles,
        "attention": report.attention, "deviations": report.deviations,
        "alerts": [{"line": alert.line(report.health), "phrase": alert.phrase, "symbol": alert.symbol,
                    "direction": alert.direction, "strength": alert.strength, "deviation": alert.deviation,
                    "cycle": alert.cycle} for alert in report.alerts],
        "recommendations": [recommendation_json(r) for r in report.recommendations],
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def alerts_markdown(alerts: list[dict[str, Any]]) -> str:
    """Per alert: the best recommendation with its confidence, then (n-best > 1) a table of the alternatives."""
    blocks = []
    for i, item in enumerate(alerts, 1):
        lines = [f"#### {i}. {_cell(item['alert'])}"]
        if item["warning"]:
            lines.append(f"*{item['warning']}*")
        candidates = item["recommendations"]
        if candidates:
            best = candidates[0]
            lines.append(f"**{_cell(best['text'])}** — confidence {best['confidence']:.2f} per piece")
        if len(candidates) > 1:
            lines += ["", "| # | alternative | score | confidence | share |", "|---|---|---|---|---|"]
            lines += [f"| {k} | {_cell(c['text'])} | {c['score']:.3f} | {c['confidence']:.2f} | {c['share']:.1%} |"
                      for k, c in enumerate(candidates, 1)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + f"\n\n<small>{CONFIDENCE_NOTE}</small>"


def engine_markdown(data: dict[str, Any]) -> str:
    """RUL, health and its probabilities, then one line per alert with its recommendation."""
    probabilities = ", ".join(f"{k} {v:.0%}" for k, v in data["health_probabilities"].items())
    lines = [f"### Engine {data['unit']} ({_cell(data['source'])}): RUL {data['rul']:.0f} cycles, "
             f"**{data['health']}**", f"Health state probabilities: {probabilities}.", ""]
    if not data["alerts"]:
        lines.append("No sensor deviates enough from its early cycles to raise an alert.")
    for alert, rec in zip(data["alerts"], data["recommendations"] or [None] * len(data["alerts"]), strict=True):
        advice = f" → **{_cell(rec['recommendations'][0]['text'])}**" if rec and rec["recommendations"] else ""
        lines.append(f"- {_cell(alert['line'])} (peak at cycle {alert['cycle']}){advice}")
    return "\n".join(lines)

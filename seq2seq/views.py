"""JSON views of recommendations and engine reports: what the UI's API returns and its pages render.

Attention matrices travel as nested lists (target pieces x source pieces), rounded to 5 decimals.
``confidence`` is the per-piece probability exp(log P / pieces); ``share`` is a candidate's part of
the n-best list's probability mass.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from seq2seq.config import SearchConfig
from seq2seq.pipeline import EngineReport
from seq2seq.recommender import Candidate, Recommendation
from seq2seq.search import length_penalty


def log_probability(candidate: Candidate, search: SearchConfig) -> float:
    """log P(y|x): beam search divides it by GNMT's length penalty, greedy search does not."""
    if search.beam_size == 1:
        return candidate.score
    return candidate.score * length_penalty(len(candidate.target_pieces), search.length_penalty)


def recommendation_json(recommendation: Recommendation, search: SearchConfig) -> dict[str, Any]:
    log_probs = [log_probability(c, search) for c in recommendation.candidates]
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


def engine_json(report: EngineReport, source: str, search: SearchConfig) -> dict[str, Any]:
    return {
        "source": source, "unit": report.unit, "rul": report.rul, "health": report.health,
        "health_probabilities": report.health_probabilities, "window_cycles": report.window_cycles,
        "attention": report.attention, "deviations": report.deviations,
        "alerts": [{"line": alert.line(report.health), "phrase": alert.phrase, "symbol": alert.symbol,
                    "direction": alert.direction, "strength": alert.strength, "deviation": alert.deviation,
                    "cycle": alert.cycle} for alert in report.alerts],
        "recommendations": [recommendation_json(r, search) for r in report.recommendations],
    }

"""What the UI's pages say about trust: a verdict badge, the past cases, and no advice out of scope."""

from __future__ import annotations

import torch

from seq2seq.memory import Case
from seq2seq.recommender import Candidate, Recommendation
from seq2seq.serving.views import alerts_markdown, recommendation_json, translation_json
from seq2seq.trust import NOT_ADVICE, UNLIKE_HISTORY


def recommendation(verdict: str, texts=("inspect pump bearings", "replace pump seal")) -> Recommendation:
    candidates = [Candidate(text, -0.5 - k, ["\u2581inspect", "\u2581pump", "</s>"],
                            torch.full((3, 2), 0.5), -0.5 - k) for k, text in enumerate(texts)]
    return Recommendation("pump vibration high", ["\u2581pump", "</s>"], candidates, None, 0.9 if verdict ==
                          "confident" else 0.1, verdict, [Case("pump vibration high", "inspect pump bearings", 1.0)])


def test_a_confident_answer_shows_its_badge_the_past_cases_and_the_alternatives():
    page = alerts_markdown([recommendation_json(recommendation("confident"))])
    assert "**CONFIDENT** (trust 0.90): **inspect pump bearings**" in page
    assert "| pump vibration high | inspect pump bearings | 1.00 |" in page
    assert "| 2 | replace pump seal |" in page


def test_an_out_of_scope_answer_gives_no_advice_only_a_struck_through_guess_and_the_past_cases():
    page = alerts_markdown([recommendation_json(recommendation("out-of-scope"))])
    assert "**OUT OF SCOPE**" in page and "~~inspect pump bearings~~" in page
    assert UNLIKE_HISTORY in page and NOT_ADVICE.capitalize() in page  # the words translate and rul alerts use
    assert "**inspect pump bearings**" not in page and "replace pump seal" not in page
    assert "| pump vibration high | inspect pump bearings | 1.00 |" in page


def test_json_views_carry_trust_verdict_past_cases_and_word_attention():
    item = recommendation_json(recommendation("uncertain"))
    assert (item["trust"], item["verdict"]) == (0.1, "uncertain")
    assert item["similar"] == [{"alert": "pump vibration high", "action": "inspect pump bearings", "similarity": 1.0}]
    first = item["recommendations"][0]
    assert first["source_words"] == ["pump", "</s>"] and first["target_words"] == ["inspect", "pump", "</s>"]
    assert first["word_attention"] == [[0.5, 0.5]] * 3
    line = translation_json(recommendation("uncertain"))
    assert (line["recommendation"], line["verdict"], line["alternatives"][0]["text"]) == (
        "inspect pump bearings", "uncertain", "replace pump seal")

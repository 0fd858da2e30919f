"""What the UI's pages say about trust: a verdict badge, the past cases, and no advice out of scope."""

from __future__ import annotations

from html import unescape

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from seq2seq.memory import Case
from seq2seq.recommender import Candidate, Recommendation
from seq2seq.serving.figures import recommendation_figures
from seq2seq.serving.views import alerts_markdown, as_written, engine_markdown, recommendation_json, translation_json
from seq2seq.trust import NOT_ADVICE, UNLIKE_HISTORY, as_shown


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


def test_an_answer_other_than_the_history_s_for_this_very_alert_says_what_the_history_did():
    """The README's own screenshot: CONFIDENT "replace t30 sensor and hpc harness", its past case of similarity 1.00
    "replace worn hpc blades", and nothing to say that the two disagree."""
    item = recommendation_json(recommendation("confident", texts=("replace pump seal",)))
    line = " — but the history answered this very alert with: *inspect pump bearings*"
    assert line in alerts_markdown([item])
    assert line in engine_markdown({"unit": 1, "source": "bundled", "rul": 50.0, "health": "degrading",
                                    "health_probabilities": {"degrading": 1.0}, "note": "", "recommendations": [item],
                                    "alerts": [{"line": "degrading: pump vibration high", "cycle": 9}]})
    assert "the history answered" not in alerts_markdown([recommendation_json(recommendation("confident"))])
    typed = recommendation_json(recommendation("confident", texts=("Inspect  PUMP bearings",)))  # case aside
    assert "the history answered" not in alerts_markdown([typed])
    near = {**item, "similar": [{**item["similar"][0], "similarity": 0.9}]}  # a similar alert, not this one
    assert "the history answered" not in alerts_markdown([near])


def test_an_out_of_scope_answer_gives_no_advice_only_a_struck_through_guess_and_the_past_cases():
    page = alerts_markdown([recommendation_json(recommendation("out-of-scope"))])
    assert "**OUT OF SCOPE**" in page and "~~inspect pump bearings~~" in page
    assert UNLIKE_HISTORY in page and NOT_ADVICE.capitalize() in page  # the words translate and rul alerts use
    assert "**inspect pump bearings**" not in page and "replace pump seal" not in page
    assert "| pump vibration high | inspect pump bearings | 1.00 |" in page


def test_an_alert_with_no_known_word_is_called_out_of_scope_with_no_recommendation():
    unread = Recommendation("жжж", [], [], "no word of the alert is known to the model; no recommendation", 0.0,
                            "out-of-scope")
    page = alerts_markdown([recommendation_json(unread)])
    assert f"**OUT OF SCOPE**: this alert is {UNLIKE_HISTORY}; no recommendation." in page


def test_an_answer_marked_wrong_before_is_said_beside_it_with_what_was_done_instead():
    item = {**recommendation_json(recommendation("confident")),
            "marked_wrong": {"times": 2, "last": "2026-11-29T13:00:00.000+00:00", "corrections": ["fix *A*", "B"]}}
    page = alerts_markdown([item])
    assert ("**Marked wrong** for this alert by technicians 2 times (last 2026-11-29); what they did instead: "
            "*fix \\*A\\*; B*.") in page
    once = {**item, "marked_wrong": {"times": 1, "last": "2026-11-29", "corrections": []}}
    assert "by technicians once (last 2026-11-29)." in alerts_markdown([once])
    assert "Marked wrong" not in alerts_markdown([{**item, "marked_wrong": None}])
    engine = engine_markdown({"unit": 1, "source": "bundled", "rul": 50.0, "health": "degrading",
                              "health_probabilities": {"degrading": 1.0}, "note": "", "recommendations": [item],
                              "alerts": [{"line": "degrading: pump vibration high", "cycle": 9}]})
    assert "**inspect pump bearings** **Marked wrong** for this alert by technicians 2 times" in engine


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


def test_an_engine_too_short_to_judge_says_why_it_raises_no_alert():
    data = {"unit": 7, "source": "short.txt", "rul": 129.0, "health": "healthy",
            "health_probabilities": {"healthy": 1.0}, "alerts": [], "recommendations": [],
            "note": "only 3 cycles of history: ..."}
    assert "No alerts: only 3 cycles of history" in engine_markdown(data)
    assert "No sensor deviates" in engine_markdown({**data, "note": ""})


def test_the_engine_tab_shows_each_alerts_trust_and_no_advice_out_of_scope():
    data = {"unit": 2, "source": "bundled", "rul": 19.0, "health": "critical",
            "health_probabilities": {"critical": 1.0},
            "alerts": [{"line": "critical: t30 up", "cycle": 90}, {"line": "critical: t50 up", "cycle": 91}],
            "recommendations": [recommendation_json(recommendation(v)) for v in ("confident", "out-of-scope")],
            "note": ""}
    first, second = engine_markdown(data).splitlines()[-2:]
    assert first.endswith("→ **CONFIDENT** (trust 0.90): **inspect pump bearings**")
    assert "**OUT OF SCOPE**" in second and "~~inspect pump bearings~~" in second and "trust" not in second


def test_out_of_scope_guesses_are_marked_as_such_where_no_verdict_stands_beside_them():
    guess, advice = recommendation("out-of-scope"), recommendation("confident")
    titles = [" ".join(figure.axes[0].get_title().split()) for figure in recommendation_figures(guess)]  # wrapped
    assert titles == [f"1. [out of scope: {NOT_ADVICE}] inspect pump bearings",
                      f"2. [out of scope: {NOT_ADVICE}] replace pump seal"]
    assert recommendation_figures(advice)[0].axes[0].get_title() == "1. inspect pump bearings"
    assert as_shown("replace pump seal", "uncertain") == "replace pump seal"


@given(st.text(st.characters(codec="ascii", categories=["L", "N", "P", "S", "Zs"]), max_size=40).filter(str.strip))
@settings(max_examples=300, deadline=None)
def test_typed_text_shows_as_written_never_as_markup(text):
    html = MarkdownIt("commonmark").render(as_written(text)).strip()  # a CommonMark renderer, as the page's is
    assert html.startswith("<p>") and html.endswith("</p>")
    inner = html.removeprefix("<p>").removesuffix("</p>")
    assert "<" not in inner and unescape(inner) == text.strip()  # no element, no link, image or emphasis: the text


def test_the_alert_s_words_in_the_json_and_the_heatmaps_are_as_typed_not_as_the_model_reads_them():
    """A model that reads lower case showed 'pump' for a technician's 'PUMP'."""
    typed = Recommendation("PUMP  Vibration", ["\u2581pump", "\u2581vibration", "</s>"],
                           [Candidate("inspect pump", -0.5, ["\u2581inspect", "\u2581pump", "</s>"],
                                      torch.full((3, 3), 1 / 3), -0.5)], None, 0.9, "confident", [])
    assert recommendation_json(typed)["recommendations"][0]["source_words"] == ["PUMP", "Vibration", "</s>"]
    figure = recommendation_figures(typed)[0]
    assert [label.get_text() for label in figure.axes[0].get_xticklabels()] == ["PUMP", "Vibration", "(end)"]



def test_attention_in_the_json_is_rounded_to_5_places_as_written_not_as_float32_prints_them():
    """Rounded in float32, 0.33333 printed as 0.3333300054073334: 17 digits, twice /recommend's bytes."""
    third = Recommendation("pump low", ["\u2581pump", "\u2581low", "</s>"],
                           [Candidate("inspect pump", -0.5, ["\u2581inspect", "\u2581pump", "</s>"],
                                      torch.full((3, 3), 1 / 3), -0.5)], None, 0.9, "confident", [])
    first = recommendation_json(third)["recommendations"][0]
    assert {w for row in first["attention"] for w in row} == {0.33333}

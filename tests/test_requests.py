"""The checks every UI request goes through (seq2seq/serving/requests.py), without a server."""

from __future__ import annotations

import gradio as gr
import pytest

from seq2seq.serving.requests import alert_lines, unit_number, whole_or_none


@pytest.mark.parametrize("text, alerts", [
    ("pump low\r\nvalve stuck\rbelt worn\n\n  egt high  ", ["pump low", "valve stuck", "belt worn", "egt high"]),
    # Line ends are those of an incident log: these stay inside one alert, as in a Batch row.
    ("pump\u2028low", ["pump\u2028low"]),
    ("pump\u2029low\u3000", ["pump\u2029low"]),  # a wide space at the end is stripped like a space
    ("pump\tlow", ["pump\tlow"]),  # tabs are typed (and pasted from tables)
    ("\u05d0 \u200fpump low", ["\u05d0 \u200fpump low"]),  # a right-to-left mark, as Hebrew keyboards type it
])
def test_alerts_are_the_non_blank_lines_split_as_an_incident_log_splits_them(text, alerts):
    assert alert_lines(text, 50, 10_000) == alerts


@pytest.mark.parametrize("text, message", [
    ("belt worn\npump \x00low", r"Alert 2 holds a control character \(U\+0000\) at character 6"),
    ("\x1b[31mpump low", r"Alert 1 holds a control character \(U\+001B\) at character 1"),
    ("pump\x0blow", r"U\+000B"),
    # At an alert's ends too, where Python strips these as spaces; the place counted in the line as typed.
    ("pump low\x85", r"Alert 1 holds a control character \(U\+0085\) at character 9"),
    ("\x1fegt high", r"Alert 1 holds a control character \(U\+001F\) at character 1"),
    ("ok\n     egt\x1b[31m", r"Alert 2 holds a control character \(U\+001B\) at character 9"),
    ("ok\n\x1c", r"Alert 2 holds a control character \(U\+001C\)"),
    ("pump \ud800 low", r"Alert 1 is not valid Unicode \(a lone surrogate at character 6\)"),
    ("ok\nvalve \u202eenilno", r"Alert 2 holds a bidirectional override \(U\+202E\) at character 7, which would "
                             "reorder"),
    ("\u2066egt high\u2069", r"Alert 1 holds a bidirectional override \(U\+2066\) at character 1"),
    (" \n \r\n", "Type at least one alert"),
    (["pump low"], "Alerts must be text"),
    ("a\n" * 51, "Too much input: 51 alerts and 102 characters, and a request takes at most 50 alerts and 10,000"),
    ("a" * 10_001, "Too much input: 1 alert and 10,001 characters"),
])
def test_alerts_no_keyboard_types_are_refused_in_one_line_naming_the_alert(text, message):
    with pytest.raises(gr.Error, match=message) as refused:
        alert_lines(text, 50, 10_000)
    assert "\n" not in refused.value.message


@pytest.mark.parametrize("value, number", [
    (3, 3), (3.0, 3), ("3", 3), ("3.0", 3), (-1, -1),
    (2.7, None), ("2.5", None), (True, None), (float("nan"), None), (float("inf"), None), ("many", None),
    ([3], None), (None, None),
])
def test_a_whole_number_is_never_rounded_from_a_fraction(value, number):
    assert whole_or_none(value) == number


def test_an_engine_unit_with_a_fraction_is_refused_not_truncated():
    assert unit_number(None) is None and unit_number("") is None and unit_number(7.0) == 7
    with pytest.raises(gr.Error, match="An engine unit must be a whole number"):
        unit_number(1.5)

"""The pictures: alignment heatmaps (which alert words each recommendation word attended to, or the
pieces underneath) and an engine's RUL trend, temporal attention and sensor deviations.

Built with matplotlib's object API (``matplotlib.figure.Figure``), never pyplot's global state, so
the UI can show the returned figure and a test can inspect its axes.
"""

from __future__ import annotations

import textwrap
from functools import cache

from matplotlib import font_manager
from matplotlib.figure import Figure

from seq2seq.recommender import Candidate, Recommendation
from seq2seq.rul.monitor import EngineReport
from seq2seq.tokenizer import EOS_PIECE, piece_label
from seq2seq.trust import as_shown
from seq2seq.words import word_attention

END_LABEL = "(end)"  # the end mark "</s>" on a word-level heatmap's axes
# characters of an axis label at most: a 500-letter word took the whole figure and left the matrix a thin strip
MAX_LABEL = 24
NO_GLYPH = "\u25a1"  # drawn for a character the font lacks (a CJK word, an emoji), as matplotlib would draw it


def drawable(text: str) -> str:
    """``text`` with each character the figures' font has no glyph for drawn as a box: matplotlib drew a box too,
    and warned in two lines on stderr for every such character (a CLI job's log, the app's)."""
    return text if text.isascii() else "".join(c if _has_glyph(c) else NO_GLYPH for c in text)


@cache
def _has_glyph(character: str) -> bool:
    if character.isspace():
        return True
    font = font_manager.get_font(font_manager.findfont(font_manager.FontProperties()))
    return font.get_char_index(ord(character)) != 0


def label(text: str) -> str:
    """An axis label: drawable, and a word longer than MAX_LABEL cut, its end marked."""
    return drawable(text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "\u2026")


def heatmap_figure(source_pieces: list[str], candidate: Candidate, title: str | None = None,
                   words: bool = True, alert: str | None = None) -> Figure:
    """Recommendation words (rows) x alert words (columns), one cell per attention weight, with a colour
    bar; ``words=False`` shows the pieces the model works with (seq2seq.words)."""
    if words:
        columns, rows, weights = word_attention(source_pieces, candidate.target_pieces,
                                                candidate.attention.float().numpy(), alert)  # (Tw, Sw)
        # a technician reads words: the end mark, a word of its own (attention rests there), is named as one
        columns, rows = ([END_LABEL if w == EOS_PIECE else w for w in axis] for axis in (columns, rows))
        unit = "words"
    else:
        weights = candidate.attention.float().numpy()  # (T, S)
        columns, rows = [piece_label(p) for p in source_pieces], [piece_label(p) for p in candidate.target_pieces]
        unit = "pieces"
    columns, rows = [label(c) for c in columns], [label(r) for r in rows]
    height, width = weights.shape
    inches = max(4.0, 0.55 * width + 2.0)
    figure = Figure(figsize=(inches, max(2.5, 0.4 * height + 1.5)), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(width), labels=columns, rotation=60, ha="right")
    axes.set_yticks(range(height), labels=rows)
    axes.set_xlabel(f"alert {unit}")
    axes.set_ylabel(f"recommendation {unit}")
    # A long recommendation wraps, or its title runs past a narrow figure's edges (9 pt: ~12 characters an inch);
    # the title's own lines stay lines.
    lines = drawable(title or candidate.text).splitlines()
    axes.set_title("\n".join(textwrap.fill(line, width=int(12 * inches)) for line in lines), fontsize=9)
    figure.colorbar(image, ax=axes, label="attention weight")
    return figure


def recommendation_figures(recommendation: Recommendation, words: bool = True) -> list[Figure]:
    """One heatmap per candidate (the shown output first, then each n-best alternative), each titled with its
    text, marked as a guess out of scope."""
    return [heatmap_figure(recommendation.source_pieces, candidate,
                           f"{i + 1}. {as_shown(candidate.text, recommendation.verdict)}", words, recommendation.alert)
            for i, candidate in enumerate(recommendation.candidates)]


def attention_figure(report: EngineReport) -> Figure:
    """Top: predicted RUL over the history with the window shaded. Bottom: temporal attention over the
    last window, with the alerting sensors' normalised trends on a second axis."""
    figure = Figure(figsize=(8, 6), layout="constrained")
    trend_axes, window_axes = figure.subplots(2, 1)
    cycles, ruls = zip(*report.rul_trend, strict=True)
    trend_axes.plot(cycles, ruls, color="tab:blue", label="predicted RUL")
    trend_axes.axvspan(report.window_cycles[0], report.window_cycles[-1], color="tab:orange", alpha=0.15,
                       label="last window")
    trend_axes.set(xlabel="cycle", ylabel="RUL (cycles)",
                   title=f"engine {report.unit}: RUL {report.rul:.0f} cycles, {report.health}")
    trend_axes.legend(loc="upper right", fontsize=8)
    window_axes.bar(report.window_cycles, report.attention, color="tab:orange", alpha=0.6, label="attention")
    window_axes.set(xlabel="cycle", ylabel="attention weight")
    sensor_axes = window_axes.twinx()
    for alert in report.alerts:
        sensor_axes.plot(report.window_cycles, report.window_values[alert.symbol], label=alert.symbol)
    sensor_axes.set_ylabel("normalised sensor value")
    if report.alerts:
        sensor_axes.legend(loc="upper left", fontsize=8)
    return figure


def deviation_figure(report: EngineReport) -> Figure:
    """Attention-weighted deviation of every kept sensor from the engine's early cycles; alerts in red."""
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    axes = figure.add_subplot()
    symbols = list(report.deviations)
    alerting = {alert.symbol for alert in report.alerts}
    colours = ["tab:red" if s in alerting else "tab:gray" for s in symbols]
    axes.barh(symbols, [report.deviations[s] for s in symbols], color=colours)
    axes.axvline(0.0, color="black", linewidth=0.8)
    axes.invert_yaxis()
    axes.set(xlabel="weighted deviation (training standard deviations)",
             title=f"engine {report.unit}: what the alerts came from")
    return figure

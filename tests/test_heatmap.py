"""Heatmap figures show exactly the attention matrix, labelled with the pieces."""

from __future__ import annotations

import numpy as np
import torch

from seq2seq.recommender import Candidate, Recommendation
from seq2seq.serving.figures import MAX_LABEL, NO_GLYPH, heatmap_figure, recommendation_figures


def candidate(rows: int, cols: int, text: str = "inspect pump bearings") -> Candidate:
    weights = torch.softmax(torch.randn(rows, cols, generator=torch.Generator().manual_seed(0)), dim=-1)
    return Candidate(text, -0.5, [f"\u2581t{i}" for i in range(rows - 1)] + ["</s>"], weights, -0.5)


def test_heatmap_cells_are_the_attention_matrix_with_piece_labels():
    source = ["\u2581pump", "\u2581vibration", "\u2581high", "</s>"]
    cand = candidate(5, 4)
    figure = heatmap_figure(source, cand)
    axes, colorbar = figure.axes
    np.testing.assert_allclose(axes.images[0].get_array(), cand.attention.numpy())
    assert [t.get_text() for t in axes.get_xticklabels()] == ["pump", "vibration", "high", "(end)"]
    assert [t.get_text() for t in axes.get_yticklabels()] == ["t0", "t1", "t2", "t3", "(end)"]
    assert colorbar.get_ylabel() == "attention weight"
    pieces = heatmap_figure(source, cand, words=False).axes[0]  # the pieces the model reads, its end mark too
    assert [t.get_text() for t in pieces.get_xticklabels()] == ["pump", "vibration", "high", "</s>"]


def test_one_figure_per_candidate_in_order():
    rec = Recommendation("pump vibration high", ["a", "b", "</s>"], [candidate(3, 3, "x"), candidate(2, 3, "y")])
    figures = recommendation_figures(rec)
    assert [f.axes[0].get_title() for f in figures] == ["1. x", "2. y"]


def test_a_long_recommendation_s_title_wraps_within_its_figure():
    text = " ".join(["replace"] * 40)
    figure = heatmap_figure(["\u2581pump", "</s>"], candidate(3, 2, text))
    lines = figure.axes[0].get_title().split("\n")
    assert len(lines) > 1 and " ".join(lines) == text
    assert max(len(line) for line in lines) <= 12 * figure.get_figwidth()


def test_a_title_s_own_lines_stay_lines_and_each_wraps():
    # The Engine-health tab titles each heatmap "Alert k: <alert>" over the recommendation
    text = " ".join(["replace"] * 40)
    figure = heatmap_figure(["\u2581pump", "</s>"], candidate(3, 2, text), f"Alert 2: pump vibration high\n{text}")
    lines = figure.axes[0].get_title().split("\n")
    assert lines[0] == "Alert 2: pump vibration high" and " ".join(lines[1:]) == text and len(lines) > 2


def test_a_very_long_word_is_cut_in_its_label_and_leaves_the_matrix_its_width():
    """A 500-letter word's label took the whole figure; the matrix shrank to a strip."""
    word = "z" * 500
    figure = heatmap_figure(["\u2581pump", "\u2581" + word, "</s>"], candidate(3, 3), words=False)
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[0] == "pump" and labels[1] == "z" * (MAX_LABEL - 1) + "\u2026" and len(labels[1]) == MAX_LABEL


def test_characters_the_font_lacks_are_drawn_as_boxes_without_a_warning(recwarn):
    """matplotlib drew them as boxes and warned in two lines on stderr for each (a CLI job's log, the app's)."""
    import io
    figure = heatmap_figure(["\u2581egt", "\u2581高温", "\u2581\U0001f525", "\u2581élevée", "</s>"],
                            candidate(2, 5, "replace 高 sensor"), words=False)
    figure.savefig(io.BytesIO(), format="png")
    assert not [w for w in recwarn if "Glyph" in str(w.message)]
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[:4] == ["egt", NO_GLYPH * 2, NO_GLYPH, "élevée"]  # what the font has stays as typed
    assert figure.axes[0].get_title() == f"replace {NO_GLYPH} sensor"

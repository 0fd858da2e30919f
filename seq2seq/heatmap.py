"""Alignment heatmaps: which alert pieces each recommendation piece attended to.

Built with matplotlib's object API (``matplotlib.figure.Figure``), never pyplot's global state, so
the UI can show the returned figure and a test can inspect its axes.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from seq2seq.recommender import Candidate, Recommendation


def heatmap_figure(source_pieces: list[str], candidate: Candidate, title: str | None = None) -> Figure:
    """Target pieces (rows) x source pieces (columns), one cell per attention weight, with a colour bar."""
    weights = candidate.attention.float().numpy()  # (L, S)
    rows, cols = weights.shape
    figure = Figure(figsize=(max(4.0, 0.55 * cols + 2.0), max(2.5, 0.4 * rows + 1.5)), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(cols), labels=[_label(p) for p in source_pieces], rotation=60, ha="right")
    axes.set_yticks(range(rows), labels=[_label(p) for p in candidate.target_pieces])
    axes.set_xlabel("alert pieces")
    axes.set_ylabel("recommendation pieces")
    axes.set_title(title or candidate.text, fontsize=9)
    figure.colorbar(image, ax=axes, label="attention weight")
    return figure


def recommendation_figures(recommendation: Recommendation) -> list[Figure]:
    """One heatmap per candidate (the shown output first, then each n-best alternative)."""
    return [heatmap_figure(recommendation.source_pieces, candidate, f"{i + 1}. {candidate.text}")
            for i, candidate in enumerate(recommendation.candidates)]


def _label(piece: str) -> str:
    """SentencePiece marks a word start with U+2581; show it as a plain space-free label."""
    return piece.replace("\u2581", "") or "\u2423"

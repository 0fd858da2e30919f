"""Serving and jobs, built on the translator and the sensor side: whole incident logs translated from
files (``batch``, split across processes by ``sharding``), the JSON and Markdown views and the
figures the UI shows, the default models, and the smoke test of the served UI.
"""

from seq2seq.serving.batch import BatchSummary, translate_file
from seq2seq.serving.defaults import (
           DEFAULT_DIR,
           bundled_engines,
           default_rul_model,
           default_translator,
           load_translators,
)
from seq2seq.serving.figures import attention_figure, deviation_figure, heatmap_figure, recommendation_figures
from seq2seq.serving.incident_log import read_columns
from seq2seq.serving.views import CONFIDENCE_NOTE, alerts_markdown, engine_json, engine_markdown, recommendation_json

__all__ = ["CONFIDENCE_NOTE", "DEFAULT_DIR", "BatchSummary", "alerts_markdown", "attention_figure", "bundled_engines",
           "default_rul_model", "default_translator", "deviation_figure", "engine_json", "engine_markdown",
           "heatmap_figure", "load_translators", "read_columns", "recommendation_figures", "recommendation_json",
           "translate_file"]

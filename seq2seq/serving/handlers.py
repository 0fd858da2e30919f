"""What the technician UI does with each event: validate, call the models, shape the results.

``gradio_app.py`` lays the page out and wires these handlers to its components. Limits on one
request live here because the handlers enforce them; a user's failure comes back as a ``gr.Error``
with a one-line message (``user_errors``), never as a traceback.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import gradio as gr
from matplotlib.figure import Figure

from seq2seq.config import SearchConfig
from seq2seq.config_checks import shown_number
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.rul.alerts import MAX_ALERTS as ENGINE_ALERTS
from seq2seq.rul.cmapss import Engine, read_cmapss, units_held
from seq2seq.rul.monitor import EngineMonitor, EngineReport
from seq2seq.serving import views
from seq2seq.serving.batch import translate_file
from seq2seq.serving.batcher import MicroBatcher, retry_after
from seq2seq.serving.decoder_process import DecoderProcess
from seq2seq.serving.destinations import model_digest
from seq2seq.serving.feedback_panel import FeedbackPanel
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.serving.figures import attention_figure, deviation_figure, heatmap_figure, recommendation_figures
from seq2seq.serving.gate import Refused
from seq2seq.serving.incident_log import read_columns
from seq2seq.serving.marked import mark_wrong_answers
from seq2seq.serving.requests import (
    alert_lines,
    event_listened,
    refusal,
    shown_first,
    unit_number,
    uploaded,
    user_errors,
    whole_or_none,
)
from seq2seq.serving.shown import ShownRecommendations
from seq2seq.trust import as_shown

MAX_ALERTS, MAX_CHARS = 50, 10_000  # per /recommend request; files go to the Batch tab
MAX_BEAM, MAX_N_BEST = 10, 5
LEVELS = ("words", "pieces")  # what a heatmap's rows and columns are: words by default
FILE_MAX_AGE_S = 3600  # batch results and uploads are kept this long, then deleted (all at shutdown)


def plot_updates(figures: list[Figure], slots: int, labels: list[str] | None = None) -> list[gr.Plot]:
    """Fill the first plot slots with ``figures`` (and ``labels``) and hide the others: an empty frame under an
    engine without alerts read as a heatmap that failed to draw."""
    updates = []
    for k in range(slots):
        label = {"label": labels[k]} if labels and k < len(labels) else {}
        updates.append(gr.Plot(value=figures[k] if k < len(figures) else None, visible=k < len(figures), **label))
    return updates


class JobCancelled(Exception):
    """Ends a file job in its thread: its event was cancelled (nobody waits for it any more), or the app stops."""


class Handlers:
    """The functions behind the events; gradio_app.py gives each kind of model call its own slot."""

    def __init__(self, translators: dict[str, Recommender], monitor: EngineMonitor | None,
                 engines: list[Engine], feedback: FeedbackStore | None = None, decoder_process: bool = False) -> None:
        """``feedback``: where /feedback and the verdict buttons store records (none: they refuse politely);
        ``decoder_process``: /recommend's batches are decoded in a child process per translator
        (seq2seq/serving/decoder_process.py), not on this process's interpreter lock."""
        if not translators:
            raise ValueError("the UI needs at least one translator")
        self.translators, self.monitor = translators, monitor
        self.shown = ShownRecommendations()
        self.feedback_panel = FeedbackPanel(feedback, self.shown)  # /feedback and the pages' verdict buttons
        self.digests = {name: model_digest(recommender) for name, recommender in translators.items()}
        self.engines = {engine.unit: engine for engine in engines}
        # /recommend calls from many technicians at once share decoder passes (seq2seq/serving/batcher.py)
        self.decoders = {name: DecoderProcess(recommender) for name, recommender in translators.items()
                         if decoder_process}
        self.batchers = {name: MicroBatcher(self.decoders.get(name, recommender))
                         for name, recommender in translators.items()}
        self._work = tempfile.TemporaryDirectory(prefix="maintenance-app-")  # removed at exit or close()
        self.stopping = threading.Event()  # set by close(): running file jobs stop after the chunk they are on
        self.work_dir = Path(self._work.name)

    def close(self) -> None:
        """Stop the file jobs and micro-batchers and remove the batch results' folder now rather than at exit.
        A file job's thread would otherwise hold the process's exit until its whole file is done (a SIGTERM
        waited 226 s for a 60,000-row log): longer than a process supervisor waits before it kills."""
        self.stopping.set()
        for batcher in self.batchers.values():
            batcher.close()
        for decoder in self.decoders.values():
            decoder.close()
        self._work.cleanup()

    def health(self, queued: int) -> dict[str, Any]:
        """What GET /health answers (seq2seq/serving/gate.py), given how many events wait in Gradio's queue."""
        decoding = sum(batcher.waiting for batcher in self.batchers.values())
        rate = sum(batcher.rate for batcher in self.batchers.values())  # requests answered per second, lately
        return {"status": "ok", "translators": list(self.translators), "rul_model": self.monitor is not None,
                "queue": queued, "decoding": decoding,
                "decoder_processes": sum(decoder.alive for decoder in self.decoders.values()),
                "retry_after_s": retry_after(queued + decoding, rate)}

    def _new_output_dir(self) -> Path:
        """A fresh folder for one batch result; results older than FILE_MAX_AGE_S go (Gradio serves its copy)."""
        for old in self.work_dir.iterdir():
            if time.time() - old.stat().st_mtime > FILE_MAX_AGE_S:
                shutil.rmtree(old, ignore_errors=True)
        return Path(tempfile.mkdtemp(dir=self.work_dir))

    def translator_name(self, name: str | None) -> str:
        """``name`` checked; None (a program that left it out) is the first translator, the page's default."""
        if name is None:
            return next(iter(self.translators))
        if not isinstance(name, str) or name not in self.translators:
            raise refusal(f"Unknown translator {name!r}; choose one of: {', '.join(self.translators)}")
        return name

    def translator(self, name: str | None) -> Recommender:
        return self.translators[self.translator_name(name)]

    def search(self, recommender: Recommender, beam_size: float | None, n_best: float | None = 1,
               warn: Callable[[str], Any] = gr.Warning) -> SearchConfig:
        """The translator's search defaults with the beam size and n-best asked for (None: its default beam, and one
        answer); 0 is refused as any other number outside the ranges is, not taken for the default."""
        beam = whole_or_none(recommender.search.beam_size if beam_size is None else beam_size)
        n = whole_or_none(1 if n_best is None else n_best)
        if beam is None or n is None:
            raise refusal(f"Beam size and n-best must be whole numbers (got {beam_size!r} and {n_best!r}).")
        if not (1 <= beam <= MAX_BEAM and 1 <= n <= MAX_N_BEST):
            raise refusal(f"Beam size must be 1..{MAX_BEAM} and n-best 1..{MAX_N_BEST} (got {shown_number(beam)} and "
                          f"{shown_number(n)}).")
        if n > beam:
            warn(f"{n} alternatives need a beam of at least {n}: searching with beam size {n}.")
        return replace(recommender.search, beam_size=max(beam, n), n_best=n)

    # Optional inputs default to None, which Gradio's API then marks optional: a program may leave them out.
    # A coroutine: each waiting call costs the event loop a future, not a worker thread (docs/serving.md).
    async def recommend(self, text: str, translator: str | None = None, beam_size: float | None = None,
                        n_best: float | None = None):
        """/recommend: its JSON for the page and the caller, the page's summary of it, and the recommendations.
        The next step shows the summary from a State: made from the JSON box, the JSON would come back from
        the browser in the request (up to 13 MB at beam 10, n-best 5), past the body cap; a State of the JSON
        itself would keep that much per session."""
        data, recommendations = await self._recommend(text, translator, beam_size, n_best, gr.Warning)
        header = views.answered_by(data["translator"], data["beam_size"])
        return data, views.alerts_markdown(data["alerts"], header), recommendations

    async def recommend_direct(self, inputs: Any) -> dict[str, Any]:
        """POST /api/recommend (seq2seq/serving/gate.py): /recommend's inputs as a JSON list, its JSON back;
        a refusal is ``Refused`` with the same one-line message. Warnings are in the JSON, not shown."""
        if not isinstance(inputs, list) or not 1 <= len(inputs) <= 4:
            raise Refused("Send {\"data\": [alerts, translator, beam size, n-best]}: alerts required, the rest "
                          "optional.")
        try:
            return (await self._recommend(*inputs, *[None] * (4 - len(inputs)), warn=lambda message: None))[0]
        except gr.Error as err:
            raise Refused(err.message) from None

    async def _recommend(self, text: Any, translator: str | None, beam_size: float | None, n_best: float | None,
                         warn: Callable[[str], Any]):
        translator = self.translator_name(translator)
        alerts = alert_lines(text, MAX_ALERTS, MAX_CHARS)
        recommender = self.translator(translator)
        search = self.search(recommender, beam_size, n_best, warn)
        with user_errors():
            recommendations = await self.batchers[translator].recommend_async(alerts, search)
        self.shown.remember(self.digests[translator], recommendations)
        for i, r in enumerate(recommendations, 1):
            if r.warning:
                warn(f"Alert {i}: {r.warning}.")
        data = {"translator": translator, "attention_type": recommender.model.config.attention,
                "members": len(getattr(recommender.model, "members", [None])),  # an ensemble's attention is their mean
                "beam_size": search.beam_size, "n_best": search.n_best, "confidence": views.CONFIDENCE_NOTE,
                "alerts": [views.recommendation_json(r) for r in recommendations]}
        mark_wrong_answers(self.feedback_panel.store, data["alerts"])
        return data, recommendations

    def show_recommendations(self, summary: str, recommendations: list[Recommendation], level: str):
        recommendations = shown_first(recommendations, "/recommend")
        choices = [(f"{i + 1}. {r.alert}", i) for i, r in enumerate(recommendations)]
        return [summary, gr.Dropdown(choices=choices, value=0),
                *self.show_alert(recommendations, 0, level)]

    def show_alert(self, recommendations: list[Recommendation] | None, index: int | None, level: str = LEVELS[0]):
        """The heatmaps of one alert's candidates, over words (``LEVELS[0]``) or pieces."""
        chosen = recommendations[int(index)] if recommendations and index is not None else None
        words = level != LEVELS[1]
        return plot_updates(recommendation_figures(chosen, words) if chosen else [], MAX_N_BEST)

    def file_units(self, payload: Any):
        upload = uploaded(payload, "The C-MAPSS file")
        if not upload:
            return gr.Dropdown(choices=[], value=None)
        with user_errors(upload):
            units = [engine.unit for engine in read_cmapss(upload)]
        return gr.Dropdown(choices=units, value=units[0])

    def pick_engine(self, unit: Any, upload: str | None, file_unit: Any) -> tuple[Engine, str]:
        if upload:
            engines = {engine.unit: engine for engine in read_cmapss(upload)}
            wanted = unit_number(file_unit)
            wanted = next(iter(engines)) if wanted is None else wanted
            if wanted not in engines:
                raise refusal(f"{Path(upload).name}: no engine {wanted} ({units_held(list(engines))})")
            return engines[wanted], Path(upload).name
        if unit_number(unit) not in self.engines:
            raise refusal("Pick one of the bundled engines, or upload a C-MAPSS file.")
        return self.engines[unit_number(unit)], "bundled synthetic engines"

    def engine_health(self, unit: Any = None, payload: Any = None, file_unit: Any = None,
                      translator: str | None = None):
        translator = self.translator_name(translator)
        if self.monitor is None:
            raise refusal("No RUL model loaded: start the app with --rul-model PATH.")
        upload = uploaded(payload, "The C-MAPSS file")
        recommender = self.translator(translator)
        search = recommender.search
        with user_errors(upload):
            engine, source = self.pick_engine(unit, upload, file_unit)
            report = self.monitor.analyse(engine, recommender, search)
        self.shown.remember(self.digests[translator], report.recommendations)
        data = {**views.engine_json(report, source), "translator": translator, "beam_size": search.beam_size}
        mark_wrong_answers(self.feedback_panel.store, data["recommendations"])
        return data, views.engine_markdown(data), report  # as /recommend: shown from a State

    def show_engine(self, summary: str, report: EngineReport):
        report = shown_first(report, "/engine_health")
        shown = [(k, r) for k, r in enumerate(report.recommendations, 1) if r.candidates]
        labels = [f"Alert {k}: {r.alert}" for k, r in shown]
        figures = [heatmap_figure(r.source_pieces, r.candidates[0], f"{label}\n{as_shown(r.text, r.verdict)}",
                                  alert=r.alert)
                   for label, (_, r) in zip(labels, shown, strict=True)]
        return [summary, attention_figure(report), deviation_figure(report),
                *plot_updates(figures, ENGINE_ALERTS, labels)]

    def column_choices(self, payload: Any):
        upload = uploaded(payload, "The incident log")
        columns = read_columns(Path(upload)) if upload else []
        return gr.Dropdown(choices=columns, value=None)

    async def translate_upload(self, payload: Any, column: Any = None, translator: str | None = None,
                               beam_size: float | None = None,
                               progress=gr.Progress()):  # noqa: B008 (Gradio finds the tracker by this default)
        """/translate_file: the job runs in a thread; when its client cancels the event or leaves (its event stream
        closes: ``event_listened``), the thread stops after the chunk of rows it is on, rather than translating the
        rest for nobody beside the next file job."""
        upload = uploaded(payload, "The incident log")
        if not upload:
            raise refusal("Upload an incident log first (CSV, TSV, JSONL or TXT).")
        if column is not None and not isinstance(column, str):
            raise refusal(f"The alert column must be text, a column's name (got {type(column).__name__}).")
        recommender = self.translator(translator)
        search = self.search(recommender, beam_size)
        source = Path(upload)
        is_text = source.suffix.lower() == ".txt"  # one alert per line: written back as CSV, next to its alert
        if is_text and column:  # as translate --column refuses it: a name given for a file without columns
            raise refusal(f"{source.name}: a .txt log has one alert per line and no columns; leave the alert column "
                          "empty.")
        output = self._new_output_dir() / f"{source.stem}.recommendations" \
            f"{'.csv' if is_text else source.suffix.lower()}"
        progress(0, desc="starting")
        cancelled, listened = threading.Event(), event_listened()

        def report(done: int, total: int | None) -> None:  # in the job's thread, after each chunk
            if cancelled.is_set() or not listened():
                raise JobCancelled(f"{source.name}: cancelled after {done} rows")
            if self.stopping.is_set():
                raise JobCancelled(f"The app is shutting down: {source.name} stopped after {done} rows; send it "
                                   "again when the app is back.")
            progress((done, total), desc="rows", unit="rows")

        with user_errors(upload):
            try:
                summary = await asyncio.to_thread(translate_file, recommender, source, output,
                                                  column=None if is_text else column or None, search=search,
                                                  chunk_rows=256, progress=report)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            except JobCancelled as stopped:  # not a fault: no traceback in the server's log
                raise refusal(str(stopped)) from None
        return str(output), summary

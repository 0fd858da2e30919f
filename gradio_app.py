"""Technician UI: alerts in, repair recommendations out, with the attention behind each one.

    python gradio_app.py [--model PATH ...] [--rul-model PATH] [--default-dir DIR] [--host 127.0.0.1] [--port 7860]
    python gradio_app.py --smoke-test [--model PATH ...] [--rul-model PATH] [--default-dir DIR]

Tabs:

- **Alerts**: one alert per line -> per alert the recommendation, its n-best alternatives with their
  scores, a confidence figure and the alignment heatmap (recommendation pieces x alert pieces) of
  every candidate. Confidence is the per-piece probability exp(log P(y|x) / |y|), the geometric mean
  of the probabilities the model gave each output piece (``</s>`` included); with n-best > 1 also the
  share of the n-best list's probability mass held by each candidate.
- **Engine health**: a bundled synthetic engine (20, seeded) or an uploaded C-MAPSS file -> remaining
  useful life, health state, the RUL model's temporal attention, the sensor deviations, the alerts
  and each alert's recommendation with its heatmap.
- **Batch**: an incident log (CSV, TSV, JSONL or TXT) -> the same rows with recommendation and score,
  as a download (``seq2seq.serving.translate_file``).

Default models: without ``--model`` the app uses ``translator.pt``, without ``--rul-model``
``rul.pt``, in ``--default-dir`` (``runs/default/``). A missing one is trained first and cached there, with its
progress on the terminal: the translator on the embedded corpus with the default configuration
(about 3 minutes, at most TRANSLATOR_MINUTES), the RUL model on 100 seeded synthetic engines (at
most RUL_MINUTES), under 5 minutes together on 2 CPU cores. Later launches start in seconds; delete
the files to retrain.

``--smoke-test`` is the non-interactive run (CI, a fresh clone): the same models (built if missing),
the app served on a free loopback port, the page fetched and each named endpoint called once through
gradio_client (``seq2seq.serving.smoke``), the results and a one-line summary with timings printed, then
shut down: exit 0, or 1 with a one-line error.

Programs call the named endpoints with gradio_client, ``Client(url).predict(..., api_name=NAME)``:
``/recommend`` (alerts, translator, beam size, n-best -> JSON), ``/engine_health`` (bundled engine
or uploaded file + unit, translator -> JSON) and ``/translate_file`` (file, column, translator,
beam size -> output file). The JSON carries the raw attention matrices as nested lists.

Serving: every model call shares one concurrency slot (``concurrency_id="model"``) and the queue is
bounded; the queue cannot be skipped (``api_open=False``: the direct ``/gradio_api/run/...`` routes
refuse queued events). An error in one request is shown as a message and the app keeps serving.
Uploads are capped at MAX_FILE_SIZE and only gr.File uploads are read: no path a user types is ever
opened. Batch results are written to a per-app temporary folder, removed at exit; Gradio's copies of
uploads and results are deleted after FILE_MAX_AGE_S and at shutdown (SIGTERM shuts down like
Ctrl-C). Binds 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Before torch loads OpenMP: idle threads sleep instead of spinning. On a shared machine spinning threads
# fight the other processes for the cores (docs/serving.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import gradio as gr
from matplotlib.figure import Figure

from seq2seq import (
    Engine,
    EngineMonitor,
    EngineReport,
    Recommendation,
    Recommender,
    SearchConfig,
    Seq2SeqError,
    read_cmapss,
)
from seq2seq.rul.alerts import MAX_ALERTS as ENGINE_ALERTS
from seq2seq.serving import (
    CONFIDENCE_NOTE,
    DEFAULT_DIR,
    alerts_markdown,
    attention_figure,
    bundled_engines,
    default_rul_model,
    default_translator,
    deviation_figure,
    engine_json,
    engine_markdown,
    heatmap_figure,
    read_columns,
    recommendation_figures,
    recommendation_json,
    translate_file,
)
from seq2seq.serving.smoke import smoke_test

MAX_ALERTS, MAX_CHARS = 50, 10_000  # per /recommend request; files go to the Batch tab
MAX_BEAM, MAX_N_BEST = 10, 5
MAX_FILE_SIZE = "10mb"
FILE_MAX_AGE_S = 3600  # batch results and uploads are kept this long, then deleted (all at shutdown)
MODEL_CONCURRENCY = 1  # two CPU cores: one model call at a time, the rest wait in the queue
QUEUE_CONCURRENCY, QUEUE_SIZE = 2, 32
EXAMPLES = [
    ["hpc outlet temperature rising sharply"],
    ["hydraulic pressure drop and leakage"],
    ["leakage detected on hyd system\nMAJOR OVERHEAT AT REDUCER"],
    ["byp duct press rapid increase\nnoticeable coolant system loss of pressure"],
]
# -- figures ------------------------------------------------------------------------------------
def plot_updates(figures: list[Figure], slots: int, labels: list[str] | None = None) -> list[gr.Plot]:
    """Fill the first plot slots with ``figures`` (and ``labels``); hide the unused ones but the first."""
    updates = []
    for k in range(slots):
        label = {"label": labels[k]} if labels and k < len(labels) else {}
        updates.append(gr.Plot(value=figures[k] if k < len(figures) else None,
                               visible=k == 0 or k < len(figures), **label))
    return updates


def plot_slots(count: int, first_label: str, label: str, elem_id: str) -> list[gr.Plot]:
    """One wide plot, then ``count - 1`` hidden ones two to a row; elem_ids ``elem_id``, ``elem_id-2``, ..."""
    plots = [gr.Plot(label=first_label, elem_id=elem_id)]
    for start in range(2, count + 1, 2):
        with gr.Row():
            plots += [gr.Plot(label=f"{label} {k}", elem_id=f"{elem_id}-{k}", visible=False)
                      for k in range(start, min(start + 2, count + 1))]
    return plots


# -- request handlers -----------------------------------------------------------------------------
def refusal(message: str) -> gr.Error:
    """An error shown to the user; the server log gets no traceback for it (user_errors prints unexpected ones)."""
    return gr.Error(message, print_exception=False)


@contextlib.contextmanager
def user_errors(upload: str | None = None) -> Iterator[None]:
    """Turn any failure into a readable gr.Error; the upload's temporary path is shown as its file name."""
    try:
        yield
    except gr.Error:
        raise
    except (Seq2SeqError, ValueError, OSError) as err:
        message = str(err).replace(str(upload), Path(upload).name) if upload else str(err)
        raise refusal(message) from None
    except Exception as err:
        traceback.print_exc()
        raise refusal(f"Unexpected {type(err).__name__}: {err}. The app is still running; try again.") from None


class Handlers:
    """The functions behind the events; model calls are the ones that share the "model" slot."""

    def __init__(self, translators: dict[str, Recommender], monitor: EngineMonitor | None,
                 engines: list[Engine]) -> None:
        if not translators:
            raise ValueError("the UI needs at least one translator")
        self.translators, self.monitor = translators, monitor
        self.engines = {engine.unit: engine for engine in engines}
        self._work = tempfile.TemporaryDirectory(prefix="maintenance-app-")  # removed at exit or close()
        self.work_dir = Path(self._work.name)

    def close(self) -> None:
        """Remove the batch results' folder now rather than at exit."""
        self._work.cleanup()

    def _new_output_dir(self) -> Path:
        """A fresh folder for one batch result; results older than FILE_MAX_AGE_S go (Gradio serves its copy)."""
        for old in self.work_dir.iterdir():
            if time.time() - old.stat().st_mtime > FILE_MAX_AGE_S:
                shutil.rmtree(old, ignore_errors=True)
        return Path(tempfile.mkdtemp(dir=self.work_dir))

    def translator(self, name: str | None) -> Recommender:
        if name not in self.translators:
            raise refusal(f"Unknown translator {name!r}; choose one of: {', '.join(self.translators)}")
        return self.translators[name]

    def search(self, beam_size: float, n_best: float = 1) -> SearchConfig:
        beam, n = int(beam_size or 1), int(n_best or 1)
        if not (1 <= beam <= MAX_BEAM and 1 <= n <= MAX_N_BEST):
            raise refusal(f"Beam size must be 1..{MAX_BEAM} and n-best 1..{MAX_N_BEST} (got {beam} and {n}).")
        if n > beam:
            gr.Warning(f"{n} alternatives need a beam of at least {n}: searching with beam size {n}.")
        return SearchConfig(beam_size=max(beam, n), n_best=n)

    def recommend(self, text: str, translator: str, beam_size: float, n_best: float):
        alerts = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if not alerts:
            raise refusal("Type at least one alert, one per line.")
        if len(alerts) > MAX_ALERTS or len(text) > MAX_CHARS:
            raise refusal(f"Too much input: at most {MAX_ALERTS} alerts and {MAX_CHARS:,} characters per "
                           "request; the Batch tab translates whole files.")
        recommender, search = self.translator(translator), self.search(beam_size, n_best)
        with user_errors():
            recommendations = recommender.recommend(alerts, search)
        for i, r in enumerate(recommendations, 1):
            if r.warning:
                gr.Warning(f"Alert {i}: {r.warning}.")
        data = {"translator": translator, "attention_type": recommender.model.config.attention,
                "beam_size": search.beam_size, "n_best": search.n_best, "confidence": CONFIDENCE_NOTE,
                "alerts": [recommendation_json(r) for r in recommendations]}
        return data, recommendations

    def show_recommendations(self, data: dict[str, Any], recommendations: list[Recommendation]):
        choices = [(f"{i + 1}. {r.alert}", i) for i, r in enumerate(recommendations)]
        return [alerts_markdown(data["alerts"]), gr.Dropdown(choices=choices, value=0),
                *self.show_alert(recommendations, 0)]

    def show_alert(self, recommendations: list[Recommendation] | None, index: int | None):
        chosen = recommendations[int(index)] if recommendations and index is not None else None
        return plot_updates(recommendation_figures(chosen) if chosen else [], MAX_N_BEST)

    def file_units(self, upload: str | None):
        if not upload:
            return gr.Dropdown(choices=[], value=None)
        with user_errors(upload):
            units = [engine.unit for engine in read_cmapss(upload)]
        return gr.Dropdown(choices=units, value=units[0])

    def pick_engine(self, unit: Any, upload: str | None, file_unit: Any) -> tuple[Engine, str]:
        if upload:
            engines = {engine.unit: engine for engine in read_cmapss(upload)}
            wanted = int(float(file_unit)) if file_unit not in (None, "") else next(iter(engines))
            if wanted not in engines:
                raise refusal(f"{Path(upload).name}: no engine {wanted} (units {min(engines)}..{max(engines)})")
            return engines[wanted], Path(upload).name
        if unit in (None, "") or int(float(unit)) not in self.engines:
            raise refusal("Pick one of the bundled engines, or upload a C-MAPSS file.")
        return self.engines[int(float(unit))], "bundled synthetic engines"

    def engine_health(self, unit: Any, upload: str | None, file_unit: Any, translator: str):
        if self.monitor is None:
            raise refusal("No RUL model loaded: start the app with --rul-model PATH.")
        recommender, search = self.translator(translator), SearchConfig()
        with user_errors(upload):
            engine, source = self.pick_engine(unit, upload, file_unit)
            report = self.monitor.analyse(engine, recommender, search)
        return engine_json(report, source), report

    def show_engine(self, data: dict[str, Any], report: EngineReport):
        shown = [(k, r) for k, r in enumerate(report.recommendations, 1) if r.candidates]
        figures = [heatmap_figure(r.source_pieces, r.candidates[0]) for _, r in shown]
        labels = [f"Alert {k}: {r.alert}" for k, r in shown]
        return [engine_markdown(data), attention_figure(report), deviation_figure(report),
                *plot_updates(figures, ENGINE_ALERTS, labels)]

    def column_choices(self, upload: str | None):
        columns = read_columns(Path(upload)) if upload else []
        return gr.Dropdown(choices=columns, value=None)

    def translate_upload(self, upload: str | None, column: str | None, translator: str, beam_size: float,
                       progress=gr.Progress()):  # noqa: B008 (Gradio finds the tracker by this default)
        if not upload:
            raise refusal("Upload an incident log first (CSV, TSV, JSONL or TXT).")
        recommender, search = self.translator(translator), self.search(beam_size)
        source = Path(upload)
        is_text = source.suffix.lower() == ".txt"  # one alert per line: written back as CSV, next to its alert
        output = self._new_output_dir() / f"{source.stem}.recommendations" \
            f"{'.csv' if is_text else source.suffix.lower()}"
        progress(0, desc="starting")
        with user_errors(upload):
            summary = translate_file(recommender, source, output, column=None if is_text else column or None,
                                     search=search, chunk_rows=256,
                                     progress=lambda done, total: progress((done, total), desc="rows", unit="rows"))
        return str(output), summary


# -- layout -----------------------------------------------------------------------------------------
def _translator_dropdown(handlers: Handlers) -> gr.Dropdown:
    choices = []
    for name, recommender in handlers.translators.items():
        attention = recommender.model.config.attention
        choices.append((name if attention in name else f"{name} ({attention})", name))
    return gr.Dropdown(choices=choices, value=choices[0][1], label="Translator (attention type)")


def _alerts_tab(h: Handlers) -> None:
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Alerts, one per line", lines=4, max_lines=20, elem_id="alerts",
                              placeholder="hpc outlet temperature rising sharply")
            gr.Examples(EXAMPLES, inputs=[text], label="Example alerts (click one)")
        with gr.Column(scale=2):
            translator = _translator_dropdown(h)
            beam = gr.Slider(1, MAX_BEAM, value=1, step=1, label="Beam size (1 = greedy)", elem_id="beam")
            n_best = gr.Slider(1, MAX_N_BEST, value=1, step=1, label="Alternatives shown (n-best)", elem_id="n-best")
            button = gr.Button("Recommend", variant="primary", elem_id="recommend")
    summary = gr.Markdown(elem_id="summary")
    choice = gr.Dropdown(choices=[], label="Heatmaps of alert", elem_id="alert-choice", interactive=True)
    plots = plot_slots(MAX_N_BEST, "Alignment of the shown recommendation", "Alternative", "heatmap")
    with gr.Accordion("JSON, as /recommend returns it", open=False):
        data = gr.JSON(elem_id="recommend-json")
    recommendations = gr.State()
    button.click(h.recommend, [text, translator, beam, n_best], [data, recommendations], api_name="recommend",
                 concurrency_limit=MODEL_CONCURRENCY, concurrency_id="model").success(
        h.show_recommendations, [data, recommendations], [summary, choice, *plots],
        api_name="show_recommendations", api_visibility="private")
    choice.input(h.show_alert, [recommendations, choice], plots, api_name="show_alert",
                 api_visibility="private")


def _engine_tab(h: Handlers) -> None:
    with gr.Row():
        unit = gr.Dropdown(choices=[(f"engine {e.unit} ({e.length} cycles)", e.unit) for e in h.engines.values()],
                           value=next(iter(h.engines), None), label="Bundled synthetic engine", elem_id="engine")
        upload = gr.File(label="…or a C-MAPSS file (train_FD00x.txt layout)", file_types=[".txt"],
                         type="filepath", height=140, elem_id="cmapss-file")
        file_unit = gr.Dropdown(choices=[], label="Engine in the uploaded file", allow_custom_value=True)
        translator = _translator_dropdown(h)
    button = gr.Button("Analyse engine", variant="primary", elem_id="analyse")
    summary = gr.Markdown(elem_id="engine-summary")
    with gr.Row():
        attention = gr.Plot(label="RUL trend and temporal attention", show_label=False, elem_id="engine-attention")
        deviations = gr.Plot(label="Sensor deviations behind the alerts", show_label=False,
                             elem_id="engine-deviations")
    plots = plot_slots(ENGINE_ALERTS, "Alert 1: recommendation and alignment", "Alert", "alert-heatmap")
    with gr.Accordion("JSON, as /engine_health returns it", open=False):
        data = gr.JSON()
    report = gr.State()
    upload.change(h.file_units, [upload], [file_unit], api_name="file_units", api_visibility="private")
    button.click(h.engine_health, [unit, upload, file_unit, translator], [data, report], api_name="engine_health",
                 concurrency_limit=MODEL_CONCURRENCY, concurrency_id="model").success(
        h.show_engine, [data, report], [summary, attention, deviations, *plots], api_name="show_engine",
        api_visibility="private")


def _batch_tab(h: Handlers) -> None:
    gr.Markdown("Every row of the uploaded log comes back with its recommendation, score and error (if any). "
                "CSV/TSV need a header row; JSONL one object per line; TXT one alert per line (returned as CSV).")
    with gr.Row():
        upload = gr.File(label="Incident log", file_types=[".csv", ".tsv", ".jsonl", ".txt"], type="filepath",
                         elem_id="batch-file")
        with gr.Column():
            column = gr.Dropdown(choices=[], label="Alert column (empty: source, problem or the only one)",
                                 allow_custom_value=True, elem_id="batch-column")
            translator = _translator_dropdown(h)
            beam = gr.Slider(1, MAX_BEAM, value=1, step=1, label="Beam size (1 = greedy)")
            button = gr.Button("Translate file", variant="primary", elem_id="translate-file")
    result = gr.File(label="Result: every row with recommendation, score and error", elem_id="batch-result")
    summary = gr.Markdown(elem_id="batch-summary")
    state = gr.State()
    upload.change(h.column_choices, [upload], [column], api_name="file_columns", api_visibility="private")
    button.click(h.translate_upload, [upload, column, translator, beam], [result, state], api_name="translate_file",
                 concurrency_limit=MODEL_CONCURRENCY, concurrency_id="model").success(
        lambda s: s.summary(), [state], [summary], api_name="batch_summary", api_visibility="private")


def build(translators: dict[str, Recommender], monitor: EngineMonitor | None, engines: list[Engine]) -> gr.Blocks:
    """The whole UI, queued but not launched (``demo.launch(max_file_size=MAX_FILE_SIZE, ...)``)."""
    handlers = Handlers(translators, monitor, engines)
    with gr.Blocks(title="Maintenance recommendations", analytics_enabled=False,
                   delete_cache=(FILE_MAX_AGE_S, FILE_MAX_AGE_S)) as demo:
        gr.Markdown("## Maintenance recommendations: alerts in, repairs out, with the attention behind them")
        with gr.Tab("Alerts"):
            _alerts_tab(handlers)
        with gr.Tab("Engine health"):
            _engine_tab(handlers)
        with gr.Tab("Batch"):
            _batch_tab(handlers)
    demo.queue(default_concurrency_limit=QUEUE_CONCURRENCY, max_size=QUEUE_SIZE, api_open=False)
    return demo


# -- models and launch --------------------------------------------------------------------------
def load_translators(paths: list[str]) -> dict[str, Recommender]:
    """One translator per checkpoint, named by its attention type (and its file when two share one)."""
    loaded = [(path, Recommender.from_checkpoint(path)) for path in paths]
    attentions = [r.model.config.attention for _, r in loaded]
    return {(a if attentions.count(a) == 1 else f"{a} ({path})"): r
            for a, (path, r) in zip(attentions, loaded, strict=True)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="translator checkpoint (repeatable); "
                        "default translator.pt in --default-dir, trained on first launch")
    parser.add_argument("--rul-model", help="RUL checkpoint; default rul.pt in --default-dir, trained on first launch")
    parser.add_argument("--default-dir", type=Path, default=DEFAULT_DIR,
                        help=f"where the default models are cached (default {DEFAULT_DIR})")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--smoke-test", action="store_true", help="serve on a free loopback port, call each "
                        "endpoint once through gradio_client, print the results and timings, shut down")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        translators = load_translators(args.model or [str(default_translator(args.default_dir))])
        monitor = EngineMonitor.from_checkpoint(args.rul_model or default_rul_model(args.default_dir))
    except Seq2SeqError as err:
        parser.exit(2, f"gradio_app: error: {err}\n")
    engines = bundled_engines()
    demo = build(translators, monitor, engines)
    if args.smoke_test:
        oldest = max(engines, key=lambda engine: engine.length).unit  # the likeliest to raise alerts
        raise SystemExit(smoke_test(demo, next(iter(translators)), oldest, MAX_FILE_SIZE,
                                    models_s=time.perf_counter() - started))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # shut down as on Ctrl-C: caches get deleted
    demo.launch(server_name=args.host, server_port=args.port, max_file_size=MAX_FILE_SIZE)


if __name__ == "__main__":
    main()

"""Technician UI: alerts in, repair recommendations out, with the attention behind each one.

    python gradio_app.py [--model PATH ...] [--rul-model PATH] [--default-dir DIR] [--feedback-db PATH]
                         [--host 127.0.0.1] [--port 7860] [--allowed-host NAME ...]
    python gradio_app.py --smoke-test [--model PATH ...] [--rul-model PATH] [--default-dir DIR]

Tabs:

- **Alerts**: one alert per line -> per alert the recommendation with its verdict and past cases, its n-best
  alternatives with their scores and confidence (docs/serving.md), and every candidate's heatmap, over words or pieces.
- **Engine health**: a bundled synthetic engine (20, seeded) or an uploaded C-MAPSS file -> remaining useful life,
  health state, the RUL model's temporal attention, the sensor deviations, the alerts and each one's recommendation.
- Under every recommendation of those two tabs: was it **right** or **wrong**, and what the technician did instead;
  stored in the feedback database (``--feedback-db``, default ``feedback.sqlite`` in ``--default-dir``;
  ``seq2seq.serving.feedback_store``) through the same handler as ``/feedback``.
- **Batch**: an incident log (CSV, TSV, JSONL or TXT) -> the same rows with recommendation, score, trust,
  verdict and the nearest past case's action, as a download (``seq2seq.serving.translate_file``).

The handlers behind the events are in ``seq2seq/serving/handlers.py`` and the page's repeated parts in
``seq2seq/serving/widgets.py``; this file lays out the page.

Default models: ``translator.pt`` and ``rul.pt`` in ``--default-dir`` (``runs/default/``) unless ``--model`` and
``--rul-model`` name others. A missing one is trained first and cached there (the translator on the embedded corpus,
the RUL model on 100 seeded synthetic engines: under 5 minutes together on 2 CPU cores).

``--smoke-test`` (CI, a fresh clone): the same models, the app on a free loopback port, the page fetched and
each endpoint called once (``seq2seq.serving.smoke``), a one-line summary with timings: exit 0, or 1 with one line.

Programs call the named endpoints (``/recommend``, ``/engine_health``, ``/translate_file``, ``/feedback``) with
gradio_client, ``Client(url).predict(..., api_name=NAME)``; their inputs and JSON: docs/serving.md.

Serving: concurrent /recommend calls share decoder passes; one engine job and one file job run at a time, each
queued behind its own kind only; the queue is bounded and cannot be skipped; ``GET /health`` and
``POST /api/recommend`` answer outside it (``App``). Uploads are capped at MAX_FILE_SIZE and only gr.File uploads
are read; results and Gradio's copies are deleted after FILE_MAX_AGE_S and at shutdown (SIGTERM as Ctrl-C).
Binds 127.0.0.1 unless ``--host`` says otherwise, and refuses requests that name it otherwise than by a loopback
name or an ``--allowed-host``, and other sites' pages' requests (``seq2seq/serving/origins.py``).
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Gradio rebuilds a pandas table of its last 10,000 events after every event, for latency figures on its
# API page: a cost per call that grows with the calls served, up to several ms (docs/serving.md). Once
# every 1,000 events over the last 1,000 keeps those figures at a negligible cost.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", "1000")
# Before torch loads OpenMP: idle threads sleep instead of spinning. On a shared machine spinning threads
# fight the other processes for the cores (docs/serving.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import gradio as gr

from seq2seq import Engine, EngineMonitor, Recommender, Seq2SeqError
from seq2seq.cli.common import path_flag, whole_number
from seq2seq.serving import DEFAULT_DIR, bundled_engines, default_rul_model, default_translator, load_translators
from seq2seq.serving.app import QUEUE_CONCURRENCY, QUEUE_SIZE, RECOMMEND_CONCURRENCY, App, address_fault, unservable
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.serving.handlers import ENGINE_ALERTS, FILE_MAX_AGE_S, LEVELS, MAX_N_BEST, Handlers
from seq2seq.serving.requests import shown_first
from seq2seq.serving.smoke import smoke_test
from seq2seq.serving.widgets import (
    beam_slider,
    cleared_on_refusal,
    plot_slots,
    translator_dropdown,
    upload_box,
    verdict_panel,
)

MAX_FILE_SIZE = "10mb"  # uploads; Gradio refuses bigger ones before a handler runs
# Two CPU cores: one engine job and one file job at a time, each kind queued behind its own kind only. A file
# job can take minutes (a 10 MB log about 4); sharing one slot, an engine check waited 181 s behind one.
ENGINE_CONCURRENCY = BATCH_CONCURRENCY = 1
# How many of each wait for their slot; beyond, "busy" (seq2seq/serving/app.py): a client's file jobs could
# otherwise fill the whole queue (QUEUE_SIZE) and turn away every other request for as long as they take.
WAITING = {"engine": (32, "engine checks"), "batch": (8, "file jobs")}
EXAMPLES = [
    ["hpc outlet temperature rising sharply"],
    ["hydraulic pressure drop and leakage"],
    ["leakage detected on hyd system\nMAJOR OVERHEAT AT REDUCER"],
    ["byp duct press rapid increase\nnoticeable coolant system loss of pressure"],
]
# -- layout -----------------------------------------------------------------------------------------
def _alerts_tab(h: Handlers, concurrency: int) -> None:
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Alerts, one per line", lines=4, max_lines=20, elem_id="alerts",
                              placeholder="hpc outlet temperature rising sharply")
            gr.Examples(EXAMPLES, inputs=[text], label="Example alerts (click one)")
        with gr.Column(scale=2):
            translator = translator_dropdown(h)
            beam = beam_slider(h, translator, elem_id="beam")
            n_best = gr.Slider(1, MAX_N_BEST, value=1, step=1, label="Alternatives shown (n-best)", elem_id="n-best")
            button = gr.Button("Recommend", variant="primary", elem_id="recommend")
    summary = gr.Markdown(elem_id="summary")
    with gr.Row():
        choice = gr.Dropdown(choices=[], label="Heatmaps of alert", elem_id="alert-choice", interactive=True)
        level = gr.Radio(list(LEVELS), value=LEVELS[0], label="Heatmap rows and columns", elem_id="heatmap-level",
                         info="words as written, or the subword pieces the model reads and writes")
    plots = plot_slots(MAX_N_BEST, "Alignment of the shown recommendation", "Alternative", "heatmap")
    with gr.Accordion("JSON, as /recommend returns it", open=False):
        data = gr.JSON(elem_id="recommend-json")
    shown_summary, recommendations = gr.State(), gr.State()
    # preprocess=False: the handler checks what a program sent (a Textbox would pass a list on as its repr).
    asked = button.click(h.recommend, [text, translator, beam, n_best], [data, shown_summary, recommendations],
                         api_name="recommend", concurrency_limit=concurrency, concurrency_id="recommend",
                         preprocess=False)
    shown = asked.success(h.show_recommendations, [shown_summary, recommendations, level], [summary, choice, *plots],
                          api_name="show_recommendations", api_visibility="private")
    panel = verdict_panel(h, "alerts")
    cleared_on_refusal(asked, [data, summary, choice, *panel], plots)
    shown.success(h.feedback_panel.targets, [recommendations], panel, api_name="alerts_feedback_targets",
                  api_visibility="private")
    for control, name in ((choice, "show_alert"), (level, "show_alert_level")):
        control.input(h.show_alert, [recommendations, choice, level], plots, api_name=name, api_visibility="private")


def _engine_tab(h: Handlers) -> None:
    with gr.Row():
        unit = gr.Dropdown(choices=[(f"engine {e.unit} ({e.length} cycles)", e.unit) for e in h.engines.values()],
                           value=next(iter(h.engines), None), label="Bundled synthetic engine", elem_id="engine")
        upload = upload_box(label="…or a C-MAPSS file (train_FD00x.txt layout)", file_types=[".txt"], height=140,
                            elem_id="cmapss-file")
        file_unit = gr.Dropdown(choices=[], label="Engine in the uploaded file", allow_custom_value=True)
        translator = translator_dropdown(h)
    button = gr.Button("Analyse engine", variant="primary", elem_id="analyse")
    summary = gr.Markdown(elem_id="engine-summary")
    with gr.Row():
        attention = gr.Plot(label="RUL trend and temporal attention", show_label=False, elem_id="engine-attention")
        deviations = gr.Plot(label="Sensor deviations behind the alerts", show_label=False,
                             elem_id="engine-deviations")
    plots = plot_slots(ENGINE_ALERTS, "Alert 1: recommendation and alignment", "Alert", "alert-heatmap")
    with gr.Accordion("JSON, as /engine_health returns it", open=False):
        data = gr.JSON()
    shown_summary, report = gr.State(), gr.State()
    upload.change(h.file_units, [upload], [file_unit], api_name="file_units", api_visibility="private",
                  preprocess=False)
    # A bundled engine picked while a file is attached: that engine is meant, and the file, which would be analysed
    # instead, goes (its engine list with it, by the event above); in the browser, so a quick Analyse sends no file
    unit.input(None, None, [upload], js="() => null", api_visibility="private")
    asked = button.click(h.engine_health, [unit, upload, file_unit, translator], [data, shown_summary, report],
                         api_name="engine_health", concurrency_limit=ENGINE_CONCURRENCY, concurrency_id="engine",
                         preprocess=False)
    shown = asked.success(h.show_engine, [shown_summary, report], [summary, attention, deviations, *plots],
                          api_name="show_engine", api_visibility="private")
    panel = verdict_panel(h, "engine")
    cleared_on_refusal(asked, [data, summary, attention, deviations, *panel], plots)
    shown.success(lambda r: h.feedback_panel.targets(shown_first(r, "/engine_health").recommendations), [report], panel,
                  api_name="engine_feedback_targets", api_visibility="private")


def _batch_tab(h: Handlers) -> None:
    gr.Markdown("Every row of the uploaded log comes back with its recommendation, score, trust, verdict, the "
                "action of the most similar past case (similar_action) and error (if any). A row whose verdict is "
                "out-of-scope holds the model's guess, not advice, and trust 0. CSV/TSV need a header row; JSONL one "
                "object per line; TXT one alert per line (returned as CSV).")
    with gr.Row():
        upload = upload_box(label="Incident log", file_types=[".csv", ".tsv", ".jsonl", ".txt"], elem_id="batch-file")
        with gr.Column():
            column = gr.Dropdown(choices=[], label="Alert column (empty: source, problem or the only one)",
                                 allow_custom_value=True, elem_id="batch-column")
            translator = translator_dropdown(h)
            beam = beam_slider(h, translator)
            button = gr.Button("Translate file", variant="primary", elem_id="translate-file")
    result = gr.File(label="Result: every row with recommendation, score, trust, verdict, similar_action and error",
                     elem_id="batch-result")
    summary = gr.Markdown(elem_id="batch-summary")
    state = gr.State()
    upload.change(h.column_choices, [upload], [column], api_name="file_columns", api_visibility="private",
                  preprocess=False)
    # The last file's result is not this one's. Cleared in the browser: a server call raced a quick click on
    # Translate and could land after its answer, blanking the new result
    upload.change(None, None, [result, summary], js="() => [null, '']", api_visibility="private")
    asked = button.click(h.translate_upload, [upload, column, translator, beam], [result, state],
                         api_name="translate_file", concurrency_limit=BATCH_CONCURRENCY, concurrency_id="batch",
                         preprocess=False)
    asked.success(lambda s: shown_first(s, "/translate_file").summary(), [state], [summary], api_name="batch_summary",
                  api_visibility="private")
    cleared_on_refusal(asked, [result, summary], [])


def build(translators: dict[str, Recommender], monitor: EngineMonitor | None, engines: list[Engine],
          feedback: FeedbackStore | None = None, queue_size: int = QUEUE_SIZE,
          recommend_concurrency: int = RECOMMEND_CONCURRENCY, decoder_process: bool = False) -> App:
    """The whole UI, queued but not launched (``demo.launch(max_file_size=MAX_FILE_SIZE, ...)``); without
    ``feedback`` the verdict buttons and /feedback refuse politely; ``decoder_process``: /recommend decodes
    in a child process per translator (seq2seq/serving/decoder_process.py)."""
    handlers = Handlers(translators, monitor, engines, feedback, decoder_process)
    with App(handlers, recommend_concurrency, WAITING, title="Maintenance recommendations", analytics_enabled=False,
                   delete_cache=(FILE_MAX_AGE_S, FILE_MAX_AGE_S)) as demo:
        gr.Markdown("## Maintenance recommendations: alerts in, repairs out, with the attention behind them")
        with gr.Tab("Alerts"):
            _alerts_tab(handlers, recommend_concurrency)
        with gr.Tab("Engine health"):
            _engine_tab(handlers)
        with gr.Tab("Batch"):
            _batch_tab(handlers)
        # A write, not a model call: its own slot, no limit (records are serialised by the store).
        gr.api(handlers.feedback_panel.feedback, api_name="feedback", concurrency_limit=None)
    # Queue positions go to waiting callers once a second: on every event's start (Gradio's default) a burst of
    # N callers costs N^2 / 2 messages.
    demo.queue(default_concurrency_limit=QUEUE_CONCURRENCY, max_size=queue_size, api_open=False,
               status_update_rate=1)
    return demo


# -- launch ------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    folder = lambda text: Path(path_flag(text))  # noqa: E731  (an empty path is refused, not the current folder)
    parser.add_argument("--model", action="append", type=path_flag, help="translator checkpoint (repeatable); "
                        "default translator.pt in --default-dir, trained on first launch")
    parser.add_argument("--rul-model", type=path_flag,
                        help="RUL checkpoint; default rul.pt in --default-dir, trained on first launch")
    parser.add_argument("--default-dir", type=folder, default=DEFAULT_DIR,
                        help=f"where the default models are cached (default {DEFAULT_DIR})")
    parser.add_argument("--feedback-db", type=folder, help="the SQLite file technicians' feedback goes to; default "
                        "feedback.sqlite in --default-dir (seq2seq feedback export/stats read it)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                        help="a further name the app may be reached by (repeatable): a reverse proxy's public name. "
                        "Requests naming another are refused, as are other sites' pages' requests")
    parser.add_argument("--port", type=whole_number(1, 65535), default=7860)
    parser.add_argument("--decoder-process", action=argparse.BooleanOptionalAction, default=True,
                        help="decode /recommend calls in a child process beside the app (default), so the app's "
                        "own process serves requests on another core; --no-decoder-process: in the app's process")
    parser.add_argument("--smoke-test", action="store_true", help="serve on a free loopback port, call each "
                        "endpoint once through gradio_client, print the results and timings, shut down")
    args = parser.parse_args(argv)
    if not args.smoke_test and (fault := address_fault(args.host, args.port)):  # before minutes of loading
        parser.exit(2, f"gradio_app: error: {fault}\n")
    started = time.perf_counter()
    try:
        translators = load_translators(args.model or [str(default_translator(args.default_dir))])
        monitor = EngineMonitor.from_checkpoint(args.rul_model or default_rul_model(args.default_dir))
        feedback = FeedbackStore(args.feedback_db or args.default_dir / "feedback.sqlite")
    except Seq2SeqError as err:
        parser.exit(2, f"gradio_app: error: {err}\n")
    except KeyboardInterrupt:  # Ctrl-C while a default model is built
        parser.exit(130, "gradio_app: interrupted while loading the models\n")
    engines = bundled_engines()
    demo = build(translators, monitor, engines, feedback, decoder_process=args.decoder_process)
    if args.smoke_test:
        oldest = max(engines, key=lambda engine: engine.length).unit  # the likeliest to raise alerts
        raise SystemExit(smoke_test(demo, next(iter(translators)), oldest, MAX_FILE_SIZE,
                                    models_s=time.perf_counter() - started))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # shut down as on Ctrl-C: caches get deleted
    try:
        demo.launch(server_name=args.host, server_port=args.port, max_file_size=MAX_FILE_SIZE,
                    allowed_hosts=tuple(args.allowed_host))
    except OSError as err:  # the port taken since the check
        parser.exit(2, f"gradio_app: error: {unservable(args.host, args.port, err)}\n")
    finally:  # launch returns once Ctrl-C or SIGTERM has closed the server
        demo.handlers.close()


if __name__ == "__main__":
    main()

"""The technician page's repeated parts: plot slots, upload boxes, the translator list and beam slider, the verdict
panel, and clearing a tab when its request is refused. ``gradio_app.py`` lays the tabs out with them.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gradio as gr

from seq2seq.serving.feedback import VERDICTS
from seq2seq.serving.handlers import MAX_BEAM, Handlers, plot_updates
from seq2seq.serving.requests import RawPayload


def plot_slots(count: int, first_label: str, label: str, elem_id: str) -> list[gr.Plot]:
    """One wide plot, then ``count - 1`` hidden ones two to a row; elem_ids ``elem_id``, ``elem_id-2``, ...
    The labels are for screen readers: shown, Gradio's label badge covers the left of a half-width figure's
    title, and each figure's own title says what it is."""
    plots = [gr.Plot(label=first_label, show_label=False, elem_id=elem_id)]
    for start in range(2, count + 1, 2):
        with gr.Row():
            plots += [gr.Plot(label=f"{label} {k}", show_label=False, elem_id=f"{elem_id}-{k}", visible=False)
                      for k in range(start, min(start + 2, count + 1))]
    return plots


def upload_box(label: str, file_types: list[str], elem_id: str, height: int | None = None) -> gr.File:
    """A file upload whose events take raw payloads (``preprocess=False``) and check them in the handler
    (``requests.uploaded``), as /recommend's does: a program that sends a list or a number where a file
    belongs gets a readable error, not Gradio's ``{"error": null}``."""
    upload = gr.File(label=label, file_types=file_types, type="filepath", height=height, elem_id=elem_id)
    upload.data_model = RawPayload
    return upload


def cleared_on_refusal(asked: Any, outputs: list[Any], plots: list[gr.Plot]) -> None:
    """When the request ``asked`` is refused, its tab's ``outputs`` and ``plots`` show nothing of the answer before,
    which would read as the answer to this one (the refusal itself is Gradio's message, gone after seconds)."""
    def cleared() -> list[Any]:
        return [gr.Dropdown(choices=[], value=None) if isinstance(output, gr.Dropdown) else None for output in outputs
                ] + plot_updates([], len(plots))
    asked.failure(cleared, None, [*outputs, *plots], api_visibility="private", queue=False)


def translator_dropdown(handlers: Handlers) -> gr.Dropdown:
    choices = [(name if (attention := r.model.config.attention) in name else f"{name} ({attention})", name)
               for name, r in handlers.translators.items()]
    return gr.Dropdown(choices=choices, value=choices[0][1], label="Translator (attention type)")


def verdict_panel(h: Handlers, prefix: str) -> list[Any]:
    """Right / wrong and "what I did instead" for one chosen recommendation, posted as /feedback's are
    (``h.feedback_panel``); elem_ids ``PREFIX-feedback-choice``, ``-right``, ``-wrong``, ``-correction``. Returns
    what a new answer sets (``h.feedback_panel.targets``) and a refusal clears: the choice, the recommendations it
    indexes, the correction, the saved message and the last record stored."""
    with gr.Accordion("Was it right? Tell us what you did", open=True):
        with gr.Row():
            choice = gr.Dropdown(choices=[], label="Recommendation", elem_id=f"{prefix}-feedback-choice", scale=3)
            technician = gr.Textbox(label="Your name (optional)", max_lines=1, elem_id=f"{prefix}-technician")
        correction = gr.Textbox(label="What I did instead (optional)", lines=2, elem_id=f"{prefix}-correction")
        with gr.Row():
            buttons = {verdict: gr.Button(verdict.capitalize(), elem_id=f"{prefix}-{verdict}")
                       for verdict in VERDICTS}
        saved = gr.Markdown(elem_id=f"{prefix}-feedback-saved")
    answered, last = gr.State(), gr.State()  # last: the record this page stored last (a double click stores once)
    for verdict, button in buttons.items():
        button.click(partial(h.feedback_panel.on_button, verdict), [answered, choice, correction, technician, last],
                     [saved, last], api_name=f"{prefix}_feedback_{verdict}", api_visibility="private",
                     concurrency_limit=None)
    return [choice, answered, correction, saved, last]


def beam_slider(h: Handlers, translator: gr.Dropdown, **options: Any) -> gr.Slider:
    """Beam size, set to the chosen translator's own default (a recipe's tuned one, else greedy)."""
    beam = gr.Slider(1, MAX_BEAM, value=h.translator(None).search.beam_size, step=1, label="Beam size (1 = greedy)",
                     **options)
    translator.change(lambda name: h.translator(name).search.beam_size, [translator], [beam], queue=False,
                      api_visibility="private")
    return beam

"""What a UI request sent, checked, and every failure as a readable one-line ``gr.Error``.

The handlers (``seq2seq/serving/handlers.py``) take raw payloads (``preprocess=False``), so that a
program sending a list, a number or a dict where text or a file belongs is refused in words rather
than by Gradio as ``{"error": null}``; these are the checks they share, and whether a request's client still
listens (``event_listened``), which a long file job asks between its chunks.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.data_classes import GradioRootModel

from seq2seq.errors import CONTROLS, Seq2SeqError, counted, typed_text_fault
from seq2seq.files import split_lines


def refusal(message: str) -> gr.Error:
    """An error shown to the user; the server log gets no traceback for it (user_errors prints unexpected ones)."""
    return gr.Error(message, print_exception=False)


def shown_first(value: Any, event: str) -> Any:
    """``value``, a page state that a follow-up event reads, or a refusal when a program calls that event itself
    (its state unset: it answered with Python's own words, "'NoneType' object has no attribute 'summary'")."""
    if value is None:
        raise refusal(f"Nothing to show: this step follows {event} on the page; call {event} instead.")
    return value


@contextlib.contextmanager
def user_errors(path: str | Path | None = None) -> Iterator[None]:
    """Turn any failure into a readable gr.Error; ``path`` (an upload's temporary path, the feedback database),
    a place on the server the user has no business knowing, is shown as its file name."""
    try:
        yield
    except gr.Error:
        raise
    except (Seq2SeqError, ValueError, OSError) as err:
        message = str(err).replace(str(path), Path(path).name) if path else str(err)
        raise refusal(message) from None
    except Exception as err:
        traceback.print_exc()
        raise refusal(f"Unexpected {type(err).__name__}: {err}. The app is still running; try again.") from None


def alert_lines(text: Any, max_alerts: int, max_chars: int) -> list[str]:
    """The alerts of a /recommend request, one per non-blank line, stripped; refused in words when there are
    none, too many, or one no keyboard types (a lone surrogate from a JSON escape, a control character)."""
    if text is not None and not isinstance(text, str):
        raise refusal(f"Alerts must be text, one per line (got {type(text).__name__}).")
    # Lines as in an incident log. Checked before they are stripped: Python strips U+001C-U+001F, U+0085 and the
    # like as spaces, which would let a control character through at an alert's ends, and count its place from
    # after them.
    lines = [line for line in split_lines(text or "") if line.strip() or CONTROLS.search(line)]
    if not lines:
        raise refusal("Type at least one alert, one per line.")
    if len(lines) > max_alerts or len(text) > max_chars:
        raise refusal(f"Too much input: {counted(len(lines), 'alert')} and {counted(len(text), 'character')}, and a "
                      f"request takes at most {max_alerts} alerts and {max_chars:,} characters; the Batch tab "
                      "translates whole files.")
    for i, line in enumerate(lines, 1):
        if fault := typed_text_fault(line):  # a program's encoding bug or terminal escapes, shown back as they are
            raise refusal(f"Alert {i} {fault}.")
    return [line.strip() for line in lines]


class RawPayload(GradioRootModel):
    """The data model of a file input whose events take raw payloads (``preprocess=False``): anything passes, so
    that a wrong payload reaches the handler (``uploaded``) and is refused in words; Gradio's own file model
    refuses it as ``{"error": null}``. A file payload is still checked by Gradio to be an upload first."""

    root: Any


def uploaded(payload: Any, what: str) -> str | None:
    """The path of the file a request uploaded, None for no file; any other payload is refused, naming ``what``.

    Gradio has checked a payload marked as a file (``meta``) to be an upload in its cache; anything
    else, a dict naming a path included, is never read."""
    if payload is None or payload == "":
        return None
    if isinstance(payload, dict) and payload.get("meta") == {"_type": "gradio.FileData"} \
            and isinstance(payload.get("path"), str):
        return payload["path"]
    raise refusal(f"{what} must be an uploaded file (gradio_client's handle_file), not {type(payload).__name__} "
                  f"{str(payload)[:40]!r}.")


def whole_or_none(value: Any) -> int | None:
    """A whole number as a slider or dropdown sends it (an int, a float such as 3.0, or its text), None for
    none; a fraction (2.7), a bool or anything else is None too, for the caller to refuse in its own words:
    rounding a beam of 2.7 down to 2 would answer a question nobody asked."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(number) if number.is_integer() else None  # NaN and infinities are not integers


def unit_number(value: Any) -> int | None:
    """An engine unit as a dropdown sends it (a number, or its text), None for none; anything else is refused."""
    if value is None or value == "":
        return None
    unit = whole_or_none(value)
    if unit is None:
        raise refusal(f"An engine unit must be a whole number (got {type(value).__name__} {str(value)[:40]!r}).")
    return unit


def event_listened() -> Callable[[], bool]:
    """Whether the client of the Gradio event being handled still listens, asked from any thread. Gradio marks an
    event dead when its client's event stream closes (the tab closed, the program gone: ``Queue.clean_events``) but
    lets a running function run on, so a long job asks between its chunks. This reads Gradio's queue, which is not
    a public interface: where it is not as expected, the event counts as listened to (the job runs to its end, as
    it did before)."""
    try:
        from gradio.context import LocalContext
        blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
        event = next(e for job in blocks._queue.active_jobs if job for e in job if e._id == event_id)
        bool(event.alive)
    except Exception:  # (not in a Gradio event, or another Gradio: never a reason to fail the job)
        return lambda: True
    return lambda: bool(event.alive)

"""What a UI request sent, checked, and every failure as a readable one-line ``gr.Error``.

The handlers (``seq2seq/serving/handlers.py``) take raw payloads (``preprocess=False``), so that a
program sending a list, a number or a dict where text or a file belongs is refused in words rather
than by Gradio as ``{"error": null}``; these are the checks they share.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.data_classes import GradioRootModel

from seq2seq.errors import Seq2SeqError


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


def unit_number(value: Any) -> int | None:
    """An engine unit as a dropdown sends it (a number, or its text), None for none; anything else is refused."""
    if value is None or value == "":
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        raise refusal(f"An engine unit must be a whole number (got {type(value).__name__} "
                      f"{str(value)[:40]!r}).") from None

"""What the gate (gate.py) knows of Gradio's routes: which path a request routes by, the endpoints and event
streams ``/gradio_api/call/`` and ``/gradio_api/queue/data`` name, and the body a call must send. Each answers in
the one line the gate sends back, where Gradio would answer in its internals' words or log a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from seq2seq.errors import DataError
from seq2seq.jsonl import distinct_keys
from seq2seq.jsontext import parse_json
from seq2seq.serving.bodies import Message, Scope

# Gradio writes a session's every output (a whole /recommend JSON) to a new file in its cache on each call
DEEP_LINK_PATH = "/gradio_api/deep_link"
CALL_PREFIX = "/gradio_api/call/"
# Gradio 6's multipart routes (gradio/routes.py), which stream files to its cache: /upload gets one file a request
# from this page (each upload box takes one) and from gradio_client (one per handle_file); /process_recording one
# microphone recording.
UPLOAD_PATHS = ("/gradio_api/upload", "/gradio_api/process_recording")

# An upload part with an empty file name: Gradio's form parser takes it for a text field, and its upload route fails
UNNAMED_FILE = 'upload: a file part has no name; send it as form-data; name="files"; filename="log.csv"'

Endpoints = Callable[[], tuple[set[str], list[str]]]  # the names /gradio_api/call/NAME takes, and the public ones
Streams = Callable[[str], bool]  # event id -> whether its call's event stream has messages to read, or will have


def route_path(scope: Scope) -> str:
    """The path the app routes by, without a trailing slash: under a mount or a proxy's root path (the server puts
    it in ``root_path`` and in front of ``path``), what follows it."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root + "/"):
        path = path[len(root):]
    return path.rstrip("/")


def call_parts(path: str) -> list[str]:
    """``/gradio_api/call/[v2/]NAME[/EVENT]`` -> [NAME] or [NAME, EVENT]; [] for any other path."""
    parts = path.removeprefix(CALL_PREFIX).split("/") if path.startswith(CALL_PREFIX) else []
    return parts[1:] if parts[:1] == ["v2"] else parts


def unknown_endpoint(path: str, endpoints: Endpoints | None) -> str | None:
    """Why ``path`` names no endpoint, or None (it does, or is another route, or there are no ``endpoints``)."""
    parts = call_parts(path)
    if not parts or endpoints is None:
        return None
    known, public = endpoints()
    if parts[0] in known:
        return None
    return f"no endpoint /{parts[0][:60]}; this app's are {', '.join('/' + e for e in public)}"


def no_stream(path: str, streams: Streams | None) -> bytes | None:
    """The error event answering ``GET /gradio_api/call/NAME/EVENT`` for a call with nothing to read (Gradio
    answers an unknown one so, then logs a traceback: its stream raises after it has begun; for a call already
    read it waits for ever), or None: there is one, or this is no such request."""
    parts = call_parts(path)
    if streams is None or len(parts) != 2 or streams(parts[1]):
        return None
    why = f"no call {parts[1][:40]} is waiting to be read: POST /gradio_api/call/{parts[0]}, then read its event once"
    return f"event: error\ndata: {json.dumps(why)}\n\n".encode()


def unnamed_file(err: BaseException) -> bool:
    """Whether ``err`` is Gradio's upload route failing on a part sent with an empty file name (HTTP 500 and a
    traceback, where the client sent a malformed form)."""
    return isinstance(err, TypeError) and "GradioUploadFile" in str(err)


def call_body_fault(messages: list[Message]) -> str | None:
    """What is wrong with the body of a POST to ``/gradio_api/call/NAME``, in one line; None if it is a JSON object
    with a ``data`` list. Gradio would keep the last of two ``data`` keys without a word, read UTF-16, and answer
    other faults in FastAPI's nested structure; ``/api/recommend`` refuses each in one line, and so does this."""
    body = b"".join(message.get("body", b"") for message in messages)
    try:
        value = parse_json(body.decode("utf-8"), partial(distinct_keys, where="body"), standard=False)
    except UnicodeDecodeError:
        return "body: not UTF-8 text; send JSON as UTF-8"
    except DataError as err:
        return str(err)
    except ValueError as err:  # a JsonFault
        return f"body: not JSON ({err})"
    if not isinstance(value, dict) or not isinstance(value.get("data"), list):
        return 'body: send JSON {"data": [inputs]}'
    return None


def upload_too_large(file_size: int) -> dict:
    """The answer to an upload over the size of one file (``file_size`` bytes), whoever refuses it."""
    mib = f" ({file_size >> 20} MiB)" if file_size % (1 << 20) == 0 else ""
    return {"detail": f"upload over {file_size:,} bytes{mib}, the most one file may have"}

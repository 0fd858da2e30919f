"""What the app answers before Gradio sees a request: ``GET /health``, ``POST /api/recommend``, "busy" in words
when full, and "too large" for a request body over its route's cap.

An ASGI middleware (``demo.launch(app_kwargs={"middleware": [Middleware(ServiceGate, status=...)]})``):

- a request from another site's page, or naming the app by a name not its own, gets HTTP 403 and one line
  (``origins.py``: DNS rebinding and cross-site requests);
- ``GET /health`` answers at once, outside Gradio's queue (a full queue must not make a healthy app
  look dead to a process supervisor or load balancer), with the JSON of ``status()``: at least
  ``status`` ("ok"), whether the models are loaded, and how many requests wait;
- a request Gradio turns away because its queue is full (HTTP 503, "Queue is full. Max size is
  ...") comes back as HTTP 503 with a ``Retry-After`` header and ``{"detail": "busy: ... try again in
  N s"}``, N from how many wait and how fast the app has been answering (``status()["retry_after_s"]``); an
  app's own 503 ``{"detail": "busy: WHY"}`` (too many of one kind waiting) is answered so, with its WHY;
- ``/gradio_api/call/NAME`` for a NAME that is no endpoint gets HTTP 404 and one line listing the endpoints (Gradio
  answered 500 and logged a traceback); a POST there whose body is not UTF-8 JSON, repeats a key or lacks a
  ``data`` list gets HTTP 400 and one line, as ``/api/recommend`` does;
- ``GET /gradio_api/call/NAME/EVENT`` for a call with nothing left to read is answered with an error event in one
  line, without reaching Gradio (which logged a traceback, or waited for ever on a call read already);
- ``/gradio_api/deep_link`` gets HTTP 404: Gradio would write the session's outputs to a new file in its cache at
  each call, and the page makes no deep links;
- ``POST /api/recommend`` with ``{"data": [alerts, translator, beam size, n-best]}`` (the inputs of
  Gradio's ``/recommend``, the last three optional) answers in the one response with the JSON
  ``/recommend`` returns, or ``{"error": "..."}`` (HTTP 400) for bad input. It awaits the same handler
  and micro-batcher, at most ``limit`` at once (beyond: the busy answer), without
  Gradio's queue, event stream and per-call session: for programs that send many requests, where
  those cost more than the decoding (docs/serving.md measures both ways);
- a request body over its route's cap gets HTTP 413 and a one-line JSON error naming the cap: at once
  when its ``Content-Length`` says so, else (a chunked body) once the part read passes the cap, never
  reading more. Gradio reads any body its JSON routes get whole into memory, and holds the non-file
  fields of an upload in memory too (it caps only each uploaded file), so every route is capped:
  ``/api/recommend`` at MAX_BODY, Gradio's upload routes at one file of Gradio's ``max_file_size``,
  the rest at ``max_body``;
- the bodies of requests in flight hold at most ``max_held`` bytes in all, so that many clients each sending a
  body under its cap cannot fill the memory together: each chunk of a body (POST, PUT, PATCH) counts as it
  arrives, until its request is answered, and a body whose next chunk would take the total past ``max_held`` is
  cut off with the busy answer. Counted as sent, not as declared: a client that declares an upload and then
  sends nothing holds nothing (counted at its cap when it began, 25 such clients turned every other request away);
- a body that stops arriving for ``body_idle_s`` seconds is cut off with HTTP 408, so a stalled client does not
  hold its connection and Gradio's worker for ever.

How a body is counted, capped, cut off and replayed lives in ``bodies.py``; what the gate knows of Gradio's routes
(endpoints, event streams, a call's body, the upload routes) in ``routes.py``. A body cut off is, to the app, a
client that left (``http.disconnect``); whatever the app then says is dropped and the gate answers instead.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from seq2seq.errors import DataError
from seq2seq.jsonl import distinct_keys
from seq2seq.jsontext import parse_json
from seq2seq.serving.bodies import Answer, Message, Metered, Receive, Replay, Scope, Send, body_messages, capped_body
from seq2seq.serving.origins import Origins
from seq2seq.serving.routes import (
    CALL_PREFIX,
    DEEP_LINK_PATH,
    UNNAMED_FILE,
    UPLOAD_PATHS,
    Endpoints,
    Streams,
    call_body_fault,
    no_stream,
    route_path,
    unknown_endpoint,
    unnamed_file,
    upload_too_large,
)

HEALTH_PATH, RECOMMEND_PATH = "/health", "/api/recommend"
MAX_BODY = 1 << 20  # bytes of a POST /api/recommend body (the handler's own limit on alerts is far lower)
UPLOAD_FRAMING = 64 << 10  # bytes around an upload's file: multipart boundaries and part headers (8 KiB each at most)
MAX_HELD = 256 << 20  # bytes all requests in flight may hold in bodies, as received
BODY_IDLE_S = 30.0  # seconds a request body may pause before it is cut off (an upload's chunks come far faster)
BODY_METHODS = ("POST", "PUT", "PATCH")
MIN_RETRY_FULL_S = 5  # the busy answer's Retry-After when bodies fill the budget: uploads take seconds to drain


class Refused(Exception):
    """Bad input to a direct route: its one-line message goes back with HTTP 400."""


class ServiceGate:
    """ASGI middleware: the health route, a readable "busy" answer and capped request bodies; everything else passes
    through. ``max_body``: the cap on bodies of Gradio's routes but uploads; ``max_file_size``: Gradio's cap on one
    uploaded file (bytes, None for none), read per request because Gradio sets it as it launches; ``max_held``: the
    bytes all requests in flight may hold in bodies, as received; ``body_idle_s``: how long a body may pause;
    ``endpoints``: the names ``/gradio_api/call/NAME`` takes and the public ones, for the 404 of any other;
    ``origins``: which requests are refused by where they come from (None: none);
    ``streams(event_id=..., session_hash=...)``: whether a call's or a session's event stream has messages to read."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], status: Callable[[], dict],
                 recommend: Callable[[Any], Awaitable[dict]] | None = None, limit: int = 1,
                 max_body: int = MAX_BODY, max_file_size: Callable[[], int | None] = lambda: None,
                 max_held: int = MAX_HELD, body_idle_s: float = BODY_IDLE_S,
                 endpoints: Endpoints | None = None, streams: Streams | None = None,
                 origins: Origins | None = None) -> None:
        self.app, self.status, self.recommend, self.endpoints = app, status, recommend, endpoints
        self.origins = origins
        self.streams = streams
        self.limit, self.running = limit, 0
        self.max_body, self.max_file_size = max_body, max_file_size
        self.max_held, self.held, self.body_idle_s = max_held, 0, body_idle_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = route_path(scope)
        foreign = self.origins.fault(scope) if self.origins is not None and scope["type"] != "lifespan" else None
        if foreign is not None and scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": foreign[:120]})  # HTTP 403 before a socket
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if foreign is not None:
            await _respond(send, 403, {"detail": foreign})
            return
        if path == HEALTH_PATH and scope["method"] in ("GET", "HEAD"):
            await _respond(send, 200, self.status())
            return
        if path == DEEP_LINK_PATH:  # the page has no deep links, and sessions keep no outputs to write
            await _respond(send, 404, {"detail": "this app makes no deep links"})
            return
        if (unknown := unknown_endpoint(path, self.endpoints)) is not None:  # Gradio: HTTP 500 and a traceback
            await _respond(send, 404, {"detail": unknown})
            return
        if scope["method"] == "GET" and (events := no_stream(path, self.streams)) is not None:
            await _respond(send, 200, events, {"content-type": "text/event-stream"})
            return
        direct = path == RECOMMEND_PATH and self.recommend is not None
        cap = MAX_BODY if direct else self.body_cap(path)
        if scope["method"] not in BODY_METHODS:  # no body to count or wait for: the event streams, the page
            await (self._recommend if direct else self._forward)(scope, receive, send, cap)
            return
        metered = Metered(receive, self)
        answer = Answer(send, metered)
        try:
            await (self._recommend if direct else self._forward)(scope, metered, answer, cap)
        except Exception as err:
            if metered.cut is None and path in UPLOAD_PATHS and unnamed_file(err) and not answer.started:
                await _respond(send, 400, {"detail": UNNAMED_FILE})
                return
            if metered.cut is None:
                raise  # the app's own fault: the server's error page, as without the gate
            # else the app failing to read a body the gate cut off (Starlette's ClientDisconnect): answered below
        finally:
            self.held -= metered.taken
        if metered.cut is not None and not answer.started:
            if metered.cut == "full":
                await _busy(send, self.status(), f"the bodies of the requests in flight fill the {self.max_held:,} "
                            "bytes this app holds for them", MIN_RETRY_FULL_S, close=True)
            else:
                key = "error" if direct else "detail"  # as the route names its other errors
                await _respond(send, 408, {key: f"request body stopped arriving for {self.body_idle_s:g} s"},
                               {"connection": "close"})

    def body_cap(self, path: str) -> int | None:
        """The most bytes a body sent to Gradio's route ``path`` may have; None: any (uploads, if Gradio takes any)."""
        if path not in UPLOAD_PATHS:
            return self.max_body
        file_size = self.max_file_size()
        return None if file_size is None else file_size + UPLOAD_FRAMING

    async def _forward(self, scope: Scope, receive: Receive, send: Send, cap: int | None) -> None:
        """The request to Gradio, unless its body is over ``cap``; Gradio's 503 becomes the busy answer."""
        capped = await capped_body(scope, receive, cap)
        upload = route_path(scope) in UPLOAD_PATHS and cap is not None  # its cap is the file's and the framing's
        too_large = upload_too_large(cap - UPLOAD_FRAMING) if upload else None
        if capped is None:
            if too_large is not None:
                await _respond(send, 413, too_large, {"connection": "close"})
            else:
                await _too_large(send, cap, "detail")  # as Gradio's routes name their errors
        elif scope["method"] == "POST" and scope.get("path", "").startswith(CALL_PREFIX):
            messages = await body_messages(capped, cap) if cap is not None else None
            fault = call_body_fault(messages) if messages is not None else None
            if messages is None:
                await _too_large(send, cap or 0, "detail")
            elif fault is not None:
                await _respond(send, 400, {"detail": fault})
            else:
                await self.app(scope, Replay(messages, capped), _BusyAnswer(send, self.status))
        else:
            await self.app(scope, capped, _BusyAnswer(send, self.status, too_large))

    async def _recommend(self, scope: Scope, receive: Receive, send: Send, cap: int) -> None:
        if scope["method"] != "POST":
            await _respond(send, 405, {"error": f"{RECOMMEND_PATH} takes POST with a JSON body"}, {"allow": "POST"})
            return
        capped = await capped_body(scope, receive, cap)
        messages = None if capped is None else await body_messages(capped, cap)  # the whole body, at most the cap
        if messages is None:
            await _too_large(send, cap, "error")
            return
        body = b"".join(message.get("body", b"") for message in messages)
        try:  # a key given twice (json keeps the last without a word) is refused; nesting too deep: a JsonFault
            inputs = parse_json(body.decode("utf-8"), partial(distinct_keys, where="body"))["data"]
        except DataError as err:
            await _respond(send, 400, {"error": str(err)})
            return
        except (ValueError, TypeError, KeyError):
            await _respond(send, 400, {"error": 'send JSON: {"data": [alerts, translator, beam size, n-best]}'})
            return
        if self.running >= self.limit:
            await _busy(send, self.status())
            return
        self.running += 1  # one event loop: no lock needed between the check and the count
        try:
            answer = await self.recommend(inputs)
        except Refused as err:
            await _respond(send, 400, {"error": str(err)})
        else:
            await _respond(send, 200, answer)
        finally:
            self.running -= 1


class _BusyAnswer:
    """A ``send`` that replaces a 503 response (Gradio's "Queue is full") by the busy answer; when the app's own
    refusal says why (``{"detail": "busy: WHY"}``, app.PageQueue), the answer says that. Given ``too_large`` (an
    upload route), Gradio's 413 for a file over its size, plain text, becomes that JSON, as the gate words a body
    over the cap: one wording for one cap."""

    def __init__(self, send: Send, status: Callable[[], dict], too_large: dict | None = None) -> None:
        self.send, self.status, self.too_large = send, status, too_large
        self.replaced: int | None = None  # the status of the response being replaced
        self.body = b""

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and (
                message["status"] == 503 or (message["status"] == 413 and self.too_large is not None)):
            self.replaced = message["status"]
            return
        if self.replaced is None:
            await self.send(message)
        elif message["type"] == "http.response.body":
            self.body = (self.body + message.get("body", b""))[:MAX_BODY]  # Gradio's is a line of JSON
            if message.get("more_body", False):
                return
            if self.replaced == 503:
                await _busy(self.send, self.status(), _busy_reason(self.body))
            else:
                await _respond(self.send, 413, self.too_large or {})


def _busy_reason(body: bytes) -> str | None:
    """WHY of an app's 503 ``{"detail": "busy: WHY"}``; None for any other (Gradio's "Queue is full. ...")."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return None
    return detail.removeprefix("busy: ") if isinstance(detail, str) and detail.startswith("busy: ") else None


async def _busy(send: Send, state: dict, why: str | None = None, least_s: int = 1, close: bool = False) -> None:
    """HTTP 503 "busy: WHY; try again in N s" with Retry-After N; WHY by default: how many requests wait. ``close``:
    the request's body was left unread, so its connection cannot carry another request."""
    seconds = max(least_s, int(state.get("retry_after_s", 1)))
    if why is None:
        waiting = state.get("queue", 0) + state.get("decoding", 0)  # queued for a slot, or for a decoder pass
        why = f"{waiting} requests are waiting"
    await _respond(send, 503, {"detail": f"busy: {why}; try again in {seconds} s"},
                   {"retry-after": str(seconds), **({"connection": "close"} if close else {})})


async def _too_large(send: Send, cap: int, key: str) -> None:
    """HTTP 413 with ``{key: "request body over N bytes"}``, ``key`` as the route's other errors name theirs."""
    # The body is left unread, so the connection cannot carry another request.
    await _respond(send, 413, {key: f"request body over {cap:,} bytes"}, {"connection": "close"})


async def _respond(send: Send, code: int, payload: dict | bytes, headers: dict[str, str] | None = None) -> None:
    """``payload``: JSON, or a body as it is sent (with its content type in ``headers``)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    fields = {"content-type": "application/json", "content-length": str(len(body)), **(headers or {})}
    await send({"type": "http.response.start", "status": code,
                "headers": [(k.encode(), v.encode()) for k, v in fields.items()]})
    await send({"type": "http.response.body", "body": body})

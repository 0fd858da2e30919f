"""What the app answers before Gradio sees a request: ``GET /health``, ``POST /api/recommend``, and
"busy" in words when full.

An ASGI middleware (``demo.launch(app_kwargs={"middleware": [Middleware(ServiceGate, status=...)]})``):

- ``GET /health`` answers at once, outside Gradio's queue (a full queue must not make a healthy app
  look dead to a process supervisor or load balancer), with the JSON of ``status()``: at least
  ``status`` ("ok"), whether the models are loaded, and how many requests wait;
- a request Gradio turns away because its queue is full (HTTP 503, "Queue is full. Max size is
  ...") comes back as HTTP 503 with a ``Retry-After`` header and ``{"detail": "busy: ... try again in
  N s"}``, N from how many wait and how fast the app has been answering (``status()["retry_after_s"]``);
- ``POST /api/recommend`` with ``{"data": [alerts, translator, beam size, n-best]}`` (the inputs of
  Gradio's ``/recommend``, the last three optional) answers in the one response with the JSON
  ``/recommend`` returns, or ``{"error": "..."}`` (HTTP 400) for bad input. It awaits the same handler
  and micro-batcher, at most ``limit`` at once (beyond: the busy answer), without
  Gradio's queue, event stream and per-call session: for programs that send many requests, where
  those cost more than the decoding (docs/serving.md measures both ways).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from seq2seq.jsontext import parse_json

Scope, Message = dict[str, Any], dict[str, Any]
Receive, Send = Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]
HEALTH_PATH, RECOMMEND_PATH = "/health", "/api/recommend"
MAX_BODY = 1 << 20  # bytes of a POST /api/recommend body (the handler's own limit on alerts is far lower)


class Refused(Exception):
    """Bad input to a direct route: its one-line message goes back with HTTP 400."""


class ServiceGate:
    """ASGI middleware: the health route and a readable "busy" answer; everything else passes through."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], status: Callable[[], dict],
                 recommend: Callable[[Any], Awaitable[dict]] | None = None, limit: int = 1) -> None:
        self.app, self.status, self.recommend = app, status, recommend
        self.limit, self.running = limit, 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "").rstrip("/")
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif path == HEALTH_PATH and scope["method"] in ("GET", "HEAD"):
            await _respond(send, 200, self.status())
        elif path == RECOMMEND_PATH and self.recommend is not None:
            await self._recommend(scope, receive, send)
        else:
            await self.app(scope, receive, _BusyAnswer(send, self.status))

    async def _recommend(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await _respond(send, 405, {"error": f"{RECOMMEND_PATH} takes POST with a JSON body"}, {"allow": "POST"})
            return
        body = await _body(receive)
        if body is None:
            await _respond(send, 413, {"error": f"body over {MAX_BODY:,} bytes"})
            return
        try:
            inputs = parse_json(body.decode("utf-8"), dict)["data"]  # a JsonFault for nesting too deep, not a 500
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
    """A ``send`` that replaces a 503 response (Gradio's "Queue is full") by the busy answer."""

    def __init__(self, send: Send, status: Callable[[], dict]) -> None:
        self.send, self.status, self.busy = send, status, False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 503:
            self.busy = True
            return
        if not self.busy:
            await self.send(message)
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            await _busy(self.send, self.status())


async def _busy(send: Send, state: dict) -> None:
    seconds = max(1, int(state.get("retry_after_s", 1)))
    waiting = state.get("queue", 0) + state.get("decoding", 0)  # queued for a slot, or for a decoder pass
    await _respond(send, 503, {"detail": f"busy: {waiting} requests are waiting; try again in {seconds} s"},
                   {"retry-after": str(seconds)})


async def _body(receive: Receive) -> bytes | None:
    """The request body, or None past MAX_BODY."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return b""
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_BODY:
            return None
        more = message.get("more_body", False)
    return b"".join(chunks)


async def _respond(send: Send, code: int, payload: dict, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(payload).encode()
    fields = {"content-type": "application/json", "content-length": str(len(body)), **(headers or {})}
    await send({"type": "http.response.start", "status": code,
                "headers": [(k.encode(), v.encode()) for k, v in fields.items()]})
    await send({"type": "http.response.body", "body": body})

"""What the app answers before Gradio sees a request: ``GET /health``, and "busy" in words when full.

An ASGI middleware (``demo.launch(app_kwargs={"middleware": [Middleware(ServiceGate, status=...)]})``):

- ``GET /health`` answers at once, outside Gradio's queue (a full queue must not make a healthy app
  look dead to a process supervisor or load balancer), with the JSON of ``status()``: at least
  ``status`` ("ok"), whether the models are loaded, and how many requests wait;
- a request Gradio turns away because its queue is full (HTTP 503, "Queue is full. Max size is
  ...") comes back as HTTP 503 with a ``Retry-After`` header and ``{"detail": "busy: ... try again in
  N s"}``, N from how many wait and how fast the app has been answering (``status()["retry_after_s"]``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Scope, Message = dict[str, Any], dict[str, Any]
Receive, Send = Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]
HEALTH_PATH = "/health"


class ServiceGate:
    """ASGI middleware: the health route and a readable "busy" answer; everything else passes through."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], status: Callable[[], dict]) -> None:
        self.app, self.status = app, status

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["path"].rstrip("/") == HEALTH_PATH and scope["method"] in ("GET", "HEAD"):
            await _respond(send, 200, self.status())
        else:
            await self.app(scope, receive, _BusyAnswer(send, self.status))


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
            state = self.status()
            seconds = max(1, int(state.get("retry_after_s", 1)))
            await _respond(self.send, 503, {"detail": f"busy: {state.get('queue', 0)} requests are waiting; "
                                                      f"try again in {seconds} s"}, {"retry-after": str(seconds)})


async def _respond(send: Send, code: int, payload: dict, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(payload).encode()
    fields = {"content-type": "application/json", "content-length": str(len(body)), **(headers or {})}
    await send({"type": "http.response.start", "status": code,
                "headers": [(k.encode(), v.encode()) for k, v in fields.items()]})
    await send({"type": "http.response.body", "body": body})

"""Request bodies as the service gate (``gate.py``) reads them: counted as they arrive against the bytes all
requests in flight may hold, cut off when they pass that or stall, capped per route, and replayed to the app
after the gate has read them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

Scope, Message = dict[str, Any], dict[str, Any]
Receive, Send = Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]


class Budget(Protocol):
    """What a metered body counts against (the gate): the bytes held now, the most all bodies may hold, and how
    long a body may pause."""

    held: int
    max_held: int
    body_idle_s: float


class Metered:
    """The ``receive`` the app gets for a request with a body: each chunk is counted in the gate's ``held`` as it
    arrives, and the body is cut off (``cut``: "full" or "stalled") when a chunk would take ``held`` past the gate's
    budget or none comes for its ``body_idle_s``. Once it is cut the app hears that its client left. ``taken``: the
    bytes this request holds, given back when it is answered."""

    def __init__(self, receive: Receive, gate: Budget) -> None:
        self.receive, self.gate = receive, gate
        self.taken, self.body_done, self.cut = 0, False, None

    async def __call__(self) -> Message:
        if self.cut is not None:
            return {"type": "http.disconnect"}
        if self.body_done:  # after the body the app only listens for the client leaving, however long that takes
            return await self.receive()
        try:
            message = await asyncio.wait_for(self.receive(), self.gate.body_idle_s)
        except TimeoutError:
            self.cut = "stalled"
            return {"type": "http.disconnect"}
        if message["type"] != "http.request":
            self.body_done = True
            return message
        size = len(message.get("body", b""))
        self.taken += size
        self.gate.held += size  # one event loop: no lock needed between the count and the check
        if self.gate.held > self.gate.max_held:
            self.cut = "full"
            return {"type": "http.disconnect"}
        self.body_done = not message.get("more_body", False)
        return message


class Answer:
    """The ``send`` the app gets for a request with a body: whether a response started; once the body is cut off
    before it did, nothing of the app's reaches the client (the gate answers instead)."""

    def __init__(self, send: Send, metered: Metered) -> None:
        self.send, self.metered, self.started = send, metered, False

    async def __call__(self, message: Message) -> None:
        if self.metered.cut is not None and not self.started:
            return
        self.started = self.started or message["type"] == "http.response.start"
        await self.send(message)


class Replay:
    """A ``receive`` that gives the app the messages the gate has read, then whatever the server says next."""

    def __init__(self, messages: list[Message], receive: Receive) -> None:
        self.messages, self.receive = messages, receive

    async def __call__(self) -> Message:
        return self.messages.pop(0) if self.messages else await self.receive()


def content_length(scope: Scope) -> int | None:
    """The body size the request declares; None for a body sent in chunks (or no valid declaration)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def capped_body(scope: Scope, receive: Receive, cap: int | None) -> Receive | None:
    """The ``receive`` to give the app for a body of at most ``cap`` bytes (None: any), or None for a longer one:
    at once when its Content-Length says so; a chunked body is read first, up to the cap, then replayed. A body of
    declared length streams through: the server delivers exactly that many bytes."""
    declared = content_length(scope)
    if cap is None or declared is not None:
        return receive if cap is None or declared <= cap else None
    messages = await body_messages(receive, cap)
    return None if messages is None else Replay(messages, receive)


async def body_messages(receive: Receive, cap: int) -> list[Message] | None:
    """The messages of the request body as the server gives them, to its last (or the client's leaving); None once
    the body passes ``cap`` bytes, and nothing more is read."""
    messages, size, more = [], 0, True
    while more:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if size > cap:
            return None
        more = message["type"] == "http.request" and message.get("more_body", False)
    return messages

"""The service gate: /health outside the queue, and Gradio's "Queue is full" turned into a busy answer."""

from __future__ import annotations

import asyncio
import json

import pytest

from seq2seq.serving.batcher import retry_after
from seq2seq.serving.gate import ServiceGate

STATUS = {"status": "ok", "models_loaded": True, "queue": 5, "decoding": 2, "retry_after_s": 3.4}


async def gradio_like(scope, receive, send):
    """Stands in for Gradio: 503 "Queue is full" for /full, 200 for anything else, in two body chunks."""
    code, text = (503, b'{"detail":"Queue is full. Max size is 2 and size is 2."}') if scope["path"] == "/full" \
        else (200, b'{"event_id":"abc"}')
    await send({"type": "http.response.start", "status": code, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": text[:5], "more_body": True})
    await send({"type": "http.response.body", "body": text[5:]})


def request(path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    gate = ServiceGate(gradio_like, lambda: dict(STATUS))
    asyncio.run(gate({"type": "http", "path": path, "method": method, "headers": []}, receive, send))
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1
    headers = {k.decode(): v.decode() for k, v in starts[0]["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    if "content-length" in headers:
        assert int(headers["content-length"]) == len(body)
    return starts[0]["status"], headers, body


@pytest.mark.parametrize("path", ["/health", "/health/"])
def test_health_answers_with_the_status_without_reaching_the_app(path):
    code, headers, body = request(path)
    assert code == 200 and headers["content-type"] == "application/json"
    assert json.loads(body) == STATUS


def test_a_full_queue_is_answered_busy_with_when_to_try_again():
    code, headers, body = request("/full", "POST")
    detail = json.loads(body)["detail"]
    assert code == 503 and headers["retry-after"] == "3"
    assert detail.startswith("busy: 7 requests are waiting") and detail.endswith("try again in 3 s")
    assert "\n" not in detail


@pytest.mark.parametrize(("path", "method"),
                         [("/gradio_api/call/recommend", "POST"), ("/health", "POST"), ("/", "GET")])
def test_everything_else_passes_through_unchanged(path, method):
    code, _, body = request(path, method)
    assert (code, body) == (200, b'{"event_id":"abc"}')


@pytest.mark.parametrize(("in_flight", "rate", "seconds"), [
    (0, 0.0, 1),  # idle: come back at once
    (40, 20.0, 2), (1, 50.0, 1),  # draining: the time it takes
    (128, 0.0, 10),  # none answered lately while some decode: slow passes, a whole rate window
])
def test_retry_after_is_the_time_to_drain_and_never_invites_a_storm_while_passes_are_slow(in_flight, rate, seconds):
    assert retry_after(in_flight, rate) == seconds

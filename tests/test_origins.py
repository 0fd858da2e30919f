"""Requests refused by where they come from: another name for the app (DNS rebinding) and another site's page
(cross-site requests); the app's own page and programs pass."""

from __future__ import annotations

import asyncio
import json

import pytest

from seq2seq.serving.gate import ServiceGate
from seq2seq.serving.origins import Origins, is_loopback


def scope(host: str | None, origin: str | None = None, method: str = "POST", kind: str = "http") -> dict:
    headers = [(b"host", host.encode())] if host is not None else []
    headers += [(b"origin", origin.encode())] if origin is not None else []
    return {"type": kind, "path": "/api/recommend", "method": method, "headers": headers}


@pytest.mark.parametrize(("name", "loopback"), [
    ("localhost", True), ("LOCALHOST.", True), ("app.localhost", True), ("127.0.0.1", True), ("127.8.9.1", True),
    ("::1", True), ("[::1]", True), ("0.0.0.0", False), ("10.0.0.5", False), ("localhost.evil.example", False),
    ("127.0.0.1.evil.example", False), ("", False), (None, False)])
def test_loopback_names_are_localhost_and_the_loopback_addresses_only(name, loopback):
    assert is_loopback(name) is loopback


@pytest.mark.parametrize(("host", "origin", "method"), [
    ("127.0.0.1:7860", None, "POST"),  # a program (gradio_client, curl)
    ("localhost:7860", None, "GET"),
    ("[::1]:7860", None, "GET"),
    (None, None, "POST"),  # HTTP/1.0 without a Host: no browser
    ("127.0.0.1:7860", "http://127.0.0.1:7860", "POST"),  # the app's own page
    ("127.0.0.1:7860", "http://localhost:7860", "POST"),  # the same app by another loopback name
    ("127.0.0.1:7860", "http://evil.example", "GET"),  # reads nothing it could not fetch itself: left to CORS
])
def test_the_apps_own_page_and_programs_pass(host, origin, method):
    assert Origins("127.0.0.1").fault(scope(host, origin, method)) is None


@pytest.mark.parametrize(("host", "origin", "method", "words"), [
    ("evil.example", None, "GET", "Host 'evil.example'"),  # DNS rebinding: the page's own name, this machine
    ("evil.example:7860", "http://evil.example:7860", "POST", "--allowed-host"),
    ("127.0.0.1.evil.example", None, "GET", "Host"),
    ("127.0.0.1:7860", "https://evil.example", "POST", "'https://evil.example'"),  # a form or upload from a stranger
    ("127.0.0.1:7860", "http://localhost:3000", "POST", "another site"),  # another local server's page
    ("127.0.0.1:7860", "null", "POST", "another site"),  # a sandboxed frame, a file on disk
    ("127.0.0.1:7860", "http://[::1", "PUT", "another site"),  # no address at all
])
def test_another_name_for_the_app_or_another_sites_page_is_refused_in_one_line(host, origin, method, words):
    fault = Origins("127.0.0.1").fault(scope(host, origin, method))
    assert fault is not None and words in fault and "\n" not in fault


def test_an_allowed_name_passes_as_host_and_as_origin_and_an_app_bound_to_every_address_checks_only_origins():
    behind_proxy = Origins("127.0.0.1", ("maint.example.com",))
    assert behind_proxy.fault(scope("maint.example.com", "https://maint.example.com")) is None
    assert behind_proxy.fault(scope("127.0.0.1:7860", "https://maint.example.com")) is None  # Host rewritten
    assert behind_proxy.fault(scope("evil.example")) is not None
    assert behind_proxy.fault(scope("127.0.0.1:7860", "https://MAINT.example.com.")) is None  # case, root dot
    everywhere = Origins("0.0.0.0")
    assert everywhere.fault(scope("10.0.0.5:7860", "http://10.0.0.5:7860")) is None
    assert everywhere.fault(scope("any.name", None, "GET")) is None
    assert everywhere.fault(scope("10.0.0.5:7860", "http://evil.example")) is not None


def test_the_gate_answers_a_refused_request_403_without_reaching_the_app():
    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope)

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    gate = ServiceGate(app, dict, origins=Origins("127.0.0.1"))
    asyncio.run(gate(scope("127.0.0.1:7860", "https://evil.example"), receive, send))
    asyncio.run(gate(scope("evil.example", kind="websocket"), receive, send))
    assert not reached
    assert sent[0]["status"] == 403 and "another site" in json.loads(sent[1]["body"])["detail"]
    assert sent[2]["type"] == "websocket.close" and sent[2]["code"] == 1008
    asyncio.run(gate(scope("127.0.0.1:7860", "http://127.0.0.1:7860"), receive, send))
    assert len(reached) == 1

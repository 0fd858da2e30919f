"""The service gate: /health outside the queue, Gradio's "Queue is full" turned into a busy answer, and request
bodies over their route's cap refused."""

from __future__ import annotations

import asyncio
import json

import pytest

from seq2seq.serving.batcher import retry_after
from seq2seq.serving.gate import MAX_BODY, UPLOAD_FRAMING, ServiceGate

STATUS = {"status": "ok", "models_loaded": True, "queue": 5, "decoding": 2, "retry_after_s": 3.4}


async def gradio_like(scope, receive, send):
    """Stands in for Gradio: 503 "Queue is full" for /full, 200 for anything else, in two body chunks."""
    code, text = {"/full": (503, b'{"detail":"Queue is full. Max size is 2 and size is 2."}'),
                  "/full-of-files": (503, b'{"detail":"busy: 8 file jobs are waiting, the most this app queues"}'),
                  }.get(scope["path"], (200, b'{"event_id":"abc"}'))
    await send({"type": "http.response.start", "status": code, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": text[:5], "more_body": True})
    await send({"type": "http.response.body", "body": text[5:]})


def request(path: str, method: str = "GET", body: bytes = b'{"data": []}', **options) -> tuple[int, dict[str, str],
                                                                                                bytes]:
    sent = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    gate = ServiceGate(gradio_like, lambda: dict(STATUS), **options)
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


def test_too_many_of_one_kind_waiting_is_answered_busy_naming_them():
    code, headers, body = request("/full-of-files", "POST")
    assert code == 503 and headers["retry-after"] == "3"
    assert json.loads(body)["detail"] == "busy: 8 file jobs are waiting, the most this app queues; try again in 3 s"


@pytest.mark.parametrize(("path", "method", "known"), [
    ("/gradio_api/call/recommend", "POST", True), ("/gradio_api/call/recommend/abc", "GET", True),
    ("/gradio_api/call/v2/recommend", "POST", True), ("/gradio_api/call/show_step", "POST", True),
    ("/gradio_api/call/nosuch", "POST", False), ("/gradio_api/call/nosuch/abc", "GET", False),
    ("/gradio_api/call/v2/nosuch", "POST", False),
])
def test_a_call_to_no_endpoint_is_answered_404_listing_the_endpoints(path, method, known):
    """Gradio answered HTTP 500 and logged a traceback."""
    code, _, body = request(path, method, endpoints=lambda: ({"recommend", "show_step"}, ["recommend"]))
    if known:
        assert (code, body) == (200, b'{"event_id":"abc"}')
    else:
        assert (code, json.loads(body)) == (404, {"detail": "no endpoint /nosuch; this app's are /recommend"})


@pytest.mark.parametrize(("body", "fault"), [
    (b'{"data": ["egt high"], "data": ["hyd press lo"]}', "body: key 'data' appears twice"),  # Gradio: the last
    ('{"data": ["egt high"]}'.encode("utf-16"), "body: not UTF-8 text; send JSON as UTF-8"),
    (b'{"data": ["egt high"]', "body: not JSON ("),
    (b'["egt high"]', 'body: send JSON {"data": [inputs]}'),
    (b'{"data": "egt high"}', 'body: send JSON {"data": [inputs]}'),
])
def test_a_call_whose_body_is_not_a_json_object_with_data_is_refused_in_one_line(body, fault):
    """As /api/recommend refuses them; Gradio kept the last of two keys and answered others in FastAPI's structure."""
    code, _, answer = request("/gradio_api/call/recommend", "POST", body)
    detail = json.loads(answer)["detail"]
    assert code == 400 and detail.startswith(fault) and "\n" not in detail
    assert request("/gradio_api/call/recommend", "POST", b'{"data": ["egt high"], "session_hash": "a"}')[0] == 200


@pytest.mark.parametrize(("path", "answered"), [
    ("/gradio_api/call/recommend/gone", b'event: error\ndata: "no call gone is waiting to be read: '
                                        b'POST /gradio_api/call/recommend, then read its event once"\n\n'),
    ("/gradio_api/call/v2/recommend/gone", None),
    ("/gradio_api/call/recommend/live", b'{"event_id":"abc"}'),
    ("/gradio_api/queue/data", b'{"event_id":"abc"}'),  # the page's stream: Gradio's
])
def test_a_call_with_nothing_to_read_is_answered_in_one_line_without_reaching_gradio(path, answered):
    """Gradio's stream raised once it had begun and the server logged a traceback, or it waited for ever."""
    sent = []

    async def send(message):
        sent.append(message)

    gate = ServiceGate(gradio_like, lambda: dict(STATUS), streams=lambda event: event == "live")
    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    asyncio.run(gate({"type": "http", "path": path, "method": "GET", "headers": []}, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert sent[0]["status"] == 200
    if answered is None:
        assert body.startswith(b'event: error\ndata: "no call gone')
    else:
        assert body == answered


def test_gradios_own_refusal_of_a_file_over_its_size_is_worded_as_the_gates():
    async def gradio_refusing(scope, receive, send):
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"File size exceeded maximum allowed size of 8 bytes."})
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"x", "more_body": False}

    gate = ServiceGate(gradio_refusing, lambda: dict(STATUS), max_file_size=lambda: 1 << 20)
    asyncio.run(gate({"type": "http", "path": "/gradio_api/upload", "method": "POST", "headers": []}, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert sent[0]["status"] == 413
    assert json.loads(body) == {"detail": "upload over 1,048,576 bytes (1 MiB), the most one file may have"}


def test_deep_links_are_not_made():
    """Gradio would write the session's outputs to a new file in its cache at each call."""
    code, _, body = request("/gradio_api/deep_link")
    assert code == 404 and json.loads(body) == {"detail": "this app makes no deep links"}


@pytest.mark.parametrize(("path", "method"),
                         [("/gradio_api/call/recommend", "POST"), ("/health", "POST"), ("/", "GET")])
def test_everything_else_passes_through_unchanged(path, method):
    code, _, body = request(path, method)
    assert (code, body) == (200, b'{"event_id":"abc"}')


@pytest.mark.parametrize(("in_flight", "rate", "seconds"), [
    (0, 0.0, 1),  # idle: come back at once
    (40, 20.0, 2), (1, 50.0, 1),  # draining: the time it takes
    (384, 1.5, 60),  # a burst's slow first seconds: at most a minute, then ask again
    (128, 0.0, 10),  # none answered lately while some decode: slow passes, a whole rate window
])
def test_retry_after_is_the_time_to_drain_and_never_invites_a_storm_while_passes_are_slow(in_flight, rate, seconds):
    assert retry_after(in_flight, rate) == seconds


# -- body caps -------------------------------------------------------------------------------------------------------
CAP, FILE_SIZE, CHUNK = 1000, 5000, 100  # a small gate: bytes of a JSON body, of an uploaded file, of a chunk


class Served:
    """One request through a gate with CAP and FILE_SIZE in front of an app that reads the whole body, then listens
    for a disconnect (as a streaming response does), and answers 200: what the client got, how many body bytes the
    client was asked for, and what the app was given."""

    def __init__(self, path: str, body: bytes, declared: int | None = None, root_path: str = "",
                 method: str = "POST", file_size: int | None = FILE_SIZE, leaves: bool = False) -> None:
        """``declared``: the body's Content-Length, None: sent in chunks; ``leaves``: the client goes before the
        body's end."""
        self.sent, self.asked, self.app_read, self.app_messages, self.app_heard_next = [], 0, None, [], None
        headers = [] if declared is None else [(b"content-length", str(declared).encode())]
        scope = {"type": "http", "path": path, "root_path": root_path, "method": method, "headers": headers}
        gate = ServiceGate(self.app, lambda: dict(STATUS), max_body=CAP, max_file_size=lambda: file_size)
        chunks = [body[k:k + CHUNK] for k in range(0, len(body), CHUNK)] or [b""]
        self.messages = [{"type": "http.request", "body": chunk, "more_body": leaves or k < len(chunks) - 1}
                         for k, chunk in enumerate(chunks)]
        asyncio.run(gate(scope, self.receive, self.send))

    async def receive(self):
        """The body's next chunk, as a server gives it; after the body, or once the client left, a disconnect."""
        if not self.messages:
            return {"type": "http.disconnect"}
        self.asked += len(self.messages[0]["body"])
        return self.messages.pop(0)

    async def app(self, scope, receive, send):
        read, more = b"", True
        while more:
            message = await receive()
            self.app_messages.append(message)
            read += message.get("body", b"")
            more = message.get("more_body", False)
        self.app_read, self.app_heard_next = read, await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def send(self, message):
        self.sent.append(message)

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")

    @property
    def json(self) -> dict:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body"))


JSON_ROUTES = ["/gradio_api/call/recommend", "/gradio_api/queue/join", "/gradio_api/run/recommend",
               "/gradio_api/call/v2/recommend", "/gradio_api/component_server", "/gradio_api/stream/abc"]


@pytest.mark.parametrize("path", JSON_ROUTES)
def test_a_body_declared_over_the_cap_is_refused_at_once_in_one_line_naming_the_cap(path):
    served = Served(path, b"x" * (CAP + 1), declared=CAP + 1)
    assert served.status == 413 and served.asked == 0 and served.app_read is None
    detail = served.json["detail"]
    assert f"{CAP:,} bytes" in detail and "\n" not in detail


def test_a_direct_recommend_body_declared_over_its_cap_is_refused_at_once_in_its_own_error_shape():
    sent = []

    async def receive():
        raise AssertionError("the body was read")

    async def send(message):
        sent.append(message)

    async def recommend(inputs):
        raise AssertionError("the handler ran")

    gate = ServiceGate(gradio_like, lambda: dict(STATUS), recommend=recommend)
    scope = {"type": "http", "path": "/api/recommend", "method": "POST",
             "headers": [(b"content-length", str(MAX_BODY + 1).encode())]}
    asyncio.run(gate(scope, receive, send))
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"]) == {"error": f"request body over {MAX_BODY:,} bytes"}


@pytest.mark.parametrize("path", ["/gradio_api/queue/join", "/gradio_api/upload"])
def test_a_chunked_body_is_cut_off_once_past_the_cap_without_reading_further(path):
    cap = CAP if path.endswith("join") else FILE_SIZE + UPLOAD_FRAMING
    served = Served(path, b"x" * cap * 10)
    named = CAP if path.endswith("join") else FILE_SIZE  # an upload's refusal names the file's size, as Gradio's
    assert served.status == 413 and f"over {named:,} bytes" in served.json["detail"]
    assert cap < served.asked <= cap + CHUNK  # the chunk that passed the cap, and not one more
    assert served.app_read is None


def test_a_chunked_body_within_the_cap_reaches_the_app_whole_then_the_disconnect():
    body = bytes(range(256)) * 3
    served = Served("/gradio_api/queue/join", body)
    assert served.status == 200 and served.app_read == body
    assert served.app_heard_next == {"type": "http.disconnect"}  # the server's next word reaches the app


def test_a_client_leaving_mid_body_is_seen_leaving_by_the_app_not_as_a_short_body():
    served = Served("/gradio_api/queue/join", b"z" * (CAP // 2), leaves=True)
    assert served.app_read == b"z" * (CAP // 2)
    assert served.app_messages[-2]["more_body"] and served.app_messages[-1] == {"type": "http.disconnect"}


def test_a_body_of_declared_length_within_the_cap_streams_to_the_app_as_sent():
    body = b"y" * CAP
    served = Served("/gradio_api/queue/join", body, declared=CAP)
    assert served.status == 200 and served.app_read == body
    assert len(served.app_messages) == CAP // CHUNK  # chunk by chunk, as the server delivered it


@pytest.mark.parametrize(("root_path", "path"), [
    ("", "/gradio_api/upload"), ("", "/gradio_api/process_recording"),
    ("/maintenance", "/maintenance/gradio_api/upload"),  # mounted, or behind a proxy's root path
])
def test_an_upload_route_takes_one_file_of_gradios_size_and_its_framing_but_not_a_byte_more(root_path, path):
    largest = FILE_SIZE + UPLOAD_FRAMING
    assert Served(path, b"f" * largest, declared=largest, root_path=root_path).status == 200
    refused = Served(path, b"f" * (largest + 1), declared=largest + 1, root_path=root_path)
    assert refused.status == 413
    assert refused.json["detail"] == f"upload over {FILE_SIZE:,} bytes, the most one file may have"


@pytest.mark.parametrize(("root_path", "path"), [
    ("", "/other/gradio_api/upload"),  # not Gradio's upload route: a prefix no mount or proxy declared
    ("/maintenance", "/gradio_api/upload/more"), ("", "/gradio_api/uploads"),
])
def test_only_gradios_upload_routes_take_an_upload_sized_body(root_path, path):
    assert Served(path, b"f" * (CAP + 1), declared=CAP + 1, root_path=root_path).status == 413


def test_uploads_are_left_to_gradio_when_it_takes_files_of_any_size():
    body = b"f" * (FILE_SIZE + UPLOAD_FRAMING + 1)
    assert Served("/gradio_api/upload", body, declared=len(body), file_size=None).status == 200
    assert Served("/gradio_api/queue/join", body, declared=len(body), file_size=None).status == 413


def test_health_answers_under_a_root_path_and_bodiless_requests_pass_whatever_the_cap():
    assert Served("/maintenance/health", b"", method="GET", root_path="/maintenance").json == STATUS
    assert Served("/", b"", method="GET").status == 200


@pytest.mark.parametrize("size, answered", [(MAX_BODY, 200), (MAX_BODY + 1, 413)])
def test_a_direct_recommend_body_sent_in_chunks_is_read_up_to_its_cap_and_no_further(size, answered):
    body = json.dumps({"data": ["pump low"]}).encode()
    body = body + b" " * (size - len(body))  # exactly ``size`` bytes of JSON, the padding after its value
    chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)]
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    read, sent, asked = [], [], []

    async def receive():
        read.append(messages[len(read)])
        return read[-1]

    async def send(message):
        sent.append(message)

    async def recommend(inputs):
        asked.append(inputs)
        return {"ok": True}

    gate = ServiceGate(gradio_like, lambda: dict(STATUS), recommend=recommend)
    asyncio.run(gate({"type": "http", "path": "/api/recommend", "method": "POST", "headers": []}, receive, send))
    assert sent[0]["status"] == answered
    assert sum(len(m["body"]) for m in read) <= MAX_BODY + 65536  # never a chunk past the one that passed the cap
    assert asked == ([["pump low"]] if answered == 200 else [])


def call(gate, method="POST", body=b"{}", stall=False, path="/gradio_api/run/recommend"):
    """One request through ``gate``: its body declared and sent in one chunk, or (``stall``) declared and never
    sent; (status, the messages the client got)."""
    sent = []

    async def receive():
        if stall:
            await asyncio.Event().wait()  # a client that declared a body and went quiet
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    async def run():
        await gate({"type": "http", "path": path, "method": method,
                    "headers": [(b"content-length", str(len(body)).encode())]}, receive, send)
        return next(m["status"] for m in sent if m["type"] == "http.response.start"), sent
    return run()


def holding_app(entered, release):
    async def app(scope, receive, send):  # reads its body, then holds it until released, as a long call does
        message = await receive()
        entered.append(message["type"])
        if message["type"] == "http.disconnect":
            raise ConnectionError("client disconnected")  # as Starlette's ClientDisconnect: the app cannot answer
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
    return app


def test_bodies_in_flight_count_as_they_arrive_and_a_body_past_the_budget_is_cut_off_busy():
    """Many clients each sending a body under its cap must not fill the memory together."""
    release, entered = asyncio.Event(), []

    async def scenario():
        gate = ServiceGate(holding_app(entered, release), lambda: dict(STATUS), max_body=CAP, max_held=2 * CAP)
        held = [asyncio.create_task(call(gate, body=b"x" * CAP)) for _ in range(2)]
        streaming = asyncio.create_task(call(gate, "GET", b""))  # no body: holds nothing
        while len(entered) < 3:
            await asyncio.sleep(0)
        assert gate.held == 2 * CAP
        status, sent = await asyncio.wait_for(call(gate, body=b"y"), 10)  # one byte more would pass the budget
        detail = json.loads(sent[1]["body"])["detail"]
        assert status == 503 and detail.startswith("busy: the bodies of the requests in flight fill the 2,000 bytes")
        headers = dict(sent[0]["headers"])
        assert headers[b"connection"] == b"close" and int(headers[b"retry-after"]) >= 5  # uploads drain slowly
        assert len(sent) == 2 and entered[-1] == "http.disconnect"  # the app heard its client leave, said nothing
        assert gate.held == 2 * CAP
        release.set()
        assert [(await task)[0] for task in [*held, streaming]] == [200, 200, 200]
        assert gate.held == 0
        assert (await call(gate, body=b"x" * CAP))[0] == 200  # room again once they are answered

    asyncio.run(scenario())


@pytest.mark.parametrize("path", ["/gradio_api/upload", "/api/recommend"])
def test_clients_that_declare_bodies_and_send_nothing_hold_nothing_and_are_cut_off_when_they_stall(path):
    """25 clients declaring uploads and then going quiet used to reserve the whole budget (each at its cap), and
    every other request was answered busy until they left."""
    release, entered = asyncio.Event(), []
    release.set()

    async def recommend(inputs):
        return {"answered": inputs}

    async def scenario():
        gate = ServiceGate(holding_app(entered, release), lambda: dict(STATUS), recommend, max_body=CAP,
                           max_file_size=lambda: FILE_SIZE, max_held=2 * CAP, body_idle_s=0.3)
        stalled = [asyncio.create_task(call(gate, body=b"z" * CAP, stall=True, path=path)) for _ in range(10)]
        await asyncio.sleep(0.05)
        assert gate.held == 0
        assert (await asyncio.wait_for(call(gate, body=b"x" * CAP), 10))[0] == 200  # served beside them
        for status, sent in await asyncio.gather(*stalled):
            body = json.loads(sent[1]["body"])
            assert status == 408 and dict(sent[0]["headers"])[b"connection"] == b"close"
            assert list(body.values()) == ["request body stopped arriving for 0.3 s"]
            assert list(body) == (["error"] if path == "/api/recommend" else ["detail"])  # the route's error shape
        assert gate.held == 0

    asyncio.run(scenario())

"""Request bodies over their route's cap, sent to the app served on loopback with the tiny translator: refused
with HTTP 413 in one line, at once when the Content-Length says so, after the cap when sent in chunks; the
largest bodies the endpoints take, every character JSON-escaped, still pass, and so do gradio_client's calls."""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest
from gradio_client import Client, handle_file
from support import launch, trained

import gradio_app
from seq2seq.recommender import Recommender
from seq2seq.serving.app import MAX_REQUEST_BODY
from seq2seq.serving.feedback import MAX_NAME, MAX_TEXT
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.serving.gate import MAX_BODY, UPLOAD_FRAMING
from seq2seq.serving.handlers import MAX_ALERTS, MAX_CHARS

pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning", "ignore::ResourceWarning")
UPLOAD_CAP = 10 * 1024 * 1024 + UPLOAD_FRAMING  # gradio_app.MAX_FILE_SIZE, as Gradio reads "10mb"
UPLOAD_REFUSAL = "upload over 10,485,760 bytes (10 MiB), the most one file may have"
JSON_ROUTES = ["/gradio_api/call/recommend", "/gradio_api/queue/join", "/gradio_api/run/recommend",
               "/gradio_api/call/v2/recommend", "/gradio_api/component_server"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    recommender = Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)
    store = FeedbackStore(tmp_path_factory.mktemp("gate-body") / "feedback.sqlite")
    demo = gradio_app.build({"tiny": recommender}, None, [], store)
    yield launch(demo).rstrip("/")
    demo.close()
    demo.handlers.close()
    store.close()


def post_raw(url: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict]:
    """POST ``headers`` and ``body`` (maybe not all the request announces) on a socket of its own; the answer's
    status and JSON, read until the server closes the connection."""
    address = urlsplit(url)
    head = [f"POST {path} HTTP/1.1", f"Host: {address.netloc}", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((address.hostname, address.port), timeout=15) as connection:
        connection.sendall("\r\n".join([*head, "", ""]).encode() + body)
        answer = b""
        while chunk := connection.recv(1 << 16):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def chunked(size: int, piece: int = 1 << 16) -> bytes:
    """``size`` bytes in chunked transfer coding, without the last (empty) chunk: the sender is not done."""
    return b"".join(b"%x\r\n" % len(data) + data + b"\r\n"
                    for data in (b"x" * min(piece, size - k) for k in range(0, size, piece)))


def escaped(text: str) -> str:
    """``text`` as a JSON string with every character written \\uXXXX: the longest way a client may send it."""
    return '"' + "".join(f"\\u{ord(c):04x}" for c in text) + '"'


def call(url: str, endpoint: str, body: bytes) -> tuple[str, object]:
    """A raw /gradio_api/call/ENDPOINT with the JSON ``body``; the event kind and data of its answer."""
    with httpx.Client(timeout=120) as http:
        joined = http.post(f"{url}/gradio_api/call/{endpoint}", content=body,
                           headers={"content-type": "application/json"})
        assert joined.status_code == 200, joined.text
        stream = http.get(f"{url}/gradio_api/call/{endpoint}/{joined.json()['event_id']}").text
    kind = stream.split("event: ", 1)[1].split("\n", 1)[0]
    return kind, json.loads(stream.split("data: ", 1)[1].split("\n", 1)[0])


@pytest.mark.parametrize("path", JSON_ROUTES)
def test_a_body_declared_over_the_cap_is_refused_before_a_byte_of_it_is_sent(served, path):
    status, answer = post_raw(served, path, {"Content-Type": "application/json",
                                             "Content-Length": str(MAX_REQUEST_BODY + 1)})
    assert status == 413 and answer == {"detail": f"request body over {MAX_REQUEST_BODY:,} bytes"}


def test_a_chunked_body_is_refused_once_it_passes_the_cap(served):
    status, answer = post_raw(served, "/gradio_api/queue/join", {"Content-Type": "application/json",
                                                                 "Transfer-Encoding": "chunked"},
                              chunked(MAX_REQUEST_BODY + 1))
    assert status == 413 and f"{MAX_REQUEST_BODY:,} bytes" in answer["detail"]


def test_an_upload_holds_one_file_of_the_size_gradio_takes_and_no_more(served):
    """Gradio caps each uploaded file but keeps every other form field in memory, however long."""
    field = b'--b\r\nContent-Disposition: form-data; name="padding"\r\n\r\n'
    declared = {"Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(UPLOAD_CAP + 1)}
    assert post_raw(served, "/gradio_api/upload", declared, field)[0] == 413
    status, answer = post_raw(served, "/gradio_api/upload", {"Content-Type": "multipart/form-data; boundary=b",
                                                             "Transfer-Encoding": "chunked"},
                              b"%x\r\n" % len(field) + field + b"\r\n" + chunked(UPLOAD_CAP + 1))
    assert status == 413 and answer["detail"] == UPLOAD_REFUSAL


def test_a_file_over_gradios_size_is_refused_in_the_words_of_a_body_over_the_cap(served):
    """Gradio refuses it in plain text of its own; the gate, a larger body, in JSON: one cap, one wording."""
    size = UPLOAD_CAP - UPLOAD_FRAMING + 1  # one byte over the file size, well within the body's cap
    answer = httpx.post(f"{served}/gradio_api/upload", files={"files": ("log.csv", b"a" * size)}, timeout=60)
    assert answer.status_code == 413 and answer.json() == {"detail": UPLOAD_REFUSAL}


def test_an_upload_part_without_a_file_name_is_refused_in_one_line(served, caplog):
    """Gradio's form parser took it for a text field and its upload route failed: HTTP 500 and a traceback."""
    answer = httpx.post(f"{served}/gradio_api/upload", files={"files": ("", b"alert\npump low\n")}, timeout=30)
    assert answer.status_code == 400
    assert answer.json() == {"detail": 'upload: a file part has no name; send it as form-data; name="files"; '
                                       'filename="log.csv"'}
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    named = httpx.post(f"{served}/gradio_api/upload", files={"files": ("log.txt", b"pump low\n")}, timeout=30)
    assert named.status_code == 200 and named.json()[0].endswith("log.txt")


def test_an_event_read_already_or_never_made_is_answered_at_once_in_one_line(served, caplog):
    """Gradio waited on the first for ever and answered the second "404: Not Found", logging a traceback."""
    with httpx.Client(timeout=10) as http:
        event = http.post(f"{served}/gradio_api/call/recommend", json={"data": ["pump vibration high"]}).json()
        assert "event: complete" in http.get(f"{served}/gradio_api/call/recommend/{event['event_id']}").text
        for name in [event["event_id"], "nosuch"]:
            stream = http.get(f"{served}/gradio_api/call/recommend/{name}").text
            assert stream == (f'event: error\ndata: "no call {name} is waiting to be read: POST '
                              '/gradio_api/call/recommend, then read its event once"\n\n')
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"


def test_the_longest_alerts_every_character_escaped_pass_to_recommend_by_both_routes(served):
    line = ("pump vibration high " * 20)[:MAX_CHARS // MAX_ALERTS - 1]
    text = "\n".join([line] * MAX_ALERTS)
    assert len(text) <= MAX_CHARS and len(text.splitlines()) == MAX_ALERTS
    body = f'{{"data": [{escaped(text)}, "tiny", 1, 1]}}'.encode()
    assert len(body) > 6 * MAX_CHARS - 6 * MAX_ALERTS
    kind, data = call(served, "recommend", body)
    assert kind == "complete" and len(data[0]["alerts"]) == MAX_ALERTS
    direct = httpx.post(f"{served}/api/recommend", content=body, timeout=120)
    assert len(body) <= MAX_BODY and direct.status_code == 200 and direct.json() == data[0]


def test_the_longest_feedback_every_character_escaped_is_stored(served):
    fields = ["é" * MAX_TEXT, "ü" * MAX_TEXT, "wrong", "ö" * MAX_TEXT, "ñ" * MAX_NAME]
    body = f'{{"data": [{", ".join(escaped(field) for field in fields)}]}}'.encode()
    kind, data = call(served, "feedback", body)
    assert kind == "complete" and isinstance(data[0], int)


def test_gradio_client_uploads_and_calls_pass_the_gate(served, tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("pump vibration high\nbelt worn\n", encoding="utf-8")
    client = Client(f"{served}/", verbose=False, analytics_enabled=False)
    try:
        result = client.predict(handle_file(str(log)), None, "tiny", 1, api_name="/translate_file")
        data = client.predict("pump vibration high", "tiny", 1, 1, api_name="/recommend")
    finally:
        client.close()
    with open(result, encoding="utf-8") as written:
        assert len(written.read().splitlines()) == 3  # header and the two alerts
    assert data["alerts"][0]["alert"] == "pump vibration high"

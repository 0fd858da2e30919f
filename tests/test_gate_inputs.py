"""A program calling the named endpoints over raw HTTP (no gradio_client to fill in what it leaves out), on the
app served on loopback with the tiny models: optional trailing inputs left out get the defaults the API page
documents; a required one left out, or one too many, is refused in one line naming what the endpoint takes."""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


import httpx
import pytest
from support import call_endpoint, launch, trained, trained_rul

import gradio_app
from seq2seq.recommender import Recommender
from seq2seq.rul.cmapss import read_cmapss
from seq2seq.rul.monitor import EngineMonitor
from seq2seq.serving.feedback_store import FeedbackStore

pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning", "ignore::ResourceWarning")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    translator, rul = trained(root), trained_rul(root)
    store = FeedbackStore(tmp_path_factory.mktemp("gate-inputs") / "feedback.sqlite")
    demo = gradio_app.build({"tiny": Recommender.from_checkpoint(translator.best)},
                            EngineMonitor.from_checkpoint(rul.output_dir / "best.pt"), read_cmapss(rul.test)[:3], store)
    url = launch(demo).rstrip("/")
    with httpx.Client(timeout=120) as http:
        yield http, url, store
    demo.close()
    demo.handlers.close()
    store.close()


def call(served, endpoint: str, data: list) -> tuple[str, object]:
    """POST /gradio_api/call/ENDPOINT with ``data`` as a program writes it; the kind and data of the answer."""
    http, url, _ = served
    return call_endpoint(http, url, endpoint, data)


def parameters(served, endpoint: str) -> list[dict]:
    """The endpoint's inputs as the API page documents them."""
    http, url, _ = served
    return http.get(f"{url}/gradio_api/info").json()["named_endpoints"][f"/{endpoint}"]["parameters"]


def with_defaults(served, endpoint: str, data: list) -> list:
    """``data`` and, for the inputs it leaves out, the defaults the API page documents (gradio_client's way)."""
    return [*data, *(p["parameter_default"] for p in parameters(served, endpoint)[len(data):])]


def upload(served, name: str, content: str) -> dict:
    """A file uploaded as the page and gradio_client upload one; its payload for an event."""
    http, url, _ = served
    [path] = http.post(f"{url}/gradio_api/upload", files={"files": (name, content.encode())}).json()
    return {"path": path, "orig_name": name, "meta": {"_type": "gradio.FileData"}}


@pytest.mark.parametrize(("endpoint", "data"), [
    ("recommend", ["pump vibration high"]),
    ("recommend", ["pump vibration high\nbelt worn", "tiny", 2]),
    ("engine_health", []),
    ("engine_health", [1, None]),
])
def test_optional_inputs_left_out_get_the_defaults_the_api_page_documents(served, endpoint, data):
    short, full = call(served, endpoint, data), call(served, endpoint, with_defaults(served, endpoint, data))
    assert short[0] == "complete" and short == full


def test_a_file_job_may_leave_out_all_but_the_file(served):
    http = served[0]
    log = upload(served, "log.txt", "pump vibration high\nbelt worn\n")
    answers = [call(served, "translate_file", data) for data in ([log], with_defaults(served, "translate_file", [log]))]
    assert [kind for kind, _ in answers] == ["complete", "complete"]
    short, full = (http.get(payload[0]["url"]).text for _, payload in answers)
    assert short == full and len(short.splitlines()) == 3  # header and the two alerts


def test_feedback_may_leave_out_correction_and_technician(served):
    _, _, store = served
    kind, data = call(served, "feedback", ["belt worn", "replace belt", "right"])
    assert kind == "complete"
    [record] = [r for r in store.records() if r.id == data[0]]
    assert (record.feedback.correction, record.feedback.technician) == ("", "")


@pytest.mark.parametrize(("endpoint", "data"), [
    ("recommend", []),
    ("recommend", ["pump vibration high", "tiny", 1, 1, 1]),
    ("engine_health", [1, None, None, "tiny", "extra"]),
    ("translate_file", []),
    ("feedback", ["belt worn", "replace belt"]),
    ("feedback", ["belt worn", "replace belt", "right", "", "", ""]),
])
def test_a_required_input_left_out_or_one_too_many_is_refused_in_one_line_naming_the_inputs(served, endpoint, data):
    kind, payload = call(served, endpoint, data)
    message = payload["error"]
    assert kind == "error" and "\n" not in message
    assert message.startswith(f"/{endpoint} takes ") and message.endswith(f"got {len(data)}.")
    assert all(p["parameter_name"] in message for p in parameters(served, endpoint))

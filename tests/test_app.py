"""The technician UI through its named API endpoints (gradio_client), served in process on loopback
with the tiny translator and the tiny RUL model of ``tiny_runs``; its smoke-test mode, run as a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import threading
import time
from dataclasses import replace

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import httpx
import pytest
import torch
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from support import DRIFT_UNIT, MAX_SOURCE_LENGTH, UI_ALERTS, launch, trained, trained_rul

import gradio_app
from seq2seq.errors import ConfigError, DataError
from seq2seq.recommender import Recommender
from seq2seq.rul.cmapss import read_cmapss
from seq2seq.rul.monitor import EngineMonitor
from seq2seq.rul.windows import HEALTH_STATES
from seq2seq.serving import app as serving_app
from seq2seq.serving import handlers as handlers_module
from seq2seq.serving import smoke
from seq2seq.serving.defaults import default_rul_model, default_translator, load_translators
from seq2seq.serving.handlers import MAX_ALERTS, Handlers
from seq2seq.serving.incident_log import read_columns
from seq2seq.serving.smoke import free_port

# gradio 6.31 with pandas 3.1 warns on every queued call; the suite turns warnings into errors.
pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning", "ignore::ResourceWarning")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    return trained(root), trained_rul(root)


@pytest.fixture(scope="module")
def client(tiny):
    translator, rul = tiny
    monitor = EngineMonitor.from_checkpoint(rul.output_dir / "best.pt")
    demo = gradio_app.build({"tiny": Recommender.from_checkpoint(translator.best)}, monitor,
                            read_cmapss(rul.test)[:3])
    url = launch(demo)
    yield Client(url, verbose=False, analytics_enabled=False)
    demo.close()


def assert_well_formed(item: dict) -> None:
    """Every candidate's attention is (target pieces x source pieces), rows summing to 1, best first."""
    candidates = item["recommendations"]
    assert candidates
    for candidate in candidates:
        attention = candidate["attention"]
        assert len(attention) == len(candidate["target_pieces"])
        assert all(len(row) == len(item["source_pieces"]) for row in attention)
        assert all(sum(row) == pytest.approx(1.0, abs=1e-3) for row in attention)
        assert 0.0 < candidate["confidence"] <= 1.0
    scores = [candidate["score"] for candidate in candidates]
    assert scores == sorted(scores, reverse=True)
    for candidate in candidates:  # each n-best entry has its own word-level matrix, rows summing to 1
        words = candidate["word_attention"]
        assert len(words) == len(candidate["target_words"]) <= len(candidate["target_pieces"])
        assert all(len(row) == len(candidate["source_words"]) for row in words)
        assert all(sum(row) == pytest.approx(1.0, abs=1e-3) for row in words)
    assert 0.0 <= item["trust"] <= 1.0 and item["verdict"] in ("confident", "uncertain", "out-of-scope")
    similar = [case["similarity"] for case in item["similar"]]
    assert similar and similar == sorted(similar, reverse=True) and all(0.0 <= s <= 1.0 for s in similar)


def test_recommend_returns_attention_matrices_shaped_by_the_pieces(client):
    data = client.predict("\n".join(UI_ALERTS), "tiny", 4, 3, api_name="/recommend")
    assert [item["alert"] for item in data["alerts"]] == UI_ALERTS
    assert data["beam_size"] == 4 and data["n_best"] == 3
    for item in data["alerts"]:
        assert_well_formed(item)
        assert 1 <= len(item["recommendations"]) <= 3
        assert sum(c["share"] for c in item["recommendations"]) == pytest.approx(1.0, abs=1e-6)


def test_greedy_recommend_gives_one_candidate_per_alert_and_skips_blank_lines(client):
    data = client.predict(f"{UI_ALERTS[0]}\n\n   \n{UI_ALERTS[1]}\n", "tiny", 1, 1, api_name="/recommend")
    assert [item["alert"] for item in data["alerts"]] == UI_ALERTS[:2]
    for item in data["alerts"]:
        assert_well_formed(item)
        assert len(item["recommendations"]) == 1


def test_more_alternatives_than_the_beam_widen_the_beam(client):
    data = client.predict(UI_ALERTS[0], "tiny", 1, 2, api_name="/recommend")
    assert data["beam_size"] == 2 and data["n_best"] == 2
    assert_well_formed(data["alerts"][0])


def test_an_over_long_alert_is_truncated_with_a_warning_in_the_answer(client):
    long_alert = " ".join(["pump vibration high"] * MAX_SOURCE_LENGTH)
    item = client.predict(long_alert, "tiny", 1, 1, api_name="/recommend")["alerts"][0]
    assert "truncated" in item["warning"] and len(item["source_pieces"]) == MAX_SOURCE_LENGTH
    assert_well_formed(item)


@pytest.mark.parametrize("text, message", [
    ("", "Type at least one alert"),
    (" \n \n", "Type at least one alert"),
    ("pump vibration high\n" * (MAX_ALERTS + 1), "Too much input"),
])
def test_empty_or_over_long_input_gives_a_readable_error(client, text, message):
    with pytest.raises(AppError, match=message):
        client.predict(text, "tiny", 1, 1, api_name="/recommend")


@pytest.mark.parametrize("inputs, message", [
    ((["pump vibration high"], "tiny", 1, 1), "Alerts must be text"),
    (({"alert": "pump"}, "tiny", 1, 1), "Alerts must be text"),
    ((42, "tiny", 1, 1), "Alerts must be text"),
    (("pump vibration high", "tiny", "many", 1), "whole numbers"),
    (("pump vibration high", "tiny", 2.7, 1), "whole numbers"),  # not quietly beam 2
    (("pump vibration high", "tiny", 3, 1.5), "whole numbers"),
    (("pump vibration high", "tiny", 99, 1), "Beam size must be"),
    (("pump vibration high", "tiny", 0, 1), "Beam size must be"),  # 0 is no stand-in for the default
    (("pump vibration high", "tiny", 1, 0), "Beam size must be"),
    (("pump vibration high", "tiny", 1e308, 1), r"\(got a number of 309 digits and 1\)"),  # not 309 digits in a line
    (("pump vibration high", ["tiny"], 1, 1), "Unknown translator"),
    (("pump vibration high", 7, 1, 1), "Unknown translator"),  # None is the default translator
])
def test_inputs_of_the_wrong_type_get_a_readable_error_not_a_null_one(client, inputs, message):
    with pytest.raises(AppError, match=message):
        client.predict(*inputs, api_name="/recommend")


@pytest.mark.parametrize("endpoint, inputs, message", [
    ("/engine_health", (None, [1, 2], None, "tiny"), "The C-MAPSS file must be an uploaded file"),
    ("/engine_health", (None, 42, None, "tiny"), "The C-MAPSS file must be an uploaded file"),
    ("/engine_health", (None, {"path": "train.txt"}, None, "tiny"), "The C-MAPSS file must be an uploaded file"),
    ("/engine_health", (None, "train.txt", None, "tiny"), "The C-MAPSS file must be an uploaded file"),
    ("/engine_health", ([1], None, None, "tiny"), "An engine unit must be a whole number"),
    ("/engine_health", ({"unit": 1}, None, None, "tiny"), "An engine unit must be a whole number"),
    ("/engine_health", ("nan", None, None, "tiny"), "An engine unit must be a whole number"),
    ("/engine_health", (1.5, None, None, "tiny"), "An engine unit must be a whole number"),
    ("/engine_health", (None, None, None, "tiny"), "Pick one of the bundled engines"),
    ("/translate_file", ([1, 2], None, "tiny", 1), "The incident log must be an uploaded file"),
    ("/translate_file", (42, None, "tiny", 1), "The incident log must be an uploaded file"),
    ("/translate_file", ({"path": "log.csv"}, None, "tiny", 1), "The incident log must be an uploaded file"),
    ("/translate_file", (None, None, "tiny", 1), "Upload an incident log first"),
])
def test_a_wrong_payload_for_a_file_endpoint_gets_a_readable_error_not_a_null_one(client, endpoint, inputs, message):
    with pytest.raises(AppError, match=message):
        client.predict(*inputs, api_name=endpoint)


@pytest.mark.parametrize("endpoint, inputs", [
    ("engine_health", [None, "FILE", None, "tiny"]),
    ("translate_file", ["FILE", None, "tiny", 1]),
])
def test_a_file_payload_naming_a_path_no_one_uploaded_is_refused_in_words_and_not_read(client, endpoint, inputs,
                                                                                      tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("1 1 " + " ".join(["0.5"] * 24) + "\n", encoding="utf-8")
    payload = {"path": str(secret), "meta": {"_type": "gradio.FileData"}, "orig_name": "secret.txt"}
    url = client.src.rstrip("/")
    with httpx.Client(timeout=60) as http:
        event = http.post(f"{url}/gradio_api/call/{endpoint}",
                          json={"data": [payload if x == "FILE" else x for x in inputs]}).json()["event_id"]
        stream = http.get(f"{url}/gradio_api/call/{endpoint}/{event}").text
    assert "event: error" in stream and "data: null" not in stream
    message = json.loads(stream.split("event: error", 1)[1].split("data: ", 1)[1].splitlines()[0])["error"]
    assert "not uploaded" in message and "\n" not in message and "0.5" not in stream


@pytest.mark.parametrize(("endpoint", "inputs", "first"), [
    ("batch_summary", [None], "/translate_file"), ("show_recommendations", [None, None, "words"], "/recommend"),
    ("alerts_feedback_targets", [None], "/recommend"), ("show_engine", [None, None], "/engine_health"),
    ("engine_feedback_targets", [None], "/engine_health"),
])
def test_a_page_step_called_by_a_program_without_its_state_is_told_what_to_call_not_python_s_words(client, endpoint,
                                                                                                 inputs, first):
    """It answered "'NoneType' object has no attribute 'summary'" and left a traceback in the server log."""
    url = client.src.rstrip("/")
    with httpx.Client(timeout=60) as http:
        event = http.post(f"{url}/gradio_api/call/{endpoint}", json={"data": inputs}).json()["event_id"]
        stream = http.get(f"{url}/gradio_api/call/{endpoint}/{event}").text
    message = json.loads(stream.split("event: error", 1)[1].split("data: ", 1)[1].splitlines()[0])["error"]
    assert message == f"Nothing to show: this step follows {first} on the page; call {first} instead."


def test_a_translate_file_column_that_is_not_text_gets_a_readable_error(client, tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("source\npump vibration high\n", encoding="utf-8")
    for column in (["source"], 3, {"name": "source"}):
        with pytest.raises(AppError, match="The alert column must be text"):
            client.predict(handle_file(str(log)), column, "tiny", 1, api_name="/translate_file")


def test_an_alert_column_named_for_a_txt_log_is_refused_as_the_cli_refuses_it(client, tmp_path):
    """It was ignored without a word, every line translated whatever column was named."""
    log = tmp_path / "log.txt"
    log.write_text("pump vibration high\n", encoding="utf-8")
    with pytest.raises(AppError, match=r"log\.txt: a \.txt log has one alert per line and no columns"):
        client.predict(handle_file(str(log)), "no_such_column", "tiny", 1, api_name="/translate_file")
    path = client.predict(handle_file(str(log)), "", "tiny", 1, api_name="/translate_file")  # empty: fine
    assert "pump vibration high" in Path(path).read_text(encoding="utf-8")


def test_engine_health_gives_rul_health_alerts_and_one_recommendation_per_alert(client, tiny):
    _, rul = tiny
    bundled = client.predict(read_cmapss(rul.test)[0].unit, None, None, "tiny", api_name="/engine_health")
    uploaded = client.predict(None, handle_file(str(rul.train)), DRIFT_UNIT, "tiny", api_name="/engine_health")
    assert uploaded["unit"] == DRIFT_UNIT and uploaded["source"] == rul.train.name
    assert uploaded["alerts"], "the drifted engine raises alerts"
    for data in (bundled, uploaded):
        assert data["rul"] >= 0 and data["health"] in HEALTH_STATES
        assert len(data["attention"]) == len(data["window_cycles"])
        assert len(data["recommendations"]) == len(data["alerts"])
        for alert, item in zip(data["alerts"], data["recommendations"], strict=True):
            assert item["alert"] == alert["phrase"]
            assert_well_formed(item)


def test_translate_file_returns_every_row_with_recommendation_and_score(client, tmp_path):
    log = tmp_path / "incidents.csv"
    rows = [{"ticket": str(i), "alert": alert} for i, alert in enumerate([*UI_ALERTS, "", "oil level low"], 1)]
    with log.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["ticket", "alert"])
        writer.writeheader()
        writer.writerows(rows)
    output = client.predict(handle_file(str(log)), "alert", "tiny", 1, api_name="/translate_file")
    with Path(output).open(newline="", encoding="utf-8") as handle:
        result = list(csv.DictReader(handle))
    assert [(r["ticket"], r["alert"]) for r in result] == [(r["ticket"], r["alert"]) for r in rows]
    assert {"recommendation", "score"} <= set(result[0])
    assert all(r["recommendation"] for r in result if r["alert"])


@pytest.mark.parametrize("name, content, columns", [
    ("log.csv", 'ticket,"alert, text"\n1,pump vibration high\n', ["ticket", "alert, text"]),
    ("log.tsv", "ticket\tsource\n1\tpump vibration high\n", ["ticket", "source"]),
    ("log.jsonl", '\n{"id": 1, "problem": "pump vibration high"}\n', ["id", "problem"]),
    ("log.txt", "pump vibration high\n", []),
    ("log.jsonl", "not json\n", []),
    ("log.csv", b"ticket,alert\n1,caf\xe9 pump leak\n", ["ticket", "alert"]),  # a row the job flags, not the header
    ("log.tsv", b"ticket\talert\xe9\n1\tpump leak\n", []),  # a header the job refuses
])
def test_batch_column_choices_come_from_the_uploaded_header(tmp_path, name, content, columns):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    assert read_columns(path) == columns


def test_a_failing_request_shows_a_message_and_the_app_keeps_serving(client, tmp_path):
    not_cmapss = tmp_path / "notes.txt"
    not_cmapss.write_text("this is not sensor data\n", encoding="utf-8")
    with pytest.raises(AppError, match=r"notes\.txt"):
        client.predict(None, handle_file(str(not_cmapss)), None, "tiny", api_name="/engine_health")
    with pytest.raises(AppError, match="Pick one of the bundled engines"):
        client.predict(None, None, None, "tiny", api_name="/engine_health")
    with pytest.raises(AppError, match="Upload an incident log"):
        client.predict(None, "", "tiny", 1, api_name="/translate_file")
    data = client.predict(UI_ALERTS[0], "tiny", 1, 1, api_name="/recommend")
    assert data["alerts"][0]["recommendations"][0]["text"]


def test_uploads_over_the_size_cap_are_refused(client):
    limit = 10 * 1024 * 1024
    assert gradio_app.MAX_FILE_SIZE == "10mb"
    response = httpx.post(f"{client.src.rstrip('/')}/gradio_api/upload",
                          files={"files": ("big.csv", b"a" * (limit + 1), "text/csv")})
    assert response.status_code == 413


@pytest.mark.parametrize("payload", [
    {"path": "https://example.com/log.csv"},  # Gradio would fetch it into its cache, at any size
    {"path": "log.csv", "url": "file:///etc/passwd"},  # Gradio's refusal named the server's working folder
    {"path": "/tmp/gradio/../../etc/passwd"},
    {"path": "/tmp/gradio/a\0b.csv"},
    {"path": ["/etc/passwd"]},
])
def test_a_file_payload_that_is_an_address_or_a_path_outside_the_uploads_is_refused_in_one_line(client, payload,
                                                                                                   monkeypatch):
    from gradio import processing_utils
    fetched = []
    monkeypatch.setattr(processing_utils, "async_ssrf_protected_download", lambda *args, **kwargs: fetched.append(args))
    data = [{**payload, "meta": {"_type": "gradio.FileData"}}, None, "tiny", 1]
    base = client.src.rstrip("/")
    with httpx.Client(timeout=60) as http:
        event = http.post(f"{base}/gradio_api/call/translate_file", json={"data": data}).json()["event_id"]
        stream = http.get(f"{base}/gradio_api/call/translate_file/{event}").text
    message = json.loads(stream.split("event: error", 1)[1].split("data: ", 1)[1].splitlines()[0])["error"]
    assert "was not uploaded to this app" in message and "\n" not in message
    assert os.getcwd() not in message and not fetched


def test_a_folder_of_the_uploads_named_as_a_file_is_refused_so_the_clean_up_of_uploads_goes_on(client, tmp_path):
    """Gradio deletes each input file with os.remove, which a folder stops: uploads would then stay for good."""
    base = client.src.rstrip("/")
    log = tmp_path / "log.csv"
    log.write_text("source\npump vibration high\n", encoding="utf-8")
    with httpx.Client(timeout=60) as http:
        uploaded = Path(http.post(f"{base}/gradio_api/upload", files={"files": log.open("rb")}).json()[0])
        for folder in (uploaded.parent, uploaded.parent.parent):  # the upload's own folder, and all of them
            data = [{"path": str(folder), "meta": {"_type": "gradio.FileData"}}]
            event = http.post(f"{base}/gradio_api/call/file_columns", json={"data": data}).json()["event_id"]
            stream = http.get(f"{base}/gradio_api/call/file_columns/{event}").text
            message = json.loads(stream.split("event: error", 1)[1].split("data: ", 1)[1].splitlines()[0])["error"]
            assert "is not a file uploaded to this app" in message and "\n" not in message
        data = [{"path": str(uploaded), "meta": {"_type": "gradio.FileData"}}]  # the file itself is read
        event = http.post(f"{base}/gradio_api/call/file_columns", json={"data": data}).json()["event_id"]
        assert "event: complete" in http.get(f"{base}/gradio_api/call/file_columns/{event}").text


def test_another_name_for_the_app_or_another_sites_page_gets_403_and_programs_pass(client):
    """DNS rebinding (a page pointing its own name at 127.0.0.1) and cross-site POSTs (seq2seq/serving/origins.py)."""
    base = client.src.rstrip("/")
    assert httpx.get(f"{base}/health", headers={"host": "evil.example"}).status_code == 403
    stranger = {"origin": "https://evil.example", "content-type": "text/plain"}  # no preflight for text/plain
    refused = httpx.post(f"{base}/api/recommend", content=json.dumps({"data": [UI_ALERTS[0]]}), headers=stranger)
    assert refused.status_code == 403 and "another site" in refused.json()["detail"]
    upload = httpx.post(f"{base}/gradio_api/upload", files={"files": ("a.csv", b"source\negt high\n", "text/csv")},
                        headers={"origin": "https://evil.example"})
    assert upload.status_code == 403
    own_page = {"origin": base}
    assert httpx.post(f"{base}/api/recommend", json={"data": [UI_ALERTS[0]]}, headers=own_page).status_code == 200
    assert httpx.post(f"{base}/api/recommend", json={"data": [UI_ALERTS[0]]}).status_code == 200  # a program


def test_a_server_path_named_in_a_request_is_never_read(client, tmp_path):
    secret = tmp_path / "train_secret.txt"
    secret.write_text("1 1 0 0 100" + " 1" * 21 + "\n", encoding="utf-8")
    base = client.src.rstrip("/")
    payload = {"data": [None, {"path": str(secret), "meta": {"_type": "gradio.FileData"}}, None, "tiny"]}
    event = httpx.post(f"{base}/gradio_api/call/engine_health", json=payload).json()["event_id"]
    stream = httpx.get(f"{base}/gradio_api/call/engine_health/{event}", timeout=30).text
    assert "event: error" in stream and '"unit"' not in stream


def test_engine_and_file_jobs_have_a_slot_each_recommend_calls_share_decoder_passes_and_the_queue_is_bounded(tiny):
    translator, _ = tiny
    demo = gradio_app.build({"tiny": Recommender.from_checkpoint(translator.best)}, None, [])
    model_calls = {fn.api_name: fn for fn in demo.fns.values()
                   if fn.api_name in ("recommend", "engine_health", "translate_file")}
    assert len(model_calls) == 3
    engine, batch = model_calls["engine_health"], model_calls["translate_file"]
    assert engine.concurrency_id != batch.concurrency_id
    assert engine.concurrency_limit == gradio_app.ENGINE_CONCURRENCY
    assert batch.concurrency_limit == gradio_app.BATCH_CONCURRENCY
    recommend = model_calls["recommend"]  # many at once, each waiting for a shared pass (seq2seq/serving/batcher.py)
    assert recommend.concurrency_id == "recommend" and recommend.concurrency_limit == gradio_app.RECOMMEND_CONCURRENCY
    assert serving_app.MAX_THREADS > gradio_app.RECOMMEND_CONCURRENCY
    assert demo._queue.max_size == gradio_app.QUEUE_SIZE
    demo.handlers.close()


def test_an_engine_check_is_answered_while_a_file_job_holds_its_slot(client, tiny, tmp_path, monkeypatch):
    """A file job can take minutes; a technician checking an engine must not wait behind it."""
    started, release = threading.Event(), threading.Event()
    real = handlers_module.translate_file

    def held_open(*args, **kwargs):  # the file job, stopped before its first row until the check is answered
        started.set()
        release.wait(timeout=60)
        return real(*args, **kwargs)

    monkeypatch.setattr(handlers_module, "translate_file", held_open)
    log = tmp_path / "incidents.csv"
    log.write_text("source\npump vibration high\n", encoding="utf-8")
    job = client.submit(handle_file(str(log)), "source", "tiny", 1, api_name="/translate_file")
    try:
        assert started.wait(timeout=30), "the file job never started"
        _, rul = tiny
        check = client.submit(read_cmapss(rul.test)[0].unit, None, None, "tiny", api_name="/engine_health")
        data = check.result(timeout=30)  # a TimeoutError if it waits behind the file job
        assert not job.done() and data["rul"] >= 0
    finally:
        release.set()
    assert Path(job.result(timeout=60)).read_text(encoding="utf-8").startswith("source,")


def test_the_queue_cannot_be_skipped_by_posting_to_the_direct_route(client):
    response = httpx.post(f"{client.src.rstrip('/')}/gradio_api/run/recommend",
                          json={"data": [UI_ALERTS[0], "tiny", 1, 1]})
    assert response.status_code == 404 and "join the queue" in response.text


def test_each_page_names_the_translator_and_search_that_answered_it(tiny):
    """A translator picked after an answer leaves that answer on screen until the next request: the page must say
    whose it is, or it passes for the new translator's."""
    translator, rul = tiny
    recommender = Recommender.from_checkpoint(translator.best)
    engines = [engine for engine in read_cmapss(rul.train) if engine.unit == DRIFT_UNIT]  # it raises alerts
    handlers = Handlers({"first": recommender, "second": recommender},
                        EngineMonitor.from_checkpoint(rul.output_dir / "best.pt"), engines)
    try:
        _, page, _ = asyncio.run(handlers.recommend("pump vibration high", "second", 2, 1))
        assert page.startswith("*Answered by translator second (beam size 2).*")
        _, page, _ = asyncio.run(handlers.recommend("pump vibration high", "first", 1, 1))
        assert page.startswith("*Answered by translator first (greedy search).*")
        data, page, _ = handlers.engine_health(engines[0].unit, None, None, "second")
        assert (data["translator"], data["beam_size"]) == ("second", recommender.search.beam_size)
        assert data["alerts"] and "*Answered by translator second (greedy search).*" in page
    finally:
        handlers.close()


def test_an_engine_without_alerts_shows_no_empty_heatmap_frame(tiny):
    translator, rul = tiny
    engine = read_cmapss(rul.test)[0]
    short = replace(engine, cycles=engine.cycles[:10], settings=engine.settings[:10], sensors=engine.sensors[:10])
    handlers = Handlers({"tiny": Recommender.from_checkpoint(translator.best)},
                        EngineMonitor.from_checkpoint(rul.output_dir / "best.pt"), [short])
    try:
        _, summary, report = handlers.engine_health(short.unit, None, None, "tiny")
        _, _, _, *plots = handlers.show_engine(summary, report)
    finally:
        handlers.close()
    assert not report.alerts and "No alerts" in summary
    assert plots and not any(plot.visible for plot in plots)


def test_batch_results_live_in_the_apps_temporary_folder_until_they_age_or_it_closes(tiny, tmp_path):
    translator, _ = tiny
    handlers = Handlers({"tiny": Recommender.from_checkpoint(translator.best)}, None, [])
    log = tmp_path / "log.txt"
    log.write_text("pump vibration high\n", encoding="utf-8")
    upload = {"path": str(log), "meta": {"_type": "gradio.FileData"}}  # as Gradio hands an upload on
    first, _ = asyncio.run(handlers.translate_upload(upload, None, "tiny", 1, progress=lambda *args, **kwargs: None))
    assert Path(first).is_file() and Path(first).is_relative_to(handlers.work_dir)
    os.utime(Path(first).parent, (0, 0))  # as if written long ago
    second, _ = asyncio.run(handlers.translate_upload(upload, None, "tiny", 1, progress=lambda *args, **kwargs: None))
    assert Path(second).is_file() and not Path(first).exists()
    handlers.close()
    assert not handlers.work_dir.exists()


def test_a_cancelled_batch_job_stops_after_the_chunk_it_is_on(tiny, tmp_path):
    """A client that cancels /translate_file (or leaves) frees the model's slot; the job's thread must stop too,
    rather than translate the rest of the file for nobody beside the next job."""
    translator, _ = tiny
    handlers = Handlers({"tiny": Recommender.from_checkpoint(translator.best)}, None, [])
    log = tmp_path / "log.txt"
    log.write_text("".join(f"pump vibration high {n % 1000}\n" for n in range(20_000)), encoding="utf-8")  # distinct
    # within each chunk, as a repeated alert is decoded once
    upload = {"path": str(log), "meta": {"_type": "gradio.FileData"}}
    reports, threads = [], threading.active_count()

    async def cancel_after_first_chunk():
        job = asyncio.create_task(handlers.translate_upload(upload, None, "tiny", 1,
                                                            progress=lambda *args, **kwargs: reports.append(args)))
        while len(reports) < 2:  # "starting", then the first chunk
            await asyncio.sleep(0.01)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job

    try:
        asyncio.run(cancel_after_first_chunk())  # waits for the job's thread too, as its default executor closes
        written = next(handlers.work_dir.rglob("*.recommendations.csv"))
        rows = written.read_text(encoding="utf-8").count("\n") - 1
        assert 0 < rows <= 256 * 2 < 20_000  # the chunk it was on at most, not the file
        assert threading.active_count() <= threads
    finally:
        handlers.close()


def test_a_file_job_whose_client_leaves_stops_after_the_chunk_it_is_on(client, tmp_path, monkeypatch):
    """A technician who closes the tab (its event stream closes) must not leave the file job holding the batch slot
    for minutes: Gradio marks the event dead but lets the function run, so the job asks between its chunks."""
    real, ended, reports = handlers_module.translate_file, [], []

    def watched(*args, progress, **kwargs):
        def report(done, total):
            reports.append(done)
            progress(done, total)
        try:
            return real(*args, progress=report, **kwargs)
        except BaseException as err:
            ended.append(err)
            raise
        finally:
            ended.append("ended")

    monkeypatch.setattr(handlers_module, "translate_file", watched)
    # The server learns that a client left when a write to it fails: Gradio writes a heartbeat to each event stream
    # every 15 s, which a test would wait for; here every 0.2 s.
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")
    log = tmp_path / "incidents.txt"
    log.write_text("".join(f"pump vibration high {n % 1000}\n" for n in range(20_000)), encoding="utf-8")
    base = client.src.rstrip("/")
    with httpx.Client(timeout=60) as http:
        with log.open("rb") as handle:
            path = http.post(f"{base}/gradio_api/upload", files={"files": ("incidents.txt", handle)}).json()[0]
        data = [{"path": path, "meta": {"_type": "gradio.FileData"}}, None, "tiny", 1]
        event = http.post(f"{base}/gradio_api/call/translate_file", json={"data": data}).json()["event_id"]
        with http.stream("GET", f"{base}/gradio_api/call/translate_file/{event}") as stream:
            for _ in stream.iter_lines():
                if reports:  # a first chunk is written: the job runs
                    break
    deadline = time.monotonic() + 60
    while "ended" not in ended and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ended" in ended, "the job ran on after its client left"
    assert type(ended[0]).__name__ == "JobCancelled" and 0 < reports[-1] < 20_000, (ended, reports)


def test_closing_the_app_stops_a_running_batch_job_after_its_chunk(tiny, tmp_path):
    """At shutdown a file job's thread would hold the process's exit until its whole file is done."""
    translator, _ = tiny
    handlers = Handlers({"tiny": Recommender.from_checkpoint(translator.best)}, None, [])
    log = tmp_path / "log.txt"
    log.write_text("".join(f"pump vibration high {n % 1000}\n" for n in range(20_000)), encoding="utf-8")  # distinct
    # within each chunk, as a repeated alert is decoded once
    upload = {"path": str(log), "meta": {"_type": "gradio.FileData"}}
    reports = []

    async def close_after_first_chunk():
        job = asyncio.create_task(handlers.translate_upload(upload, None, "tiny", 1,
                                                            progress=lambda *args, **kwargs: reports.append(args)))
        while not any(isinstance(done, tuple) and done[0] for done, *_ in reports):  # a first chunk is written
            await asyncio.sleep(0.01)
        handlers.stopping.set()  # what close() does first
        with pytest.raises(gr.Error, match=r"The app is shutting down: log.txt stopped after \d+ rows") as stopped:
            await job
        return int(stopped.value.message.split(" after ")[1].split()[0])

    try:
        assert 0 < asyncio.run(close_after_first_chunk()) <= 256 * 2 < 20_000  # the chunk it was on, not the file
    finally:
        handlers.close()


@pytest.mark.slow
def test_sigterm_ends_the_app_promptly_while_a_batch_job_runs(tiny, tmp_path):
    translator, rul = tiny
    port = free_port()
    log = tmp_path / "log.txt"
    log.write_text("".join(f"pump vibration high {n % 1000}\n" for n in range(400_000)),  # 9.6 MB: minutes with
                   encoding="utf-8")  # beam 5, as each chunk's alerts are distinct (a repeat is decoded once)
    server = subprocess.Popen([sys.executable, "gradio_app.py", "--model", str(translator.best), "--rul-model",
                               str(rul.output_dir / "best.pt"), "--feedback-db", str(tmp_path / "feedback.sqlite"),
                               "--port", str(port)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}health").status_code == 200:
                    break
            time.sleep(0.1)
        client = Client(url, verbose=False, analytics_enabled=False)
        job = client.submit(handle_file(str(log)), None, None, 5, api_name="/translate_file")
        for _ in range(600):
            if any(unit.index for unit in job.status().progress_data or []):  # rows done: the job runs
                break
            time.sleep(0.1)
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=30)  # the whole file would take minutes
    finally:
        server.kill()
    assert server.returncode == 0 and "Traceback" not in errors and "terminate called" not in errors


@pytest.mark.slow
def test_smoke_test_mode_calls_each_endpoint_then_exits_leaving_no_files(tiny, tmp_path):
    translator, rul = tiny
    temp, cache = tmp_path / "tmp", tmp_path / "gradio"
    temp.mkdir()
    cache.mkdir()
    done = subprocess.run([sys.executable, "gradio_app.py", "--smoke-test", "--model", str(translator.best),
                           "--rul-model", str(rul.output_dir / "best.pt")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(temp), "GRADIO_TEMP_DIR": str(cache)}, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("smoke test: serving on http://127.0.0.1:")
    assert [line.split(":")[0] for line in lines[1:-1]] == ["page", "/recommend", "/engine_health", "/translate_file"]
    assert lines[-1].startswith("smoke test ok: models ready in ")
    left = [path for path in [*temp.rglob("*"), *cache.rglob("*")] if path.is_file() and path.stat().st_size]
    assert left == [], "uploads, results and the app's temporary folder are removed at shutdown"


@pytest.mark.slow
def test_a_failing_smoke_test_exits_1_with_a_one_line_error(tiny, capsys, monkeypatch):
    translator, _ = tiny
    monkeypatch.setattr(smoke, "ALERT", " ")  # the app answers an empty alert with an error
    demo = gradio_app.build({"tiny": Recommender.from_checkpoint(translator.best)}, None, [])
    assert smoke.smoke_test(demo, "tiny", None, gradio_app.MAX_FILE_SIZE, models_s=0.0) == 1
    expected = "gradio_app: smoke test failed: /recommend: Type at least one alert, one per line.\n"
    assert capsys.readouterr().err == expected


@pytest.mark.slow
def test_a_smoke_test_whose_alert_the_translator_cannot_read_names_the_step_and_why(tiny, capsys, monkeypatch):
    translator, _ = tiny
    monkeypatch.setattr(smoke, "ALERT", "\u0436\u0436\u0436")  # Cyrillic: no piece of the tiny vocabulary
    demo = gradio_app.build({"tiny": Recommender.from_checkpoint(translator.best)}, None, [])
    assert smoke.smoke_test(demo, "tiny", None, gradio_app.MAX_FILE_SIZE, models_s=0.0) == 1
    expected = ("gradio_app: smoke test failed: /recommend: no recommendation for '\u0436\u0436\u0436' "
                "(no word of the alert is known to the model; no recommendation)\n")
    assert capsys.readouterr().err == expected


def test_smoke_test_with_a_missing_checkpoint_exits_2_with_a_one_line_error(tmp_path, capsys):
    missing = tmp_path / "missing.pt"
    with pytest.raises(SystemExit) as exit:
        gradio_app.main(["--smoke-test", "--model", str(missing)])
    assert exit.value.code == 2
    assert capsys.readouterr().err == f"gradio_app: error: {missing}: checkpoint not found\n"


def test_only_the_four_programmatic_endpoints_are_public(client):
    endpoints = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert endpoints == {"/recommend", "/engine_health", "/translate_file", "/feedback"}
    answer = httpx.post(f"{client.src.rstrip('/')}/gradio_api/call/recommnd", json={"data": ["egt high"]})
    assert answer.status_code == 404  # a misspelt name: Gradio's 500 and a traceback before
    assert answer.json()["detail"] == "no endpoint /recommnd; this app's are /recommend, /engine_health, " \
                                      "/translate_file, /feedback"


@pytest.mark.parametrize("flags", [["--port", "65536"], ["--port", "0"], ["--default-dir", ""], ["--rul-model", ""],
                                   ["--port", "IN-USE"]])
def test_a_launch_that_cannot_serve_or_names_an_empty_path_is_one_line_before_any_model_loads(flags, monkeypatch,
                                                                                               capsys):
    monkeypatch.setattr(gradio_app, "load_translators", lambda *a: pytest.fail("models loaded"))
    taken = socket.create_server(("127.0.0.1", 0))  # a port in use: Gradio's traceback came after the models
    port = str(taken.getsockname()[1])
    try:
        with pytest.raises(SystemExit) as stop:
            gradio_app.main([port if flag == "IN-USE" else flag for flag in flags])
    finally:
        taken.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and "error: " in lines[-1] and "Traceback" not in "".join(lines)
    expected = "empty path" if "" in flags else "--port" if "IN-USE" not in flags else "Address already in use"
    assert expected in lines[-1]


@pytest.mark.parametrize("name", ["translator.pt", "rul.pt"])
def test_a_folder_where_a_default_model_goes_is_refused_before_any_training(tmp_path, name):
    (tmp_path / name).mkdir()  # training would have run for minutes, then failed at the install
    build = default_translator if name == "translator.pt" else default_rul_model
    with pytest.raises(DataError, match=f"{name}: is not a file; remove it, or pass the model to use"):
        build(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == [name]


def test_building_a_default_model_leaves_the_app_s_random_state_as_it_was(tmp_path, monkeypatch):
    """Training seeds torch's global generator; the app's process builds its missing models before it serves."""
    from seq2seq.serving import defaults

    def trained_somehow(run_dir: Path) -> None:
        torch.manual_seed(7)  # as build_trainer and train_on_engines do
        run_dir.mkdir(parents=True)
        (run_dir / "best.pt").write_bytes(b"a model")

    monkeypatch.setattr(defaults, "build_trainer", lambda *args, **kwargs: SimpleNamespace(
        fit=lambda: trained_somehow(args[2])))
    monkeypatch.setattr(defaults, "train_on_engines", lambda engines, config, run_dir, log: trained_somehow(run_dir))
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    assert default_translator(tmp_path).read_bytes() == default_rul_model(tmp_path).read_bytes() == b"a model"
    assert torch.equal(torch.get_rng_state(), before)


def test_a_translator_given_twice_is_refused_under_any_spelling(tiny, monkeypatch):
    """--model A --model A offered one translator without a word; ./A and A loaded two decoders."""
    translator, _ = tiny
    monkeypatch.chdir(translator.best.parent)
    for twice in (["best.pt", "best.pt"], ["best.pt", "./best.pt"], [str(translator.best), "best.pt"]):
        with pytest.raises(ConfigError, match=rf"^--model: {re.escape(twice[1])} is given twice; each translator "):
            load_translators(twice)


@pytest.mark.slow
def test_a_default_translator_build_stopped_by_ctrl_c_goes_on_from_its_last_checkpoint(tmp_path, monkeypatch,
                                                                                       capsys):
    from seq2seq.checkpoint import read_checkpoint
    from seq2seq.serving import defaults
    from seq2seq.train import Trainer

    monkeypatch.setattr(defaults, "TRANSLATOR_MINUTES", 0.01)  # a build of about a second of training
    real = Trainer.run_epochs

    def interrupted(self, deadline):
        real(self, deadline)
        raise KeyboardInterrupt  # as Ctrl-C during the run: fit saves last.pt

    monkeypatch.setattr(Trainer, "run_epochs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        default_translator(tmp_path)
    last = tmp_path / "translator-run" / "last.pt"
    step = read_checkpoint(last)["training_state"]["step"]
    assert step > 0 and not (tmp_path / "translator.pt").exists()
    monkeypatch.setattr(Trainer, "run_epochs", real)
    capsys.readouterr()
    assert default_translator(tmp_path) == tmp_path / "translator.pt"
    assert f"resumed {last} at step {step} " in capsys.readouterr().err
    assert Recommender.from_checkpoint(tmp_path / "translator.pt").translate(["fan vibration high"])[0]
    (tmp_path / "translator.pt").unlink()  # a build stopped again, and its last.pt damaged since
    last.write_bytes(last.read_bytes()[:1000])
    assert default_translator(tmp_path).is_file()
    assert "cannot be resumed (" in capsys.readouterr().err

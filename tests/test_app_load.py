"""The app under concurrent callers, through Gradio's HTTP API on loopback: batched answers equal
one-by-one answers, a full queue answers "busy" in words and the app keeps serving, /health answers,
and a program may leave every optional input out."""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import csv
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch
from gradio_client import Client, handle_file
from support import call_endpoint, launch, load_script, trained, trained_rul

import gradio_app
from seq2seq.config import SearchConfig
from seq2seq.recommender import Recommender

pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning", "ignore::ResourceWarning")
CALLS = [("pump vibration high", 1, 1), ("belt worn\nvalve stuck closed", 3, 2), ("oil level low", 1, 1),
         ("gearbox noise high and coolant temperature high", 3, 2), ("filter clogged", 2, 1)] * 4


@pytest.fixture(scope="module")
def recommender(tmp_path_factory) -> Recommender:
    return Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)


def call(http: httpx.Client, url: str, data: list) -> tuple[str, object]:
    """One /recommend call as a program makes it: join the queue, read the event stream; (event, data)."""
    return call_endpoint(http, url, "recommend", data)


def concurrently(url: str, calls: list[list]) -> list[tuple[str, object]]:
    start = threading.Barrier(len(calls))

    def one(data):
        with httpx.Client(timeout=120) as http:
            start.wait()
            return call(http, url, data)

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(one, calls))


@pytest.mark.parametrize("decoder_process", [False, True], ids=["in the app", "in a child process"])
def test_concurrent_calls_are_decoded_together_and_answered_as_one_by_one(recommender, decoder_process):
    passes = []
    demo = gradio_app.build({"tiny": recommender}, None, [], decoder_process=decoder_process)
    batcher = demo.handlers.batchers["tiny"]
    decode = batcher.recommender.recommend
    counting = {"recommend": lambda self, *a, **k: passes.append(1) or decode(*a, **k)}
    batcher.recommender = type("Counting", (), counting)()
    url = launch(demo)
    try:
        answers = concurrently(url, [[text, "tiny", beam, n_best] for text, beam, n_best in CALLS])
        with httpx.Client() as http:
            health = http.get(f"{url}health").json()
    finally:
        demo.close()
        demo.handlers.close()
    for (text, beam, n_best), (kind, payload) in zip(CALLS, answers, strict=True):
        assert kind == "complete", payload
        alone = recommender.recommend(text.splitlines(), SearchConfig(beam_size=beam, n_best=n_best))
        got = payload[0]["alerts"]
        assert [[c["text"] for c in item["recommendations"]] for item in got] == \
               [[c.text for c in r.candidates] for r in alone]
        assert [(item["verdict"], [s["action"] for s in item["similar"]]) for item in got] == \
               [(r.verdict, [s.action for s in r.similar]) for r in alone]
    assert len(passes) < len(CALLS)  # some calls shared a decoder pass
    assert health["status"] == "ok" and health["translators"] == ["tiny"] and health["decoding"] == 0
    assert health["decoder_processes"] == decoder_process
    assert not any(decoder.alive for decoder in demo.handlers.decoders.values())  # closed with the handlers


@pytest.mark.slow
def test_a_full_queue_answers_busy_in_words_and_the_app_keeps_serving(recommender):
    demo = gradio_app.build({"tiny": recommender}, None, [], queue_size=2, recommend_concurrency=1)
    batcher = demo.handlers.batchers["tiny"]
    decode = batcher.recommender.recommend
    batcher.recommender = type("Slow", (), {"recommend": lambda self, *a, **k: time.sleep(0.5) or decode(*a, **k)})()
    url = launch(demo)
    try:
        answers = concurrently(url, [["pump vibration high", "tiny", 1, 1]] * 8)
        with httpx.Client(timeout=60) as http:
            after = call(http, url, ["pump vibration high", "tiny", 1, 1])
            health = http.get(f"{url}health")
    finally:
        demo.close()
        demo.handlers.close()
    busy = [payload for kind, payload in answers if kind == "503"]
    assert busy and len(busy) + sum(kind == "complete" for kind, _ in answers) == len(answers)  # nothing lost
    for body, retry_after in busy:
        assert body["detail"].startswith("busy: ") and body["detail"].endswith(f"try again in {retry_after} s")
        assert int(retry_after) >= 1
    assert after[0] == "complete" and health.status_code == 200


def test_a_program_may_leave_every_optional_input_out(recommender, tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("pump vibration high\nbelt worn\n", encoding="utf-8")
    demo = gradio_app.build({"tiny": recommender}, None, [])
    client = Client(launch(demo), verbose=False, analytics_enabled=False)
    try:
        result = client.predict(handle_file(str(log)), api_name="/translate_file")
        data = client.predict("pump vibration high", api_name="/recommend")
    finally:
        client.close()
        demo.close()
        demo.handlers.close()
    with open(result, encoding="utf-8") as written:
        rows = list(csv.DictReader(written))
    assert [row["recommendation"] for row in rows] == recommender.translate(["pump vibration high", "belt worn"])
    assert (data["translator"], data["beam_size"], data["n_best"]) == ("tiny", 1, 1)


def test_the_direct_route_answers_what_recommend_answers_and_refuses_in_one_line(recommender):
    demo = gradio_app.build({"tiny": recommender}, None, [])
    url = launch(demo)
    try:
        with httpx.Client(timeout=60) as http:
            data = ["belt worn\nvalve stuck closed", "tiny", 3, 2]
            direct = http.post(f"{url}api/recommend", json={"data": data})
            kind, queued = call(http, url, data)
            shortest = http.post(f"{url}api/recommend", json={"data": ["pump vibration high"]})
            refusals = [http.post(f"{url}api/recommend", json=body) for body in
                        ({"data": [""]}, {"data": ["pump", "nope"]}, {"data": "pump"}, {"alerts": ["pump"]})]
            not_json = http.post(f"{url}api/recommend", content=b"\xff\xfe")
            nested = http.post(f"{url}api/recommend", content=b'{"data": [' + b"[" * 5000 + b"]" * 5000 + b"]}")
            surrogate = http.post(f"{url}api/recommend", content=b'{"data": ["belt worn\\negt \\ud800 high"]}')
            wrong_method = http.get(f"{url}api/recommend")
            twice = http.post(f"{url}api/recommend", content=b'{"data": ["egt high"], "data": ["hyd press lo"]}')
    finally:
        demo.close()
        demo.handlers.close()
    assert direct.status_code == 200 and kind == "complete" and direct.json() == queued[0]
    assert shortest.status_code == 200 and shortest.json()["translator"] == "tiny"
    for answer in [*refusals, not_json, nested, surrogate, twice]:
        assert answer.status_code == 400
        assert answer.json()["error"] and "\n" not in answer.json()["error"]
    assert "Alert 2 is not valid Unicode (a lone surrogate at character 5)" in surrogate.json()["error"]
    assert "Type at least one alert" in refusals[0].json()["error"]
    assert "Unknown translator" in refusals[1].json()["error"]
    assert wrong_method.status_code == 405
    assert "body: key 'data' appears twice" in twice.json()["error"]  # json kept the last without a word


@pytest.mark.slow
def test_the_direct_route_answers_busy_beyond_its_bound(recommender):
    demo = gradio_app.build({"tiny": recommender}, None, [], recommend_concurrency=2)
    batcher = demo.handlers.batchers["tiny"]
    decode = batcher.recommender.recommend
    batcher.recommender = type("Slow", (), {"recommend": lambda self, *a, **k: time.sleep(0.5) or decode(*a, **k)})()
    url = launch(demo)
    try:
        def post(_):
            with httpx.Client(timeout=60) as http:
                return http.post(f"{url}api/recommend", json={"data": ["pump vibration high"]})

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(post, range(8)))
    finally:
        demo.close()
        demo.handlers.close()
    codes = sorted(answer.status_code for answer in answers)
    assert 200 in codes and 503 in codes and set(codes) <= {200, 503}
    for answer in answers:
        if answer.status_code == 503:
            assert answer.json()["detail"].startswith("busy: ") and int(answer.headers["retry-after"]) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("client", ["lean", "httpx"])
def test_the_load_test_runs_the_app_and_counts_every_call(client, tmp_path_factory, capsys):
    root = tmp_path_factory.getbasetemp()
    translator, rul = trained(root), trained_rul(root)
    load_test, threads = load_script("load_test"), torch.get_num_threads()
    try:
        assert load_test.main(["--model", str(translator.best), "--rul-model", str(rul.output_dir / "best.pt"),
                               "--clients", "3", "--calls", "5", "--repeats", "1", "--searches", "greedy",
                               "--client", client, "--max-seconds", "120"]) == 0
    finally:
        torch.set_num_threads(threads)  # the script measures on one thread; later tests expect the default
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| greedy")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    # 3 clients x 5 calls, every 5th an empty alert: 12 answered, 3 refused in words; none lost, none wrong
    assert cells[1] == "3 x 5" and float(cells[2].split()[0]) > 0
    assert cells[5:9] == ["0", "0", "3", "0"]


def test_gradio_rebuilds_its_table_of_past_events_rarely_and_over_few(recommender):
    # After every event Gradio summarises its past events in a pandas table (for its API page): over the
    # last 10,000 events after each one by default, a cost per call that grows with the calls served.
    demo = gradio_app.build({"tiny": recommender}, None, [])
    try:
        assert demo._queue.ANAYLTICS_CACHE_FREQUENCY >= 1000
        assert demo._queue.ANALYTICS_MAX_EVENTS <= 1000
    finally:
        demo.handlers.close()


def test_new_sessions_get_the_page_config_gradio_would_compute_each_their_own(recommender):
    """Once launched the app remembers its blocks' configs for new sessions (serving/app.py PageConfig): each
    session's deep-link config equals Gradio's own, a session writing into its copy changes no other, and a
    block a session replaces is neither served from nor kept in the memory."""
    from gradio.blocks import BlocksConfig
    from gradio.state_holder import SessionState

    demo = gradio_app.build({"tiny": recommender}, None, [])
    try:
        demo.default_config.remember()
        expected = {k: BlocksConfig.config_for_block(k, [], v) for k, v in demo.blocks.items()}
        first, second = SessionState(demo), SessionState(demo)
        assert first.config_values == expected == second.config_values
        key = next(k for k, config in first.config_values.items() if "props" in config)
        first._update_value_in_config(key, "changed")
        assert second.config_values[key] == expected[key] == SessionState(demo).config_values[key]
        replaced = type(demo.blocks[key])()
        first[key] = replaced
        first._update_config(key)
        assert first.config_values[key] == BlocksConfig.config_for_block(key, [], replaced) != expected[key]
        assert demo.default_config.remembered[key][0] is demo.blocks[key] is not replaced
    finally:
        demo.handlers.close()


def upload(http: httpx.Client, url: str, path) -> dict:
    """The file uploaded as the page uploads it; its payload for a file input."""
    with open(path, "rb") as file:
        [stored] = http.post(f"{url}gradio_api/upload", files={"files": (path.name, file)}).json()
    return {"path": stored, "meta": {"_type": "gradio.FileData"}}


def test_file_jobs_cannot_fill_the_queue_that_technicians_recommend_calls_wait_in(recommender, tmp_path, monkeypatch):
    """One client's file jobs, each minutes long, filled Gradio's whole queue: every technician's /recommend, engine
    check and feedback got "busy" for as long as the jobs took. Beyond the few file jobs that may wait, the next is
    told so, and /recommend is answered."""
    from seq2seq.serving import handlers as handlers_module

    started, release = threading.Event(), threading.Event()
    real = handlers_module.translate_file

    def held_open(*args, **kwargs):  # the running file job, stopped before its first row until released
        started.set()
        release.wait(timeout=60)
        return real(*args, **kwargs)

    monkeypatch.setattr(handlers_module, "translate_file", held_open)
    monkeypatch.setitem(gradio_app.WAITING, "batch", (2, "file jobs"))
    log = tmp_path / "incidents.csv"
    log.write_text("source\npump vibration high\n", encoding="utf-8")
    demo = gradio_app.build({"tiny": recommender}, None, [])
    url = launch(demo)
    try:
        with httpx.Client(timeout=60) as http:
            file = upload(http, url, log)
            joins = [http.post(f"{url}gradio_api/call/translate_file", json={"data": [file, "source", "tiny", 1]})]
            assert started.wait(timeout=30), "the first file job never started"
            joins += [http.post(f"{url}gradio_api/call/translate_file", json={"data": [file, "source", "tiny", 1]})
                      for _ in range(3)]  # two wait, the third is one too many
            kind, _ = call(http, url, ["pump vibration high", "tiny", 1, 1])
            release.set()
    finally:
        release.set()
        demo.close()
        demo.handlers.close()
    assert [join.status_code for join in joins] == [200, 200, 200, 503]
    detail = joins[-1].json()["detail"]
    assert detail.startswith("busy: 2 file jobs are waiting, the most this app queues; try again in ")
    assert int(joins[-1].headers["retry-after"]) >= 1
    assert kind == "complete"


def test_a_session_keeps_its_state_but_no_copy_of_its_answers(recommender):
    """Gradio kept every output's last value in its session for deep links: a /recommend answer's JSON (up to 13 MB)
    per session, and a program calling without a session makes a session per call (18 MB a call measured)."""
    from seq2seq.serving.app import PageSession

    demo = gradio_app.build({"tiny": recommender}, None, [])
    url = launch(demo)
    alerts = "\n".join(["pump vibration high", "belt worn", "valve stuck closed"] * 5)
    try:
        with httpx.Client(timeout=60) as http:
            answers = [call(http, url, [alerts, "tiny", 3, 3]) for _ in range(3)]  # a session each
        sessions = list(demo.state_holder.session_data.values())
        fresh = PageSession(demo)
    finally:
        demo.close()
        demo.handlers.close()
    assert all(kind == "complete" for kind, _ in answers)
    answer = json.dumps(answers[0][1])
    assert len(sessions) == 3 and all(isinstance(session, PageSession) for session in sessions)
    for session in sessions:
        assert session.config_values == fresh.config_values  # no output's value in it
        assert any(value for value in session.state_data.values())  # the answer's recommendations, for the page
    assert "belt worn" in answer

"""A smoke test of the served technician UI, through the doors a browser and a program use.

``check_app(url, translator, engine)`` fetches the page (HTTP 200), then calls each named endpoint
once with gradio_client: ``/recommend`` for one alert, ``/engine_health`` for one bundled engine
(skipped when ``engine`` is None) and ``/translate_file`` for a three-row incident log, whose result
it downloads over HTTP as the browser's link does. It returns one ``Step`` per call (what came back,
in one line, and how long it took); the first failure raises ``SmokeFailure`` naming the step.

``smoke_test(demo, ...)`` is ``gradio_app.py --smoke-test``: it launches the app's (not yet launched)
Blocks on a free loopback port, checks it, prints the steps and a one-line summary with timings,
shuts the app down and returns the exit status (1 with a one-line error on failure). Only that mode
imports this module (it pulls in gradio_client and httpx); the module never imports the UI.
"""

from __future__ import annotations

import csv
import io
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from gradio_client import Client, handle_file

ALERT = "hpc outlet temperature rising sharply"
LOG_ALERTS = ["hydraulic pressure drop and leakage", "fan vibration high", "oil temperature rising"]
TIMEOUT_S = 120.0  # a wait limit for a loaded machine, not a speed requirement


class SmokeFailure(Exception):
    """One line: the step that failed and why."""


@dataclass(frozen=True)
class Step:
    name: str  # "page", "/recommend", ...
    detail: str  # what came back, one line
    ms: float  # wall time of the call

    def line(self) -> str:
        return f"{self.name}: {self.detail} ({self.ms:.0f} ms)"


def _timed(name: str, call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    try:
        result = call()
    except Exception as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SmokeFailure(f"{name}: {message}") from err
    return result, (time.perf_counter() - start) * 1000.0


def _page(url: str) -> Step:
    response, ms = _timed("page", lambda: httpx.get(url, timeout=TIMEOUT_S))
    if response.status_code != 200:
        raise SmokeFailure(f"page: HTTP {response.status_code} from {url}")
    return Step("page", f"HTTP 200, {len(response.content):,} bytes", ms)


def _recommend(client: Client, translator: str) -> Step:
    data, ms = _timed("/recommend", lambda: client.predict(ALERT, translator, 1, 1, api_name="/recommend"))
    item = data["alerts"][0]
    if not item["recommendations"]:  # a translator that cannot read the alert at all, said as the app says it
        raise SmokeFailure(f"/recommend: no recommendation for {ALERT!r} ({item['warning'] or 'no reason given'})")
    best = item["recommendations"][0]
    shape = f"{len(best['attention'])}x{len(best['attention'][0])}"
    return Step("/recommend", f"{ALERT!r} -> {best['text']!r} (confidence {best['confidence']:.2f}, "
                f"attention {shape})", ms)


def _engine_health(client: Client, translator: str, engine: int) -> Step:
    data, ms = _timed("/engine_health", lambda: client.predict(engine, None, None, translator,
                                                               api_name="/engine_health"))
    answers = data["recommendations"][0]["recommendations"] if data["alerts"] else []
    first = f", first {data['alerts'][0]['phrase']!r} -> {answers[0]['text']!r}" if answers else ""
    return Step("/engine_health", f"engine {data['unit']}: RUL {data['rul']:.0f} cycles, {data['health']}, "
                f"{len(data['alerts'])} alerts{first}", ms)


def _translate_file(client: Client, translator: str, folder: Path) -> Step:
    log = folder / "incidents.csv"
    log.write_text("ticket,alert\n" + "".join(f"{i},{a}\n" for i, a in enumerate(LOG_ALERTS, 1)), encoding="utf-8")

    def call() -> list[dict[str, str]]:
        result = client.predict(handle_file(str(log)), "alert", translator, 1, api_name="/translate_file")
        download = httpx.get(result["url"], timeout=TIMEOUT_S)
        download.raise_for_status()
        return list(csv.DictReader(io.StringIO(download.text)))

    rows, ms = _timed("/translate_file", call)
    if [row.get("alert") for row in rows] != LOG_ALERTS or not all(row.get("recommendation") for row in rows):
        raise SmokeFailure(f"/translate_file: the downloaded result does not hold the {len(LOG_ALERTS)} rows "
                           "with their recommendations")
    return Step("/translate_file", f"{len(rows)} rows uploaded, translated and downloaded", ms)


def check_app(url: str, translator: str, engine: int | None) -> list[Step]:
    """The page, then one call per named endpoint; raises SmokeFailure on the first that fails."""
    steps = [_page(url)]
    # One TLS context for all of the client's connections: it builds a new one per request otherwise.
    client, _ = _timed("connect", lambda: Client(url, verbose=False, analytics_enabled=False, download_files=False,
                                                 ssl_verify=ssl.create_default_context()))
    try:
        steps.append(_recommend(client, translator))
        if engine is not None:
            steps.append(_engine_health(client, translator, engine))
        with tempfile.TemporaryDirectory(prefix="smoke-") as folder:
            steps.append(_translate_file(client, translator, Path(folder)))
    finally:
        client.close()
    return steps


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def smoke_test(demo: Any, translator: str, engine: int | None, max_file_size: str, models_s: float) -> int:
    """Launch ``demo`` (a gradio Blocks) on loopback, ``check_app`` it, print, close; the exit status."""
    started = time.perf_counter()
    try:
        _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                                quiet=True, max_file_size=max_file_size)
        launch_s = time.perf_counter() - started
        print(f"smoke test: serving on {url}", flush=True)
        steps = check_app(url, translator, engine)
    except Exception as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else repr(err)
        print(f"gradio_app: smoke test failed: {reason}", file=sys.stderr)
        return 1
    finally:
        demo.close(verbose=False)
    for step in steps:
        print(step.line())
    timings = ", ".join(f"{step.name} {step.ms:.0f} ms" for step in steps)
    print(f"smoke test ok: models ready in {models_s:.1f} s, app launched in {launch_s:.1f} s, {timings}")
    return 0

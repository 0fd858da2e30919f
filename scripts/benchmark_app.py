"""Latency of one ``/recommend`` call, through gradio_client and beneath it, and the app's cold start.

    python scripts/benchmark_app.py [--model runs/default/translator.pt] [--repeats 30] [--alert TEXT] [--cold-build]

Serves the app in this process on a free loopback port (translator only, no RUL model), then for
greedy search and beam 5 (n-best 5) times, after a few warm-up calls, p50 and p95 in milliseconds of:

- ``Client(url).predict(alert, ..., api_name="/recommend")``, gradio_client as it comes;
- the same with one TLS context for all the client's connections,
  ``Client(url, ssl_verify=ssl.create_default_context())``: otherwise httpx builds a new one (about
  20 ms, even for plain http) for each of the two connections a call opens;
- Gradio's HTTP API on one kept-alive connection: ``POST /gradio_api/call/recommend``, then the
  event stream ``GET /gradio_api/call/recommend/{event_id}``; the same queue, concurrency slot and
  JSON as the client, without the client (its floor is a 50 ms sleep while it polls for messages);
- ``Recommender.recommend([alert], SearchConfig)``, the Python call underneath.

Drawing the heatmaps is a separate step of the browser UI and is not timed here. Then the cold
start: ``gradio_app.py --smoke-test`` in a fresh process with the cached default models (and with
``--cold-build``, with none: both trained first, several minutes), seconds from process start to
the app serving and to the smoke test's end. The load average is printed: on a shared machine the
figures are indicative only.
"""

from __future__ import annotations

import argparse
import os
import platform
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as gradio_app.py sets it, before torch loads OpenMP

import httpx
import numpy as np
import torch
from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # gradio_app.py lives at the repository root

import gradio_app  # noqa: E402
from seq2seq.cli import run_script  # noqa: E402
from seq2seq.cli.common import whole_number  # noqa: E402
from seq2seq.config import SearchConfig  # noqa: E402
from seq2seq.recommender import Recommender  # noqa: E402
from seq2seq.serving.smoke import free_port  # noqa: E402

SEARCHES = {"greedy": SearchConfig(beam_size=1, n_best=1), "beam 5": SearchConfig(beam_size=5, n_best=5)}
WARM_UP = 3


def latencies_ms(call: Callable[[], object], repeats: int) -> np.ndarray:
    for _ in range(WARM_UP):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000.0)
    return np.array(times)


def http_call(http: httpx.Client, url: str, data: list) -> str:
    """Gradio's two-request HTTP API: join the queue, then read the event stream to its end."""
    event = http.post(f"{url}gradio_api/call/recommend", json={"data": data}).json()["event_id"]
    stream = http.get(f"{url}gradio_api/call/recommend/{event}").text
    if "event: complete" not in stream:
        raise RuntimeError(f"/recommend failed: {stream[:200]}")
    return stream


def call_latencies(args: argparse.Namespace) -> None:
    recommender = Recommender.from_checkpoint(args.model)
    name = recommender.model.config.attention
    demo = gradio_app.build({name: recommender}, None, [])
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    clients = {"gradio_client": Client(url, verbose=False, analytics_enabled=False),
               "gradio_client, one TLS context": Client(url, verbose=False, analytics_enabled=False,
                                                        ssl_verify=ssl.create_default_context())}
    try:
        with httpx.Client(timeout=60) as http:
            print("| search | path | p50 ms | p95 ms |\n|---|---|---|---|")
            for label, search in SEARCHES.items():
                data = [args.alert, name, search.beam_size, search.n_best]
                paths: dict[str, Callable[[], object]] = {
                    f"{kind} /recommend": lambda c=client, d=data: c.predict(*d, api_name="/recommend")
                    for kind, client in clients.items()}
                paths["HTTP /gradio_api/call/recommend"] = lambda d=data: http_call(http, url, d)
                paths["Recommender.recommend"] = lambda s=search: recommender.recommend([args.alert], s)
                for path, call in paths.items():
                    times = latencies_ms(call, args.repeats)
                    print(f"| {label} | {path} | {np.percentile(times, 50):.1f} | {np.percentile(times, 95):.1f} |")
    finally:
        for client in clients.values():
            client.close()
        demo.close(verbose=False)


def cold_start(extra: list[str]) -> tuple[float, float]:
    """Seconds from process start to the app serving and to the end of ``gradio_app.py --smoke-test``."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(ROOT / "gradio_app.py"), "--smoke-test", *extra], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    serving = float("nan")
    for line in process.stdout:
        if line.startswith("smoke test: serving on"):
            serving = time.perf_counter() - start
    if process.wait() != 0:
        raise RuntimeError(f"gradio_app.py --smoke-test {' '.join(extra)} failed (exit {process.returncode})")
    return serving, time.perf_counter() - start


def cold_starts(args: argparse.Namespace) -> None:
    print("\n| cold start | to serving (s) | to smoke test ok (s) |\n|---|---|---|")
    serving, done = cold_start(["--model", args.model])
    print(f"| cached models | {serving:.1f} | {done:.1f} |", flush=True)
    if args.cold_build:
        with tempfile.TemporaryDirectory(prefix="default-models-") as folder:
            serving, done = cold_start(["--default-dir", folder])
        print(f"| no models: both trained first | {serving:.1f} | {done:.1f} |")


def alert_text(text: str) -> str:
    """An argparse ``type``: an alert with words in it (the app answers a blank one with an error, not a timing)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty alert; give the text of an alert to time")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "runs" / "default" / "translator.pt"))
    parser.add_argument("--repeats", type=whole_number(1, 100_000), default=30,
                        help="timed calls per row (after warm-up)")
    parser.add_argument("--alert", type=alert_text, default="hpc outlet temperature rising sharply")
    parser.add_argument("--cold-build", action="store_true", help="also time a cold start that trains both "
                        "default models first (several minutes)")
    args = parser.parse_args(argv)
    print(f"{args.model}, alert {args.alert!r}; torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, {args.repeats} calls per row "
          f"after {WARM_UP} warm-up calls; load average {os.getloadavg()[0]:.2f} at start")
    call_latencies(args)
    cold_starts(args)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end (1 minute)")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "benchmark_app"))

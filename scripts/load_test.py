"""The app under a shift's load: concurrent technicians calling /recommend through Gradio's HTTP API.

    python scripts/load_test.py [--model runs/default/translator.pt] [--rul-model runs/default/rul.pt]
        [--clients 1 10 50 100] [--calls 20] [--searches greedy beam5] [--bad-every 5] [--repeats 3]
        [--max-seconds 600] [--direct | --floor | --fresh-sessions]

Starts ``gradio_app.py`` in a child process on a free loopback port (its own temporary feedback
database), waits for its health route, then for each search and each number of concurrent clients
runs that many clients at once (``--repeats`` times), each making ``--calls`` calls one after
another as a technician would: ``POST /gradio_api/call/recommend`` (with one ``session_hash`` per
client, as gradio_client and a browser keep one; ``--fresh-sessions``: none, so Gradio builds a
session for every call), then reading the event stream to its end; with ``--direct``, one
``POST /api/recommend`` a call. Every
``--bad-every``-th call sends an empty alert, which must come back as a readable error. Per row:
answered calls per second (good and bad), p50 / p95 / max latency of the good calls, calls turned
away (HTTP 503, "busy"), calls lost (neither answered nor refused), and wrong answers to bad input;
beside it, ``Recommender.recommend``'s own alerts per second in this process for a batch as large
as the number of clients (one thread: the figure the app's batching can approach). Loopback only,
bounded in calls (clients x calls per row) and time (``--max-seconds`` for the whole run; a row
that would pass it is cut short and says so); the child is stopped at the end. On a shared machine
the figures are indicative only: the load average is printed.

``--floor`` runs the same rows against a page with one no-op ``/recommend`` event (same inputs,
a small JSON answer, same concurrency and queue settings) served the same way: Gradio's own
ceiling on this machine, beside the app's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import torch
from starlette.middleware import Middleware

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from seq2seq.config import SearchConfig  # noqa: E402
from seq2seq.recommender import Recommender  # noqa: E402
from seq2seq.serving.gate import ServiceGate  # noqa: E402
from seq2seq.serving.smoke import free_port  # noqa: E402

SEARCHES = {"greedy": SearchConfig(), "beam5": SearchConfig(beam_size=5)}
ALERTS = ["hpc outlet temperature rising sharply", "hydraulic pressure drop and leakage", "egt margin low on #2",
          "fan vibration high at takeoff", "oil pressure fluctuating", "fuel flow higher than expected"]
CALL_TIMEOUT_S = 120.0
DIRECT = "direct"  # in place of a session: the app's own route, one request per call


@dataclass
class Row:
    answered: int = 0
    bad_answered: int = 0  # bad input answered with a readable error, as it should be
    wrong: int = 0  # bad input answered as if good, or good input answered with an error
    rejected: int = 0  # HTTP 503: the queue is full, "busy, try again"
    lost: int = 0  # no answer and no refusal
    why_lost: Counter = field(default_factory=Counter)  # what became of the lost calls
    latencies_ms: list[float] = field(default_factory=list)


async def one_call(http: httpx.AsyncClient, url: str, data: list, session: str | None, bad: bool, row: Row) -> None:
    started = time.perf_counter()
    if session == DIRECT:
        try:
            answer = await http.post(f"{url}/api/recommend", json={"data": data})
        except httpx.HTTPError as err:
            row.lost += 1
            row.why_lost[type(err).__name__] += 1
            return
        kind = {200: "complete", 400: "error", 503: "busy"}.get(answer.status_code, f"HTTP {answer.status_code}")
        if kind == "busy":
            row.rejected += 1
            return
    else:
        kind = await gradio_call(http, url, data, session, row)
        if kind == "busy":
            return
    if kind == "complete" and not bad:
        row.answered += 1
        row.latencies_ms.append(1000 * (time.perf_counter() - started))
    elif kind == "error" and bad:
        row.bad_answered += 1
    elif kind in ("complete", "error"):
        row.wrong += 1
    else:
        row.lost += 1
        row.why_lost[kind or "no answer"] += 1


async def gradio_call(http: httpx.AsyncClient, url: str, data: list, session: str | None, row: Row) -> str | None:
    """Gradio's two requests: join the queue, read the event stream; "complete", "error", "busy" or None."""
    try:
        joined = await http.post(f"{url}/gradio_api/call/recommend", json={"data": data, "session_hash": session})
        if joined.status_code == 503:
            row.rejected += 1
            return "busy"
        joined.raise_for_status()
        event = joined.json()["event_id"]
        async with http.stream("GET", f"{url}/gradio_api/call/recommend/{event}") as stream:
            kind = None
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:].strip()
                    if kind in ("complete", "error"):
                        break
    except (httpx.HTTPError, KeyError, ValueError) as err:
        return type(err).__name__
    return kind


async def client(http: httpx.AsyncClient, url: str, number: int, calls: int, search: SearchConfig, name: str,
                 bad_every: int, sessions: bool | str, deadline: float, row: Row) -> None:
    # One Gradio session per client, as gradio_client and a browser keep; DIRECT: POST /api/recommend instead
    session = sessions if sessions == DIRECT else secrets.token_hex(8) if sessions else None
    for k in range(calls):
        if time.monotonic() > deadline:
            return
        bad = bad_every > 0 and (number * calls + k) % bad_every == bad_every - 1
        alert = "" if bad else ALERTS[(number + k) % len(ALERTS)]
        await one_call(http, url, [alert, name, search.beam_size, search.n_best], session, bad, row)


async def run_row(url: str, clients: int, calls: int, search: SearchConfig, name: str, bad_every: int,
                  sessions: bool | str, deadline: float) -> tuple[Row, float, bool]:
    row = Row()
    limits = httpx.Limits(max_connections=2 * clients + 10, max_keepalive_connections=2 * clients + 10)
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http, url, n, calls, search, name, bad_every, sessions, deadline, row)
                               for n in range(clients)))
        elapsed = time.perf_counter() - started
    return row, elapsed, time.monotonic() > deadline


def recommender_rate(recommender: Recommender, batch: int, search: SearchConfig) -> float:
    """Alerts per second of ``Recommender.recommend`` on batches of ``batch`` alerts (median of 5)."""
    alerts = [ALERTS[k % len(ALERTS)] for k in range(batch)]
    recommender.recommend(alerts, search)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        recommender.recommend(alerts, search)
        times.append(time.perf_counter() - started)
    return batch / statistics.median(times)


def serve_floor(port: int) -> None:
    """A page with a no-op /recommend of the app's inputs, concurrency and queue: Gradio's own cost."""
    import gradio as gr

    import gradio_app

    with gr.Blocks(analytics_enabled=False) as demo:
        inputs = [gr.Textbox(), gr.Textbox(), gr.Number(), gr.Number()]
        gr.Button().click(lambda text, *_: {"alerts": [text]}, inputs, gr.JSON(), api_name="recommend",
                          concurrency_limit=gradio_app.RECOMMEND_CONCURRENCY)
    demo.queue(max_size=gradio_app.QUEUE_SIZE, api_open=False)
    demo.launch(server_name="127.0.0.1", server_port=port, max_threads=gradio_app.MAX_THREADS,
                app_kwargs={"middleware": [Middleware(ServiceGate, status=lambda: {"status": "ok"})]})


def start_app(args: argparse.Namespace, port: int, folder: Path) -> tuple[subprocess.Popen, str]:
    if args.floor:
        command = [sys.executable, __file__, "--serve-floor", str(port)]
    else:
        command = [sys.executable, str(ROOT / "gradio_app.py"), "--model", args.model, "--port", str(port),
                   "--feedback-db", str(folder / "feedback.sqlite")]
    if args.rul_model and not args.floor:
        command += ["--rul-model", args.rul_model]
    with open(folder / "app.log", "wb") as log:  # the child keeps its own copy of the handle
        app = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    url, started = f"http://127.0.0.1:{port}", time.monotonic()
    while time.monotonic() - started < 120:
        if app.poll() is not None:
            raise SystemExit(f"load_test: the app exited ({app.returncode}); see {folder / 'app.log'}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return app, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    app.kill()
    raise SystemExit("load_test: the app did not answer /health within 120 s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(ROOT / "runs" / "default" / "translator.pt"))
    p.add_argument("--rul-model", default=str(ROOT / "runs" / "default" / "rul.pt"))
    p.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50, 100])
    p.add_argument("--calls", type=int, default=20, help="calls per client, one after another")
    p.add_argument("--searches", nargs="+", choices=list(SEARCHES), default=list(SEARCHES))
    p.add_argument("--bad-every", type=int, default=5, help="every N-th call is an empty alert (0: none)")
    p.add_argument("--max-seconds", type=float, default=600.0, help="for the whole run")
    p.add_argument("--repeats", type=int, default=3, help="runs of each row (median and range are printed)")
    p.add_argument("--fresh-sessions", action="store_true", help="no session_hash: every call a new Gradio session "
                   "(by default each client keeps one, as gradio_client and a browser do)")
    p.add_argument("--direct", action="store_true", help="POST /api/recommend (one request a call, no Gradio queue)")
    p.add_argument("--floor", action="store_true", help="a no-op /recommend instead of the app: Gradio's ceiling")
    p.add_argument("--serve-floor", type=int, help=argparse.SUPPRESS)  # the --floor child: serve on this port
    args = p.parse_args(argv)
    if args.serve_floor:
        serve_floor(args.serve_floor)
        return 0
    if args.floor:
        args.bad_every = 0  # the no-op answers everything
    deadline = time.monotonic() + args.max_seconds
    torch.set_num_threads(1)
    recommender = Recommender.from_checkpoint(args.model)
    name = recommender.model.config.attention  # how gradio_app.py names a single translator
    what = "a no-op /recommend (--floor)" if args.floor else f"{args.model} ({name})"
    print(f"# Load test: {what}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
          f"load average before {os.getloadavg()[0]:.2f}\n")
    print(f"Each row {args.repeats} times: median calls/s and p95 (their range), p50 and max of all calls, "
          "counts summed.\n")
    print("| search | clients x calls | answered calls/s | p50 / p95 / max ms | turned away | lost | "
          "bad input answered with an error | wrong | Recommender alone, alerts/s at this batch |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="load-test-") as folder:
        app, url = start_app(args, free_port(), Path(folder))
        try:
            for label in args.searches:
                search = SEARCHES[label]
                for clients in args.clients:
                    sessions = DIRECT if args.direct else not args.fresh_sessions
                    runs = [asyncio.run(run_row(url, clients, args.calls, search, name, args.bad_every, sessions,
                                                deadline)) for _ in range(args.repeats)]
                    rates = [(row.answered + row.bad_answered) / elapsed for row, elapsed, _ in runs]
                    p95s = [np.percentile(row.latencies_ms or [float("nan")], 95) for row, _, _ in runs]
                    times = np.array([t for row, _, _ in runs for t in row.latencies_ms] or [float("nan")])
                    total = {key: sum(getattr(row, key) for row, _, _ in runs)
                             for key in ("rejected", "lost", "bad_answered", "wrong")}
                    cut = " (cut short)" if any(c for _, _, c in runs) else ""
                    print(f"| {label} | {clients} x {args.calls}{cut} | {np.median(rates):.0f} ({min(rates):.0f}-"
                          f"{max(rates):.0f}) | {np.percentile(times, 50):.0f} / {np.median(p95s):.0f} ("
                          f"{min(p95s):.0f}-{max(p95s):.0f}) / {times.max():.0f} | {total['rejected']} | "
                          f"{total['lost']} | {total['bad_answered']} | {total['wrong']} | "
                          f"{recommender_rate(recommender, min(clients, 64), search):.0f} |", flush=True)
                    why = sum((row.why_lost for row, _, _ in runs), Counter())
                    if why:
                        print(f"lost calls above: {dict(why)}", file=sys.stderr)
        finally:
            app.terminate()
            try:
                app.wait(timeout=30)
            except subprocess.TimeoutExpired:
                app.kill()
    print(f"\nload average after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

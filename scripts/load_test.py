"""The app under a shift's load: concurrent technicians calling /recommend through Gradio's HTTP API.

    python scripts/load_test.py [--model runs/default/translator.pt] [--rul-model runs/default/rul.pt]
        [--clients 1 10 50 100] [--calls 20] [--searches greedy beam5] [--bad-every 5] [--repeats 3]
        [--max-seconds 600] [--direct | --floor | --fresh-sessions] [--client lean | httpx] [--no-decoder-process]

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

The load generator shares the machine with the app, so it should cost little: by default each client
holds one keep-alive connection and speaks HTTP/1.1 itself (``LeanConnection``, about 0.3 ms of CPU a
call, against about 5 ms with ``--client httpx``, which ran these rows before; docs/serving.md has
both). Each row also gives the p95 of the calls after each client's first: a client's first call
builds its Gradio session, and all of them arrive at once.

``--floor`` runs the same rows against a page with one no-op ``/recommend`` event (same inputs,
a small JSON answer, same concurrency and queue settings) served the same way: Gradio's own
ceiling on this machine, beside the app's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from seq2seq.cli import run_script  # noqa: E402
from seq2seq.cli.common import path_flag, whole_number  # noqa: E402
from seq2seq.config import SearchConfig  # noqa: E402
from seq2seq.recommender import Recommender  # noqa: E402
from seq2seq.serving.gate import ServiceGate  # noqa: E402
from seq2seq.serving.smoke import free_port  # noqa: E402

SEARCHES = {"greedy": SearchConfig(), "beam5": SearchConfig(beam_size=5)}
ALERTS = ["hpc outlet temperature rising sharply", "hydraulic pressure drop and leakage", "egt margin low on #2",
          "fan vibration high at takeoff", "oil pressure fluctuating", "fuel flow higher than expected"]
CALL_TIMEOUT_S = 120.0
LOG_TAIL = 5  # lines of the app's log shown when it exits before serving (its log goes with the temporary folder)
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
    later_ms: list[float] = field(default_factory=list)  # of the calls after each client's first


class LeanConnection:
    """One keep-alive HTTP/1.1 connection: JSON requests, whole responses (Content-Length or chunked)."""

    def __init__(self, url: str) -> None:
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, payload: object = None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        body = b"" if payload is None else json.dumps(payload).encode()
        head = f"{method} {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
        if payload is not None:
            head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + body)
        status = int((await self.reader.readline()).split()[1])
        headers = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, value = line.decode("latin-1").split(":", 1)
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                chunks.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            await self.reader.readline()  # the blank line after the last chunk
            content = b"".join(chunks)
        else:
            content = await self.reader.readexactly(int(headers.get("content-length", 0)))
        if headers.get("connection") == "close":
            self.close()
        return status, content

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class HttpxConnection:
    """The same requests through a shared ``httpx.AsyncClient`` (what ran the rows before LeanConnection)."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url

    async def request(self, method: str, path: str, payload: object = None) -> tuple[int, bytes]:
        answer = await self.http.request(method, self.url + path, json=payload)
        return answer.status_code, answer.content

    def close(self) -> None:
        pass


async def one_call(connection: LeanConnection | HttpxConnection, data: list, session: str | None, bad: bool,
                   row: Row, first: bool) -> None:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            if session == DIRECT:
                status, _ = await connection.request("POST", "/api/recommend", {"data": data})
                kind = {200: "complete", 400: "error", 503: "busy"}.get(status, f"HTTP {status}")
            else:
                kind = await gradio_call(connection, data, session)
    except (OSError, TimeoutError, httpx.HTTPError, asyncio.IncompleteReadError, KeyError, ValueError,
            IndexError) as err:
        connection.close()  # a new connection for the next call
        kind = type(err).__name__
    if kind == "busy":
        row.rejected += 1
    elif kind == "complete" and not bad:
        row.answered += 1
        row.latencies_ms.append(1000 * (time.perf_counter() - started))
        if not first:
            row.later_ms.append(row.latencies_ms[-1])
    elif kind == "error" and bad:
        row.bad_answered += 1
    elif kind in ("complete", "error"):
        row.wrong += 1
    else:
        row.lost += 1
        row.why_lost[kind or "no answer"] += 1


async def gradio_call(connection: LeanConnection | HttpxConnection, data: list, session: str | None) -> str | None:
    """Gradio's two requests: join the queue, read the event stream; "complete", "error", "busy" or None."""
    status, content = await connection.request("POST", "/gradio_api/call/recommend",
                                               {"data": data, "session_hash": session})
    if status == 503:
        return "busy"
    if status != 200:
        return f"HTTP {status}"
    event = json.loads(content)["event_id"]
    status, content = await connection.request("GET", f"/gradio_api/call/recommend/{event}")
    kinds = [line[7:].strip() for line in content.decode().splitlines() if line.startswith("event: ")]
    return next((kind for kind in kinds if kind in ("complete", "error")), kinds[-1] if kinds else None)


def alert_for(n: int) -> str:
    """The ``n``-th alert the load sends, each distinct: a repeat within one decoder pass is answered once, which
    would flatter the app (and ``recommender_rate``) beside a shift's mostly different alerts."""
    return f"{ALERTS[n % len(ALERTS)]} unit {n // len(ALERTS) + 1}"


async def client(connection: LeanConnection | HttpxConnection, number: int, calls: int, search: SearchConfig,
                 name: str, bad_every: int, sessions: bool | str, deadline: float, row: Row) -> None:
    # One Gradio session per client, as gradio_client and a browser keep; DIRECT: POST /api/recommend instead
    session = sessions if sessions == DIRECT else secrets.token_hex(8) if sessions else None
    try:
        for k in range(calls):
            if time.monotonic() > deadline:
                return
            bad = bad_every > 0 and (number * calls + k) % bad_every == bad_every - 1
            alert = "" if bad else alert_for(number * calls + k)
            await one_call(connection, [alert, name, search.beam_size, search.n_best], session, bad, row, k == 0)
    finally:
        connection.close()


async def run_row(url: str, clients: int, calls: int, search: SearchConfig, name: str, bad_every: int,
                  sessions: bool | str, deadline: float, lean: bool = True) -> tuple[Row, float, bool]:
    row = Row()
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, limits=limits) as http:
        connections = [LeanConnection(url) if lean else HttpxConnection(http, url) for _ in range(clients)]
        started = time.perf_counter()
        await asyncio.gather(*(client(connection, n, calls, search, name, bad_every, sessions, deadline, row)
                               for n, connection in enumerate(connections)))
        elapsed = time.perf_counter() - started
    return row, elapsed, time.monotonic() > deadline


def recommender_rate(recommender: Recommender, batch: int, search: SearchConfig) -> float:
    """Alerts per second of ``Recommender.recommend`` on batches of ``batch`` alerts (median of 5)."""
    alerts = [alert_for(k) for k in range(batch)]
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

    import gradio_app  # noqa: F401 (its environment settings for Gradio, as the app runs with)
    from seq2seq.serving.app import MAX_THREADS, QUEUE_SIZE, RECOMMEND_CONCURRENCY

    with gr.Blocks(analytics_enabled=False) as demo:
        inputs = [gr.Textbox(), gr.Textbox(), gr.Number(), gr.Number()]
        gr.Button().click(lambda text, *_: {"alerts": [text]}, inputs, gr.JSON(), api_name="recommend",
                          concurrency_limit=RECOMMEND_CONCURRENCY)
    demo.queue(max_size=QUEUE_SIZE, api_open=False)
    demo.launch(server_name="127.0.0.1", server_port=port, max_threads=MAX_THREADS,
                app_kwargs={"middleware": [Middleware(ServiceGate, status=lambda: {"status": "ok"})]})


def start_app(args: argparse.Namespace, port: int, folder: Path) -> tuple[subprocess.Popen, str]:
    if args.floor:
        command = [sys.executable, __file__, "--serve-floor", str(port)]
    else:
        command = [sys.executable, str(ROOT / "gradio_app.py"), "--model", args.model, "--port", str(port),
                   "--feedback-db", str(folder / "feedback.sqlite")]
        command += [] if args.decoder_process else ["--no-decoder-process"]
    if args.rul_model and not args.floor:
        command += ["--rul-model", args.rul_model]
    with open(folder / "app.log", "wb") as log:  # the child keeps its own copy of the handle
        app = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    url, started = f"http://127.0.0.1:{port}", time.monotonic()
    while time.monotonic() - started < 120:
        if app.poll() is not None:
            tail = (folder / "app.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-LOG_TAIL:]
            raise SystemExit("\n".join([f"load_test: the app exited ({app.returncode}) before serving; the end of "
                                        "its log:", *tail]))
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
    p.add_argument("--model", type=path_flag, default=str(ROOT / "runs" / "default" / "translator.pt"))
    p.add_argument("--rul-model", default=str(ROOT / "runs" / "default" / "rul.pt"))
    p.add_argument("--clients", type=whole_number(1, 10_000), nargs="+", default=[1, 10, 50, 100])
    p.add_argument("--calls", type=whole_number(1, 1_000_000), default=20, help="calls per client, one after another")
    p.add_argument("--searches", nargs="+", choices=list(SEARCHES), default=list(SEARCHES))
    p.add_argument("--bad-every", type=whole_number(0, 1_000_000), default=5,
                   help="every N-th call is an empty alert (0: none)")
    p.add_argument("--max-seconds", type=float, default=600.0, help="for the whole run")
    p.add_argument("--repeats", type=whole_number(1, 1000), default=3,
                   help="runs of each row (median and range are printed)")
    p.add_argument("--fresh-sessions", action="store_true", help="no session_hash: every call a new Gradio session "
                   "(by default each client keeps one, as gradio_client and a browser do)")
    p.add_argument("--direct", action="store_true", help="POST /api/recommend (one request a call, no Gradio queue)")
    p.add_argument("--no-decoder-process", dest="decoder_process", action="store_false",
                   help="start the app with --no-decoder-process: /recommend decodes in the app's own process")
    p.add_argument("--floor", action="store_true", help="a no-op /recommend instead of the app: Gradio's ceiling")
    p.add_argument("--client", choices=["lean", "httpx"], default="lean", help="the load generator's HTTP client: "
                   "its own keep-alive HTTP/1.1 (little CPU beside the app) or httpx")
    p.add_argument("--serve-floor", type=int, help=argparse.SUPPRESS)  # the --floor child: serve on this port
    args = p.parse_args(argv)
    if args.serve_floor:
        serve_floor(args.serve_floor)
        return 0
    if args.max_seconds <= 0:
        p.error(f"argument --max-seconds: must be above 0, got {args.max_seconds:g}")
    # The app runs in ROOT: a path relative to the current folder would name another file there.
    args.model = os.path.abspath(args.model)
    args.rul_model = args.rul_model and os.path.abspath(args.rul_model)
    if args.floor:
        args.bad_every = 0  # the no-op answers everything
    deadline = time.monotonic() + args.max_seconds
    torch.set_num_threads(1)
    recommender = Recommender.from_checkpoint(args.model)
    name = recommender.model.config.attention  # how gradio_app.py names a single translator
    what = "a no-op /recommend (--floor)" if args.floor else f"{args.model} ({name})"
    print(f"# Load test: {what}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
          f"load average before {os.getloadavg()[0]:.2f}\n")
    with tempfile.TemporaryDirectory(prefix="load-test-") as folder:
        app, url = start_app(args, free_port(), Path(folder))  # first: an app that cannot start leaves no table
        print(f"Each row {args.repeats} times ({args.client} client): median calls/s and p95 (their range), p50 and "
              "max of all calls, p95 of the calls after each client's first (median of the runs), counts summed.\n")
        print("| search | clients x calls | answered calls/s | p50 / p95 / max ms | p95 after first call | "
              "turned away | lost | bad input answered with an error | wrong | Recommender alone, alerts/s at this "
              "batch |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        try:
            for label in args.searches:
                search = SEARCHES[label]
                for clients in args.clients:
                    sessions = DIRECT if args.direct else not args.fresh_sessions
                    runs = [asyncio.run(run_row(url, clients, args.calls, search, name, args.bad_every, sessions,
                                                deadline, args.client == "lean")) for _ in range(args.repeats)]
                    rates = [(row.answered + row.bad_answered) / elapsed for row, elapsed, _ in runs]
                    p95s = [np.percentile(row.latencies_ms or [float("nan")], 95) for row, _, _ in runs]
                    later = np.median([np.percentile(row.later_ms or [float("nan")], 95) for row, _, _ in runs])
                    times = np.array([t for row, _, _ in runs for t in row.latencies_ms] or [float("nan")])
                    total = {key: sum(getattr(row, key) for row, _, _ in runs)
                             for key in ("rejected", "lost", "bad_answered", "wrong")}
                    cut = " (cut short)" if any(c for _, _, c in runs) else ""
                    print(f"| {label} | {clients} x {args.calls}{cut} | {np.median(rates):.0f} ({min(rates):.0f}-"
                          f"{max(rates):.0f}) | {np.percentile(times, 50):.0f} / {np.median(p95s):.0f} ("
                          f"{min(p95s):.0f}-{max(p95s):.0f}) / {times.max():.0f} | {later:.0f} | {total['rejected']} | "
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
    raise SystemExit(run_script(main, "load_test"))

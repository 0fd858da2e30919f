"""Is every feedback record the app acknowledged still there after the app is killed with SIGKILL?

    python scripts/feedback_crash_test.py [--clients 50] [--records 1000] [--kill-after 500] \
        [--model runs/default/translator.pt] [--rul-model runs/default/rul.pt] [--work /tmp/feedback-crash]

Starts ``gradio_app.py`` as a process on a free loopback port with a fresh feedback database, then
--clients threads post --records records between them through Gradio's HTTP API (``POST
/gradio_api/call/feedback``, then its event stream, as any program would), each record's text naming
it. Once --kill-after records are acknowledged, the app gets SIGKILL while the others are in flight.
The database is then opened afresh and compared with the acknowledgements: every acknowledged id must
hold the record it was acknowledged for (``missing`` must be 0). Records committed whose answer never
reached the client (``stored_unacknowledged``) are allowed: the client cannot tell them from lost ones
and would post again. ``unanswered`` counts the posts that got no answer (in flight at the kill, or sent
to the dead app after it), ``refused`` those the app answered with an error. Loopback only; bounded by
--records and --timeout. Figures: docs/feedback.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from seq2seq.cli.common import owned_folder, path_flag, whole_number
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.serving.smoke import free_port

ROOT = Path(__file__).resolve().parent.parent
VERDICTS = ("wrong", "right")
# Written into --work by this script: only there is a feedback database deleted before a run, so that --work
# naming a real one (runs/default) is refused rather than wiped.
MARKER = ".feedback_crash_test"


def start_app(db: Path, model: str, rul_model: str, timeout: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = db.parent / "app.log"  # why an app that exits early did so
    with log.open("wb") as sink:
        app = subprocess.Popen([sys.executable, str(ROOT / "gradio_app.py"), "--model", model, "--rul-model",
                                rul_model, "--feedback-db", str(db), "--host", "127.0.0.1", "--port", str(port)],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink,
                               env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if app.poll() is not None:
            said = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["(it said nothing)"]
            raise SystemExit(f"gradio_app.py exited with status {app.returncode} before serving: {said[0]} "
                             f"(all it said: {log})")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return app, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    app.kill()
    raise SystemExit(f"gradio_app.py did not serve within {timeout:.0f} s")


def record(n: int) -> list[str]:
    """The fields of record ``n``: its number in the alert, awkward text in the others."""
    return [f"crash test alert {n}", f'recommendation "{n}"\nsecond line', VERDICTS[n % 2],
            f"did ünïcode thing {n}\t(tab)" if n % 3 else "", f"tech {n % 7}"]


def post(client: httpx.Client, url: str, fields: list[str]) -> int | None:
    """The record id the app answered with; None for a refusal (queue full, an error)."""
    response = client.post(f"{url}/gradio_api/call/feedback", json={"data": fields})
    if response.status_code != 200:
        return None
    event = response.json()["event_id"]
    kind = None
    with client.stream("GET", f"{url}/gradio_api/call/feedback/{event}") as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line[len("event: "):]
            elif line.startswith("data: ") and kind == "complete":
                return int(json.loads(line[len("data: "):])[0])
            elif kind == "error":
                return None
    return None


def run(args: argparse.Namespace) -> dict:
    work = Path(args.work).resolve()  # the app runs in ROOT: a relative path would name another database there
    work.mkdir(parents=True, exist_ok=True)
    (work / MARKER).write_text("made by scripts/feedback_crash_test.py, which deletes feedback.sqlite here\n")
    db = work / "feedback.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    app, url = start_app(db, args.model, args.rul_model, args.timeout)
    numbers, lock = itertools.count(), threading.Lock()
    acknowledged: dict[int, int] = {}  # record number -> id
    counts = {"refused": 0, "unanswered": 0}
    killed_at: list[float] = []
    deadline = time.monotonic() + args.timeout

    def client_loop() -> None:
        with httpx.Client(timeout=30) as client:
            while time.monotonic() < deadline:
                with lock:
                    n = next(numbers)
                if n >= args.records:
                    return
                try:
                    answer = post(client, url, record(n))
                except (httpx.HTTPError, ValueError, KeyError):
                    answer = "failed"
                with lock:
                    if answer is None or answer == "failed":
                        counts["refused" if answer is None else "unanswered"] += 1
                        continue
                    acknowledged[n] = answer
                    if len(acknowledged) >= args.kill_after and not killed_at:
                        app.send_signal(signal.SIGKILL)
                        killed_at.append(time.monotonic())

    started = time.monotonic()
    threads = [threading.Thread(target=client_loop) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if not killed_at:
        app.send_signal(signal.SIGKILL)
    app.wait()
    store = FeedbackStore(db)  # recovers the WAL as any later reader would
    stored = {r.id: r for r in store.records()}
    store.close()
    missing = [n for n, i in acknowledged.items() if i not in stored or
               [stored[i].feedback.alert, stored[i].feedback.recommendation, stored[i].feedback.verdict,
                stored[i].feedback.correction, stored[i].feedback.technician] != record(n)]
    return {"clients": args.clients, "records": args.records, "kill_after": args.kill_after,
            "acknowledged": len(acknowledged), "stored": len(stored), "missing": len(missing),
            "stored_unacknowledged": len(set(stored) - set(acknowledged.values())),
            "refused": counts["refused"], "unanswered": counts["unanswered"],
            "seconds_to_kill": round((killed_at[0] if killed_at else time.monotonic()) - started, 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=whole_number(1, 10_000), default=50)
    parser.add_argument("--records", type=whole_number(1, 10_000_000), default=1000)
    parser.add_argument("--kill-after", type=whole_number(1, 10_000_000), default=500,
                        help="acknowledged records before SIGKILL")
    parser.add_argument("--model", type=path_flag, default=str(ROOT / "runs/default/translator.pt"))
    parser.add_argument("--rul-model", type=path_flag, default=str(ROOT / "runs/default/rul.pt"))
    parser.add_argument("--work", type=path_flag, default="/tmp/feedback-crash",
                        help=f"where the feedback database goes: a new or empty folder, or one this script made "
                        f"(it holds {MARKER}), whose feedback.sqlite is deleted first")
    parser.add_argument("--timeout", type=float, default=300, help="seconds for start-up, and for the posts")
    args = parser.parse_args(argv)
    for flag, path in (("--model", args.model), ("--rul-model", args.rul_model)):
        if not Path(path).is_file():
            parser.error(f"{flag} {path}: not found")
    owned_folder(parser, "--work", Path(args.work), MARKER)
    args.model, args.rul_model = os.path.abspath(args.model), os.path.abspath(args.rul_model)  # the app runs in ROOT
    result = run(args)
    print(json.dumps(result))
    raise SystemExit(0 if result["missing"] == 0 else 1)


if __name__ == "__main__":
    main()

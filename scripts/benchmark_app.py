"""Latency of one ``/recommend`` call through gradio_client, next to the Python call underneath it.

    python scripts/benchmark_app.py [--model runs/default/translator.pt] [--repeats 30] [--alert TEXT]

Serves the app in this process on a free loopback port (translator only, no RUL model), then for
greedy search and beam 5 (n-best 5) times ``Client.predict(alert, ..., api_name="/recommend")``
(queue, HTTP, JSON with the attention matrices) and ``Recommender.recommend([alert], SearchConfig)``,
after a few warm-up calls, and prints p50 and p95 in milliseconds. Drawing the heatmaps is a
separate step of the browser UI and is not timed here.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # gradio_app.py lives at the repository root

import gradio_app  # noqa: E402
from seq2seq.config import SearchConfig  # noqa: E402
from seq2seq.recommender import Recommender  # noqa: E402

SEARCHES = {"greedy": SearchConfig(beam_size=1, n_best=1), "beam 5": SearchConfig(beam_size=5, n_best=5)}
WARM_UP = 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def latencies_ms(call: Callable[[], object], repeats: int) -> np.ndarray:
    for _ in range(WARM_UP):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000.0)
    return np.array(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "runs" / "default" / "translator.pt"))
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per row (after warm-up)")
    parser.add_argument("--alert", default="hpc outlet temperature rising sharply")
    args = parser.parse_args(argv)
    recommender = Recommender.from_checkpoint(args.model)
    name = recommender.model.config.attention
    demo = gradio_app.build({name: recommender}, None, [])
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        client = Client(url, verbose=False, analytics_enabled=False)
        print(f"{args.model} ({name}), alert {args.alert!r}; torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}, "
              f"{args.repeats} calls per row after {WARM_UP} warm-up calls")
        print("| search | path | p50 ms | p95 ms |\n|---|---|---|---|")
        for label, search in SEARCHES.items():
            paths = {
                "gradio_client /recommend": lambda s=search: client.predict(
                    args.alert, name, s.beam_size, s.n_best, api_name="/recommend"),
                "Recommender.recommend": lambda s=search: recommender.recommend([args.alert], s),
            }
            for path, call in paths.items():
                times = latencies_ms(call, args.repeats)
                print(f"| {label} | {path} | {np.percentile(times, 50):.1f} | {np.percentile(times, 95):.1f} |")
    finally:
        demo.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

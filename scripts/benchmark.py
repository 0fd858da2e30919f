"""Speed benchmark: training tokens/s, translation sentences/s, latency, memory, FLOPs and a 1M-row log.

    python scripts/benchmark.py [--models runs/benchmark/*/best.pt] [--train-seconds 30]
        [--batch-sizes 16 64 256] [--log-rows 1000000] [--peer] [--json FILE]

Sizes and data are the core benchmark's (``scripts/configs/maintnet.json``: embeddings 256,
bidirectional GRU encoder 256 per direction, GRU decoder 256, SentencePiece unigram 2,000; the
MaintNet split in ``../shared/data/maintnet``), so the figures sit beside JoeyNMT's on the same
machine (``--peer`` runs ``../shared/peers/run.sh`` in the same sitting; else its README figures).

Sections, each a Markdown table (medians of ``--repeats`` runs), all written to one JSON file (``--json``;
by default ``runs/benchmark/speed.json`` in the repository, replacing the last run's):
1. the machine's float32 matrix-multiply rate (large square and decoder-sized products);
2. training target tokens/s per attention type, Luong with and without input feeding, in float32
   and (on a CPU with native bf16) bf16 mixed precision, in one process on every core, and in
   float32 in one one-thread process per core under torchrun (DDP, each on its share of the batches);
3. translation of the dev split per model, float32 and int8 (``--quantize``), greedy and beam 5
   at several batch sizes, by one worker on every core and by one one-core worker per core:
   sentences/s, BLEU, and the share of the matmul rate the model's FLOPs per sentence (counted by
   ``torch.utils.flop_counter``) reach at that speed;
4. latency of one sentence (p50/p95) and the process's peak RSS;
5. ``seq2seq translate --input`` on a generated log of ``--log-rows`` rows, in a child process:
   wall time, rows/s and the child's peak RSS.
Models come from ``scripts/benchmark_attention.py`` (``runs/benchmark/<attention>/best.pt``).
Nothing else should run meanwhile: every figure is a speed.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import multiprocessing
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import torch
from benchmark_attention import MAINTNET, ROOT, config_args, describe_machine
from torch.utils.data import DataLoader
from torch.utils.flop_counter import FlopCounterMode

from seq2seq.attention import ATTENTION_NAMES, is_luong
from seq2seq.cli import run_script
from seq2seq.cli.train import configs
from seq2seq.config import SearchConfig
from seq2seq.corpus import read_parallel
from seq2seq.data import collate
from seq2seq.distributed import ONE_PROCESS, World, process_group
from seq2seq.evaluate import score_corpus
from seq2seq.fast.precision import cpu_has_native_bf16
from seq2seq.recommender import Recommender
from seq2seq.runs import build_trainer

PEER = ROOT.parent / "shared" / "peers"
# ../shared/peers/README.md, 2-core machine of this kind, 2026-11-21 (used when --peer is not given)
PEER_README = {"bahdanau": {"train_tok_s": 2352, "greedy_sent_s": 680, "beam5_sent_s": 172},
               "luong": {"train_tok_s": 2888}}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", default=str(MAINTNET / "train.tsv"))
    p.add_argument("--dev", default=str(MAINTNET / "dev.tsv"))
    p.add_argument("--config", default=str(ROOT / "scripts" / "configs" / "maintnet.json"))
    trained = sorted(str(m) for m in (ROOT / "runs" / "benchmark").glob("*/best.pt"))
    p.add_argument("--models", nargs="*", default=trained,
                   help="trained checkpoints to translate with (default: runs/benchmark/*/best.pt)")
    p.add_argument("--train-seconds", type=float, default=30.0, help="training time per variant (0 = skip)")
    p.add_argument("--attention", nargs="+", default=list(ATTENTION_NAMES), choices=ATTENTION_NAMES,
                   help="attention types to time training for (Luong ones with and without input feeding)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--repeats", type=int, default=3, help="runs per translation figure (the median is shown)")
    p.add_argument("--latency-samples", type=int, default=200)
    p.add_argument("--log-rows", type=int, default=1_000_000, help="rows of the generated log (0 = skip)")
    p.add_argument("--log-batch-size", type=int, default=256)
    p.add_argument("--log-quantize", action="store_true", help="translate the generated log with --quantize")
    p.add_argument("--peer", action="store_true", help="run ../shared/peers/run.sh (about 25 minutes) first")
    p.add_argument("--json", default=str(ROOT / "runs" / "benchmark" / "speed.json"),
                   help="write the results here (default: runs/benchmark/speed.json in the repository, replaced)")
    p.add_argument("--train-worker", nargs=3, metavar=("ATTENTION", "FEEDING", "OUT"), help=argparse.SUPPRESS)
    return p.parse_args()


def table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n{title}\n\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(f"{c:,}" if isinstance(c, int) else str(c) for c in row) + " |")
    sys.stdout.flush()


def log(line: str) -> None:
    print(f"[benchmark] {line}", file=sys.stderr, flush=True)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


# -- 1. the hardware ----------------------------------------------------------------------
def matmul_rate(m: int, k: int, n: int, repeats: int = 50) -> float:
    """Median float32 GFLOP/s of an (m x k) @ (k x n) product."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(10):
        a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * m * k * n / statistics.median(times) / 1e9


# -- 2. training ----------------------------------------------------------------------------
def train_speed(attention: str, input_feeding: bool, precision: str, args: argparse.Namespace, train, dev,
                world: World = ONE_PROCESS) -> dict:
    """Target tokens/s of training steps (forward, backward, update) after one warm-up epoch, and the
    peak RSS of the process (run in a process of its own; under torchrun, summed over the processes,
    each training on its share of every epoch's batches with DDP, as ``seq2seq train`` does).

    The warm-up epoch lets oneDNN build its kernels for the batch shapes (bf16: ~0.3 ms per new
    shape), as a real run does once; what follows is the speed of the rest of a run.
    """
    model_config, train_config, tokenizer_config = configs(config_args(args.config, attention, 0.0))
    model_config = replace(model_config, input_feeding=input_feeding)
    train_config = replace(train_config, precision=precision)
    with tempfile.TemporaryDirectory() as out:
        trainer = build_trainer(train, dev, out, model_config, train_config, tokenizer_config, log=lambda _: None,
                                world=world)
        trainer.model.train()

        def epoch() -> DataLoader:
            return DataLoader(trainer.train_set, batch_sampler=world.shard(list(trainer.sampler)), collate_fn=collate)

        for batch in epoch():
            trainer.train_step(batch)  # warm-up epoch
        tokens, seconds, deadline, stop = 0, 0.0, time.monotonic() + args.train_seconds, False
        while not stop:
            for batch in epoch():
                start = time.perf_counter()
                _, _, n_tokens = trainer.train_step(batch)
                tokens, seconds = tokens + n_tokens, seconds + time.perf_counter() - start
                stop = world.any(time.monotonic() > deadline)  # every process stops after the same step
                if stop:
                    break
        tokens, seconds = world.sum(tokens), world.max(seconds)
    return {"attention": attention, "input_feeding": input_feeding if is_luong(attention) else None,
            "precision": precision, "processes": world.size, "threads": torch.get_num_threads(),
            "encoder_hidden": model_config.encoder_hidden, "target_tokens_per_s": round(tokens / seconds),
            "peak_rss_mb": round(world.sum(peak_rss_mb()))}


def train_speed_torchrun(attention: str, input_feeding: bool, args: argparse.Namespace, processes: int) -> dict:
    """``train_speed`` in float32 in ``processes`` one-thread processes under torchrun (gloo DDP)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "train.json"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                   __file__, "--train-worker", attention, str(int(input_feeding)), str(out), "--train", args.train,
                   "--dev", args.dev, "--config", args.config, "--train-seconds", str(args.train_seconds)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
        return json.loads(out.read_text())


def train_worker(args: argparse.Namespace) -> None:
    """One torchrun process of ``train_speed_torchrun``; rank 0 writes the result."""
    attention, feeding, out = args.train_worker
    torch.set_num_threads(1)
    train, dev = read_parallel(args.train), read_parallel(args.dev)
    with process_group("cpu") as world:
        result = train_speed(attention, feeding == "1", "fp32", args, train, dev, world)
    if world.is_main:
        Path(out).write_text(json.dumps(result))


# -- 3. translation ---------------------------------------------------------------------------
def flops_per_sentence(recommender: Recommender, sources: list[str], config: SearchConfig) -> float:
    """Matrix-multiply FLOPs per sentence (float32 model; elementwise work not counted)."""
    counter = FlopCounterMode(display=False)
    with counter:
        recommender.translate(sources, config, batch_size=64)
    return counter.get_total_flops() / len(sources)


def timed_translate(recommender: Recommender, sources: list[str], config: SearchConfig, batch_size: int,
                    repeats: int) -> tuple[float, list[str]]:
    """Median sentences/s of ``repeats`` passes, and the translations. ``translate`` answers a repeated alert once,
    so the rate counts the distinct ones: sentences decoded per second, like the peer's."""
    decoded = len(set(sources))
    recommender.translate(sources[:batch_size], config, batch_size)  # warm-up
    rates, texts = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        texts = recommender.translate(sources, config, batch_size)
        rates.append(decoded / (time.perf_counter() - start))
    return statistics.median(rates), texts


def translate_speed(path: str, args: argparse.Namespace, dev, peak_gflops: float) -> list[dict]:
    """Each weight type (fp32, int8) x decoding layout x beam x batch size. Layouts: one worker on all
    intra-op threads, and (with several cores) one worker per core, each on one thread, as
    ``seq2seq translate --input`` runs by default (cli.decode_workers)."""
    sources, references = [e.source for e in dev.examples], [e.target for e in dev.examples]
    cores = torch.get_num_threads()
    layouts = [(1, cores)] + ([(cores, 1)] if cores > 1 else [])  # (workers, intra-op threads each)
    recommenders = {quantize: Recommender.from_checkpoint(path, quantize=quantize) for quantize in (False, True)}
    float_model = recommenders[False]
    rows = []
    for beam in (1, 5):
        config = SearchConfig(beam_size=beam)
        flops = flops_per_sentence(float_model, sources, config)
        for quantize, (workers, threads), batch_size in itertools.product((False, True), layouts, args.batch_sizes):
            recommender = recommenders[quantize]
            recommender.workers = workers
            torch.set_num_threads(threads)
            try:
                rate, texts = timed_translate(recommender, sources, config, batch_size, args.repeats)
            finally:
                recommender.workers = 1
                torch.set_num_threads(cores)
            bleu = score_corpus(texts, references).bleu
            rows.append({"model": Path(path).parent.name, "attention": float_model.model.config.attention,
                         "beam": beam, "int8": quantize, "workers": workers, "threads": threads,
                         "batch": batch_size, "sent_per_s": round(rate), "bleu": round(bleu, 2),
                         "mflop_per_sent": round(flops / 1e6, 2),
                         "share_of_matmul_rate": round(flops * rate / (peak_gflops * 1e9), 4)})
            log(f"{rows[-1]}")
    return rows


def latency(path: str, dev, samples: int, quantize: bool) -> dict:
    """p50/p95 milliseconds of one alert through ``Recommender.recommend`` (greedy and beam 5)."""
    recommender = Recommender.from_checkpoint(path, quantize=quantize)
    alerts = [e.source for e in dev.examples][:samples]
    result = {"model": Path(path).parent.name, "int8": quantize}
    for beam in (1, 5):
        config = SearchConfig(beam_size=beam)
        recommender.recommend(alerts[:5], config)
        times = []
        for alert in alerts:
            start = time.perf_counter()
            recommender.recommend([alert], config)
            times.append(1000 * (time.perf_counter() - start))
        q = statistics.quantiles(times, n=20)
        result[f"beam{beam}_p50_ms"], result[f"beam{beam}_p95_ms"] = round(q[9], 2), round(q[18], 2)
    return result


# -- 5. a large incident log ----------------------------------------------------------------
def big_log(path: str, rows: int, corpora: list, args: argparse.Namespace) -> dict:
    """Translate a generated CSV log of ``rows`` rows in a child process: wall time, rows/s, peak RSS. The rows
    cycle through the distinct alerts of ``corpora``, so that a chunk of the job repeats none while there are
    more of them than its rows: the job answers a repeat within a chunk once, which measures the repeats."""
    with tempfile.TemporaryDirectory() as folder:
        log_path, out_path = Path(folder) / "log.csv", Path(folder) / "out.csv"
        alerts = itertools.cycle(dict.fromkeys(e.source for corpus in corpora for e in corpus.examples))
        with open(log_path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "station", "problem"])
            for i in range(rows):
                writer.writerow([i, f"S{i % 97}", next(alerts)])
        command = [sys.executable, "-m", "seq2seq", "translate", "--model", path, "--input", str(log_path),
                   "--output", str(out_path), "--column", "problem", "--batch-size", str(args.log_batch_size)]
        command += ["--quantize"] if args.log_quantize else []
        start = time.perf_counter()
        with open(Path(folder) / "stderr.txt", "w+", encoding="utf-8") as stderr:
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
            peak_kib = 0
            while child.poll() is None:  # the child's own high-water mark (ru_maxrss would include ours)
                peak_kib = max(peak_kib, high_water_kib(child.pid))
                time.sleep(0.2)
            wall = time.perf_counter() - start
            if child.returncode != 0:
                stderr.seek(0)
                raise SystemExit(f"benchmark: error: the log translation failed: {stderr.read().strip()[-500:]}")
        with open(out_path, encoding="utf-8") as handle:
            written = sum(1 for _ in csv.reader(handle)) - 1
    return {"model": Path(path).parent.name, "rows": rows, "rows_written": written, "int8": args.log_quantize,
            "batch": args.log_batch_size, "wall_s": round(wall, 1), "rows_per_s": round(rows / wall),
            "peak_rss_mb": round(peak_kib / 1024)}


def high_water_kib(pid: int) -> int:
    """VmHWM (peak resident set) of a running process, in KiB; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) if found else 0


# -- the peer ---------------------------------------------------------------------------------
def run_peer(attention: str) -> dict:
    """JoeyNMT's figures from ``../shared/peers/run.sh ATTENTION`` (trains 30 epochs, then translates)."""
    log(f"peer: running {PEER / 'run.sh'} {attention} (about 12 minutes)")
    output = subprocess.run(["bash", str(PEER / "run.sh"), attention], capture_output=True, text=True,
                            check=True).stdout
    train = re.search(r"median target tokens/s (\d+)", output)
    beams = dict(re.findall(r"translate beam (\d).*?generation [\d.]+ s \((\d+) sent/s\)", output))
    figures = {"train_tok_s": int(train.group(1)) if train else None}
    figures.update({f"{'greedy' if b == '1' else 'beam5'}_sent_s": int(r) for b, r in beams.items()})
    return figures


def main() -> int:
    args = parse_args()
    if args.train_worker:
        train_worker(args)
        return 0
    for path in (args.train, args.dev, *args.models):
        if not Path(path).is_file():
            print(f"benchmark: error: {path}: not found (MaintNet data: ../shared/data/maintnet; models: "
                  "python scripts/benchmark_attention.py)", file=sys.stderr)
            return 2
    train, dev = read_parallel(args.train), read_parallel(args.dev)
    machine = describe_machine()
    print(f"# Speed benchmark, {date.today()}, {machine}; MaintNet dev {len(dev.examples)} sentences")
    results: dict = {"date": str(date.today()), "machine": machine}
    peer = {name: run_peer(name) for name in ("bahdanau", "luong")} if args.peer else PEER_README
    results["peer"] = {"source": "measured in this run" if args.peer else "../shared/peers/README.md", **peer}

    rates = {"square 1024": matmul_rate(1024, 1024, 1024), "decoder output 64 x 256 x 2000": matmul_rate(64, 256, 2000)}
    peak = max(rates.values())
    results["matmul_gflops"] = {k: round(v, 1) for k, v in rates.items()}
    table("Float32 matrix multiply (GFLOP/s, median of 50)", list(rates), [[f"{v:.1f}" for v in rates.values()]])

    if args.train_seconds > 0:
        variants = [(a, f) for a in args.attention for f in ((True, False) if is_luong(a) else (True,))]
        precisions = ["fp32", "bf16"] if cpu_has_native_bf16() else ["fp32"]
        # Each in a fresh process: a trainer leaves the process changed (in one run, int8 decoding
        # afterwards ran 2-4x slower and the peak RSS reached 7.4 GB), and each gets its own peak RSS.
        with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
            results["train"] = [pool.apply(train_speed, (a, f, p, args, train, dev))
                                for a, f in variants for p in precisions]
        cores = torch.get_num_threads()
        if cores > 1:  # the same in one one-thread process per core (torchrun, DDP), as for translation
            results["train"] += [train_speed_torchrun(a, f, args, cores) for a, f in variants]
        rows = []
        for r in results["train"]:
            reference = peer["luong" if is_luong(r["attention"]) else "bahdanau"]["train_tok_s"]
            feeding = {None: "-", True: "on", False: "off"}[r["input_feeding"]]
            rows.append([r["attention"], feeding, r["precision"], f"{r['processes']} x {r['threads']}",
                         r["encoder_hidden"], r["target_tokens_per_s"],
                         f"{r['target_tokens_per_s'] / reference:.2f}x", f"{r['peak_rss_mb']} MB"])
        table(f"Training, target tokens/s ({args.train_seconds:.0f} s of steps each after a warm-up epoch; ratio "
              "to JoeyNMT's Bahdanau or Luong)",
              ["attention", "input feeding", "precision", "processes", "enc hidden/dir", "tgt tok/s", "vs peer",
               "peak RSS"], rows)

    results["translate"] = [row for path in args.models for row in translate_speed(path, args, dev, peak)]
    rows = []
    for r in results["translate"]:
        key = "greedy_sent_s" if r["beam"] == 1 else "beam5_sent_s"  # the peer of the model's family if measured
        reference = peer["luong" if is_luong(r["attention"]) else "bahdanau"].get(key, peer["bahdanau"][key])
        rows.append([r["model"], r["beam"], "int8" if r["int8"] else "fp32", f"{r['workers']} x {r['threads']}",
                     r["batch"], r["sent_per_s"], f"{r['sent_per_s'] / reference:.2f}x" if reference else "-",
                     r["bleu"], r["mflop_per_sent"], f"{100 * r['share_of_matmul_rate']:.1f}%"])
    table(f"Translation of the dev split (median of {args.repeats}); workers x intra-op threads each; ratio to "
          "JoeyNMT's sentences/s at batch 64 (its Luong run for Luong models when measured)",
          ["model", "beam", "weights", "workers", "batch", "sent/s", "vs peer", "BLEU", "MFLOP/sent",
           "of peak matmul"], rows)

    results["latency"] = [latency(path, dev, args.latency_samples, q) for path in args.models for q in (False, True)]
    table(f"One sentence, milliseconds ({args.latency_samples} alerts); process peak RSS {peak_rss_mb():.0f} MB",
          ["model", "weights", "greedy p50", "greedy p95", "beam5 p50", "beam5 p95"],
          [[r["model"], "int8" if r["int8"] else "fp32", r["beam1_p50_ms"], r["beam1_p95_ms"], r["beam5_p50_ms"],
            r["beam5_p95_ms"]] for r in results["latency"]])
    results["peak_rss_mb"] = round(peak_rss_mb())

    if args.log_rows > 0 and args.models:
        log(f"translating a generated log of {args.log_rows:,} rows with {args.models[0]}")
        r = results["big_log"] = big_log(args.models[0], args.log_rows, [train, dev], args)
        table("A generated incident log through `seq2seq translate --input` (child process)",
              ["model", "rows", "rows written", "weights", "batch", "wall", "rows/s", "peak RSS"],
              [[r["model"], r["rows"], r["rows_written"], "int8" if r["int8"] else "fp32", r["batch"],
                f"{r['wall_s']} s", r["rows_per_s"], f"{r['peak_rss_mb']} MB"]])
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "benchmark"))

"""Train each attention type on MaintNet, select on dev, and print a comparison table.

    python scripts/benchmark_attention.py [--minutes 15] [--attention bahdanau luong-general ...]

Reads ``../shared/data/maintnet/{train,dev}.tsv`` (problem -> action) by default. For every
attention type: train with ``scripts/configs/maintnet.json`` for at most ``--minutes`` of wall-clock
time (early stopping on dev BLEU may end it sooner), reload ``best.pt`` through the one loading
path, and decode the dev split greedily and with beam 5. Prints a Markdown table and writes JSON.
Runs already in ``--output-dir`` are kept: the script refuses before training unless given ``--overwrite``.
Nothing else should run on the machine meanwhile: the figures are speeds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path

import torch

from seq2seq.attention import ATTENTION_NAMES
from seq2seq.cli import run_script
from seq2seq.cli.train import OVERRIDES, configs, settings
from seq2seq.config import ModelConfig, SearchConfig, TokenizerConfig, TrainConfig
from seq2seq.corpus import read_parallel
from seq2seq.evaluate import evaluate_corpus
from seq2seq.recommender import Recommender
from seq2seq.resume import refuse_earlier_runs
from seq2seq.runs import build_trainer

ROOT = Path(__file__).resolve().parent.parent
MAINTNET = ROOT.parent / "shared" / "data" / "maintnet"
COLUMNS = ("attention", "params", "wall", "epochs", "tgt tok/s", "greedy BLEU", "greedy chrF", "greedy sent/s",
           "beam5 BLEU", "beam5 chrF", "beam5 sent/s")


def minutes(text: str) -> float:
    """An argparse ``type``: a training budget in minutes, 0 for none (early stopping ends the run)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of minutes, got {text!r}") from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be in [0, inf), got {value:g}")
    return value


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", default=str(MAINTNET / "train.tsv"))
    p.add_argument("--dev", default=str(MAINTNET / "dev.tsv"))
    p.add_argument("--config", default=str(ROOT / "scripts" / "configs" / "maintnet.json"))
    p.add_argument("--attention", nargs="+", default=list(ATTENTION_NAMES), choices=ATTENTION_NAMES)
    p.add_argument("--minutes", type=minutes, default=15.0, help="training budget per attention type (0: none)")
    p.add_argument("--output-dir", default=str(ROOT / "runs" / "benchmark"))
    p.add_argument("--json", default=None, help="write the results here (default OUTPUT_DIR/results.json)")
    p.add_argument("--overwrite", action="store_true", help="replace the runs already in --output-dir")
    return p.parse_args()


def config_args(config: str, attention: str, minutes: float) -> argparse.Namespace:
    """The same precedence as ``seq2seq train --config FILE --attention NAME --max-minutes M``; for luong-dot
    also ``--encoder-hidden`` of half the decoder's, since h_t . h_s needs the bidirectional memory (2 x
    encoder_hidden) as wide as the decoder state."""
    values = dict.fromkeys(OVERRIDES)
    values.update(config=config, attention=attention, max_minutes=minutes, device="cpu")
    args = argparse.Namespace(**values)
    if attention == "luong-dot":
        decoder_hidden, _ = settings(args).get(("model", "decoder_hidden"), (ModelConfig().decoder_hidden, None))
        args.encoder_hidden = decoder_hidden // 2
    return args


def decode(recommender: Recommender, dev, beam_size: int) -> tuple[float, float, float]:
    start = time.perf_counter()
    scores, _ = evaluate_corpus(recommender, dev, SearchConfig(beam_size=beam_size), batch_size=64)
    seconds = time.perf_counter() - start
    return scores.bleu, scores.chrf, len(dev.examples) / seconds


def run_one(attention: str, args: argparse.Namespace, train, dev,
            planned: tuple[ModelConfig, TrainConfig, TokenizerConfig]) -> dict:
    model_config, train_config, tokenizer_config = planned
    out = Path(args.output_dir) / attention
    log = lambda line: print(f"[{attention}] {line}", file=sys.stderr, flush=True)  # noqa: E731
    trainer = build_trainer(train, dev, out, model_config, train_config, tokenizer_config, overwrite=args.overwrite,
                            log=log)
    result = trainer.fit()
    recommender = Recommender.from_checkpoint(out / "best.pt")
    greedy = decode(recommender, dev, 1)
    beam = decode(recommender, dev, 5)
    return {"attention": attention, "params": result.parameters, "wall_s": round(result.seconds, 1),
            "epochs": round(result.epochs, 1), "target_tokens_per_s": round(result.tokens_per_second),
            "stopped": result.stopped, "encoder_hidden": model_config.encoder_hidden,
            "greedy_bleu": round(greedy[0], 2), "greedy_chrf": round(greedy[1], 2),
            "greedy_sent_per_s": round(greedy[2]), "beam5_bleu": round(beam[0], 2), "beam5_chrf": round(beam[1], 2),
            "beam5_sent_per_s": round(beam[2])}


def describe_machine() -> str:
    cpu = platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    return f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, torch {torch.__version__}"


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = (r["attention"], f"{r['params'] / 1e6:.2f} M", f"{r['wall_s'] / 60:.1f} min", r["epochs"],
                 f"{r['target_tokens_per_s']:,}", r["greedy_bleu"], r["greedy_chrf"], r["greedy_sent_per_s"],
                 r["beam5_bleu"], r["beam5_chrf"], r["beam5_sent_per_s"])
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    for path in (args.train, args.dev):
        if not Path(path).is_file():
            print(f"benchmark_attention: error: {path}: not found (the MaintNet data lives in ../shared/data/maintnet)",
                  file=sys.stderr)
            return 2
    # Every attention type's configs before the first is trained: one that cannot be built fails in seconds.
    planned = {attention: configs(config_args(args.config, attention, args.minutes)) for attention in args.attention}
    if not args.overwrite:  # every folder before the first is trained: a refusal after an hour's run loses it
        refuse_earlier_runs([Path(args.output_dir) / attention for attention in args.attention])
    train, dev = read_parallel(args.train), read_parallel(args.dev)
    rows = [run_one(attention, args, train, dev, planned[attention]) for attention in args.attention]
    machine = describe_machine()
    print(f"MaintNet dev ({len(dev.examples)} pairs), {date.today()}, {machine}, budget {args.minutes} min each\n")
    print(table(rows))
    out = Path(args.json or Path(args.output_dir) / "results.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": str(date.today()), "machine": machine, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "benchmark_attention"))

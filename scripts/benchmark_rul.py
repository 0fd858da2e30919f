"""Train the RUL model on C-MAPSS FD001 with engines held out, and print a table.

    python scripts/benchmark_rul.py [--minutes 15] [--seed 1]

Reads ``../shared/data/cmapss/train_FD001.txt`` by default, holds out ``validation_engines`` whole
engines (20 of 100), trains for at most ``--minutes``, reloads ``best.pt`` and scores the held-out
engines at several truncation points (RMSE and the PHM08 score), next to the naive predictor that
always answers the training mean. The official test set is kept apart for acceptance: score it from
outside with ``seq2seq rul evaluate``. A run already in ``--output-dir`` is replaced only with ``--overwrite``.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path

import torch

from seq2seq.cli import run_script
from seq2seq.config import RulConfig
from seq2seq.config_checks import from_dict
from seq2seq.resume import refuse_earlier_runs
from seq2seq.rul.cmapss import read_cmapss
from seq2seq.rul.evaluate import evaluate_windows, phm08_score, rmse
from seq2seq.rul.runs import prepare_run, train_on_engines
from seq2seq.rul.train import load_rul_checkpoint

ROOT = Path(__file__).resolve().parent.parent
FD001 = ROOT.parent / "shared" / "data" / "cmapss" / "train_FD001.txt"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(FD001))
    p.add_argument("--minutes", type=float, default=15.0,
                   help="training budget; 0: none, early stopping on the held-out engines ends the run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--output-dir", default=str(ROOT / "runs" / "rul-benchmark"))
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --output-dir")
    args = p.parse_args(argv)
    if not Path(args.data).is_file():
        print(f"benchmark_rul: error: {args.data}: not found", file=sys.stderr)
        return 2
    config = from_dict(RulConfig, {"max_minutes": args.minutes, "seed": args.seed, "device": "cpu", "epochs": 1000},
                       "options", {"max_minutes": "--minutes", "seed": "--seed"})
    if not args.overwrite:
        refuse_earlier_runs([Path(args.output_dir)])
    prepare_run(Path(args.output_dir), config, resume=False, overwrite=args.overwrite)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    result, valid = train_on_engines(read_cmapss(args.data), config, Path(args.output_dir), log)
    model, _, _ = load_rul_checkpoint(Path(args.output_dir) / "best.pt")
    scores = evaluate_windows(model, valid)
    naive = torch.full_like(valid.rul, float(valid.rul.mean()))
    rows = {"date": str(date.today()), "threads": torch.get_num_threads(), "parameters": result.parameters,
            "train_minutes": round(result.seconds / 60, 2), "epochs": result.epochs, "best_epoch": result.best_epoch,
            "valid_windows": len(valid), "valid_rmse": round(scores.rmse, 2), "valid_score": round(scores.score, 1),
            "naive_rmse": round(rmse(naive, valid.rul), 2), "naive_score": round(phm08_score(naive, valid.rul), 1)}
    print("| parameters | train time | epochs (best) | held-out windows | RMSE | PHM08 score | naive RMSE |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {rows['parameters']:,} | {rows['train_minutes']} min | {rows['epochs']} ({rows['best_epoch']}) | "
          f"{rows['valid_windows']} | {rows['valid_rmse']} | {rows['valid_score']} | {rows['naive_rmse']} |")
    (Path(args.output_dir) / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "benchmark_rul"))

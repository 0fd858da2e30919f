"""RUL recipe variants on FD001, reported on engines no run saw, and ensembles of seeds: an ablation table.

    python scripts/ablate_rul.py --variant base --variant "budget:max_minutes=2.8" \\
        --folds 0 1 --seeds 1 2 3 4 5 6 7 --members 5 [--threads 1]

The 100 engines of ``train_FD001.txt`` are dealt (seeded, fixed) into 5 folds of 20. For a fold, every
run trains on the other 80 exactly as one member of ``seq2seq rul train`` with ``rul.members`` does
(``seq2seq.rul.runs.train_on_engines`` with a shared preprocessor: preprocessing fitted on the 80,
the seed's own 20 of them held out for selection); the fold's 20 engines are then cut 10, 25, ...,
145 cycles before failure, as the official test files cut theirs, and scored (RMSE, PHM08 score;
true RUL capped at 125 cycles, the protocol's cap that ``seq2seq rul evaluate`` scores against, whatever cap
a variant trains with). The ensemble of seeds s..s+K-1 (``--members`` K) is what the
recipe with seed s and K members trains, so "ensemble" columns are that recipe's figures, one per
starting seed that fits.

A variant is ``NAME[:KEY=VALUE,...]`` over the base config's ``rul`` section. Runs are kept in
OUTPUT_DIR/VARIANT/foldF/seedS (predictions in ``scores.json``) and not redone. Selection: this
reads the training file only; the official test files are kept apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import numpy as np
import torch

from seq2seq.cli import run_script
from seq2seq.config import RulConfig
from seq2seq.config_checks import from_dict
from seq2seq.config_file import load_config_file
from seq2seq.rul.cmapss import read_cmapss
from seq2seq.rul.evaluate import PROTOCOL_CAP, phm08_score, predict, rmse
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.runs import train_on_engines
from seq2seq.rul.train import load_rul_checkpoint
from seq2seq.rul.windows import windows_before_failure

ROOT = Path(__file__).resolve().parent.parent
FD001 = ROOT.parent / "shared" / "data" / "cmapss" / "train_FD001.txt"
FOLDS = 5
CUTS = tuple(range(10, 146, 15))  # cycles before failure: 10, 25, ..., 145


def parse_variant(text: str) -> tuple[str, dict[str, object]]:
    name, _, changes = text.partition(":")
    values: dict[str, object] = {}
    for change in filter(None, changes.split(",")):
        key, eq, raw = change.partition("=")
        if not eq:
            raise SystemExit(f"ablate_rul: error: variant {name!r}: {change!r} is not KEY=VALUE")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    return name, values


def fold_engines(engines: list, fold: int) -> tuple[list, list]:
    order = np.random.default_rng(0).permutation(len(engines))
    held = set(order[fold::FOLDS].tolist())
    return [e for i, e in enumerate(engines) if i not in held], [e for i, e in enumerate(engines) if i in held]


def run_one(engines: list, config: RulConfig, fold: int, folder: Path) -> dict:
    scores_file = folder / "scores.json"
    if scores_file.is_file():
        return json.loads(scores_file.read_text())
    train, report = fold_engines(engines, fold)
    preprocessor = Preprocessor.fit(train, config)
    start = time.monotonic()
    result, _ = train_on_engines(train, config, folder, lambda line: None, preprocessor)
    model, _, _ = load_rul_checkpoint(folder / "best.pt")
    windows = windows_before_failure(report, preprocessor, replace(config, rul_cap=PROTOCOL_CAP), CUTS)
    predicted = predict(model, windows.x, windows.mask).rul
    scores = {"seed": config.seed, "fold": fold, "minutes": (time.monotonic() - start) / 60,
              "epochs": result.epochs, "best_epoch": result.best_epoch, "selection_rmse": result.best_rmse,
              "rmse": rmse(predicted, windows.rul), "score": phm08_score(predicted, windows.rul) / len(windows.rul),
              "predicted": predicted.tolist(), "true": windows.rul.tolist()}
    scores_file.write_text(json.dumps(scores) + "\n")
    print(f"{folder}: RMSE {scores['rmse']:.2f} after {result.epochs} epochs ({scores['minutes']:.1f} min)",
          file=sys.stderr, flush=True)
    return scores


def ensembles(runs: list[dict], seeds: list[int], members: int) -> list[dict]:
    """The recipe's figures for each starting seed s with s..s+members-1 all run, per fold."""
    found = {(r["fold"], r["seed"]): r for r in runs}
    out = []
    for fold in sorted({r["fold"] for r in runs}):
        for s in seeds:
            group = [found.get((fold, s + k)) for k in range(members)]
            if all(group):
                mean = torch.tensor([g["predicted"] for g in group]).mean(0)
                true = torch.tensor(group[0]["true"])
                out.append({"fold": fold, "seed": s, "rmse": rmse(mean, true),
                            "score": phm08_score(mean, true) / len(true)})
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(FD001))
    p.add_argument("--base", help="a config file whose rul section the variants change (default: RulConfig())")
    p.add_argument("--variant", action="append", required=True, help="NAME[:KEY=VALUE,...]")
    p.add_argument("--folds", type=int, nargs="+", default=[0, 1], choices=range(FOLDS))
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--members", type=int, default=5, help="seeds per ensemble")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--output-dir", default=str(ROOT / "runs" / "ablate-rul"))
    args = p.parse_args()
    if not Path(args.data).is_file():
        print(f"ablate_rul: error: {args.data}: not found", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    base = load_config_file(args.base).get("rul", {}) if args.base else {}
    engines = read_cmapss(args.data)
    variants = [parse_variant(v) for v in args.variant]
    results: dict[str, list[dict]] = {}
    for name, changes in variants:
        config = replace(from_dict(RulConfig, {**base, **changes}, f"variant {name}"), device="cpu", members=1)
        results[name] = [run_one(engines, replace(config, seed=seed), fold,
                                 Path(args.output_dir) / name / f"fold{fold}" / f"seed{seed}")
                         for fold in args.folds for seed in args.seeds]
    first = {(r["fold"], r["seed"]): r for r in results[variants[0][0]]}
    print(f"FD001, {date.today()}, engines of folds {args.folds} held out of training, cut {CUTS[0]}..{CUTS[-1]} "
          f"cycles before failure; seeds {args.seeds}; median (min-max) over runs; score = PHM08 per prediction; "
          f"delta = median paired difference from {variants[0][0]}")
    print(f"| variant | runs | RMSE | delta RMSE | score | epochs | minutes per run | ensemble of {args.members} "
          f"RMSE | ensemble score |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        deltas = [r["rmse"] - first[r["fold"], r["seed"]]["rmse"] for r in runs if (r["fold"], r["seed"]) in first]
        groups = ensembles(runs, args.seeds, args.members)
        print(f"| {name} | {len(runs)} | {spread([r['rmse'] for r in runs])} | {statistics.median(deltas):+.2f} | "
              f"{spread([r['score'] for r in runs])} | {statistics.median([r['epochs'] for r in runs]):.0f} | "
              f"{statistics.median([r['minutes'] for r in runs]):.1f} | {spread([g['rmse'] for g in groups])} | "
              f"{spread([g['score'] for g in groups])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "ablate_rul"))

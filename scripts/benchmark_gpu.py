"""The GPU benchmark: what docs/gpu-and-torchrun.md reports, measured through the documented CLI on one device.

    python scripts/benchmark_gpu.py [--device cuda] [--seconds 25] [--precisions fp16 fp32 bf16]
        [--ensemble-seeds 1 2 3] [--fd001 ../shared/data/cmapss/train_FD001.txt] [--json FILE]

Sections, each a Markdown table:
1. training target tokens/s of ``seq2seq train`` by precision, for the default configuration and for one
   member of the MaintNet recipe (``--recipe`` with ``members: 1``), each run stopped after ``--seconds``:
   *steady* is the median of each validation interval's own rate from the third on, *run* the whole run's;
2. the recipe trained with all its members side by side (``seq2seq train --config RECIPE --seed s
   --parallel MEMBERS`` for each ``--ensemble-seeds`` s: one process per member) and its ensemble scored by
   ``seq2seq evaluate --json`` with the recipe's search and greedily (BLEU over all answers and over the
   80% most trusted);
3. ``seq2seq translate --input`` of the dev split: rows/s by search and batch size (the rate it prints);
4. with ``--fd001``: ``seq2seq rul train`` with the FD001 recipe, seed 1: wall time, epochs and the
   members' own validation RMSE.

Nothing else should run on the device meanwhile, except what section 2 runs side by side. Every run
goes to OUTPUT_DIR (default runs/benchmark-gpu) and is started over (``--overwrite``) on a second call.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import sentencepiece
import torch
from ablate_maintnet import MAINTNET, ROOT, run
from benchmark import table
from benchmark_attention import describe_machine

RATE = re.compile(r"\((\d+) rows/s\)")
RUL_MEMBERS = re.compile(r"their own validation RMSE ([\d., ]+)\)")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--train", default=str(MAINTNET / "train.tsv"))
    p.add_argument("--dev", default=str(MAINTNET / "dev.tsv"))
    p.add_argument("--source-column", default="problem")
    p.add_argument("--target-column", default="action")
    p.add_argument("--recipe", default=str(ROOT / "scripts" / "configs" / "maintnet-best.json"))
    p.add_argument("--seconds", type=float, default=25.0, help="time limit of each precision's run")
    p.add_argument("--precisions", nargs="+", default=["fp16", "fp32", "bf16"])
    p.add_argument("--ensemble-seeds", nargs="+", type=int, default=[1])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[16, 64, 256])
    p.add_argument("--fd001", help="C-MAPSS training file for section 4 (skipped without it)")
    p.add_argument("--fd001-config", default=str(ROOT / "scripts" / "configs" / "fd001-best.json"))
    p.add_argument("--output-dir", default=str(ROOT / "runs" / "benchmark-gpu"))
    p.add_argument("--json", help="also write every figure to this file")
    return p.parse_args()


def cli(*argv: str, log: Path) -> str:
    return run([sys.executable, "-m", "seq2seq", *argv], log)


def cli_stderr(*argv: str, log: Path) -> tuple[str, str]:
    """(stdout, stderr) of one CLI command, its stderr kept in ``log`` (started afresh) for the rates it prints."""
    log.unlink(missing_ok=True)
    stdout = cli(*argv, log=log)
    return stdout, log.read_text(encoding="utf-8")


def pairs(args: argparse.Namespace) -> list[str]:
    return ["--source-column", args.source_column, "--target-column", args.target_column]


def train_argv(args: argparse.Namespace, config: Path | None, folder: Path, seed: int, *extra: str) -> list[str]:
    return ["train", "--train", args.train, "--dev", args.dev, *pairs(args), "--output-dir", str(folder),
            "--seed", str(seed), "--device", args.device, "--overwrite",
            *(["--config", str(config)] if config else []), *extra]


def rates(metrics: Path) -> tuple[int | None, int]:
    """(steady, run) target tokens/s of a run's metrics.jsonl: the median rate of each validation interval
    from the third on (the first ones warm up; None for a run of fewer), and the whole run's."""
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    tokens = [r["target_tokens_per_s"] * r["train_seconds"] for r in records]
    seconds = [r["train_seconds"] for r in records]
    steady = [(tokens[i] - tokens[i - 1]) / (seconds[i] - seconds[i - 1]) for i in range(2, len(records))
              if seconds[i] > seconds[i - 1]]
    return (round(statistics.median(steady)) if steady else None), round(records[-1]["target_tokens_per_s"])


def precision_speed(args: argparse.Namespace, member: Path, out: Path) -> list[dict]:
    results = []
    for name, config in (("default configuration", None), ("recipe member", member)):
        for precision in args.precisions:
            folder = out / f"speed-{'member' if config else 'default'}-{precision}"
            summary = json.loads(cli(*train_argv(args, config, folder, 1, "--precision", precision,
                                                 "--max-minutes", str(args.seconds / 60)), log=out / "log.txt"))
            steady, whole = rates(folder / "metrics.jsonl")
            results.append({"model": name, "precision": precision, "steady_tok_s": steady,
                            "run_tok_s": whole, "seconds": round(summary["seconds"], 1),
                            "best_bleu": round(summary["best_bleu"], 2)})
    return results


def side_by_side(args: argparse.Namespace, members: int, first: int, out: Path) -> dict:
    """The recipe with seeds ``first``... and all its ``members`` at once (``--parallel``), then its dev scores."""
    run_dir = out / f"ensemble-{first}"
    started = time.monotonic()
    cli(*train_argv(args, Path(args.recipe), run_dir, first, "--parallel", str(members)), log=out / "log.txt")
    wall = time.monotonic() - started
    bleus = [round(json.loads((run_dir / f"member-{k + 1}" / "result.json").read_text())["best_bleu"], 2)
             for k in range(members)]
    model = run_dir / "best.pt"
    scores = {}
    for search, extra in (("recipe", []), ("greedy", ["--beam-size", "1"])):
        result = json.loads(cli("evaluate", "--model", str(model), "--data", args.dev, *pairs(args), "--device",
                                args.device, "--json", *extra, log=out / "log.txt"))
        trusted = next(s["bleu"] for s in result["selective"] if s["coverage"] == 0.8)
        scores[search] = {"bleu": round(result["bleu"], 2), "bleu_80": round(trusted, 2), "beam": result["beam_size"]}
    return {"seeds": f"{first}-{first + members - 1}", "wall_s": round(wall, 1), "members_bleu": bleus, **scores}


def decode_speed(args: argparse.Namespace, model: Path, out: Path) -> list[dict]:
    results = []
    for beam in (1, 5):
        for batch in args.batch_sizes:
            output = out / f"translated-{beam}-{batch}.tsv"
            output.unlink(missing_ok=True)
            _, err = cli_stderr("translate", "--model", str(model), "--device", args.device, "--input", args.dev,
                                "--column", args.source_column, "--output", str(output), "--beam-size", str(beam),
                                "--batch-size", str(batch), log=out / "translate.txt")
            rate = RATE.findall(err)
            results.append({"beam": beam, "batch": batch, "rows_per_s": int(rate[-1])})
    return results


def fd001(args: argparse.Namespace, out: Path) -> dict:
    started = time.monotonic()
    stdout, err = cli_stderr("rul", "train", "--data", args.fd001, "--output-dir", str(out / "fd001"), "--config",
                             args.fd001_config, "--seed", "1", "--device", args.device, log=out / "rul.txt")
    members = RUL_MEMBERS.findall(err)
    summary = json.loads(stdout.splitlines()[-1])
    return {"wall_s": round(time.monotonic() - started, 1), "epochs": summary["epochs"],
            "members_rmse": members[-1] if members else f"{summary['best_rmse']:.2f}"}


def main() -> int:
    args = parse_args()
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    recipe = json.loads(Path(args.recipe).read_text(encoding="utf-8"))
    members = recipe.get("train", {}).get("members", 1)  # all of them at once in section 2
    member = out / "member.json"  # the recipe's one run: no budget, since every member here trains alone
    one = {k: v for k, v in recipe.get("train", {}).items() if k not in ("max_minutes", "parallel")}
    member.write_text(json.dumps({**recipe, "train": {**one, "members": 1}}, indent=1) + "\n", encoding="utf-8")
    gpu = (f"{torch.cuda.get_device_name()}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}; "
           if args.device == "cuda" else "")
    machine = f"{gpu}{describe_machine()}, SentencePiece {sentencepiece.__version__}"
    print(f"GPU benchmark, {time.strftime('%Y-%m-%d')}, {machine}")
    results: dict = {"device": args.device, "machine": machine, "precision": precision_speed(args, member, out)}
    table(f"Training, target tokens/s ({args.device}; runs of {args.seconds:g} s)",
          ["model", "precision", "steady tok/s", "run tok/s", "seconds", "best dev BLEU"],
          [[("-" if v is None else v) for v in r.values()] for r in results["precision"]])
    results["ensembles"] = [side_by_side(args, members, first, out) for first in args.ensemble_seeds]
    table(f"The recipe's {members} members side by side, and their ensemble on dev",
          ["seeds", "wall", "members' greedy BLEU", "recipe's search: BLEU (80% most trusted)", "greedy (80%)"],
          [[e["seeds"], f"{e['wall_s']} s", ", ".join(map(str, e["members_bleu"])),
            f"{e['recipe']['bleu']} ({e['recipe']['bleu_80']}), beam {e['recipe']['beam']}",
            f"{e['greedy']['bleu']} ({e['greedy']['bleu_80']})"] for e in results["ensembles"]])
    first = out / f"ensemble-{args.ensemble_seeds[0]}" / "member-1" / "best.pt"
    results["translate"] = decode_speed(args, first, out)
    table("seq2seq translate of the dev split, rows/s (one recipe member)", ["search", *map(str, args.batch_sizes)],
          [[name, *(r["rows_per_s"] for r in results["translate"] if r["beam"] == beam)]
           for beam, name in ((1, "greedy"), (5, "beam 5"))])
    if args.fd001:
        results["fd001"] = fd001(args, out)
        table("The FD001 recipe, seed 1", ["wall", "epochs", "members' validation RMSE"],
              [[f"{results['fd001']['wall_s']} s", results["fd001"]["epochs"], results["fd001"]["members_rmse"]]])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

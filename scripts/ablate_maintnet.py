"""Train recipe variants over several seeds on MaintNet, score them on dev, and print an ablation table.

    python scripts/ablate_maintnet.py --base scripts/configs/maintnet.json \\
        --variant base --variant vocab1000:tokenizer.vocab_size=1000 \\
        --variant "small:model.embed_size=128,model.encoder_hidden=128" --seeds 1 2 3 [--ensemble]

A variant is ``NAME[:SECTION.KEY=VALUE,...]``: the base config with those fields changed (a value is
read as JSON, else kept as a string). Every (variant, seed) run goes through the documented CLI
(``seq2seq train`` then ``seq2seq evaluate --json`` greedily and with ``--beam``), into
OUTPUT_DIR/VARIANT/seedS; a finished run's scores are kept in its ``scores.json`` and read back on
a second call, so an interrupted ablation resumes where it stopped. ``--ensemble`` also decodes all
seeds of a variant together (``seq2seq ensemble``), or with ``--ensemble-size K`` each run of K consecutive
seeds, as the recipe with ``train.members: K`` and ``--seed s`` trains them. ``--beam-patience`` sets the beam
search's stopping rule (docs/recipes.md); scores taken with another search (or before the search was kept
beside them) are taken again, the runs kept.
Selection data only: dev, never the test split.

The table gives, per variant, the median over seeds and the spread (min-max), and the median of the
per-seed differences from the first variant (paired by seed: the seeds share initialisation luck
only where the variants share shapes, so the pairing is a convention, not a guarantee).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from seq2seq.cli import run_script
from seq2seq.config import SearchConfig
from seq2seq.config_file import load_config_file

ROOT = Path(__file__).resolve().parent.parent
MAINTNET = ROOT.parent / "shared" / "data" / "maintnet"


def parse_variant(text: str) -> tuple[str, dict[str, dict[str, object]]]:
    """``NAME[:SECTION.KEY=VALUE,...]`` -> (name, {section: {key: value}})."""
    name, _, changes = text.partition(":")
    overrides: dict[str, dict[str, object]] = {}
    for change in filter(None, changes.split(",")):
        field, eq, raw = change.partition("=")
        section, dot, key = field.partition(".")
        if not (eq and dot and section and key):
            raise SystemExit(f"ablate_maintnet: error: variant {name!r}: {change!r} is not SECTION.KEY=VALUE")
        try:
            value: object = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        overrides.setdefault(section, {})[key] = value
    return name, overrides


def merged(base: dict, overrides: dict[str, dict[str, object]]) -> dict:
    config = {section: dict(fields) for section, fields in base.items()}
    for section, fields in overrides.items():
        config.setdefault(section, {}).update(fields)
    return config


def run(command: list[str], log: Path) -> str:
    """Run a CLI command; its stderr goes to ``log``; a failure stops the ablation with the tail of what the
    command wrote there (the log is appended to, and its earlier lines are other commands')."""
    with log.open("a", encoding="utf-8") as err:
        start = err.tell()
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=err, text=True)
    if done.returncode:
        with log.open("rb") as written:
            written.seek(start)
            tail = written.read().decode("utf-8", errors="replace").splitlines()[-5:]
        raise SystemExit(f"{Path(sys.argv[0]).stem}: error: {' '.join(command)} exited {done.returncode}"
                         + (":\n" + "\n".join(tail) if tail else ", writing nothing to stderr"))
    return done.stdout


def search(args: argparse.Namespace) -> dict[str, float]:
    """The beam search the beam figures are taken with (kept beside them, to tell stale scores)."""
    return {"beam_size": args.beam, "beam_patience": args.beam_patience}


def read_back(scores_file: Path, args: argparse.Namespace) -> dict | None:
    """Scores kept from an earlier call, if they were taken with this search."""
    scores = json.loads(scores_file.read_text()) if scores_file.is_file() else None
    return scores if scores is not None and scores.get("search") == search(args) else None


def evaluate(model: Path, args: argparse.Namespace, beam: int, log: Path) -> float:
    out = run([sys.executable, "-m", "seq2seq", "evaluate", "--model", str(model), "--data", args.dev,
               "--source-column", args.source_column, "--target-column", args.target_column,
               "--beam-size", str(beam), "--beam-patience", str(args.beam_patience), "--json"], log)
    return round(json.loads(out)["bleu"], 2)


def train_and_score(variant: str, config: dict, seed: int, args: argparse.Namespace) -> dict:
    folder = Path(args.output_dir) / variant / f"seed{seed}"
    scores_file = folder / "scores.json"
    kept = read_back(scores_file, args)
    if kept is not None:
        return kept
    folder.mkdir(parents=True, exist_ok=True)
    config_file, trained, log = folder / "config.json", folder / "trained.json", folder / "log.txt"
    if not trained.is_file() or json.loads(trained.read_text())["config"] != config:
        config_file.write_text(json.dumps(config, indent=1) + "\n")
        start = time.monotonic()
        run([sys.executable, "-m", "seq2seq", "train", "--train", args.train, "--dev", args.dev,
             "--source-column", args.source_column, "--target-column", args.target_column,
             "--output-dir", str(folder / "run"), "--config", str(config_file), "--seed", str(seed), "--device", "cpu",
             "--overwrite"], log)
        trained.write_text(json.dumps({"config": config, "minutes": (time.monotonic() - start) / 60}) + "\n")
    minutes = json.loads(trained.read_text())["minutes"]
    scores = {"variant": variant, "seed": seed, "minutes": round(minutes, 2), "search": search(args),
              "greedy": evaluate(folder / "run" / "best.pt", args, 1, log),
              "beam": evaluate(folder / "run" / "best.pt", args, args.beam, log)}
    scores_file.write_text(json.dumps(scores) + "\n")
    print(f"{variant} seed {seed}: {scores}", file=sys.stderr, flush=True)
    return scores


def ensemble_scores(variant: str, seeds: list[int], args: argparse.Namespace) -> dict:
    folder = Path(args.output_dir) / variant
    scores_file = folder / f"ensemble-{'-'.join(map(str, seeds))}.json"
    kept = read_back(scores_file, args)
    if kept is not None:
        return kept
    model = folder / f"ensemble-{'-'.join(map(str, seeds))}.pt"
    log = folder / "ensemble-log.txt"
    run([sys.executable, "-m", "seq2seq", "ensemble", "--inputs",
         *[str(folder / f"seed{s}" / "run" / "best.pt") for s in seeds], "--output", str(model), "--overwrite"], log)
    scores = {"search": search(args), "greedy": evaluate(model, args, 1, log),
              "beam": evaluate(model, args, args.beam, log)}
    model.unlink()
    scores_file.write_text(json.dumps(scores) + "\n")
    return scores


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default=str(ROOT / "scripts" / "configs" / "maintnet.json"))
    p.add_argument("--variant", action="append", required=True, help="NAME[:SECTION.KEY=VALUE,...]")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--beam-patience", type=float, default=1.0, help="beam search's patience (1: the usual rule)")
    p.add_argument("--ensemble", action="store_true", help="also decode each variant's seeds together")
    p.add_argument("--ensemble-size", type=int, metavar="K",
                   help="decode each K consecutive seeds together (median and range); implies --ensemble")
    p.add_argument("--train", default=str(MAINTNET / "train.tsv"))
    p.add_argument("--dev", default=str(MAINTNET / "dev.tsv"))
    p.add_argument("--source-column", default="problem")
    p.add_argument("--target-column", default="action")
    p.add_argument("--output-dir", default=str(ROOT / "runs" / "ablation"))
    args = p.parse_args()
    size = len(args.seeds) if args.ensemble_size is None else args.ensemble_size
    args.ensemble = args.ensemble or args.ensemble_size is not None
    if not 1 <= size <= len(args.seeds):
        p.error(f"--ensemble-size must be in [1, {len(args.seeds)}] (the seeds given), got {size}")
    windows = [args.seeds[i:i + size] for i in range(len(args.seeds) - size + 1)]
    SearchConfig(beam_size=args.beam, beam_patience=args.beam_patience)  # a bad search refused before the training
    base = load_config_file(args.base)
    variants = [parse_variant(v) for v in args.variant]
    results = {name: [train_and_score(name, merged(base, o), s, args) for s in args.seeds] for name, o in variants}
    first = results[variants[0][0]]
    print(f"MaintNet dev BLEU, {date.today()}, base {Path(args.base).name}, seeds {args.seeds}, "
          f"beam {args.beam} with patience {args.beam_patience}, "
          f"median (min-max); delta = median per-seed difference from {variants[0][0]}")
    header = f"| variant | greedy | beam {args.beam} | delta greedy | delta beam {args.beam} | minutes per run |"
    if args.ensemble:
        what = f"ensembles of {size}" if len(windows) > 1 else "ensemble"
        header += f" {what} greedy | {what} beam {args.beam} |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, rows in results.items():
        line = (f"| {name} | {spread([r['greedy'] for r in rows])} | {spread([r['beam'] for r in rows])} | "
                f"{statistics.median([r['greedy'] - f['greedy'] for r, f in zip(rows, first, strict=True)]):+.2f} | "
                f"{statistics.median([r['beam'] - f['beam'] for r, f in zip(rows, first, strict=True)]):+.2f} | "
                f"{statistics.median([r['minutes'] for r in rows]):.1f} |")
        if args.ensemble:
            found = [ensemble_scores(name, seeds, args) for seeds in windows]
            line += f" {spread([e['greedy'] for e in found])} | {spread([e['beam'] for e in found])} |"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "ablate_maintnet"))

"""Tune beam size, length penalty and beam patience of a translator on dev data, and print a table.

    python scripts/tune_search.py --model DIR/best.pt [--dev dev.tsv] [--beams 1 3 5 8] \\
        [--length-penalties 0.6 0.8 1.0 1.2 1.5] [--beam-patiences 1 2]

Decodes the dev split once per setting (greedy once: neither penalty nor patience changes it) and
prints corpus BLEU and chrF with the sentences per second. The best setting is a config's
``search`` section (``scripts/configs/maintnet-best.json``), which training stores in best.pt as
the model's default. Dev data only: never tune on the test split.
"""

from __future__ import annotations

import argparse
import time
from datetime import date
from pathlib import Path

from seq2seq.cli import run_script
from seq2seq.config import SearchConfig
from seq2seq.corpus import read_parallel
from seq2seq.evaluate import score_corpus
from seq2seq.recommender import Recommender

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "data" / "maintnet" / "dev.tsv"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--dev", default=str(DEV))
    p.add_argument("--source-column", default=None)
    p.add_argument("--target-column", default=None)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 3, 5, 8])
    p.add_argument("--length-penalties", type=float, nargs="+", default=[0.6, 0.8, 1.0, 1.2, 1.5])
    p.add_argument("--beam-patiences", type=float, nargs="+", default=[1.0])
    args = p.parse_args()
    settings = [SearchConfig(beam_size=b, length_penalty=lp, beam_patience=patience) for b in args.beams
                for lp in (args.length_penalties if b > 1 else [1.0])
                for patience in (args.beam_patiences if b > 1 else [1.0])]  # checked before anything is read
    dev = read_parallel(args.dev, args.source_column, args.target_column)
    sources, references = [e.source for e in dev.examples], [e.target for e in dev.examples]
    recommender = Recommender.from_checkpoint(args.model)
    print(f"{args.model} on {args.dev} ({len(sources)} pairs), {date.today()}; stored default: "
          f"beam {recommender.search.beam_size}, length penalty {recommender.search.length_penalty}, "
          f"beam patience {recommender.search.beam_patience}")
    print("| beam | length penalty | beam patience | BLEU | chrF | sent/s |")
    print("|---|---|---|---|---|---|")
    best = None
    for config in settings:
        start = time.perf_counter()
        hypotheses = recommender.translate(sources, config, batch_size=64)
        seconds = time.perf_counter() - start
        scores = score_corpus(hypotheses, references)
        lp, patience = ("-", "-") if config.beam_size == 1 else (f"{config.length_penalty:g}",
                                                                 f"{config.beam_patience:g}")
        rate = len(sources) / seconds
        print(f"| {config.beam_size} | {lp} | {patience} | {scores.bleu:.2f} | {scores.chrf:.2f} | {rate:,.0f} |",
              flush=True)
        if best is None or scores.bleu > best[0]:
            best = (scores.bleu, config)
    assert best is not None
    print(f'best: "search": {{"beam_size": {best[1].beam_size}, "length_penalty": {best[1].length_penalty:g}, '
          f'"beam_patience": {best[1].beam_patience:g}}}')
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "tune_search"))

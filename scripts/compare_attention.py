"""Compare trained translators (e.g. one per attention type) on one parallel file, with significance.

Every checkpoint is loaded by ``Recommender.from_checkpoint`` and scored by
``evaluate.evaluate_corpus``, exactly as ``seq2seq evaluate`` does. The first model is the
baseline: each other model gets sacrebleu's paired bootstrap resampling test against it (Koehn 2004,
"Statistical Significance Tests for Machine Translation Evaluation"; 1000 resamples, sacrebleu's
seed 12345 unless SACREBLEU_SEED says otherwise) for BLEU and chrF, and every model gets the
bootstrap mean and 95% confidence interval of both.

    python scripts/compare_attention.py --data FILE [--data-target FILE] [--source-column C]
        [--target-column C] [--beam-size K] [--length-penalty A] [--beam-patience P] [--batch-size N]
        [--device D] [--json] MODEL.pt [MODEL.pt ...]

Every model searches the same way, set by the flags (greedy by default), not by its stored defaults.

Errors (a missing checkpoint or data file, a bad option) are one line with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from sacrebleu.significance import PairedTest, Result

from seq2seq.cli import run_script
from seq2seq.cli.common import whole_number
from seq2seq.cli.translate import MAX_BATCH_SIZE
from seq2seq.config import SearchConfig
from seq2seq.corpus import ParallelCorpus, read_parallel
from seq2seq.errors import Seq2SeqError
from seq2seq.evaluate import Scores, as_reference, evaluate_corpus, metrics
from seq2seq.recommender import Recommender

TESTED = ("bleu", "chrf")  # metrics given the paired test; TER is reported as seq2seq evaluate does
N_SAMPLES = 1000


@dataclass(frozen=True)
class System:
    model: str  # checkpoint path as given
    attention: str
    scores: Scores
    hypotheses: list[str]


def evaluate_models(paths: list[str], corpus: ParallelCorpus, config: SearchConfig, batch_size: int,
                    device: str) -> list[System]:
    systems = []
    for path in paths:
        recommender = Recommender.from_checkpoint(path, device)
        scores, recommendations = evaluate_corpus(recommender, corpus, config, batch_size)
        systems.append(System(path, recommender.model.config.attention, scores, [r.text for r in recommendations]))
    return systems


def paired_bootstrap(systems: list[System], corpus: ParallelCorpus) -> tuple[dict[str, str], dict[str, list[Result]]]:
    """Signatures and per-metric results (one per system, baseline first) of the paired bootstrap test."""
    references = [as_reference(example.target) for example in corpus.examples]
    tested = {name: metric for name, metric in metrics().items() if name in TESTED}
    test = PairedTest([(system.model, system.hypotheses) for system in systems], tested, [references],
                      test_type="bs", n_samples=N_SAMPLES)
    signatures, results = test()
    # sacrebleu keys results by each score's display name (BLEU, chrF2), in the order of ``tested``.
    names = [name for name in results if name != "System"]
    return ({key: str(signature) for key, signature in zip(tested, signatures.values(), strict=True)},
            {key: results[name] for key, name in zip(tested, names, strict=True)})


def report(systems: list[System], corpus: ParallelCorpus, config: SearchConfig, signatures: dict[str, str],
           results: dict[str, list[Result]]) -> dict:
    models = []
    for i, system in enumerate(systems):
        # the same answers as the baseline's: sacrebleu's p is then its floor, 1 / (samples + 1), which reads
        # as a significant difference between two copies of one model
        same = i > 0 and system.hypotheses == systems[0].hypotheses
        entry = {"model": system.model, "attention": system.attention, "ter": system.scores.ter,
                 "same_output_as_baseline": same}
        for key in TESTED:
            result = results[key][i]
            p_value = None if result.p_value is None else 1.0 if same else float(result.p_value)
            entry[key] = {"score": getattr(system.scores, key), "mean": float(result.mean), "ci": float(result.ci),
                          "p_value": p_value}
        models.append(entry)
    return {"data": corpus.path, "n": len(corpus.examples), "beam_size": config.beam_size,
            "length_penalty": config.length_penalty, "beam_patience": config.beam_patience,
            "baseline": systems[0].model, "test": f"paired bootstrap resampling, {N_SAMPLES} samples",
            "signature": signatures, "models": models}


def format_table(summary: dict) -> str:
    header = ("model", "attention", "BLEU (95% CI)", "chrF (95% CI)", "TER", "p BLEU", "p chrF")
    rows = [header]
    for entry in summary["models"]:
        bleu, chrf = entry["bleu"], entry["chrf"]
        rows.append((entry["model"], entry["attention"], f"{bleu['score']:.2f} ± {bleu['ci']:.2f}",
                     f"{chrf['score']:.2f} ± {chrf['ci']:.2f}", f"{entry['ter']:.2f}",
                     *("baseline" if entry[key]["p_value"] is None else "1 (same output)"
                       if entry["same_output_as_baseline"] else f"{entry[key]['p_value']:.4f}" for key in TESTED)))
    widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    search = (f"beam size {summary['beam_size']}" if summary["beam_size"] == 1 else
              f"beam size {summary['beam_size']}, length penalty {summary['length_penalty']:g}, "
              f"beam patience {summary['beam_patience']:g}")
    footer = [f"{summary['data']}: {summary['n']} sentences, {search}; "
              f"p: {summary['test']} against {summary['baseline']}"]
    footer += [f"  {name}: {signature}" for name, signature in summary["signature"].items()]
    return "\n".join(lines + footer)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compare_attention", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", metavar="MODEL.pt", help="checkpoints; the first is the baseline")
    parser.add_argument("--data", required=True, help="parallel file (.tsv/.csv/.jsonl or plain text)")
    parser.add_argument("--data-target", help="plain-text target file aligned with --data")
    parser.add_argument("--source-column")
    parser.add_argument("--target-column")
    parser.add_argument("--beam-size", type=int, default=1, help="1 = greedy (default)")
    parser.add_argument("--length-penalty", type=float, default=1.0, help="GNMT's alpha (default 1.0)")
    parser.add_argument("--beam-patience", type=float, default=1.0,
                        help="a beam ends once beam size x this many answers have finished (default 1.0)")
    parser.add_argument("--batch-size", type=whole_number(1, MAX_BATCH_SIZE), default=64)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = SearchConfig(beam_size=args.beam_size, length_penalty=args.length_penalty,
                              beam_patience=args.beam_patience)
        corpus = read_parallel(args.data, args.source_column, args.target_column, args.data_target)
        if corpus.skipped:
            print(f"warning: {corpus.summary()}", file=sys.stderr)
        systems = evaluate_models(args.models, corpus, config, args.batch_size, args.device)
    except Seq2SeqError as err:
        print(f"compare_attention: error: {err}", file=sys.stderr)
        return 2
    summary = report(systems, corpus, config, *paired_bootstrap(systems, corpus))
    print(json.dumps(summary) if args.json else format_table(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "compare_attention"))

"""Does a translator learn from its technicians' corrections without forgetting the rest?

    python scripts/benchmark_feedback.py --model runs/default/translator.pt \
        --alerts data/test.tsv --dev data/dev.tsv --corrections 50 --work /tmp/feedback-benchmark

The round trip a shop would make, through the same code: the model answers the held-out alerts of
--alerts (split by neither training nor validation); the first --corrections distinct alerts it got
wrong (greedy answer != reference) are posted to a fresh feedback database as 'wrong' with the
reference as what the technician did; ``seq2seq feedback export`` writes them as corrections.tsv;
``seq2seq train --init-from MODEL --train corrections.tsv --dev DEV`` fine-tunes (with replay of the
checkpoint's training pairs). Reported: the share of the corrected alerts whose greedy answer is now
the correction (the target: at least 90%), the dev BLEU before and after (target: moves by at most
1 point; the fine-tuning run also selects its best.pt on DEV, so BLEU is given as well on the pairs of
--alerts whose alerts were not corrected, which no run has seen), the top past case of each corrected
alert, and the fine-tuning time. Figures: docs/feedback.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from seq2seq.cli import main as cli
from seq2seq.cli import run_script
from seq2seq.cli.common import owned_folder, path_flag, whole_number
from seq2seq.config import SearchConfig
from seq2seq.corpus import ParallelCorpus, read_parallel
from seq2seq.errors import DataError
from seq2seq.evaluate import evaluate_corpus
from seq2seq.recommender import Recommender
from seq2seq.serving.feedback import Feedback
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.tokenizer import normalize

ROOT = Path(__file__).resolve().parent.parent
# Written into --work by this script: only a folder holding it is emptied, so a mistyped --work (a run's folder,
# someone's home) is refused rather than deleted.
MARKER = ".benchmark_feedback"


def wrong_answers(recommender: Recommender, path: str, count: int) -> list[tuple[str, str, str]]:
    """(alert, wrong answer, reference) for the first ``count`` distinct alerts answered wrongly."""
    corpus = read_parallel(path)
    answers = recommender.recommend([e.source for e in corpus.examples], SearchConfig(), batch_size=128)
    wrong: dict[str, tuple[str, str, str]] = {}
    for example, answer in zip(corpus.examples, answers, strict=True):
        if normalize(answer.text) != normalize(example.target) and example.source not in wrong:
            wrong[example.source] = (example.source, answer.text, example.target)
    if len(wrong) < count:
        raise DataError(f"{path}: only {len(wrong)} alerts answered wrongly, {count} wanted (--corrections)")
    return list(wrong.values())[:count]


def learned(model: Path, corrections: list[tuple[str, str, str]]) -> tuple[float, float]:
    """Shares of the corrected alerts whose greedy answer is the correction, and whose top past case is it."""
    recommender = Recommender.from_checkpoint(model)
    answers = recommender.recommend([alert for alert, _, _ in corrections], SearchConfig(), similar=1)
    given = sum(normalize(a.text) == normalize(fix) for a, (_, _, fix) in zip(answers, corrections, strict=True))
    shown = sum(bool(a.similar) and normalize(a.similar[0].action) == normalize(fix)
                for a, (_, _, fix) in zip(answers, corrections, strict=True))
    return given / len(corrections), shown / len(corrections)


def dev_bleu(model: Path, dev: str | ParallelCorpus) -> float:
    corpus = read_parallel(dev) if isinstance(dev, str) else dev
    return evaluate_corpus(Recommender.from_checkpoint(model), corpus, SearchConfig())[0].bleu


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=path_flag, default=str(ROOT / "runs" / "default" / "translator.pt"))
    p.add_argument("--alerts", type=path_flag, default=str(ROOT / "data" / "test.tsv"),
                   help="held-out pairs whose wrong answers get corrected")
    p.add_argument("--dev", type=path_flag, default=str(ROOT / "data" / "dev.tsv"))
    p.add_argument("--corrections", type=whole_number(1, 1_000_000), default=50)
    p.add_argument("--work", type=path_flag, default="/tmp/feedback-benchmark",
                   help=f"a folder for the database and the run: a new or empty one, or one this script made "
                   f"(it holds {MARKER}), which is emptied first")
    p.add_argument("train_options", nargs="*", help="after --: more seq2seq train options (e.g. --epochs 3)")
    return p


def fresh_work(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / MARKER).write_text("made by scripts/benchmark_feedback.py, which empties this folder on each run\n")


def cli_ok(argv: list[str]) -> None:
    """``seq2seq ARGV``; its one-line error is already printed when it fails, so only its status is passed on."""
    status = cli(argv)
    if status != 0:
        raise SystemExit(status)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    for flag, path in (("--model", args.model), ("--alerts", args.alerts), ("--dev", args.dev)):
        if not Path(path).is_file():
            p.error(f"{flag} {path}: not found")
    work = Path(args.work)
    owned_folder(p, "--work", work, MARKER)
    corrections = wrong_answers(Recommender.from_checkpoint(args.model), args.alerts, args.corrections)
    fresh_work(work)
    store = FeedbackStore(work / "feedback.sqlite")
    for alert, answer, fix in corrections:
        store.add(Feedback.checked(alert, answer, "wrong", fix, "benchmark"))
    store.close()
    tsv, run = work / "corrections.tsv", work / "fine-tuned"
    cli_ok(["feedback", "export", "--db", str(work / "feedback.sqlite"), "--output", str(tsv)])
    before_given, before_shown = learned(Path(args.model), corrections)
    started = time.perf_counter()
    cli_ok(["train", "--init-from", args.model, "--train", str(tsv), "--dev", args.dev, "--output-dir", str(run),
            "--device", "cpu", *args.train_options])
    seconds = time.perf_counter() - started
    given, shown = learned(run / "best.pt", corrections)
    before, after = dev_bleu(Path(args.model), args.dev), dev_bleu(run / "best.pt", args.dev)
    corrected = {alert for alert, _, _ in corrections}
    alerts = read_parallel(args.alerts)
    others = ParallelCorpus(alerts.path, [e for e in alerts.examples if e.source not in corrected], [])
    others_before, others_after = dev_bleu(Path(args.model), others), dev_bleu(run / "best.pt", others)
    print(json.dumps({"corrections": len(corrections), "train_options": args.train_options,
                      "corrected_answer_before": before_given, "corrected_answer_after": given,
                      "correction_top_case_before": before_shown, "correction_top_case_after": shown,
                      "dev_bleu_before": round(before, 2), "dev_bleu_after": round(after, 2),
                      "dev_bleu_change": round(after - before, 2), "uncorrected_alerts": len(others.examples),
                      "uncorrected_bleu_before": round(others_before, 2),
                      "uncorrected_bleu_after": round(others_after, 2),
                      "uncorrected_bleu_change": round(others_after - others_before, 2),
                      "fine_tuning_seconds": round(seconds, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "benchmark_feedback"))

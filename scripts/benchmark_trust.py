"""How well trust and the case memory work: which similarity, flag rates, selective BLEU, look-up cost.

    python scripts/benchmark_trust.py --translator runs/default/translator.pt \
        --train data/train.tsv --dev data/dev.tsv \
        --in-scope data/trust/in_scope.txt --out-of-scope data/trust/out_of_scope.txt
    python scripts/benchmark_trust.py --translator MAINTNET/best.pt --train ../shared/data/maintnet/train.tsv \
        --dev ../shared/data/maintnet/dev.tsv --source-column problem --target-column action \
        --out-of-scope data/trust/out_of_scope.txt data/trust/out_of_scope_heldout.txt [--test test.tsv]

The case memory and trust model are fitted afresh from --train and --dev (as ``seq2seq train`` does
when it ends), so a checkpoint written before case memories existed can be measured too. Tables:

1. similarity: for character n-gram TF-IDF (what ``seq2seq.memory`` uses) and the translator's own
   encoder (mean of its outputs over the alert's pieces, cosine), the out-of-scope threshold fitted to
   flag FLAG_RATE of dev, the share of each alert list it flags, and the BLEU of the top neighbour's action
   against the dev reference;
2. selective BLEU: BLEU and chrF of the share of answers with the highest trust, beside the same
   selection by the model's per-piece probability alone, on dev (and --test); on dev also out of
   sample (trust fitted on the other folds) with the first three signals, the first five and all, and the
   ceilings: the selection by each answer's sentence chrF or BLEU against its reference;
3. verdicts on each alert list (the out-of-scope lists named by their file after the first);
4. cost per alert: greedy recommendation with and without the case look-up, one alert per call, 64 per
   call and as a file job (medians of --repeats by turns, and the range of the repeats' ratios), and as a
   command line, ``seq2seq translate --input``, over every dev alert (the job's own rows/s, wall time).
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from sacrebleu.metrics import BLEU
from sklearn.model_selection import KFold

from seq2seq.checkpoint import load_model, save_atomic
from seq2seq.cli import run_script
from seq2seq.cli.common import whole_number
from seq2seq.config import SearchConfig
from seq2seq.corpus import read_parallel
from seq2seq.data import source_batch
from seq2seq.evaluate import COVERAGES, as_reference, fit_case_memory, score_corpus, selective_scores, sentence_chrf
from seq2seq.memory import CaseMemory
from seq2seq.recommender import Recommender
from seq2seq.serving.batch import translate_file
from seq2seq.trust import CASE_FEATURES, FEATURES, FIRST_FEATURES, FLAG_RATE, fit_trust, memory_state

FOLDS, SEEDS = 5, 5  # cross-fitting of trust on dev


def log(line: str) -> None:
    """Progress on stderr, beside the tables on stdout: the fitting alone takes minutes on a real corpus."""
    print(f"[benchmark_trust] {line}", file=sys.stderr, flush=True)


def read_alerts(path: str | None) -> list[str]:
    return [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path else []


@torch.inference_mode()
def encoder_vectors(recommender: Recommender, alerts: list[str]) -> np.ndarray:
    """Mean of the encoder's outputs over each alert's pieces, unit length, (B, M); for an ensemble, its
    members' unit means side by side, scaled to unit length (the cosine is then the mean of theirs)."""
    vectors = []
    for start in range(0, len(alerts), 256):
        ids = [recommender.encode(a)[0] or [3] for a in alerts[start:start + 256]]
        src, lengths, mask = source_batch(ids)
        encoded, _ = recommender.model.encode(src, lengths, mask)
        means = [torch.nn.functional.normalize((part.memory * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True),
                                               dim=-1) for part in getattr(encoded, "parts", [encoded])]  # (B, M) each
        vectors.append(torch.nn.functional.normalize(torch.cat(means, dim=-1), dim=-1).numpy())
    return np.concatenate(vectors)


def similarity_table(recommender, memory, dev, lists) -> None:
    dev_alerts = [e.source for e in dev.examples]
    train_vectors = encoder_vectors(recommender, memory.alerts)

    def tfidf(alerts):
        found = memory.nearest(alerts, 1)
        return np.array([f[0].similarity for f in found]), [memory.alerts.index(f[0].alert) for f in found]

    def encoder(alerts):
        sims = encoder_vectors(recommender, alerts) @ train_vectors.T  # (B, N)
        best = sims.argmax(1)
        return np.clip(sims.max(1), 0.0, 1.0), best.tolist()

    print(f"\n## 1. Similarity (threshold flags {FLAG_RATE:.0%} of dev; {len(memory)} past cases)\n")
    names = " | ".join(f"{name} flagged" for name in lists)
    print(f"| similarity | threshold | dev flagged | {names} | top-neighbour BLEU on dev |")
    print("|---|---|---|" + "---|" * len(lists) + "---|")
    for name, measure in (("char n-gram TF-IDF", tfidf), ("encoder mean, cosine", encoder)):
        dev_sims, nearest = measure(dev_alerts)
        threshold = float(np.quantile(dev_sims, FLAG_RATE, method="lower"))
        rates = [float(np.mean(measure(alerts)[0] < threshold)) for alerts in lists.values()]
        bleu = score_corpus([memory.actions[j] for j in nearest], [e.target for e in dev.examples]).bleu
        cells = " | ".join(f"{rate:.0%}" for rate in rates)
        print(f"| {name} | {threshold:.3f} | {np.mean(dev_sims < threshold):.1%} | {cells} | {bleu:.2f} |")


def per_piece_probability(recommendation) -> float:
    return recommendation.candidates[0].confidence


def cross_fitted(judged: Recommender, answers: list, corpus, signals: tuple[str, ...], seed: int) -> list:
    """``answers`` with trust from models fitted on the other folds of ``corpus`` (out of sample), 0 where that
    model calls the alert out of scope, as a checkpoint's trust is (``TrustModel.judged``)."""
    answered = [i for i, r in enumerate(answers) if r.candidates]
    _, features = judged.signals([answers[i] for i in answered])
    chrf = np.array(sentence_chrf([answers[i].text for i in answered], [corpus.examples[i].target for i in answered]))
    known = np.array(judged.memory.known_words([answers[i].alert for i in answered]))
    nearest = features[:, FEATURES.index("nearest_similarity")]
    trust = np.zeros(len(answered))
    for fit_on, scored in KFold(FOLDS, shuffle=True, random_state=seed).split(features):
        model = fit_trust(features[fit_on], chrf[fit_on].tolist(), known_words=known[fit_on].tolist(), signals=signals)
        trust[scored] = [model.judged(t, s, w)[0] for t, s, w in
                         zip(model.trust(features[scored]).tolist(), nearest[scored], known[scored], strict=True)]
    by_index = dict(zip(answered, trust.tolist(), strict=True))
    return [replace(r, trust=by_index[i]) if i in by_index else r for i, r in enumerate(answers)]


def selective_table(judged: Recommender, splits: dict) -> None:
    print("\n## 2. Selective BLEU / chrF: the answers with the highest trust (beside per-piece probability)\n")
    print("| split | ordering | " + " | ".join(f"{c:.0%}" for c in COVERAGES) + " |")
    print("|---|---|" + "---|" * len(COVERAGES))
    for name, corpus in splits.items():
        answers = judged.recommend([e.source for e in corpus.examples], SearchConfig(), batch_size=128)
        by_probability = [replace(r, trust=per_piece_probability(r)) if r.candidates else r for r in answers]
        for label, ordered in (("trust", answers), ("per-piece probability", by_probability)):
            rows = selective_scores(ordered, corpus)
            print(f"| {name} | {label} | " + " | ".join(f"{r['bleu']:.2f} / {r['chrf']:.1f}" for r in rows) + " |")
        if name != "dev":
            continue
        # Out of sample: trust fitted on the other folds of dev, for every signal set, several fold seeds.
        for label, signals in (("first 3 signals", FIRST_FEATURES), ("first 5 signals", CASE_FEATURES),
                               ("all signals", FEATURES)):
            runs = [selective_scores(cross_fitted(judged, answers, corpus, signals, seed), corpus)
                    for seed in range(SEEDS)]
            cells = [statistics.median(run[k]["bleu"] for run in runs) for k in range(len(COVERAGES))]
            at_80 = [run[COVERAGES.index(0.8)]["bleu"] for run in runs]
            print(f"| dev, cross-fitted ({FOLDS} folds, median of {SEEDS} seeds) | trust, {label} | "
                  + " | ".join(f"{c:.2f}" for c in cells) + f" (80%: {min(at_80):.2f} to {max(at_80):.2f}) |")
        # Ceilings: the selection made by someone who knows each answer's sentence score against the reference.
        texts, targets = [r.text for r in answers], [e.target for e in corpus.examples]
        sentence_bleu = BLEU(effective_order=True)
        for label, score in (("oracle: sentence chrF", sentence_chrf(texts, targets)),
                             ("oracle: sentence BLEU", [sentence_bleu.sentence_score(h, [as_reference(r)]).score
                                                        for h, r in zip(texts, targets, strict=True)])):
            rows = selective_scores([replace(r, trust=s) for r, s in zip(answers, score, strict=True)], corpus)
            print(f"| {name} | {label} | " + " | ".join(f"{r['bleu']:.2f} / {r['chrf']:.1f}" for r in rows) + " |")


def verdict_table(judged: Recommender, lists: dict, dev) -> None:
    print("\n## 3. Verdicts\n")
    print("| alerts | n | confident | uncertain | out-of-scope | median trust |")
    print("|---|---|---|---|---|---|")
    for name, alerts in {"dev": [e.source for e in dev.examples], **lists}.items():
        answers = [r for r in judged.recommend(alerts) if r.verdict]
        counts = [sum(r.verdict == v for r in answers) / len(answers) for v in ("confident", "uncertain",
                                                                                   "out-of-scope")]
        median = statistics.median(r.trust for r in answers)
        print(f"| {name} | {len(answers)} | " + " | ".join(f"{c:.0%}" for c in counts) + f" | {median:.3f} |")


def cost_table(plain: Recommender, judged: Recommender, alerts: list[str], repeats: int) -> None:
    """CPU time per alert without and with the look-up, by turns: calls of one alert (the UI), calls of 64, and a
    file job (``translate_file`` over the alerts as a .txt, output written) whose translator loads afresh before
    each repeat, so that it starts with cold caches as a ``seq2seq translate --input`` run does."""
    print(f"\n## 4. CPU time per alert, greedy, one thread ({repeats} repeats over {len(alerts)} alerts, by turns)\n")
    print("| calls | without look-up (ms) | with look-up (ms) | ratio: median of the repeats' (range) |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        log = alert_log(Path(folder), alerts)

        def seconds(recommender: Recommender, batch: int | None) -> float:
            """CPU time (other jobs on the machine do not count) of the alerts in calls of ``batch``, or as a file."""
            if batch is None:
                recommender = loaded_again(recommender)
                gc.collect()  # the load's garbage: else the memory's build leaves the job a full collection to pay
                started = time.process_time()
                translate_file(recommender, log, Path(folder) / "out.jsonl")
            else:
                started = time.process_time()
                for start in range(0, len(alerts), batch):
                    recommender.recommend(alerts[start:start + batch])
            spent = time.process_time() - started
            remove_outputs(Path(folder))
            return spent

        for label, batch in (("one alert per call", 1), ("64 alerts per call", 64), ("a file job", None)):
            runs: dict[str, list[float]] = {"plain": [], "judged": []}
            for _ in range(repeats):  # by turns, so that a noisy moment hits both
                for name, recommender in (("plain", plain), ("judged", judged)):
                    runs[name].append(1000 * seconds(recommender, batch) / len(alerts))
            print_cost(label, runs)


def print_cost(label: str, runs: dict[str, list[float]]) -> None:
    ratios = [j / p for p, j in zip(runs["plain"], runs["judged"], strict=True)]
    print(f"| {label} | {statistics.median(runs['plain']):.3f} | {statistics.median(runs['judged']):.3f} | "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


def alert_log(folder: Path, alerts: list[str]) -> Path:
    """The alerts as a .txt log in ``folder``, one per line."""
    log = folder / "alerts.txt"
    log.write_text("".join(f"{' '.join(alert.split())}\n" for alert in alerts), encoding="utf-8")
    return log


def remove_outputs(folder: Path) -> None:
    """A file job's output in ``folder`` and its job record, so that the next repeat starts a new job."""
    for written in folder.glob("out.jsonl*"):
        written.unlink()


def command_line_cost(payload: dict, judged: Recommender, alerts: list[str], repeats: int) -> None:
    """Wall time per alert of ``seq2seq translate --input`` (its own rows/s, start-up and load left out) with the
    translator's checkpoint ``payload`` saved without a memory and with the one fitted here, by turns."""
    with tempfile.TemporaryDirectory() as folder:
        log, out = alert_log(Path(folder), alerts), Path(folder) / "out.jsonl"
        models = {"plain": Path(folder) / "plain.pt", "judged": Path(folder) / "judged.pt"}
        save_atomic({key: value for key, value in payload.items() if key != "memory"}, models["plain"])
        save_atomic({**payload, "memory": memory_state(judged.memory, judged.trust_model)}, models["judged"])
        runs: dict[str, list[float]] = {"plain": [], "judged": []}
        for _ in range(repeats):
            for name, model in models.items():
                done = subprocess.run([sys.executable, "-m", "seq2seq", "translate", "--model", str(model), "--input",
                                       str(log), "--output", str(out), "--beam-size", "1"],
                                      capture_output=True, text=True, check=True)
                runs[name].append(1000 / float(re.findall(r"\(([\d.]+) rows/s\)", done.stderr)[-1]))
                remove_outputs(Path(folder))
    print_cost(f"a command line, {len(alerts)} dev alerts, its workers (wall time)", runs)


def loaded_again(recommender: Recommender) -> Recommender:
    """The same translator with its case memory built again from its state, as a checkpoint's load builds it."""
    memory = recommender.memory and CaseMemory.from_state_dict(recommender.memory.state_dict())
    return recommender.with_memory(memory, recommender.trust_model)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--translator", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--dev", required=True)
    p.add_argument("--test", help="also score selective BLEU here (acceptance only: development never sees it)")
    p.add_argument("--source-column")
    p.add_argument("--target-column")
    p.add_argument("--in-scope", help="alerts about the catalog's equipment, one per line")
    p.add_argument("--out-of-scope", nargs="+", default=[], help="alerts the translator should refuse, one per line")
    p.add_argument("--repeats", type=whole_number(1, 1000), default=5)
    args = p.parse_args()
    # Every input read before the minutes of fitting, so that a mistyped path fails at once.
    named = [("in-scope", args.in_scope), *((f"out-of-scope{f' ({Path(path).stem})' if i else ''}", path)
                                            for i, path in enumerate(args.out_of_scope))]
    lists = {name: read_alerts(path) for name, path in named if path}
    torch.set_num_threads(1)  # like the UI's decoding worker; timings comparable run to run
    read = lambda path: read_parallel(path, args.source_column, args.target_column)  # noqa: E731
    train, dev = read(args.train), read(args.dev)
    splits = {"dev": dev, **({"test": read(args.test)} if args.test else {})}
    model, tokenizer, payload = load_model(args.translator)
    plain = Recommender(model, tokenizer)
    log("fitting the case memory and the trust model")
    memory, trust = fit_case_memory(plain, train, dev)
    judged = plain.with_memory(memory, trust)  # the same decoding tables: only the look-up differs
    print(f"# Trust benchmark: {args.translator} ({model.config.attention}), train {args.train}, dev {args.dev}")
    print(f"trust model: weights {dict(zip(trust.features, trust.weights, strict=True))}, "
          f"bias {trust.bias:.3f}, out of scope below {trust.scope_threshold:.3f} "
          f"({trust.unfamiliar_threshold:.3f} for alerts of mostly new words)")
    log("table 1: similarity")
    similarity_table(plain, memory, dev, lists)
    log(f"table 2: selective BLEU, with trust cross-fitted ({FOLDS} folds x {SEEDS} seeds x 3 signal sets)")
    selective_table(judged, splits)
    log("table 3: verdicts")
    verdict_table(judged, lists, dev)
    log(f"table 4: cost per alert, {args.repeats} repeats of each way")
    cost_table(plain, judged, [e.source for e in dev.examples][:200], args.repeats)
    command_line_cost(payload, judged, [e.source for e in dev.examples if e.source.strip()], args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "benchmark_trust"))

"""Corpus scores through sacrebleu: BLEU, chrF and TER, each with its signature; scores of the answers
the model is surest of (selective evaluation); and the fitting of trust on a dev split."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER

from seq2seq.config import SearchConfig
from seq2seq.corpus import ParallelCorpus
from seq2seq.errors import DataError, counted
from seq2seq.memory import CaseMemory
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.tokenizer import normalize
from seq2seq.trust import FLAG_RATE, TrustModel, fit_trust

COVERAGES = (1.0, 0.9, 0.8, 0.6, 0.4)


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float
    ter: float
    signature: dict[str, str]  # metric name -> sacrebleu signature
    n: int  # sentences scored

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return f"BLEU {self.bleu:.2f}  chrF {self.chrf:.2f}  TER {self.ter:.2f}  ({self.n} sentences)"


def metrics() -> dict[str, BLEU | CHRF | TER]:
    """sacrebleu's defaults: BLEU 13a case-sensitive, chrF (n=6, beta=2), TER."""
    return {"bleu": BLEU(), "chrf": CHRF(), "ter": TER()}


def as_reference(text: str) -> str:
    """A reference as every score reads it: normalised like the model's input (``tokenizer.normalize``), so that a
    history's stray spaces or NFKC variants cost no points the model could not have earned."""
    return normalize(text)


def score_corpus(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus-level scores of hypotheses against one reference each (normalised like the model's input). Lists of
    different lengths, or none, are a ValueError: sacrebleu scored two hypotheses against one reference as BLEU 0
    and chrF 100 without a word, and failed on empty lists with an IndexError."""
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(f"scoring needs one reference per hypothesis, and at least one: got {len(hypotheses)} "
                         f"hypotheses and {len(references)} references")
    references = [as_reference(ref) for ref in references]
    scores, signatures = {}, {}
    for name, metric in metrics().items():
        scores[name] = metric.corpus_score(hypotheses, [references]).score
        signatures[name] = str(metric.get_signature())
    return Scores(scores["bleu"], scores["chrf"], scores["ter"], signatures, len(hypotheses))


def evaluate_corpus(recommender: Recommender, corpus: ParallelCorpus, config: SearchConfig | None = None,
                    batch_size: int = 64) -> tuple[Scores, list[Recommendation]]:
    """Translate every source of ``corpus`` and score against its targets; returns the recommendations too."""
    recommendations = recommender.recommend([example.source for example in corpus.examples], config, batch_size)
    return score_recommendations(recommendations, corpus), recommendations


def score_recommendations(recommendations: list[Recommendation], corpus: ParallelCorpus) -> Scores:
    """Scores of one recommendation per example of ``corpus``, in its order, against its targets."""
    _one_each(recommendations, corpus)
    return score_corpus([r.text for r in recommendations], [example.target for example in corpus.examples])


def selective_scores(recommendations: list[Recommendation], corpus: ParallelCorpus,
                     coverages: tuple[float, ...] = COVERAGES) -> list[dict[str, float]]:
    """BLEU and chrF of the share ``coverage`` of sentences with the highest trust, for each coverage.

    Ties in trust keep corpus order (a stable sort), so the selection is reproducible.
    """
    _one_each(recommendations, corpus)
    if outside := [c for c in coverages if not 0 < c <= 1]:
        raise ValueError(f"coverages are shares of the sentences, in (0, 1]; got {outside[0]!r}")
    trust = np.array([r.trust if r.trust is not None else -1.0 for r in recommendations])
    order = np.argsort(-trust, kind="stable")
    rows = []
    for coverage in coverages:
        kept = sorted(order[:max(1, round(coverage * len(order)))].tolist())
        scores = score_corpus([recommendations[i].text for i in kept], [corpus.examples[i].target for i in kept])
        rows.append({"coverage": coverage, "bleu": scores.bleu, "chrf": scores.chrf})
    return rows


def _one_each(recommendations: list[Recommendation], corpus: ParallelCorpus) -> None:
    """ValueError unless there is one recommendation per example of ``corpus`` (else the first ones would be scored
    against the first references, without a word)."""
    if len(recommendations) != len(corpus.examples):
        raise ValueError(f"{corpus.path}: {len(corpus.examples)} examples, but {len(recommendations)} "
                         "recommendations to score against them")


def fit_case_memory(recommender: Recommender, train: ParallelCorpus, dev: ParallelCorpus,
                    flag_rate: float = FLAG_RATE) -> tuple[CaseMemory, TrustModel]:
    """The case memory of ``train`` and the trust model fitted on greedy answers to ``dev`` (seq2seq.trust)."""
    memory = CaseMemory([e.source for e in train.examples], [e.target for e in train.examples])
    return memory, fit_trust_on(recommender, memory, dev, flag_rate)


FEW_DEV = 100  # dev pairs below which a fitted threshold rests on one alert or none (it flags FLAG_RATE of them)


def few_dev_warning(dev: ParallelCorpus) -> str | None:
    """A warning when trust and the out-of-scope threshold were fitted on fewer than FEW_DEV dev pairs: fitted on
    one MaintNet pair, an ensemble called an in-domain alert out of scope and a wrong answer confident."""
    n = len(dev.examples)
    if n >= FEW_DEV:
        return None
    return (f"warning: {dev.path}: trust and the out-of-scope threshold were fitted on {counted(n, 'dev pair')}, "
            f"too few to rely on (the threshold flags {FLAG_RATE:.0%} of them); a few hundred make them stable")


def fit_trust_on(recommender: Recommender, memory: CaseMemory, dev: ParallelCorpus,
                 flag_rate: float = FLAG_RATE) -> TrustModel:
    """The trust model of ``recommender``'s model with ``memory``, fitted on its greedy answers to ``dev``."""
    judged = recommender.with_memory(memory)
    examples = [e for e in dev.examples if e.source.strip()]
    answers = judged.recommend([e.source for e in examples], SearchConfig(), batch_size=128)
    kept = [(r, e) for r, e in zip(answers, examples, strict=True) if r.candidates]
    if not kept:  # every alert empty once read: in a script, or of characters, that no training alert held
        raise DataError(f"{dev.path}: no dev alert has a piece the model's vocabulary knows, so there is no answer "
                        "to fit trust on; the dev pairs must be like the training pairs")
    _, signals = judged.signals([r for r, _ in kept])
    return fit_trust(signals, sentence_chrf([r.text for r, _ in kept], [e.target for _, e in kept]), flag_rate,
                     known_words=memory.known_words([r.alert for r, _ in kept]))


def sentence_chrf(hypotheses: list[str], references: list[str]) -> list[float]:
    """Sentence-level chrF of each hypothesis against its reference (normalised like the model's input)."""
    chrf = CHRF()
    return [chrf.sentence_score(h, [as_reference(r)]).score for h, r in zip(hypotheses, references, strict=True)]

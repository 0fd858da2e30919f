"""Corpus scores through sacrebleu: BLEU, chrF and TER, each with its signature."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF, TER

from seq2seq.config import SearchConfig
from seq2seq.corpus import ParallelCorpus
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.tokenizer import normalize


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


def score_corpus(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus-level scores of hypotheses against one reference each (normalised like the model's input)."""
    references = [normalize(ref) for ref in references]
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
    return score_corpus([r.text for r in recommendations], [example.target for example in corpus.examples])

"""Corpus scores through sacrebleu: perfect on the references themselves, one normalisation, signatures."""

from __future__ import annotations

import pytest
import sacrebleu
from support import TINY_PAIRS

from seq2seq.config import ModelConfig, SearchConfig
from seq2seq.corpus import Example, ParallelCorpus
from seq2seq.evaluate import evaluate_corpus, score_corpus, score_recommendations, selective_scores
from seq2seq.model import build_model
from seq2seq.recommender import Recommender
from seq2seq.tokenizer import normalize

REFERENCES = [target for _, target in TINY_PAIRS]


def test_references_against_themselves_score_bleu_100_chrf_100_ter_0():
    scores = score_corpus(REFERENCES, REFERENCES)
    assert scores.bleu == pytest.approx(100.0)
    assert scores.chrf == pytest.approx(100.0)
    assert scores.ter == pytest.approx(0.0)
    assert scores.n == len(REFERENCES)


def test_each_signature_names_sacrebleus_version():
    scores = score_corpus(REFERENCES, REFERENCES)
    assert set(scores.signature) == {"bleu", "chrf", "ter"}
    assert all(f"version:{sacrebleu.__version__}" in signature for signature in scores.signature.values())
    assert set(scores.to_json()) == {"bleu", "chrf", "ter", "signature", "n"}


def messy(text: str) -> str:
    """The same reference after ``normalize``: extra, odd and surrounding whitespace, a ligature."""
    return "  " + text.replace(" ", " \t\u00a0 ").replace("fi", "\ufb01") + " \r\n"


def test_extra_whitespace_in_references_does_not_change_any_score():
    hypotheses = [" ".join(reference.split()[:2]) for reference in REFERENCES]  # imperfect on purpose
    clean = score_corpus(hypotheses, REFERENCES)
    untidy = score_corpus(hypotheses, [messy(reference) for reference in REFERENCES])
    assert (untidy.bleu, untidy.chrf, untidy.ter) == (clean.bleu, clean.chrf, clean.ter)
    assert clean.bleu < 100.0


def test_hypotheses_equal_to_the_normalised_references_score_perfectly():
    references = [messy(reference) for reference in REFERENCES]
    scores = score_corpus([normalize(reference) for reference in references], references)
    assert (scores.bleu, scores.chrf, scores.ter) == (pytest.approx(100.0), pytest.approx(100.0), pytest.approx(0.0))


def test_evaluate_corpus_scores_the_recommenders_translations(tokenizer):
    config = ModelConfig(embed_size=8, encoder_hidden=8, decoder_hidden=16, attention_hidden=8,
                         src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size)
    recommender = Recommender(build_model(config), tokenizer)
    corpus = ParallelCorpus("tiny", [Example(s, t, i) for i, (s, t) in enumerate(TINY_PAIRS, 1)], [])
    scores, recommendations = evaluate_corpus(recommender, corpus, SearchConfig(beam_size=2), batch_size=7)
    hypotheses = recommender.translate([s for s, _ in TINY_PAIRS], SearchConfig(beam_size=2))
    assert [r.text for r in recommendations] == hypotheses
    assert scores == score_corpus(hypotheses, REFERENCES)


@pytest.mark.parametrize(("hypotheses", "references"), [(["a b"], ["a b", "c d"]), (["a b", "c d"], ["a b"]), ([], [])])
def test_hypotheses_and_references_that_do_not_pair_up_are_refused_not_scored(hypotheses, references):
    """sacrebleu scored ["a b"] against two references as BLEU 0 and chrF 100, and failed on none with IndexError."""
    with pytest.raises(ValueError, match="scoring needs one reference per hypothesis, and at least one"):
        score_corpus(hypotheses, references)


def test_recommendations_are_scored_only_one_per_example_and_at_coverages_in_0_1(tokenizer):
    config = ModelConfig(embed_size=8, encoder_hidden=8, decoder_hidden=16, attention_hidden=8,
                         src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size)
    recommender = Recommender(build_model(config), tokenizer)
    corpus = ParallelCorpus("dev.tsv", [Example(s, t, i) for i, (s, t) in enumerate(TINY_PAIRS[:4], 1)], [])
    answers = recommender.recommend([e.source for e in corpus.examples])
    with pytest.raises(ValueError, match=r"dev\.tsv: 4 examples, but 3 recommendations"):
        score_recommendations(answers[:3], corpus)
    with pytest.raises(ValueError, match=r"dev\.tsv: 4 examples, but 3 recommendations"):
        selective_scores(answers[:3], corpus)
    for coverage in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=f"coverages are shares of the sentences, in \\(0, 1\\]; got {coverage}"):
            selective_scores(answers, corpus, (1.0, coverage))
    assert [row["coverage"] for row in selective_scores(answers, corpus, (1.0, 0.5))] == [1.0, 0.5]

"""Greedy and beam search: equivalences, n-best, attention tracked through back-pointers."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from support import sample_batch, tiny_config

from seq2seq.attention import ATTENTION_NAMES
from seq2seq.checkpoint import search_defaults
from seq2seq.config import SearchConfig, TokenizerConfig
from seq2seq.corpus import EMBEDDED_DATA, read_parallel
from seq2seq.data import source_batch
from seq2seq.errors import ConfigError
from seq2seq.model import build_model
from seq2seq.search import finished_wanted, max_lengths, search
from seq2seq.tokenizer import EOS_ID, Tokenizer


def untrained(name: str, seed: int = 0):
    torch.manual_seed(seed)
    return build_model(tiny_config(name)).eval()


def eos_prone(name: str, seed: int = 0):
    """An untrained model that ends answers at some steps: its hypotheses finish at many lengths, where an
    untrained one's all run to the length limit together (and patience would change nothing)."""
    model = untrained(name, seed)
    with torch.no_grad():
        model.decoder.output.weight[EOS_ID] *= 3
    return model


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_beam_size_one_equals_greedy(name):
    model = untrained(name)
    batch = sample_batch((5, 3, 1, 4))
    greedy = search(model, *batch, SearchConfig(beam_size=1))
    beam = search(model, *batch, SearchConfig(beam_size=1, n_best=1, length_penalty=0.0))
    for g, b in zip(greedy, beam, strict=True):
        assert g[0].tokens == b[0].tokens
        torch.testing.assert_close(g[0].attention, b[0].attention)


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_nbest_top1_equals_the_plain_beam_output_attention_included(name):
    model = untrained(name, seed=3)
    batch = sample_batch((5, 3, 1, 4), seed=1)
    plain = search(model, *batch, SearchConfig(beam_size=4, n_best=1))
    nbest = search(model, *batch, SearchConfig(beam_size=4, n_best=4))
    for p, n in zip(plain, nbest, strict=True):
        assert len(n) == 4
        assert n[0].tokens == p[0].tokens and n[0].score == p[0].score
        torch.testing.assert_close(n[0].attention, p[0].attention)
        assert [h.score for h in n] == sorted((h.score for h in n), reverse=True)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_every_hypothesis_owns_an_attention_matrix_of_its_own_shape(beam_size):
    model = untrained("bahdanau", seed=5)
    src, lengths, mask = sample_batch((5, 3, 1), seed=2)
    results = search(model, src, lengths, mask, SearchConfig(beam_size=beam_size, n_best=beam_size))
    for hyps, length in zip(results, lengths.tolist(), strict=True):
        for hyp in hyps:
            rows = hyp.attention.size(0)
            assert rows in (len(hyp.tokens), len(hyp.tokens) + 1)  # + the EOS row when it ended
            assert hyp.attention.size(1) == length
            torch.testing.assert_close(hyp.attention.sum(-1), torch.ones(rows))


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_beam_attention_rows_are_the_weights_of_the_decoded_prefix(name):
    """Re-running the decoder teacher-forced on a beam hypothesis reproduces its attention matrix."""
    model = untrained(name, seed=7)
    src, lengths, mask = sample_batch((5, 4), seed=4)
    results = search(model, src, lengths, mask, SearchConfig(beam_size=3, n_best=3))
    for b, hyps in enumerate(results):
        for hyp in hyps:
            tgt_in = torch.tensor([[2, *hyp.tokens]])[:, : hyp.attention.size(0)]
            _, weights = model(src[b: b + 1, : lengths[b]], lengths[b: b + 1], mask[b: b + 1, : lengths[b]], tgt_in)
            torch.testing.assert_close(weights[0], hyp.attention, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("model, config", [
    (untrained("luong-concat", seed=2), SearchConfig(beam_size=3, n_best=2)),
    (eos_prone("bahdanau", seed=4), SearchConfig(beam_size=3, n_best=3, length_penalty=5.0, beam_patience=2.0)),
], ids=["plain", "patient"])
def test_batched_search_equals_one_sentence_at_a_time(model, config):
    ids = [[5, 6, 7, 8, 3], [9, 3], [4, 4, 10, 3]]
    together = search(model, *source_batch(ids), config)
    for sentence, hyps in zip(ids, together, strict=True):
        alone = search(model, *source_batch([sentence]), config)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in hyps]


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_more_patience_finds_at_least_as_good_hypotheses_at_every_rank(name):
    """Patience only lets a beam run on after its K-th hypothesis finished: what patience 1 finished is among
    what it finishes, so the k-th best score can only rise, and patience 1 is the plain search, the one a
    checkpoint stored before patience existed still gets. (Since the search also runs on while an alive
    hypothesis could beat the K-th finished one, patience often finds nothing more: MaintNet's recipes score
    the same with patience 1 as with 1.6, docs/recipes.md.)"""
    model = eos_prone(name, seed=11)
    batch = sample_batch((6, 5, 2, 7, 3), seed=5)
    config = search_defaults({"search": {"beam_size": 3, "n_best": 3, "length_penalty": 5.0}}, "old.pt")
    assert config.beam_patience == 1.0
    plain = search(model, *batch, config)
    patient = search(model, *batch, replace(config, beam_patience=3.0))
    for p, q in zip(plain, patient, strict=True):
        assert len(q) == len(p) == 3
        assert all(b.score >= a.score - 1e-6 for a, b in zip(p, q, strict=True))


class Rows:
    """A stand-in for an encoder output or decoder state: a tensor whose rows follow the beams."""

    def __init__(self, rows: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        self.rows, self.mask = rows, mask

    def select(self, index: torch.Tensor) -> Rows:
        return Rows(self.rows[index], None if self.mask is None else self.mask[index])


class Scripted:
    """A decoder whose next-piece log-probabilities depend only on the step and the last piece (``script``):
    a beam's fortunes, written out."""

    def __init__(self, script: dict[tuple[int, int], dict[int, float]], vocab: int = 10) -> None:
        self.script, self.vocab = script, vocab

    def encode(self, src, src_lengths, src_mask):
        return Rows(torch.zeros(src.size(0), 1), src_mask), Rows(torch.zeros(src.size(0), dtype=torch.long))

    def step(self, prev, state, encoded):
        logits = torch.full((prev.size(0), self.vocab), -30.0)
        for row, (token, t) in enumerate(zip(prev.tolist(), state.rows.tolist(), strict=True)):
            for target, log_prob in self.script.get((t, token), {}).items():
                logits[row, target] = log_prob
        return logits, Rows(state.rows + 1), torch.ones(prev.size(0), encoded.mask.size(1))


def test_a_beam_does_not_end_on_early_short_answers_while_a_likelier_one_is_alive():
    """With beam 2 two unlikely answers finish at steps 2 and 3 while the likeliest is still being decoded; ending
    at the K-th finished returned one of them. The search goes on while an alive hypothesis, ending next, would
    beat the K-th best finished one."""
    A, B, C, E, D = 4, 5, 6, 7, 8
    model = Scripted({(0, 2): {A: -0.1, B: -2.5},  # from BOS
                      (1, A): {C: -0.05}, (1, B): {EOS_ID: -0.1, E: -1.0},
                      (2, C): {D: -0.05}, (2, E): {EOS_ID: -0.1},
                      (3, D): {EOS_ID: -0.05}})
    src, lengths, mask = source_batch([[9, EOS_ID]])
    [hypotheses] = search(model, src, lengths, mask, SearchConfig(beam_size=2, n_best=2))
    assert [h.tokens for h in hypotheses] == [[A, C, D], [B]]  # ending at the K-th finished: [B], then [B, E]


def test_patience_counts_finished_hypotheses_as_the_decimal_product_rounded_up():
    for beam_size in range(1, 51):
        for tenths in range(10, 101):
            wanted = finished_wanted(SearchConfig(beam_size=beam_size, beam_patience=tenths / 10))
            assert wanted == -(-beam_size * tenths // 10)  # integer ceil(beam_size x tenths / 10)


def test_output_length_is_bounded_by_the_ratio_of_source_length():
    model = untrained("luong-general", seed=1)
    src, lengths, mask = sample_batch((2, 4), seed=3)
    config = SearchConfig(beam_size=2, n_best=2, max_length_ratio=1.0, max_length_extra=1)
    for hyps, length in zip(search(model, src, lengths, mask, config), lengths.tolist(), strict=True):
        assert all(h.attention.size(0) <= length + 1 for h in hyps)


def test_nbest_larger_than_beam_is_an_error():
    with pytest.raises(ConfigError, match="n_best"):
        SearchConfig(beam_size=2, n_best=3)


def test_the_default_length_cap_admits_every_pair_of_the_embedded_corpus():
    """A short alert with a long action ("MILD P30 PRESS RISE": 7 pieces -> 25) was cut at 2 x 7 + 10 pieces
    by the old default; the cap must leave room for every answer the training data holds."""
    train = read_parallel(EMBEDDED_DATA / "train.tsv")
    tokenizer = Tokenizer.train([e.source for e in train.examples], [e.target for e in train.examples],
                                TokenizerConfig())
    sources = torch.tensor([len(tokenizer.encode_source(e.source)) for e in train.examples])
    targets = torch.tensor([len(tokenizer.encode_target(e.target)) + 1 for e in train.examples])  # + EOS
    assert bool((targets <= max_lengths(sources, SearchConfig())).all())

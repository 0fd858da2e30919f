"""Recommender: input order, batching, empty alerts and the shape of every candidate's attention."""

from __future__ import annotations

import time

import pytest
import torch
from support import MAX_SOURCE_LENGTH, trained

import seq2seq.recommender as recommender_module
from seq2seq.config import SearchConfig
from seq2seq.errors import ConfigError
from seq2seq.memory import CaseMemory
from seq2seq.recommender import Candidate, Recommender

# Mixed lengths, one over the model's limit, a repeat, and two that differ only in case and spacing.
ALERTS = [
    "pump vibration high",
    "belt worn",
    " ".join(["compressor temperature high"] * 4),
    "valve stuck closed",
    "oil level low",
    "pump vibration high",
    "Fan   Speed LOW",
    "fan speed low",
    "gearbox noise high and coolant temperature high",
    "filter clogged",
]


@pytest.fixture(scope="module")
def recommender(tmp_path_factory) -> Recommender:
    return Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)


def test_recommendations_keep_input_order_whatever_the_batch_size(recommender):
    one_by_one = recommender.recommend(ALERTS, batch_size=1)
    assert [r.alert for r in one_by_one] == ALERTS
    texts = [r.text for r in one_by_one]
    for batch_size in (2, 3, 64):
        assert [r.text for r in recommender.recommend(ALERTS, batch_size=batch_size)] == texts
    assert [r.text for r in recommender.recommend(ALERTS[::-1])] == texts[::-1]


@pytest.mark.parametrize("beam_size", [1, 3])
def test_batches_decoded_by_several_workers_give_exactly_the_results_of_one(recommender, beam_size):
    config = SearchConfig(beam_size=beam_size, n_best=beam_size)
    alerts = [f"{alert} unit {k}" for k in range(3) for alert in ALERTS]  # 27 distinct: a repeat is answered once
    expected = recommender.recommend(alerts, config, batch_size=2)
    threaded = Recommender(recommender.model, recommender.tokenizer, workers=3, memory=recommender.memory,
                           trust=recommender.trust_model)
    got = threaded.recommend(alerts, config, batch_size=2)  # 14 batches over 3 threads
    assert [[(c.text, c.score) for c in r.candidates] for r in got] == \
           [[(c.text, c.score) for c in r.candidates] for r in expected]
    assert all(torch.equal(a.candidates[0].attention, b.candidates[0].attention)
               for a, b in zip(got, expected, strict=True) if a.candidates)
    # each batch judged by the thread that decoded it: the same trust, verdicts and past cases
    assert [(r.trust, r.verdict, r.similar) for r in got] == [(r.trust, r.verdict, r.similar) for r in expected]
    assert threaded.memory is not None and all(r.similar for r in got if r.candidates)


def test_batches_judged_together_give_what_each_batch_judged_alone_gives(recommender, monkeypatch):
    alerts = [f"{alert} unit {k}" for k in range(3) for alert in ALERTS]  # 27 distinct
    sizes, judge = [], recommender._judge

    def counting(answered, similar, read=None):
        sizes.append(len(answered))
        return judge(answered, similar, read)
    monkeypatch.setattr(recommender, "_judge", counting)
    together = recommender.recommend(alerts, batch_size=2)  # 14 batches, judged at most 4 at a time
    assert sizes == [7, 8, 8, 4]  # longest first, so the batch of one alert first; the 2 left when none remain
    sizes.clear()
    monkeypatch.setattr(recommender_module, "JUDGED_BATCHES", 1)
    alone = recommender.recommend(alerts, batch_size=2)
    assert sizes == [1] + [2] * 13
    assert [(r.text, r.trust, r.verdict, r.similar) for r in together] == \
           [(r.text, r.trust, r.verdict, r.similar) for r in alone]
    assert recommender.memory is not None and all(r.similar for r in together)


def test_workers_take_the_longest_batches_first_and_judge_each_alert_once(recommender, monkeypatch):
    alerts = list(dict.fromkeys(f"{alert} unit {k}" for k in range(3) for alert in ALERTS))  # 14 batches of 2
    threaded = Recommender(recommender.model, recommender.tokenizer, workers=3, memory=recommender.memory,
                           trust=recommender.trust_model)
    longest, judged = [], []
    search, judge = threaded._search, threaded._judge

    def searching(id_lists, config):
        longest.append(max(map(len, id_lists)))
        return search(id_lists, config)

    def judging(answered, similar, read=None):
        judged.extend(r.alert for r in answered)
        return judge(answered, similar, read)
    monkeypatch.setattr(threaded, "_search", searching)
    monkeypatch.setattr(threaded, "_judge", judging)
    got = threaded.recommend(alerts, batch_size=2)
    assert sorted(judged) == sorted(r.alert for r in got if r.candidates)  # every answered alert, once
    assert len(judged) == 27  # the alert over the model's limit is answered too (truncated); none is empty
    threaded.workers = 1  # one worker takes them in the order they are handed out
    longest.clear()
    threaded.recommend(alerts, batch_size=2)
    assert longest == sorted(longest, reverse=True) and len(longest) == 14


def test_a_failing_batch_fails_the_call_and_leaves_the_workers_ready_for_the_next(recommender, monkeypatch):
    threaded = Recommender(recommender.model, recommender.tokenizer, workers=3, memory=recommender.memory,
                           trust=recommender.trust_model)
    alerts = [f"{alert} unit {k}" for k in range(3) for alert in ALERTS]
    expected = [r.text for r in threaded.recommend(alerts, batch_size=2)]
    search, calls = threaded._search, []

    def failing(id_lists, config):
        calls.append(len(id_lists))
        if len(calls) == 3:
            raise RuntimeError("out of memory in batch 3")
        time.sleep(0.02)  # a batch that takes a while: the others are mid-batch when batch 3 fails
        return search(id_lists, config)
    monkeypatch.setattr(threaded, "_search", failing)
    with pytest.raises(RuntimeError, match="out of memory in batch 3"):
        threaded.recommend(alerts, batch_size=2)
    assert len(calls) < 14  # the other workers stopped after their batch instead of decoding the other 11
    monkeypatch.setattr(threaded, "_search", search)
    assert [r.text for r in threaded.recommend(alerts, batch_size=2)] == expected


def test_an_alert_repeated_in_a_call_is_decoded_once_and_answered_wherever_it_stands(recommender, monkeypatch):
    decoded, decode = [], recommender_module.decoded_in_turns

    def counting(batches, sources, *rest):  # the alerts (piece ids) decoded, batch by batch
        decoded.extend(ids for batch in sources for ids in batch)
        return decode(batches, sources, *rest)
    monkeypatch.setattr(recommender_module, "decoded_in_turns", counting)
    repeated = [alert for alert in ALERTS for _ in range(3)]
    got = recommender.recommend(repeated)
    assert len(decoded) == len(set(ALERTS))  # "pump vibration high" stands 6 times in ``repeated``
    once = {r.alert: r for r in recommender.recommend(list(dict.fromkeys(ALERTS)))}
    assert [r.alert for r in got] == repeated
    assert [(r.text, r.score, r.trust, r.verdict) for r in got] == \
           [(once[a].text, once[a].score, once[a].trust, once[a].verdict) for a in repeated]
    decoded.clear()
    assert recommender.translate(repeated) == [r.text for r in got] and len(decoded) == len(set(ALERTS))


def test_workers_must_be_positive(recommender):
    with pytest.raises(ConfigError, match=r"workers must be in \[1, 256\], got 0"):
        Recommender(recommender.model, recommender.tokenizer, workers=0)


def test_alerts_differing_only_in_case_and_spacing_get_the_same_recommendation(recommender):
    first, second = recommender.recommend(["Fan   Speed LOW", "fan speed low"])
    assert first.source_pieces == second.source_pieces
    assert first.text == second.text


def test_alerts_differing_only_by_invisible_characters_get_the_same_recommendation_and_trust(recommender):
    clean, *dirty = recommender.recommend(["fan speed low", "\ufefffan speed low", "fan speed low\u200b",
                                           "fan sp\u00adeed low", "fan\u2060 speed\u200d low"])
    for result in dirty:  # one batch: a row's last float digits may depend on its place in it
        assert (result.source_pieces, result.text, result.verdict) == (clean.source_pieces, clean.text, clean.verdict)
        assert (result.score, result.trust) == pytest.approx((clean.score, clean.trust), rel=1e-5)


@pytest.mark.parametrize("extra", [" ?", " 🔥", " 高 ⚠", "🔥"])
def test_characters_the_model_does_not_know_change_neither_the_answer_nor_its_trust(recommender, extra):
    """The encoder never learned what an unknown piece means: read, it turned an uncertain answer confident."""
    alerts = ["fan speed low", "fan speed low" + extra]
    clean, dirty = recommender.recommend(alerts, SearchConfig(beam_size=3, n_best=2))
    assert (dirty.text, dirty.verdict, [c.text for c in dirty.candidates], dirty.similar) == (
        clean.text, clean.verdict, [c.text for c in clean.candidates], clean.similar)
    assert (dirty.score, dirty.trust) == pytest.approx((clean.score, clean.trust), rel=1e-5)
    read = list(recommender.encode(alerts[1]).places)
    assert len(read) == len(clean.source_pieces) < len(dirty.source_pieces)  # on the heatmap ...
    for before, after in zip(clean.candidates, dirty.candidates, strict=True):  # ... with no attention
        assert torch.allclose(after.attention[:, read], before.attention, atol=1e-5)
        assert after.attention.sum() == pytest.approx(after.attention[:, read].sum())


@pytest.mark.parametrize("empty", ["", "   ", "\t\n", "\u00a0", "\ufeff\u200b"])
def test_empty_or_whitespace_alert_gives_an_empty_recommendation_with_a_warning(recommender, empty):
    before, result, after = recommender.recommend([ALERTS[0], empty, ALERTS[1]])
    assert result.text == "" and result.candidates == [] and result.source_pieces == []
    assert result.warning == "empty alert"
    assert [before.text, after.text] == recommender.translate([ALERTS[0], ALERTS[1]])


@pytest.mark.parametrize("alert, place", [("oil \ud800 leak", 5), ("\udce9t\u00e9", 1)],
                         ids=["json-escape", "kept-byte"])
def test_an_alert_holding_half_a_character_is_answered_with_nothing_and_says_where(recommender, alert, place):
    """SentencePiece raised its own RuntimeError on a lone surrogate, failing the whole call."""
    before, result, after = recommender.recommend([ALERTS[0], alert, ALERTS[1]])
    assert result.candidates == [] and result.trust is None
    assert result.warning == f"not valid Unicode (a lone surrogate at character {place}); no recommendation"
    assert [before.text, "", after.text] == recommender.translate([ALERTS[0], alert, ALERTS[1]])


@pytest.mark.parametrize("alerts", ["pump vibration high", [b"pump"], ["pump", None]], ids=["str", "bytes", "none"])
def test_alerts_that_are_not_a_list_of_strings_are_a_type_error_not_one_answer_per_character(recommender, alerts):
    for call in (recommender.recommend, recommender.translate):
        with pytest.raises(TypeError, match="alerts must be a list of strings, one per alert"):
            call(alerts)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda r: r.recommend(["egt high"], SearchConfig(beam_size=2.5)), ConfigError, "beam_size must be a whole number"),
    (lambda r: r.recommend(["egt high"], SearchConfig(beam_size="5")), ConfigError, "beam_size must be a number"),
    (lambda r: r.recommend(["egt high"], {"beam_size": 5}), TypeError, "config must be a seq2seq.config.SearchConfig"),
    (lambda r: r.recommend(["egt high"], batch_size=2.5), TypeError, "batch size must be a whole number"),
    (lambda r: r.recommend(["egt high"], batch_size="4"), TypeError, "batch size must be a whole number"),
    (lambda r: r.recommend(["egt high"], similar=-1), ConfigError, r"similar must be in \[0, 100\], got -1"),
    (lambda r: r.recommend(["egt high"], similar=10**7), ConfigError, r"similar must be in \[0, 100\]"),
    (lambda r: r.recommend(["egt high"], similar="3"), TypeError, "similar must be a whole number"),
    (lambda r: r.recommend(None), TypeError, "alerts must be a list of strings"),
    (lambda r: r.recommend(alert for alert in ["egt high"]), TypeError, "alerts must be a list of strings"),
    (lambda r: r.translate(["egt high"], batch_size=0), ConfigError, r"batch size must be in \[1, "),
    (lambda r: Recommender(r.model, r.tokenizer, workers="2"), TypeError, "workers must be a whole number"),
])
def test_a_programs_wrong_argument_is_one_line_naming_it(recommender, call, error, message):
    """A float beam failed deep in torch, a dict config in the search, and a negative count of past cases sliced the
    list from its end (one case for -1), a huge one returned the whole memory: none named the argument."""
    with pytest.raises(error, match=message) as raised:
        call(recommender)
    assert "\n" not in str(raised.value)


def test_numbers_of_another_type_that_mean_the_same_are_taken_as_the_fields_type(recommender):
    import numpy as np
    config = SearchConfig(beam_size=np.int64(2), n_best=2.0, length_penalty=1)
    assert (type(config.beam_size), type(config.n_best), type(config.length_penalty)) == (int, int, float)
    got, expected = (recommender.recommend(["egt high"], c)[0].candidates
                     for c in (config, SearchConfig(beam_size=2, n_best=2)))
    assert [(c.text, c.score) for c in got] == [(c.text, c.score) for c in expected]


def test_over_long_alert_is_truncated_to_the_model_limit_with_a_warning(recommender):
    result = recommender.recommend([ALERTS[2]])[0]
    assert len(result.source_pieces) == MAX_SOURCE_LENGTH and result.source_pieces[-1] == "</s>"
    assert "truncated" in result.warning and f"to {MAX_SOURCE_LENGTH} pieces" in result.warning
    assert recommender.recommend([ALERTS[0]])[0].warning is None


@pytest.mark.parametrize("config", [SearchConfig(beam_size=1), SearchConfig(beam_size=4, n_best=4)],
                         ids=["greedy", "beam"])
def test_candidate_attention_is_target_pieces_by_source_pieces_and_rows_sum_to_one(recommender, config):
    for result in recommender.recommend(ALERTS, config):
        assert 1 <= len(result.candidates) <= config.n_best
        for candidate in result.candidates:
            assert candidate.attention.shape == (len(candidate.target_pieces), len(result.source_pieces))
            sums = candidate.attention.sum(dim=-1)
            assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


def test_n_best_candidates_are_sorted_by_score_and_the_first_is_the_recommendation(recommender):
    for result in recommender.recommend(ALERTS, SearchConfig(beam_size=4, n_best=3)):
        scores = [candidate.score for candidate in result.candidates]
        assert 1 <= len(scores) <= 3  # fewer where two of the beam's answers read alike (distinct)
        assert scores == sorted(scores, reverse=True)
        assert result.text == result.candidates[0].text and result.score == scores[0]


def test_another_memory_shares_the_weights_and_changes_only_the_look_up(recommender):
    bare = recommender.with_memory(None)
    assert bare.model is recommender.model and bare.decoding_model is recommender.decoding_model
    assert recommender.memory is not None and recommender.trust_model is not None  # the original keeps its own
    plain, judged = bare.recommend(ALERTS), recommender.recommend(ALERTS)
    assert [[(c.text, c.score) for c in r.candidates] for r in plain] == \
           [[(c.text, c.score) for c in r.candidates] for r in judged]
    assert all(not r.similar for r in plain) and all(r.similar for r in judged if r.candidates)
    again = bare.with_memory(recommender.memory, recommender.trust_model).recommend(ALERTS)
    assert [(r.trust, r.verdict, r.similar) for r in again] == [(r.trust, r.verdict, r.similar) for r in judged]


def test_an_alert_asked_again_is_shown_ahead_of_its_reordered_twin_at_the_same_similarity(recommender):
    """Character n-grams ignore word order: 'vibration pump high' and 'pump vibration high' tie at 1, and the
    reordered one, earlier in memory, was shown first, the alert's own action second."""
    memory = CaseMemory(["vibration pump high", "pump vibration high", "belt worn"],
                        ["action of the twin", "action of the alert itself", "replace belt"])
    judged = recommender.with_memory(memory, recommender.trust_model)
    shown = judged.recommend(["Pump  vibration HIGH"])[0].similar
    assert [case.action for case in shown[:2]] == ["action of the alert itself", "action of the twin"]
    assert shown[0].similarity == pytest.approx(shown[1].similarity) == pytest.approx(1.0)
    assert [c.action for c in memory.nearest(["pump vibration high"], 2)[0]] == ["action of the twin",
                                                                             "action of the alert itself"]


def test_n_best_texts_are_distinct_each_at_its_best_score(recommender):
    for result in recommender.recommend(ALERTS, SearchConfig(beam_size=8, n_best=8)):
        texts = [candidate.text for candidate in result.candidates]
        assert len(set(texts)) == len(texts) and texts[0] == result.text
    one, same, other = (Candidate(text, -k, [], torch.zeros(1, 1), -k) for k, text in enumerate("aab"))
    assert recommender_module.distinct([one, same, other]) == [one, other]

"""Case memory, trust and verdicts: nearest past cases, fitted flag rates, checkpoints with and without a memory."""

from __future__ import annotations

import functools
import itertools
import math
import operator
import pickle
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from support import TINY_PAIRS, run_cli, tiny_data, train_args, trained, training_threads, tsv

from seq2seq.checkpoint import read_checkpoint, save_atomic
from seq2seq.errors import CheckpointError
from seq2seq.fast import scan as scan_module
from seq2seq.fast import tfidf as tfidf_module
from seq2seq.fast.tfidf import TfidfVectors
from seq2seq.memory import Case, CaseMemory
from seq2seq.recommender import Recommender
from seq2seq.tokenizer import normalize
from seq2seq.trust import (
    CASE_FEATURES,
    FEATURES,
    FIRST_FEATURES,
    UNFAMILIAR_BELOW,
    UNFAMILIAR_RATE,
    VERDICTS,
    TrustModel,
    features,
    fit_trust,
)

ALERTS, ACTIONS = [a for a, _ in TINY_PAIRS], [b for _, b in TINY_PAIRS]


@pytest.fixture(scope="module")
def memory() -> CaseMemory:
    return CaseMemory(ALERTS, ACTIONS)


def test_an_alert_from_the_memory_finds_itself_first_with_similarity_one(memory):
    for alert, action in TINY_PAIRS:
        [first, *rest] = memory.nearest([alert], 3)[0]
        assert (first.alert, first.action) == (alert, action)
        assert first.similarity == pytest.approx(1.0, abs=1e-5)
        assert all(0.0 <= case.similarity <= first.similarity for case in rest)


def test_an_alert_typed_on_a_turkish_keyboard_finds_what_its_plain_twin_finds(memory):
    """Its "ı" was a word the memory never saw, and "İ" lowered an i with a combining dot: out of scope."""
    alert = next(a for a in ALERTS if "i" in a.lower())
    for typed in (alert.upper().replace("I", "\u0130"), alert.lower().replace("i", "\u0131")):
        assert memory.known_words([typed]) == memory.known_words([alert]) == [1.0]
        [[found]], [[plain]] = memory.nearest([typed], 1), memory.nearest([alert], 1)
        assert (found.alert, found.similarity) == (plain.alert, pytest.approx(plain.similarity))


def test_neighbours_are_sorted_distinct_and_as_many_as_asked(memory):
    found = memory.nearest(["pump temp high", "valve leaking"], 5)
    for cases in found:
        assert len(cases) == 5 and len({(c.alert, c.action) for c in cases}) == 5
        assert [c.similarity for c in cases] == sorted((c.similarity for c in cases), reverse=True)
    assert memory.nearest(["pump vibration high"], 100)[0].__len__() == len(TINY_PAIRS)


def test_equally_similar_cases_come_in_memory_order_even_beyond_the_k_shown():
    # One alert answered many ways, as MaintNet repeats them: a correction, first in memory, must be shown
    # first, however many old cases tie with it.
    alerts = [f"filler alert {i}" for i in range(4000)]
    actions = [f"did thing {i}" for i in range(4000)]
    at = list(range(0, 4000, 300))  # the same alert 14 times among 4,000 cases
    for i in at:
        alerts[i] = "pump 4 leaking"
    memory = CaseMemory(alerts, actions)
    for k in (1, 3, 10):
        [cases] = memory.nearest(["pump 4 leaking"], k)
        assert [c.action for c in cases] == [actions[i] for i in at[:k]]


def test_a_batch_finds_what_each_alert_finds_alone_with_scikit_learns_cosines(memory):
    alerts = ["pump temp high", "", "☃", "valve leaking", "motor current high", "zzzz"]
    together = memory.nearest(alerts, 4)
    assert together == [memory.nearest([alert], 4)[0] for alert in alerts]
    index = memory._alert_index
    cosines = (index.transform(alerts) @ index.transform(memory.alerts).T).toarray()  # (B, N)
    for row, cases in zip(cosines, together, strict=True):
        assert [c.similarity for c in cases] == pytest.approx(sorted(row, reverse=True)[:4], abs=1e-5)


def test_unrelated_text_is_far_from_every_case(memory):
    [cases] = memory.nearest(["zzzz qqqq xxxx"], 1)
    assert cases[0].similarity < 0.2
    assert memory.nearest(["☃☃☃"], 1)[0][0].similarity == 0.0  # no known n-gram: a zero vector


def left_to_right(terms) -> float:
    """0.0 plus each term in turn, as NumPy's ``add.accumulate`` and ``bincount`` add them. Not ``sum``: from
    Python 3.12 it compensates the rounding of floats, and its last bit no longer matches the arrays'."""
    return functools.reduce(operator.add, terms, 0.0)


def plain_vector(vectors: TfidfVectors, text: str) -> dict[int, float]:
    """A text's TF-IDF vector as plain loops: its n-grams counted in the order first met, sublinear tf times idf,
    over the length; empty for a text with no known n-gram."""
    counts, idf = Counter(vectors.columns(text)), vectors.idf.tolist()
    weights = [idf[j] if n == 1 else (1.0 + math.log(n)) * idf[j] for j, n in counts.items()]
    norm = math.sqrt(left_to_right(w * w for w in weights))
    return dict(zip(counts, [w / norm for w in weights], strict=True)) if norm > 0 else {}


def test_fast_query_vectors_equal_scikit_learns_transform(memory):
    texts = [*ALERTS, "Pump VIBRATION high!!", "", "☃", "motor  current"]
    expected = memory._alert_index.transform(texts).toarray()
    for text, row in zip(texts, expected, strict=True):
        dense = np.zeros_like(row)
        for column, weight in plain_vector(memory.alert_vector, text).items():
            dense[column] = weight
        np.testing.assert_allclose(dense, row, atol=1e-6)


@given(st.lists(st.text(st.sampled_from("aBcΣσς İi #/\t\u00a0\u2003"), max_size=12), min_size=1, max_size=12),
       st.sampled_from([0.3, 1.0]))
@settings(max_examples=60)
def test_fitting_by_words_gives_scikit_learns_index_to_the_bit(texts, max_df):
    # upper case and Greek sigmas (lowercased in context), every kind of space, short words, repeats
    make = lambda: TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True,  # noqa: E731
                                   max_df=max_df, dtype=np.float32)
    expected, fitted = make(), make()
    try:
        rows = expected.fit_transform(texts)
    except ValueError:  # no n-gram at all, or none left by max_df: the same error from both
        with pytest.raises(ValueError):
            tfidf_module.fit_transform(fitted, texts)
        return
    found = tfidf_module.fit_transform(fitted, texts)
    assert fitted.vocabulary_ == expected.vocabulary_ and np.array_equal(fitted.idf_, expected.idf_)
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(found, name), getattr(rows, name))
    assert fitted.get_params() == expected.get_params()  # its own analyzer again, for transform


TEXTS = st.lists(st.sampled_from([*" ".join(ALERTS).split(), "☃", "sink", "pumppump"]), max_size=9).map(" ".join)


@given(st.lists(TEXTS, max_size=24))  # repeated words and n-grams, unknown ones, empty texts and batches
@settings(max_examples=60)
def test_a_batchs_vectors_are_its_texts_vectors_to_the_bit(memory, texts):
    rows, one_by_one = memory.alert_vector.rows(texts), [plain_vector(memory.alert_vector, text) for text in texts]
    assert rows.indptr.tolist() == [0, *itertools.accumulate(map(len, one_by_one))]
    # the same n-grams, in the same order, with the same bits
    assert rows.columns.tolist() == [j for vector in one_by_one for j in vector]
    assert rows.values.tolist() == [w for vector in one_by_one for w in vector.values()]


def test_a_batch_of_texts_without_a_known_n_gram_has_empty_vectors(memory):
    rows = memory.alert_vector.rows(["", "☃ ☃", "", ""])
    assert rows.indptr.tolist() == [0] * 5 and rows.columns.size == rows.values.size == 0


WORDS = [
    "pump", "valve", "motor", "fan", "bearing", "seal", "leak", "leaking", "high", "low", "temp", "pressure",
    "vibration", "oil", "fuel", "hyd", "filter", "crack", "cyl", "#3", "l/h", "r/h", "engine", "gear",
    "door", "light", "inop", "intermittent", "rough", "idle", "mag", "drop", "baffle", "gasket"
]


@pytest.fixture(scope="module")
def large_memory() -> CaseMemory:
    """Random alerts over a small vocabulary, some also in another order (the same vector: exact ties), some
    answered twice: every query shares n-grams with most of its 1,400 distinct alerts."""
    rng = np.random.default_rng(0)
    alerts = [" ".join(rng.choice(WORDS, rng.integers(1, 7), replace=False)) for _ in range(1400)]
    alerts += [" ".join(reversed(alert.split())) for alert in alerts[:100]]
    actions = [f"replaced {rng.choice(WORDS)} and {rng.choice(WORDS)}" for _ in alerts]
    return CaseMemory([*alerts, *alerts[:60]], [*actions, *(f"inspected {a}" for a in alerts[:60])])


def plain_search(memory: CaseMemory, alerts: list[str], k: int) -> list[list[Case]]:
    """``nearest`` as plain loops: each past alert's cosine added up n-gram after n-gram in the query's order,
    clipped to [0, 1]; the cases sorted by similarity, then memory order."""
    indptr, indices, data = memory._postings
    holders = [dict(zip(indices[a:b].tolist(), data[a:b].tolist(), strict=True))
               for a, b in zip(indptr[:-1].tolist(), indptr[1:].tolist(), strict=True)]  # n-gram -> {alert: weight}
    found = []
    for alert in alerts:
        query = plain_vector(memory.alert_vector, normalize(alert))
        cosines = [left_to_right(holders[j][u] * w for j, w in query.items() if u in holders[j])
                   for u in range(memory._distinct)]
        similarity = [min(max(cosines[u], 0.0), 1.0) for u in memory._alert_row.tolist()]
        best = sorted(range(len(memory)), key=lambda pair: (-similarity[pair], pair))[:k]
        found.append([Case(memory.alerts[j], memory.actions[j], similarity[j]) for j in best])
    return found


def test_the_search_finds_what_plain_loops_over_every_case_find_to_the_bit(large_memory):
    rng = np.random.default_rng(1)
    alerts = [*large_memory.alerts[::97],  # copies: similarity 1, tied with their reorderings
              *(" ".join(rng.choice(WORDS, rng.integers(1, 5), replace=False)) for _ in range(12)),
              *(alert.replace("e", "3") for alert in large_memory.alerts[5:300:59]),  # misspelled
              *(word[:2] for word in WORDS[:6]),  # like too many cases to tell apart
              "kitchen sink drain blocked", "", "☃", "zzzz qqqq"]
    for k in (1, 3, 8):
        together = large_memory.nearest(alerts, k)
        assert together == plain_search(large_memory, alerts, k)
        assert together == [large_memory.nearest([alert], k)[0] for alert in alerts]


@given(st.integers(1, 6), st.lists(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 1, width=32)), max_size=6),
                                    min_size=1, max_size=6),
       st.lists(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 2)), max_size=6), min_size=1, max_size=3),
       st.lists(st.integers(0, 5), min_size=1, max_size=9), st.integers(1, 9))
def test_the_compiled_search_adds_in_the_querys_order_and_keeps_the_k_best_in_memory_order(distinct, postings,
                                                                                            queries, alert_of, k):
    postings = [dict((alert % distinct, weight) for alert, weight in gram) for gram in postings]  # n-gram -> {alert: w}
    queries = [list(dict((gram % len(postings), value) for gram, value in query).items()) for query in queries]
    alert_of = np.array([alert % distinct for alert in alert_of])
    k = min(k, alert_of.size)
    pairs, similarities = scan_module.nearest(
        np.cumsum([0, *map(len, postings)]), np.array([a for gram in postings for a in gram], dtype=np.int32),
        np.array([w for gram in postings for w in gram.values()], dtype=np.float32),
        np.cumsum([0, *map(len, queries)]), np.array([g for query in queries for g, _ in query], dtype=np.int64),
        np.array([v for query in queries for _, v in query]), alert_of, distinct, k)
    for query, found, near in zip(queries, pairs.tolist(), similarities.tolist(), strict=True):
        cosines = [left_to_right(float(np.float32(postings[g][alert])) * v
                                                for g, v in query if alert in postings[g]) for alert in range(distinct)]
        clipped = [min(max(cosines[alert], 0.0), 1.0) for alert in alert_of.tolist()]
        ranked = sorted(range(alert_of.size), key=lambda pair: (-clipped[pair], pair))[:k]
        assert found == ranked and near == [clipped[pair] for pair in ranked]  # to the bit


@given(st.lists(st.floats(-1e6, 1e6) | st.sampled_from([0.1, -0.0, 1e-17, 3.0]), max_size=40))
def test_loops_add_left_to_right_as_the_arrays_do_on_every_python(terms):
    # Python 3.12's sum() compensates float rounding ([0.1] * 10 sums to 1.0, not 0.9999999999999999): the dict
    # reference loops must not use it, or they would differ in the last bit from the compiled loops they check.
    accumulated = np.add.accumulate(np.array([0.0, *terms]))[-1]
    assert left_to_right(terms) == accumulated
    assert np.bincount(np.zeros(len(terms), dtype=np.int64), np.array(terms), minlength=1)[0] == accumulated
    assert left_to_right([0.1] * 10) == 0.9999999999999999


def dict_dot(a: dict[int, float], b: dict[int, float]) -> float:
    """The dot product as a plain loop: over the shorter vector's n-grams (the first's when as long), in order."""
    if len(b) < len(a):
        a, b = b, a
    total = 0.0
    for j, w in a.items():
        total += w * b.get(j, 0.0)
    return total


def test_agreement_and_consensus_equal_plain_dot_products_to_the_bit(large_memory):
    rng = np.random.default_rng(2)
    alerts = large_memory.alerts[::53]
    cases = large_memory.nearest(alerts, 3)
    answers = [" ".join(rng.choice(["replaced", "and", "inspected", *WORDS], rng.integers(1, 12))) for _ in alerts]
    answers[:3] = ["", "☃", cases[2][0].action]  # no n-gram; the very action of a case
    # The words of a case's action in another order, one left out: many shared n-grams, met in another order
    answers[3::2] = [" ".join(rng.permutation(found[0].action.split())[1:]) for found in cases[3::2]]
    action_vector = large_memory.past_actions.vector
    vector = lambda case: plain_vector(action_vector, case.action)  # noqa: E731
    expected = [min(1.0, max((dict_dot(plain_vector(action_vector, answer), vector(c)) for c in found), default=0.0))
                for answer, found in zip(answers, cases, strict=True)]
    assert expected[2] == pytest.approx(1.0, abs=1e-6)
    consensus = [min(1.0, max((dict_dot(vector(found[0]), vector(c)) for c in found[1:]), default=0.0))
                 for found in cases]
    assert large_memory.agreement_and_consensus(None, cases)[1] == consensus  # consensus alone
    assert large_memory.agreement_and_consensus(answers, cases) == (expected, consensus)  # in one pass
    assert [large_memory.agreement_and_consensus([a], [c]) for a, c in zip(answers, cases, strict=True)] == \
           [([e], [n]) for e, n in zip(expected, consensus, strict=True)]
    assert large_memory.agreement_and_consensus([], []) == ([], [])
    assert large_memory.agreement_and_consensus(None, [[], cases[0][:1]]) == ([], [0.0, 0.0])
    assert large_memory.agreement_and_consensus(None, [[], *cases])[1][0] == 0.0  # no case, in a batch


def test_query_vectors_are_the_same_when_the_word_cache_starts_again(memory, monkeypatch):
    texts = [*ALERTS, "pump pump vibration", "valve leaking pump"]
    before = [plain_vector(memory.alert_vector, text) for text in texts]
    monkeypatch.setattr(tfidf_module, "WORD_CACHE", 2)
    assert [plain_vector(memory.alert_vector, text) for text in texts] == before


def test_agreement_is_one_for_an_action_a_case_took_and_lower_for_another(memory):
    cases = memory.nearest(["pump vibration high", "pump vibration high"], 3)
    high, low = memory.agreement_and_consensus(["inspect pump bearings", "top up coolant"], cases)[0]
    assert high == pytest.approx(1.0, abs=1e-5) and low < high


def test_consensus_is_one_when_the_nearest_cases_did_the_same_and_zero_without_a_second(memory):
    pair = memory.nearest(["pump vibration high"], 2)[0]
    same = [pair[0], Case("another alert", pair[0].action, 0.5)]
    memory_with_repeat = CaseMemory([*ALERTS, same[1].alert], [*ACTIONS, same[1].action])
    assert memory_with_repeat.agreement_and_consensus(None, [same])[1][0] == pytest.approx(1.0, abs=1e-5)
    assert memory.agreement_and_consensus(None, [pair[:1], []])[1] == [0.0, 0.0]
    assert 0.0 <= memory.agreement_and_consensus(None, [pair])[1][0] <= 1.0


def test_long_answer_learns_which_alerts_the_history_answered_at_length():
    rng = np.random.default_rng(4)
    words = ["pump", "valve", "fan", "seal", "bearing", "filter", "duct", "sensor"]
    alerts = [f"{rng.choice(words)} {rng.choice(words)} {kind}" for kind, n in (("hot", 80), ("intermittent", 20))
              for _ in range(n)]  # a fifth answered at length: rarer than the n-grams the index leaves out
    actions = [f"replaced {alert.split()[0]}" if alert.endswith("hot") else
               "ground ran engine, could not duplicate the fault, monitor" for alert in alerts]
    memory = CaseMemory(alerts, actions)
    short, long, word = memory.long_answer(["seal duct hot", "seal duct intermittent", "intermittent"])
    assert 0.0 <= short < 0.25 < 0.4 < long < word <= 1.0  # regularised: a hundred pairs move it only so far
    assert memory.long_answer([]) == [] and 0.0 <= memory.long_answer(["☃"])[0] <= 1.0  # no known n-gram
    some = ["seal duct hot", "☃", "fan intermittent"]  # vectors built once for both give the same answers
    assert memory.long_answer(some, memory.vectors(some)) == memory.long_answer(some)
    assert memory.nearest(some, 2, memory.vectors(some)) == memory.nearest(some, 2)
    same = CaseMemory(alerts, ["replaced it"] * len(alerts))  # every action as long: the longest tenth is all
    assert same.long_answer(["seal duct hot", "banana"]) == [1.0, 1.0]


@pytest.mark.parametrize("pairs", [
    [("pump hot", "check pump")],  # fewer than four texts: 30% of them is less than one
    [("pump hot", "check pump"), ("valve stuck", "free valve"), ("fan loud", "inspect fan")],
    [(f"unit {i} alarm", ("replace pump", "fix valve")[i % 2]) for i in range(12)],  # two wordings by turns
    [(f"unit {i} alarm", "replace pump") for i in range(12)],  # one wording
], ids=["one pair", "three pairs", "two actions", "one action"])
def test_a_memory_of_a_few_pairs_or_a_few_wordings_builds_and_finds_its_own_cases(pairs):
    memory = CaseMemory([a for a, _ in pairs], [b for _, b in pairs])
    for alert, action in pairs:
        [first] = memory.nearest([alert], 1)[0]
        assert (first.alert, first.action) == (alert, action) and first.similarity == pytest.approx(1.0, abs=1e-5)
        assert memory.agreement_and_consensus([action], [[first]])[0] == [pytest.approx(1.0, abs=1e-5)]


def test_training_on_three_pairs_ends_with_a_memory(tmp_path):
    data = tiny_data(tmp_path / "data")
    few = tmp_path / "three.tsv"
    few.write_text(tsv(TINY_PAIRS[:3]), encoding="utf-8")
    result = run_cli("train", "--train", str(few), "--dev", str(few), "--config", str(data.config),
                     "--output-dir", str(tmp_path / "run"), "--device", "cpu", "--epochs", "1")
    assert result.status == 0, result.stderr
    assert len(Recommender.from_checkpoint(tmp_path / "run" / "best.pt").memory) == 3


def test_a_trust_model_fitted_before_the_last_signals_loads_and_reads_only_its_own():
    old_state = {"weights": [2.0, 1.0, -1.0], "bias": 0.5, "scope_threshold": 0.3, "flag_rate": 0.01,
                 "uncertain_below": 0.5}  # as checkpoints before the second-case signals stored it
    model = TrustModel.from_state_dict(old_state)
    assert model.unfamiliar_penalty == 0.0 and model.verdict(0.9, 0.31, 0.0) == "confident"  # words weigh nothing
    signals = np.random.default_rng(1).uniform(0, 1, (50, len(FEATURES)))
    expected = 1 / (1 + np.exp(-(signals[:, :3] @ np.array([2.0, 1.0, -1.0]) + 0.5)))
    np.testing.assert_allclose(model.trust(signals), expected)
    assert TrustModel.from_state_dict(model.state_dict()) == model
    with pytest.raises(CheckpointError, match="unknown or repeated"):
        TrustModel.from_state_dict({**old_state, "features": ["log_prob_per_piece", "colour", "agreement"]})
    with pytest.raises(CheckpointError, match="expected 6 finite weights"):
        TrustModel.from_state_dict({**old_state, "features": list(FEATURES)})


def test_a_trust_model_fitted_before_long_answer_keeps_its_five_weights_and_outputs():
    state = {"weights": [1.5, 2.0, 1.0, 0.5, 0.8], "bias": -1.0, "scope_threshold": 0.4, "flag_rate": 0.01,
             "uncertain_below": 0.5, "features": list(CASE_FEATURES)}  # as five-signal checkpoints store it
    model = TrustModel.from_state_dict(state)
    signals = np.random.default_rng(3).uniform(0, 1, (40, len(FEATURES)))
    expected = 1 / (1 + np.exp(-(signals[:, :5] @ np.array(state["weights"]) - 1.0)))
    np.testing.assert_allclose(model.trust(signals), expected)
    moved = signals.copy()
    moved[:, FEATURES.index("long_answer")] = 1 - moved[:, FEATURES.index("long_answer")]
    np.testing.assert_array_equal(model.trust(moved), model.trust(signals))


def test_standardised_fitting_ranks_like_scikit_learns_pipeline_and_honours_the_chosen_signals():
    rng = np.random.default_rng(2)
    signals = rng.normal([-1.0, 0.6, 0.5, 0.4, 0.5, 0.2], [0.5, 0.2, 0.2, 0.2, 0.3, 0.2], (300, len(FEATURES)))
    chrf = 100 / (1 + np.exp(-(3 * signals[:, 0] + 4 * signals[:, 4] + rng.normal(0, 1, 300))))
    model = fit_trust(signals, chrf.tolist())
    pipeline = make_pipeline(StandardScaler(), LogisticRegression()).fit(signals, chrf >= 50)
    np.testing.assert_allclose(model.trust(signals), pipeline.predict_proba(signals)[:, 1], atol=1e-6)
    first = fit_trust(signals, chrf.tolist(), signals=FIRST_FEATURES)
    assert first.features == FIRST_FEATURES and len(first.weights) == 3
    moved = signals.copy()
    moved[:, 3:] = 0.0  # the signals it does not read
    np.testing.assert_array_equal(first.trust(moved), first.trust(signals))


def test_a_dev_split_answered_mostly_exactly_still_fits_trust_to_tell_the_rest_apart():
    """A translator that answers most dev alerts word for word (chrF 100 the median, the maximum): exact against
    the rest, not the equal weights kept for one class, which made trust a plain sum of the raw signals."""
    rng = np.random.default_rng(3)
    signals = rng.normal([-1.0, 0.6, 0.5, 0.4, 0.5, 0.2], [0.5, 0.2, 0.2, 0.2, 0.3, 0.2], (300, len(FEATURES)))
    inexact = signals[:, 0] < np.quantile(signals[:, 0], 0.1)  # the least probable tenth misses a word or two
    model = fit_trust(signals, np.where(inexact, 80.0, 100.0).tolist())
    assert len(set(model.weights)) > 1
    trust = model.trust(signals)
    assert trust[inexact].max() < trust[~inexact].min()


@given(st.integers(1, 200), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_an_answers_trust_does_not_depend_on_the_batch_it_comes_in(rows, seed):
    rng = np.random.default_rng(seed)
    model = TrustModel(tuple(rng.normal(0, 3, len(FEATURES)).tolist()), float(rng.normal()), 0.3)
    signals = rng.uniform(-2, 1, (rows, len(FEATURES)))
    together = model.trust(signals)
    np.testing.assert_array_equal(together, [model.trust(signals[i:i + 1])[0] for i in range(rows)])


def test_memory_round_trips_through_its_state(memory):
    again = CaseMemory.from_state_dict(memory.state_dict())
    assert again.nearest(["motor temp high"], 3) == memory.nearest(["motor temp high"], 3)
    unpickled = pickle.loads(pickle.dumps(memory))  # as the UI's decoding process receives it
    assert unpickled.nearest(["motor temp high", "zzzz"], 3) == memory.nearest(["motor temp high", "zzzz"], 3)
    with pytest.raises(CheckpointError, match="malformed"):
        CaseMemory.from_state_dict({"version": 1, "alerts": ["a"]})


@given(st.lists(st.floats(0.0, 1.0), min_size=20, max_size=300), st.sampled_from([0.01, 0.05, 0.1, 0.2]))
@settings(max_examples=60, deadline=None)
def test_the_scope_threshold_flags_at_most_the_stated_share_of_the_split_it_was_fitted_on(nearest, rate):
    n = len(nearest)
    signals = features([-0.125] * n, nearest, [0.5] * n, nearest, [0.5] * n, [0.0] * n)
    model = fit_trust(signals, [float(i % 100) for i in range(n)], rate)
    flagged = sum(model.verdict(0.9, s) == "out-of-scope" for s in nearest)
    assert flagged <= rate * n + 1e-9
    assert flagged >= rate * n - 1 - sum(s == model.scope_threshold for s in nearest)  # ties stay in scope


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.2, 0.5, 1.0])), min_size=20, max_size=300),
       st.sampled_from([0.01, 0.02, 0.04]))
@settings(max_examples=60, deadline=None)
def test_unfamiliar_alerts_are_held_to_a_stricter_threshold_and_the_split_still_flags_its_share(alerts, rate):
    nearest, known = [s for s, _ in alerts], [k for _, k in alerts]
    n = len(nearest)
    signals = features([-0.125] * n, nearest, [0.5] * n, nearest, [0.5] * n, [0.0] * n)
    model = fit_trust(signals, [float(i % 100) for i in range(n)], rate, known_words=known)
    scores = [s - (model.unfamiliar_penalty if k < UNFAMILIAR_BELOW else 0.0) for s, k in alerts]
    flagged = sum(model.verdict(0.9, s, k) == "out-of-scope" for s, k in alerts)
    assert flagged <= rate * n + 1e-9
    assert flagged >= rate * n - 1 - sum(s == model.scope_threshold for s in scores)  # ties stay in scope
    strict = np.quantile(nearest, UNFAMILIAR_RATE, method="lower") - np.quantile(nearest, rate, method="lower")
    assert model.unfamiliar_penalty == pytest.approx(max(0.0, strict))


def test_an_alert_of_mostly_new_words_is_out_of_scope_where_a_familiar_one_is_not():
    nearest = np.linspace(0.0, 1.0, 201)
    signals = features([-0.125] * 201, nearest.tolist(), [0.5] * 201, nearest.tolist(), [0.5] * 201,
                       [0.0] * 201)
    model = fit_trust(signals, [float(i % 100) for i in range(201)], 0.01, known_words=[1.0] * 201)
    assert model.scope_threshold == pytest.approx(0.01) and model.unfamiliar_penalty == pytest.approx(0.04)
    assert TrustModel.from_state_dict(model.state_dict()) == model
    between = 0.03  # above the threshold, below the one unfamiliar alerts are held to
    assert model.verdict(0.9, between, 1.0) == model.verdict(0.9, between, 0.5) == "confident"
    assert model.verdict(0.9, between, 0.49) == model.verdict(0.9, between, 0.0) == "out-of-scope"
    assert model.verdict(0.9, 0.06, 0.0) == "confident"  # close enough to a past case even so
    assert fit_trust(signals, [float(i % 100) for i in range(201)], 0.01).unfamiliar_penalty == 0.0  # no words given


@given(st.floats(0.0, 1.0), st.floats(-0.1, 1.0), st.sampled_from([0.0, 0.3, 0.5, 1.0]),
       st.floats(0.0, 1.0), st.floats(0.0, 0.5))
@settings(max_examples=200, deadline=None)
def test_trust_orders_the_verdicts_and_an_out_of_scope_alert_is_trusted_not_at_all(trust, nearest, known, threshold,
                                                                                     penalty):
    model = TrustModel((1.0,) * len(FEATURES), 0.0, scope_threshold=threshold, unfamiliar_penalty=penalty)
    judged, verdict = model.judged(trust, nearest, known)
    assert verdict == model.verdict(trust, nearest, known)
    if verdict == "out-of-scope":
        assert judged == 0.0
    else:
        assert judged == trust and (verdict == "confident") == (trust >= model.uncertain_below)


def test_known_words_is_the_share_of_an_alerts_words_that_past_alerts_used():
    memory = CaseMemory(["HYD PUMP #2 LEAKING.", "L/H ENG OIL PRESS LOW"], ["REPLACED SEAL", "TOPPED OIL"])
    assert memory.known_words(["hyd pump leaking", "Kitchen pump", "l-h eng 2", "###", "sink drain", ""]) == \
        [1.0, 0.5, 1.0, 0.0, 0.0, 0.0]
    assert memory.known_words([]) == []
    # a past alert typed on a Turkish keyboard knows its own words: its "İ" lowered an i and a combining dot
    assert CaseMemory(["\u0130NLET VALVE STUCK"], ["CLEANED"]).known_words(["\u0130NLET VALVE STUCK", "inlet"]) == \
        [1.0, 1.0]
    # Emoji and pictographs are words no past alert used; Latin-1's symbols are no words at all
    assert memory.known_words(["🔥🔥 pump 🔥", "⚠ hyd pump leaking", "hyd pump° #2", "oil press ↓"]) == \
        [1 / 3, 0.75, 1.0, 2 / 3]


def test_trust_is_in_the_unit_interval_and_grows_with_agreement():
    rng = np.random.default_rng(0)
    signals = rng.uniform(0, 1, (200, len(FEATURES)))
    chrf = 100 * signals[:, 2]  # usable exactly when the answer agrees with the past cases
    model = fit_trust(signals, chrf.tolist())
    trust = model.trust(signals)
    assert ((trust >= 0) & (trust <= 1)).all()
    assert np.corrcoef(trust, signals[:, 2])[0, 1] > 0.9
    assert TrustModel.from_state_dict(model.state_dict()) == model
    assert {model.verdict(t, 1.0) for t in (0.1, 0.9)} | {model.verdict(0.9, -1.0)} == set(VERDICTS)


def test_a_trained_checkpoint_carries_its_memory_and_judges_every_answer(tmp_path_factory):
    recommender = Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)
    assert recommender.memory is not None and len(recommender.memory) == len(TINY_PAIRS)
    results = recommender.recommend(["pump vibration high", "the quick brown fox", ""], similar=2)
    for r in results[:2]:
        assert 0.0 <= r.trust <= 1.0 and r.verdict in VERDICTS and len(r.similar) == 2
    assert results[0].similar[0].alert == "pump vibration high"
    assert results[0].similar[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert results[1].verdict == "out-of-scope" and results[1].trust == 0.0  # ranked below every answer in scope
    assert (results[2].trust, results[2].verdict, results[2].similar) == (None, None, [])
    cases, signals = recommender.signals(results[:2], k=1)  # however few cases are shown
    assert [len(found) for found in cases] == [1, 1]
    long_answer = recommender.memory.long_answer([recommender.encode(r.alert).text for r in results[:2]])  # as read
    assert signals[:, FEATURES.index("long_answer")].tolist() == long_answer
    assert recommender.recommend(["pump vibration high"], similar=0)[0].similar == []
    assert recommender.trust_model.unfamiliar_penalty >= 0.0  # fitted with the dev alerts' known words


def test_recommendations_weigh_the_alerts_known_words_in_their_verdict(tmp_path_factory):
    recommender = Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)
    alerts = ["pump vibration high", "valve pump kitchen", "kitchen sink drain blocked"]  # all, half, none known
    assert recommender.memory.known_words(alerts) == [1.0, pytest.approx(2 / 3), 0.0]
    # No similarity is out of scope, but an alert of mostly new words is, whatever its similarity:
    recommender.trust_model = replace(recommender.trust_model, scope_threshold=-1.0, unfamiliar_penalty=3.0)
    assert [r.verdict == "out-of-scope" for r in recommender.recommend(alerts)] == [False, False, True]
    assert [r.verdict == "out-of-scope" for r in recommender.recommend(alerts, batch_size=1)] == [False, False, True]


def test_a_checkpoint_without_a_memory_loads_translates_and_says_so_once(tmp_path_factory, tmp_path, caplog):
    path = tmp_path / "old.pt"
    payload = read_checkpoint(trained(tmp_path_factory.getbasetemp()).best)
    save_atomic({k: v for k, v in payload.items() if k != "memory"}, path)
    with caplog.at_level("WARNING"):
        recommender = Recommender.from_checkpoint(path)
    assert sum("no case memory" in record.message for record in caplog.records) == 1
    with_memory = Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)
    [old] = recommender.recommend(["pump vibration high"])
    [new] = with_memory.recommend(["pump vibration high"])
    assert old.text == new.text and old.similar == []
    # Nothing can tell an unfamiliar alert from a known one without past cases: no answer is called confident
    # (a tiny model's answers are unsure anyway, so each answer here is made certain: probability 1)
    [unrelated] = recommender.recommend(["kitchen sink drain blocked"])
    certain = [replace(r, candidates=[replace(r.candidates[0], log_prob=0.0)]) for r in (old, unrelated)]
    assert [(r.trust, r.verdict) for r in recommender._judge(certain, 3)] == [(1.0, "uncertain")] * 2
    assert torch.equal(old.candidates[0].attention, new.candidates[0].attention)


@pytest.mark.slow
def test_a_well_trained_model_is_confident_on_a_copied_alert_and_not_on_unrelated_words(tmp_path):
    with training_threads():
        result = run_cli(*train_args(tiny_data(tmp_path / "data"), tmp_path / "run", "--epochs", "40"))
    assert result.status == 0, result.stderr
    recommender = Recommender.from_checkpoint(tmp_path / "run" / "best.pt")
    copied, unrelated = recommender.recommend(["valve stuck open", "banana telephone purple"])
    assert copied.text == "inspect valve actuator"
    assert copied.verdict == "confident" and copied.similar[0].alert == "valve stuck open"
    assert copied.similar[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert unrelated.verdict == "out-of-scope" and unrelated.trust < copied.trust

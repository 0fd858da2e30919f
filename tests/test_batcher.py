"""The micro-batcher: concurrent calls share decoder passes and get the answers they would get alone."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import trained

from seq2seq.config import SearchConfig
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.serving.batcher import MicroBatcher

CALLS = [  # (alerts, search settings, past cases): greedy and beam, one alert and several, an empty one
    (["pump vibration high"], SearchConfig(), 3),
    (["belt worn", "valve stuck closed"], SearchConfig(beam_size=3, n_best=2), 1),
    (["oil level low", "", "Fan   Speed LOW"], SearchConfig(), 5),
    (["gearbox noise high and coolant temperature high"], SearchConfig(beam_size=3, n_best=2), 3),
    (["filter clogged", "the quick brown fox"], SearchConfig(), 0),
    (["compressor temperature high " * 6], SearchConfig(beam_size=2), 2),
] * 4


@pytest.fixture(scope="module")
def recommender(tmp_path_factory) -> Recommender:
    return Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)


class CountingRecommender:
    """The recommender, counting its decoding calls (one per decoder pass group)."""

    def __init__(self, recommender: Recommender) -> None:
        self.recommender, self.calls, self.fail = recommender, 0, False
        self.search = recommender.search

    def recommend(self, *args, **kwargs):
        self.calls += 1
        if self.fail:
            raise MemoryError("cannot allocate")
        return self.recommender.recommend(*args, **kwargs)


def all_at_once(batcher: MicroBatcher, calls) -> list:
    start = threading.Barrier(len(calls))

    def call(args):
        alerts, config, similar = args
        start.wait()
        return batcher.recommend(alerts, config, similar)

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(call, calls))


def assert_same(got, expected) -> None:
    assert [r.alert for r in got] == [r.alert for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert [c.text for c in a.candidates] == [c.text for c in b.candidates]
        assert [c.score for c in a.candidates] == pytest.approx([c.score for c in b.candidates], abs=1e-5)
        assert (a.verdict, a.similar, a.warning) == (b.verdict, b.similar, b.warning)
        assert (a.trust is None) == (b.trust is None)
        assert a.trust is None or a.trust == pytest.approx(b.trust, abs=1e-5)


def test_concurrent_calls_with_mixed_settings_get_their_one_by_one_answers_in_fewer_passes(recommender):
    counting = CountingRecommender(recommender)
    batcher = MicroBatcher(counting, max_wait_s=0.2)  # long enough for every thread to arrive on a busy machine
    try:
        answers = all_at_once(batcher, CALLS)
    finally:
        batcher.close()
    for (alerts, config, similar), got in zip(CALLS, answers, strict=True):
        assert_same(got, recommender.recommend(alerts, config, similar=similar))
        assert all(len(r.similar) <= similar for r in got)
    settings = len({config for _, config, _ in CALLS})
    assert settings <= counting.calls < len(CALLS) / 2  # one pass per search setting and batch, not per call
    assert batcher.waiting == 0


def test_a_failed_pass_reaches_each_caller_of_its_group_and_the_batcher_keeps_serving(recommender):
    counting = CountingRecommender(recommender)
    batcher = MicroBatcher(counting, max_wait_s=0.05)
    try:
        counting.fail = True
        with pytest.raises(MemoryError, match="cannot allocate"):
            batcher.recommend(["pump vibration high"])
        counting.fail = False
        assert_same(batcher.recommend(["pump vibration high"]), recommender.recommend(["pump vibration high"]))
    finally:
        batcher.close()
    assert batcher.waiting == 0
    with pytest.raises(RuntimeError, match="closed"):
        batcher.recommend(["pump vibration high"])


def test_a_request_the_model_cannot_take_fails_alone_and_its_group_gets_its_answers(recommender):
    """An alert that is not text (bytes sent to the batcher directly) makes the recommender raise; the callers
    decoded in the same pass still get their one-by-one answers."""
    good = [(["pump vibration high"], SearchConfig(), 3), (["belt worn", "valve stuck closed"], SearchConfig(), 3)]
    poison = ([b"egt high"], SearchConfig(), 3)
    with pytest.raises(TypeError):  # what the recommender raises, unchanged
        recommender.recommend(*poison[:2])
    counting = CountingRecommender(recommender)
    batcher = MicroBatcher(counting, max_wait_s=0.2)

    calls = [*good * 2, poison, *good * 2]
    start = threading.Barrier(len(calls))

    def call(args):
        start.wait()
        try:
            return batcher.recommend(*args)
        except TypeError as err:
            return err

    try:
        with ThreadPoolExecutor(len(calls)) as pool:
            answers = list(pool.map(call, calls))
    finally:
        batcher.close()
    assert isinstance(answers[len(good) * 2], TypeError)
    for (alerts, config, similar), got in zip(good * 4, answers[:4] + answers[5:], strict=True):
        assert_same(got, recommender.recommend(alerts, config, similar=similar))
    assert batcher.waiting == 0


def test_a_batch_never_holds_more_alerts_than_its_bound_unless_one_request_does(recommender):
    sizes = []

    class Sizing(CountingRecommender):
        def recommend(self, alerts, *args, **kwargs):
            sizes.append(len(alerts))
            return super().recommend(alerts, *args, **kwargs)

    batcher = MicroBatcher(Sizing(recommender), max_batch=4, max_wait_s=0.2)
    try:
        calls = [(["pump vibration high", "belt worn", "oil level low"], SearchConfig(), 3)] * 6
        calls.append((["filter clogged"] * 9, SearchConfig(), 3))
        for (alerts, _, _), got in zip(calls, all_at_once(batcher, calls), strict=True):
            assert [r.alert for r in got] == alerts
    finally:
        batcher.close()
    assert sum(sizes) == 27 and max(sizes) <= 3 + 9  # a batch closes at the first request that reaches the bound
    with pytest.raises(ValueError, match="max_batch"):
        MicroBatcher(recommender, max_batch=0)


def test_coroutines_waiting_together_get_their_one_by_one_answers_in_fewer_passes(recommender):
    counting = CountingRecommender(recommender)
    batcher = MicroBatcher(counting, max_wait_s=0.2)

    async def all_together():
        return await asyncio.gather(*(batcher.recommend_async(alerts, config, similar)
                                      for alerts, config, similar in CALLS))

    try:
        answers = asyncio.run(all_together())
    finally:
        batcher.close()
    for (alerts, config, similar), got in zip(CALLS, answers, strict=True):
        assert_same(got, recommender.recommend(alerts, config, similar=similar))
    assert counting.calls < len(CALLS) / 2
    assert batcher.waiting == 0


def test_a_caller_that_stops_waiting_has_its_alerts_left_undecoded(recommender):
    decoded, release = [], threading.Event()

    class Held(CountingRecommender):  # the first pass waits until released, so later calls queue behind it
        def recommend(self, alerts, *args, **kwargs):
            release.wait(timeout=30)
            decoded.extend(alerts)
            return super().recommend(alerts, *args, **kwargs)

    batcher = MicroBatcher(Held(recommender), max_wait_s=0)

    async def one_gives_up():
        first = asyncio.ensure_future(batcher.recommend_async(["pump vibration high"]))
        await asyncio.sleep(0.2)  # the first pass has started and holds the decoding thread
        gone = asyncio.ensure_future(batcher.recommend_async(["belt worn"]))
        kept = asyncio.ensure_future(batcher.recommend_async(["oil level low"]))
        await asyncio.sleep(0.05)
        gone.cancel()  # its client has gone
        # Its cancellation runs on the loop before the decoding thread is let go: else, on a loaded machine, the
        # thread could gather it first and find it not yet abandoned
        given_up = await asyncio.gather(gone, return_exceptions=True)
        release.set()
        return await first, await kept, given_up

    try:
        first, kept, (gone,) = asyncio.run(one_gives_up())
    finally:
        batcher.close()
    assert isinstance(gone, asyncio.CancelledError)
    assert [r.alert for r in first + kept] == ["pump vibration high", "oil level low"]
    assert decoded == ["pump vibration high", "oil level low"]
    assert batcher.waiting == 0


class Clock:
    """``time`` for the batcher's module: monotonic() as set; everything else as the real module."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name):
        import time
        return getattr(time, name)


class Instant:
    """A recommender that answers at once, each alert with no candidate."""

    search = SearchConfig()

    def recommend(self, alerts, *args, **kwargs):
        return [Recommendation(alert, [], [], None, None, None, []) for alert in alerts]


def test_the_drain_rate_counts_the_busy_spell_not_the_quiet_before_it(monkeypatch):
    """A burst after a quiet spell was told to come back in 758 s, 10 times later than it drained: the quiet
    seconds of the rate's window counted as slowness."""
    import seq2seq.serving.batcher as module
    clock = Clock(1000.0)
    monkeypatch.setattr(module, "time", clock)
    batcher = MicroBatcher(Instant(), max_wait_s=0.0)
    try:
        batcher.recommend(["a"])  # answered long ago
        clock.now = 2000.0  # after a quiet spell, a burst: 30 answered in its first 2 s
        for _ in range(30):
            batcher.recommend(["b"])
        clock.now = 2002.0
        assert batcher.rate == pytest.approx(15.0)
        clock.now = 2030.0  # busy since 2000 (none waits now, but the window is the spell's last 10 s)
        assert batcher.rate == 0.0
        batcher.recommend(["c"])  # a new spell: at least one second long
        assert batcher.rate == pytest.approx(1.0)
    finally:
        batcher.close()

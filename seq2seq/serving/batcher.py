"""Concurrent recommendation requests decoded together: a micro-batcher in front of a Recommender.

The UI's ``/recommend`` calls arrive many at once (one per waiting technician). Decoded one by one,
each call pays for a whole decoder pass over a handful of alerts; decoded together, a pass serves up
to ``max_batch`` alerts for little more than the cost of one (docs/serving.md). So each caller hands
its alerts to ``MicroBatcher.recommend`` (a thread, which blocks) or ``recommend_async`` (a coroutine
on the server's event loop, which costs no thread per waiting call) and waits; one decoding thread takes
every request that has arrived, waits at most ``max_wait_s`` for more while it has fewer than
``max_batch`` alerts, groups them by search settings (a beam-5 call never slows a greedy one's
batch into a beam search) and decodes each group with one ``Recommender.recommend`` call.

The answers are the ones each request would get alone: ``Recommender.recommend`` decodes
length-sorted batches whose hypotheses do not depend on their batch-mates (masking; tested), and
past cases are the first ``similar`` of the group's largest ``similar``, which are the same cases in
the same order (ties by memory order). A coroutine cancelled while it waits (its client has gone)
leaves its request behind, and a request left behind is not decoded.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from seq2seq.config import SearchConfig
from seq2seq.recommender import SIMILAR, Recommendation, Recommender

MAX_BATCH = 64  # alerts decoded together: where a batch's cost per alert levels off (docs/benchmarks.md)
MAX_WAIT_S = 0.002  # how long a batch waits for company; under load the queue fills it without waiting
RATE_WINDOW_S = 10.0  # ``rate`` counts the requests answered in this many seconds
# The longest wait a busy answer asks for. A burst's first seconds decode slowly (the batches fill up later), so
# the rate then foretells too long a drain; a caller coming back sooner hears a better estimate (docs/serving.md).
MAX_RETRY_S = 60
MIN_SPAN_S = 1.0  # ``rate``'s shortest span: at a spell's start, one pass would make any rate


@dataclass
class _Request:
    alerts: list[str]
    config: SearchConfig
    similar: int
    done: threading.Event = field(default_factory=threading.Event)
    answer: list[Recommendation] | None = None
    error: BaseException | None = None
    on_done: Callable[[], None] | None = None  # called in the decoding thread once answered
    abandoned: bool = False  # its caller stopped waiting: not decoded if still queued


class MicroBatcher:
    """Thread-safe ``recommend`` whose concurrent calls share decoder passes; ``close`` stops its thread."""

    def __init__(self, recommender: Recommender, max_batch: int = MAX_BATCH, max_wait_s: float = MAX_WAIT_S) -> None:
        if max_batch < 1 or not 0 <= max_wait_s < 1:
            raise ValueError(f"max_batch must be at least 1 and max_wait_s in [0, 1), got {max_batch}, {max_wait_s}")
        self.recommender, self.max_batch, self.max_wait_s = recommender, max_batch, max_wait_s
        self._requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._waiting = 0  # requests handed in and not yet answered
        self._answered: deque[tuple[float, int]] = deque()  # (when, how many requests) per decoded group
        self._busy_since = 0.0  # time.monotonic() when requests last began to wait with none before them
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="micro-batcher", daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        """Requests handed in and not yet answered (the health route reports it)."""
        return self._waiting

    @property
    def rate(self) -> float:
        """Requests answered per second over the last RATE_WINDOW_S of the present busy spell (0 when none): how
        fast a queue drains. Over the whole window, the quiet before a burst counted as slowness, and a burst was
        told to come back ten times later than it drained (docs/serving.md)."""
        with self._lock:
            now = time.monotonic()
            while self._answered and self._answered[0][0] < now - RATE_WINDOW_S:
                self._answered.popleft()
            since = max(now - RATE_WINDOW_S, self._busy_since)
            answered = sum(n for when, n in self._answered if when >= since)
            return answered / max(MIN_SPAN_S, now - since)

    def recommend(self, alerts: list[str], config: SearchConfig | None = None,
                  similar: int = SIMILAR) -> list[Recommendation]:
        """``Recommender.recommend(alerts, config, similar=similar)``, decoded with whatever else is waiting."""
        request = self._submit(alerts, config, similar)
        request.done.wait()
        return _answer(request)

    async def recommend_async(self, alerts: list[str], config: SearchConfig | None = None,
                              similar: int = SIMILAR) -> list[Recommendation]:
        """``recommend`` for a coroutine: waits on the event loop, not in a thread of its own."""
        loop = asyncio.get_running_loop()
        finished = loop.create_future()

        def wake() -> None:
            if not finished.done():  # cancelled meanwhile: nobody to wake
                finished.set_result(None)

        def notify() -> None:  # in the decoding thread
            with contextlib.suppress(RuntimeError):  # the loop has closed: its caller is gone
                loop.call_soon_threadsafe(wake)

        request = self._submit(alerts, config, similar, notify)
        try:
            await finished
        except asyncio.CancelledError:
            request.abandoned = True
            raise
        return _answer(request)

    def _submit(self, alerts: list[str], config: SearchConfig | None, similar: int,
                on_done: Callable[[], None] | None = None) -> _Request:
        if not self._thread.is_alive():
            raise RuntimeError("the micro-batcher is closed")
        request = _Request(list(alerts), config or self.recommender.search, similar, on_done=on_done)
        with self._lock:
            if self._waiting == 0:
                self._busy_since = time.monotonic()
            self._waiting += 1
        self._requests.put(request)
        return request

    def close(self) -> None:
        """Answer what is queued, then stop the decoding thread."""
        self._requests.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (first := self._requests.get()) is not None:
            batch, stop = self._gather(first)
            gone = [request for request in batch if request.abandoned]
            if gone:
                batch = [request for request in batch if not request.abandoned]
                with self._lock:
                    self._waiting -= len(gone)
            for config in dict.fromkeys(request.config for request in batch):
                self._decode([request for request in batch if request.config == config], config)
            if stop:
                return

    def _gather(self, first: _Request) -> tuple[list[_Request], bool]:
        """``first`` and what arrives with it: until ``max_batch`` alerts or ``max_wait_s``; True at close."""
        batch, alerts = [first], len(first.alerts)
        deadline = time.monotonic() + self.max_wait_s
        while alerts < self.max_batch:
            try:
                request = self._requests.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if request is None:
                return batch, True
            batch.append(request)
            alerts += len(request.alerts)
        return batch, False

    def _decode(self, requests: list[_Request], config: SearchConfig) -> None:
        self._settle(requests, config)
        with self._lock:
            self._waiting -= len(requests)
            self._answered.append((time.monotonic(), len(requests)))
        for request in requests:
            request.done.set()
            if request.on_done is not None:
                request.on_done()


    def _settle(self, requests: list[_Request], config: SearchConfig) -> None:
        """Give each request its answer or its error. A group that fails is decoded again one request at a time,
        so that one caller's fault (an alert the tokenizer cannot take) fails that caller alone."""
        try:
            answers = self.recommender.recommend([a for r in requests for a in r.alerts], config, self.max_batch,
                                                 similar=max(r.similar for r in requests))
        except Exception as err:
            if len(requests) == 1:
                requests[0].error = err  # raised in its caller
            else:
                for request in requests:
                    self._settle([request], config)
            return
        except BaseException as err:  # an interrupt: every caller hears of it
            for request in requests:
                request.error = err
            return
        start = 0
        for request in requests:
            mine = answers[start: start + len(request.alerts)]
            request.answer = [replace(r, similar=r.similar[:request.similar]) for r in mine]
            start += len(request.alerts)


def retry_after(in_flight: int, rate: float) -> int:
    """Seconds until ``in_flight`` requests drain at ``rate`` per second, at most MAX_RETRY_S. When none was
    answered lately while some are in flight, passes are slow (heavy searches): a whole rate window, not a prompt
    retry storm."""
    if rate > 0:
        return min(MAX_RETRY_S, max(1, round(in_flight / rate)))
    return round(RATE_WINDOW_S) if in_flight else 1


def _answer(request: _Request) -> list[Recommendation]:
    if request.error is not None:
        raise request.error
    assert request.answer is not None  # set whenever error is not
    return request.answer

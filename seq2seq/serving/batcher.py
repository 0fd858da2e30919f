"""Concurrent recommendation requests decoded together: a micro-batcher in front of a Recommender.

The UI's ``/recommend`` calls run in many threads at once (one per waiting technician). Decoded one
by one, each call pays for a whole decoder pass over a handful of alerts; decoded together, a pass
serves up to ``max_batch`` alerts for little more than the cost of one (docs/serving.md). So each
caller's thread hands its alerts to ``MicroBatcher.recommend`` and waits; one decoding thread takes
every request that has arrived, waits at most ``max_wait_s`` for more while it has fewer than
``max_batch`` alerts, groups them by search settings (a beam-5 call never slows a greedy one's
batch into a beam search) and decodes each group with one ``Recommender.recommend`` call.

The answers are the ones each request would get alone: ``Recommender.recommend`` decodes
length-sorted batches whose hypotheses do not depend on their batch-mates (masking; tested), and
past cases are the first ``similar`` of the group's largest ``similar``, which are the same cases in
the same order (ties by memory order).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace

from seq2seq.config import SearchConfig
from seq2seq.recommender import SIMILAR, Recommendation, Recommender

MAX_BATCH = 64  # alerts decoded together: where a batch's cost per alert levels off (docs/benchmarks.md)
MAX_WAIT_S = 0.002  # how long a batch waits for company; under load the queue fills it without waiting
RATE_WINDOW_S = 10.0  # ``rate`` counts the requests answered in this many seconds


@dataclass
class _Request:
    alerts: list[str]
    config: SearchConfig
    similar: int
    done: threading.Event = field(default_factory=threading.Event)
    answer: list[Recommendation] | None = None
    error: BaseException | None = None


class MicroBatcher:
    """Thread-safe ``recommend`` whose concurrent calls share decoder passes; ``close`` stops its thread."""

    def __init__(self, recommender: Recommender, max_batch: int = MAX_BATCH, max_wait_s: float = MAX_WAIT_S) -> None:
        if max_batch < 1 or not 0 <= max_wait_s < 1:
            raise ValueError(f"max_batch must be at least 1 and max_wait_s in [0, 1), got {max_batch}, {max_wait_s}")
        self.recommender, self.max_batch, self.max_wait_s = recommender, max_batch, max_wait_s
        self._requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._waiting = 0  # requests handed in and not yet answered
        self._answered: deque[tuple[float, int]] = deque()  # (when, how many requests) per decoded group
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="micro-batcher", daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        """Requests handed in and not yet answered (the health route reports it)."""
        return self._waiting

    @property
    def rate(self) -> float:
        """Requests answered per second over the last RATE_WINDOW_S (0 when none): how fast a queue drains."""
        with self._lock:
            since = time.monotonic() - RATE_WINDOW_S
            while self._answered and self._answered[0][0] < since:
                self._answered.popleft()
            return sum(n for _, n in self._answered) / RATE_WINDOW_S

    def recommend(self, alerts: list[str], config: SearchConfig | None = None,
                  similar: int = SIMILAR) -> list[Recommendation]:
        """``Recommender.recommend(alerts, config, similar=similar)``, decoded with whatever else is waiting."""
        if not self._thread.is_alive():
            raise RuntimeError("the micro-batcher is closed")
        request = _Request(list(alerts), config or self.recommender.search, similar)
        with self._lock:
            self._waiting += 1
        self._requests.put(request)
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.answer is not None  # set whenever error is not
        return request.answer

    def close(self) -> None:
        """Answer what is queued, then stop the decoding thread."""
        self._requests.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (first := self._requests.get()) is not None:
            batch, stop = self._gather(first)
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
        try:
            answers = self.recommender.recommend([a for r in requests for a in r.alerts], config, self.max_batch,
                                                 similar=max(r.similar for r in requests))
        except BaseException as err:  # handed to every caller of the group, raised there
            for request in requests:
                request.error = err
        else:
            start = 0
            for request in requests:
                mine = answers[start: start + len(request.alerts)]
                request.answer = [replace(r, similar=r.similar[:request.similar]) for r in mine]
                start += len(request.alerts)
        with self._lock:
            self._waiting -= len(requests)
            self._answered.append((time.monotonic(), len(requests)))
        for request in requests:
            request.done.set()

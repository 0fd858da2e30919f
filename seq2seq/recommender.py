"""The one way to turn alerts into recommendations with a trained model.

``Recommender.from_checkpoint(path)`` is used by the CLI, evaluation, the UI, the batch job and the
tests alike, so every path normalises, truncates, batches and decodes in exactly the same way.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

from seq2seq.checkpoint import load_model, search_defaults
from seq2seq.config import SearchConfig, resolve_device
from seq2seq.data import source_batch
from seq2seq.errors import ConfigError, whole
from seq2seq.fast.folding import fold_embeddings
from seq2seq.fast.quantize import quantize_int8
from seq2seq.fast.threads import MAX_WORKERS, decoded_in_turns
from seq2seq.memory import Case, CaseMemory, itself_first
from seq2seq.model import Seq2Seq
from seq2seq.reading import Source, read_alert
from seq2seq.search import Hypothesis, search
from seq2seq.tokenizer import EOS_ID, Tokenizer
from seq2seq.trust import FEATURES, TRUST_NEIGHBOURS, TrustModel, features, read_memory

T = TypeVar("T")
SIMILAR = 3  # past cases returned per alert unless asked otherwise
MAX_SIMILAR = 100  # past cases per alert: a page of them, not the whole memory
MAX_BATCH = 1 << 20  # alerts decoded together at most: beyond any batch's memory
JUDGED_BATCHES = 4  # decoded batches judged together at most (docs/trust.md: 64 to 256 alerts a look-up)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    """One hypothesis, decoded: text, score, output pieces and its (target x source) attention."""

    text: str
    score: float  # what the search ranked by (Hypothesis.score)
    target_pieces: list[str]
    attention: Tensor  # (len(target_pieces), len(source_pieces))
    log_prob: float  # log P(recommendation | alert)

    @property
    def log_prob_per_piece(self) -> float:
        """log P / pieces: what the trust model reads of the model's own probability (``trust.FEATURES``)."""
        return self.log_prob / max(1, len(self.target_pieces))

    @property
    def confidence(self) -> float:
        """The per-piece probability exp(log P / pieces), the geometric mean of the output pieces' probabilities."""
        return math.exp(self.log_prob_per_piece)


@dataclass(frozen=True)
class Recommendation:
    """The answer for one alert: candidates best first (none for an empty alert), how far to trust the
    first, and the most similar past cases (seq2seq.trust, seq2seq.memory)."""

    alert: str
    source_pieces: list[str]
    candidates: list[Candidate] = field(default_factory=list)
    warning: str | None = None  # e.g. "empty alert" or "alert truncated from 140 to 100 pieces"
    trust: float | None = None  # in [0, 1]; None for an empty alert
    verdict: str | None = None  # one of seq2seq.trust.VERDICTS; None for an empty alert (Recommender._unanswered)
    similar: list[Case] = field(default_factory=list)  # most similar first

    @property
    def text(self) -> str:
        return self.candidates[0].text if self.candidates else ""

    @property
    def score(self) -> float:
        return self.candidates[0].score if self.candidates else float("nan")


def distinct(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates, best first, less any that reads as one before it: two piece sequences can spell one text
    (a lone word-start piece decodes to no more than a space), and a technician would see the same answer twice."""
    seen: set[str] = set()
    return [c for c in candidates if c.text not in seen and not seen.add(c.text)]


def once_each(alerts: list[str], answer: Callable[[list[str]], list[T]]) -> list[T]:
    """``answer(alerts)``, computed once per distinct alert: a maintenance log repeats alerts (MaintNet's training
    problems are 4,935 lines and 3,007 distinct ones), and the same alert gets the same answer wherever it stands."""
    if not isinstance(alerts, (list, tuple)) or not all(isinstance(alert, str) for alert in alerts):  # a str too
        raise TypeError(f"alerts must be a list of strings, one per alert; got {type(alerts).__name__} "
                        f"{str(alerts)[:60]!r}")
    distinct = list(dict.fromkeys(alerts))
    if len(distinct) == len(alerts):
        return answer(alerts)
    found = dict(zip(distinct, answer(distinct), strict=True))
    return [found[alert] for alert in alerts]


class Recommender:
    """A trained translator in evaluation mode, with its tokenizer."""

    def __init__(self, model: Seq2Seq, tokenizer: Tokenizer, device: str | torch.device = "cpu",
                 quantize: bool = False, workers: int = 1, memory: CaseMemory | None = None,
                 trust: TrustModel | None = None, search: SearchConfig | None = None) -> None:
        """``workers`` > 1 decodes that many batches at once, each in its own thread (see ``recommend``).
        Without ``memory`` and ``trust`` no past cases are shown and trust is the per-piece probability.
        ``search``: the settings used when a call names none (a checkpoint's tuned ones)."""
        self.workers = whole("workers", workers, 1, MAX_WORKERS)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.model = model.to(self.device).eval()
        if quantize:  # int8 weights for the linear and GRU layers (seq2seq/fast/quantize.py), CPU only
            self.model = quantize_int8(self.model, self.device)
        self.decoding_model = fold_embeddings(self.model)  # embeddings as per-token tables (fast/folding.py)
        self.quantized = quantize
        self.tokenizer = tokenizer
        self.memory, self.trust_model = memory, trust
        self.search = search or SearchConfig()

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "cpu", quantize: bool = False,
                        workers: int = 1) -> Recommender:
        model, tokenizer, payload = load_model(path)
        memory, trust = read_memory(payload, path)
        if memory is None:
            log.warning("%s: no case memory (a run's best.pt carries it; last.pt and checkpoints written before "
                        "cases were kept do not): no past cases, and every answer is 'uncertain'", path)
        return cls(model, tokenizer, device, quantize, workers, memory, trust, search_defaults(payload, path))

    def with_memory(self, memory: CaseMemory | None, trust: TrustModel | None = None) -> Recommender:
        """This translator with another case memory and trust model; the weights and the decoding tables are
        shared, not copied (two copies decode at different speeds from where each lies in memory)."""
        other = copy.copy(self)
        other.memory, other.trust_model = memory, trust
        return other

    @property
    def max_source_length(self) -> int:
        return self.model.config.max_source_length

    def encode(self, alert: str) -> Source:
        """One alert as the encoder reads it (``reading.read_alert``)."""
        return read_alert(self.tokenizer, alert, self.max_source_length)

    def recommend(self, alerts: list[str], config: SearchConfig | None = None,
                  batch_size: int = 64, similar: int = SIMILAR) -> list[Recommendation]:
        """Recommendations in input order, each with its trust, verdict and ``similar`` past cases;
        length-sorted batches are decoded together, and an alert repeated in ``alerts`` is answered once.

        With ``workers`` > 1 the batches are shared out to that many threads. Each batch's result
        is the same as alone; on a CPU it pays when each thread's operations run on one core
        (``seq2seq.fast.threads.one_core_workers``, as ``seq2seq translate`` runs it): one
        multi-core thread leaves the other cores idle between small operations (docs/benchmarks.md).
        """
        similar = whole("similar", similar, 0, MAX_SIMILAR)
        return once_each(alerts, partial(self._answer, config=config, batch_size=batch_size, similar=similar))

    def _answer(self, alerts: list[str], config: SearchConfig | None, batch_size: int,
                similar: int | None = None) -> list[Recommendation]:
        """Decoded recommendations in input order (no candidates for an unanswered alert), judged with
        ``similar`` past cases unless None, by the workers between their batches (``fast.threads.decoded_in_turns``):
        a file job's look-up then runs beside the decoding, not after it."""
        # range(0, n, -3) is empty: every alert would come back unanswered, without a word
        batch_size = whole("batch size", batch_size, 1, MAX_BATCH)
        if config is not None and not isinstance(config, SearchConfig):  # a dict failed deep in the search
            raise TypeError(f"config must be a seq2seq.config.SearchConfig or None, got {type(config).__name__}")
        config = config or self.search
        encoded = [self.encode(alert) for alert in alerts]
        results: list[Recommendation | None] = [None] * len(alerts)
        order = sorted((i for i, source in enumerate(encoded) if source.ids), key=lambda i: len(encoded[i].ids))
        batches = [order[start: start + batch_size] for start in range(0, len(order), batch_size)]
        # Judged up to JUDGED_BATCHES batches at a time: the look-up's fixed cost per call is shared (docs/trust.md,
        # "Cost of the look-up").
        together = JUDGED_BATCHES if similar is not None and self.memory is not None else 1

        def finish(chunk: list[int], hypotheses: list[list[Hypothesis]]) -> list[Recommendation]:
            answers = [Recommendation(alerts[i], encoded[i].pieces, distinct([self._candidate(h, encoded[i])
                                                                              for h in hyps]), encoded[i].warning)
                       for i, hyps in zip(chunk, hypotheses, strict=True)]
            if similar is None:
                return answers
            read = [encoded[i].text for i, r in zip(chunk, answers, strict=True) if r.candidates]
            judged = self._judge([r for r in answers if r.candidates], similar, read)
            return [next(judged) if r.candidates else r for r in answers]

        sources = [[encoded[i].ids for i in batch] for batch in batches]
        for chunk, answers in decoded_in_turns(batches, sources, partial(self._search, config=config), finish,
                                               self.workers, together):
            for i, answer in zip(chunk, answers, strict=True):
                results[i] = answer
        return [result or self._unanswered(alert, encoded[i], judged=similar is not None)
                for i, (alert, result) in enumerate(zip(alerts, results, strict=True))]

    @staticmethod
    def _unanswered(alert: str, source: Source, judged: bool) -> Recommendation:
        """No answer: an empty alert gets no verdict, and one with no word the model knows is out of scope (trust 0),
        as ``judged`` answers say, not null beside a technician's alert (an alert in a script the model never saw)."""
        if judged and source.unfamiliar:
            return Recommendation(alert, [], [], source.warning, trust=0.0, verdict="out-of-scope")
        return Recommendation(alert, [], [], source.warning)

    def _judge(self, answered: list[Recommendation], similar: int,
               read: list[str] | None = None) -> Iterator[Recommendation]:
        """The recommendations with trust, verdict and past cases (seq2seq.trust); ``read``: as ``signals``."""
        best = [r.candidates[0] for r in answered]
        if self.memory is None or self.trust_model is None:
            # Without past cases nothing tells an unfamiliar alert from a known one: "kitchen sink drain blocked" gets
            # as high a probability as a good answer, so no answer is called confident. The trust still ranks them.
            for r, c in zip(answered, best, strict=True):
                yield replace(r, trust=c.confidence, verdict="uncertain")
            return
        cases, signals = self.signals(answered, similar, read)
        trust = self.trust_model.trust(signals)
        nearest = signals[:, FEATURES.index("nearest_similarity")]
        known = self.memory.known_words([r.alert for r in answered])
        for r, found, t, s, w in zip(answered, cases, trust.tolist(), nearest.tolist(), known, strict=True):
            t, verdict = self.trust_model.judged(t, s, w)
            yield replace(r, trust=t, verdict=verdict, similar=itself_first(r.alert, found)[:similar])

    def signals(self, answered: list[Recommendation], k: int = TRUST_NEIGHBOURS, read: list[str] | None = None,
                ) -> tuple[list[list[Case]], np.ndarray]:
        """The ``k`` nearest past cases of each answered alert and the trust FEATURES of its best candidate; ``read``:
        the alerts as read (``Source.text``), read again if not given."""
        if self.memory is None:
            raise ConfigError("trust signals need a case memory")
        best = [r.candidates[0] for r in answered]
        # what the model read ("low🔥" compared as "low")
        alerts = read if read is not None else [self.encode(r.alert).text for r in answered]
        vectors = self.memory.vectors(alerts)
        cases = self.memory.nearest(alerts, max(k, TRUST_NEIGHBOURS), vectors)
        nearest = [found[:TRUST_NEIGHBOURS] for found in cases]
        agreement, consensus = self.memory.agreement_and_consensus([c.text for c in best], nearest)
        return [found[:k] for found in cases], features(
            [c.log_prob_per_piece for c in best], [found[0].similarity for found in cases], agreement,
            [found[1].similarity if len(found) > 1 else 0.0 for found in cases], consensus,
            self.memory.long_answer(alerts, vectors))

    def translate(self, alerts: list[str], config: SearchConfig | None = None, batch_size: int = 64) -> list[str]:
        """Best recommendation text per alert ("" for an empty alert); no trust or past cases are looked up."""
        return once_each(alerts, lambda distinct: [r.text for r in self._answer(distinct, config, batch_size)])

    @torch.inference_mode()
    def _search(self, id_lists: list[list[int]], config: SearchConfig) -> list[list[Hypothesis]]:
        src, lengths, mask = source_batch(id_lists)
        src, lengths, mask = src.to(self.device), lengths.to(self.device), mask.to(self.device)
        return search(self.decoding_model, src, lengths, mask, config)

    def _candidate(self, hyp: Hypothesis, source: Source) -> Candidate:
        ids = hyp.tokens + ([EOS_ID] if hyp.attention.size(0) > len(hyp.tokens) else [])
        attention = hyp.attention
        if len(source.ids) < len(source.pieces):  # a piece not read gets no attention, and the heatmap still shows it
            attention = attention.new_zeros(attention.size(0), len(source.pieces)).index_copy_(
                1, torch.tensor(source.places, device=attention.device), attention)
        return Candidate(self.tokenizer.decode_target(hyp.tokens), hyp.score,
                         self.tokenizer.target_pieces(ids), attention, hyp.log_prob)

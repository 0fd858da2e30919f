"""The one way to turn alerts into recommendations with a trained model.

``Recommender.from_checkpoint(path)`` is used by the CLI, evaluation, the UI, the batch job and the
tests alike, so every path normalises, truncates, batches and decodes in exactly the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from torch import Tensor

from seq2seq.checkpoint import load_model
from seq2seq.config import SearchConfig, resolve_device
from seq2seq.data import source_batch, truncate_source
from seq2seq.errors import ConfigError
from seq2seq.fast.folding import fold_embeddings
from seq2seq.fast.quantize import quantize_int8
from seq2seq.model import Seq2Seq
from seq2seq.search import Hypothesis, search
from seq2seq.tokenizer import EOS_ID, Tokenizer


@dataclass(frozen=True)
class Candidate:
    """One hypothesis, decoded: text, score, output pieces and its (target x source) attention."""

    text: str
    score: float  # what the search ranked by (Hypothesis.score)
    target_pieces: list[str]
    attention: Tensor  # (len(target_pieces), len(source_pieces))
    log_prob: float  # log P(recommendation | alert)


@dataclass(frozen=True)
class Recommendation:
    """The answer for one alert: candidates best first (none for an empty alert)."""

    alert: str
    source_pieces: list[str]
    candidates: list[Candidate] = field(default_factory=list)
    warning: str | None = None  # e.g. "empty alert" or "alert truncated from 140 to 100 pieces"

    @property
    def text(self) -> str:
        return self.candidates[0].text if self.candidates else ""

    @property
    def score(self) -> float:
        return self.candidates[0].score if self.candidates else float("nan")


class Recommender:
    """A trained translator in evaluation mode, with its tokenizer."""

    def __init__(self, model: Seq2Seq, tokenizer: Tokenizer, device: str | torch.device = "cpu",
                 quantize: bool = False, workers: int = 1) -> None:
        """``workers`` > 1 decodes that many batches at once, each in its own thread (see ``recommend``)."""
        if workers < 1:
            raise ConfigError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.model = model.to(self.device).eval()
        if quantize:  # int8 weights for the linear and GRU layers (seq2seq/quantize.py), CPU only
            self.model = quantize_int8(self.model, self.device)
        self.decoding_model = fold_embeddings(self.model)  # embeddings folded into per-token tables (folding.py)
        self.quantized = quantize
        self.tokenizer = tokenizer

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "cpu", quantize: bool = False,
                        workers: int = 1) -> Recommender:
        model, tokenizer, _ = load_model(path)
        return cls(model, tokenizer, device, quantize, workers)

    @property
    def max_source_length(self) -> int:
        return self.model.config.max_source_length

    def encode(self, alert: str) -> tuple[list[int], list[str], str | None]:
        """Ids and pieces of one alert (EOS last), truncated to the model's limit with a warning."""
        ids = self.tokenizer.encode_source(alert)
        pieces = self.tokenizer.source_pieces(alert)
        if len(ids) <= 1:
            return [], [], "empty alert"
        limit = self.max_source_length
        if len(ids) <= limit:
            return ids, pieces, None
        warning = f"alert truncated from {len(ids)} to {limit} pieces (the model's limit)"
        return truncate_source(ids, limit), truncate_source(pieces, limit), warning

    def recommend(self, alerts: list[str], config: SearchConfig | None = None,
                  batch_size: int = 64) -> list[Recommendation]:
        """Recommendations in input order; length-sorted batches are decoded together.

        With ``workers`` > 1 the batches are shared out to that many threads. Each batch's result
        is the same as alone; on a CPU it pays when each thread's operations run on one core
        (``seq2seq.fast.threads.one_core_workers``, as ``seq2seq translate`` runs it): one
        multi-core thread leaves the other cores idle between small operations (docs/benchmarks.md).
        """
        config = config or SearchConfig()
        encoded = [self.encode(alert) for alert in alerts]
        results: list[Recommendation | None] = [None] * len(alerts)
        order = sorted((i for i, (ids, _, _) in enumerate(encoded) if ids), key=lambda i: len(encoded[i][0]))
        chunks = [order[start: start + batch_size] for start in range(0, len(order), batch_size)]
        decoded = self._decode_batches([[encoded[i][0] for i in chunk] for chunk in chunks], config)
        for chunk, hypotheses in zip(chunks, decoded, strict=True):
            for i, hyps in zip(chunk, hypotheses, strict=True):
                _ids, pieces, warning = encoded[i]
                results[i] = Recommendation(alerts[i], pieces, [self._candidate(h) for h in hyps], warning)
        return [result or Recommendation(alert, [], [], encoded[i][2])
                for i, (alert, result) in enumerate(zip(alerts, results, strict=True))]

    def translate(self, alerts: list[str], config: SearchConfig | None = None, batch_size: int = 64) -> list[str]:
        """Best recommendation text per alert ("" for an empty alert)."""
        return [r.text for r in self.recommend(alerts, config, batch_size)]

    def _decode_batches(self, batches: list[list[list[int]]], config: SearchConfig) -> Iterator[list[list[Hypothesis]]]:
        """Hypotheses of each batch, in order; with several workers the batches are decoded in threads."""
        decode = partial(self._search, config=config)
        if self.workers == 1 or len(batches) < 2:
            yield from map(decode, batches)
            return
        with ThreadPoolExecutor(self.workers) as pool:
            yield from pool.map(decode, batches)

    @torch.inference_mode()
    def _search(self, id_lists: list[list[int]], config: SearchConfig) -> list[list[Hypothesis]]:
        src, lengths, mask = source_batch(id_lists)
        src, lengths, mask = src.to(self.device), lengths.to(self.device), mask.to(self.device)
        return search(self.decoding_model, src, lengths, mask, config)

    def _candidate(self, hyp: Hypothesis) -> Candidate:
        ids = hyp.tokens + ([EOS_ID] if hyp.attention.size(0) > len(hyp.tokens) else [])
        return Candidate(self.tokenizer.decode_target(hyp.tokens), hyp.score,
                         self.tokenizer.target_pieces(ids), hyp.attention, hyp.log_prob)

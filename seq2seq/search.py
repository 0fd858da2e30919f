"""Batched greedy and beam search, each hypothesis with its own attention matrix.

Shapes (legend: seq2seq/__init__.py): B sentences, K beam size, S source length, V target
vocabulary, T output length, n hypotheses finishing at once.

Attention under beam search is tracked through the back-pointers: every alive beam row carries
its history of weights, reordered with the same indices as its tokens, so a finished hypothesis
(each n-best entry included) owns the exact (target x source) matrix it was decoded with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.config import SearchConfig
from seq2seq.decoder import DecoderState, Encoded
from seq2seq.model import Seq2Seq
from seq2seq.tokenizer import BOS_ID, EOS_ID


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # output ids, without BOS and EOS
    score: float  # what the search ranked by: log_prob, divided by the length penalty under beam search
    attention: Tensor  # (T, S_real): one row per output piece (EOS included when emitted)
    log_prob: float  # log P(tokens + EOS | source), summed over the output pieces


def max_lengths(src_lengths: Tensor, config: SearchConfig) -> Tensor:
    """Maximum output pieces per sentence: ratio x source length + a few. (B,) -> (B,)."""
    return (src_lengths.float() * config.max_length_ratio).ceil().long() + config.max_length_extra


def finished_wanted(config: SearchConfig) -> int:
    """Finished hypotheses that end a sentence's beam: ceil(K x patience), rounded first so that a decimal
    patience counts as written (25 x 2.2 is 55, where floats make it 55.000000000000007)."""
    return math.ceil(round(config.beam_size * config.beam_patience, 6))


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normalisation ((5 + |Y|) / 6) ** alpha (Wu et al. 2016)."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def search(model: Seq2Seq, src: Tensor, src_lengths: Tensor, src_mask: Tensor,
           config: SearchConfig) -> list[list[Hypothesis]]:
    """Translate a source batch: for each sentence, its ``n_best`` hypotheses, best first (``config`` was
    checked against ``config_checks.RANGES`` when it was made)."""
    encoded, state = model.encode(src, src_lengths, src_mask)
    limits = max_lengths(src_lengths, config)
    if config.beam_size == 1:
        return [[hyp] for hyp in greedy(model, encoded, state, limits, src_lengths)]
    return beam(model, encoded, state, limits, src_lengths, config)


def greedy(model: Seq2Seq, encoded: Encoded, state: DecoderState, limits: Tensor,
           src_lengths: Tensor) -> list[Hypothesis]:
    """Batched greedy decoding; finished sentences leave the batch."""
    B, S = encoded.mask.shape
    device = encoded.mask.device
    steps = int(limits.max())
    tokens = torch.full((B, steps), EOS_ID, dtype=torch.long, device=device)
    weights = torch.zeros(B, steps, S, device=device)
    scores = torch.zeros(B, device=device)
    out_lengths = limits.clone()  # rows of attention per sentence
    alive = torch.arange(B, device=device)
    prev = torch.full((B,), BOS_ID, dtype=torch.long, device=device)
    for t in range(steps):
        logits, state, step_weights = model.step(prev, state, encoded)
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B, V)
        best, prev = log_probs.max(dim=-1)  # (B_alive,)
        tokens[alive, t] = prev
        weights[alive, t] = step_weights.float()
        scores[alive] += best
        done = (prev == EOS_ID) | (limits[alive] <= t + 1)
        if done.any():
            out_lengths[alive[done]] = t + 1
            keep = (~done).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            alive, prev = alive[keep], prev[keep]
            state, encoded = state.select(keep), encoded.select(keep)
    return [_hypothesis(tokens[b], weights[b], int(out_lengths[b]), float(scores[b]), int(src_lengths[b]))
            for b in range(B)]


def _hypothesis(tokens: Tensor, weights: Tensor, length: int, score: float, src_length: int) -> Hypothesis:
    """Crop a decoded row to its length; the EOS piece keeps its attention row but not its id."""
    ids = tokens[:length].tolist()
    if ids and ids[-1] == EOS_ID:
        ids = ids[:-1]
    return Hypothesis(ids, score, weights[:length, :src_length].cpu(), score)


@dataclass(frozen=True)
class _Finished:
    """Finished hypotheses per original sentence, and how many each has (to end a sentence)."""

    hypotheses: list[list[Hypothesis]]
    counts: Tensor  # (B,)


@dataclass(frozen=True)
class _Beams:
    """Alive beam rows of the sentences still being decoded (row b * K + k)."""

    sentence: Tensor  # (B',) original sentence index of each alive sentence
    scores: Tensor  # (B', K) summed log-probabilities
    tokens: Tensor  # (B' K, t) histories, reordered through the back-pointers
    weights: Tensor  # (B' K, t, S)


def beam(model: Seq2Seq, encoded: Encoded, state: DecoderState, limits: Tensor, src_lengths: Tensor,
         config: SearchConfig) -> list[list[Hypothesis]]:
    """Batched beam search with GNMT length penalty; a sentence ends once ceil(K x ``beam_patience``)
    hypotheses finished and its best alive hypothesis, ending next, would not beat its K-th best finished one
    (``_alive_could_win``).

    With patience 1 (the usual stopping rule) a sentence ends when its K-th hypothesis finishes, and
    short answers finish first: on MaintNet the search then ends before the longer, better
    normalised ones can. A patience above 1 keeps the K beams going until more have finished ("the
    patience factor", Kasai et al. 2022, "A Call for Clarity in Beam Search"); the hypotheses that
    patience 1 finds are among them, so the best score can only rise (docs/recipes.md).
    """
    B, S = encoded.mask.shape
    K = config.beam_size
    wanted = finished_wanted(config)
    device = encoded.mask.device
    tile = torch.arange(B, device=device).repeat_interleave(K)
    encoded, state = encoded.select(tile), state.select(tile)
    scores = torch.zeros(B, K, device=device)
    scores[:, 1:] = -math.inf  # all beams start identical: expand only the first
    beams = _Beams(torch.arange(B, device=device), scores, torch.empty(B * K, 0, dtype=torch.long, device=device),
                   torch.empty(B * K, 0, S, device=device))
    finished = _Finished([[] for _ in range(B)], torch.zeros(B, dtype=torch.long, device=device))
    prev = torch.full((B * K,), BOS_ID, dtype=torch.long, device=device)
    for t in range(int(limits.max())):
        logits, state, step_weights = model.step(prev, state, encoded)
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (B' K, V)
        rows, prev, beams = _advance(beams, log_probs, step_weights.float(), K, finished, config, src_lengths)
        at_limit = limits[beams.sentence] <= t + 1
        _finish_at_limit(beams, at_limit, K, finished, config, src_lengths)
        done = finished.counts[beams.sentence] >= wanted
        if done.any():  # only those the count would end are asked: a Python loop, on every step of the hot path
            done &= ~_alive_could_win(beams, finished, done, config, t + 1)
        done |= at_limit
        state = state.select(rows)  # rows stay inside their sentence's block: encoded needs no reorder
        if done.any():
            keep_rows = (~done).repeat_interleave(K).nonzero().squeeze(1)
            if keep_rows.numel() == 0:
                break
            beams = _Beams(beams.sentence[~done], beams.scores[~done], beams.tokens[keep_rows],
                           beams.weights[keep_rows])
            prev, state, encoded = prev[keep_rows], state.select(keep_rows), encoded.select(keep_rows)
    return [sorted(hyps, key=lambda h: -h.score)[: config.n_best] for hyps in finished.hypotheses]


def _alive_could_win(beams: _Beams, finished: _Finished, asked: Tensor, config: SearchConfig,
                     length: int) -> Tensor:
    """(B',) for each ``asked`` alive sentence (each has finished hypotheses), whether its best alive one
    (``length`` pieces long), were it to end at the next step, would score above its K-th best finished one: then
    the search goes on for it. A sentence's beams can fill with short answers that finish early while the
    likeliest one is still being decoded ("hydraulic pressure low" at beam 3 ended on a clipped answer scoring
    -2.33, where beams 2 and 10 found -0.34). The rule of Hugging Face's beam search (``early_stopping=False``)."""
    K = config.beam_size
    could = torch.zeros_like(asked)
    bound = beams.scores.max(dim=1).values / length_penalty(length + 1, config.length_penalty)  # (B',)
    for i in asked.nonzero().squeeze(1).tolist():
        scores = sorted((h.score for h in finished.hypotheses[int(beams.sentence[i])]), reverse=True)
        could[i] = float(bound[i]) > scores[min(K, len(scores)) - 1]
    return could


def _advance(beams: _Beams, log_probs: Tensor, step_weights: Tensor, K: int,
             finished: _Finished, config: SearchConfig, src_lengths: Tensor
             ) -> tuple[Tensor, Tensor, _Beams]:
    """One expansion: the best K continuations stay alive, EOS candidates ranked in the top K finish.

    Returns the parent rows (back-pointers, flat), the new last tokens and the reordered beams.
    """
    Bp, V = beams.scores.size(0), log_probs.size(-1)
    total = (beams.scores.unsqueeze(-1) + log_probs.view(Bp, K, V)).view(Bp, K * V)
    cand_scores, cand = total.topk(min(2 * K, K * V), dim=-1)  # (B', 2K)
    cand_rows = cand // V + (torch.arange(Bp, device=cand.device) * K).unsqueeze(1)  # flat parent rows
    cand_tokens = cand % V
    rank = torch.arange(cand.size(1), device=cand.device).expand_as(cand)
    is_eos = cand_tokens == EOS_ID
    b, j = (is_eos & (rank < K) & cand_scores.isfinite()).nonzero(as_tuple=True)  # finishing candidates
    if b.numel():
        parents = cand_rows[b, j]
        history = torch.cat([beams.weights[parents], step_weights[parents].unsqueeze(1)], dim=1)  # (n, t+1, S)
        _add_finished(finished, beams.sentence[b], beams.tokens[parents], history, cand_scores[b, j], config,
                      src_lengths)
    order = (rank + is_eos.long() * cand.size(1)).topk(K, dim=-1, largest=False).indices  # non-EOS first
    rows = cand_rows.gather(1, order).view(-1)  # (B' K,)
    tokens = cand_tokens.gather(1, order).view(-1)
    weights = torch.cat([beams.weights[rows], step_weights[rows].unsqueeze(1)], dim=1)  # (B' K, t+1, S)
    history = torch.cat([beams.tokens[rows], tokens.unsqueeze(1)], dim=1)  # (B' K, t+1)
    return rows, tokens, _Beams(beams.sentence, cand_scores.gather(1, order), history, weights)


def _finish_at_limit(beams: _Beams, at_limit: Tensor, K: int, finished: _Finished,
                     config: SearchConfig, src_lengths: Tensor) -> None:
    """Sentences at their maximum length: every alive beam finishes as it is (no EOS)."""
    ending = at_limit.unsqueeze(1) & beams.scores.isfinite()  # (B', K)
    if ending.any():
        b, k = ending.nonzero(as_tuple=True)
        rows = b * K + k
        _add_finished(finished, beams.sentence[b], beams.tokens[rows], beams.weights[rows], beams.scores[b, k],
                      config, src_lengths, eos=False)


def _add_finished(finished: _Finished, sentences: Tensor, tokens: Tensor, weights: Tensor, scores: Tensor,
                  config: SearchConfig, src_lengths: Tensor, eos: bool = True) -> None:
    """n hypotheses at once: original sentence (n,), ids (n, t), attention (n, T, S), summed log-probs (n,)."""
    finished.counts.index_add_(0, sentences, torch.ones_like(sentences))
    penalty = length_penalty(tokens.size(1) + int(eos), config.length_penalty)
    weights = weights.cpu()
    rows = zip(sentences.tolist(), tokens.tolist(), scores.tolist(), weights, src_lengths[sentences].tolist(),
               strict=True)
    for sentence, ids, score, attention, src_length in rows:
        finished.hypotheses[sentence].append(Hypothesis(ids, score / penalty, attention[:, :src_length], score))

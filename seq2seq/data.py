"""Parallel data as tensors: pairs encoded once, batched by a token budget, masks built once.

Shapes: B batch, S source length, T target length. One mask convention: a bool tensor, True = real
token, built only by ``lengths_to_mask``. Files are read by ``seq2seq.corpus``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from seq2seq.corpus import Example
from seq2seq.errors import ConfigError
from seq2seq.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, seed_sampling

Item = TypeVar("Item")


def lengths_to_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """(B,) lengths -> (B, max_len) bool mask, True = real token; max_len defaults to the longest."""
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    return torch.arange(max_len, device=lengths.device) < lengths.unsqueeze(1)  # (B, max_len)


def truncate_source(ids: list[Item], max_length: int) -> list[Item]:
    """A source's ids (or pieces) ending in EOS, cut to at most ``max_length``, the EOS kept last."""
    return ids if len(ids) <= max_length else [*ids[: max_length - 1], ids[-1]]


class ParallelDataset(torch.utils.data.Dataset):
    """Pairs encoded once: items are ``(src_ids, tgt_ids)`` LongTensors.

    ``src_ids`` = source pieces + EOS, at most ``max_source_length`` ids (longer sources are cut,
    EOS kept, and counted in ``truncated_sources``). ``tgt_ids`` = target pieces, no BOS/EOS; a pair
    whose target has more than ``max_target_length`` pieces is dropped and its line recorded in
    ``dropped_long_targets``. ``examples`` holds the kept examples, aligned with the items.
    """

    def __init__(
        self, examples: list[Example], tokenizer: Tokenizer, max_source_length: int, max_target_length: int
    ) -> None:
        if max_source_length < 1 or max_target_length < 1:
            raise ConfigError(
                f"max_source_length and max_target_length must be at least 1, "
                f"got {max_source_length} and {max_target_length}"
            )
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        self.examples: list[Example] = []
        self.truncated_sources = 0
        self.dropped_long_targets: list[int] = []
        self._items: list[tuple[Tensor, Tensor]] = []
        for example in examples:
            target = tokenizer.encode_target(example.target)
            if len(target) > max_target_length:
                self.dropped_long_targets.append(example.line)
                continue
            source = tokenizer.encode_source(example.source)
            if len(source) > max_source_length:
                self.truncated_sources += 1
                source = truncate_source(source, max_source_length)
            self.examples.append(example)
            self._items.append((torch.tensor(source, dtype=torch.long), torch.tensor(target, dtype=torch.long)))

    def resample(self, tokenizer: Tokenizer, alpha: float, seed: int) -> None:
        """Encode every kept pair again with sampled segmentations (``Tokenizer.encode_source(text, alpha)``),
        drawn from ``seed``: the same seed gives the same pieces. The source limit cuts as at first; a
        sampled target over ``max_target_length`` keeps its one best segmentation (which fits)."""
        seed_sampling(seed)
        for index, example in enumerate(self.examples):
            target = tokenizer.encode_target(example.target, alpha)
            if len(target) > self.max_target_length:
                target = tokenizer.encode_target(example.target)
            source = truncate_source(tokenizer.encode_source(example.source, alpha), self.max_source_length)
            self._items[index] = (torch.tensor(source, dtype=torch.long), torch.tensor(target, dtype=torch.long))

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        return self._items[index]

    def source_lengths(self) -> list[int]:
        """Source ids per item, EOS included."""
        return [len(source) for source, _ in self._items]

    def target_lengths(self) -> list[int]:
        """Target pieces per item, without BOS/EOS (the decoder runs one step more)."""
        return [len(target) for _, target in self._items]

    def batch_lengths(self) -> list[int]:
        """``max(source, target + 1)`` per item: the lengths ``TokenBatchSampler`` budgets with."""
        return [max(len(source), len(target) + 1) for source, target in self._items]

    def summary(self) -> str:
        """One line on truncated sources and dropped targets."""
        dropped = self.dropped_long_targets
        lines = ", ".join(str(line) for line in dropped[:10]) + (", ..." if len(dropped) > 10 else "")
        return (
            f"{len(self)} pairs; {self.truncated_sources} sources truncated to {self.max_source_length} pieces; "
            f"{len(dropped)} pairs dropped with a target over {self.max_target_length} pieces"
            + (f" (lines {lines})" if dropped else "")
        )


@dataclass
class Batch:
    src: Tensor  # (B, S) long, source ids + EOS, PAD-padded
    src_lengths: Tensor  # (B,) long, EOS included
    src_mask: Tensor  # (B, S) bool, True = real token
    tgt_in: Tensor  # (B, T) long, BOS + target, PAD-padded (decoder input)
    tgt_out: Tensor  # (B, T) long, target + EOS, PAD-padded (what the decoder must predict)
    tgt_mask: Tensor  # (B, T) bool, True = real token (of tgt_in and tgt_out alike)
    n_tokens: int  # real target tokens, tgt_mask.sum()

    def _map(self, convert) -> Batch:
        tensors = {f.name: convert(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "n_tokens"}
        return Batch(**tensors, n_tokens=self.n_tokens)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """A copy with every tensor on ``device`` (src_lengths too; pack_padded_sequence copies it back)."""
        return self._map(lambda tensor: tensor.to(device, non_blocking=non_blocking))

    def twice(self) -> Batch:
        """The batch followed by itself (2B sentences): R-Drop's two passes through dropout in one."""
        return dataclasses.replace(self._map(lambda tensor: torch.cat([tensor, tensor])), n_tokens=2 * self.n_tokens)

    def pin_memory(self) -> Batch:
        """A copy in pinned memory, called by ``DataLoader(pin_memory=True)``."""
        return self._map(Tensor.pin_memory)


def _pad(sequences: list[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    lengths = torch.tensor([len(sequence) for sequence in sequences], dtype=torch.long)  # (B,)
    padded = pad_sequence(sequences, batch_first=True, padding_value=PAD_ID)  # (B, L)
    return padded, lengths, lengths_to_mask(lengths, padded.size(1))


def source_batch(id_lists: list[list[int]]) -> tuple[Tensor, Tensor, Tensor]:
    """Encoded sources (each ending in EOS) -> ``(src (B, S), src_lengths (B,), src_mask (B, S))`` for inference."""
    if any(len(ids) == 0 for ids in id_lists):
        raise ValueError("every source needs at least one id (encode_source ends each in EOS)")
    return _pad([torch.tensor(ids, dtype=torch.long) for ids in id_lists])


def collate(items: list[tuple[Tensor, Tensor]]) -> Batch:
    """Dataset items -> a Batch: PAD-padded sources, ``tgt_in`` = BOS + target, ``tgt_out`` = target + EOS."""
    sources, targets = zip(*items, strict=True)
    src, src_lengths, src_mask = _pad(list(sources))
    bos, eos = torch.tensor([BOS_ID]), torch.tensor([EOS_ID])
    tgt_in, _, tgt_mask = _pad([torch.cat([bos, target]) for target in targets])
    tgt_out, _, _ = _pad([torch.cat([target, eos]) for target in targets])
    return Batch(src, src_lengths, src_mask, tgt_in, tgt_out, tgt_mask, n_tokens=int(tgt_mask.sum()))


class TokenBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Batches of indices whose padded size ``max length * count`` stays within ``batch_tokens``.

    Without shuffling, all indices are sorted by length and packed in order (deterministic). With
    shuffling, each epoch permutes the indices with ``generator``, cuts them into chunks of about
    ``bucket_batches * batch_tokens`` tokens (roughly ``bucket_batches`` batches), sorts each chunk
    by length so a batch holds similar lengths, packs it, then shuffles the order of all batches.
    Every index appears exactly once per epoch; an item longer than the budget gets a batch alone.
    The batches are a function of the generator's state, which each epoch advances.

    ``__len__`` is exact: during an epoch, that epoch's batch count; otherwise the count the next
    epoch will have, computed on a copy of the generator (so asking does not change the shuffle).
    When shuffling, the count may differ slightly from one epoch to the next.
    """

    def __init__(
        self,
        lengths: list[int],
        batch_tokens: int,
        shuffle: bool,
        generator: torch.Generator | None = None,
        bucket_batches: int = 100,
    ) -> None:
        if batch_tokens < 1 or bucket_batches < 1:
            raise ConfigError(f"batch_tokens and bucket_batches must be positive, got {batch_tokens}, {bucket_batches}")
        self.lengths = list(lengths)
        self.batch_tokens = batch_tokens
        self.shuffle = shuffle
        self.bucket_batches = bucket_batches
        if shuffle and generator is None:
            generator = torch.Generator().manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
        self.generator = generator
        self._epoch_length: int | None = None
        self._sorted_plan: list[list[int]] | None = None

    def _pack(self, order: list[int]) -> list[list[int]]:
        batches, batch, longest = [], [], 0
        for index in order:
            length = self.lengths[index]
            if batch and max(longest, length) * (len(batch) + 1) > self.batch_tokens:
                batches.append(batch)
                batch, longest = [], 0
            batch.append(index)
            longest = max(longest, length)
        if batch:
            batches.append(batch)
        return batches

    def _chunks(self, order: list[int]) -> Iterator[list[int]]:
        budget = self.bucket_batches * self.batch_tokens
        chunk, tokens = [], 0
        for index in order:
            chunk.append(index)
            tokens += self.lengths[index]
            if tokens >= budget:
                yield chunk
                chunk, tokens = [], 0
        if chunk:
            yield chunk

    def _plan(self, generator: torch.Generator | None) -> list[list[int]]:
        by_length = self.lengths.__getitem__
        if not self.shuffle:
            if self._sorted_plan is None:
                self._sorted_plan = self._pack(sorted(range(len(self.lengths)), key=by_length))
            return self._sorted_plan
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        batches = [batch for chunk in self._chunks(order) for batch in self._pack(sorted(chunk, key=by_length))]
        return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]

    def __iter__(self) -> Iterator[list[int]]:
        plan = self._plan(self.generator)
        self._epoch_length = len(plan)
        try:
            yield from plan
        finally:
            self._epoch_length = None

    def __len__(self) -> int:
        if self._epoch_length is not None:
            return self._epoch_length
        if not self.shuffle:
            return len(self._plan(None))
        peek = torch.Generator()
        peek.set_state(self.generator.get_state())
        return len(self._plan(peek))


def drop_source_pieces(batch: Batch, share: float, generator: torch.Generator) -> Batch:
    """``batch`` with each real source piece but EOS replaced by UNK with probability ``share`` (word dropout,
    Sennrich et al. 2016, on SentencePiece pieces): the model learns not to lean on any one piece. (At test time
    an unknown piece is not read at all, ``reading.read_places``, so this is a regulariser, not a lesson in UNK.)"""
    draws = torch.rand(batch.src.shape, generator=generator).to(batch.src.device)  # (B, S)
    drop = (draws < share) & batch.src_mask & (batch.src != EOS_ID)
    return dataclasses.replace(batch, src=batch.src.masked_fill(drop, UNK_ID))

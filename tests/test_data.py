"""Encoded datasets, masks, batches and the token-budget sampler."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from seq2seq.corpus import Example
from seq2seq.data import (
    Batch,
    ParallelDataset,
    TokenBatchSampler,
    collate,
    drop_source_pieces,
    lengths_to_mask,
    source_batch,
)
from seq2seq.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID


@given(st.lists(st.integers(0, 12), min_size=1, max_size=8), st.integers(0, 4))
def test_masked_positions_are_false_beyond_length(lengths, extra):
    width = max(lengths) + extra
    mask = lengths_to_mask(torch.tensor(lengths), width)
    assert mask.dtype == torch.bool and mask.shape == (len(lengths), width)
    for row, length in zip(mask.tolist(), lengths, strict=True):
        assert row == [True] * length + [False] * (width - length)


def test_mask_width_defaults_to_the_longest_length():
    assert lengths_to_mask(torch.tensor([2, 5, 1])).shape == (3, 5)


# dataset


def examples_of(pairs):
    return [Example(source, target, line) for line, (source, target) in enumerate(pairs, 2)]


def test_dataset_items_are_the_tokenizer_encodings(tokenizer, tiny_pairs):
    dataset = ParallelDataset(examples_of(tiny_pairs), tokenizer, 100, 100)
    assert len(dataset) == len(tiny_pairs) and dataset.examples == examples_of(tiny_pairs)
    for (source, target), (src_ids, tgt_ids) in zip(tiny_pairs, dataset, strict=True):
        assert src_ids.dtype == tgt_ids.dtype == torch.long
        assert src_ids.tolist() == tokenizer.encode_source(source)
        assert tgt_ids.tolist() == tokenizer.encode_target(target)


def test_dataset_truncates_long_sources_keeping_eos_last_and_counts_them(tokenizer, tiny_pairs):
    limit = 4
    dataset = ParallelDataset(examples_of(tiny_pairs), tokenizer, limit, 100)
    long_sources = sum(len(tokenizer.encode_source(source)) > limit for source, _ in tiny_pairs)
    assert long_sources > 0 and dataset.truncated_sources == long_sources
    for (source, _), (src_ids, _) in zip(tiny_pairs, dataset, strict=True):
        full = tokenizer.encode_source(source)
        assert src_ids.tolist() == (full if len(full) <= limit else [*full[: limit - 1], EOS_ID])
    assert max(dataset.source_lengths()) == limit


def test_dataset_drops_long_targets_and_records_their_lines(tokenizer, tiny_pairs):
    examples = examples_of(tiny_pairs)
    limit = sorted(len(tokenizer.encode_target(e.target)) for e in examples)[len(examples) // 2]
    dataset = ParallelDataset(examples, tokenizer, 100, limit)
    too_long = [e.line for e in examples if len(tokenizer.encode_target(e.target)) > limit]
    assert too_long and dataset.dropped_long_targets == too_long
    assert len(dataset) == len(examples) - len(too_long)
    assert max(dataset.target_lengths()) <= limit
    assert str(len(too_long)) in dataset.summary()


def test_batch_lengths_are_the_longer_of_source_and_target_plus_eos(tokenizer, tiny_pairs):
    dataset = ParallelDataset(examples_of(tiny_pairs), tokenizer, 100, 100)
    expected = [max(s, t + 1) for s, t in zip(dataset.source_lengths(), dataset.target_lengths(), strict=True)]
    assert dataset.batch_lengths() == expected


# batches


@pytest.fixture
def items():
    return [
        (torch.tensor([5, 6, 7, EOS_ID]), torch.tensor([8, 9])),
        (torch.tensor([5, EOS_ID]), torch.tensor([10, 11, 12, 13])),
        (torch.tensor([EOS_ID]), torch.tensor([14])),
    ]


def test_collate_pads_and_masks_sources(items):
    batch = collate(items)
    assert batch.src.tolist() == [[5, 6, 7, EOS_ID], [5, EOS_ID, PAD_ID, PAD_ID], [EOS_ID, PAD_ID, PAD_ID, PAD_ID]]
    assert batch.src_lengths.tolist() == [4, 2, 1]
    assert torch.equal(batch.src_mask, lengths_to_mask(batch.src_lengths))
    assert torch.equal(batch.src_mask, batch.src != PAD_ID)


def test_collate_puts_bos_before_tgt_in_and_eos_after_tgt_out(items):
    batch = collate(items)
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, 9, 0, 0], [BOS_ID, 10, 11, 12, 13], [BOS_ID, 14, 0, 0, 0]]
    assert batch.tgt_out.tolist() == [[8, 9, EOS_ID, 0, 0], [10, 11, 12, 13, EOS_ID], [14, EOS_ID, 0, 0, 0]]
    assert torch.equal(batch.tgt_mask, batch.tgt_out != PAD_ID)
    assert torch.equal(batch.tgt_in[:, 1:][batch.tgt_mask[:, 1:]], batch.tgt_out[:, :-1][batch.tgt_mask[:, 1:]])
    assert batch.n_tokens == 3 + 5 + 2 == int(batch.tgt_mask.sum())


def test_collate_shapes_and_dtypes(items):
    batch = collate(items)
    B, S, T = 3, 4, 5
    assert batch.src.shape == batch.src_mask.shape == (B, S)
    assert batch.tgt_in.shape == batch.tgt_out.shape == batch.tgt_mask.shape == (B, T)
    assert batch.src_lengths.shape == (B,)
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == batch.src_lengths.dtype == torch.long
    assert batch.src_mask.dtype == batch.tgt_mask.dtype == torch.bool


def test_source_batch_matches_the_sources_of_collate(items):
    src, src_lengths, src_mask = source_batch([source.tolist() for source, _ in items])
    batch = collate(items)
    assert torch.equal(src, batch.src) and torch.equal(src_lengths, batch.src_lengths)
    assert torch.equal(src_mask, batch.src_mask)


def test_batch_to_moves_every_tensor_and_keeps_the_token_count(items):
    moved = collate(items).to("meta")
    tensors = [moved.src, moved.src_lengths, moved.src_mask, moved.tgt_in, moved.tgt_out, moved.tgt_mask]
    assert all(tensor.device.type == "meta" for tensor in tensors)
    assert isinstance(moved, Batch) and moved.n_tokens == 10


def test_pin_memory_pins_every_tensor_and_keeps_the_token_count(items, monkeypatch):
    """DataLoader(pin_memory=True) calls Batch.pin_memory(); pinning itself needs CUDA, so record the calls."""
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda tensor: pinned.append(tensor) or tensor)
    batch = collate(items)
    result = batch.pin_memory()
    assert isinstance(result, Batch) and result.n_tokens == batch.n_tokens
    assert len(pinned) == 6 and any(t is batch.src_mask for t in pinned) and any(t is batch.tgt_out for t in pinned)


def test_dataloader_with_the_token_sampler_yields_budgeted_batches(tokenizer, tiny_pairs):
    dataset = ParallelDataset(examples_of(tiny_pairs), tokenizer, 100, 100)
    sampler = TokenBatchSampler(dataset.batch_lengths(), 60, shuffle=True, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate)
    batches = list(loader)
    assert sum(batch.src.size(0) for batch in batches) == len(dataset)
    assert all(max(batch.src.size(1), batch.tgt_in.size(1)) * batch.src.size(0) <= 60 for batch in batches)


# token batch sampler


lengths_strategy = st.lists(st.integers(1, 30), max_size=80)


@given(lengths_strategy, st.integers(1, 120), st.booleans(), st.integers(0, 2**32), st.integers(1, 4))
def test_sampler_covers_every_index_once_and_respects_the_budget(lengths, budget, shuffle, seed, bucket_batches):
    generator = torch.Generator().manual_seed(seed)
    sampler = TokenBatchSampler(lengths, budget, shuffle, generator, bucket_batches=bucket_batches)
    for _ in range(2):
        batches = list(sampler)
        assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
        for batch in batches:
            assert batch
            assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= budget


@given(lengths_strategy, st.integers(1, 120), st.booleans(), st.integers(0, 2**32))
def test_sampler_len_is_the_number_of_batches_the_epoch_yields(lengths, budget, shuffle, seed):
    sampler = TokenBatchSampler(lengths, budget, shuffle, torch.Generator().manual_seed(seed), bucket_batches=2)
    for _ in range(3):
        expected = len(sampler)
        yielded = 0
        for _ in sampler:
            assert len(sampler) == expected
            yielded += 1
        assert yielded == expected


def test_sampler_is_deterministic_per_generator_seed_and_asking_len_changes_nothing():
    lengths = [(7 * i) % 23 + 1 for i in range(200)]

    def epochs(seed, ask_len):
        sampler = TokenBatchSampler(lengths, 50, True, torch.Generator().manual_seed(seed), bucket_batches=3)
        return [(len(sampler) if ask_len else None, list(sampler))[1] for _ in range(3)]

    assert epochs(1, ask_len=False) == epochs(1, ask_len=True)
    assert epochs(1, ask_len=False) != epochs(2, ask_len=False)


def test_sampler_reshuffles_across_epochs():
    lengths = [(7 * i) % 23 + 1 for i in range(200)]
    sampler = TokenBatchSampler(lengths, 50, True, torch.Generator().manual_seed(0), bucket_batches=3)
    assert list(sampler) != list(sampler)


def test_sampler_without_shuffle_sorts_by_length_and_repeats_itself():
    lengths = [(7 * i) % 23 + 1 for i in range(200)]
    sampler = TokenBatchSampler(lengths, 50, shuffle=False)
    batches = list(sampler)
    order = [index for batch in batches for index in batch]
    assert [lengths[i] for i in order] == sorted(lengths)
    assert list(sampler) == batches and len(sampler) == len(batches)


def test_sampler_buckets_similar_lengths_together():
    lengths = [1, 30] * 100
    sampler = TokenBatchSampler(lengths, 60, True, torch.Generator().manual_seed(0), bucket_batches=100)
    assert all(len({lengths[i] for i in batch}) == 1 for batch in sampler)


def test_an_item_longer_than_the_budget_gets_a_batch_alone():
    sampler = TokenBatchSampler([3, 100, 3], 10, shuffle=False)
    assert list(sampler) == [[0, 2], [1]]


def test_word_dropout_hides_real_source_pieces_as_unk_at_about_its_rate_and_never_eos_or_padding():
    ids = [[*range(10, 10 + n), EOS_ID] for n in (40, 25, 7)]
    batch = collate([(torch.tensor(src), torch.tensor([5])) for src in ids])
    dropped = drop_source_pieces(batch, 0.3, torch.Generator().manual_seed(0))
    changed = dropped.src != batch.src
    assert torch.all(dropped.src[changed] == UNK_ID)
    assert not changed[~batch.src_mask].any() and not changed[batch.src == EOS_ID].any()
    real = batch.src_mask & (batch.src != EOS_ID)
    assert 0.15 < changed.sum().item() / real.sum().item() < 0.45  # 72 pieces at 0.3
    assert torch.equal(dropped.tgt_in, batch.tgt_in) and torch.equal(dropped.src_mask, batch.src_mask)
    assert torch.equal(drop_source_pieces(batch, 0.0, torch.Generator()).src, batch.src)

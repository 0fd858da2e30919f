import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from seq2seq.data import (
    EMBEDDED_DATA,
    Batch,
    Example,
    ParallelDataset,
    TokenBatchSampler,
    collate,
    lengths_to_mask,
    read_parallel,
    source_batch,
)
from seq2seq.errors import DataError
from seq2seq.tokenizer import BOS_ID, EOS_ID, PAD_ID


def pairs_of(corpus):
    return [(example.source, example.target) for example in corpus.examples]


def one_line_error(call, *args, **kwargs) -> str:
    with pytest.raises(DataError) as error:
        call(*args, **kwargs)
    message = str(error.value)
    assert message and "\n" not in message
    return message


# reading: every format round-trips


def test_embedded_data_points_at_the_repository_data_folder():
    assert EMBEDDED_DATA.name == "data" and (EMBEDDED_DATA.parent / "seq2seq" / "data.py").is_file()


def test_tsv_round_trips_pairs_with_physical_line_numbers(tmp_tsv, tiny_pairs):
    corpus = read_parallel(tmp_tsv(tiny_pairs))
    assert pairs_of(corpus) == tiny_pairs
    assert [example.line for example in corpus.examples] == list(range(2, len(tiny_pairs) + 2))
    assert corpus.skipped == []


def test_csv_round_trips_quoted_commas_quotes_and_newlines(write_file):
    text = 'id,source,target\n1,"pump, main","say ""hi"""\n2,"two\nlines",fix it\n3,fan hot,cool fan\n'
    corpus = read_parallel(write_file("pairs.csv", text))
    assert pairs_of(corpus) == [("pump, main", 'say "hi"'), ("two\nlines", "fix it"), ("fan hot", "cool fan")]
    assert [example.line for example in corpus.examples] == [2, 3, 5]


def test_jsonl_round_trips_and_ignores_extra_keys_and_blank_lines(write_file, tiny_pairs):
    lines = [json.dumps({"id": i, "source": s, "target": t}) for i, (s, t) in enumerate(tiny_pairs)]
    corpus = read_parallel(write_file("pairs.jsonl", "\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:])))
    assert pairs_of(corpus) == tiny_pairs
    assert corpus.examples[3].line == 5


def test_aligned_src_and_tgt_files_round_trip(write_file, tiny_pairs):
    source = write_file("pairs.src", "\n".join(s for s, _ in tiny_pairs) + "\n")
    write_file("pairs.tgt", "\n".join(t for _, t in tiny_pairs) + "\n")
    assert pairs_of(read_parallel(source)) == tiny_pairs


def test_aligned_files_with_an_explicit_target_path_round_trip(write_file, tiny_pairs):
    source = write_file("alerts.txt", "\n".join(s for s, _ in tiny_pairs))
    target = write_file("advice.txt", "\n".join(t for _, t in tiny_pairs))
    assert pairs_of(read_parallel(source, target_path=target)) == tiny_pairs


def test_maintnet_header_ident_problem_action_is_picked_automatically(tmp_tsv):
    rows = [("17", "PUMP LEAKING", "REPLACED SEAL"), ("18", "FAN NOISY", "LUBED FAN")]
    corpus = read_parallel(tmp_tsv(rows, header=("ident", "problem", "action")))
    assert pairs_of(corpus) == [("PUMP LEAKING", "REPLACED SEAL"), ("FAN NOISY", "LUBED FAN")]


def test_explicit_columns_win_and_names_match_ignoring_case(tmp_tsv):
    path = tmp_tsv([("a", "b", "c")], header=("Source", "Alt", "TARGET"))
    assert pairs_of(read_parallel(path)) == [("a", "c")]
    assert pairs_of(read_parallel(path, source_column="alt", target_column="Source")) == [("b", "a")]


def test_tsv_keeps_stray_double_quotes_and_reads_the_next_lines(tmp_tsv):
    rows = [('BOLT 1/2" LOOSE', "TIGHTENED BOLT"), ('"B" NUT MISSING', 'REPLACED 3/4" NUT'), ("FAN", "FIXED")]
    corpus = read_parallel(tmp_tsv(rows))
    assert pairs_of(corpus) == rows
    assert [example.line for example in corpus.examples] == [2, 3, 4]


def test_crlf_line_endings_and_a_byte_order_mark_are_accepted(write_file):
    path = write_file("pairs.tsv", b"\xef\xbb\xbfsource\ttarget\r\npump hot\tcool pump\r\n")
    assert pairs_of(read_parallel(path)) == [("pump hot", "cool pump")]


def test_raw_text_is_kept_only_stripped(tmp_tsv):
    corpus = read_parallel(tmp_tsv([("  PUMP   Hot ", " Cool  the pump ")]))
    assert corpus.examples == [Example("PUMP   Hot", "Cool  the pump", 2)]


def test_empty_pairs_are_skipped_counted_and_reported(tmp_tsv):
    rows = [("pump hot", "cool pump"), ("", "orphan"), ("fan hot", " \u3000 "), ("fan", "fix")]
    corpus = read_parallel(tmp_tsv(rows))
    assert pairs_of(corpus) == [("pump hot", "cool pump"), ("fan", "fix")]
    assert corpus.skipped == [(3, "empty source"), (4, "empty target")]
    assert "skipped 2 of 4 pairs" in corpus.summary() and "lines 3, 4" in corpus.summary()


# reading: every bad input is a one-line DataError naming the file and the line


def test_missing_file_is_reported(tmp_path):
    assert one_line_error(read_parallel, tmp_path / "x.tsv") == f"{tmp_path / 'x.tsv'}: file not found"


def test_missing_column_lists_the_columns_found(tmp_tsv):
    path = tmp_tsv([("1", "a", "b")], header=("ident", "problem", "action"))
    message = one_line_error(read_parallel, path, source_column="src")
    assert message == f"{path}: no column 'src' (columns found: ident, problem, action)"


def test_missing_default_columns_name_both_defaults(tmp_tsv):
    message = one_line_error(read_parallel, tmp_tsv([("a", "b")], header=("alert", "target")))
    assert "'source' or 'problem'" in message and "alert, target" in message


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("x.tsv", "source\ttarget\tid\na\tb\t1\nc\td\n", "line 3: expected 3 tab-separated fields, found 2"),
        ("x.csv", "source,target\na,b,c\n", "line 2: expected 2 comma-separated fields, found 3"),
        ("x.csv", 'source,target\na,b\n"open,never closed\n', "line 3: malformed comma-separated record"),
        ("x.tsv", "source\ttarget\na\rb\tc\n", "line 2: malformed tab-separated record"),
        ("x.jsonl", '{"source": "a", "target": "b"}\n{"source": "a",\n', "line 2: invalid JSON"),
        ("x.jsonl", '{"source": "a", "target": "b"}\n["a", "b"]\n', "line 2: expected a JSON object"),
        ("x.jsonl", '{"source": "a", "target": "b"}\n{"source": "a"}\n', "line 2: no key 'target'"),
        ("x.jsonl", '{"source": "a", "target": 7}\n', "line 1: 'target' must be a string, found a number"),
        ("x.jsonl", '{"alert": "a", "target": "b"}\n', "line 1: no key 'source' or 'problem'"),
        ("x.tsv", "", "empty file"),
        ("x.tsv", "source\ttarget\n", "no usable pairs"),
        ("x.tsv", "source\ttarget\n\t\n \tb\n", "no usable pairs (all 2 have an empty source or target)"),
        ("x.src", "a\n", "unknown format"),
        ("x.xlsx", "a\n", "unknown format"),
    ],
)
def test_malformed_input_is_a_one_line_data_error_naming_file_and_line(write_file, name, content, expected):
    path = write_file(name, content)
    message = one_line_error(read_parallel, path)
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_invalid_utf8_names_line_byte_and_character_column(write_file):
    path = write_file("x.tsv", b"source\ttarget\nok\tfine\n" + "né\t".encode() + b"\xff bad\n")
    assert one_line_error(read_parallel, path) == f"{path}: line 3: not valid UTF-8 (byte 0xff at column 4)"


def test_aligned_files_with_different_line_counts_are_rejected(write_file):
    source = write_file("x.src", "a\nb\nc\n")
    target = write_file("x.tgt", "a\nb\n")
    message = one_line_error(read_parallel, source)
    assert str(source) in message and str(target) in message and "line 3" in message


def test_blank_lines_in_aligned_files_are_skipped_pairs_not_misalignment(write_file):
    source = write_file("x.src", "pump hot\n\nfan hot\n")
    write_file("x.tgt", "cool pump\norphan\ncool fan\n")
    corpus = read_parallel(source)
    assert [example.line for example in corpus.examples] == [1, 3]
    assert corpus.skipped == [(2, "empty source")]


# masks


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs CUDA")
def test_dataloader_can_pin_batches(items):
    batch = next(iter(DataLoader(items, batch_size=3, collate_fn=collate, pin_memory=True)))
    assert isinstance(batch, Batch) and batch.src.is_pinned() and batch.tgt_mask.is_pinned()


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

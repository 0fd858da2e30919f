"""Properties of every cross-attention mechanism behind the one interface."""

from __future__ import annotations

import pytest
import torch

from seq2seq.attention import ATTENTION_NAMES, build_attention, masked_softmax
from seq2seq.data import lengths_to_mask
from seq2seq.errors import ConfigError

B, T, S, Q, M, A = 3, 4, 6, 8, 8, 5


def setup(name: str):
    torch.manual_seed(0)
    attention = build_attention(name, Q, M, A)
    query = torch.randn(B, T, Q)
    memory = torch.randn(B, S, M)
    mask = lengths_to_mask(torch.tensor([6, 3, 1]), S)
    return attention, query, memory, mask


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_weights_are_a_distribution_over_real_positions(name):
    attention, query, memory, mask = setup(name)
    context, weights = attention(query, attention.project_keys(memory), memory, mask)
    assert context.shape == (B, T, M)
    assert weights.shape == (B, T, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))
    assert (weights >= 0).all()


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_masked_source_positions_get_exactly_zero_weight(name):
    attention, query, memory, mask = setup(name)
    _, weights = attention(query, attention.project_keys(memory), memory, mask)
    assert (weights.masked_select(~mask.unsqueeze(1).expand_as(weights)) == 0).all()


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_padding_the_batch_further_changes_no_result(name):
    attention, query, memory, mask = setup(name)
    padded_memory = torch.cat([memory, torch.randn(B, 3, M)], dim=1)  # garbage beyond the mask
    padded_mask = torch.cat([mask, torch.zeros(B, 3, dtype=torch.bool)], dim=1)
    context, weights = attention(query, attention.project_keys(memory), memory, mask)
    context2, weights2 = attention(query, attention.project_keys(padded_memory), padded_memory, padded_mask)
    torch.testing.assert_close(context2, context)
    torch.testing.assert_close(weights2[:, :, :S], weights)
    assert (weights2[:, :, S:] == 0).all()


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_attention_keeps_no_state_between_calls(name):
    attention, query, memory, mask = setup(name)
    keys = attention.project_keys(memory)
    first = attention(query, keys, memory, mask)
    attention(torch.randn(B, T, Q), keys, memory, mask)
    second = attention(query, keys, memory, mask)
    torch.testing.assert_close(first, second)


@pytest.mark.parametrize("name", ATTENTION_NAMES)
def test_each_query_step_is_scored_independently(name):
    attention, query, memory, mask = setup(name)
    keys = attention.project_keys(memory)
    context, weights = attention(query, keys, memory, mask)
    for t in range(T):
        c_t, w_t = attention(query[:, t: t + 1], keys, memory, mask)
        torch.testing.assert_close(c_t[:, 0], context[:, t])
        torch.testing.assert_close(w_t[:, 0], weights[:, t])


def test_unknown_attention_name_lists_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        build_attention("luong-cosine", Q, M, A)
    for name in ATTENTION_NAMES:
        assert name in str(err.value)


def test_luong_dot_needs_equal_query_and_memory_sizes():
    with pytest.raises(ConfigError, match="luong-dot"):
        build_attention("luong-dot", 8, 16, A)


def test_masked_softmax_gives_zero_to_masked_and_sums_to_one():
    scores = torch.tensor([[1.0, 50.0, -3.0, 1e4]])
    mask = torch.tensor([[True, True, True, False]])
    weights = masked_softmax(scores, mask)
    assert weights[0, 3] == 0
    torch.testing.assert_close(weights.sum(-1), torch.ones(1))

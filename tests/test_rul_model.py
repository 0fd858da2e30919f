"""The RUL model: promised shapes, attention properties, padding invariance, purity."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from seq2seq.config import RulConfig
from seq2seq.errors import ConfigError
from seq2seq.rul.model import HEALTH_CLASSES, RulModel, TemporalAttention, build_rul_model

F = 3
W = 9
TINY = RulConfig(window=W, rul_cap=50, conv_channels=6, kernel_size=3, lstm_hidden=5, attention_hidden=4,
                 dropout=0.2)



pytestmark = pytest.mark.usefixtures("one_thread")

def tiny_model(config: RulConfig = TINY, seed: int = 0) -> RulModel:
    torch.manual_seed(seed)
    return build_rul_model(config, F).eval()


def left_padded(lengths: list[int], width: int = W, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows whose first width - length cycles are padding filled with large garbage."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), width, F, generator=generator)
    mask = torch.zeros(len(lengths), width, dtype=torch.bool)
    for row, length in enumerate(lengths):
        mask[row, width - length:] = True
    x = torch.where(mask.unsqueeze(-1), x, 1e3 * torch.rand(x.shape, generator=generator))
    return x, mask


def pad_left(x: torch.Tensor, mask: torch.Tensor, extra: int) -> tuple[torch.Tensor, torch.Tensor]:
    B, _, _ = x.shape
    garbage = torch.full((B, extra, F), -777.0)
    return torch.cat([garbage, x], dim=1), torch.cat([torch.zeros(B, extra, dtype=torch.bool), mask], dim=1)


def test_forward_returns_the_promised_shapes():
    x, mask = left_padded([9, 4, 1, 7])
    output = tiny_model()(x, mask)
    assert output.rul.shape == (4,)
    assert output.health_logits.shape == (4, HEALTH_CLASSES)
    assert output.attention.shape == (4, W)
    assert output.rul.dtype == output.health_logits.dtype == output.attention.dtype == torch.float32


def test_temporal_attention_returns_the_promised_shapes_and_weights_sum_to_one():
    torch.manual_seed(0)
    attention = TemporalAttention(input_size=6, hidden_size=4)
    states = torch.randn(3, 5, 6)
    mask = torch.tensor([[True] * 5, [False, False, True, True, True], [False] * 4 + [True]])
    context, weights = attention(states, mask)
    assert context.shape == (3, 6)
    assert weights.shape == (3, 5)
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(3))
    assert torch.all(weights[~mask] == 0)
    torch.testing.assert_close(context[2], states[2, 4])


def test_attention_sums_to_one_and_padded_cycles_get_exactly_zero():
    x, mask = left_padded([9, 5, 1, 3])
    weights = tiny_model()(x, mask).attention
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(4))
    assert torch.all(weights[~mask] == 0)
    assert torch.all(weights[mask] > 0)


@pytest.mark.parametrize("extra", [1, 6])
def test_left_padding_the_batch_further_changes_no_output(extra):
    model = tiny_model()
    x, mask = left_padded([9, 6, 2, 1])
    before = model(x, mask)
    after = model(*pad_left(x, mask, extra))
    torch.testing.assert_close(after.rul, before.rul)
    torch.testing.assert_close(after.health_logits, before.health_logits)
    torch.testing.assert_close(after.attention[:, extra:], before.attention)
    assert torch.all(after.attention[:, :extra] == 0)


def test_a_window_gives_the_same_result_alone_and_in_a_mixed_batch():
    model = tiny_model()
    x, mask = left_padded([3, 9, 5])
    batch = model(x, mask)
    for row in range(3):
        alone = model(x[row:row + 1], mask[row:row + 1])
        torch.testing.assert_close(alone.rul, batch.rul[row:row + 1])
        torch.testing.assert_close(alone.attention, batch.attention[row:row + 1])


def test_a_short_window_equals_the_same_cycles_unpadded():
    model = tiny_model()
    x, mask = left_padded([4])
    padded = model(x, mask)
    unpadded = model(x[:, -4:], mask[:, -4:])
    torch.testing.assert_close(padded.rul, unpadded.rul)
    torch.testing.assert_close(padded.attention[:, -4:], unpadded.attention)


def test_padded_cycles_receive_no_gradient_in_training_mode():
    model = tiny_model(replace(TINY, dropout=0.0)).train()
    x, mask = left_padded([9, 3, 1])
    x.requires_grad_(True)
    output = model(x, mask)
    (output.rul.sum() + output.health_logits.sum()).backward()
    assert torch.all(x.grad[~mask] == 0)
    assert torch.any(x.grad[mask] != 0)


def test_forward_is_pure_in_eval_mode():
    model = tiny_model()
    x, mask = left_padded([9, 2])
    first, second = model(x, mask), model(x.clone(), mask.clone())
    assert torch.equal(first.rul, second.rul)
    assert torch.equal(first.health_logits, second.health_logits)
    assert torch.equal(first.attention, second.attention)


def test_rul_is_in_cycles_and_clamped_at_zero_in_eval_mode_only():
    model = tiny_model()
    with torch.no_grad():
        model.rul_head.weight.zero_()
        model.rul_head.bias.fill_(-0.2)
    x, mask = left_padded([9, 4])
    assert torch.all(model.eval()(x, mask).rul == 0)
    torch.testing.assert_close(model.train()(x, mask).rul, torch.full((2,), -0.2 * TINY.rul_cap))
    with torch.no_grad():
        model.rul_head.bias.fill_(0.5)
    torch.testing.assert_close(model.eval()(x, mask).rul, torch.full((2,), 0.5 * TINY.rul_cap))


def test_a_window_without_real_cycles_is_rejected():
    x, mask = left_padded([9, 1])
    mask[1] = False
    with pytest.raises(ValueError, match="at least one real cycle"):
        tiny_model()(x, mask)


def test_two_lstm_layers_keep_the_padding_invariance():
    model = tiny_model(replace(TINY, lstm_layers=2))
    x, mask = left_padded([7, 2])
    torch.testing.assert_close(model(*pad_left(x, mask, 3)).rul, model(x, mask).rul)


@pytest.mark.parametrize("field, value", [("kernel_size", 4), ("conv_channels", 0), ("dropout", 1.0)])
def test_impossible_sizes_are_a_config_error(field, value):
    with pytest.raises(ConfigError, match=field):
        build_rul_model(replace(TINY, **{field: value}), F)


@pytest.mark.parametrize("lengths", [[9, 9, 9], [9, 4, 9, 1], [3, 5]])
@pytest.mark.parametrize("layers", [1, 2])
def test_training_s_dense_path_for_full_rows_is_the_packed_lstm_s_function_and_gradient(lengths, layers):
    model = tiny_model(replace(TINY, dropout=0.0, lstm_layers=layers)).train()
    x, mask = left_padded(lengths)
    features = model.extract(x, mask).detach().requires_grad_(True)
    weights = torch.randn(len(lengths), W, 2 * TINY.lstm_hidden)  # a loss that reaches every state
    dense = model.encode(features, mask)
    (dense * weights).sum().backward()
    dense_grads = features.grad.clone(), [p.grad.clone() for p in model.lstm.parameters()]
    features.grad = None
    model.zero_grad()
    packed = model._packed(features, mask, mask.sum(dim=1))
    (packed * weights).sum().backward()
    torch.testing.assert_close(dense, packed)
    assert torch.all(dense[~mask] == 0)  # padded cycles stay 0
    torch.testing.assert_close(dense_grads[0], features.grad)
    for got, expected in zip(dense_grads[1], [p.grad for p in model.lstm.parameters()], strict=True):
        torch.testing.assert_close(got, expected)


def test_evaluation_takes_the_packed_path_alone_so_saved_models_give_the_same_numbers():
    model = tiny_model()
    x, mask = left_padded([9, 4, 9])
    features = model.extract(x, mask)
    assert torch.equal(model.encode(features, mask), model._packed(features, mask, mask.sum(dim=1)))

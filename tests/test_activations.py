"""seq2seq.fast.activations.tanh is torch.tanh: within 3 ulp, special values, torch.tanh itself under autograd,
whichever form this CPU's timing chose; each form chosen gives what it computes."""

from __future__ import annotations

import math

import pytest
import torch

from seq2seq.fast import activations
from seq2seq.fast.activations import tanh, tanh_from_expm1

BOTH_FORMS = pytest.mark.parametrize("form", [tanh, tanh_from_expm1], ids=["as chosen", "from expm1"])


def ulps(got: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Distance in units of the last place of float32 at ``expected``."""
    spacing = torch.nextafter(expected.abs().float(), torch.tensor(math.inf)) - expected.abs().float()
    return (got.double() - expected.double()).abs() / spacing.double()


@BOTH_FORMS
def test_values_match_torch_tanh_to_the_last_places_over_the_float_range(form):
    magnitudes = torch.logspace(-38, 2, 200_000, dtype=torch.float64).float()
    x = torch.cat([magnitudes, -magnitudes, torch.randn(100_000) * 3])
    exact = torch.tanh(x.double())
    assert ulps(form(x), exact).max() <= 3
    assert ulps(torch.tanh(x), exact).max() <= 1  # torch's own, for scale


@BOTH_FORMS
def test_special_values(form):
    x = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 88.0, -88.0, 1e30])
    got = form(x)
    assert got[:4].tolist() == [0.0, -0.0, 1.0, -1.0] and math.copysign(1, got[1]) == -1
    assert math.isnan(got[4]) and got[5] == 1e-45 and got[6] == -1e-45
    assert got[7:].tolist() == [1.0, -1.0, 1.0]


@BOTH_FORMS
def test_input_is_not_changed_and_shapes_and_dtypes_are_kept(form):
    x = torch.randn(3, 1, 4, 5).double()
    before = x.clone()
    y = form(x)
    assert torch.equal(x, before) and y.shape == x.shape and y.dtype == torch.float64
    torch.testing.assert_close(form(x.bfloat16()), torch.tanh(x.bfloat16()), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(form(x[..., ::2].transpose(0, 3)), torch.tanh(x[..., ::2].transpose(0, 3)))


def test_with_gradients_it_is_torch_tanh():
    y = torch.randn(7, 9, requires_grad=True)
    assert torch.equal(tanh(y), torch.tanh(y))
    (tanh(y) * torch.arange(9.0)).sum().backward()
    torch.testing.assert_close(y.grad, (1 - torch.tanh(y.detach()) ** 2) * torch.arange(9.0))


def test_no_graph_is_recorded_without_gradients():
    with torch.no_grad():
        assert tanh(torch.randn(4, requires_grad=True)).grad_fn is None


@pytest.mark.parametrize("faster", [True, False])
def test_decoding_uses_the_form_the_timing_chose(monkeypatch, faster):
    monkeypatch.setattr(activations, "expm1_form_is_faster", lambda: faster)
    x = torch.randn(5, 7, 11)
    assert torch.equal(tanh(x), tanh_from_expm1(x) if faster else torch.tanh(x))


def test_the_timing_is_taken_once_and_moves_no_random_generator():
    activations.expm1_form_is_faster.cache_clear()
    state = torch.get_rng_state()
    chosen = activations.expm1_form_is_faster()
    assert isinstance(chosen, bool) and torch.equal(torch.get_rng_state(), state)
    assert activations.expm1_form_is_faster.cache_info().misses == 1
    assert activations.expm1_form_is_faster() is chosen and activations.expm1_form_is_faster.cache_info().hits == 1

"""tanh for the CPU from ``expm1``: the same function as ``torch.tanh``, faster there.

torch's CPU ``tanh`` costs several times its ``sigmoid`` at every ``ATEN_CPU_CAPABILITY``, and
additive attention takes a tanh of every (query, source position, attention unit), so it shows in
decoding profiles (figures: docs/benchmarks.md).
Here tanh(x) = sign(x) * -m / (m + 2) with m = expm1(-2|x|): no cancellation near 0 (expm1 is
exact there) and no overflow (m lies in [-1, 0]); a few ulp from ``torch.tanh``, with
``tanh(+-inf) = +-1``, ``tanh(-0.0) = -0.0`` and NaN kept (tests/test_activations.py).
Used where no gradient is recorded (decoding): in training the five passes over the large
(batch, target, source, units) tensors of attention cost more memory traffic than the saving
(it made training slower), so ``torch.tanh`` runs there, as on other devices.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _tanh_cpu(x: Tensor) -> Tensor:
    m = torch.expm1(x.abs().mul_(-2.0))
    return m.div_(m + 2.0).neg_().copysign_(x)


def tanh(x: Tensor) -> Tensor:
    """Elementwise tanh, as ``torch.tanh`` (see the module docstring for why not that on a CPU)."""
    if x.device.type != "cpu" or not x.is_floating_point() or (torch.is_grad_enabled() and x.requires_grad):
        return torch.tanh(x)
    return _tanh_cpu(x)

"""tanh for decoding on a CPU: ``torch.tanh``, or the same function from ``expm1`` where that is faster.

On some CPUs torch's CPU ``tanh`` costs several times its ``sigmoid``, and additive attention takes a
tanh of every (query, source position, attention unit), so it shows in decoding profiles; there the form
from ``expm1`` below is faster. On others torch's ``tanh`` is as cheap as its ``sigmoid`` and the form
from ``expm1``, several passes over the tensor, is the slower by far (both machines: docs/benchmarks.md).
So the first call in a process times both on a decoding-sized tensor and keeps the faster: torch's own
unless the other is clearly ahead, so that noise between two close timings keeps the reference function.
Here tanh(x) = sign(x) * -m / (m + 2) with m = expm1(-2|x|): no cancellation near 0 (expm1 is
exact there) and no overflow (m lies in [-1, 0]); a few ulp from ``torch.tanh``, with
``tanh(+-inf) = +-1``, ``tanh(-0.0) = -0.0`` and NaN kept (tests/test_activations.py).
Used where no gradient is recorded (decoding): in training the five passes over the large
(batch, target, source, units) tensors of attention cost more memory traffic than the saving
(it made training slower), so ``torch.tanh`` runs there, as on other devices.
"""

from __future__ import annotations

import functools
import math
import time

import torch
from torch import Tensor

CLEARLY_AHEAD = 1.5  # the expm1 form is kept only when torch's tanh takes this many times as long
TIMING_SHAPE = (64, 16, 256)  # (batch, source positions, attention units): one decoding step's scores
TIMING_RUNS = 5  # the best of these is each candidate's time


def tanh_from_expm1(x: Tensor) -> Tensor:
    """tanh(x) = sign(x) * -m / (m + 2), m = expm1(-2|x|) (module docstring)."""
    m = torch.expm1(x.abs().mul_(-2.0))
    return m.div_(m + 2.0).neg_().copysign_(x)


def _seconds(function, x: Tensor) -> float:
    function(x)  # warm-up
    runs = []
    for _ in range(TIMING_RUNS):
        start = time.perf_counter()
        function(x)
        runs.append(time.perf_counter() - start)
    return min(runs)


@functools.cache
def expm1_form_is_faster() -> bool:
    """Whether the form from ``expm1`` is clearly faster than ``torch.tanh`` on this CPU, timed once per process
    (no random numbers drawn, so no generator's state moves)."""
    x = torch.linspace(-6.0, 6.0, steps=math.prod(TIMING_SHAPE)).reshape(TIMING_SHAPE)
    return _seconds(torch.tanh, x) > CLEARLY_AHEAD * _seconds(tanh_from_expm1, x)


def tanh(x: Tensor) -> Tensor:
    """Elementwise tanh, as ``torch.tanh`` (see the module docstring for when it is computed otherwise)."""
    if x.device.type != "cpu" or not x.is_floating_point() or (torch.is_grad_enabled() and x.requires_grad):
        return torch.tanh(x)
    return tanh_from_expm1(x) if expm1_form_is_faster() else torch.tanh(x)

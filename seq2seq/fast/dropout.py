"""Dropout whose mask is drawn with ``torch.rand`` on a CPU.

Same distribution and scaling as ``nn.Dropout`` (zero with probability p, the rest scaled by
1 / (1 - p)); only the random draw differs: on a CPU ``bernoulli_`` (what ``nn.Dropout`` calls)
is several times slower than ``torch.rand`` (docs/benchmarks.md). On CUDA the fused
``nn.Dropout`` kernel is used as is.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Dropout(nn.Dropout):
    def forward(self, input: Tensor) -> Tensor:
        if not self.training or self.p in (0.0, 1.0) or input.device.type != "cpu":
            return super().forward(input)
        keep = torch.rand(input.shape, dtype=torch.float32) >= self.p  # float32 draws, also for bf16 input
        return input * keep.to(input.dtype).mul_(1.0 / (1.0 - self.p))

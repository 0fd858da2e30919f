"""Which float type the matrix products run in: the one switch for mixed precision.

    fp32   every operation in float32 (the reference; what auto means)
    bf16   matrix products in bfloat16 under ``torch.autocast``, weights, softmaxes and the loss in
           float32; on a CPU only where it has native bf16 (AVX512-BF16 or AMX), which runs them
           several times faster than float32 (docs/benchmarks.md); emulated bf16 would be slower
    fp16   float16 autocast with loss scaling; CUDA only
    auto   fp32 everywhere: at the product's sizes the GPU waits on the launches of many small kernels,
           and autocast's casts only add to them (on an H100 fp32 trained 1.2-1.4x faster than fp16 and
           bf16: docs/gpu-and-torchrun.md)

Mixed precision changes rounding, so a bf16 run is not bit-identical to an fp32 one: the benchmark
(scripts/benchmark.py) reports the dev BLEU of both.
"""

from __future__ import annotations

import os

import torch

from seq2seq.config_checks import NAMES
from seq2seq.errors import ConfigError

PRECISIONS = NAMES["TrainConfig"]["precision"]
_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def cpu_has_native_bf16() -> bool:
    """Whether this CPU runs bfloat16 products natively (AVX512-BF16 or AMX), not emulated. oneDNN's own check
    (``mkldnn._is_mkldnn_bf16_supported``) says yes on any AVX-512 core, where it emulates them, more slowly
    than float32 runs."""
    if not torch.backends.mkldnn.is_available():
        return False
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if all(check is None for check in checks):  # a torch without them: oneDNN's word, the best left
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return any(check() for check in checks if check is not None)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device`` (None = plain float32), or a ConfigError
    saying why that precision cannot run there."""
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if precision == "auto":
        precision = "fp32"
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("precision fp16 needs a CUDA device (CPUs have no fast float16 products); "
                          "use bf16 or fp32")
    if precision == "bf16" and device.type == "cpu":
        # Each new product shape compiles a oneDNN kernel; batches shrink as sentences
        # end, so a run sees thousands of shapes: keep them all (the default cache holds 1,024).
        # oneDNN reads this once, when first used: here, unless something ran in oneDNN before.
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16384")
        if not cpu_has_native_bf16():
            raise ConfigError("precision bf16 needs a CPU with AVX512-BF16 or AMX, and this one has neither; "
                              "use fp32")
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("precision bf16 is not supported by this CUDA device; use fp16 or fp32")
    return _DTYPES[precision]


def autocast(device: torch.device, dtype: torch.dtype | None):
    """The autocast context for ``dtype`` from ``autocast_dtype`` (a no-op for float32)."""
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)

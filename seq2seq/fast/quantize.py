"""Dynamic int8 quantisation of a trained translator for CPU inference.

Every ``nn.Linear`` and ``nn.GRU`` gets int8 weights, one scale per output row (per channel), and
quantises its activations per batch on the fly (``torch.ao.quantization.quantize_dynamic``,
fbgemm/x86 kernels). Embeddings, the attention softmax and the search stay in float32.

Per-channel weight scales rather than one per tensor: the int8 model gives float32's translation
more often and moves beam-search BLEU less, for a little speed (docs/benchmarks.md, with the
speed and BLEU of int8 against float32).

``torch.ao.quantization`` is deprecated in favour of torchao, but torchao's int8 dynamic
quantisation runs slower than float32 on a CPU in eager mode (docs/benchmarks.md), so the eager
API stays while torch ships it.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from seq2seq.errors import ConfigError

QUANTIZED_LAYERS = (nn.Linear, nn.GRU)


def quantize_int8(model: nn.Module, device: torch.device) -> nn.Module:
    """A quantised copy of ``model`` (eval mode) for CPU inference; the original is left as it is."""
    if device.type != "cpu":
        raise ConfigError(f"int8 quantisation runs on the CPU only, not on {device}")
    if "fbgemm" not in torch.backends.quantized.supported_engines and \
            "x86" not in torch.backends.quantized.supported_engines:
        raise ConfigError("int8 quantisation needs torch's fbgemm/x86 quantised kernels, which this torch build lacks")
    from torch.ao import quantization

    with warnings.catch_warnings():
        # The deprecation notice of torch.ao.quantization (see the module docstring) and the
        # notice that quantised tensors are a legacy API: both about the future, not this result.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*", category=UserWarning)
        qconfig = {layer: quantization.per_channel_dynamic_qconfig for layer in QUANTIZED_LAYERS}
        quantized = quantization.quantize_dynamic(copy.deepcopy(model).eval(), qconfig, dtype=torch.qint8)
    return quantized.eval()

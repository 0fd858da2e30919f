"""Mixed precision: which autocast each setting gives where, and a bf16 training step that stays sound."""

from __future__ import annotations

import pytest
import torch
from support import run_cli, tiny_config, tiny_data, train_args

from seq2seq.config import TokenizerConfig, TrainConfig
from seq2seq.corpus import read_parallel
from seq2seq.data import collate
from seq2seq.errors import ConfigError
from seq2seq.fast import precision
from seq2seq.fast.precision import autocast_dtype
from seq2seq.runs import build_trainer

CPU = torch.device("cpu")


def test_auto_is_float32_on_a_cpu_and_on_cuda_and_unknown_names_list_the_valid_ones():
    assert autocast_dtype("auto", CPU) is None and autocast_dtype("fp32", CPU) is None
    assert autocast_dtype("auto", torch.device("cuda")) is None  # fp16 was slower there (docs/gpu-and-torchrun.md)
    assert autocast_dtype("fp16", torch.device("cuda")) is torch.float16
    with pytest.raises(ConfigError, match="valid: auto, fp32, bf16, fp16"):
        autocast_dtype("fp8", CPU)


def test_fp16_on_a_cpu_is_refused_with_the_alternatives():
    with pytest.raises(ConfigError, match=r"fp16 needs a CUDA device.*use bf16 or fp32"):
        autocast_dtype("fp16", CPU)


@pytest.mark.parametrize("native", [True, False])
def test_bf16_on_a_cpu_needs_native_bf16(native, monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    if native:
        assert autocast_dtype("bf16", CPU) is torch.bfloat16
    else:
        with pytest.raises(ConfigError, match=r"AVX512-BF16 or AMX.*use fp32"):
            autocast_dtype("bf16", CPU)


@pytest.mark.parametrize(("avx512_bf16", "amx"), [(False, False), (True, False), (False, True)])
def test_native_bf16_is_avx512_bf16_or_amx_whatever_onednn_says(avx512_bf16, amx, monkeypatch):
    """oneDNN called every AVX-512 core bf16-ready: a Xeon with neither instruction set trained 2.6x slower."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    if torch.backends.mkldnn.is_available():
        assert precision.cpu_has_native_bf16() == (avx512_bf16 or amx)


@pytest.fixture
def trainers(tmp_path, monkeypatch):
    """An fp32 and a bf16 trainer with the same initial weights on the tiny data, and one batch."""
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)  # bf16 is emulated where not native
    data = tiny_data(tmp_path / "data")
    train, dev = read_parallel(str(data.train)), read_parallel(str(data.dev))
    model_config = tiny_config(dropout=0.0)
    made = {name: build_trainer(train, dev, tmp_path / name, model_config,
                                TrainConfig(device="cpu", precision=name), TokenizerConfig(vocab_size=80),
                                log=lambda _: None)
            for name in ("fp32", "bf16")}
    batch = collate([made["fp32"].train_set[i] for i in range(8)])
    return made, batch


def test_a_bf16_step_runs_products_in_bf16_and_keeps_float32_weights_and_gradients(trainers):
    made, batch = trainers
    fp32, bf16 = made["fp32"], made["bf16"]
    assert torch.equal(fp32.model.decoder.output.weight, bf16.model.decoder.output.weight)  # same seed
    seen = []
    bf16.model.decoder.output.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    losses = {}
    for name, trainer in made.items():
        trainer.model.train()
        losses[name] = trainer.train_step(batch)[0]
    assert seen == [torch.bfloat16]
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in bf16.model.parameters())
    assert abs(losses["bf16"] - losses["fp32"]) < 0.02 * losses["fp32"]  # same loss up to bf16 rounding


@pytest.mark.slow
def test_train_cli_takes_precision(tmp_path):
    data = tiny_data(tmp_path / "data")
    result = run_cli(*train_args(data, tmp_path / "run", "--precision", "bf16"))
    if precision.cpu_has_native_bf16():
        assert result.status == 0, result.stderr
        assert (tmp_path / "run" / "best.pt").exists()
    else:  # refused before any work, in one line
        assert result.status == 2 and len(result.error_lines) == 1 and "AVX512-BF16" in result.stderr
        assert not (tmp_path / "run").exists()

"""scripts/benchmark.py end to end on the tiny run: every section measured, printed and written."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from support import SCRIPTS, load_script, trained

from seq2seq.fast.precision import cpu_has_native_bf16


@pytest.mark.slow
def test_benchmark_measures_every_section_on_the_tiny_run(tmp_path_factory, tmp_path, monkeypatch, capsys):
    run = trained(tmp_path_factory.getbasetemp())
    monkeypatch.syspath_prepend(str(SCRIPTS))
    benchmark = load_script("benchmark")
    output = tmp_path / "speed.json"
    monkeypatch.setattr(sys, "argv", [
        "benchmark.py", "--train", str(run.data.train), "--dev", str(run.data.dev), "--config", str(run.data.config),
        "--models", str(run.best), "--attention", "luong-dot", "--train-seconds", "0.3",
        "--batch-sizes", "4", "--repeats", "1", "--latency-samples", "6", "--log-rows", "40", "--json", str(output)])
    assert benchmark.main() == 0
    results = json.loads(output.read_text())
    precisions = ["fp32", "bf16"] if cpu_has_native_bf16() else ["fp32"]
    cores = torch.get_num_threads()
    layouts = [(1, cores)] + ([(cores, 1)] if cores > 1 else [])
    assert [(r["attention"], r["input_feeding"], r["precision"], r["processes"], r["threads"])
            for r in results["train"]] == [("luong-dot", f, p, 1, cores) for f in (True, False) for p in precisions] + [
        ("luong-dot", f, "fp32", cores, 1) for f in (True, False) if cores > 1]
    assert all(r["target_tokens_per_s"] > 0 and r["peak_rss_mb"] > 0 for r in results["train"])
    assert sorted((r["beam"], r["int8"], (r["workers"], r["threads"])) for r in results["translate"]) == sorted(
        (beam, int8, layout) for beam in (1, 5) for int8 in (False, True) for layout in layouts)
    assert all(r["sent_per_s"] > 0 and 0 <= r["bleu"] <= 100 and r["mflop_per_sent"] > 0 for r in results["translate"])
    assert results["matmul_gflops"] and all(v > 0 for v in results["matmul_gflops"].values())
    assert results["big_log"]["rows_written"] == 40 and results["big_log"]["peak_rss_mb"] > 0
    assert all(r["beam1_p50_ms"] > 0 and r["beam5_p95_ms"] > 0 for r in results["latency"])
    printed = capsys.readouterr().out
    for title in ("Float32 matrix multiply", "Training, target tokens/s", "Translation of the dev split"):
        assert title in printed

"""scripts/benchmark.py end to end on the tiny run: every section measured, printed and written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import RUL_CONFIG, SCRIPTS, TINY_CONFIG, cli_in_process, load_script, tiny_data, trained

from seq2seq.fast.precision import cpu_has_native_bf16
from seq2seq.fast.threads import intra_op_threads
from seq2seq.rul.cmapss import write_cmapss
from seq2seq.rul.synthetic import synthetic_engines


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
    cores = os.cpu_count() or 1
    with intra_op_threads(cores):  # as in a fresh process, also when pytest-xdist gave this worker one thread
        assert benchmark.main() == 0
    results = json.loads(output.read_text())
    precisions = ["fp32", "bf16"] if cpu_has_native_bf16() else ["fp32"]
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


@pytest.mark.slow
def test_the_gpu_benchmark_measures_every_section_through_the_cli(tmp_path_factory, tmp_path, monkeypatch, capsys):
    """scripts/benchmark_gpu.py, run on the CPU with tiny data: each section's figures come from real runs."""
    data = tiny_data(tmp_path_factory.getbasetemp() / "tiny-data")
    recipe, rul_config, fd001 = tmp_path / "recipe.json", tmp_path / "rul.json", tmp_path / "train_SYN.txt"
    recipe.write_text(json.dumps({**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "members": 2, "epochs": 2,
                                                           "max_minutes": 5}}))
    rul_config.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 2, "members": 2}}))
    write_cmapss(fd001, synthetic_engines(20, seed=3, min_life=130, max_life=200))
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(subprocess, "run", cli_in_process)  # its CLI commands in this process: no torch to load again
    output = tmp_path / "gpu.json"
    monkeypatch.setattr(sys, "argv", [
        "benchmark_gpu.py", "--device", "cpu", "--train", str(data.train), "--dev", str(data.dev), "--source-column",
        "source", "--target-column", "target", "--recipe", str(recipe), "--seconds", "1", "--precisions", "fp32",
        "--ensemble-seeds", "3", "--batch-sizes", "4", "--fd001", str(fd001), "--fd001-config", str(rul_config),
        "--output-dir", str(tmp_path / "out"), "--json", str(output)])
    assert load_script("benchmark_gpu").main() == 0
    results = json.loads(output.read_text())
    assert [(r["model"], r["precision"]) for r in results["precision"]] == [
        ("default configuration", "fp32"), ("recipe member", "fp32")]
    assert all(r["run_tok_s"] > 0 and 0 < r["seconds"] < 30 for r in results["precision"])
    [ensemble] = results["ensembles"]
    assert ensemble["seeds"] == "3-4" and len(ensemble["members_bleu"]) == 2 and ensemble["wall_s"] > 0
    assert ensemble["greedy"]["beam"] == 1 and 0 <= ensemble["recipe"]["bleu"] <= 100
    summaries = [json.loads((tmp_path / "out" / "ensemble-3" / f"member-{k}" / "metrics.jsonl").read_text()
                            .splitlines()[-1]) for k in (1, 2)]
    assert ensemble["members_bleu"] == [s["best_bleu"] for s in summaries]  # each member's own run, seeds 3 and 4
    assert [(r["beam"], r["batch"]) for r in results["translate"]] == [(1, 4), (5, 4)]
    assert all(r["rows_per_s"] > 0 for r in results["translate"])
    assert len(results["fd001"]["members_rmse"].split(", ")) == 2 and results["fd001"]["epochs"] == 4
    printed = capsys.readouterr().out
    for title in ("Training, target tokens/s", "members side by side", "rows/s", "The FD001 recipe"):
        assert title in printed


@pytest.mark.slow
def test_the_trust_benchmark_prints_every_table_on_the_tiny_run(tmp_path_factory, tmp_path, monkeypatch, capsys):
    """scripts/benchmark_trust.py end to end: every table, and the look-up's cost for the UI, batches, a file job and
    the command line."""
    run = trained(tmp_path_factory.getbasetemp())
    in_scope, out_of_scope, held_out = tmp_path / "in.txt", tmp_path / "out.txt", tmp_path / "held_out.txt"
    in_scope.write_text("pump vibrating\nmotor too hot\n", encoding="utf-8")
    out_of_scope.write_text("kitchen sink drain blocked\nprinter out of toner\n", encoding="utf-8")
    held_out.write_text("garage door opener remote lost\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(sys, "argv", [
        "benchmark_trust.py", "--translator", str(run.best), "--train", str(run.data.train), "--dev",
        str(run.data.dev), "--in-scope", str(in_scope), "--out-of-scope", str(out_of_scope), str(held_out),
        "--repeats", "2"])
    assert load_script("benchmark_trust").main() == 0
    printed = capsys.readouterr().out
    for title in ("## 1.", "## 2.", "## 3.", "## 4."):
        assert title in printed
    verdicts = printed.split("## 3.")[1].split("## 4.")[0]
    assert "| out-of-scope | 2 |" in verdicts and "| out-of-scope (held_out) | 1 |" in verdicts
    costs = printed.split("## 4.")[1].splitlines()
    for label in ("one alert per call |", "64 alerts per call |", "a file job |", "a command line, "):
        [row] = [line for line in costs if line.startswith(f"| {label}")]
        plain, judged, ratio = (cell.strip() for cell in row.split("|")[2:5])
        median, spread = ratio.split(" ")
        low, high = (float(x) for x in spread.strip("()").split("-"))
        assert float(plain) > 0 and float(judged) > 0 and low <= float(median) <= high

"""scripts/compare_attention.py on two tiny checkpoints: the scores of ``seq2seq evaluate`` (with the same
search flags), a baseline without a p-value, p-values in (0, 1] for the others, and one-line errors."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import TINY_PAIRS, TinyRun, load_script, run_cli, trained

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compare_attention.py"


@pytest.fixture(scope="module")
def compare():
    return load_script("compare_attention").main


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[TinyRun]:
    root = tmp_path_factory.getbasetemp()
    return [trained(root, "bahdanau"), trained(root, "luong-dot")]


def run_script(main, *argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = main(list(argv))
        except SystemExit as exit:
            status = exit.code
    return status, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="module")
def summary(compare, runs) -> dict:
    status, stdout, stderr = run_script(compare, "--data", str(runs[0].data.dev), "--json",
                                        *(str(run.best) for run in runs))
    assert status == 0, stderr
    return json.loads(stdout)


def test_each_model_gets_the_scores_that_seq2seq_evaluate_reports(summary, runs):
    assert [entry["model"] for entry in summary["models"]] == [str(run.best) for run in runs]
    assert [entry["attention"] for entry in summary["models"]] == ["bahdanau", "luong-dot"]
    assert summary["n"] == len(TINY_PAIRS)
    for entry, run in zip(summary["models"], runs, strict=True):
        evaluated = json.loads(run_cli("evaluate", "--model", str(run.best), "--data", str(run.data.dev),
                                       "--json").stdout)
        assert (entry["bleu"]["score"], entry["chrf"]["score"], entry["ter"]) == (
            evaluated["bleu"], evaluated["chrf"], evaluated["ter"])


def test_baseline_has_no_p_value_and_the_other_model_has_one_per_metric(summary):
    baseline, other = summary["models"]
    assert summary["baseline"] == baseline["model"]
    for metric in ("bleu", "chrf"):
        assert baseline[metric]["p_value"] is None
        assert 0.0 < other[metric]["p_value"] <= 1.0
        for entry in summary["models"]:
            assert entry[metric]["ci"] >= 0.0


def test_signatures_name_the_test_its_samples_and_seed(summary):
    assert set(summary["signature"]) == {"bleu", "chrf"}
    seed = os.environ.get("SACREBLEU_SEED", "12345").lower()
    for signature in summary["signature"].values():
        assert "bs:1000" in signature and f"seed:{seed}" in signature


def test_the_paired_test_is_seeded_so_reruns_agree(compare, runs, summary):
    status, stdout, _ = run_script(compare, "--data", str(runs[0].data.dev), "--json",
                                   *(str(run.best) for run in runs))
    assert status == 0 and json.loads(stdout) == summary


def test_table_has_a_row_per_model_with_its_attention(compare, runs):
    status, stdout, _ = run_script(compare, "--data", str(runs[0].data.dev), "--beam-size", "2",
                                   *(str(run.best) for run in runs))
    assert status == 0
    lines = stdout.splitlines()
    assert lines[0].split()[:2] == ["model", "attention"]
    assert lines[2].startswith(str(runs[0].best)) and "bahdanau" in lines[2] and "baseline" in lines[2]
    assert lines[3].startswith(str(runs[1].best)) and "luong-dot" in lines[3]
    assert "beam size 2" in stdout


def test_search_flags_reach_every_model_as_seq2seq_evaluate_takes_them(compare, runs):
    search = ("--beam-size", "2", "--length-penalty", "0.5", "--beam-patience", "2")
    status, stdout, stderr = run_script(compare, "--data", str(runs[0].data.dev), "--json", *search,
                                        *(str(run.best) for run in runs))
    assert status == 0, stderr
    summary = json.loads(stdout)
    assert (summary["beam_size"], summary["length_penalty"], summary["beam_patience"]) == (2, 0.5, 2.0)
    for entry, run in zip(summary["models"], runs, strict=True):
        evaluated = json.loads(run_cli("evaluate", "--model", str(run.best), "--data", str(run.data.dev),
                                       "--json", *search).stdout)
        assert (entry["bleu"]["score"], entry["chrf"]["score"]) == (evaluated["bleu"], evaluated["chrf"])


def test_out_of_range_search_flag_is_a_one_line_error_with_status_2(compare, runs):
    status, stdout, stderr = run_script(compare, "--data", str(runs[0].data.dev), "--beam-patience", "0.5",
                                        str(runs[0].best))
    assert (status, stdout) == (2, "")
    assert len(stderr.splitlines()) == 1
    assert stderr.startswith("compare_attention: error: ") and "beam_patience" in stderr


def test_missing_checkpoint_is_a_one_line_error_with_status_2(compare, runs, tmp_path):
    missing = tmp_path / "missing.pt"
    status, stdout, stderr = run_script(compare, "--data", str(runs[0].data.dev), str(runs[0].best), str(missing))
    assert (status, stdout) == (2, "")
    assert stderr.splitlines() == [f"compare_attention: error: {missing}: checkpoint not found"]


def test_missing_data_file_is_a_one_line_error_with_status_2(compare, runs, tmp_path):
    missing = tmp_path / "missing.tsv"
    status, _, stderr = run_script(compare, "--data", str(missing), str(runs[0].best))
    assert status == 2
    assert stderr.splitlines() == [f"compare_attention: error: {missing}: file not found"]


def test_a_copy_of_the_baseline_gives_the_same_output_with_p_1_not_sacrebleus_floor(compare, runs, summary,
                                                                                     tmp_path):
    copy = tmp_path / "copy.pt"
    shutil.copy(runs[0].best, copy)
    status, stdout, stderr = run_script(compare, "--data", str(runs[0].data.dev), "--json", str(runs[0].best),
                                        str(copy))
    assert status == 0, stderr
    entry = json.loads(stdout)["models"][1]
    assert entry["same_output_as_baseline"] and entry["bleu"]["p_value"] == entry["chrf"]["p_value"] == 1.0
    assert not summary["models"][1]["same_output_as_baseline"]
    status, stdout, _ = run_script(compare, "--data", str(runs[0].data.dev), str(runs[0].best), str(copy))
    assert stdout.splitlines()[3].count("1 (same output)") == 2


@pytest.mark.parametrize(("script", "flag"), [("tune_search", "--model"), ("benchmark_trust", "--translator")])
def test_a_script_given_a_missing_model_says_so_in_one_line_not_a_traceback(runs, tmp_path, script, flag):
    missing = tmp_path / "missing.pt"
    extra = ["--train", str(runs[0].data.train)] if script == "benchmark_trust" else []
    process = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), flag, str(missing),
                              "--dev", str(runs[0].data.dev), *extra], capture_output=True, text=True, timeout=300)
    assert (process.returncode, process.stderr.splitlines()) == (2, [f"{script}: error: {missing}: checkpoint not "
                                                                     "found"])


def test_a_batch_size_below_1_is_refused_not_answered_with_nothing(compare, runs):
    status, _, stderr = run_script(compare, "--data", str(runs[0].data.dev), "--batch-size", "-3", str(runs[0].best))
    assert status == 2 and "--batch-size" in stderr


@pytest.mark.slow
def test_script_runs_as_a_program(runs):
    process = subprocess.run([sys.executable, str(SCRIPT), "--data", str(runs[0].data.dev), "--json",
                              str(runs[0].best), str(runs[1].best)], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    assert len(json.loads(process.stdout)["models"]) == 2

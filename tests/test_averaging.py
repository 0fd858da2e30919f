"""train.average_best: the k best validations' weights are kept while a run trains, and their mean competes
for best.pt when it ends (checkpoint averaging)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from support import TINY_CONFIG, run_cli, tiny_data, train_args, training_threads

from seq2seq.config import TrainConfig
from seq2seq.distributed import ONE_PROCESS
from seq2seq.selection import Selection

K = 2


def averaging_args(folder: Path, output_dir: Path, *extra: str) -> list[str]:
    """A tiny ``train`` command whose config keeps the K best validations for averaging."""
    data = tiny_data(folder / "data")
    config = folder / "average.json"
    config.write_text(json.dumps({**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "average_best": K}}),
                      encoding="utf-8")
    return [*train_args(data, output_dir, *extra), "--config", str(config)]


def records(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """One run trained straight through, and the same run stopped after its first epoch and resumed."""
    base = tmp_path_factory.mktemp("averaging")
    with training_threads():  # the two must sum in the same order to end bit for bit alike
        whole = run_cli(*averaging_args(base, base / "whole"))
        first = run_cli(*averaging_args(base, base / "resumed", "--epochs", "1"))
        kept_after_one = sorted(p.name for p in (base / "resumed" / "kept").iterdir())
        second = run_cli(*averaging_args(base, base / "resumed", "--resume"))
    for result in (whole, first, second):
        assert result.status == 0, result.stderr
    return {"whole": base / "whole", "resumed": base / "resumed", "kept_after_one": kept_after_one,
            "summary": json.loads(whole.stdout), "log": whole.stderr}


def test_the_mean_of_the_k_best_validations_is_validated_last_and_its_files_are_removed(runs):
    *validations, average = records(runs["whole"])
    assert all("average_of_steps" not in r for r in validations) and len(validations) == 3
    kept = [r for r in validations if r["step"] in average["average_of_steps"]]
    others = [r for r in validations if r["step"] not in average["average_of_steps"]]
    assert len(kept) == K and min(r["dev_bleu"] for r in kept) >= max(r["dev_bleu"] for r in others)
    best = max(r["dev_bleu"] for r in [*validations, average])
    assert runs["summary"]["best_bleu"] == pytest.approx(best, abs=0.006)
    assert f"mean of the {K} best validations' weights" in runs["log"]
    assert not (runs["whole"] / "kept").exists()


def test_a_resumed_run_keeps_the_same_weights_and_ends_with_the_same_best_pt(runs):
    assert runs["kept_after_one"] == [f"step-{records(runs['resumed'])[0]['step']}.pt"]
    fields = ("step", "dev_bleu", "average_of_steps")
    assert [[r.get(f) for f in fields] for r in records(runs["resumed"])] == \
           [[r.get(f) for f in fields] for r in records(runs["whole"])]
    whole = torch.load(runs["whole"] / "best.pt", weights_only=True)["weights"]
    resumed = torch.load(runs["resumed"] / "best.pt", weights_only=True)["weights"]
    assert all(torch.equal(whole[name], resumed[name]) for name in whole)


def stand_in(tmp_path: Path, k: int) -> Selection:
    """A run's selection around a 1-weight model whose dev BLEU is 10 x its weight; ``saved`` lists the
    checkpoints it writes (name, weight), ``reported`` the averages it reports (steps, kept)."""
    model = torch.nn.Linear(1, 1, bias=False)
    saved, reported = [], []
    report = SimpleNamespace(average=lambda steps, progress, scores, kept: reported.append((steps, kept)))
    selection = Selection(model, None, None, TrainConfig(average_best=k), tmp_path, torch.device("cpu"),
                          ONE_PROCESS, report, lambda name: saved.append((name, model.weight.item())), print)

    def measure():
        weight = model.weight.item()
        return SimpleNamespace(bleu=10 * weight, chrf=0.0), [], 10 * weight, None

    selection.measure, selection.saved, selection.reported = measure, saved, reported
    return selection


def test_only_the_k_best_validations_are_kept_on_disk_best_first(tmp_path):
    run = stand_in(tmp_path, k=3)
    for step, weight in enumerate([0.5, 0.9, 0.7, 0.9, 0.8, 0.1], start=1):
        torch.nn.init.constant_(run.model.weight, weight)
        run.keep_for_averaging(10 * weight, None, step)
    assert [entry["step"] for entry in run.state["kept"]] == [2, 4, 5]  # a tie keeps the earlier one first
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["step-2.pt", "step-4.pt", "step-5.pt"]


def test_the_mean_becomes_best_pt_only_when_it_scores_higher_and_training_keeps_its_last_weights(tmp_path):
    run = stand_in(tmp_path, k=2)
    for step, weight in ((1, 0.2), (2, 0.6)):
        torch.nn.init.constant_(run.model.weight, weight)
        run.keep_for_averaging(10 * weight, None, step)
    torch.nn.init.constant_(run.model.weight, 0.3)  # the last weights
    run.state.update(best_bleu=3.5, best_step=2)  # below the mean's 4.0
    run.average_kept(step=3)
    assert run.saved == [("best.pt", pytest.approx(0.4)), ("last.pt", pytest.approx(0.3))]
    assert run.reported == [([2, 1], True)] and run.state["best_step"] == 3 and run.state["best_from"] == "average"
    assert run.model.weight.item() == pytest.approx(0.3) and run.state["kept"] == []
    assert not (tmp_path / "kept").exists()

    run = stand_in(tmp_path / "again", k=2)
    for step, weight in ((1, 0.2), (2, 0.6)):
        torch.nn.init.constant_(run.model.weight, weight)
        run.keep_for_averaging(10 * weight, None, step)
    run.state["best_bleu"] = 6.0  # the best validation beats the mean
    run.average_kept(step=3)
    assert run.saved == [("last.pt", pytest.approx(0.6))] and run.reported == [([2, 1], False)]

"""RUL training, checkpoints and scoring, on a toy linear-degradation set built here."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from torch.utils.data import TensorDataset

from seq2seq.checkpoint import save_atomic
from seq2seq.config import RulConfig
from seq2seq.errors import CheckpointError, ConfigError
from seq2seq.rul import train as rul_train
from seq2seq.rul.evaluate import RulScores, evaluate_windows, phm08_score, predict, rmse
from seq2seq.rul.model import RulOutput, build_rul_model
from seq2seq.rul.train import _train_epoch, load_rul_checkpoint, rul_loss, save_rul_checkpoint, train_rul

F = 2
W = 8
CAP = 40
TOY = RulConfig(window=W, rul_cap=CAP, critical_below=10, degrading_below=25, conv_channels=8, kernel_size=3,
                lstm_hidden=8, attention_hidden=8, dropout=0.0, epochs=25, batch_size=32, learning_rate=1e-2,
                weight_decay=0.0, patience=25, device="cpu")
PREPROCESSOR = {"sensors": [2, 3], "mean": [0.5, -1.0], "std": [1.0, 2.0], "window": W}



pytestmark = pytest.mark.usefixtures("one_thread")

@dataclass(frozen=True)
class Toy:
    x: torch.Tensor  # (N, W, F)
    mask: torch.Tensor  # (N, W)
    rul: torch.Tensor  # (N,)
    health: torch.Tensor  # (N,)


def toy_degradation(n: int, seed: int) -> Toy:
    """Engines with lives of 20..80 cycles whose sensors drift linearly towards failure, plus noise.

    Each row is the window ending at a random cycle of a random engine, left-padded (x = 0) when
    the engine has run fewer than W cycles.
    """
    generator = torch.Generator().manual_seed(seed)
    life = torch.randint(20, 81, (n,), generator=generator).float()  # (N,)
    end = (torch.rand(n, generator=generator) * life).floor() + 1  # (N,) cycles run, 1..life
    cycle = end.unsqueeze(1) - torch.arange(W - 1, -1, -1).float()  # (N, W)
    mask = cycle >= 1
    wear = 1.0 - (life.unsqueeze(1) - cycle) / 40.0  # (N, W) rises by 1/40 per cycle
    slopes = torch.tensor([1.0, -0.7])
    x = wear.unsqueeze(-1) * slopes + 0.05 * torch.randn(n, W, F, generator=generator)  # (N, W, F)
    x = x * mask.unsqueeze(-1)
    remaining = life - end  # (N,)
    health = (remaining <= TOY.degrading_below).long() + (remaining <= TOY.critical_below).long()
    return Toy(x=x, mask=mask, rul=remaining.clamp(max=CAP), health=health)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("rul")
    train, valid = toy_degradation(384, seed=1), toy_degradation(128, seed=2)
    lines: list[str] = []
    result = train_rul(train, valid, TOY, F, output_dir, PREPROCESSOR, log=lines.append)
    return result, output_dir, train, valid, lines


# Scoring

def test_rmse_on_hand_checked_values():
    assert rmse(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])) == 0.0
    assert rmse(torch.tensor([3.0, -1.0]), torch.tensor([0.0, 3.0])) == pytest.approx(math.sqrt(12.5))


def test_phm08_score_on_hand_checked_values():
    assert phm08_score(torch.tensor([20.0]), torch.tensor([10.0])) == pytest.approx(math.e - 1)  # d = +10
    assert phm08_score(torch.tensor([0.0]), torch.tensor([13.0])) == pytest.approx(math.e - 1)  # d = -13
    assert phm08_score(torch.tensor([7.0, 7.0]), torch.tensor([7.0, 7.0])) == 0.0
    assert phm08_score(torch.tensor([20.0, 0.0]), torch.tensor([10.0, 13.0])) == pytest.approx(2 * (math.e - 1))


@pytest.mark.parametrize("error", [0.5, 5.0, 30.0])
def test_late_predictions_cost_more_than_early_ones(error):
    true = torch.tensor([50.0])
    late, early = phm08_score(true + error, true), phm08_score(true - error, true)
    assert late > early > 0


def test_mismatched_or_empty_predictions_are_rejected():
    with pytest.raises(ValueError, match="as many predictions"):
        rmse(torch.zeros(3), torch.zeros(2))
    with pytest.raises(ValueError, match="as many predictions"):
        phm08_score(torch.zeros(0), torch.zeros(0))


def test_predict_in_batches_equals_one_pass_and_clamps_at_zero():
    torch.manual_seed(0)
    model = build_rul_model(TOY, F)
    data = toy_degradation(10, seed=3)
    whole, batched = predict(model, data.x, data.mask), predict(model, data.x, data.mask, batch_size=3)
    torch.testing.assert_close(batched.rul, whole.rul)
    torch.testing.assert_close(batched.attention, whole.attention)
    assert whole.rul.shape == (10,) and whole.health_logits.shape == (10, 3) and whole.attention.shape == (10, W)
    assert torch.all(whole.rul >= 0)
    assert model.training


def test_evaluate_windows_scores_one_prediction_per_row():
    torch.manual_seed(0)
    model = build_rul_model(TOY, F)
    data = toy_degradation(12, seed=4)
    scores = evaluate_windows(model, data)
    pred = predict(model, data.x, data.mask).rul
    assert scores == RulScores(rmse=rmse(pred, data.rul), score=phm08_score(pred, data.rul), n_engines=12)
    assert json.loads(json.dumps(scores.to_json())) == {"rmse": scores.rmse, "score": scores.score, "n_engines": 12}


# Loss

def test_loss_is_the_scaled_mse_plus_the_weighted_cross_entropy():
    torch.manual_seed(0)
    model = build_rul_model(TOY, F)
    data = toy_degradation(16, seed=5)
    output = model(data.x, data.mask)
    loss, parts = rul_loss(output, data.rul, data.health, TOY)
    expected_mse = torch.mean(((output.rul - data.rul) / CAP) ** 2)
    expected_ce = torch.nn.functional.cross_entropy(output.health_logits, data.health)
    torch.testing.assert_close(parts["rul_mse"], expected_mse)
    torch.testing.assert_close(parts["health_ce"], expected_ce)
    torch.testing.assert_close(loss, expected_mse + TOY.health_weight * expected_ce)
    assert loss.requires_grad and not parts["rul_mse"].requires_grad


def test_loss_of_a_perfect_rul_prediction_is_only_the_health_term():
    logits = torch.tensor([[4.0, 0.0, 0.0], [0.0, 0.0, 4.0]])
    output = RulOutput(rul=torch.tensor([30.0, 5.0]), health_logits=logits, attention=torch.ones(2, 1))
    loss, parts = rul_loss(output, torch.tensor([30.0, 5.0]), torch.tensor([0, 2]), replace(TOY, health_weight=2.0))
    assert parts["rul_mse"] == 0
    torch.testing.assert_close(loss, 2.0 * parts["health_ce"])


# Training

def test_a_small_model_fits_a_toy_degradation_set(trained):
    result, output_dir, train, valid, lines = trained
    naive = rmse(torch.full_like(valid.rul, float(train.rul.mean())), valid.rul)
    assert result.best_rmse < 0.5 * naive
    assert 1 <= result.best_epoch <= result.epochs <= TOY.epochs
    assert result.parameters == sum(p.numel() for p in build_rul_model(TOY, F).parameters())
    assert result.seconds > 0 and result.stopped in ("epochs", "patience")
    records = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == list(range(1, result.epochs + 1))
    assert min(r["valid_rmse"] for r in records) == result.best_rmse
    assert len(lines) == result.epochs + 1


def test_best_checkpoint_reproduces_the_best_validation_rmse(trained):
    result, output_dir, _, valid, _ = trained
    model, config, preprocessor = load_rul_checkpoint(output_dir / "best.pt")
    assert config == TOY and preprocessor == PREPROCESSOR
    assert not model.training and next(model.parameters()).device.type == "cpu"
    assert evaluate_windows(model, valid).rmse == pytest.approx(result.best_rmse, rel=1e-6)
    assert (output_dir / "last.pt").is_file()


def test_checkpoint_round_trip_reproduces_predictions_exactly(tmp_path):
    torch.manual_seed(3)
    model = build_rul_model(TOY, F).eval()
    save_rul_checkpoint(tmp_path / "m.pt", model, TOY, PREPROCESSOR)
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    assert set(payload) == {"format_version", "kind", "config", "n_features", "preprocessor", "weights"}
    assert payload["kind"] == "rul-model" and payload["format_version"] == 1 and payload["n_features"] == F
    loaded, _, _ = load_rul_checkpoint(tmp_path / "m.pt")
    data = toy_degradation(20, seed=6)
    before, after = predict(model, data.x, data.mask), predict(loaded, data.x, data.mask)
    assert torch.equal(before.rul, after.rul)
    assert torch.equal(before.health_logits, after.health_logits)
    assert torch.equal(before.attention, after.attention)


def saved_checkpoint(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    save_rul_checkpoint(tmp_path / "good.pt", build_rul_model(TOY, F), TOY, PREPROCESSOR)
    return tmp_path / "good.pt"


def one_line_error(path: Path) -> str:
    with pytest.raises(CheckpointError) as caught:
        load_rul_checkpoint(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


def test_a_corrupt_missing_or_foreign_checkpoint_is_a_one_line_error(tmp_path):
    data = saved_checkpoint(tmp_path).read_bytes()
    (tmp_path / "truncated.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint at all")
    save_atomic({"format_version": 1, "kind": "seq2seq-translator"}, tmp_path / "foreign.pt")
    assert "truncated checkpoint (" in one_line_error(tmp_path / "truncated.pt")
    assert "not a checkpoint: a text file" in one_line_error(tmp_path / "garbage.pt")
    assert "not found" in one_line_error(tmp_path / "missing.pt")
    assert "not a rul-model checkpoint" in one_line_error(tmp_path / "foreign.pt")


def test_weights_that_do_not_match_the_config_are_a_one_line_error(tmp_path):
    payload = torch.load(saved_checkpoint(tmp_path), weights_only=True)
    save_atomic({**payload, "n_features": F + 1}, tmp_path / "mismatch.pt")
    assert "do not match" in one_line_error(tmp_path / "mismatch.pt")
    save_atomic({**payload, "config": {**payload["config"], "colour": "red"}}, tmp_path / "config.pt")
    assert "unknown key" in one_line_error(tmp_path / "config.pt")


def test_max_minutes_stops_training_after_the_first_batch(tmp_path):
    data = toy_degradation(64, seed=7)
    config = replace(TOY, epochs=1000, max_minutes=1e-9)
    result = train_rul(data, data, config, F, tmp_path, PREPROCESSOR, log=lambda line: None)
    assert result.stopped == "max_minutes" and result.epochs == 1
    assert (tmp_path / "best.pt").is_file() and (tmp_path / "last.pt").is_file()


def test_patience_stops_training_when_validation_rmse_stops_improving(tmp_path):
    data = toy_degradation(32, seed=8)
    config = replace(TOY, epochs=1000, learning_rate=0.0, patience=2)
    result = train_rul(data, data, config, F, tmp_path, PREPROCESSOR, log=lambda line: None)
    assert result.stopped == "patience"
    assert (result.best_epoch, result.epochs) == (1, 3)


def test_training_is_deterministic_for_a_seed(tmp_path):
    data = toy_degradation(64, seed=9)
    config = replace(TOY, epochs=2, dropout=0.3)
    for run in ("a", "b"):
        train_rul(data, data, config, F, tmp_path / run, PREPROCESSOR, log=lambda line: None)
    first, _, _ = load_rul_checkpoint(tmp_path / "a" / "last.pt")
    second, _, _ = load_rul_checkpoint(tmp_path / "b" / "last.pt")
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_noise_jitters_the_real_cycles_of_each_training_batch_afresh_and_leaves_padding(tmp_path):
    data = toy_degradation(64, seed=10)
    seen = []

    class Watching(torch.nn.Module):  # the model, recording the windows it is trained on
        def __init__(self, model):
            super().__init__()
            self.model, self.n_features = model, model.n_features

        def forward(self, x, mask):
            seen.append((x.clone(), mask.clone()))
            return self.model(x, mask)

    config = replace(TOY, epochs=2, batch_size=64, noise=0.5)
    model = Watching(build_rul_model(config, F))
    dataset = TensorDataset(data.x, data.mask, data.rul, data.health)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(2):
        _train_epoch(model, dataset, optimizer, config, generator, math.inf, "epoch")
    (first, mask), (second, _) = seen[0], seen[1]
    replay = torch.Generator().manual_seed(0)  # the epoch's order, then its batch's draws, from the one generator
    order = torch.randperm(64, generator=replay)
    expected = data.x[order] + 0.5 * torch.randn(first.shape, generator=replay) * data.mask[order].unsqueeze(-1)
    torch.testing.assert_close(first, expected)
    assert torch.equal(first[~mask], torch.zeros_like(first[~mask]))  # padding untouched
    assert not torch.allclose(first[mask], second[mask])  # each batch its own draws


def test_time_warp_trains_and_leaves_a_run_without_it_as_it_was(tmp_path):
    data = toy_degradation(64, seed=10)
    runs = {}
    for name, warp in (("plain", 0.0), ("warped", 0.3)):
        config = replace(TOY, epochs=2, time_warp=warp)
        train_rul(data, data, config, F, tmp_path / name, PREPROCESSOR, log=lambda line: None)
        runs[name] = load_rul_checkpoint(tmp_path / name / "last.pt")
    assert runs["warped"][1].time_warp == 0.3  # stored in the checkpoint's config
    plain, warped = runs["plain"][0].state_dict(), runs["warped"][0].state_dict()
    assert any(not torch.equal(plain[name], warped[name]) for name in plain)  # it saw other windows


# Resuming


def weights_of(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["weights"]


def interrupted_at(epoch: int, monkeypatch) -> None:
    """Ctrl-C during the training pass of ``epoch`` (counted from this call on)."""
    real, calls = rul_train._train_epoch, []

    def cut(*args, **kwargs):
        calls.append(1)
        if len(calls) == epoch:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(rul_train, "_train_epoch", cut)


@pytest.mark.parametrize("schedule", ["plateau", "cosine"])
def test_a_run_interrupted_and_resumed_ends_as_the_run_that_was_never_stopped(tmp_path, monkeypatch, schedule):
    data = toy_degradation(96, seed=11)
    config = replace(TOY, epochs=5, dropout=0.3, noise=0.1, time_warp=0.2, schedule=schedule, plateau_patience=0)
    quiet = lambda line: None  # noqa: E731
    train_rul(data, data, config, F, tmp_path / "whole", PREPROCESSOR, log=quiet)
    with monkeypatch.context() as patch:
        interrupted_at(3, patch)
        with pytest.raises(KeyboardInterrupt):
            train_rul(data, data, config, F, tmp_path / "cut", PREPROCESSOR, log=quiet)
    assert torch.load(tmp_path / "cut" / "last.pt", weights_only=True)["training_state"]["epoch"] == 2
    lines: list[str] = []
    result = train_rul(data, data, config, F, tmp_path / "cut", PREPROCESSOR, log=lines.append, resume=True)
    assert any("resumed" in line and "after epoch 2" in line for line in lines)
    assert result.epochs == 5 and result.stopped == "epochs"
    for name in ("last.pt", "best.pt"):  # the same dropout, noise, warp draws, order and schedule as unbroken
        whole, cut = weights_of(tmp_path / "whole" / name), weights_of(tmp_path / "cut" / name)
        assert all(torch.equal(whole[key], cut[key]) for key in whole), name

    def records(run: str) -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
                for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]

    assert records("cut") == records("whole")  # one record per epoch, none lost or doubled


def test_resume_drops_the_metrics_written_after_last_pt_and_a_torn_line(tmp_path):
    data = toy_degradation(64, seed=12)
    config = replace(TOY, epochs=2)
    train_rul(data, data, config, F, tmp_path, PREPROCESSOR, log=lambda line: None)
    metrics = tmp_path / "metrics.jsonl"
    kept = metrics.read_text()
    metrics.write_text(kept + '{"epoch": 3, "loss": 1.0}\n{"epoch": 4, "lo')  # killed before last.pt, mid-line
    train_rul(data, data, replace(config, epochs=3), F, tmp_path, PREPROCESSOR, log=lambda line: None, resume=True)
    lines = metrics.read_text().splitlines()
    assert metrics.read_text().startswith(kept) and [json.loads(line)["epoch"] for line in lines] == [1, 2, 3]
    assert json.loads(lines[-1])["loss"] != 1.0


def test_resuming_a_finished_run_trains_nothing_and_reports_it(tmp_path):
    data = toy_degradation(64, seed=13)
    config = replace(TOY, epochs=2)
    first = train_rul(data, data, config, F, tmp_path, PREPROCESSOR, log=lambda line: None)
    before = (tmp_path / "last.pt").read_bytes()
    lines: list[str] = []
    again = train_rul(data, data, config, F, tmp_path, PREPROCESSOR, log=lines.append, resume=True)
    assert "the run had finished (after epoch 2, on epochs)" in lines[-1]
    assert (again.best_rmse, again.epochs, again.stopped) == (first.best_rmse, 2, "epochs")
    assert (tmp_path / "last.pt").read_bytes() == before


def test_resume_refuses_other_settings_and_a_file_without_training_state(tmp_path):
    data = toy_degradation(64, seed=14)
    config = replace(TOY, epochs=1)
    train_rul(data, data, config, F, tmp_path, PREPROCESSOR, log=lambda line: None)
    with pytest.raises(ConfigError, match=r"was trained with window 8, not 12; resume with the run's own settings"):
        train_rul(data, data, replace(config, window=12), F, tmp_path, PREPROCESSOR, log=print, resume=True)
    longer = replace(config, epochs=3, max_minutes=5.0)  # how long it may train is the resumed run's to choose
    assert train_rul(data, data, longer, F, tmp_path, PREPROCESSOR, log=print, resume=True).epochs == 3
    payload = torch.load(tmp_path / "best.pt", weights_only=True)  # best.pt carries no training state
    save_atomic(payload, tmp_path / "last.pt")
    with pytest.raises(ConfigError, match="holds no training state"):
        train_rul(data, data, longer, F, tmp_path, PREPROCESSOR, log=print, resume=True)

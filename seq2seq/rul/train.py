"""Training the RUL model: multi-task loss, AdamW, clipping, early stopping on validation RMSE,
a wall-clock budget, atomic best/last checkpoints and a JSONL metrics log.

Randomness is seeded from ``RulConfig.seed``: torch's global generator (initialisation, dropout)
and a separate generator that owns the order of the training windows. Two runs with the same
seed on the same device give the same weights.

Checkpoint layout (plain types only, so ``torch.load(weights_only=True)`` reads it):
    format_version  int, FORMAT_VERSION
    kind            "rul-model"
    config          dict of RulConfig fields
    n_features      int, F
    preprocessor    the data layer's preprocessor state (plain types), used to prepare new data
    weights         the model's state_dict
and, in last.pt, ``training_state``: the epoch it was saved after, the best so far, the optimizer,
the schedules, both generators, why the run stopped (None while it runs) and, when its caller named
it, the data it trains on (``fingerprint``: flag -> ``resume.file_fingerprint``), for ``--resume``. A
run saves last.pt after every epoch, so an interrupted or killed run continues after its last
finished epoch, as it would have gone on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import TensorDataset

from seq2seq.checkpoint import (
    count_parameters,
    load_members,
    load_weights,
    members_weights,
    read_payload,
    save_atomic,
)
from seq2seq.config import RulConfig, resolve_device
from seq2seq.config_checks import from_dict
from seq2seq.errors import CheckpointError, ConfigError, checkpoint_fault
from seq2seq.files import make_folder
from seq2seq.progress import progress_bar
from seq2seq.resume import check_same_run
from seq2seq.rul.evaluate import Windows, evaluate_windows
from seq2seq.rul.model import RulEnsemble, RulModel, RulOutput, build_rul_model
from seq2seq.rul.windows import time_warp
from seq2seq.writing import keep_logged

FORMAT_VERSION = 1
KIND = "rul-model"
REQUIRED_KEYS = ("config", "n_features", "preprocessor", "weights")
CLIP_GRAD_NORM = 1.0  # maximum gradient L2 norm; RulConfig has no field for it


class Split(Windows, Protocol):
    """Windows with their health classes: health (N,) long in {0 healthy, 1 degrading, 2 critical}."""

    health: Tensor


@dataclass(frozen=True)
class RulTrainResult:
    best_rmse: float  # validation RMSE (cycles) of best.pt
    best_epoch: int  # epoch that wrote best.pt
    epochs: int  # epochs run, the last one possibly cut short by max_minutes
    seconds: float  # wall-clock training time
    parameters: int  # trainable parameters
    stopped: str  # why training ended: epochs | patience | max_minutes


def rul_loss(output: RulOutput, rul: Tensor, health: Tensor, config: RulConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """loss = MSE(predicted RUL / cap, target RUL / cap) + health_weight x cross-entropy(health).

    The regression is the task; the health class is an auxiliary one derived from the same RUL
    thresholds, which pushes the features to separate the healthy, degrading and critical
    regimes. Dividing by the cap puts the MSE on a [0, 1] scale (about 0.01 at 12 cycles RMSE),
    while the cross-entropy starts near ln 3 = 1.1; a weight below 1 (0.3 by default) keeps the
    auxiliary task from dominating the gradient once the regression error is small.
    Returns the loss and its detached parts ``rul_mse`` and ``health_ce``.
    """
    cap = float(config.rul_cap)
    rul_mse = F.mse_loss(output.rul / cap, rul.to(output.rul.dtype) / cap)
    health_ce = F.cross_entropy(output.health_logits, health)
    loss = rul_mse + config.health_weight * health_ce
    return loss, {"rul_mse": rul_mse.detach(), "health_ce": health_ce.detach()}


def save_rul_checkpoint(path: str | Path, model: RulModel | RulEnsemble, config: RulConfig,
                        preprocessor_state: dict[str, Any], training_state: dict[str, Any] | None = None) -> None:
    """Write a self-describing checkpoint atomically (``seq2seq.checkpoint``); an ensemble's first member's
    weights are ``weights`` and the others' ``ensemble_weights``, so one model's file is unchanged."""
    members = list(model.members) if isinstance(model, RulEnsemble) else [model]
    save_atomic({
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "config": dataclasses.asdict(config),
        "n_features": model.n_features,
        "preprocessor": preprocessor_state,
        **members_weights(members),
        **({"training_state": training_state} if training_state is not None else {}),
    }, path)


def load_rul_checkpoint(path: str | Path) -> tuple[RulModel | RulEnsemble, RulConfig, dict[str, Any]]:
    """Model (eval mode, on the CPU; a RulEnsemble when the file holds several), its config and the
    preprocessor state saved with it."""
    path = Path(path)
    payload = read_payload(path, KIND, FORMAT_VERSION, REQUIRED_KEYS)
    with checkpoint_fault():
        config = from_dict(RulConfig, payload["config"], where=f"{path}: config")
        n_features = payload["n_features"]
        if not isinstance(n_features, int) or isinstance(n_features, bool):
            raise ConfigError(f"{path}: n_features must be a whole number, got {n_features!r}")
        model = build_rul_model(config, n_features)
    model = load_weights(path, model, payload["weights"], "config")
    if not isinstance(payload["preprocessor"], dict):
        raise CheckpointError(f"{path}: preprocessor must be an object, got {type(payload['preprocessor']).__name__}")
    members = load_members(path, payload, model, lambda: build_rul_model(config, n_features), "config")
    return (RulEnsemble(members) if len(members) > 1 else model).eval(), config, payload["preprocessor"]


def _train_epoch(model: RulModel, data: TensorDataset, optimizer: torch.optim.Optimizer, config: RulConfig,
                 generator: torch.Generator, deadline: float, desc: str) -> tuple[dict[str, float], bool]:
    """One pass over ``data`` in seeded random order; returns mean loss parts and whether time ran out."""
    model.train()
    n = len(data)
    order = torch.randperm(n, generator=generator).to(data.tensors[0].device)  # (N,)
    sums = {"loss": 0.0, "rul_mse": 0.0, "health_ce": 0.0}
    seen, out_of_time = 0, False
    with progress_bar(total=n, desc=desc, unit="win", leave=False, mininterval=1.0) as bar:
        for index in order.split(config.batch_size):
            x, mask, rul, health = data[index]
            if config.noise > 0:  # fresh each batch: the model never sees one window's readings twice
                jitter = torch.randn(x.shape, generator=generator).to(x.device)  # (B, W, F)
                x = x + config.noise * jitter * mask.unsqueeze(-1)  # padding stays 0
            if config.time_warp > 0:  # after the noise, so that a run without warp draws as before
                draws = torch.rand(x.shape[0], generator=generator).to(x.device)  # (B,)
                x, mask = time_warp(x, mask, 1 + config.time_warp * (2 * draws - 1))
            loss, parts = rul_loss(model(x, mask), rul, health, config)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_GRAD_NORM)
            optimizer.step()
            size = int(index.shape[0])
            for name, value in (("loss", loss.detach()), *parts.items()):
                sums[name] += float(value) * size
            seen += size
            bar.update(size)
            bar.set_postfix(loss=f"{sums['loss'] / seen:.4f}", refresh=False)
            if time.monotonic() > deadline:
                out_of_time = True
                break
    return {name: total / seen for name, total in sums.items()}, out_of_time


def _check_split(split: Split, name: str, n_features: int) -> None:
    if split.x.ndim != 3 or split.x.shape[-1] != n_features:
        raise ConfigError(f"{name} windows must be (N, W, {n_features}), got {tuple(split.x.shape)}")
    if split.x.shape[0] == 0:
        raise ConfigError(f"{name} split has no windows")


def train_rul(train: Split, valid: Split, config: RulConfig, n_features: int, output_dir: str | Path,
              preprocessor_state: dict[str, Any], log: Callable[[str], None] = print,
              resume: bool = False, fingerprint: dict[str, Any] | None = None) -> RulTrainResult:
    """Train on ``train``, select by RMSE on ``valid``; writes best.pt, last.pt (after every epoch) and
    metrics.jsonl. ``resume``: continue the run in OUTPUT_DIR/last.pt after its last finished epoch, which must
    have the same settings (but for those a resumed run may change) and, where it recorded them, ``fingerprint``."""
    _check_split(train, "training", n_features)
    _check_split(valid, "validation", n_features)
    output_dir = Path(output_dir)
    make_folder(output_dir)
    device = resolve_device(config.device)
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    model = build_rul_model(config, n_features).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, config.epochs) if config.schedule == "cosine" \
        else None
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5,
                                                         patience=config.plateau_patience)
    state: dict[str, Any] = {"epoch": 0, "best_rmse": math.inf, "best_epoch": 0, "seconds": 0.0, "stopped": None}
    if resume:
        state = _resume(output_dir / "last.pt", config, fingerprint, model, optimizer, cosine, plateau, generator, log)
        if state["stopped"] == "patience" or state["epoch"] >= config.epochs:  # killed before its caller knew
            log(f"{output_dir}: the run had finished (after epoch {state['epoch']}, on {state['stopped']})")
            return RulTrainResult(best_rmse=state["best_rmse"], best_epoch=state["best_epoch"], epochs=state["epoch"],
                                  seconds=state["seconds"], parameters=count_parameters(model),
                                  stopped=state["stopped"])
    data = TensorDataset(train.x.float().to(device), train.mask.bool().to(device),
                         train.rul.float().to(device), train.health.long().to(device))
    parameters = count_parameters(model)
    log(f"training a {parameters:,}-parameter RUL model on {len(data)} windows ({device}), "
        f"validating on {valid.x.shape[0]}")
    start = time.monotonic()
    deadline = start + config.max_minutes * 60 if config.max_minutes > 0 else math.inf
    best_rmse, best_epoch, epoch, stopped = state["best_rmse"], state["best_epoch"], state["epoch"], "epochs"
    if resume:  # a line written after last.pt was (the process killed in between) is the epoch to be run again
        keep_logged(output_dir / "metrics.jsonl", "epoch", state["epoch"])
    with (output_dir / "metrics.jsonl").open("a" if resume else "w", encoding="utf-8") as metrics:
        for epoch in range(state["epoch"] + 1, config.epochs + 1):
            parts, out_of_time = _train_epoch(model, data, optimizer, config, generator, deadline,
                                              f"epoch {epoch}/{config.epochs}")
            scores = evaluate_windows(model, valid)
            if cosine is not None:
                cosine.step()
            else:
                plateau.step(scores.rmse)
            improved = scores.rmse < best_rmse
            if improved:
                best_rmse, best_epoch = scores.rmse, epoch
                save_rul_checkpoint(output_dir / "best.pt", model, config, preprocessor_state)
            seconds = state["seconds"] + time.monotonic() - start
            ending = "patience" if not improved and epoch - best_epoch >= config.patience else \
                "max_minutes" if out_of_time else "epochs" if epoch == config.epochs else None
            record = {"epoch": epoch, **parts, "valid_rmse": scores.rmse, "valid_score": scores.score,
                      "best_rmse": best_rmse, "seconds": seconds}
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            save_rul_checkpoint(output_dir / "last.pt", model, config, preprocessor_state, {
                "epoch": epoch, "best_rmse": best_rmse, "best_epoch": best_epoch, "seconds": seconds,
                "stopped": ending, "optimizer": optimizer.state_dict(), "plateau": plateau.state_dict(),
                "cosine": cosine.state_dict() if cosine is not None else None,
                "generator": generator.get_state(), "torch_rng": torch.get_rng_state(),
                **({"fingerprint": fingerprint} if fingerprint is not None else {})})
            log(f"epoch {epoch}: loss {parts['loss']:.4f}  valid RMSE {scores.rmse:.2f}  "
                f"score {scores.score:.1f}  best {best_rmse:.2f} (epoch {best_epoch})")
            if ending is not None:
                stopped = ending
                break
    return RulTrainResult(best_rmse=best_rmse, best_epoch=best_epoch, epochs=epoch,
                          seconds=state["seconds"] + time.monotonic() - start, parameters=parameters, stopped=stopped)


def resumable_payload(last: Path, config: RulConfig, fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    """The checkpoint ``last`` of a run that ``--resume`` may continue with ``config`` and ``fingerprint``: one with a
    training state, trained with the same settings but for those a resumed run may change, and on the same
    data where it recorded that (``resume.check_same_run``); else a one-line ConfigError."""
    payload = read_payload(last, KIND, FORMAT_VERSION, REQUIRED_KEYS)
    state = payload.get("training_state")
    if not isinstance(state, dict):
        raise ConfigError(f"--resume: {last} holds no training state (written before runs could be resumed); "
                          "start over with --overwrite")
    with checkpoint_fault():
        saved = from_dict(RulConfig, payload["config"], where=f"{last}: config")
    check_same_run(last, [(saved, config)], state.get("fingerprint"), fingerprint)
    return payload


def _resume(last: Path, config: RulConfig, fingerprint: dict[str, Any] | None, model: RulModel,
            optimizer: torch.optim.Optimizer, cosine: torch.optim.lr_scheduler.LRScheduler | None,
            plateau: torch.optim.lr_scheduler.ReduceLROnPlateau, generator: torch.Generator,
            log: Callable[[str], None]) -> dict[str, Any]:
    """Load the run in ``last`` into the fresh objects of ``train_rul``; returns its saved progress. The run must be
    one to continue with ``config`` and ``fingerprint`` (``resumable_payload``)."""
    payload = resumable_payload(last, config, fingerprint)
    state = payload["training_state"]
    load_weights(last, model, payload["weights"], "config")
    with checkpoint_fault():
        try:
            optimizer.load_state_dict(state["optimizer"])
            plateau.load_state_dict(state["plateau"])
            if cosine is not None:
                cosine.load_state_dict(state["cosine"])
            generator.set_state(state["generator"])
            torch.set_rng_state(state["torch_rng"])
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise CheckpointError(f"{last}: its training state cannot be restored ({err})") from None
    log(f"resumed {last} after epoch {state['epoch']} (best validation RMSE {state['best_rmse']:.2f})")
    return state

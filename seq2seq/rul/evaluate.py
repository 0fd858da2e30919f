"""Scoring remaining-useful-life predictions: RMSE and the asymmetric PHM08 score.

Both follow the C-MAPSS protocol (Saxena, Goebel, Simon and Eklund, "Damage Propagation Modeling
for Aircraft Engine Run-to-Failure Simulation", PHM 2008): one prediction per engine, from its
last window, with d = predicted - true RUL in cycles.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Protocol

import torch
from torch import Tensor

from seq2seq.rul.model import RulModel, RulOutput

PROTOCOL_CAP = 125  # FD001's literature scores against true RULs capped at 125 (Zheng et al. 2017 and after)


class Windows(Protocol):
    """Any record of B windows: x (B, W, F) float, mask (B, W) bool, rul (B,) float in cycles."""

    x: Tensor
    mask: Tensor
    rul: Tensor


def _errors(pred: Tensor, true: Tensor) -> Tensor:
    """d = pred - true in float64, one per prediction; mismatched or empty inputs are a ValueError."""
    pred = torch.as_tensor(pred).detach().cpu().to(torch.float64).reshape(-1)
    true = torch.as_tensor(true).detach().cpu().to(torch.float64).reshape(-1)
    if pred.numel() != true.numel() or pred.numel() == 0:
        raise ValueError(f"need as many predictions as targets, at least one; got {pred.numel()} and {true.numel()}")
    return pred - true


def rmse(pred: Tensor, true: Tensor) -> float:
    """Root-mean-square error sqrt(mean(d^2)) in cycles."""
    return float(_errors(pred, true).square().mean().sqrt())


def phm08_score(pred: Tensor, true: Tensor) -> float:
    """PHM08 score s = sum(exp(-d/13) - 1 for d < 0) + sum(exp(d/10) - 1 for d >= 0), lower is better.

    Late predictions (d > 0, the engine fails before the predicted time) cost more than early
    ones of the same size.
    """
    d = _errors(pred, true)
    return float(torch.where(d < 0, torch.expm1(-d / 13.0), torch.expm1(d / 10.0)).sum())


@dataclass(frozen=True)
class RulScores:
    rmse: float  # cycles
    score: float  # PHM08, summed over engines
    n_engines: int  # predictions scored (one per engine for the official test set)

    def to_json(self) -> dict:
        """The scores as strict JSON takes them: a score past float64 (an error of some 7,100 cycles late or 9,200
        early, possible only uncapped) is null, never the ``Infinity`` no strict reader takes."""
        return {key: value if not isinstance(value, float) or math.isfinite(value) else None
                for key, value in asdict(self).items()}

    def summary(self) -> str:
        return f"RMSE {self.rmse:.2f}  PHM08 score {self.score:.1f}  ({self.n_engines} engines)"


def predict(model: RulModel, x: Tensor, mask: Tensor, batch_size: int = 512) -> RulOutput:
    """Predictions for B windows in batches on the model's device, gathered on the CPU.

    x (B, W, F), mask (B, W) -> RulOutput with rul (B,) >= 0, health_logits (B, Y), attention
    (B, W). Runs in eval mode and restores the model's previous mode afterwards.
    """
    if x.shape[0] == 0:
        raise ValueError("predict needs at least one window")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    parts: list[RulOutput] = []
    try:
        with torch.inference_mode():
            for start in range(0, x.shape[0], batch_size):
                end = start + batch_size
                parts.append(model(x[start:end].to(device), mask[start:end].to(device)))
    finally:
        model.train(was_training)
    return RulOutput(
        rul=torch.cat([p.rul for p in parts]).cpu().clamp(min=0.0),  # (B,)
        health_logits=torch.cat([p.health_logits for p in parts]).cpu(),  # (B, Y)
        attention=torch.cat([p.attention for p in parts]).cpu(),  # (B, W)
    )


def evaluate_windows(model: RulModel, windows: Windows, batch_size: int = 512) -> RulScores:
    """RMSE and PHM08 score of one prediction per row of ``windows`` against ``windows.rul``.

    For the official test set each row is one engine's last window, so rows are engines.
    """
    output = predict(model, windows.x, windows.mask, batch_size)
    return RulScores(rmse=rmse(output.rul, windows.rul), score=phm08_score(output.rul, windows.rul),
                     n_engines=int(windows.rul.shape[0]))

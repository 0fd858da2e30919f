"""One optimisation step of the translator: forward, loss, backward, update.

AdamW with decoupled weight decay; a learning-rate schedule (``plateau``: halved when dev BLEU
stops improving; ``warmup``: linear warm-up, then inverse square root); mixed precision from
``seq2seq.fast.precision`` (float16 on CUDA with loss scaling; bfloat16 needs none); gradient
clipping; DistributedDataParallel around the model under torchrun, which averages the gradients.

Shapes (legend: seq2seq/__init__.py): N real target positions, V target vocabulary.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from seq2seq.config import TrainConfig
from seq2seq.data import Batch
from seq2seq.distributed import World
from seq2seq.fast.precision import autocast, autocast_dtype
from seq2seq.model import Seq2Seq


def token_loss(logits: Tensor, target: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL. logits (N, V), target (N,) ids."""
    log_probs = logits.float().log_softmax(dim=-1)  # (N, V)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (N,)
    loss = (1.0 - smoothing) * nll - smoothing * log_probs.mean(dim=-1)  # PyTorch's label_smoothing
    return loss.sum(), nll.sum()


def disagreement(logits: Tensor) -> Tensor:
    """R-Drop's penalty: logits (2N, V) of two passes of the same N positions (the first N, then the
    second) -> the summed symmetric KL, 1/2 (KL(p||q) + KL(q||p)) = 1/2 sum (p - q)(log p - log q)."""
    first, second = logits.float().log_softmax(dim=-1).chunk(2)  # (N, V) each
    return 0.5 * ((first.exp() - second.exp()) * (first - second)).sum()


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig):
    if config.schedule == "plateau":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="max", factor=0.5, patience=config.plateau_patience, min_lr=config.min_learning_rate)
    warmup = max(1, config.warmup_steps)  # "warmup": the only other name a TrainConfig takes (config_checks.NAMES)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1))))


class TrainStep:
    """The optimiser, its schedule and the loss scaler of one run; a call is one update."""

    def __init__(self, model: Seq2Seq, config: TrainConfig, device: torch.device, world: World) -> None:
        self.model, self.config, self.device = model, config, device
        self.network: torch.nn.Module = model  # what a step calls: the model, or DDP around it
        if world.size > 1:  # every parameter gets a gradient in every configuration: no find_unused_parameters
            device_ids = [device.index] if device.type == "cuda" else None  # cuda:LOCAL_RANK
            self.network = DistributedDataParallel(model, device_ids=device_ids)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate,
                                           weight_decay=config.weight_decay)
        self.scheduler = make_scheduler(self.optimizer, config)
        # fp16 autocast on CUDA by default (cuDNN runs GRUs in fp16 on every generation) needs loss
        # scaling; bf16 and float32 do not.
        self.autocast_dtype = autocast_dtype(config.precision, device)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.autocast_dtype == torch.float16)

    @property
    def learning_rate(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def __call__(self, batch: Batch, feed_mask: Tensor | None) -> tuple[float, float, int]:
        """One update on ``batch``; returns its per-token loss and NLL and its target token count.
        ``feed_mask`` (B, T) bool: scheduled sampling's draws (None: always the gold token).
        With ``rdrop`` the batch goes through the model twice (as one batch of 2B, each half its own
        dropout); the loss is the mean of both passes' plus rdrop/2 x their mean symmetric KL per token,
        as in Liang et al. (2021), whose alpha it is."""
        n_tokens = batch.n_tokens
        if self.config.rdrop > 0:
            batch = batch.twice()
            feed_mask = None if feed_mask is None else torch.cat([feed_mask, feed_mask])
        with autocast(self.device, self.autocast_dtype):
            logits, _ = self.network(batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in, batch.tgt_mask,
                                     feed_mask)  # (N, V) at the real target positions
        loss, nll = token_loss(logits, batch.tgt_out[batch.tgt_mask], self.config.label_smoothing)
        if self.config.rdrop > 0:
            loss = loss + self.config.rdrop * disagreement(logits)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss / batch.n_tokens).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.config.schedule == "warmup":
            self.scheduler.step()
        return loss.item() / batch.n_tokens, nll.item() / batch.n_tokens, n_tokens

    def validated(self, bleu: float) -> None:
        """The plateau schedule follows dev BLEU."""
        if self.config.schedule == "plateau":
            self.scheduler.step(bleu)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "scaler": self.scaler.state_dict()}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        if saved.get("scaler"):
            self.scaler.load_state_dict(saved["scaler"])

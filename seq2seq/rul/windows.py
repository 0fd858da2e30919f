"""From scaled engine histories to model inputs: RUL targets, health states and windows of cycles.

Shapes (legend: seq2seq/__init__.py): L cycles of one engine, B windows, W window (cycles), F kept sensors.

The standard C-MAPSS protocol (Saxena et al. 2008; e.g. Zheng et al. 2017): the RUL target is capped
piecewise-linearly (``min(remaining, cap)``), and the model sees windows of W cycles of the sensors
``seq2seq.rul.preprocess.Preprocessor`` scaled.

A window ending at cycle index ``e`` holds cycles ``e - W + 1 .. e``; an engine with fewer than
W cycles of history there is LEFT-padded with zero rows, and its mask (True = real cycle, the
project's one mask convention) is False on the padding, so the newest cycle is always last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from seq2seq.config import RulConfig
from seq2seq.errors import DataError
from seq2seq.rul.cmapss import Engine
from seq2seq.rul.preprocess import Preprocessor

HEALTH_STATES = ("healthy", "degrading", "critical")  # index = class id
HEALTHY, DEGRADING, CRITICAL = range(len(HEALTH_STATES))


def health_state(rul: float, config: RulConfig) -> int:
    """The health class id of a remaining life: CRITICAL <= critical_below < DEGRADING <= degrading_below < HEALTHY."""
    if rul <= config.critical_below:
        return CRITICAL
    return DEGRADING if rul <= config.degrading_below else HEALTHY


def health_states(rul: np.ndarray, config: RulConfig) -> np.ndarray:
    """``health_state`` of every element: (B,) float -> (B,) int64."""
    rul = np.asarray(rul)
    states = np.full(rul.shape, HEALTHY, dtype=np.int64)
    states[rul <= config.degrading_below] = DEGRADING
    states[rul <= config.critical_below] = CRITICAL
    return states


def rul_targets(engine_length: int, cap: float, final_rul: float = 0) -> np.ndarray:
    """Remaining cycles after each of L cycles, ``min(remaining, cap)``: (L,) float64.

    ``final_rul`` is the remaining life after the last cycle: 0 for an engine run to failure, the
    true RUL of a truncated test engine.
    """
    return np.minimum(_remaining(engine_length, final_rul), cap)


def _remaining(engine_length: int, final_rul: float) -> np.ndarray:
    if engine_length < 1:
        raise ValueError(f"engine_length must be at least 1, got {engine_length}")
    if not (math.isfinite(final_rul) and final_rul >= 0):
        raise ValueError(f"final_rul must be a finite number >= 0, got {final_rul}")
    return np.arange(engine_length - 1, -1, -1, dtype=np.float64) + final_rul  # (L,)


def windows(values: np.ndarray, ends: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The W cycles ending at (and including) each index of ``ends``, left-padded with zeros.

    values (L, F), ends (B,) indices into L -> x (B, W, F) float32, mask (B, W) bool with True on
    real cycles: ``mask[i].sum() == min(ends[i] + 1, W)`` and ``x[i, -1] == values[ends[i]]``.
    """
    L, F = values.shape
    ends = np.asarray(ends, dtype=np.int64)
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    if ends.size and (ends.min() < 0 or ends.max() >= L):
        raise ValueError(f"window ends must be cycle indices in 0..{L - 1}, got {ends.min()}..{ends.max()}")
    padded = np.concatenate([np.zeros((window - 1, F), dtype=np.float32), values.astype(np.float32)])  # (W-1+L, F)
    rows = ends[:, None] + np.arange(window)  # (B, W) rows of padded; padded row r is cycle r - (W - 1)
    return padded[rows], rows >= window - 1  # (B, W, F), (B, W)


def time_warp(x: Tensor, mask: Tensor, factors: Tensor) -> tuple[Tensor, Tensor]:
    """Windows whose time runs ``factors`` times as fast, anchored at their last cycle (augmentation).

    x (B, W, F), mask (B, W), factors (B,) > 0 -> x, mask of the same shapes: step ``t`` of window ``b``
    reads its cycle at position ``W - 1 - (W - 1 - t) x factors[b]``, linearly interpolated between the two
    cycles around it. A factor below 1 stretches the window's newest cycles over all W steps; above 1
    compresses its history into the newest steps, and a step that would read before the first real cycle
    becomes padding. The last step is the last cycle unchanged, so the target stays the window's.
    """
    B, W, F = x.shape
    steps = torch.arange(W, device=x.device, dtype=x.dtype)  # (W,)
    position = (W - 1) - (W - 1 - steps) * factors.to(x.dtype).unsqueeze(1)  # (B, W) where each step reads
    first = (W - mask.sum(dim=1)).to(x.dtype).unsqueeze(1)  # (B, 1) index of the first real cycle
    real = position >= first - 1e-4  # (B, W); a hair's tolerance, so that a factor of 1 keeps every cycle
    below = position.floor().clamp(0, W - 1)  # (B, W)
    frac = (position - below).clamp(0, 1).unsqueeze(-1)  # (B, W, 1)
    above = (below + 1).clamp(max=W - 1)
    gather = lambda index: x.gather(1, index.long().unsqueeze(-1).expand(B, W, F))  # noqa: E731
    warped = gather(below) * (1 - frac) + gather(above) * frac  # (B, W, F)
    return warped * real.unsqueeze(-1), real


@dataclass
class RulWindows:
    """B windows of sensor cycles with their targets; indexing gives a tuple of the fields, as TensorDataset."""

    x: Tensor  # (B, W, F) float32, z-scored sensors, zero on padding
    mask: Tensor  # (B, W) bool, True = real cycle
    rul: Tensor  # (B,) float32, remaining cycles after the window's last cycle, capped
    health: Tensor  # (B,) long, class id in HEALTH_STATES, from the uncapped remaining life
    unit: Tensor  # (B,) long, engine number
    cycle: Tensor  # (B,) long, cycle number (from the file) of the window's last cycle

    def __post_init__(self) -> None:
        sizes = {name: len(getattr(self, name)) for name in ("x", "mask", "rul", "health", "unit", "cycle")}
        if len(set(sizes.values())) != 1:
            raise ValueError(f"RulWindows fields differ in length: {sizes}")

    def __len__(self) -> int:
        return len(self.rul)

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return self.x[index], self.mask[index], self.rul[index], self.health[index], self.unit[index], self.cycle[index]

    def subset(self, indices: Sequence[int] | Tensor | np.ndarray) -> RulWindows:
        """The windows at ``indices``, in that order."""
        index = torch.as_tensor(np.asarray(indices), dtype=torch.long)
        return RulWindows(self.x[index], self.mask[index], self.rul[index], self.health[index],
                          self.unit[index], self.cycle[index])


def training_set(engines: Sequence[Engine], preprocessor: Preprocessor, config: RulConfig) -> RulWindows:
    """One window ending at every cycle of every engine, each run to failure."""
    return _windows_at(engines, preprocessor, config, [np.arange(e.length) for e in engines], [0.0] * len(engines))


def last_windows(
    engines: Sequence[Engine],
    preprocessor: Preprocessor,
    config: RulConfig,
    final_rul: Sequence[float] | np.ndarray | None = None,
) -> RulWindows:
    """One window per engine, ending at its last cycle; ``final_rul`` (B,) true RULs, default 0 (run to failure)."""
    final = np.zeros(len(engines)) if final_rul is None else np.asarray(final_rul, dtype=np.float64)
    if final.shape != (len(engines),):
        raise ValueError(f"final_rul has shape {final.shape}, expected ({len(engines)},)")
    ends = [np.array([engine.length - 1]) for engine in engines]
    return _windows_at(engines, preprocessor, config, ends, final.tolist())


def truncated_windows(
    engines: Sequence[Engine],
    preprocessor: Preprocessor,
    config: RulConfig,
    fractions: Sequence[float] = (0.3, 0.5, 0.7, 0.9),
) -> RulWindows:
    """Windows ending after each fraction of the life of run-to-failure engines (held out for model selection).

    The window for fraction f ends at cycle index ``ceil(f * L) - 1``; an index two fractions share is kept once.
    """
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise ValueError(f"fractions must lie in (0, 1], got {tuple(fractions)}")
    ends = [np.unique([max(math.ceil(f * e.length) - 1, 0) for f in fractions]) for e in engines]
    return _windows_at(engines, preprocessor, config, ends, [0.0] * len(engines))


def windows_before_failure(
    engines: Sequence[Engine],
    preprocessor: Preprocessor,
    config: RulConfig,
    remaining: Sequence[int],
    min_history: int = 31,
) -> RulWindows:
    """Windows of run-to-failure engines cut ``remaining`` cycles before their failure, as the official test
    files cut theirs (FD001's true RULs run from 7 to 145, its shortest history is 31 cycles); a cut that
    leaves fewer than ``min_history`` cycles is left out. For reporting on engines held out of training."""
    ends = [np.array(sorted({e.length - 1 - r for r in remaining if e.length - r >= min_history}), dtype=np.int64)
            for e in engines]
    kept = [(e, end) for e, end in zip(engines, ends, strict=True) if len(end)]
    if not kept:
        raise DataError(f"no engine is long enough to cut {min(remaining)} cycles before failure")
    return _windows_at([e for e, _ in kept], preprocessor, config, [end for _, end in kept], [0.0] * len(kept))


def _windows_at(
    engines: Sequence[Engine],
    preprocessor: Preprocessor,
    config: RulConfig,
    ends: Sequence[np.ndarray],
    final_rul: Sequence[float],
) -> RulWindows:
    """Windows of ``preprocessor.window`` cycles ending at ``ends[i]`` of engine i, failing ``final_rul[i]`` later."""
    if not engines:
        raise DataError("no engines to make windows from")
    xs, masks, remaining, units, cycles = [], [], [], [], []
    for engine, engine_ends, final in zip(engines, ends, final_rul, strict=True):
        x, mask = windows(preprocessor.transform(engine), engine_ends, preprocessor.window)  # (n, W, F), (n, W)
        xs.append(x)
        masks.append(mask)
        remaining.append(_remaining(engine.length, final)[engine_ends])  # (n,)
        units.append(np.full(len(engine_ends), engine.unit))
        cycles.append(engine.cycles[engine_ends])
    remaining_all = np.concatenate(remaining)  # (B,)
    return RulWindows(
        x=torch.from_numpy(np.concatenate(xs)),  # (B, W, F)
        mask=torch.from_numpy(np.concatenate(masks)),  # (B, W)
        rul=torch.from_numpy(np.minimum(remaining_all, config.rul_cap).astype(np.float32)),
        health=torch.from_numpy(health_states(remaining_all, config)),
        unit=torch.from_numpy(np.concatenate(units).astype(np.int64)),
        cycle=torch.from_numpy(np.concatenate(cycles).astype(np.int64)),
    )

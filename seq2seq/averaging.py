"""Checkpoint averaging within a run (``TrainConfig.average_best`` k > 1): the weights of the k best
validations are kept in OUTPUT_DIR/kept/step-N.pt while the run goes on, and their element-wise mean
(Junczys-Dowmunt et al. 2016, Vaswani et al. 2017) competes for best.pt when it ends (``seq2seq.selection``).

Which validations are kept is a list in the selection's state, ``[{"key": [...], "step": n}]`` best first, so
it travels in last.pt and a resumed run keeps the same ones.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from seq2seq.checkpoint import read_payload, save_atomic
from seq2seq.ensemble import average_weights

KIND = "seq2seq-kept-weights"  # a kept file holds weights for averaging, nothing else
FORMAT_VERSION = 1


def kept_path(output_dir: Path, step: int) -> Path:
    return output_dir / "kept" / f"step-{step}.pt"


def keep(kept: list[dict[str, Any]], k: int, key: list[float], step: int, model: nn.Module,
         output_dir: Path) -> None:
    """The weights validated at ``step`` (ranking ``key``) into ``kept`` and its folder when they rank among
    the ``k`` best so far; the entry they push out, and its file, go. A tie keeps the earlier one first."""
    if k < 2 or (len(kept) == k and key <= kept[-1]["key"]):
        return
    save_atomic({"kind": KIND, "format_version": FORMAT_VERSION, "weights": model.state_dict()},
                kept_path(output_dir, step))
    kept.append({"key": key, "step": step})
    kept.sort(key=lambda entry: entry["key"], reverse=True)
    for entry in kept[k:]:
        kept_path(output_dir, entry["step"]).unlink(missing_ok=True)
    del kept[k:]


def mean_of(kept: list[dict[str, Any]], output_dir: Path) -> dict[str, Tensor]:
    """The element-wise mean of the kept weights."""
    return average_weights([read_payload(kept_path(output_dir, entry["step"]), KIND, FORMAT_VERSION,
                                         ("weights",))["weights"] for entry in kept])


def forget(output_dir: Path) -> None:
    """Remove the kept files (after last.pt has forgotten them, so a crash in between leaves no dangling list)."""
    shutil.rmtree(output_dir / "kept", ignore_errors=True)

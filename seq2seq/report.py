"""What a training run tells while it runs: a progress bar per epoch (loss, perplexity, target
tokens/s, ETA), one log line per validation, and OUTPUT_DIR/metrics.jsonl (one JSON object per
validation). Under torchrun only rank 0 reports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from seq2seq.evaluate import Scores
from seq2seq.progress import progress_bar
from seq2seq.writing import keep_logged


class TrainingReport:
    def __init__(self, output_dir: Path, log: Callable[[str], None], enabled: bool) -> None:
        self.output_dir, self.log, self.enabled = output_dir, log, enabled

    def epoch_bar(self, batches: Iterable, epoch: int, epochs: int, done: int, total: int) -> tqdm:
        return progress_bar(batches, desc=f"epoch {epoch}/{epochs}", unit="batch", leave=False, initial=done,
                            total=total, mininterval=1.0, disable=not self.enabled)

    @staticmethod
    def step(bar: tqdm, loss: float, nll: float, rate: float) -> None:
        bar.set_postfix(loss=f"{loss:.3f}", ppl=f"{math.exp(min(nll, 50)):.2f}", tok_s=f"{rate:.0f}", refresh=False)

    def validation(self, state: dict[str, Any], scores: Scores, example: str, learning_rate: float,
                   rate: float, learned: float | None = None) -> None:
        """Append the validation to metrics.jsonl and log it (``learned``: a fine-tuning run's share of its new
        pairs answered exactly)."""
        record = {"epoch": state["epoch"], "step": state["step"], "dev_bleu": round(scores.bleu, 2),
                  "dev_chrf": round(scores.chrf, 2), "best_bleu": round(state["best_bleu"], 2),
                  "lr": learning_rate, "target_tokens_per_s": round(rate, 1),
                  "train_seconds": round(state["train_seconds"], 1), "example": example,
                  **({"learned": round(learned, 4)} if learned is not None else {})}
        self._append(record)
        new = f", new pairs learned {learned:.0%}" if learned is not None else ""
        # Epochs done, as metrics.jsonl keeps them; one stopped part-way (a time limit, validate_every) is named as
        # the bar named it, "epoch 1/30", rather than "epoch 0"
        when = (f"epoch {state['epoch']}" if not state.get("batches_done") else
                f"in epoch {state['epoch'] + 1} (batch {state['batches_done']})")
        self.log(f"step {state['step']} {when}: dev BLEU {scores.bleu:.2f} chrF {scores.chrf:.2f}"
                 f"{new} (best {state['best_bleu']:.2f}) lr {record['lr']:.2e} {rate:.0f} target tok/s")

    def blend(self, state: dict[str, Any], share: float, scores: Scores, learned: float, kept: bool) -> None:
        """Append a fine-tuning run's blend of its last weights with its start's to metrics.jsonl, and log it."""
        record = {"blend": share, "step": state["step"], "dev_bleu": round(scores.bleu, 2),
                  "dev_chrf": round(scores.chrf, 2), "learned": round(learned, 4),
                  "best_bleu": round(state["best_bleu"], 2)}
        self._append(record)
        self.log(f"blend {share:.2f} x last + {1 - share:.2f} x start: dev BLEU {scores.bleu:.2f} "
                 f"chrF {scores.chrf:.2f}, new pairs learned {learned:.0%}" + (" -> best.pt" if kept else ""))

    def average(self, steps: list[int], state: dict[str, Any], scores: Scores, kept: bool) -> None:
        """Append the mean of the weights of the validations at ``steps`` to metrics.jsonl, and log it."""
        self._append({"average_of_steps": steps, "step": state["step"], "dev_bleu": round(scores.bleu, 2),
                      "dev_chrf": round(scores.chrf, 2), "best_bleu": round(state["best_bleu"], 2)})
        self.log(f"mean of the {len(steps)} best validations' weights (steps {', '.join(map(str, steps))}): "
                 f"dev BLEU {scores.bleu:.2f} chrF {scores.chrf:.2f}" + (" -> best.pt" if kept else ""))

    def resumed(self, step: int) -> None:
        """metrics.jsonl as it was at ``step``, where the run goes on from (``writing.keep_logged``)."""
        if self.enabled:
            keep_logged(self.output_dir / "metrics.jsonl", "step", step)

    def _append(self, record: dict[str, Any]) -> None:
        """One JSON object, one line of OUTPUT_DIR/metrics.jsonl."""
        with open(self.output_dir / "metrics.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

"""Which weights of a training run become its best.pt.

Every validation's greedy dev BLEU is compared with the best so far; a fine-tuning run (``--init-from``)
compares ``seq2seq.finetune.Learning``'s key instead: the most of its new pairs learned, within a
tolerance of its start's dev BLEU. When the run ends two more candidates compete the same way: with
``average_best`` k > 1 the mean of the k best validations' weights (``seq2seq.averaging``), and in a
fine-tuning run blends of its last weights with its start's (``finetune.BLENDS``). Whatever competes,
the model goes back to its last weights afterwards, for last.pt and a later ``--resume``.

Under torchrun rank 0 alone translates the dev set; its BLEU (and share learned) is broadcast, so every
process takes the same decisions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from seq2seq import averaging
from seq2seq.config import SearchConfig, TrainConfig
from seq2seq.corpus import ParallelCorpus
from seq2seq.distributed import World
from seq2seq.ensemble import average_weights
from seq2seq.evaluate import Scores, score_corpus
from seq2seq.finetune import BLENDS, Learning
from seq2seq.model import Seq2Seq
from seq2seq.recommender import Recommender
from seq2seq.report import TrainingReport
from seq2seq.tokenizer import Tokenizer

# What a run's best.pt holds, as its result (``seq2seq train``'s JSON line) says in "best_from": "step" (the
# weights validated at best_step), "average" (the mean of the best validations' weights), "blend 0.75" (a
# fine-tuning run's last weights, that share of them, blended with its start's), "members" (an ensemble; best_step
# is then 0). Both of the run's-end candidates name the last step as theirs, which alone did not say that best.pt
# is not that step's weights.


@dataclass(frozen=True)
class Judgement:
    """One validation: rank 0's scores and hypotheses (None and [] elsewhere), the BLEU and share learned every
    process agrees on, and whether the weights became the best."""

    scores: Scores | None
    hypotheses: list[str]
    bleu: float
    learned: float | None  # a fine-tuning run's share of its new pairs answered exactly; None otherwise
    improved: bool


class Selection:
    """The best so far and the candidates that compete with it. ``state`` travels in last.pt (its keys sit
    beside the training loop's, as they always have)."""

    def __init__(self, model: Seq2Seq, tokenizer: Tokenizer, dev: ParallelCorpus, config: TrainConfig,
                 output_dir: Path, device: torch.device, world: World, report: TrainingReport,
                 save: Callable[[str], None], log: Callable[[str], None], learn: ParallelCorpus | None = None,
                 start: Seq2Seq | None = None) -> None:
        """``save(name)`` writes the run's checkpoint OUTPUT_DIR/name (the trainer's: it holds the training state).
        ``learn``: a fine-tuning run's new pairs; ``start``: that run's starting weights, blended with its last."""
        self.model, self.tokenizer, self.dev, self.config = model, tokenizer, dev, config
        self.output_dir, self.device, self.world, self.report, self.save, self.log = \
            output_dir, device, world, report, save, log
        self.learning = Learning.of(learn, tokenizer.normalize_source) if learn else None
        self.start = start.to(device) if start is not None and learn else None
        self.state: dict[str, Any] = {"best_bleu": -1.0, "best_step": 0, "best_learned": -1.0, "bleu_floor": None,
                                      "best_from": "step",  # what best.pt holds (above)
                                      "kept": [],  # average_best: [{"key": [...], "step": n}], best first
                                      "finished_step": None}  # the step whose candidates last competed (finish)

    def load_state(self, saved: dict[str, Any]) -> None:
        self.state = {key: saved.get(key, default) for key, default in self.state.items()}  # older: no learned

    # -- during the run ----------------------------------------------------------------------
    def measure_start(self) -> None:
        """A fine-tuning run's starting point: its dev BLEU, less the tolerance, is the floor of best.pt's."""
        if self.learning is None or self.state["bleu_floor"] is not None:
            return
        _, _, bleu, learned = self.measure()
        self.state["bleu_floor"] = bleu - self.config.forget_tolerance
        self.log(f"start: dev BLEU {bleu:.2f}; of the {len(self.learning.answers)} alerts the new pairs teach (those "
                 f"it can learn), {learned:.0%} answered as taught; best.pt: the most of them learned with dev BLEU at "
                 f"least {self.state['bleu_floor']:.2f}")

    def judge(self, step: int, measured: tuple[Scores | None, list[str], float, float | None]) -> Judgement:
        """The weights at ``step``, ``measured`` (``measure``), recorded as the best when they rank higher (writing
        best.pt is the caller's, once it has logged the validation)."""
        scores, hypotheses, bleu, learned = measured
        return Judgement(scores, hypotheses, bleu, learned, self.becomes_best(bleu, learned, step))

    def keep_for_averaging(self, bleu: float, learned: float | None, step: int) -> None:
        """Rank 0: the weights just validated into OUTPUT_DIR/kept/ when they rank among the ``average_best``
        best so far (``seq2seq.averaging.keep``)."""
        averaging.keep(self.state["kept"], self.config.average_best, list(self.key(bleu, learned)), step,
                       self.model, self.output_dir)

    # -- when the run ends -------------------------------------------------------------------
    def finish(self, step: int) -> None:
        """Let the mean of the kept weights, then a fine-tuning run's blends, compete for best.pt, once for a
        step: a finished run resumed without more steps to train has nothing new to blend (or to report)."""
        if self.state["finished_step"] == step:
            return
        self.average_kept(step)
        self.blend_with_start(step)
        self.state["finished_step"] = step
        self.save("last.pt")

    def average_kept(self, step: int) -> None:
        """The mean of the kept weights, validated as an epoch is and written to best.pt when it ranks higher;
        then the kept files go (last.pt first forgets them) and the model keeps its last weights."""
        kept = self.state["kept"]
        if self.world.broadcast(float(len(kept))) < 2:
            return
        last = copy.deepcopy(self.model.state_dict())
        mean = averaging.mean_of(kept, self.output_dir) if self.world.is_main else None
        scores, _, improved = self.compete(mean, step, "average")
        if scores is not None:
            self.report.average([entry["step"] for entry in kept], self.progress(step), scores, improved)
        self.model.load_state_dict(last)
        self.state["kept"] = []
        self.save("last.pt")
        if self.world.is_main:
            averaging.forget(self.output_dir)

    def blend_with_start(self, step: int) -> None:
        """A fine-tuning run's last weights blended with its start's (``finetune.BLENDS``), each validated as an
        epoch is and written to best.pt when it ranks higher; the model keeps its last weights."""
        if self.start is None:
            return
        last = copy.deepcopy(self.model)
        for share in BLENDS:
            scores, learned, won = self.compete(average_weights([self.start, last], [1 - share, share]), step,
                                                f"blend {share:g}")
            if scores is not None:
                self.report.blend(self.progress(step), share, scores, learned or 0.0, won)
        self.model.load_state_dict(last.state_dict())

    def compete(self, weights: dict[str, torch.Tensor] | None, step: int, source: str
                ) -> tuple[Scores | None, float | None, bool]:
        """Load ``weights`` (None: keep the model's, as processes other than rank 0 do) and validate them as an
        epoch is; best.pt when they rank higher. ``source``: what they are ("best_from" above). Returns the scores, the
        share learned and whether they won."""
        if weights is not None:
            self.model.load_state_dict(weights)
        scores, _, bleu, learned = self.measure()
        improved = self.becomes_best(bleu, learned, step, source)
        if improved:
            self.save("best.pt")
        return scores, learned, improved

    # -- the rule ------------------------------------------------------------------------------
    def becomes_best(self, bleu: float, learned: float | None, step: int, source: str = "step") -> bool:
        """Whether weights scoring ``bleu`` (and ``learned``) rank above the best so far; if so they become it."""
        state = self.state
        if self.key(bleu, learned) <= self.key(state["best_bleu"], state["best_learned"]):
            return False
        state.update(best_bleu=bleu, best_step=step, best_learned=-1.0 if learned is None else learned,
                     best_from=source)
        return True

    def key(self, bleu: float, learned: float | None) -> tuple[float, ...]:
        """What best.pt maximises: dev BLEU, or in a fine-tuning run ``finetune.Learning.key``."""
        if self.learning is None:
            return (bleu,)
        return self.learning.key(bleu, learned or 0.0, self.state["bleu_floor"])

    def measure(self) -> tuple[Scores | None, list[str], float, float | None]:
        """Rank 0's greedy dev scores and hypotheses; on every process their BLEU and, in a fine-tuning run,
        the share of its new pairs learned. The model is left in training mode."""
        scores, hypotheses = (score_greedy(self.recommender(), self.dev) if self.world.is_main else (None, []))
        bleu = self.world.broadcast(scores.bleu if scores else 0.0)
        learned = None
        if self.learning is not None:
            learned = self.world.broadcast(self.learning.share(self.recommender()) if scores else 0.0)
        self.model.train()
        return scores, hypotheses, bleu, learned

    def recommender(self) -> Recommender:
        return Recommender(self.model, self.tokenizer, self.device)

    def progress(self, step: int) -> dict[str, Any]:
        """What a report line needs of the run: the step and the best so far."""
        return {**self.state, "step": step}


def score_greedy(recommender: Recommender, dev: ParallelCorpus) -> tuple[Scores, list[str]]:
    """Scores and hypotheses of greedy search on the dev set (what selects checkpoints)."""
    hypotheses = recommender.translate([e.source for e in dev.examples], SearchConfig(beam_size=1), batch_size=128)
    return score_corpus(hypotheses, [example.target for example in dev.examples]), hypotheses

"""The training loop: epochs of token-budget batches, validation by greedy dev BLEU, early stopping, a
wall-clock budget, best/last checkpoints and exact resume.
Its parts: ``seq2seq.optimizer`` makes one update (AdamW, schedule, mixed precision, clipping, DDP),
``seq2seq.selection`` decides which weights become best.pt (each validation, the mean of the best ones,
a fine-tuning run's blends with its start), ``seq2seq.report`` tells (progress bar, log, metrics.jsonl),
``seq2seq.checkpoint`` writes the files.

Randomness comes from three sources, all seeded from ``TrainConfig.seed`` and saved in last.pt:
torch's global generator (initialisation, dropout), the batch-order generator and the
teacher-forcing generator. A run resumed from last.pt continues with the very batches and draws
that the uninterrupted run would have used.

Under torchrun (``seq2seq.distributed``) every process builds the same tokenizer (trained on rank 0
and sent to the others) and model (DDP copies rank 0's weights), shuffles the epoch's batches alike
and takes its own share (``World.shard``); DDP averages the gradients. Rank 0 alone validates, logs
and writes best.pt, last.pt and metrics.jsonl, and sends the dev BLEU to the others, so every process
takes the same schedule and early-stopping decisions and all stop together.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from seq2seq.checkpoint import count_parameters, load_model, save_atomic, save_checkpoint
from seq2seq.config import TrainConfig
from seq2seq.corpus import ParallelCorpus
from seq2seq.data import Batch, ParallelDataset, TokenBatchSampler, collate, drop_source_pieces
from seq2seq.distributed import ONE_PROCESS, World
from seq2seq.errors import DataError
from seq2seq.evaluate import fit_case_memory
from seq2seq.model import Seq2Seq
from seq2seq.optimizer import TrainStep
from seq2seq.recommender import Recommender
from seq2seq.report import TrainingReport
from seq2seq.selection import Selection
from seq2seq.tokenizer import Tokenizer
from seq2seq.trust import memory_state
from seq2seq.writing import signals_held

SAMPLING_SEED_STRIDE = 100_003  # epoch e of seed s samples its pieces from s x this + e
RANK_SEED_STRIDE = 1000  # under torchrun, process r draws dropout and teacher forcing from seed + r x this


@dataclass(frozen=True)
class TrainResult:
    best_bleu: float
    best_step: int
    steps: int
    epochs: float  # passes over the training data, fractional when stopped mid-epoch
    seconds: float
    tokens_per_second: float  # target tokens per second of training, all processes together (validation excluded)
    stopped: str  # why training ended
    parameters: int
    best_from: str = "step"  # what best.pt holds (seq2seq.selection); records written before it: "step"


class Trainer:
    """The loop of one training run: its generators and counters, validation and early stopping."""

    def __init__(self, model: Seq2Seq, tokenizer: Tokenizer, train_set: ParallelDataset,
                 dev: ParallelCorpus, config: TrainConfig, output_dir: Path, device: torch.device,
                 log: Callable[[str], None], world: World = ONE_PROCESS, cases: ParallelCorpus | None = None,
                 learn: ParallelCorpus | None = None, start: Seq2Seq | None = None) -> None:
        """``cases``: the training pairs kept in best.pt as its case memory when training ends. ``learn``: a
        fine-tuning run's new pairs, which then choose best.pt with dev BLEU (``finetune.Learning``).
        ``start``: that run's starting weights (a copy training does not touch), blended with its last."""
        self.model, self.tokenizer, self.train_set, self.dev = model.to(device), tokenizer, train_set, dev
        self.cases = cases
        self.config, self.output_dir, self.device, self.log, self.world = config, output_dir, device, log, world
        self.update = TrainStep(self.model, config, device, world)
        self.report = TrainingReport(output_dir, log, world.is_main)
        self.selection = Selection(self.model, tokenizer, dev, config, output_dir, device, world, self.report,
                                   self.save, log, learn, start)
        self.batch_generator = torch.Generator().manual_seed(config.seed + 1)
        self.forcing_generator = torch.Generator().manual_seed(config.seed + 2 + RANK_SEED_STRIDE * world.rank)
        self.sampler = TokenBatchSampler(train_set.batch_lengths(), config.batch_tokens, shuffle=True,
                                         generator=self.batch_generator)
        if len(self.sampler) < world.size:  # each process would take no step, and the run would pass for trained
            raise DataError(f"{len(train_set):,} training pairs make {len(self.sampler)} batches of at most "
                            f"{config.batch_tokens} target tokens, fewer than the {world.size} processes: each would "
                            "train no step; run in fewer processes, or with smaller train.batch_tokens")
        self.state: dict[str, Any] = {"epoch": 0, "batches_done": 0, "step": 0, "bad_validations": 0,
                                      "train_tokens": 0, "train_seconds": 0.0}
        self.epoch_start_generator = self.batch_generator.get_state()
        self.fingerprint: dict[str, Any] | None = None  # what the run reads (runs.run_fingerprint), for --resume

    # -- checkpoints -----------------------------------------------------------------------
    def training_state(self) -> dict[str, Any]:
        return {**self.state, **self.selection.state, **self.update.state_dict(),
                "epoch_start_generator": self.epoch_start_generator,
                "forcing_generator": self.forcing_generator.get_state(), "torch_rng": torch.get_rng_state(),
                **({"fingerprint": self.fingerprint} if self.fingerprint is not None else {}),
                # only under torchrun, so that a one-process last.pt keeps its exact contents
                **({"world_size": self.world.size} if self.world.size > 1 else {})}

    def load_training_state(self, saved: dict[str, Any]) -> None:
        self.update.load_state_dict(saved)
        self.epoch_start_generator = saved["epoch_start_generator"]
        self.forcing_generator.set_state(saved["forcing_generator"])
        torch.set_rng_state(saved["torch_rng"])
        self.state = {key: saved.get(key, default) for key, default in self.state.items()}
        self.selection.load_state(saved)

    def save(self, name: str) -> None:
        """Write OUTPUT_DIR/name (rank 0 only: the others hold the same weights)."""
        if self.world.is_main:
            save_checkpoint(self.output_dir / name, self.model, self.tokenizer, self.config, self.training_state())

    # -- loop ----------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        started = time.monotonic()
        deadline = started + 60 * self.config.max_minutes if self.config.max_minutes > 0 else math.inf
        self.selection.measure_start()
        try:
            stopped = self.run_epochs(deadline)
        except KeyboardInterrupt:
            self.save("last.pt")  # Ctrl-C loses nothing: --resume continues from this batch
            raise
        self.save("last.pt")
        self.selection.finish(self.state["step"])
        self.keep_cases()
        epochs = self.state["epoch"] + self.state["batches_done"] / max(1, len(self.sampler) // self.world.size)
        best = self.selection.state
        return TrainResult(best["best_bleu"], best["best_step"], self.state["step"], epochs,
                           time.monotonic() - started, self.tokens_per_second(), stopped,
                           count_parameters(self.model), best["best_from"])

    def keep_cases(self) -> None:
        """Store the case memory and the trust model fitted on the dev split in best.pt (seq2seq.trust)."""
        best = self.output_dir / "best.pt"
        if not (self.world.is_main and self.cases is not None and best.exists()):
            return
        model, tokenizer, payload = load_model(best)
        memory, trust = fit_case_memory(Recommender(model, tokenizer, self.device), self.cases, self.dev)
        save_atomic({**payload, "memory": memory_state(memory, trust)}, best)
        self.log(f"kept {len(memory)} past cases in {best}; out of scope below similarity "
                 f"{trust.scope_threshold:.3f}, or {trust.unfamiliar_threshold:.3f} for an "
                 f"alert of mostly new words (flags {trust.flag_rate:.0%} of dev)")

    def tokens_per_second(self) -> float:
        """Target tokens of all processes over the longest per-process training time (a collective)."""
        tokens, seconds = self.world.sum(self.state["train_tokens"]), self.world.max(self.state["train_seconds"])
        return tokens / max(seconds, 1e-9)

    def run_epochs(self, deadline: float) -> str:
        # A run resumed after it had stopped early (killed, or out of disk, while it kept its past cases) only
        # finishes: training on past its patience would give another model than the run interrupted. (A run that
        # ran out of epochs or minutes trains on when resumed with more; its patience cannot change.)
        if self.state["bad_validations"] >= self.config.patience:
            self.log(f"the run had stopped early at step {self.state['step']} ({self.state['bad_validations']} "
                     "validations without gain); finishing it")
            return "early stopping"
        stopped = "epochs"
        while self.state["epoch"] < self.config.epochs:
            if self.config.subword_alpha > 0:  # this epoch's pieces, the same again when it is resumed
                self.train_set.resample(self.tokenizer, self.config.subword_alpha,
                                        self.config.seed * SAMPLING_SEED_STRIDE + self.state["epoch"])
            self.batch_generator.set_state(self.epoch_start_generator)
            batches = self.world.shard(list(self.sampler))  # this epoch's share, reproducible from the saved state
            stopped = self.train_epoch(batches, deadline)
            if stopped:
                break
            self.state["epoch"] += 1
            self.state["batches_done"] = 0
            self.epoch_start_generator = self.batch_generator.get_state()
            stopped = self.validate() or "epochs"
            if stopped != "epochs":
                break
        return stopped

    def train_epoch(self, batches: list[list[int]], deadline: float) -> str:
        """Train on this epoch's remaining batches; returns a reason to stop early, or ""."""
        loader = DataLoader(self.train_set, batch_sampler=batches[self.state["batches_done"]:], collate_fn=collate,
                            pin_memory=self.device.type == "cuda")
        random_state = torch.get_rng_state()
        remaining = iter(loader)  # draws the loader's base seed from torch's generator, as each epoch's start does
        if self.state["batches_done"]:  # a resumed epoch: its seed was drawn when it began, before last.pt's state,
            torch.set_rng_state(random_state)  # and one more draw would give every later dropout mask another value
        bar = self.report.epoch_bar(remaining, self.state["epoch"] + 1, self.config.epochs, self.state["batches_done"],
                                    len(batches))
        self.model.train()
        for batch in bar:
            # Ctrl-C or SIGTERM during an update takes effect once it is counted: last.pt then holds whole steps and
            # the random state the next step starts from, so --resume trains on as a run never stopped would (an
            # update cut part-way, its dropout masks drawn, was done again with other masks).
            with signals_held():
                tick = time.monotonic()
                loss, nll, n_tokens = self.train_step(batch.to(self.device, non_blocking=True))
                self.state["train_seconds"] += time.monotonic() - tick
                self.state["train_tokens"] += n_tokens
                self.state["batches_done"] += 1
                self.state["step"] += 1
            # This process's rate times the processes: an estimate that needs no collective per step.
            self.report.step(bar, loss, nll, self.world.size * self.state["train_tokens"]
                             / max(self.state["train_seconds"], 1e-9))
            every = self.config.validate_every
            if every and self.state["step"] % every == 0 and self.validate():
                return "early stopping"
            if deadline < math.inf and self.world.any(time.monotonic() > deadline):  # all stop at one step
                bar.close()
                self.validate()
                return "time limit"
        bar.close()
        return ""

    def train_step(self, batch: Batch) -> tuple[float, float, int]:
        """One update, with this step's word-dropout and teacher-forcing draws; returns the per-token loss and
        NLL and the target token count."""
        if self.config.word_dropout > 0:  # drawn only then, so that a run without it draws as before
            batch = drop_source_pieces(batch, self.config.word_dropout, self.forcing_generator)
        feed_mask = None
        if self.config.teacher_forcing < 1.0:
            draws = torch.rand(batch.tgt_in.shape, generator=self.forcing_generator)
            feed_mask = (draws < self.config.teacher_forcing).to(self.device)
        return self.update(batch, feed_mask)

    def validate(self) -> str:
        """Greedy dev BLEU; saves last.pt (and best.pt on improvement); returns "early stopping" or "".

        Under torchrun rank 0 translates the dev set and sends its BLEU to the others, which wait.
        """
        state, step = self.state, self.state["step"]
        measured = self.selection.measure()  # the dev translation: a Ctrl-C here leaves the run as before it
        rate = self.tokens_per_second()
        # What the validation decides and writes is kept whole: a Ctrl-C or SIGTERM between its verdict and its
        # files saved a last.pt that counted the weights as best.pt while best.pt was never written, and the
        # resumed run ended without one (a test's SIGTERM found it). Signals take effect once last.pt is saved.
        with signals_held():
            judged = self.selection.judge(step, measured)
            state["bad_validations"] = 0 if judged.improved else state["bad_validations"] + 1
            self.update.validated(judged.bleu)
            if judged.scores is not None:
                self.report.validation({**state, **self.selection.state}, judged.scores,
                                       judged.hypotheses[0] if judged.hypotheses else "", self.update.learning_rate,
                                       rate, judged.learned)
                if judged.improved:
                    self.save("best.pt")
                self.selection.keep_for_averaging(judged.bleu, judged.learned, step)
                self.save("last.pt")
        return "early stopping" if state["bad_validations"] >= self.config.patience else ""

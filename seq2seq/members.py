"""A recipe's members: ``train.members`` runs of one recipe, seeds S, S + 1, ..., trained in turn or side by
side (``train.parallel``) in OUTPUT_DIR/member-K and saved as one ensemble (``combine.combine_checkpoints``),
or, with ``train.distill``, made the teacher of as many students (``distil``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from seq2seq.checkpoint import load_model, save_atomic
from seq2seq.combine import combine_checkpoints
from seq2seq.config import ModelConfig, SearchConfig, TokenizerConfig, TrainConfig, resolve_device
from seq2seq.corpus import ParallelCorpus, read_parallel
from seq2seq.distributed import ONE_PROCESS, World
from seq2seq.errors import ConfigError
from seq2seq.fast.threads import one_core_workers, worker_count
from seq2seq.recommender import Recommender
from seq2seq.resume import RESULT, check_run_folder, read_result, record_result
from seq2seq.runs import (
    build_trainer,
    check_finished,
    check_settings,
    fresh_model,
    run_fingerprint,
    shared_tokenizer,
    training_set,
)
from seq2seq.selection import score_greedy
from seq2seq.side_by_side import Member, train_side_by_side
from seq2seq.tokenizer import Tokenizer
from seq2seq.train import TrainResult

TEACHER, DISTILLED = "teacher.pt", "distilled.jsonl"  # in OUTPUT_DIR, with train.distill
DISTILL_SEARCH = SearchConfig(beam_size=5)  # the teacher's search when the recipe names none
CPU = torch.device("cpu")
LAST_MINUTES = 0.05  # a run that starts with the budget spent still trains this long (its best.pt is a model)


def train_members(train: ParallelCorpus, dev: ParallelCorpus, output_dir: str | Path, model_config: ModelConfig,
                  train_config: TrainConfig, tokenizer_config: TokenizerConfig, resume: bool = False,
                  overwrite: bool = False, log: Callable[[str], None] = print,
                  world: World = ONE_PROCESS, search: SearchConfig | None = None) -> TrainResult:
    """``train_config.members`` runs of one recipe, seeds seed, seed + 1, ..., each in OUTPUT_DIR/member-K with
    its own best.pt and last.pt, one tokenizer for all; OUTPUT_DIR/best.pt is their ensemble (seq2seq.ensemble)
    with the trust model fitted again on dev; ``max_minutes`` is the whole run's budget: each member may take
    what is left of it shared by the members still to train, so one that stops early leaves time to the rest. A
    member that finished wrote member-K/result.json; ``resume`` skips it, continues the member that was cut
    short and starts the ones not begun.

    With ``train_config.distill`` the members' ensemble is OUTPUT_DIR/teacher.pt instead, and teaches
    (sequence-level knowledge distillation, Kim and Rush 2016, "Sequence-level knowledge distillation"): it
    translates every training alert with ``search`` (the recipe's tuned settings; default DISTILL_SEARCH)
    into OUTPUT_DIR/distilled.jsonl, and as many students (OUTPUT_DIR/student-K, the same seeds) learn those
    translations in place of the logbook's own actions. MaintNet repeats an alert with many different
    actions; the teacher gives each alert its one likeliest answer, which a model of this size learns
    better (docs/recipes.md). OUTPUT_DIR/best.pt is the students' ensemble; its case memory holds the
    original pairs, which are what technicians did."""
    output_dir = Path(output_dir)
    seeds = range(1, train_config.members + 1)
    teachers = [output_dir / f"member-{k}" for k in seeds]
    students = [output_dir / f"student-{k}" for k in seeds] if train_config.distill else []
    check_run_folder(output_dir, resume, overwrite, [folder / "last.pt" for folder in teachers],
                     [output_dir / "best.pt", teachers[0] / "last.pt"], "member-K/last.pt")
    if train_config.parallel > 1 and world.size > 1:
        raise ConfigError(f"train.parallel is {train_config.parallel} under torchrun ({world.size} processes): "
                          "members side by side need one process to start them; set parallel 1 or run without torchrun")
    beyond = output_dir / f"member-{train_config.members + 1}" / "last.pt"
    if resume and beyond.is_file():  # the ensemble would leave it out without a word
        raise ConfigError(f"--resume: {beyond} is a member of this run, which train.members {train_config.members} "
                          "leaves out; resume with the run's own settings and data, start over with --overwrite, or "
                          "choose another --output-dir")
    one = replace(train_config, members=1, distill=False, parallel=1)
    finished = [(k, folder / "last.pt") for k, folder in enumerate(teachers if resume else [])
                if (folder / RESULT).is_file() and (folder / "last.pt").is_file()]
    fingerprint = run_fingerprint(train, dev) if finished else {}  # the data read once, not once per member
    for k, last in finished:  # kept, not trained again: of this recipe and data too
        check_finished(last, fingerprint, model_config, replace(one, seed=one.seed + k), tokenizer_config)
    runs = _Runs(dev, model_config, one, tokenizer_config, resume, overwrite, log, world, len(teachers + students),
                 min(train_config.parallel, train_config.members))
    runs.ready(train)  # a recipe refused here leaves an earlier run in OUTPUT_DIR as it was
    if overwrite and world.is_main:
        for path in [output_dir / "best.pt", output_dir / TEACHER, output_dir / DISTILLED,
                     *(folder / RESULT for folder in teachers + students)]:
            path.unlink(missing_ok=True)
    results = runs.train(train, teachers)
    if not students:
        return _summary(results, _save_ensemble(teachers, dev, output_dir / "best.pt", results, log, world))
    _save_ensemble(teachers, dev, output_dir / TEACHER, results, log, world)
    distilled = distil(output_dir / TEACHER, train, search or DISTILL_SEARCH, output_dir / DISTILLED, log, world,
                       world.place(resolve_device(train_config.device)))
    taught = runs.train(distilled, students, cases=train)
    return _summary(results + taught, _save_ensemble(students, dev, output_dir / "best.pt", taught, log, world))


@dataclass
class _Runs:
    """The members' runs of one recipe: the settings they share, the budget left, and the tokenizer once the
    first has one."""

    dev: ParallelCorpus
    model_config: ModelConfig
    config: TrainConfig  # one member's (members 1); its max_minutes is the whole recipe's
    tokenizer_config: TokenizerConfig
    resume: bool
    overwrite: bool
    log: Callable[[str], None]
    world: World
    runs_left: int  # runs of the recipe not yet trained, these and later ones (a distilled recipe's students)
    slots: int = 1  # runs trained at once (train.parallel)
    tokenizer: Tokenizer | None = None
    started: float = field(default_factory=time.monotonic)

    def minutes(self) -> float:
        """The next run's budget: what is left of the recipe's, shared by the runs still to train, as many at once
        as there are slots (0: none)."""
        if self.config.max_minutes <= 0:
            return 0.0
        left = self.config.max_minutes - (time.monotonic() - self.started) / 60
        return max(left, LAST_MINUTES) * min(self.slots, self.runs_left) / self.runs_left

    def ready(self, train: ParallelCorpus) -> None:
        """The members' shared tokenizer, trained on ``train``, and a one-line error for settings, sizes or data
        that cannot train, before any member starts."""
        self.tokenizer = self.tokenizer or shared_tokenizer(train, self.tokenizer_config, self.world)
        check_settings(self.model_config, self.config, self.tokenizer_config, self.world)
        fresh_model(self.model_config, self.tokenizer)  # sizes that do not fit
        training_set(train, self.tokenizer, self.model_config.max_source_length, self.config)

    def finished(self, folder: Path) -> bool:
        """Whether ``--resume`` finds the run in ``folder`` done (its result.json)."""
        return self.resume and (folder / RESULT).is_file()

    def pending(self, folders: list[Path], results: dict[int, TrainResult]
                ) -> Iterator[tuple[int, Path, TrainConfig, bool]]:
        """The runs to train, in order, each with its seed, the budget left when it is asked for and whether it
        continues its last.pt; a run that finished before (``resume``) goes into ``results`` instead."""
        for k, folder in enumerate(folders):
            config = replace(self.config, seed=self.config.seed + k, max_minutes=self.minutes())
            self.runs_left -= 1
            if self.finished(folder):
                results[k] = read_result(folder, TrainResult)
                self.log(f"{folder.name} (seed {config.seed}) had finished: {folder}")
                continue
            yield k, folder, config, self.resume and (folder / "last.pt").is_file()

    def train(self, train: ParallelCorpus, folders: list[Path], cases: ParallelCorpus | None = None
              ) -> list[TrainResult]:
        """One run per folder, seeds seed, seed + 1, ... (``cases``: their case memory, default ``train``)."""
        results: dict[int, TrainResult] = {}
        first = self.config.seed
        if self.slots > 1:
            self.side_by_side(train, folders, cases, results)
            return [results[k] for k in range(len(folders))]
        self.log(f"{len(folders)} members, seeds {first}..{first + len(folders) - 1}, decoded together as one "
                 "ensemble")
        for k, folder, config, resume in self.pending(folders, results):
            trainer = build_trainer(train, self.dev, folder, self.model_config, config, self.tokenizer_config,
                                    resume, self.overwrite, self.log, self.world, cases=cases,
                                    tokenizer=self.tokenizer)
            self.log(f"{folder.name} ({k + 1}/{len(folders)}): seed {config.seed}, in {folder}")
            self.tokenizer = trainer.tokenizer
            results[k] = trainer.fit()
            if self.world.is_main:
                record_result(folder, results[k])
        return [results[k] for k in range(len(folders))]

    def side_by_side(self, train: ParallelCorpus, folders: list[Path], cases: ParallelCorpus | None,
                     results: dict[int, TrainResult]) -> None:
        """The runs in ``slots`` processes at once (side_by_side.py), the cores split among them."""
        self.ready(train)  # settings that cannot train are one line here, not one per process
        first = self.config.seed
        self.log(f"{len(folders)} members, seeds {first}..{first + len(folders) - 1}, {self.slots} at once, "
                 "decoded together as one ensemble")
        jobs = self.pending(folders, results)
        state = self.tokenizer.state_dict()

        def start() -> Member | None:
            k, folder, config, resume = next(jobs, (None, None, None, None))
            return None if folder is None else Member(k, folder, train, self.dev, self.model_config, config,
                                                      self.tokenizer_config, resume, self.overwrite, cases, state)

        def finish(member: Member, result: TrainResult) -> None:
            results[member.index] = result
            record_result(member.folder, result)

        todo = sum(not self.finished(folder) for folder in folders)
        train_side_by_side(start, finish, self.slots, max(1, torch.get_num_threads() // self.slots), todo, self.log)


def _save_ensemble(folders: list[Path], dev: ParallelCorpus, path: Path, results: list[TrainResult],
                   log: Callable[[str], None], world: World) -> float:
    """The runs' best.pt files as one ensemble at ``path`` (trust fitted on dev); its greedy dev BLEU."""
    bleu = 0.0
    if world.is_main:
        payload, _ = combine_checkpoints([folder / "best.pt" for folder in folders], "ensemble", dev)
        save_atomic(payload, path)
        model, tokenizer, _ = load_model(path)
        bleu = score_greedy(Recommender(model, tokenizer), dev)[0].bleu
        log(f"{path}: the ensemble of {len(folders)} members, dev BLEU {bleu:.2f} "
            f"(members {', '.join(f'{r.best_bleu:.2f}' for r in results)})")
    return world.broadcast(bleu)


def _summary(results: list[TrainResult], bleu: float) -> TrainResult:
    return TrainResult(best_bleu=bleu, best_step=0, steps=sum(r.steps for r in results),
                       epochs=sum(r.epochs for r in results), seconds=sum(r.seconds for r in results),
                       tokens_per_second=sum(r.tokens_per_second for r in results) / len(results),
                       stopped="members", parameters=sum(r.parameters for r in results), best_from="members")


def distil(teacher: Path, train: ParallelCorpus, search: SearchConfig, path: Path, log: Callable[[str], None],
           world: World = ONE_PROCESS, device: torch.device = CPU) -> ParallelCorpus:
    """``train`` with each target replaced by the ``teacher``'s translation of its source (kept where the
    teacher answers nothing), written to ``path`` (JSONL) and read back from there when it exists (--resume)."""
    if world.is_main and not path.is_file():
        model, tokenizer, _ = load_model(teacher)
        started, workers = time.perf_counter(), worker_count(0, device)
        with one_core_workers(workers):
            answers = Recommender(model, tokenizer, device, workers=workers).translate(
                [example.source for example in train.examples], search)
        targets = [answer or example.target for example, answer in zip(train.examples, answers, strict=True)]
        path.with_suffix(".tmp").write_text("".join(
            json.dumps({"source": example.source, "target": target}, ensure_ascii=False) + "\n"
            for example, target in zip(train.examples, targets, strict=True)), encoding="utf-8")
        path.with_suffix(".tmp").replace(path)
        changed = sum(target != example.target for example, target in zip(train.examples, targets, strict=True))
        log(f"{path}: the teacher's translations of {len(answers)} training alerts ({search.beam_size}-beam, "
            f"{time.perf_counter() - started:.0f} s); {changed} differ from the logbook's action")
    world.barrier()  # every process, whichever found the file: the others read what rank 0 wrote
    return read_parallel(path)

"""A training run's start: its output folder (new, resumed or started over, never replaced silently), its
tokenizer (trained once, by rank 0 under torchrun) and its model, new, resumed from last.pt or taken
from a checkpoint to fine-tune, handed to a ``seq2seq.train.Trainer``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from seq2seq import averaging
from seq2seq.checkpoint import read_checkpoint, restore
from seq2seq.config import ModelConfig, TokenizerConfig, TrainConfig, resolve_device
from seq2seq.config_checks import from_dict
from seq2seq.corpus import ParallelCorpus
from seq2seq.data import ParallelDataset
from seq2seq.distributed import ONE_PROCESS, World
from seq2seq.errors import ConfigError, DataError, checkpoint_fault
from seq2seq.fast.precision import autocast_dtype
from seq2seq.files import make_folder
from seq2seq.model import Seq2Seq, build_model
from seq2seq.resume import check_run_folder, check_same_run, file_fingerprint
from seq2seq.tokenizer import Tokenizer
from seq2seq.train import RANK_SEED_STRIDE, Trainer
from seq2seq.trust import FLAG_RATE
from seq2seq.writing import PARTIAL


def build_trainer(train: ParallelCorpus, dev: ParallelCorpus, output_dir: str | Path, model_config: ModelConfig,
                  train_config: TrainConfig, tokenizer_config: TokenizerConfig, resume: bool = False,
                  overwrite: bool = False, log: Callable[[str], None] = print, world: World = ONE_PROCESS,
                  init: tuple[Seq2Seq, Tokenizer] | None = None, cases: ParallelCorpus | None = None,
                  tokenizer: Tokenizer | None = None, learn: ParallelCorpus | None = None,
                  start_from: tuple[Path, bool] | None = None) -> Trainer:
    """A fresh trainer (tokenizer trained on ``train``), or the one saved in OUTPUT_DIR/last.pt.

    An existing run is never replaced silently: ``resume`` continues it, ``overwrite`` starts over.
    Under torchrun (``world.size > 1``) only rank 0 touches OUTPUT_DIR, and ``resume`` is refused.
    ``init``: start from this model and tokenizer (``seq2seq.finetune``) instead of new ones, whose
    configurations then go unused. ``cases``: the pairs best.pt keeps as its case memory (default ``train``).
    ``tokenizer``: a fresh run's tokenizer, instead of one trained on ``train`` (the members of one recipe share it).
    ``learn``: a fine-tuning run's new pairs, which best.pt is chosen to have learned (``Selection.key``).
    ``start_from``: a fine-tuning run's --init-from file and whether it replays, recorded so that ``resume`` goes on
    only with the settings, data and start the run was started with (``check_resumed``).
    """
    output_dir = Path(output_dir)
    last = output_dir / "last.pt"
    if resume and world.size > 1:
        raise ConfigError(f"--resume runs in one process, not under torchrun ({world.size} processes): a run trained "
                          "in one process resumes without torchrun; a run trained under torchrun cannot be resumed, "
                          "start it over with --overwrite")
    device = check_settings(model_config if init is None else None, train_config, tokenizer_config, world)
    world.outcome(lambda: check_output_dir(output_dir, resume, overwrite) if world.is_main else None)
    torch.manual_seed(train_config.seed)
    fingerprint = run_fingerprint(learn if learn is not None else train, dev, start_from)  # its --train, not the mix
    payload = read_checkpoint(last) if resume else None
    if payload is not None:
        saved_size = payload.get("training_state", {}).get("world_size", 1)
        if saved_size != 1:
            raise ConfigError(f"--resume: {last} was written by {saved_size} "
                              "processes (torchrun), which cannot be resumed; start over with --overwrite")
        model, tokenizer = restore(payload, last)
        check_resumed(last, payload, model.config, tokenizer.config, init[0].config if init else model_config,
                      train_config, init[1].config if init else tokenizer_config, fingerprint)
    elif init is not None:
        model, tokenizer = init
    else:
        tokenizer = tokenizer or shared_tokenizer(train, tokenizer_config, world)
        model = fresh_model(model_config, tokenizer)
    if world.size > 1:  # same initial weights everywhere (DDP copies rank 0's too), then each its own dropout
        torch.manual_seed(train_config.seed + RANK_SEED_STRIDE * world.rank)
    train_set = training_set(train, tokenizer, model.config.max_source_length, train_config)
    start = copy.deepcopy(init[0]) if init is not None and learn else None  # before training moves init's weights
    trainer = Trainer(model, tokenizer, train_set, dev, train_config, output_dir, device, log, world,
                      train if cases is None else cases, learn, start)
    if world.is_main:  # only once the run can start is an earlier one given up (--overwrite)
        start_output_dir(output_dir, overwrite)
    trainer.fingerprint = fingerprint  # a resumed run written before runs recorded their data records it from now on
    if payload is not None:
        trainer.load_training_state(payload["training_state"])
        trainer.report.resumed(trainer.state["step"])
        best = trainer.selection.state["best_bleu"]
        log(f"resumed {last} at step {trainer.state['step']} "
            + (f"(best dev BLEU {best:.2f})" if best >= 0 else "(no validation yet)"))
    return trainer


def dev_overlap_warning(dev: ParallelCorpus, history: ParallelCorpus) -> str | None:
    """A warning when nearly every dev alert is in ``history`` (the pairs best.pt keeps as its past cases) word for
    word: the out-of-scope threshold, fitted to flag FLAG_RATE of dev, is then a similarity of 1, and every alert
    not seen before is called out of scope (``--dev`` the same file as ``--train``). A warning, not a refusal: a toy
    run may validate on its training pairs."""
    known = {example.source for example in history.examples}
    seen = sum(example.source in known for example in dev.examples)
    if not dev.examples or seen <= (1 - FLAG_RATE) * len(dev.examples):
        return None
    return (f"warning: {dev.path}: {seen:,} of its {len(dev.examples):,} alerts are in {history.path} too (the same "
            "file?): the out-of-scope threshold fitted on them will call every alert not seen in training out of "
            "scope; keep some pairs out of the training file for dev")


def training_set(train: ParallelCorpus, tokenizer: Tokenizer, max_source_length: int,
                 train_config: TrainConfig) -> ParallelDataset:
    """The pairs a run learns from, or a DataError when there are none: every target over max_target_length
    pieces (a log of long narratives) would make a run of no steps that saves an untrained model."""
    train_set = ParallelDataset(train.examples, tokenizer, max_source_length, train_config.max_target_length)
    if not len(train_set):
        raise DataError(f"{train.path}: no pair to train on: all {len(train.examples):,} have a target over "
                        f"{train_config.max_target_length} pieces (train.max_target_length)")
    return train_set


def run_fingerprint(train: ParallelCorpus, dev: ParallelCorpus,
                    start_from: tuple[Path, bool] | None = None) -> dict[str, Any]:
    """What a run trains and validates on (``file_fingerprint`` of each file and the pairs read), and what it starts
    from (--init-from and whether it replays; path None: a fresh run), kept in last.pt."""
    found = {flag: file_fingerprint(corpus.path, ((e.source, e.target) for e in corpus.examples))
             for flag, corpus in (("--train", train), ("--dev", dev))}
    found["--init-from"] = {"path": None} if start_from is None else \
        file_fingerprint(start_from[0], [("replay", start_from[1])])
    return found


def check_resumed(last: Path, payload: dict[str, Any], model: ModelConfig, tokenizer: TokenizerConfig,
                  asked_model: ModelConfig, asked_train: TrainConfig, asked_tokenizer: TokenizerConfig,
                  fingerprint: dict[str, Any]) -> None:
    """A ConfigError unless the run in ``last`` (its ``payload``, restored ``model`` and ``tokenizer`` configs) was
    started as asked now: configs alike but for what a resumed run may change (``check_same_run``; the
    vocabulary sizes come from the tokenizer), and the same data, where last.pt recorded it."""
    with checkpoint_fault():
        saved_train = from_dict(TrainConfig, payload["train_config"], where=f"{last}: train_config")
    asked_model = replace(asked_model, src_vocab_size=model.src_vocab_size, tgt_vocab_size=model.tgt_vocab_size)
    state = payload.get("training_state")
    check_same_run(last, [(model, asked_model), (saved_train, asked_train), (tokenizer, asked_tokenizer)],
                   state.get("fingerprint") if isinstance(state, dict) else None, fingerprint)


def check_finished(last: Path, fingerprint: dict[str, Any], model_config: ModelConfig, train_config: TrainConfig,
                   tokenizer_config: TokenizerConfig) -> None:
    """A ConfigError unless the finished run whose last.pt is ``last`` was trained as asked now, on the data of
    ``fingerprint`` (``run_fingerprint``): a recipe's member that ``--resume`` keeps, rather than trains again, is
    held to what ``build_trainer`` holds a resumed one to."""
    payload = read_checkpoint(last)
    model, tokenizer = restore(payload, last)
    check_resumed(last, payload, model.config, tokenizer.config, model_config, train_config, tokenizer_config,
                  fingerprint)


def check_settings(model_config: ModelConfig | None, train_config: TrainConfig, tokenizer_config: TokenizerConfig,
                   world: World) -> torch.device:
    """The run's device, or a ConfigError for settings that cannot train, before any work (``model_config``
    None: a fine-tuning run's, which comes with its start)."""
    if model_config is not None and model_config.copy and not tokenizer_config.joint:
        raise ConfigError("model.copy needs one vocabulary for source and target (tokenizer.joint true, no "
                          "--separate-vocab), so that a copied source piece is a target piece")
    device = world.place(resolve_device(train_config.device))
    autocast_dtype(train_config.precision, device)  # a precision this device cannot run
    return device


def fresh_model(model_config: ModelConfig, tokenizer: Tokenizer) -> Seq2Seq:
    """A new model of ``model_config`` over the tokenizer's vocabularies (ConfigError for sizes that do not fit)."""
    return build_model(replace(model_config, src_vocab_size=tokenizer.src_vocab_size,
                               tgt_vocab_size=tokenizer.tgt_vocab_size))


def check_output_dir(output_dir: Path, resume: bool, overwrite: bool) -> None:
    """A ConfigError unless OUTPUT_DIR may take this run (``check_run_folder``). A best.pt or metrics.jsonl without
    last.pt is a run too: one killed while saving its first last.pt, or whose last.pt was deleted to save space."""
    holds = [output_dir / name for name in ("last.pt", "best.pt", "metrics.jsonl")]
    check_run_folder(output_dir, resume, overwrite, holds[:1], holds)


def start_output_dir(output_dir: Path, overwrite: bool) -> None:
    """Create OUTPUT_DIR, first clearing an earlier run from it on ``overwrite``: called once the new run's
    tokenizer, model and data are ready, so that a run refused on the way leaves the earlier one as it was."""
    make_folder(output_dir)  # first: a file in its way is named as such, not as "best.pt: Not a directory"
    if overwrite:
        for name in ("best.pt", "last.pt", "metrics.jsonl"):
            (output_dir / name).unlink(missing_ok=True)
        # saves a kill cut short: writing.replacing's, and the .tmp files of the saves that came before it
        for partial in [*output_dir.glob(f".*{PARTIAL}"), *output_dir.glob(".*.pt.*.tmp")]:
            partial.unlink(missing_ok=True)
        averaging.forget(output_dir)  # weights an earlier run kept for averaging


def shared_tokenizer(train: ParallelCorpus, config: TokenizerConfig, world: World) -> Tokenizer:
    """The tokenizer trained on ``train``: by rank 0 and sent to the others, so every process encodes alike."""
    tokenizer = world.outcome(lambda: Tokenizer.train([e.source for e in train.examples],  # a refusal reaches all
                                                      [e.target for e in train.examples], config)
                              if world.is_main else None)
    if world.size == 1:
        return tokenizer
    return Tokenizer.from_state_dict(world.broadcast_object(tokenizer.state_dict() if world.is_main else None))

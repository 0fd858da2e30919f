"""The project's default models, built on first use and cached in ``runs/default/``, and its bundled engines.

``default_translator()`` trains the translator on the embedded corpus with the default
configuration and ``default_rul_model()`` the RUL model on seeded synthetic engines, each for a
fixed number of epochs (TRANSLATOR_EPOCHS, RUL_EPOCHS) under a cap on the minutes, so the UI works
on a fresh clone with no manual step; later calls find the cached files and return at once. A translator build stopped
by Ctrl-C goes on from its last.pt at the next call; the RUL model's, under a minute, starts over.
``bundled_engines()`` are the seeded synthetic engines the UI offers when no C-MAPSS file is uploaded.
``load_translators()`` names the translators the UI offers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import torch

from seq2seq.config import ModelConfig, RulConfig, TokenizerConfig, TrainConfig
from seq2seq.corpus import EMBEDDED_DATA, read_parallel
from seq2seq.errors import ConfigError, DataError, Seq2SeqError
from seq2seq.files import given_twice
from seq2seq.recommender import Recommender
from seq2seq.rul.cmapss import Engine
from seq2seq.rul.runs import train_on_engines
from seq2seq.rul.synthetic import synthetic_engines, synthetic_test_set
from seq2seq.runs import build_trainer

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "runs" / "default"
# Epochs, not minutes, decide how far the default models train, so that a build beside other work gives the same
# models as one on an idle machine (a time budget alone gave a far worse translator: docs/serving.md). The minutes
# only stop a build on a machine much slower than the 2-core one CI runs on. The translator learns at twice the
# default rate: ahead in every seed measured at these epochs (docs/serving.md).
TRANSLATOR_EPOCHS, TRANSLATOR_LEARNING_RATE, TRANSLATOR_MINUTES = 14, 4e-3, 10.0
RUL_EPOCHS, RUL_MINUTES = 6, 3.0
BUNDLED_ENGINES, BUNDLED_SEED = 20, 7  # synthetic engines cut at random points of their lives


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def own_random_state() -> contextlib.AbstractContextManager:
    """Training seeds torch's global generator, as a training process may; building a default model inside the
    app's process leaves the app's as it was (the CPU's: the defaults train on the CPU)."""
    return torch.random.fork_rng(devices=[])


def _install(run_dir: Path, target: Path) -> None:
    """Copy the run's best checkpoint (last if none was validated) to ``target`` atomically."""
    best = run_dir / "best.pt" if (run_dir / "best.pt").is_file() else run_dir / "last.pt"
    partial = target.with_suffix(".partial")
    shutil.copyfile(best, partial)
    os.replace(partial, target)


def _missing(target: Path) -> bool:
    """Whether the default model ``target`` must be trained; a DataError when something that is not a file is in
    its place, before minutes of training that would end in an error at the install."""
    if target.exists() and not target.is_file():
        raise DataError(f"{target}: is not a file; remove it, or pass the model to use")
    return not target.is_file()


def default_translator(folder: Path = DEFAULT_DIR) -> Path:
    """``folder/translator.pt``, trained on the embedded corpus with the default configuration if missing."""
    target = folder / "translator.pt"
    if _missing(target):
        _log(f"{target} is missing: training the default translator ({TRANSLATOR_EPOCHS} epochs, at most "
             f"{TRANSLATOR_MINUTES:g} minutes)")
        run_dir = folder / "translator-run"
        data = read_parallel(EMBEDDED_DATA / "train.tsv"), read_parallel(EMBEDDED_DATA / "dev.tsv")
        configs = (ModelConfig(), TrainConfig(epochs=TRANSLATOR_EPOCHS, learning_rate=TRANSLATOR_LEARNING_RATE,
                                                max_minutes=TRANSLATOR_MINUTES, device="cpu"),
                   TokenizerConfig())
        with own_random_state():
            trainer = None
            if (run_dir / "last.pt").is_file():  # a build stopped by Ctrl-C goes on to its epochs
                try:
                    trainer = build_trainer(*data, run_dir, *configs, resume=True, log=_log)
                except Seq2SeqError as err:  # a run of another version's defaults, or a damaged file
                    _log(f"{run_dir} cannot be resumed ({err}): training from the start")
            if trainer is None:
                trainer = build_trainer(*data, run_dir, *configs, overwrite=True, log=_log)
            trainer.fit()
        _install(run_dir, target)
    return target


def default_rul_model(folder: Path = DEFAULT_DIR) -> Path:
    """``folder/rul.pt``, trained on 100 seeded synthetic engines for RUL_EPOCHS if missing."""
    target = folder / "rul.pt"
    if _missing(target):
        _log(f"{target} is missing: training the default RUL model ({RUL_EPOCHS} epochs, at most {RUL_MINUTES:g} "
             "minutes)")
        config = RulConfig(epochs=RUL_EPOCHS, max_minutes=RUL_MINUTES, device="cpu")
        run_dir = folder / "rul-run"
        with own_random_state():
            train_on_engines(synthetic_engines(100, seed=config.seed), config, run_dir, _log)
        _install(run_dir, target)
    return target


def bundled_engines() -> list[Engine]:
    """BUNDLED_ENGINES seeded synthetic engines, each cut at a random point before its failure."""
    return synthetic_test_set(BUNDLED_ENGINES, seed=BUNDLED_SEED)[0]


def load_translators(paths: list[str]) -> dict[str, Recommender]:
    """One translator per checkpoint, named by its attention type (and its file when two share one); a file given
    twice is a ConfigError (it was offered once, or loaded twice under two spellings, without a word)."""
    if (twice := given_twice(paths)) is not None:
        raise ConfigError(f"--model: {twice} is given twice; each translator counts once")
    loaded = [(path, Recommender.from_checkpoint(path)) for path in paths]
    attentions = [r.model.config.attention for _, r in loaded]
    return {(a if attentions.count(a) == 1 else f"{a} ({path})"): r
            for a, (path, r) in zip(attentions, loaded, strict=True)}

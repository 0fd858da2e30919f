"""A RUL training run's folder and data: the engines held out for selection, a recipe's members (one
run each, decoded together as a ``RulEnsemble``), and ``--resume`` / ``--overwrite`` for both.

OUTPUT_DIR holds one run (best.pt, last.pt, metrics.jsonl), or with ``rul.members`` > 1 one per member in
OUTPUT_DIR/member-K, each with a result.json once it has finished, and OUTPUT_DIR/best.pt, their ensemble.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from seq2seq.config import RulConfig
from seq2seq.errors import ConfigError, FleetError, counted
from seq2seq.resume import RESULT, check_run_folder, check_same_run, read_result, record_result
from seq2seq.rul.cmapss import Engine
from seq2seq.rul.model import RulEnsemble, RulModel
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.train import (
    RulTrainResult,
    load_rul_checkpoint,
    resumable_payload,
    save_rul_checkpoint,
    train_rul,
)
from seq2seq.rul.windows import RulWindows, training_set, truncated_windows


def split_engines(engines: list[Engine], config: RulConfig) -> tuple[list[Engine], list[Engine]]:
    """Hold out ``config.validation_engines`` whole engines (seeded) for model selection."""
    if len(engines) <= config.validation_engines:
        raise FleetError(f"{counted(len(engines), 'engine')}, and training needs more than validation_engines "
                         f"({config.validation_engines}) to hold some out for model selection")
    if (longest := max(engine.length for engine in engines)) <= config.critical_below:
        # a model learns remaining lives up to its engines' lengths: 1-cycle engines trained to "RUL 0" everywhere
        raise FleetError(f"the longest engine has {counted(longest, 'cycle')}, no more than critical_below "
                         f"({config.critical_below}): every remaining life learned would be critical; a training "
                         "file holds engines run from their first cycle to failure")
    order = np.random.default_rng(config.seed).permutation(len(engines))
    held = set(order[: config.validation_engines].tolist())
    return ([e for i, e in enumerate(engines) if i not in held], [e for i, e in enumerate(engines) if i in held])


def member_folders(output_dir: Path, config: RulConfig) -> list[Path]:
    """Where the run's models train: OUTPUT_DIR/member-K for each of ``config.members`` > 1, else OUTPUT_DIR."""
    return [output_dir / f"member-{k}" for k in range(1, config.members + 1)] if config.members > 1 else [output_dir]


def member_config(config: RulConfig, k: int) -> RulConfig:
    """The run of member k (0, 1, ...) of ``config``: seed + k, an equal share of the budget (the run itself for
    members 1)."""
    return dataclasses.replace(config, members=1, seed=config.seed + k, max_minutes=config.max_minutes / config.members)


def prepare_run(output_dir: Path, config: RulConfig, resume: bool, overwrite: bool,
                fingerprint: dict[str, Any] | None = None) -> None:
    """OUTPUT_DIR checked against ``resume`` and ``overwrite`` (``check_run_folder``: a run there is never replaced
    silently); on ``overwrite``, the earlier run's files deleted. ``resume``: each member's run there, finished
    or not, must be of ``config`` and, where it recorded them, ``fingerprint`` (refused before any work or log line)."""
    folders = member_folders(output_dir, config)
    lasts = [folder / "last.pt" for folder in folders]
    check_run_folder(output_dir, resume, overwrite, lasts, [output_dir / "best.pt", *lasts],
                     "member-K/last.pt" if config.members > 1 else "last.pt")
    beyond = output_dir / f"member-{max(config.members, 1) + 1}" / "last.pt"
    if resume and beyond.is_file():  # the ensemble would leave it out without a word, as the translator's would
        raise ConfigError(f"--resume: {beyond} is a member of this run, which members {config.members} leaves out; "
                          "resume with the run's own settings and data, start over with --overwrite, or choose "
                          "another --output-dir")
    for k, folder in enumerate(folders if resume else []):
        if (folder / RESULT).is_file():
            finished_model(folder, member_config(config, k))
        if (folder / "last.pt").is_file():
            resumable_payload(folder / "last.pt", member_config(config, k), fingerprint)
    if overwrite:
        for folder in dict.fromkeys([output_dir, *folders]):
            for name in ("best.pt", "last.pt", "metrics.jsonl", RESULT):
                (folder / name).unlink(missing_ok=True)


def finished_model(folder: Path, member: RulConfig) -> RulModel | RulEnsemble:
    """The member's model in FOLDER/best.pt, checked to be of the recipe (``member``: its run's config), since one
    that had finished before ``--resume`` is kept."""
    model, saved, _ = load_rul_checkpoint(folder / "best.pt")
    check_same_run(folder / "best.pt", [(saved, member)])
    return model


def train_members(engines: list[Engine], config: RulConfig, output_dir: Path, log: Callable[[str], None] = print,
                  resume: bool = False, fingerprint: dict[str, Any] | None = None) -> RulTrainResult:
    """``config.members`` runs with seeds seed, seed + 1, ..., each holding out its own validation engines (so
    together they learn from every engine), in OUTPUT_DIR/member-K; OUTPUT_DIR/best.pt is their RulEnsemble.
    One preprocessing, fitted on all ``engines``, so that every member reads an engine alike; ``max_minutes``
    is the whole run's budget, shared equally. ``resume``: members that finished (member-K/result.json) are
    kept, the one cut short continues its last.pt, the rest train. ``fingerprint``: what they train on (kept in
    each last.pt)."""
    preprocessor = Preprocessor.fit(engines, config)
    results, members = [], []
    for k, folder in enumerate(member_folders(Path(output_dir), config)):
        member = member_config(config, k)
        if resume and (folder / RESULT).is_file():
            result = read_result(folder, RulTrainResult)
            log(f"member {k + 1}/{config.members} (seed {member.seed}) had finished: {folder}")
        else:
            log(f"member {k + 1}/{config.members}: seed {member.seed}")
            result = train_on_engines(engines, member, folder, log, preprocessor,
                                      resume and (folder / "last.pt").is_file(), fingerprint)[0]
            record_result(folder, result)
        results.append(result)
        members.append(finished_model(folder, member))
    save_rul_checkpoint(Path(output_dir) / "best.pt", RulEnsemble(members), config, preprocessor.state_dict())
    rmses = [r.best_rmse for r in results]
    log(f"{Path(output_dir) / 'best.pt'}: the ensemble of {len(members)} members (their own validation RMSE "
        f"{', '.join(f'{r:.2f}' for r in rmses)})")
    return RulTrainResult(best_rmse=float(np.mean(rmses)), best_epoch=0, epochs=sum(r.epochs for r in results),
                          seconds=sum(r.seconds for r in results), parameters=sum(r.parameters for r in results),
                          stopped="members")


def train_on_engines(engines: list[Engine], config: RulConfig, output_dir: Path, log: Callable[[str], None] = print,
                     preprocessor: Preprocessor | None = None,
                     resume: bool = False, fingerprint: dict[str, Any] | None = None
                     ) -> tuple[RulTrainResult, RulWindows]:
    """Hold out ``config.seed``'s validation engines and train (``resume``: continue OUTPUT_DIR/last.pt, trained on
    ``fingerprint``, the flag -> ``resume.file_fingerprint`` of what it reads, when recorded); returns
    (result, validation windows). The preprocessing is fitted on the training engines only, unless a shared
    ``preprocessor`` is given (members)."""
    train, valid = split_engines(engines, config)
    preprocessor = preprocessor or Preprocessor.fit(train, config)
    log(f"{len(train)} training and {len(valid)} validation engines, {preprocessor.n_features} of 21 sensors kept")
    valid_windows = truncated_windows(valid, preprocessor, config)
    result = train_rul(training_set(train, preprocessor, config), valid_windows, config, preprocessor.n_features,
                       output_dir, preprocessor.state_dict(), log, resume, fingerprint)
    return result, valid_windows

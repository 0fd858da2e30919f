"""Several translators made into one: checkpoints into one payload (their ensemble or their weights'
average), and ``train_members``, a recipe's seeds trained and saved as one ensemble.

``combine_checkpoints`` serves ``seq2seq average | ensemble`` and ``train_members``. The inputs
must share one tokenizer and one model configuration. The case memory is the first input's; its trust
model was fitted for that input's probabilities, so with ``dev`` it is fitted again for the
combined model (as training fits it); without, the first input's is kept.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from seq2seq.checkpoint import load_model, members_weights, save_atomic
from seq2seq.config import ModelConfig, TokenizerConfig, TrainConfig
from seq2seq.corpus import ParallelCorpus
from seq2seq.distributed import ONE_PROCESS, World
from seq2seq.ensemble import Ensemble, average_weights
from seq2seq.errors import ConfigError
from seq2seq.evaluate import fit_trust_on
from seq2seq.model import Seq2Seq, build_model
from seq2seq.recommender import Recommender, read_memory
from seq2seq.runs import build_trainer
from seq2seq.train import TrainResult, score_greedy


def combine_checkpoints(paths: list[str | Path], how: Literal["average", "ensemble"],
                        dev: ParallelCorpus | None = None) -> tuple[dict[str, Any], int]:
    """(the combined checkpoint's payload, how many models it combines); ``dev`` refits trust."""
    loaded = [load_model(path) for path in paths]
    first_path, (first_model, tokenizer, payload) = paths[0], loaded[0]
    members: list[Seq2Seq] = []
    for path, (model, _, other) in zip(paths, loaded, strict=True):
        if other["tokenizer"] != payload["tokenizer"]:
            raise ConfigError(f"{path}: its tokenizer differs from {first_path}'s; combined checkpoints must share one "
                              "(train them on one --train file with one tokenizer configuration)")
        if model.config != first_model.config:
            raise ConfigError(f"{path}: its model configuration differs from {first_path}'s")
        members += list(model.members) if isinstance(model, Ensemble) else [model]
    if how == "average":
        if any(isinstance(model, Ensemble) for model, _, _ in loaded):
            raise ConfigError("average takes single checkpoints; an ensemble's members are best decoded together")
        combined: Seq2Seq | Ensemble = build_model(members[0].config)
        combined.load_state_dict(average_weights(members))
    else:
        combined = Ensemble(members)
    result: dict[str, Any] = {key: value for key, value in payload.items() if key not in ("ensemble_weights", "memory")}
    result.update(training_state={}, combined_from={"how": how, "inputs": [Path(p).name for p in paths]},
                  **members_weights(members if isinstance(combined, Ensemble) else [combined]))
    memory, trust = read_memory(payload, first_path)
    if memory is not None:
        if dev is not None:
            trust = fit_trust_on(Recommender(combined.eval(), tokenizer), memory, dev, trust.flag_rate)
        result["memory"] = {"cases": memory.state_dict(), "trust": trust.state_dict()}
    return result, len(members)


def train_members(train: ParallelCorpus, dev: ParallelCorpus, output_dir: str | Path, model_config: ModelConfig,
                  train_config: TrainConfig, tokenizer_config: TokenizerConfig, resume: bool = False,
                  overwrite: bool = False, log: Callable[[str], None] = print,
                  world: World = ONE_PROCESS) -> TrainResult:
    """``train_config.members`` runs of one recipe, seeds seed, seed + 1, ..., each in OUTPUT_DIR/member-K with
    its own best.pt and last.pt, one tokenizer for all; OUTPUT_DIR/best.pt is their ensemble (seq2seq.ensemble)
    with the trust model fitted again on dev; ``max_minutes`` is the whole run's budget, shared equally. A
    member that finished wrote member-K/result.json; ``resume`` skips it, continues the member that was cut
    short and starts the ones not begun."""
    output_dir = Path(output_dir)
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other")
    folders = [output_dir / f"member-{k}" for k in range(1, train_config.members + 1)]
    if resume and not any((folder / "last.pt").is_file() for folder in folders):
        raise ConfigError(f"--resume: nothing to resume in {output_dir} (no member-K/last.pt)")
    if not (resume or overwrite) and ((output_dir / "best.pt").exists() or (folders[0] / "last.pt").exists()):
        raise ConfigError(f"{output_dir} already holds a training run; pass --resume to continue it, "
                          "--overwrite to start over, or choose another --output-dir")
    if overwrite and world.is_main:
        (output_dir / "best.pt").unlink(missing_ok=True)
        for folder in folders:
            (folder / "result.json").unlink(missing_ok=True)
    results: list[TrainResult] = []
    tokenizer = None
    for k, folder in enumerate(folders):
        config = replace(train_config, members=1, seed=train_config.seed + k,
                         max_minutes=train_config.max_minutes / len(folders))
        if resume and (folder / "result.json").is_file():
            results.append(TrainResult(**json.loads((folder / "result.json").read_text(encoding="utf-8"))))
            log(f"member {k + 1}/{len(folders)} (seed {config.seed}) had finished: {folder}")
            continue
        trainer = build_trainer(train, dev, folder, model_config, config, tokenizer_config,
                                resume and (folder / "last.pt").is_file(), overwrite, log, world, tokenizer=tokenizer)
        if tokenizer is None:  # logged once the first model is built: a bad configuration is one line alone
            log(f"{len(folders)} members, seeds {train_config.seed}..{train_config.seed + len(folders) - 1}, "
                "decoded together as one ensemble")
        log(f"member {k + 1}/{len(folders)}: seed {config.seed}, in {folder}")
        tokenizer = trainer.tokenizer
        results.append(trainer.fit())
        if world.is_main:  # written whole or not at all: a half-written record would block --resume
            (folder / "result.tmp").write_text(json.dumps(dataclasses.asdict(results[-1])) + "\n", encoding="utf-8")
            (folder / "result.tmp").replace(folder / "result.json")
    bleu = 0.0
    if world.is_main:
        payload, _ = combine_checkpoints([folder / "best.pt" for folder in folders], "ensemble", dev)
        save_atomic(payload, output_dir / "best.pt")
        model, tokenizer, _ = load_model(output_dir / "best.pt")
        bleu = score_greedy(Recommender(model, tokenizer), dev)[0].bleu
        log(f"{output_dir / 'best.pt'}: the ensemble of {len(folders)} members, dev BLEU {bleu:.2f} "
            f"(members {', '.join(f'{r.best_bleu:.2f}' for r in results)})")
    return TrainResult(best_bleu=world.broadcast(bleu), best_step=0,
                       steps=sum(r.steps for r in results), epochs=sum(r.epochs for r in results),
                       seconds=sum(r.seconds for r in results),
                       tokens_per_second=sum(r.tokens_per_second for r in results) / len(results),
                       stopped="members", parameters=sum(r.parameters for r in results))

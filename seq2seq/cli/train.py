"""``seq2seq train``: flags and a config file make the run's configs; one run, K members, or a fine-tuning."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seq2seq.attention import ATTENTION_NAMES
from seq2seq.checkpoint import count_parameters, with_search_defaults
from seq2seq.cli.common import path_flag, read_corpus
from seq2seq.config import DEVICES, ModelConfig, SearchConfig, TokenizerConfig, TrainConfig
from seq2seq.config_checks import NAMES as CONFIG_NAMES
from seq2seq.config_checks import from_dict
from seq2seq.config_file import check_names, load_config_file
from seq2seq.corpus import EMBEDDED_DATA, ParallelCorpus
from seq2seq.distributed import World, process_group
from seq2seq.errors import ConfigError
from seq2seq.evaluate import few_dev_warning
from seq2seq.fast.precision import PRECISIONS
from seq2seq.files import held_folder
from seq2seq.finetune import Start
from seq2seq.members import train_members
from seq2seq.model import build_model
from seq2seq.runs import build_trainer, dev_overlap_warning
from seq2seq.train import TrainResult

SIZES_CHECKED = 8  # vocabulary size of the throw-away model that checks the sizes fit together

# CLI flag -> (config section, field); flags left unset keep the config file's value or the default.
OVERRIDES = {
    "attention": ("model", "attention"), "embed_size": ("model", "embed_size"),
    "encoder_hidden": ("model", "encoder_hidden"), "decoder_hidden": ("model", "decoder_hidden"),
    "layers": ("model", "num_layers"), "dropout": ("model", "dropout"),
    "input_feeding": ("model", "input_feeding"), "tie_embeddings": ("model", "tie_embeddings"),
    "copy": ("model", "copy"),
    "epochs": ("train", "epochs"), "max_minutes": ("train", "max_minutes"), "device": ("train", "device"),
    "precision": ("train", "precision"),
    "seed": ("train", "seed"), "batch_tokens": ("train", "batch_tokens"), "learning_rate": ("train", "learning_rate"),
    "schedule": ("train", "schedule"), "label_smoothing": ("train", "label_smoothing"),
    "teacher_forcing": ("train", "teacher_forcing"), "patience": ("train", "patience"),
    "parallel": ("train", "parallel"),
    "vocab_size": ("tokenizer", "vocab_size"), "separate_vocab": ("tokenizer", "joint"),
}
FLAG_NAMES = {"input_feeding": "--no-input-feeding"}  # flags whose dest is not their name
SECTION_TYPES = {"model": ModelConfig, "train": TrainConfig, "tokenizer": TokenizerConfig}
CONFIG_SECTIONS = ("model", "train", "tokenizer", "search")  # of a config file; rul is seq2seq rul train's
# Fields whose value is a name, with the names each takes: a config file's are checked as it is read (flags have
# argparse choices), so an unknown one is named with its file and section.
NAMES = {"model": {"attention": ATTENTION_NAMES}, "train": CONFIG_NAMES["TrainConfig"],
         "tokenizer": CONFIG_NAMES["TokenizerConfig"]}


def add_train_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("train", help="train a translator (default data: the embedded corpus)")
    p.add_argument("--train", type=path_flag,
                   help="training pairs: .tsv/.csv (header), .jsonl, or a plain-text source file")
    p.add_argument("--dev", type=path_flag, help="development pairs for validation (same formats)")
    p.add_argument("--train-target", type=path_flag, help="plain-text target file aligned with --train")
    p.add_argument("--dev-target", type=path_flag, help="plain-text target file aligned with --dev")
    p.add_argument("--source-column", help="source column or key (default: source, or problem)")
    p.add_argument("--target-column", help="target column or key (default: target, or action)")
    p.add_argument("--output-dir", required=True, type=path_flag, help="where best.pt, last.pt and metrics.jsonl go")
    p.add_argument("--config", type=path_flag, help="JSON file with sections model, train, tokenizer, search")
    p.add_argument("--resume", action="store_true", help="continue the run saved in OUTPUT_DIR/last.pt")
    p.add_argument("--overwrite", action="store_true", help="replace a finished or stopped run in OUTPUT_DIR")
    p.add_argument("--init-from", type=path_flag,
                   help="fine-tune this checkpoint (best.pt): its weights, tokenizer and model configuration, with its "
                        "training pairs mixed in (e.g. corrections from seq2seq feedback export)")
    p.add_argument("--no-replay", dest="replay", action="store_false",
                   help="with --init-from: train on --train alone, without the checkpoint's training pairs")
    p.add_argument("--attention", choices=ATTENTION_NAMES)
    p.add_argument("--epochs", type=int)
    p.add_argument("--max-minutes", type=float, help="stop (and save) after this much wall-clock time")
    p.add_argument("--device", choices=DEVICES)
    p.add_argument("--precision", choices=PRECISIONS,
                   help="matrix products in: auto (fp32), fp32, bf16 (CUDA, or a CPU "
                        "with AVX512-BF16/AMX), fp16 (CUDA)")
    p.add_argument("--seed", type=int)
    p.add_argument("--batch-tokens", type=int)
    p.add_argument("--learning-rate", type=float)
    p.add_argument("--schedule", choices=CONFIG_NAMES["TrainConfig"]["schedule"])
    p.add_argument("--label-smoothing", type=float)
    p.add_argument("--teacher-forcing", type=float, help="probability of feeding the gold token (1 = always)")
    p.add_argument("--patience", type=int, help="validations without improvement before stopping")
    p.add_argument("--parallel", type=int, help="a recipe's members (train.members) trained at once, one process "
                   "each; on a GPU, as many as there are members (docs/gpu-and-torchrun.md)")
    p.add_argument("--embed-size", type=int)
    p.add_argument("--encoder-hidden", type=int, help="per direction")
    p.add_argument("--decoder-hidden", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--dropout", type=float)
    p.add_argument("--no-input-feeding", dest="input_feeding", action="store_const", const=False)
    p.add_argument("--tie-embeddings", action="store_const", const=True)
    p.add_argument("--copy", action="store_const", const=True,
                   help="pointer-generator: the decoder may copy alert pieces (part numbers) into its output")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--separate-vocab", action="store_const", const=False, help="one vocabulary per side")


def settings(args: argparse.Namespace) -> dict[tuple[str, str], tuple[Any, str]]:
    """(section, field) -> (value, where it was set) for each field the config file or a flag sets."""
    found: dict[tuple[str, str], tuple[Any, str]] = {}
    if args.config:
        for name, values in load_config_file(args.config, CONFIG_SECTIONS, "seq2seq train").items():
            if name in ("model", "train", "tokenizer"):
                if not isinstance(values, dict):
                    raise ConfigError(f"{args.config}: section {name} must be an object of {name} fields")
                check_names(values, NAMES[name], f"{args.config}: {name}")
                derived = next((key for key in ("src_vocab_size", "tgt_vocab_size") if key in values), None)
                if name == "model" and derived:  # else it would be replaced by the tokenizer's size without a word
                    raise ConfigError(f"{args.config}: model.{derived} is the tokenizer's vocabulary size, set at "
                                      "training time; set tokenizer.vocab_size instead")
                from_dict(SECTION_TYPES[name], values, f"{args.config}: {name}")  # as written: a flag may hide a fault
                found.update({(name, key): (value, f"{args.config}: {name}.{key}") for key, value in values.items()})
    for flag, (section, key) in OVERRIDES.items():
        if getattr(args, flag) is not None:
            found[section, key] = getattr(args, flag), FLAG_NAMES.get(flag, "--" + flag.replace("_", "-"))
    return found


def configs(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig, TokenizerConfig]:
    """The run's configs; a bad value is blamed on the flag that set it, else on the config file's section."""
    sections: dict[str, dict[str, Any]] = {"model": {}, "train": {}, "tokenizer": {}}
    flags: dict[str, dict[str, str]] = {"model": {}, "train": {}, "tokenizer": {}}
    for (section, key), (value, origin) in settings(args).items():
        sections[section][key] = value
        if origin.startswith("--"):
            flags[section][key] = origin
    where = args.config or "options"
    model = from_dict(ModelConfig, sections["model"], f"{where}: model", flags["model"])
    train = from_dict(TrainConfig, sections["train"], f"{where}: train", flags["train"])
    tokenizer = from_dict(TokenizerConfig, sections["tokenizer"], f"{where}: tokenizer", flags["tokenizer"])
    try:  # sizes that do not fit together (luong-dot, tied embeddings), said before any data is read, naming the file
        build_model(dataclasses.replace(model, src_vocab_size=SIZES_CHECKED, tgt_vocab_size=SIZES_CHECKED))
    except ConfigError as err:
        raise ConfigError(f"{args.config}: {err}" if args.config else str(err)) from None
    return model, train, tokenizer


def search_section(args: argparse.Namespace) -> SearchConfig | None:
    """The config file's search section (tuned on dev): best.pt carries it as its search defaults."""
    section = load_config_file(args.config, CONFIG_SECTIONS, "seq2seq train").get("search") if args.config else None
    return None if section is None else from_dict(SearchConfig, section, f"{args.config}: search")


def run_train(args: argparse.Namespace) -> int:
    model_config, train_config, tokenizer_config = configs(args)
    search = search_section(args)
    start = Start.load(args.init_from) if args.init_from else None
    if start is not None:  # read before OUTPUT_DIR is touched: --overwrite may delete the file it names
        start.check_kept(settings(args))
    elif not args.replay:
        raise ConfigError("--no-replay needs --init-from (a fresh run has nothing to replay)")
    if start is not None and not args.train:  # else it would fine-tune on the embedded corpus without a word
        raise ConfigError("--init-from needs --train: the corrections to learn (seq2seq feedback export writes them)")
    if bool(args.train) != bool(args.dev):  # one of the user's files beside one of the embedded corpus's, unsaid:
        # the run would choose its best.pt, and fit trust and the scope threshold, on pairs unlike its training
        given, missing, what = (("--train", "--dev", "held-out pairs that choose best.pt and fit trust") if args.train
                                else ("--dev", "--train", "pairs to train on"))
        raise ConfigError(f"{given} needs {missing}: the {what} (without both, the embedded corpus is used for both)")
    if start is not None and train_config.members > 1:
        raise ConfigError(f"train.members is {train_config.members} with --init-from: fine-tuning makes one model "
                          "(members 1)")
    train = read_corpus(args.train or str(EMBEDDED_DATA / "train.tsv"), args.train_target, args)
    dev = read_corpus(args.dev or str(EMBEDDED_DATA / "dev.tsv"), args.dev_target, args)
    with process_group(train_config.device) as world, contextlib.ExitStack() as held:  # a world of one without torchrun
        # two runs into one folder refused; under torchrun the first process holds it for all, which share it, and a
        # refusal reaches every process
        world.outcome(lambda: held.enter_context(held_folder(Path(args.output_dir))) if world.is_main else None)
        log = (lambda line: print(line, file=sys.stderr, flush=True)) if world.is_main else (lambda line: None)
        # a fine-tuning run's new pairs it can learn (``new``): best.pt is the checkpoint that learned the most of them
        train, cases, new = (start.corpora(train, args.replay, log, train_config.max_target_length) if start
                             else (train, None, None))
        if train_config.members > 1:
            result = train_members(train, dev, args.output_dir, model_config, train_config, tokenizer_config,
                                   args.resume, args.overwrite, log, world, search)
        else:
            result = train_one(args, train, dev, model_config, train_config, tokenizer_config, start, cases, log, world,
                               new)
        best = Path(args.output_dir) / "best.pt"
        if world.is_main and search is not None and best.is_file():
            with_search_defaults(best, search)
            log(f"{best}: search defaults {search}")
        for warning in (dev_overlap_warning(dev, cases if cases is not None else train), few_dev_warning(dev)):
            if world.is_main and warning:  # said last, beside the result it qualifies
                log(warning)
        if world.is_main:
            print(json.dumps({"output_dir": args.output_dir, **dataclasses.asdict(result)}))
    return 0


def train_one(args: argparse.Namespace, train: ParallelCorpus, dev: ParallelCorpus, model_config: ModelConfig,
              train_config: TrainConfig, tokenizer_config: TokenizerConfig, start: Start | None,
              cases: ParallelCorpus | None, log: Callable[[str], None], world: World,
              learn: ParallelCorpus | None = None) -> TrainResult:
    """One run (a fresh one, a resumed one, or a fine-tuning of ``start`` to ``learn`` its new pairs)."""
    trainer = build_trainer(train, dev, args.output_dir, model_config, train_config, tokenizer_config,
                            args.resume, args.overwrite, log, world,
                            (start.model, start.tokenizer) if start else None, cases, learn=learn,
                            start_from=(start.path, args.replay) if start else None)
    read = args.train or "embedded corpus"
    if start is not None:  # the new pairs, repeated, and the replay: not the file's own count
        read = f"the new pairs of {read}" + (f" and the replay of {start.path}" if args.replay and start.old else "")
    log(f"{read}: {trainer.train_set.summary()}")
    model = trainer.model
    log(f"training {model.config.attention} ({count_parameters(model):,} parameters) "
        f"on {len(trainer.train_set)} pairs, validating on {len(dev.examples)}, device {trainer.device}")
    if world.size > 1:
        log(f"{world.size} processes ({world.backend}): each trains on 1/{world.size} of every epoch's batches; "
            "rank 0 validates and writes the checkpoints")
    return trainer.fit()

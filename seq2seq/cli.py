"""Command line: ``seq2seq train | translate | evaluate``.

Every error a user can cause (files, columns, options, checkpoints) is printed as one line,
``seq2seq: error: ...``, with exit status 2; no traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tqdm import tqdm

from seq2seq.attention import ATTENTION_NAMES
from seq2seq.batch import FORMATS, BatchSummary, check_new_outputs, merge_parts, part_path, translate_file
from seq2seq.config import ModelConfig, SearchConfig, TokenizerConfig, TrainConfig, from_dict, load_config_file
from seq2seq.errors import ConfigError, Seq2SeqError
from seq2seq.precision import PRECISIONS
from seq2seq.rul.cli import add_rul_parser, run_rul

if TYPE_CHECKING:
    from seq2seq.distributed import World
    from seq2seq.recommender import Recommender

# CLI flag -> (config section, field); flags left unset keep the config file's value or the default.
OVERRIDES = {
    "attention": ("model", "attention"), "embed_size": ("model", "embed_size"),
    "encoder_hidden": ("model", "encoder_hidden"), "decoder_hidden": ("model", "decoder_hidden"),
    "layers": ("model", "num_layers"), "dropout": ("model", "dropout"),
    "input_feeding": ("model", "input_feeding"), "tie_embeddings": ("model", "tie_embeddings"),
    "epochs": ("train", "epochs"), "max_minutes": ("train", "max_minutes"), "device": ("train", "device"),
    "precision": ("train", "precision"),
    "seed": ("train", "seed"), "batch_tokens": ("train", "batch_tokens"), "learning_rate": ("train", "learning_rate"),
    "schedule": ("train", "schedule"), "label_smoothing": ("train", "label_smoothing"),
    "teacher_forcing": ("train", "teacher_forcing"), "patience": ("train", "patience"),
    "vocab_size": ("tokenizer", "vocab_size"), "separate_vocab": ("tokenizer", "joint"),
}
HEATMAP_CHUNK_ROWS = 64  # a PNG takes ~0.1 s: smaller chunks keep the bar moving and a kill cheap
FILE_OPTIONS = ("output", "column", "format", "attention_out", "heatmaps", "resume")  # of translate --input


def add_train_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("train", help="train a translator (default data: the embedded corpus)")
    p.add_argument("--train", help="training pairs: .tsv/.csv (header), .jsonl, or a plain-text source file")
    p.add_argument("--dev", help="development pairs for validation (same formats)")
    p.add_argument("--train-target", help="plain-text target file aligned with --train")
    p.add_argument("--dev-target", help="plain-text target file aligned with --dev")
    p.add_argument("--source-column", help="source column or key (default: source, or problem)")
    p.add_argument("--target-column", help="target column or key (default: target, or action)")
    p.add_argument("--output-dir", required=True, help="where best.pt, last.pt and metrics.jsonl go")
    p.add_argument("--config", help="JSON file with sections model, train, tokenizer")
    p.add_argument("--resume", action="store_true", help="continue the run saved in OUTPUT_DIR/last.pt")
    p.add_argument("--overwrite", action="store_true", help="replace a finished or stopped run in OUTPUT_DIR")
    p.add_argument("--attention", choices=ATTENTION_NAMES)
    p.add_argument("--epochs", type=int)
    p.add_argument("--max-minutes", type=float, help="stop (and save) after this much wall-clock time")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"))
    p.add_argument("--precision", choices=PRECISIONS,
                   help="matrix products in: auto (fp16 on CUDA, fp32 on a CPU), fp32, bf16 (CUDA, or a CPU "
                        "with AVX512-BF16/AMX), fp16 (CUDA)")
    p.add_argument("--seed", type=int)
    p.add_argument("--batch-tokens", type=int)
    p.add_argument("--learning-rate", type=float)
    p.add_argument("--schedule", choices=("plateau", "warmup"))
    p.add_argument("--label-smoothing", type=float)
    p.add_argument("--teacher-forcing", type=float, help="probability of feeding the gold token (1 = always)")
    p.add_argument("--patience", type=int, help="validations without improvement before stopping")
    p.add_argument("--embed-size", type=int)
    p.add_argument("--encoder-hidden", type=int, help="per direction")
    p.add_argument("--decoder-hidden", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--dropout", type=float)
    p.add_argument("--no-input-feeding", dest="input_feeding", action="store_const", const=False)
    p.add_argument("--tie-embeddings", action="store_const", const=True)
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--separate-vocab", action="store_const", const=False, help="one vocabulary per side")


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a checkpoint written by seq2seq train (best.pt)")
    p.add_argument("--beam-size", type=int, default=1, help="1 = greedy (default)")
    p.add_argument("--length-penalty", type=float, default=SearchConfig.length_penalty)
    p.add_argument("--max-length-ratio", type=float, default=SearchConfig.max_length_ratio)
    p.add_argument("--batch-size", type=int, default=64, help="sentences decoded together")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    p.add_argument("--quantize", action="store_true",
                   help="int8 weights for the linear and GRU layers: faster on CPU; BLEU moves by up to 0.4 (README)")
    p.add_argument("--workers", type=int, default=0,
                   help="batches decoded at once in threads of one core each (files and evaluate; default: "
                        "one per core on a CPU, 1 on CUDA)")


def add_file_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", help="translate this file (.csv/.tsv/.jsonl with a column of alerts, or .txt)")
    p.add_argument("--output", help="the input's rows with recommendation, score and error added")
    p.add_argument("--column", help="alert column or key (default: source, else problem, else the only one)")
    p.add_argument("--format", choices=FORMATS, help="of the input, when its extension does not say")
    p.add_argument("--attention-out", help="JSONL file: source pieces, target pieces and attention per row")
    p.add_argument("--heatmaps", help="folder for one attention heatmap PNG per translated row")
    p.add_argument("--resume", action="store_true", help="continue an interrupted --output (and its companions)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seq2seq", description="Maintenance alerts -> repair recommendations.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_train_parser(commands)
    p = commands.add_parser("translate", help="alerts on stdin, one per line -> recommendations on stdout; "
                                              "or a whole file with --input/--output")
    add_search_arguments(p)
    p.add_argument("--n-best", type=int, default=1, help="N tab-separated 'recommendation<TAB>score' pairs")
    add_file_arguments(p)
    p = commands.add_parser("evaluate", help="BLEU, chrF and TER (sacrebleu) of a model on a parallel file")
    add_search_arguments(p)
    p.add_argument("--data", required=True)
    p.add_argument("--data-target", help="plain-text target file aligned with --data")
    p.add_argument("--source-column")
    p.add_argument("--target-column")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--hypotheses", help="also write the translations to this file")
    add_rul_parser(commands)
    return parser


def configs(args: argparse.Namespace) -> tuple[ModelConfig, TrainConfig, TokenizerConfig]:
    sections: dict[str, dict[str, Any]] = {"model": {}, "train": {}, "tokenizer": {}}
    if args.config:
        for name, values in load_config_file(args.config).items():
            if name in sections:
                sections[name].update(values)
    for flag, (section, key) in OVERRIDES.items():
        if getattr(args, flag) is not None:
            sections[section][key] = getattr(args, flag)
    where = args.config or "options"
    return (from_dict(ModelConfig, sections["model"], f"{where}: model"),
            from_dict(TrainConfig, sections["train"], f"{where}: train"),
            from_dict(TokenizerConfig, sections["tokenizer"], f"{where}: tokenizer"))


def read_corpus(path: str, target: str | None, args: argparse.Namespace):
    from seq2seq.corpus import read_parallel

    corpus = read_parallel(path, args.source_column, args.target_column, target)
    if corpus.skipped:
        print(f"warning: {corpus.summary()}", file=sys.stderr)
    return corpus


def run_train(args: argparse.Namespace) -> int:
    from seq2seq.corpus import EMBEDDED_DATA
    from seq2seq.distributed import process_group
    from seq2seq.train import build_trainer

    model_config, train_config, tokenizer_config = configs(args)
    train = read_corpus(args.train or str(EMBEDDED_DATA / "train.tsv"), args.train_target, args)
    dev = read_corpus(args.dev or str(EMBEDDED_DATA / "dev.tsv"), args.dev_target, args)
    with process_group(train_config.device) as world:  # a world of one without torchrun
        log = (lambda line: print(line, file=sys.stderr, flush=True)) if world.is_main else (lambda line: None)
        trainer = build_trainer(train, dev, args.output_dir, model_config, train_config, tokenizer_config,
                                args.resume, args.overwrite, log, world)
        log(f"{args.train or 'embedded corpus'}: {trainer.train_set.summary()}")
        model = trainer.model
        log(f"training {model.config.attention} ({sum(p.numel() for p in model.parameters()):,} parameters) "
            f"on {len(trainer.train_set)} pairs, validating on {len(dev.examples)}, device {trainer.device}")
        if world.size > 1:
            log(f"{world.size} processes ({world.backend}): each trains on 1/{world.size} of every epoch's batches; "
                "rank 0 validates and writes the checkpoints")
        result = trainer.fit()
        if world.is_main:
            print(json.dumps({"output_dir": args.output_dir, **dataclasses.asdict(result)}))
    return 0


def search_config(args: argparse.Namespace, n_best: int = 1) -> SearchConfig:
    return SearchConfig(beam_size=args.beam_size, n_best=n_best, length_penalty=args.length_penalty,
                        max_length_ratio=args.max_length_ratio)


def input_chunks(stream: TextIO, size: int) -> Iterator[list[tuple[int, str | None]]]:
    """(line number, text or None when not UTF-8) in chunks; one line at a time from a terminal."""
    size = 1 if stream.isatty() else size
    chunk: list[tuple[int, str | None]] = []
    for number, raw in enumerate(stream.buffer, start=1):
        try:
            chunk.append((number, raw.decode("utf-8").rstrip("\r\n")))
        except UnicodeDecodeError as err:
            print(f"warning: stdin: line {number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column "
                  f"{err.start + 1}); empty recommendation written", file=sys.stderr)
            chunk.append((number, None))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class RowProgress:
    """``progress(done, total)`` for ``translate_file``: a tqdm bar on stderr with rows/s and the ETA."""

    def __init__(self) -> None:
        self.bar: tqdm | None = None

    def __call__(self, done: int, total: int | None) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, initial=done, desc="translate", unit="row", leave=False, mininterval=1.0)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_translate_file(args: argparse.Namespace, config: SearchConfig) -> int:
    from seq2seq.distributed import launched_size, process_group
    from seq2seq.recommender import Recommender

    if args.output is None:
        raise ConfigError("--input needs --output (the file to write)")
    if args.resume and launched_size() > 1:
        raise ConfigError("--resume: a job split by torchrun is resumed in one process; run it without torchrun")
    chunk_rows = HEATMAP_CHUNK_ROWS if args.heatmaps else 1024
    # Under torchrun "cuda" is each process's own GPU (cuda:LOCAL_RANK, the current device).
    with process_group(args.device) as world:
        recommender = Recommender.from_checkpoint(args.model, args.device, args.quantize, decode_workers(args))
        progress = RowProgress() if world.is_main else None
        try:
            if world.size == 1:
                summary = translate_file(recommender, args.input, args.output, args.column, args.format, config,
                                         args.batch_size, chunk_rows=chunk_rows, resume=args.resume,
                                         attention_out=args.attention_out, heatmaps=args.heatmaps, progress=progress)
            else:
                summary = translate_shared(world, recommender, args, config, chunk_rows, progress)
        finally:
            if progress is not None:
                progress.close()
        if world.is_main:
            print(f"{args.output}: {summary.summary()}", file=sys.stderr)
    return 0


def translate_shared(world: World, recommender: Recommender, args: argparse.Namespace, config: SearchConfig,
                     chunk_rows: int, progress: RowProgress | None) -> BatchSummary:
    """This process's share of ``translate --input`` under torchrun: rows in whole chunks, contiguous,
    in rank order (``World.share``), into a part file; rank 0 writes its share to --output itself and
    then appends the others' parts, so the output has the bytes of a one-process run. The summary
    counts every process's rows."""
    from seq2seq.incident_log import count_rows, format_of, open_binary

    input_path, output = Path(args.input), Path(args.output)
    attention = Path(args.attention_out) if args.attention_out else None
    destinations = [path for path in (output, attention) if path is not None]
    with open_binary(input_path, "rb") as file:
        if not file.seekable():
            raise ConfigError(f"{input_path}: under torchrun --input must be a regular file (its rows are split)")
        total = count_rows(file, args.format or format_of(input_path, "--format"))
    if world.is_main:
        check_new_outputs(output, attention, Path(args.heatmaps) if args.heatmaps else None)
    else:
        for path in destinations:
            part_path(path, world.rank).unlink(missing_ok=True)  # left by a killed job
    world.barrier()  # nobody writes before rank 0 has checked that the destinations are new
    attention_part = part_path(attention, world.rank) if attention is not None else None
    summary = translate_file(recommender, input_path, part_path(output, world.rank), args.column, args.format,
                             config, args.batch_size, chunk_rows=chunk_rows, attention_out=attention_part,
                             heatmaps=args.heatmaps, progress=progress, part=world.share(total, chunk_rows),
                             header=world.is_main)
    world.barrier()
    if world.is_main:
        for path in destinations:
            merge_parts(path, world.size)
    rows, translated, errors = (int(world.sum(count)) for count in (summary.rows, summary.translated, summary.errors))
    return BatchSummary(rows, translated, errors, 0, world.max(summary.seconds))


def run_translate(args: argparse.Namespace) -> int:
    from seq2seq.distributed import launched_size
    from seq2seq.recommender import Recommender
    from seq2seq.search import check_search_config

    config = search_config(args, args.n_best)
    check_search_config(config)
    if args.input is not None:
        return run_translate_file(args, config)
    file_options = [f"--{name.replace('_', '-')}" for name in FILE_OPTIONS if getattr(args, name)]
    if file_options:
        raise ConfigError(f"{', '.join(file_options)}: only with --input (without it, alerts are read from stdin)")
    if launched_size() > 1:
        raise ConfigError("under torchrun, translate needs --input and --output (stdin is read by one process)")
    recommender = Recommender.from_checkpoint(args.model, args.device, args.quantize)
    for chunk in input_chunks(sys.stdin, args.batch_size):
        results = recommender.recommend([text or "" for _, text in chunk], config, args.batch_size)
        for (number, text), result in zip(chunk, results, strict=True):
            if result.warning and text and text.strip():
                print(f"warning: stdin: line {number}: {result.warning}", file=sys.stderr)
            if args.n_best == 1:
                print(result.text)
            else:
                print("\t".join(f"{c.text}\t{c.score:.4f}" for c in result.candidates))
        sys.stdout.flush()
    return 0


def decode_workers(args: argparse.Namespace) -> int:
    """--workers, 0 = one per intra-op thread on a CPU. Several workers each get one core: the
    process's intra-op threads are set to 1 (two one-core threads decode 1.02-1.20x faster than one
    two-core thread on the dev machine; Recommender.recommend)."""
    import torch

    from seq2seq.config import resolve_device

    if args.workers < 0:
        raise ConfigError(f"--workers must be 0 (one per core) or more, got {args.workers}")
    if resolve_device(args.device).type != "cpu":
        return args.workers or 1
    workers = args.workers or torch.get_num_threads()
    if workers > 1:
        torch.set_num_threads(1)
    return workers


def run_evaluate(args: argparse.Namespace) -> int:
    """Under torchrun each process translates a contiguous share of the sources; rank 0 scores them all."""
    from seq2seq.distributed import process_group
    from seq2seq.evaluate import score_recommendations
    from seq2seq.recommender import Recommender

    config = search_config(args)
    corpus = read_corpus(args.data, args.data_target, args)
    sources = [example.source for example in corpus.examples]
    with process_group(args.device) as world:
        recommender = Recommender.from_checkpoint(args.model, args.device, args.quantize, decode_workers(args))
        share = recommender.recommend(sources[world.share(len(sources), args.batch_size)], config, args.batch_size)
        recommendations = [r for part in world.gather_object(share) for r in part]
    if not world.is_main:
        return 0
    scores = score_recommendations(recommendations, corpus)
    truncated = sum(1 for r in recommendations if r.warning and "truncated" in r.warning)
    if truncated:
        print(f"warning: {args.data}: {truncated} alerts truncated to the model's limit", file=sys.stderr)
    if args.hypotheses:
        Path(args.hypotheses).write_text("".join(r.text + "\n" for r in recommendations), encoding="utf-8")
    if args.json:
        print(json.dumps({**scores.to_json(), "beam_size": args.beam_size, "skipped": len(corpus.skipped)}))
    else:
        print(scores.summary())
        for name, signature in scores.signature.items():
            print(f"  {name}: {signature}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = {"train": run_train, "translate": run_translate, "evaluate": run_evaluate, "rul": run_rul}[args.command]
    try:
        return run(args)
    except Seq2SeqError as err:
        print(f"seq2seq: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        resumable = args.command == "train" or getattr(args, "input", None) is not None
        print("seq2seq: interrupted" + ("; continue with --resume" if resumable else ""), file=sys.stderr)
        return 130

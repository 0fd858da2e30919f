"""``seq2seq average | ensemble``: several translator checkpoints made into one file (seq2seq/ensemble.py).

    seq2seq average  --inputs A.pt B.pt ... --output AVG.pt [--dev dev.tsv [--source-column C --target-column C]]
    seq2seq ensemble --inputs A.pt B.pt ... --output ENS.pt [--dev ...]

The output loads wherever a checkpoint does (translate, evaluate, the UI, the batch job); the rules
(one tokenizer and model configuration, trust refitted with ``--dev``) are seq2seq/combine.py's. An
existing ``--output`` is replaced only with ``--overwrite``, as a run is by ``seq2seq train``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seq2seq.checkpoint import save_atomic
from seq2seq.cli.common import path_flag
from seq2seq.combine import combine_checkpoints
from seq2seq.corpus import read_parallel
from seq2seq.errors import ConfigError, DataError, counted
from seq2seq.evaluate import few_dev_warning
from seq2seq.files import given_twice
from seq2seq.serving.destinations import check_distinct
from seq2seq.writing import check_replaceable

MAX_INPUTS = 64


def add_combine_parsers(commands: argparse._SubParsersAction) -> None:
    for name, text in (("average", "one model whose weights are the mean of the inputs' (checkpoints of one run)"),
                       ("ensemble", "one file holding all the inputs, decoded together")):
        p = commands.add_parser(name, help=text)
        p.add_argument("--inputs", nargs="+", required=True, type=path_flag, help="translator checkpoints (best.pt)")
        p.add_argument("--output", required=True, type=path_flag)
        p.add_argument("--overwrite", action="store_true", help="replace --output if it exists")
        p.add_argument("--dev", type=path_flag,
                       help="fit the trust model again for the combined model on this dev split")
        p.add_argument("--source-column")
        p.add_argument("--target-column")


def run_combine(args: argparse.Namespace) -> int:
    if not 1 <= len(args.inputs) <= MAX_INPUTS:
        raise ConfigError(f"--inputs: 1 to {MAX_INPUTS} checkpoints, got {len(args.inputs)}")
    output = Path(args.output)
    if (twice := given_twice(args.inputs)) is not None:  # one model counted twice would pass for an ensemble of two
        raise ConfigError(f"--inputs: {twice} is given twice; each checkpoint counts once")
    reads = {f"--inputs {path}": Path(path) for path in args.inputs}
    check_distinct({**reads, **({"--dev": Path(args.dev)} if args.dev else {})}, {"--output": output}, None)
    check_output(output, args.overwrite)
    dev = read_parallel(args.dev, args.source_column, args.target_column) if args.dev else None
    result, count = combine_checkpoints(args.inputs, args.command, dev)
    if dev is None and "memory" in result:
        print(f"note: {args.output}: trust as fitted for {args.inputs[0]}; pass --dev to fit it for the "
              f"{args.command}", file=sys.stderr)
    elif dev is not None and "memory" in result and (warning := few_dev_warning(dev)):
        print(warning, file=sys.stderr)
    save_atomic(result, output)  # a full disk: a one-line error, the old --output (with --overwrite) left as it was
    print(f"{args.output}: {'ensemble' if args.command == 'ensemble' else 'average'} of {counted(count, 'checkpoint')}",
          file=sys.stderr)
    return 0


def check_output(output: Path, overwrite: bool) -> None:
    """Before the inputs are read: --output names a file, new unless ``overwrite``."""
    if output.is_dir():
        raise DataError(f"{output}: is a directory; --output needs a file name")
    check_replaceable(output)  # a pipe or a device first: --overwrite would not help there
    if output.exists() and not overwrite:
        raise DataError(f"{output}: already exists; pass --overwrite to replace it")

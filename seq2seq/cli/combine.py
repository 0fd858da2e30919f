"""``seq2seq average | ensemble``: several translator checkpoints made into one file (seq2seq/ensemble.py).

    seq2seq average  --inputs A.pt B.pt ... --output AVG.pt [--dev dev.tsv [--source-column C --target-column C]]
    seq2seq ensemble --inputs A.pt B.pt ... --output ENS.pt [--dev ...]

The output loads wherever a checkpoint does (translate, evaluate, the UI, the batch job). The inputs
must share one tokenizer and one model configuration. The case memory is the first input's; its
trust model was fitted for that input's probabilities, so with ``--dev`` it is fitted again for the
combined model (as training fits it); without, the first input's is kept and a line says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from seq2seq.checkpoint import cpu_weights, load_model, save_atomic
from seq2seq.corpus import read_parallel
from seq2seq.ensemble import Ensemble, average_weights
from seq2seq.errors import ConfigError
from seq2seq.evaluate import fit_trust_on
from seq2seq.model import Seq2Seq, build_model
from seq2seq.recommender import Recommender, read_memory
from seq2seq.serving.destinations import check_distinct

MAX_INPUTS = 64


def add_combine_parsers(commands: argparse._SubParsersAction) -> None:
    for name, text in (("average", "one model whose weights are the mean of the inputs' (checkpoints of one run)"),
                       ("ensemble", "one file holding all the inputs, decoded together")):
        p = commands.add_parser(name, help=text)
        p.add_argument("--inputs", nargs="+", required=True, help="translator checkpoints (best.pt)")
        p.add_argument("--output", required=True)
        p.add_argument("--dev", help="fit the trust model again for the combined model on this dev split")
        p.add_argument("--source-column")
        p.add_argument("--target-column")


def run_combine(args: argparse.Namespace) -> int:
    if not 1 <= len(args.inputs) <= MAX_INPUTS:
        raise ConfigError(f"--inputs: 1 to {MAX_INPUTS} checkpoints, got {len(args.inputs)}")
    reads = {f"--inputs {path}": Path(path) for path in args.inputs}
    check_distinct({**reads, **({"--dev": Path(args.dev)} if args.dev else {})}, {"--output": Path(args.output)}, None)
    loaded = [load_model(path) for path in args.inputs]
    first_path, (_, tokenizer, payload) = args.inputs[0], loaded[0]
    members = []
    for path, (model, _, other) in zip(args.inputs, loaded, strict=True):
        if other["tokenizer"] != payload["tokenizer"]:
            raise ConfigError(f"{path}: its tokenizer differs from {first_path}'s; combined checkpoints must share one "
                              "(train them on one --train file with one tokenizer configuration)")
        if model.config != loaded[0][0].config:
            raise ConfigError(f"{path}: its model configuration differs from {first_path}'s")
        members += list(model.members) if isinstance(model, Ensemble) else [model]
    if args.command == "average":
        if any(isinstance(model, Ensemble) for model, _, _ in loaded):
            raise ConfigError("average takes single checkpoints; an ensemble's members are best decoded together")
        combined: Seq2Seq | Ensemble = build_model(members[0].config)
        combined.load_state_dict(average_weights(members))
    else:
        combined = Ensemble(members)
    result: dict[str, Any] = {key: value for key, value in payload.items() if key not in ("ensemble_weights", "memory")}
    result.update(training_state={}, combined_from={"how": args.command, "inputs": [Path(p).name for p in args.inputs]},
                  weights=cpu_weights(members[0] if isinstance(combined, Ensemble) else combined))
    if isinstance(combined, Ensemble):
        result["ensemble_weights"] = [cpu_weights(member) for member in members[1:]]
    memory, trust = read_memory(payload, first_path)
    if memory is not None:
        if args.dev:
            dev = read_parallel(args.dev, args.source_column, args.target_column)
            trust = fit_trust_on(Recommender(combined.eval(), tokenizer), memory, dev, trust.flag_rate)
        else:
            print(f"note: {args.output}: trust as fitted for {first_path}; pass --dev to fit it for the "
                  f"{args.command}", file=sys.stderr)
        result["memory"] = {"cases": memory.state_dict(), "trust": trust.state_dict()}
    save_atomic(result, args.output)
    kind = f"ensemble of {len(members)}" if isinstance(combined, Ensemble) else f"average of {len(members)}"
    print(f"{args.output}: {kind} checkpoints", file=sys.stderr)
    return 0

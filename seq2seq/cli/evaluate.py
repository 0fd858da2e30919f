"""``seq2seq evaluate``: a parallel file decoded as ``seq2seq translate`` decodes (the same search flags), scored
by sacrebleu; ``--json`` adds the selective scores."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from seq2seq.cli.common import path_flag, read_corpus
from seq2seq.cli.translate import add_search_arguments, decode_workers, search_config, search_flags
from seq2seq.corpus import ParallelCorpus
from seq2seq.distributed import process_group
from seq2seq.errors import DataError, write_error
from seq2seq.evaluate import score_recommendations, selective_scores
from seq2seq.fast.threads import one_core_workers
from seq2seq.files import make_folder, open_binary
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.serving.destinations import check_distinct


def add_evaluate_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("evaluate", help="BLEU, chrF and TER (sacrebleu) of a model on a parallel file")
    add_search_arguments(p)
    p.add_argument("--data", required=True, type=path_flag)
    p.add_argument("--data-target", type=path_flag, help="plain-text target file aligned with --data")
    p.add_argument("--source-column")
    p.add_argument("--target-column")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--hypotheses", type=path_flag, help="also write the translations to this file, one line per "
                   "record of --data (empty for a pair skipped for an empty source or target)")


def run_evaluate(args: argparse.Namespace) -> int:
    """Under torchrun each process translates a contiguous share of the sources; rank 0 scores them all."""
    search_flags(args)
    hypotheses = Path(args.hypotheses) if args.hypotheses is not None else None
    if hypotheses is not None:  # before decoding, which may take hours: not after it
        reads = {"--data": args.data, "--data-target": args.data_target, "--model": args.model}
        check_distinct({option: Path(path) for option, path in reads.items() if path}, {"--hypotheses": hypotheses},
                       None)
        if hypotheses.is_dir():
            raise DataError(f"{hypotheses}: is a directory; --hypotheses needs a file name")
    corpus = read_corpus(args.data, args.data_target, args)
    sources = [example.source for example in corpus.examples]
    workers = decode_workers(args)
    with process_group(args.device) as world, one_core_workers(workers):
        recommender = Recommender.from_checkpoint(args.model, args.device, args.quantize, workers)
        config = search_config(args, recommender.search)
        share = recommender.recommend(sources[world.share(len(sources), args.batch_size)], config, args.batch_size)
        recommendations = [r for part in world.gather_object(share) for r in part]
    if not world.is_main:
        return 0
    scores = score_recommendations(recommendations, corpus)
    truncated = sum(1 for r in recommendations if r.warning and "truncated" in r.warning)
    if truncated:
        print(f"warning: {args.data}: {truncated} alerts truncated to the model's limit", file=sys.stderr)
    if hypotheses is not None:
        make_folder(hypotheses.parent)
        try:
            with open_binary(hypotheses, "wb") as file:
                file.write(hypothesis_lines(corpus, recommendations).encode("utf-8"))
        except OSError as err:  # a full disk: opening is open_binary's, writing and closing are here
            raise write_error(hypotheses, err) from None
    if args.json:
        print(json.dumps({**scores.to_json(), "beam_size": config.beam_size, "length_penalty": config.length_penalty,
                          "beam_patience": config.beam_patience, "skipped": len(corpus.skipped),
                          "selective": selective_scores(recommendations, corpus)}))
    else:
        print(scores.summary())
        for name, signature in scores.signature.items():
            print(f"  {name}: {signature}")
    return 0


def hypothesis_lines(corpus: ParallelCorpus, recommendations: list[Recommendation]) -> str:
    """One line per record of --data, in its order: a pair skipped for an empty source or target gets an empty
    line, so that the file lines up with --data-target (or the data's own targets) as ``translate`` keeps every
    line; it used to hold the scored pairs only, and every line after a skipped one sat against another's."""
    texts = {example.line: r.text for example, r in zip(corpus.examples, recommendations, strict=True)}
    texts.update((line, "") for line, _ in corpus.skipped)
    return "".join(texts[line] + "\n" for line in sorted(texts))

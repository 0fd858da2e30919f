"""Command line: ``seq2seq train | translate | evaluate | average | ensemble | rul ... | feedback ...``.

Every error a user can cause (files, columns, options, checkpoints) is printed as one line,
``seq2seq: error: ...``, with exit status 2; no traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from seq2seq.cli.combine import add_combine_parsers, run_combine
from seq2seq.cli.feedback import add_feedback_parser, run_feedback
from seq2seq.cli.rul import add_rul_parser, run_rul
from seq2seq.cli.train import add_train_parser, run_train
from seq2seq.cli.translate import add_translate_parsers, run_evaluate, run_translate
from seq2seq.errors import Seq2SeqError, shown


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, ``seq2seq: error: ...``, as every other error is (``--help``
    shows the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"seq2seq: error: {shown(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq", description="Maintenance alerts -> repair recommendations.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_train_parser(commands)
    add_translate_parsers(commands)
    add_combine_parsers(commands)
    add_rul_parser(commands)
    add_feedback_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = {"train": run_train, "translate": run_translate, "evaluate": run_evaluate, "rul": run_rul,
           "feedback": run_feedback, "average": run_combine, "ensemble": run_combine}[args.command]
    try:
        return run(args)
    except Seq2SeqError as err:
        # One write, newline included: processes of one torchrun job share stderr, unbuffered there, and a
        # separate write of the newline let two processes' lines run together.
        sys.stderr.write(f"seq2seq: error: {err}\n")
        sys.stderr.flush()
        return 2
    except KeyboardInterrupt:
        resumable = args.command == "train" or getattr(args, "input", None) is not None
        print("seq2seq: interrupted" + ("; continue with --resume" if resumable else ""), file=sys.stderr)
        return 130

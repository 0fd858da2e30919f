"""What several commands share: a bounded whole-number flag, a path flag, and reading a parallel file with its
warning."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from seq2seq.corpus import ParallelCorpus, read_parallel
from seq2seq.distributed import launched_first


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type`` for a flag that is no config field: a whole number in [low, high]; anything
    else is argparse's one-line error. (Config fields are checked by their records: ``config_checks.RANGES``.)"""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], got {value}")
        return value

    return parse


def path_flag(text: str) -> str:
    """An argparse ``type`` for a flag naming a file or folder: an empty one (an unset shell variable) is
    argparse's one-line error, ``argument --output: empty path``, rather than the current folder."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    return text


def owned_folder(parser: argparse.ArgumentParser, flag: str, folder: Path, marker: str) -> None:
    """Refuse ``folder`` (a script's ``flag``) in one line unless it is new, empty, or holds ``marker``, the file
    the script writes there: the script deletes what it finds in it, which must never be someone else's files."""
    if folder.exists() and not folder.is_dir():
        parser.error(f"{flag} {folder}: is a file, not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / marker).is_file():
        parser.error(f"{flag} {folder}: holds files this script did not make (no {marker}); name a new or empty "
                     "folder")


def read_corpus(path: str, target: str | None, args: argparse.Namespace) -> ParallelCorpus:
    corpus = read_parallel(path, args.source_column, args.target_column, target)
    if corpus.skipped and launched_first():  # under torchrun every process reads it alike
        print(f"warning: {corpus.summary()}", file=sys.stderr)
    return corpus

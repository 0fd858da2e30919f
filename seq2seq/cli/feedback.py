"""``seq2seq feedback export | stats``: the technicians' feedback database (``seq2seq.serving.feedback``) as
training pairs for ``seq2seq train --init-from``, and its counts."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from seq2seq.cli.common import path_flag
from seq2seq.errors import ConfigError, DataError
from seq2seq.files import make_folder
from seq2seq.serving.destinations import check_distinct
from seq2seq.serving.feedback import training_pairs
from seq2seq.serving.feedback_store import SIDECARS, FeedbackStore, sidecar
from seq2seq.writing import check_replaceable, write_atomic


def add_feedback_parser(commands: argparse._SubParsersAction) -> None:
    feedback = commands.add_parser("feedback", help="the technicians' feedback database: export corrections, counts")
    sub = feedback.add_subparsers(dest="feedback_command", metavar="{export,stats}", required=True)
    p = sub.add_parser("export", help="a TSV of alert/action pairs (the correction, or the recommendation marked "
                                      "right) for seq2seq train --init-from")
    p.add_argument("--db", required=True, type=path_flag,
                   help="the app's feedback database (gradio_app.py --feedback-db)")
    p.add_argument("--output", required=True, type=path_flag, help="the TSV to write (replaced if it exists)")
    p.add_argument("--source-column", default="alert", type=column_name,
                   help="the alert column's name (default alert): as your dev file names it, since seq2seq train "
                   "reads both files by the same --source-column")
    p.add_argument("--target-column", default="action", type=column_name,
                   help="the action column's name (default action), likewise")
    p.add_argument("--every-record", action="store_true",
                   help="a pair for every record with an action, oldest first, instead of one per alert (case and "
                   "spacing aside) from its newest record")
    p = sub.add_parser("stats", help="records, right, wrong, corrected, learnable, translators, technicians")
    p.add_argument("--db", required=True, type=path_flag)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def column_name(text: str) -> str:
    """An argparse ``type``: a TSV column's name, which holds no tab or line break and is not blank."""
    if not text.strip() or any(c in text for c in "\t\r\n"):
        raise argparse.ArgumentTypeError(f"a column name needs a character other than spaces, and no tab or line "
                                         f"break; got {text!r}")
    return text


def run_feedback(args: argparse.Namespace) -> int:
    return {"export": run_export, "stats": run_stats}[args.feedback_command](args)


def run_export(args: argparse.Namespace) -> int:
    db, output = Path(args.db), Path(args.output)
    real = Path(os.path.realpath(db))  # SQLite keeps its files beside the file a link names
    for suffix in SIDECARS:  # checked before the database is opened: a refused export changes nothing
        beside = sidecar(real, suffix)
        if os.path.realpath(output) == os.path.realpath(beside) or (
                output.exists() and beside.exists() and output.samefile(beside)):
            raise DataError(f"{output}: --output is the feedback database{' ' + suffix if suffix else ''} "
                            f"({db}); choose another file")
    if output.is_dir():
        raise DataError(f"{output}: is a directory; --output needs a file name")
    check_replaceable(output)  # a pipe or a device is refused as that, whatever its name
    if args.source_column == args.target_column:
        raise ConfigError(f"--source-column and --target-column are both {args.source_column!r}; name two columns")
    if output.suffix.lower() != ".tsv":  # the one name seq2seq train reads tab-separated pairs from
        raise DataError(f"{output}: export writes tab-separated pairs, which seq2seq train reads only from a .tsv "
                        "file; name it .tsv")
    check_distinct({}, {"--output": output}, None)  # a file where its folder should be, named with the output
    store = FeedbackStore(db, create=False)
    try:
        records = store.records()
    finally:
        store.close()
    found = training_pairs(records, args.every_record)
    make_folder(output.parent)
    header = (args.source_column, args.target_column)
    write_atomic(output, "".join(f"{alert}\t{action}\n" for alert, action in [header, *found.pairs]))
    withdrawn = f", {found.withdrawn} of them withdrawing an alert's earlier action" if found.withdrawn else ""
    left = [f"{found.no_action} without an action: 'wrong' with no correction{withdrawn}"]
    if found.repeated:
        left.append(f"{found.repeated} repeating an alert's pair")
    if found.superseded:
        left.append(f"{found.superseded} superseded by a newer action for the same alert")
    print(f"wrote {len(found.pairs)} alert/action pairs of {len(records)} records to {output} ({'; '.join(left)})",
          file=sys.stderr)
    escaped = [str(r.id) for r in records if r.feedback.controls]
    if escaped:  # stored before such posts were refused: kept, and written so the export is safe to open
        ids = ", ".join(escaped[:10]) + (", ..." if len(escaped) > 10 else "")
        print(f"warning: {db}: {len(escaped)} records hold control characters (ids {ids}), stored before they were "
              "refused; exported as escapes such as \\x1b", file=sys.stderr)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    store = FeedbackStore(args.db, create=False)
    try:
        stats = store.stats()
    finally:
        store.close()
    if args.json:
        print(json.dumps(stats))
    else:
        for name, value in stats.items():
            print(f"{name}: {value if value is not None else '-'}")
    return 0

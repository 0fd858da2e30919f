"""``seq2seq translate``: alerts on stdin -> recommendations on stdout, or a whole file with --input. Its
search flags serve ``seq2seq evaluate`` too (``cli/evaluate.py``)."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from seq2seq.cli.common import path_flag, whole_number
from seq2seq.config import DEVICES, SearchConfig, resolve_device
from seq2seq.config_checks import MAX_BEAM_SIZE, from_dict
from seq2seq.distributed import launched_size, process_group
from seq2seq.errors import ConfigError, DataError, shown
from seq2seq.fast.threads import one_core_workers, worker_count
from seq2seq.files import (
    LongLine,
    bounded_lines,
    check_text,
    decode_line,
    escaped,
    line_pieces,
)
from seq2seq.progress import progress_bar
from seq2seq.recommender import MAX_SIMILAR, SIMILAR, Recommendation, Recommender
from seq2seq.serving.batch import FileJob, JobStopped
from seq2seq.serving.destinations import record_path
from seq2seq.serving.incident_log import FORMATS, UnknownFormat, format_of
from seq2seq.serving.layout import n_best_line
from seq2seq.serving.sharding import translate_shared
from seq2seq.serving.views import translation_json
from seq2seq.trust import NOT_ADVICE, UNLIKE_HISTORY
from seq2seq.writing import check_replaceable

MAX_BATCH_SIZE = 100_000  # sentences read and decoded together: a chunk of stdin is held in memory
HEATMAP_CHUNK_ROWS = 64  # a PNG takes a while: smaller chunks keep the bar moving and a kill cheap
FILE_OPTIONS = ("output", "column", "format", "attention_out", "heatmaps", "resume")  # of translate --input


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, type=path_flag, help="a checkpoint written by seq2seq train (best.pt)")
    p.add_argument("--beam-size", type=int, help="1 = greedy; default: the model's (its config's search section, "
                   "else greedy)")
    p.add_argument("--length-penalty", type=float, help="default: the model's, else 1.0")
    p.add_argument("--beam-patience", type=float, help="a beam search ends once beam size x this many answers "
                   "finished; default: the model's, else 1.0")
    p.add_argument("--max-length-ratio", type=float, help="default: the model's, else 3.0")
    p.add_argument("--batch-size", type=whole_number(1, MAX_BATCH_SIZE), default=64, help="sentences decoded together")
    p.add_argument("--device", choices=DEVICES, default="cpu")
    p.add_argument("--quantize", action="store_true",
                   help="int8 weights for the linear and GRU layers: faster on a CPU, BLEU moves a little "
                        "(docs/benchmarks.md)")
    p.add_argument("--workers", type=int, default=0,
                   help="batches decoded at once in threads of one core each (files and evaluate; default: "
                        "one per core on a CPU, 1 on CUDA)")


def add_file_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", type=path_flag,
                   help="translate this file (.csv/.tsv/.jsonl with a column of alerts, or .txt)")
    p.add_argument("--output", type=path_flag, help="the input's rows with recommendation, score and error added")
    p.add_argument("--column",
                   help="alert column or key (default: source, else problem, else alert, else the only one)")
    p.add_argument("--format", choices=FORMATS, help="of the input, when its extension does not say")
    p.add_argument("--attention-out", type=path_flag,
                   help="JSONL file: source pieces, target pieces and attention per row")
    p.add_argument("--heatmaps", type=path_flag, help="folder for one attention heatmap PNG per translated row")
    p.add_argument("--resume", action="store_true", help="continue an interrupted --output (and its companions)")


def add_translate_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("translate", help="alerts on stdin, one per line -> recommendations on stdout; "
                                              "or a whole file with --input/--output")
    add_search_arguments(p)
    p.add_argument("--n-best", type=int, default=1, help="N tab-separated 'recommendation<TAB>score' pairs")
    p.add_argument("--json", action="store_true", help="one JSON object per input line: recommendation, score, "
                   "trust, verdict and the most similar past cases")
    p.add_argument("--similar", type=whole_number(0, MAX_SIMILAR),
                   help=f"past cases per alert, with --json (default {SIMILAR})")
    add_file_arguments(p)


def search_flags(args: argparse.Namespace, n_best: int = 1) -> dict[str, float]:
    """The search settings the flags set (a flag left out, or not a flag of the command, is None), checked before
    any model is loaded; a value out of its range is blamed on its flag ("argument --beam-size: ...")."""
    given = {name: getattr(args, name, None) for name in ("beam_size", "length_penalty", "beam_patience",
                                                          "max_length_ratio")}
    given = {name: value for name, value in given.items() if value is not None}
    if n_best < 1 or ("beam_size" not in given and n_best > MAX_BEAM_SIZE):  # here: the check below would name
        # the stand-in for the model's beam, MAX_BEAM_SIZE, as if someone had chosen it
        raise ConfigError(f"argument --n-best: must be in [1, beam size], got {n_best}"
                          + (f" (beams are at most {MAX_BEAM_SIZE} wide)" if n_best > 1 else ""))
    flags = {name: f"--{name.replace('_', '-')}" for name in [*given, "n_best"]}
    from_dict(SearchConfig, {**given, "beam_size": given.get("beam_size", MAX_BEAM_SIZE), "n_best": n_best}, "search",
              flags)  # ranges
    return given


def search_config(args: argparse.Namespace, defaults: SearchConfig, n_best: int = 1) -> SearchConfig:
    """The model's search defaults with what the flags set."""
    given = search_flags(args, n_best)
    if "beam_size" not in given and n_best > defaults.beam_size:
        raise ConfigError(f"--n-best {n_best}: the model's beam size is {defaults.beam_size}, and n-best needs a beam "
                          f"at least as wide; pass --beam-size {n_best}")
    return replace(defaults, n_best=n_best, **given)


def input_chunks(stream: TextIO, size: int) -> Iterator[list[tuple[int, str, str]]]:
    """(line number, text, fault) in chunks; one line at a time from a terminal. ``fault`` is why a line
    cannot be read ("" when it can): its bytes are not UTF-8 (the text keeps them, ``decode_line``), or it is
    over ``MAX_LINE_BYTES`` (the text is "").

    A lone CR ends a line too (a file saved with old Mac endings is not one alert); a line over
    ``MAX_LINE_BYTES`` is skipped in pieces, so an endless line takes bounded memory. Stdin that is not
    UTF-8 text from its first line (UTF-16 from a PowerShell pipe) is refused as a file is (``check_text``):
    read line by line, it would be garbage, with one alert more than was sent.
    """
    size = 1 if stream.isatty() else size
    chunk: list[tuple[int, str, str]] = []
    number = 0
    for raw in bounded_lines(stream.buffer, lone_cr=True):
        if number == 0 and not isinstance(raw, LongLine):
            check_text(Path("stdin"), raw)
            raw = raw.removeprefix(codecs.BOM_UTF8)  # as a file's: a mark, not part of the first alert
        for part in [raw] if isinstance(raw, LongLine) else line_pieces(raw):
            number += 1
            chunk.append((number, *(("", part.fault()) if isinstance(part, LongLine) else decode_line(part))))
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def recommend_lines(recommender: Recommender, chunk: list[tuple[int, str, str]], config: SearchConfig,
                    batch_size: int, similar: int) -> list[Recommendation]:
    """One answer per stdin line, in order: an unreadable line is not translated, its answer is empty with
    the fault as its warning and its bytes escaped (``\\xe9``) as its alert."""
    answers = iter(recommender.recommend([text for _, text, fault in chunk if not fault], config, batch_size,
                                         similar))
    return [Recommendation(escaped(text), [], warning=fault) if fault else next(answers) for _, text, fault in chunk]


class RowProgress:
    """``progress(done, total)`` for ``translate_file``: a tqdm bar on stderr with rows/s and the ETA.

    Only on a terminal (``disable=None``): in a log file the bar's carriage returns would leave a row's
    warning in the middle of a line; on a terminal the warnings go through ``tqdm.write``, above the bar.
    """

    def __init__(self) -> None:
        self.bar: tqdm | None = None

    def __call__(self, done: int, total: int | None) -> None:
        if self.bar is None:
            self.bar = progress_bar(total=total, initial=done, desc="translate", unit="row", leave=False,
                                    mininterval=1.0)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def check_written_files(output: str, attention_out: str | None) -> None:
    """DataError, before the model loads, for an output the job would write wrongly: a name ending in a slash (Path
    drops it: a file "newdir" would be written), an extension no format has (".json", ".xlsx" would get the input's
    format under that name), or something not a regular file (/dev/null, a FIFO: no job can be resumed there)."""
    for flag, value in (("--output", output), ("--attention-out", attention_out)):
        if value is None:
            continue
        path = Path(value)
        if value.endswith(("/", os.sep)):
            raise DataError(f"{value}: names a folder; {flag} needs a file name")
        if not path.is_dir():  # a folder is named as one later
            check_replaceable(path)
    suffix = Path(output).suffix
    if suffix and format_of(Path(output), False) is None:
        raise DataError(f"{output}: unknown file type {suffix!r} for --output: expected .csv, .tsv, .jsonl or .txt "
                        "(or no extension, for the input's format)")


def run_translate_file(args: argparse.Namespace) -> int:
    if args.output is None:
        raise ConfigError("--input needs --output (the file to write)")
    if args.resume and launched_size() > 1:
        raise ConfigError("--resume: a job split by torchrun is resumed in one process; run it without torchrun")
    try:  # before the model loads: the shared words name the problem, and this command has a way out
        format_of(Path(args.input), args.format is None)
    except UnknownFormat as err:
        raise DataError(f"{err} (or pass --format {'|'.join(FORMATS)})") from None
    check_written_files(args.output, args.attention_out)
    chunk_rows = HEATMAP_CHUNK_ROWS if args.heatmaps else 1024
    workers = decode_workers(args)
    # Under torchrun "cuda" is each process's own GPU (cuda:LOCAL_RANK, the current device).
    with process_group(args.device) as world, one_core_workers(workers):
        recommender = Recommender.from_checkpoint(args.model, args.device, args.quantize, workers)
        config = search_config(args, recommender.search, args.n_best)
        progress = RowProgress() if world.is_main else None
        try:
            job = FileJob.of(recommender, args.input, args.output, args.column, args.format, config, args.batch_size,
                             chunk_rows, args.attention_out, args.heatmaps)
            if world.size == 1:
                summary = job.run(resume=args.resume, progress=progress)
            else:
                summary = translate_shared(world, job, progress)
        except JobStopped as stopped:
            raise DataError(f"{stopped}; {how_to_go_on(job, stopped, world.size > 1)}") from None
        finally:
            if progress is not None:
                progress.close()
        if world.is_main:
            print(f"{shown(args.output)}: {summary.summary()}", file=sys.stderr)
    return 0


def how_to_go_on(job: FileJob, stopped: JobStopped, split: bool = False) -> str:
    """What a stopped job left and what to do: --resume after a failed write (in one process, for a job split by
    torchrun); after a bad record, start again (--resume would refuse the fixed input, which its job record does
    not name)."""
    if stopped.resumable:
        return "the rows written are kept: continue with --resume" + (" in one process (without torchrun)" * split)
    named = [str(path) for path in (job.output_path, record_path(job.output_path), job.attention_out) if path]
    named += [f"the PNGs in {job.heatmaps}"] if job.heatmaps is not None else []
    kept = f"keeps its first {stopped.kept} rows" if stopped.kept else "holds no rows yet"
    return (f"{job.output_path} {kept}: fix the input, then delete {', '.join(named[:-1])} and {named[-1]} to start "
            "again")


def run_translate(args: argparse.Namespace) -> int:
    search_flags(args, args.n_best)
    decode_workers(args)  # --workers out of its range is refused on stdin too, not only with --input
    if args.similar is not None and not args.json:
        raise ConfigError("argument --similar: only with --json (the past cases are in its objects; a file's rows "
                          "carry the nearest one as similar_action)")
    if args.input is not None:
        if args.json:
            raise ConfigError("--json: only without --input (a file's rows with trust and verdict: write a .jsonl "
                              "--output)")
        return run_translate_file(args)
    file_options = [f"--{name.replace('_', '-')}" for name in FILE_OPTIONS if getattr(args, name)]
    if file_options:
        raise ConfigError(f"{', '.join(file_options)}: only with --input (without it, alerts are read from stdin)")
    if launched_size() > 1:
        raise ConfigError("under torchrun, translate needs --input and --output (stdin is read by one process)")
    recommender = Recommender.from_checkpoint(args.model, args.device, args.quantize)
    config = search_config(args, recommender.search, args.n_best)
    for chunk in input_chunks(sys.stdin, args.batch_size):
        results = recommend_lines(recommender, chunk, config, args.batch_size,
                                  SIMILAR if args.similar is None else args.similar)
        for (number, text, fault), result in zip(chunk, results, strict=True):
            if fault:
                print(f"warning: stdin: line {number}: {fault}; empty recommendation written", file=sys.stderr)
            elif text.strip():
                if result.warning:
                    print(f"warning: stdin: line {number}: {result.warning}", file=sys.stderr)
                if result.verdict == "out-of-scope" and result.text and not args.json:  # --json says it itself
                    print(f"warning: stdin: line {number}: out of scope, {UNLIKE_HISTORY}: the recommendation "
                          f"written is {NOT_ADVICE}", file=sys.stderr)
            if args.json:
                print(json.dumps(translation_json(result), ensure_ascii=False))
            elif args.n_best == 1:
                print(result.text)
            else:
                print(n_best_line(result.candidates, args.n_best))
        sys.stdout.flush()
    return 0


def decode_workers(args: argparse.Namespace) -> int:
    """--workers, 0 = one per intra-op thread on a CPU (``seq2seq.fast.threads``)."""
    return worker_count(args.workers, resolve_device(args.device))

"""Command line: ``seq2seq train | translate | evaluate | average | ensemble | rul ... | feedback ...``.

Every error a user can cause (files, columns, options, checkpoints) is printed as one line,
``seq2seq: error: ...``, with exit status 2; no traceback. So is, last of all, an OSError no reader or
writer turned into one (a full disk). A reader that closes the output early (``| head``) ends the
command quietly, with the status of a shell tool ended by SIGPIPE.
"""

from __future__ import annotations

import os
import signal
import threading


def _interrupted_while_loading(signum: int, frame: object) -> None:
    """Ctrl-C while the commands load: nothing is written yet, so nothing to keep. Ended at once, in words: a
    KeyboardInterrupt raised inside numpy's or torch's import can leave it half-made and fail as something else."""
    os.write(2, b"seq2seq: interrupted\n")
    os._exit(130)


# Before every other import, the standard library's too: a Ctrl-C in the first tenth of a second on a busy
# machine came inside typing's import, as a traceback.
# Only the main thread may set a handler; a process started with Ctrl-C ignored (a job put in the background by a
# script's "&") keeps it ignored, as it does once loaded.
_loading = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) != signal.SIG_IGN
_before = signal.signal(signal.SIGINT, _interrupted_while_loading) if _loading else None
import argparse  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, NoReturn, TextIO  # noqa: E402

from seq2seq.cli.combine import add_combine_parsers, run_combine  # noqa: E402  torch and scikit-learn: seconds
from seq2seq.cli.evaluate import add_evaluate_parser, run_evaluate  # noqa: E402
from seq2seq.cli.feedback import add_feedback_parser, run_feedback  # noqa: E402
from seq2seq.cli.rul import add_rul_parser, run_rul  # noqa: E402
from seq2seq.cli.train import add_train_parser, run_train  # noqa: E402
from seq2seq.cli.translate import add_translate_parser, run_translate  # noqa: E402
from seq2seq.distributed import launched_size  # noqa: E402
from seq2seq.errors import ConfigError, Seq2SeqError, Terminated, shown, terminate_as_interrupt  # noqa: E402

if _loading:
    signal.signal(signal.SIGINT, signal.default_int_handler if _before is None else _before)


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, ``seq2seq: error: ...``, as every other error is (``--help``
    shows the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"seq2seq: error: {shown(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq", description="Maintenance alerts -> repair recommendations.")
    commands = parser.add_subparsers(dest="command", required=True)
    add_train_parser(commands)
    add_translate_parser(commands)
    add_evaluate_parser(commands)
    add_combine_parsers(commands)
    add_rul_parser(commands)
    add_feedback_parser(commands)
    return parser


TORCHRUN_COMMANDS = ("train", "translate", "evaluate")  # the commands that split their work over torchrun's processes
SIGPIPE_STATUS = 128 + 13  # what a shell reports for a command ended by SIGPIPE
# How torch says an allocation failed (its RuntimeError, or torch.OutOfMemoryError, a subclass): on the CPU, then CUDA.
OUT_OF_MEMORY = ("can't allocate memory", "CUDA out of memory", "out of memory")


def command() -> int:
    """The ``seq2seq`` program (its console script and ``python -m seq2seq``): ``main`` in a process of its own."""
    # What is imported by now (torch, scikit-learn: some 300,000 objects) lives as long as the process. Frozen
    # out of the collector's sight, it is no longer walked by every full collection during a job nor by the
    # interpreter's exit (docs/benchmarks.md, "Start-up and exit"), as the app freezes what it loads (App.launch).
    gc.freeze()
    status = main()
    # The process ends now. A second Ctrl-C (one after the first, as people press it) would only interrupt torch's
    # exit handlers, and Python would print their traceback under the one-line answer already given.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return status


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = {"train": run_train, "translate": run_translate, "evaluate": run_evaluate, "rul": run_rul,
           "feedback": run_feedback, "average": run_combine, "ensemble": run_combine}[args.command]
    stdout, sys.stdout = sys.stdout, NamedStdout(sys.stdout)
    try:
        if args.command not in TORCHRUN_COMMANDS and launched_size() > 1:  # each process would write the same files
            raise ConfigError(f"{args.command} runs in one process, not under torchrun ({launched_size()} "
                              f"processes); start it without torchrun ({', '.join(TORCHRUN_COMMANDS)} run under it)")
        with terminate_as_interrupt():  # SIGTERM keeps what Ctrl-C keeps (a run's last.pt, a job's rows)
            status = run(args)
        sys.stdout.flush()  # here rather than at exit, so that a full disk on stdout is reported as below
        return status
    except Seq2SeqError as err:
        return _error(str(err))
    except BrokenPipeError:
        _drop_stdout()
        return SIGPIPE_STATUS
    except OSError as err:
        return _error(_os_problem(err))
    except (MemoryError, RuntimeError) as err:
        if not isinstance(err, MemoryError) and not any(words in str(err) for words in OUT_OF_MEMORY):
            raise
        return _error(f"out of memory{f' ({shown(str(err).splitlines()[0])})' if str(err) else ''}; try smaller "
                      "model sizes (model.embed_size, encoder_hidden, decoder_hidden) or batches (train.batch_tokens, "
                      "--batch-size)")
    except KeyboardInterrupt as stop:
        split = launched_size() > 1  # torchrun: a split file job resumes in one process
        how = "; continue with --resume" + (" in one process" if split else "") if _resumable(args, split) else ""
        print(f"seq2seq: {'terminated' if isinstance(stop, Terminated) else 'interrupted'}{how}", file=sys.stderr)
        return 128 + signal.SIGTERM if isinstance(stop, Terminated) else 130
    finally:
        sys.stdout = stdout


def _resumable(args: argparse.Namespace, split: bool) -> bool:
    """Whether ``--resume`` can go on from what a stopped command left: a file job's output, a training run's
    last.pt (a recipe's: a member's). Stopped before either was written, --resume would answer "nothing to resume"."""
    if getattr(args, "input", None) is not None:
        return args.output is not None and Path(args.output).exists()
    if split or "train" not in (args.command, getattr(args, "rul_command", None)):
        return False
    folder = Path(getattr(args, "output_dir", None) or "")
    return folder != Path() and ((folder / "last.pt").is_file() or any(folder.glob("member-*/last.pt")))


class NamedStdout:
    """``sys.stdout`` whose OSErrors (a full disk, /dev/full) name it, as a write to an open file's do not."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def write(self, text: str) -> int:
        with self._named():
            return self.stream.write(text)

    def flush(self) -> None:
        with self._named():
            self.stream.flush()

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OSError(err.errno, err.strerror or str(err), "stdout") from err


def run_script(main: Callable[[], int], name: str) -> int:
    """A script's ``main()`` under the command line's rule for bad input: a Seq2SeqError (a missing file, a
    value out of range) or an OSError is one line, ``NAME: error: ...``, with exit status 2, not a traceback."""
    try:
        return main()
    except Seq2SeqError as err:
        return _error(str(err), name)
    except OSError as err:
        return _error(_os_problem(err), name)


def _error(message: str, program: str = "seq2seq") -> int:
    # One write, newline included: processes of one torchrun job share stderr, unbuffered there, and a
    # separate write of the newline let two processes' lines run together.
    # shown: a name from the command line or a file (an escape, a line break) cannot rewrite the screen, split the line
    sys.stderr.write(f"{program}: error: {shown(message)}\n")
    sys.stderr.flush()
    return 2


def _os_problem(err: OSError) -> str:
    """The line for an OSError that no reader or writer turned into a Seq2SeqError: the file (a rename's
    destination) or stdout, and the OS's reason."""
    reason = err.strerror or str(err)
    if err.filename == "stdout":
        _drop_stdout()
        return f"stdout: cannot write ({reason})"
    named = err.filename2 if err.filename2 is not None else err.filename
    if named is not None:
        return f"{shown(str(named))}: {reason}"
    return f"a file could not be read or written ({reason})"


def _drop_stdout() -> None:
    """Point stdout, which cannot be written (a closed pipe, a full disk), at /dev/null: text still buffered
    would fail again at exit, with a message of the interpreter's."""
    with contextlib.suppress(OSError, ValueError):  # not a file (a test's StringIO): nothing is flushed at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

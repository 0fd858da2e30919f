"""The errors a user can cause, each printed by the CLI as one line (no traceback).

Every message names the problem and where it is (file, line, column or key), e.g.
``data/x.tsv: line 17: expected 3 tab-separated fields, found 2``.
"""

import numbers
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Control characters (Unicode's Cc) but the tab and the line breaks a multi-line text holds: a NUL, an ANSI escape
# (ESC), a C1 code. No keyboard types them; a program's post could, and a terminal or an export would carry them.
CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder how the text after
# them reads on screen (the "Trojan Source" attack), so a stored alert or correction could show one action and hold
# another. Keyboards for right-to-left scripts type the marks U+200E/U+200F, which are accepted.
BIDI_CONTROLS = re.compile(r"[\u202a-\u202e\u2066-\u2069]")


class Seq2SeqError(Exception):
    """Base of every error caused by input the user gave (files, options, checkpoints)."""


class ConfigError(Seq2SeqError, ValueError):
    """An invalid configuration value or an unknown configuration key."""


class DataError(Seq2SeqError, ValueError):
    """A missing, unreadable or malformed data file."""


class FleetError(DataError):
    """Training engines a RUL model cannot be trained on (too few, no sensor that varies); raised without the file
    they came from, which ``seq2seq rul train`` puts in front."""


class CheckpointError(Seq2SeqError):
    """A missing, truncated, corrupt or incompatible checkpoint file."""


def shown(text: str) -> str:
    """``text`` from a user's file made safe to print in a message: every character a terminal would not
    print as itself (an ANSI escape, a carriage return, a bell, a C1 code, a bidirectional override) is
    written as its Python escape, e.g. ``\\x1b``, so a file cannot rewrite the user's screen."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` for a message, the noun plural but for one: "1 engine", "3 engines", "1,200 rows"."""
    return f"{n:,} {noun}{'s' * (n != 1)}"


def listed(names: list[str], most: int = 20) -> str:
    """``names`` for a one-line message, safe to print (``shown``): the first ``most``, then how many more (a file
    with 20,000 columns made a message of 149,000 characters)."""
    more = f", ... and {len(names) - most:,} more" if len(names) > most else ""
    return shown(", ".join(names[:most])) + more


def typed_text_fault(text: str) -> str | None:
    """Why ``text`` sent to the app is not text a person typed, with the character where it goes wrong, e.g. "holds
    a control character (U+001B) at character 4; ..."; None when it is. A lone surrogate (a JSON ``"\\ud800"``)
    is half a character that no tokenizer or UTF-8 file can take; a control character is in ``CONTROLS``, an
    override in ``BIDI_CONTROLS``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"is not valid Unicode (a lone surrogate at character {err.start + 1})"
    if control := CONTROLS.search(text):
        return (f"holds a control character (U+{ord(control.group()):04X}) at character {control.start() + 1}; "
                "tabs and line breaks are the only ones accepted")
    if bidi := BIDI_CONTROLS.search(text):
        return (f"holds a bidirectional override (U+{ord(bidi.group()):04X}) at character {bidi.start() + 1}, which "
                "would reorder how the text reads on screen")
    return None


def file_error(path: object, err: OSError) -> DataError:
    """The one-line DataError for a user's file that cannot be opened or read."""
    if isinstance(err, FileNotFoundError):
        return DataError(f"{path}: file not found")
    if isinstance(err, IsADirectoryError):
        return DataError(f"{path}: is a directory, not a file")
    return DataError(f"{path}: cannot read ({err.strerror})")


def write_error(path: object, err: OSError) -> DataError:
    """The one-line DataError for a file that cannot be written: "out.csv: cannot write (No space left on device)"."""
    return DataError(f"{path}: cannot write ({err.strerror or err})")


@contextmanager
def checkpoint_fault() -> Iterator[None]:
    """Inside the block, a ConfigError is the checkpoint's fault: re-raised as a CheckpointError, same words.

    Rebuilding a model from a file validates its stored config like a user's; a bad value there
    is a damaged or foreign checkpoint, not a wrong option.
    """
    try:
        yield
    except ConfigError as err:
        raise CheckpointError(str(err)) from None


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, ``docker stop``, a scheduler), raised as Ctrl-C is so that what Ctrl-C keeps is kept:
    a training run saves last.pt, a file job its written rows (``terminate_as_interrupt``)."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` in the main thread for the duration (elsewhere, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def whole(name: str, value: object, low: int, high: int) -> int:
    """``value``, a program's argument ``name``, as an int in [low, high]; else a one-line TypeError or ConfigError
    naming it (a float or a string failed deep in torch, and a negative count sliced lists from their end)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number, got {type(value).__name__} {str(value)[:40]!r}")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be in [{low}, {high:,}], got {value}")
    return int(value)

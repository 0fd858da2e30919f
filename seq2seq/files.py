"""The one reader of user files: bytes to lines, UTF-8 faults (a table's columns and records: ``seq2seq/tables.py``).

Every file a user hands in (a training corpus, an incident log, a C-MAPSS history) is read
through these functions, so the same fault gets the same one-line message wherever it occurs,
e.g. ``data/x.tsv: line 17: not valid UTF-8 (byte 0xe9 at column 12)``. Lines and columns are
1-based; columns count characters, as an editor does.

Formats:

- TSV: one record per physical line, fields split on tabs, no quote processing (the IANA
  text/tab-separated-values convention: MaintNet fields such as ``BOLT 1/2" LOOSE`` hold bare
  quotes, which csv quoting would swallow together with every line after them).
- CSV: standard quoting; a quoted field may hold commas, quotes and line breaks.
- JSONL: one JSON object per line (``seq2seq/jsonl.py`` reads the records from these lines).

Blank lines are not records in any of them. A lone carriage return (old Mac files) ends a line for
``read_lines`` and in TXT incident logs, as on stdin, however big the file (``bounded_lines``); in a CSV,
TSV or JSONL incident log, which the batch job writes back row by row, it is refused in words that say so
(``LONE_CR``).

Every reader first looks at the file's opening bytes (``check_text``): UTF-16 or UTF-32 text and binary
files are refused with one line saying so, rather than read as garbage. No line is held in memory beyond
``MAX_LINE_BYTES`` (``bounded_lines``), so an endless line cannot exhaust memory: a whole-file reader
refuses a longer line, the batch job flags it as a bad row. Text from a file that goes into a message
is passed through ``errors.shown``, so its control bytes cannot reach the terminal.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import AnyStr, BinaryIO, ClassVar

from seq2seq.errors import DataError, file_error

BYTES_KEPT = "surrogateescape"  # codec error handler: a byte that is not UTF-8 is read and written back as it was
KEPT_BYTES = re.compile("[\udc80-\udcff]+")  # how BYTES_KEPT reads such bytes: one lone surrogate each
MAX_LINE_BYTES = 1 << 17  # csv's own field limit: far beyond any alert, and it bounds the memory of a line
SNIFF_BYTES = 4096  # opening bytes looked at to tell text from UTF-16/32 and binary files
LONE_CR = "a carriage return not followed by a line feed: old Mac line endings? save it with LF or CRLF endings"
_WIDE_MARKS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),  # UTF-32 LE's mark starts
               (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))  # like UTF-16 LE's: test it first


def open_binary(path: Path, mode: str) -> BinaryIO:
    """``path`` opened in binary ``mode``; an OSError becomes a one-line DataError."""
    try:
        return path.open(mode)
    except OSError as err:
        raise file_error(path, err) from None


def check_folder_path(path: Path, needed_by: str | None = None) -> None:
    """A one-line DataError when a file lies where the folder ``path`` or one of its parents must be; the message
    names what needs the folder (``needed_by``: "--output out/x.csv"), else ``path`` itself."""
    nearest = next((p for p in (path, *path.parents) if p.exists()), None)  # the first that exists
    if nearest is not None and not nearest.is_dir():
        raise DataError(f"{nearest}: is a file, but {needed_by or path} needs it to be a folder")


def make_folder(path: Path) -> None:
    """Create the folder ``path`` and its parents; a file in the way is a one-line DataError naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        check_folder_path(path)
        raise
    except OSError as err:  # read-only, no permission: it cannot be made, which "cannot read" would not say
        raise DataError(f"{path}: cannot create the folder ({err.strerror or err})") from None


@contextlib.contextmanager
def held_folder(path: Path, what: str = "training run") -> Iterator[None]:
    """The folder ``path`` (made if need be; removed at the end if it was made and stayed empty), locked for this
    process while the block runs, so that two runs never write one folder at once: two ``train`` into one
    --output-dir interleaved their metrics.jsonl and an --overwrite deleted the other's files as it wrote them.
    The second is a one-line refusal. The lock is the kernel's, on the folder itself: it ends with the process,
    however that ends, and leaves no file behind."""
    made = not path.exists()
    make_folder(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataError(f"{path}: another {what} is writing there now; wait for it to end, or choose another "
                            "--output-dir") from None
        yield
    finally:
        os.close(fd)
        if made:
            with contextlib.suppress(OSError):
                path.rmdir()  # only if empty: a run refused before it wrote anything leaves no folder


def utf8_fault(raw: bytes, err: UnicodeDecodeError) -> str:
    """What is wrong with a line that is not UTF-8: "not valid UTF-8 (byte 0xff at column 5)"."""
    column = len(raw[: err.start].decode("utf-8", "replace")) + 1
    return f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {column})"


def decode_line(raw: bytes) -> tuple[str, str]:
    """(text, fault) of one line: "" when it is UTF-8; else ``utf8_fault``'s words, and the text keeps each
    bad byte (``BYTES_KEPT``), so a row flagged for its bytes is written back with them, never altered."""
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as err:
        return raw.decode("utf-8", BYTES_KEPT), utf8_fault(raw, err)


def escaped(text: str) -> str:
    """``text`` with each byte kept that is not UTF-8 (``BYTES_KEPT``) written as its escape, ``caf\\xe9``: text
    that a UTF-8 or JSON writer takes, no byte lost. Only a row flagged for its bytes holds one."""
    return text.encode("utf-8", BYTES_KEPT).decode("utf-8", "backslashreplace")


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks (a job record's or a training run's proof of its input)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_text(path: Path, head: bytes) -> None:
    """DataError when ``head``, the opening bytes of ``path``, shows it is not UTF-8 text: a UTF-16 or
    UTF-32 byte-order mark, or a NUL byte (no text format here holds one: UTF-16 without a mark, or a
    binary file such as a checkpoint or a spreadsheet)."""
    for mark, encoding in _WIDE_MARKS:
        if head.startswith(mark):
            raise DataError(f"{path}: {encoding} text (byte-order mark {mark.hex(' ')}), not UTF-8; save it as UTF-8")
    if b"\0" in head:
        line = head.count(b"\n", 0, head.index(b"\0")) + 1
        raise DataError(f"{path}: not UTF-8 text (a NUL byte on line {line}: UTF-16 without a byte-order mark, "
                        "or a binary file)")


@dataclass(frozen=True)
class LongLine:
    """A line over ``MAX_LINE_BYTES``, read in pieces and dropped; whether it holds an odd number of quotes
    tells a CSV reader whether a quoted field is open after it."""

    odd_quotes: bool
    FAULT: ClassVar[str] = f"line longer than {MAX_LINE_BYTES} bytes"

    def fault(self) -> str:
        return f"{self.FAULT}; not read"


def bounded_lines(file: BinaryIO, limit: int = MAX_LINE_BYTES, lone_cr: bool = False) -> Iterator[bytes | LongLine]:
    """Physical lines of ``file`` with their endings; a line over ``limit`` bytes (its ending aside) comes as
    a LongLine, its bytes read ``limit`` at a time and dropped, so memory stays bounded on an endless line.

    ``lone_cr``: a lone carriage return ends a line too (old Mac files). A yielded line may then hold several
    (``line_pieces`` splits them), each at most ``limit`` bytes: a file with no LF at all is still read in lines,
    not taken for one over-long line, however big it is."""
    ends = (b"\n", b"\r") if lone_cr else b"\n"
    rest = b""  # bytes read past a lone CR, not yet yielded (with lone_cr)
    while raw := (rest if rest.endswith(b"\n") else rest + file.readline(limit + 1 - len(rest))):
        rest = b""
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
        elif lone_cr and b"\r" in raw:  # no LF in it: the lines up to its last CR are whole, the rest starts one
            cut = raw.rindex(b"\r") + 1
            rest = _after_cr(file, raw[cut:])
            yield raw[:cut]
        else:
            quotes = raw.count(b'"')
            while piece := file.readline(limit):
                if lone_cr and b"\r" in piece:
                    cut = piece.index(b"\r") + 1
                    piece, rest = piece[:cut], _after_cr(file, piece[cut:])
                quotes += piece.count(b'"')
                if piece.endswith(ends):
                    break
            yield LongLine(quotes % 2 == 1)


def _after_cr(file: BinaryIO, rest: bytes) -> bytes:
    """The bytes read after a carriage return, ``rest``, without the LF of a CRLF; when the CR was the last byte
    read, the next byte is read to tell a CRLF cut in two from a lone CR."""
    return (rest or file.readline(1)).removeprefix(b"\n")


def split_lines(text: AnyStr) -> list[AnyStr]:
    """``text`` cut at every line end, the ends dropped: LF, CRLF or a lone carriage return (old Mac files), as in
    Python's universal newlines and on stdin, and nothing else (``str.splitlines`` would also cut at U+2028, form
    feeds and the like, which a line of a log keeps inside it)."""
    cr, lf = ("\r", "\n") if isinstance(text, str) else (b"\r", b"\n")
    return text.replace(cr + lf, lf).replace(cr, lf).split(lf)


def line_pieces(raw: bytes) -> list[bytes]:
    """The lines of one line ``raw`` of ``bounded_lines``, without their endings (``split_lines``)."""
    return split_lines(raw.removesuffix(b"\n").removesuffix(b"\r"))


def read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 file without their endings (LF, CRLF or a lone CR; a BOM is dropped); a bad byte or
    a line over ``MAX_LINE_BYTES`` is a DataError."""
    with open_binary(path, "rb") as file:
        try:
            check_text(path, file.peek(SNIFF_BYTES)[:SNIFF_BYTES])
            lines: list[str] = []
            for raw in bounded_lines(file, lone_cr=True):
                if isinstance(raw, LongLine):
                    raise DataError(f"{path}: line {len(lines) + 1}: {raw.fault()}")
                for piece in line_pieces(raw if lines else raw.removeprefix(codecs.BOM_UTF8)):
                    try:
                        lines.append(piece.decode("utf-8"))
                    except UnicodeDecodeError as err:
                        raise DataError(f"{path}: line {len(lines) + 1}: {utf8_fault(piece, err)}") from None
        except OSError as err:
            raise file_error(path, err) from None
    return lines


def given_twice(paths: list[str]) -> str | None:
    """The first of ``paths`` that names a file an earlier one names (``./a.pt`` and ``a.pt`` alike), or None: one
    model given twice would be counted, loaded or decoded twice."""
    seen: set[Path] = set()
    for path in paths:
        if (resolved := Path(path).resolve()) in seen:
            return path
        seen.add(resolved)
    return None

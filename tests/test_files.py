"""The one reader of user files (seq2seq/files.py): lines read in bounded memory whatever their endings, and JSON
lines that a reader of lines would split differently from JSON."""

from __future__ import annotations

import errno
import io
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seq2seq.cli.translate import input_chunks
from seq2seq.errors import DataError
from seq2seq.files import (
    BYTES_KEPT,
    KEPT_BYTES,
    LONE_CR,
    MAX_LINE_BYTES,
    LongLine,
    bounded_lines,
    escaped,
    line_pieces,
    make_folder,
    read_lines,
    split_lines,
)
from seq2seq.jsonl import json_record
from seq2seq.tables import choose_column

OLD_MAC_LOG = b"".join(b"alert %d pump low\r" % n for n in range(2 * MAX_LINE_BYTES // 16))  # no LF at all


def lines_read(data: bytes, limit: int, lone_cr: bool) -> list[bytes | None]:
    """The lines ``bounded_lines`` gives, split by ``line_pieces`` when a lone CR ends lines; None for a long one."""
    found: list[bytes | None] = []
    for raw in bounded_lines(io.BytesIO(data), limit, lone_cr):
        if isinstance(raw, LongLine):
            found.append(None)
        else:
            found.extend(line_pieces(raw) if lone_cr else [raw.removesuffix(b"\n")])
    return found


def lines_meant(data: bytes, limit: int, lone_cr: bool) -> list[bytes | None]:
    """The lines of ``data`` ending at LF (and with ``lone_cr`` at CR or CRLF; else a CR is part of its line),
    those over ``limit`` bytes as None."""
    lines = re.split(rb"\r\n|\r|\n" if lone_cr else rb"\n", data)
    lines = lines[:-1] if lines[-1] == b"" else lines  # the last line's ending ends no further line
    return [None if len(line) > limit else line for line in lines]


@given(st.lists(st.sampled_from([b"a", b"b", b'"', b"\r", b"\n", b"\r\n"]), max_size=40).map(b"".join),
       st.integers(1, 8), st.booleans())
def test_bounded_lines_splits_as_the_endings_say_and_flags_exactly_the_long_lines(data, limit, lone_cr):
    assert lines_read(data, limit, lone_cr) == lines_meant(data, limit, lone_cr)


@given(st.text(st.sampled_from("a\u00e9\r\n\x0c\x1c\u2028\u0085"), max_size=30))
def test_text_and_its_bytes_split_into_the_same_lines_as_universal_newlines_read_them(text):
    universal = io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8", newline=None).read()
    assert split_lines(text) == universal.split("\n")  # only LF, CRLF and CR end lines; U+2028, FF, NEL do not
    assert split_lines(text.encode()) == [line.encode() for line in split_lines(text)]


def test_a_file_of_old_mac_lines_over_the_line_limit_is_read_line_by_line():
    assert len(OLD_MAC_LOG) > MAX_LINE_BYTES
    meant = [line.decode() for line in OLD_MAC_LOG.split(b"\r")[:-1]]
    assert lines_read(OLD_MAC_LOG, MAX_LINE_BYTES, True) == [line.encode() for line in meant]


def test_read_lines_splits_a_big_old_mac_file_as_a_small_one(tmp_path):
    path = tmp_path / "alerts.src"
    path.write_bytes(OLD_MAC_LOG)
    assert read_lines(path) == OLD_MAC_LOG.decode().split("\r")[:-1]


def test_stdin_splits_a_big_old_mac_stream_as_a_small_one():
    stream = io.TextIOWrapper(io.BytesIO(OLD_MAC_LOG), encoding="utf-8")
    lines = [line for chunk in input_chunks(stream, 1000) for line in chunk]
    assert [(text, fault) for _, text, fault in lines] == [(line, "") for line in OLD_MAC_LOG.decode().split("\r")[:-1]]


@pytest.mark.parametrize("line", ['{"source": "pump low",\r"id": 1}', '{"source": "pump low"}\r{"source": "fan"}',
                                  '{"source": "pump low"}\r '])
def test_a_json_line_with_a_lone_carriage_return_is_refused_as_old_mac_line_endings(line):
    with pytest.raises(DataError) as caught:
        json_record(line + "\n", "x.jsonl: line 3")
    assert str(caught.value) == f"x.jsonl: line 3: {LONE_CR}"


@pytest.mark.parametrize("line", ['{"source": "pump low"}\r\n', '{"source": "pump low"}\r', ' {"a": [1,\t2]} \n'])
def test_a_json_line_ending_in_crlf_or_a_cr_or_spaced_with_tabs_is_read(line):
    assert json_record(line, "x.jsonl: line 1") is not None


def unescaped(text: str) -> bytes:
    """The bytes ``text`` stands for by the documented escape rule: each ``\\xNN`` one byte, the rest UTF-8."""
    return re.sub(rb"\\x([0-9a-f]{2})", lambda kept: bytes.fromhex(kept.group(1).decode()), text.encode("utf-8"))


@given(st.binary(max_size=40).filter(lambda data: b"\\" not in data))
def test_escaped_text_is_utf8_and_gives_back_every_byte_of_a_line_read_with_its_bytes_kept(data):
    text = escaped(data.decode("utf-8", BYTES_KEPT))
    assert unescaped(text) == data  # text.encode("utf-8") raises on a byte left unescaped
    assert not KEPT_BYTES.search(text)


def test_a_json_line_not_utf8_is_read_with_its_bytes_kept_as_a_line_of_utf8_is():
    record = json_record('{"caf\udce9": "pump \udcff low", "n": [1]}\n', "x.jsonl: line 1")
    assert record == {"caf\udce9": "pump \udcff low", "n": [1]}


@pytest.mark.parametrize("escape", ["\\ud800", "\\udce9"])
def test_a_json_line_not_utf8_that_also_escapes_half_a_character_is_refused_as_a_utf8_one_is(escape):
    with pytest.raises(DataError) as caught:
        json_record(f'{{"source": "caf\udce9 {escape}"}}\n', "x.jsonl: line 2")
    assert str(caught.value).startswith(f"x.jsonl: line 2: the escape '{escape}' is half of a character")


def test_a_column_named_with_spaces_around_it_is_found_as_a_header_s_name_is():
    assert choose_column(["id", "source"], " source ", ("source",), "log.csv", "column") == "source"


def test_a_column_two_headers_match_when_case_is_ignored_is_refused_not_the_first_taken():
    with pytest.raises(DataError, match=r"^log.csv: columns Source, source all read as 'SOURCE' when case is "
                                        r"ignored; give the column's name exactly$"):
        choose_column(["Source", "source", "id"], "SOURCE", ("source",), "log.csv", "column")
    assert choose_column(["Source", "source"], "source", ("source",), "log.csv", "column") == "source"  # exact


def test_a_folder_that_cannot_be_made_is_said_to_be_so_not_unreadable(tmp_path, monkeypatch):
    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(DataError, match=r"^.*/ro/sub: cannot create the folder \(Read-only file system\)$"):
        make_folder(tmp_path / "ro" / "sub")

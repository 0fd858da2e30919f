"""JSON Lines records, as the data readers take them: one JSON object per line, each checked.

A line that is not a JSON object the readers accept (``jsontext.parse_json``), that repeats a key, that holds
half a character (a lone surrogate escape) or a lone carriage return is a DataError naming the line; a blank
line is skipped. Training pairs (``corpus.py``) and incident logs (``serving/incident_log.py``) read them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path

from seq2seq.errors import DataError
from seq2seq.files import KEPT_BYTES, LONE_CR
from seq2seq.jsontext import JsonFault, parse_json
from seq2seq.tables import check_distinct_names


def json_type(value: object) -> str:
    """How an error message names a JSON value's type: "an object", "a number", "null", ..."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def json_records(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, dict, str]]:
    """(line number, object, the line) for every non-blank JSON line; a line that is not a JSON object
    (``json_record``) is a DataError."""
    for number, line in enumerate(lines, 1):
        record = json_record(line, f"{path}: line {number}")
        if record is not None:
            yield number, record, line


def json_record(line: str, where: str) -> dict | None:
    """The JSON object on one ``line``, None for a blank line; ``where`` names the line in a DataError for one
    that is not a JSON object (``parse_json``), holds a lone surrogate or a lone carriage return (which JSON
    takes for a space, and a reader of lines for a line break)."""
    if not line.strip():
        return None
    if "\r" in line.rstrip("\r\n"):
        raise DataError(f"{where}: {LONE_CR}")
    try:
        record = parse_json(line, partial(distinct_keys, where=where))
    except JsonFault as err:
        raise DataError(f"{where}: invalid JSON ({err.words})") from None
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, found {json_type(record)}")
    _check_escapes(line, record, where)
    return record


def _check_escapes(line: str, record: dict, where: str) -> None:
    """DataError when a line's object holds a lone surrogate, written as an escape such as ``\\ud800``: half of a
    character, no text; it could be neither translated nor written back as UTF-8. Bytes that are not UTF-8, kept
    as they were (``files.KEPT_BYTES``), are no escape: that row is flagged already (``files.decode_line``)."""
    if KEPT_BYTES.search(line):
        record = json.loads(KEPT_BYTES.sub("?", line))  # they lie in strings (JSON tokens are ASCII): still JSON
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        raise DataError(f"{where}: the escape {err.object[err.start]!a} is half of a character (a lone "
                        "surrogate), not text") from None


def distinct_keys(pairs: list[tuple[str, object]], where: str) -> dict:
    """A JSON object whose keys are distinct: json would keep the last of two equal keys without a word."""
    check_distinct_names([key for key, _ in pairs], where, "key")
    return dict(pairs)


def string_value(record: dict, key: str) -> tuple[str | None, str]:
    """(text, problem) of ``record[key]``: null reads as "", a missing key or a non-string is a problem."""
    if key not in record:
        return None, f"no key {key!r}"
    value = record[key]
    if value is not None and not isinstance(value, str):
        return None, f"{key!r} must be a string, found {json_type(value)}"
    return value or "", ""

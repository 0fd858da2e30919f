"""Reading a ``--config`` JSON file: its sections, each an object of one record's fields (seq2seq/config.py).

What a user gets wrong in such a file is refused in one line naming the file: a section the command does
not read (``rul`` given to ``seq2seq train``), a key or section given twice (json would keep the last
without a word), an unknown name where a field takes one of a few (``check_names``), text that is not
UTF-8 or not JSON. A byte-order mark is allowed, as in data files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seq2seq.errors import ConfigError, file_error, shown
from seq2seq.files import SNIFF_BYTES, check_text, decode_line
from seq2seq.jsontext import JsonFault, parse_json

SECTION_NAMES = ("model", "train", "tokenizer", "search", "rul")


def load_config_file(path: str | Path, reads: tuple[str, ...] = SECTION_NAMES,
                     command: str = "this command") -> dict[str, dict[str, Any]]:
    """Read a JSON config file with optional sections ``model``, ``train``, ``tokenizer``, ``search``, ``rul``;
    a section that ``command`` does not read (it ``reads`` the others) is a ConfigError, not ignored.

    A byte-order mark is allowed, as in data files; a key given twice is a ConfigError (json would keep
    the last without a word). NaN and Infinity are read, for the range check to name their field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: config file not found" if isinstance(err, FileNotFoundError)
                          else str(file_error(path, err))) from None
    check_text(path, raw[:SNIFF_BYTES])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        number, fault = next((n, decode_line(line)[1]) for n, line in enumerate(raw.split(b"\n"), 1)
                             if decode_line(line)[1])
        raise ConfigError(f"{path}: line {number}: {fault}") from None
    try:
        data = parse_json(text, _ConfigObject, standard=False)
    except JsonFault as err:
        line = f" line {err.line}:" if err.line is not None else ""
        raise ConfigError(f"{path}:{line} invalid JSON ({err.words})") from None
    unknown = sorted(set(data) - set(SECTION_NAMES)) if isinstance(data, dict) else []
    if not isinstance(data, dict) or unknown:
        found = f" (unknown section {shown(repr(unknown[0]))})" if unknown else ""
        raise ConfigError(f"{path}: expected an object with sections {', '.join(sorted(SECTION_NAMES))}{found}")
    unread = [name for name in data if name not in reads]
    if unread:
        raise ConfigError(f"{path}: section {unread[0]!r} is not read by {command} (it reads "
                          f"{', '.join(map(repr, reads))})")
    if data.twice:
        raise ConfigError(f"{path}: section {data.twice!r} appears twice")
    for name, section in data.items():
        if isinstance(section, _ConfigObject) and section.twice:
            raise ConfigError(f"{path}: {name}: key {section.twice!r} appears twice")
    return data


class _ConfigObject(dict):
    """An object of a config file that remembers the first key given twice in it (``twice``), to be named
    with its section once the whole file is read."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.twice, seen = None, set()
        for key, _ in pairs:
            if key in seen:
                self.twice = key
                break
            seen.add(key)


def check_names(values: dict[str, Any], names: dict[str, tuple[str, ...]], where: str) -> None:
    """ConfigError naming ``where`` for the first text in ``values`` that is not one of its field's ``names``:
    found as the file is read, rather than by the module that uses the name, which cannot say where it was set."""
    for field, valid in names.items():
        value = values.get(field)
        if isinstance(value, str) and value not in valid:
            raise ConfigError(f"{where}: unknown {field} {shown(value)!r}; valid: {', '.join(valid)}")

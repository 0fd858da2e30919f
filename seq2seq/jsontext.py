"""JSON text as the project reads it, from data files (JSONL) and config files alike.

``json.loads`` accepts what strict JSON readers refuse and fails in ways no user can act on: NaN and
Infinity, numbers beyond the float range (written back as Infinity), whole numbers of more digits than
Python converts (a ValueError) and nesting deep enough to exhaust the stack (a RecursionError).
``parse_json`` turns each into a ``JsonFault`` whose words say which, and where when it can.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable

MAX_JSON_DEPTH = 100  # arrays and objects in one another: beyond any record, well within the recursion that
# json needs to read and to write a value back


class JsonFault(ValueError):
    """Text that is not JSON the readers accept: ``words`` say why, ``line`` (1-based, None if unknown) where."""

    def __init__(self, line: int | None, words: str) -> None:
        super().__init__(words)
        self.line, self.words = line, words


class _Refused(Exception):
    """A token json would read that the readers refuse (``token``: its text, to find its line)."""

    def __init__(self, words: str, token: str) -> None:
        super().__init__(words)
        self.words, self.token = words, token


def parse_json(text: str, object_pairs_hook: Callable[[list[tuple[str, object]]], object],
               standard: bool = True) -> object:
    """``text`` read as JSON, or a JsonFault: a syntax error; a whole number of more digits than Python
    converts; nesting deeper than MAX_JSON_DEPTH; and when ``standard``, the tokens NaN and Infinity and
    numbers beyond the float range, which strict JSON readers refuse and json would write back as them."""
    hooks: dict[str, Callable[[str], object]] = {"parse_int": _whole_number}
    if standard:
        hooks.update(parse_float=_finite_number, parse_constant=_no_constant)
    try:
        value = json.loads(text, object_pairs_hook=object_pairs_hook, **hooks)
    except json.JSONDecodeError as err:
        raise JsonFault(err.lineno, f"{err.msg} at column {err.colno}") from None
    except _Refused as err:
        raise JsonFault(text.count("\n", 0, max(0, text.find(err.token))) + 1, err.words) from None
    except RecursionError:
        value = None  # nested beyond what json can read at this depth of the stack: the same fault
    else:
        if _nesting(value) <= MAX_JSON_DEPTH:
            return value
    raise JsonFault(None, f"arrays or objects nested more than {MAX_JSON_DEPTH} deep")


def _whole_number(token: str) -> int:
    limit = sys.get_int_max_str_digits()
    digits = len(token.lstrip("-"))
    if limit and digits > limit:
        raise _Refused(f"a number of {digits} digits; at most {limit}", token)
    return int(token)


def _finite_number(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _Refused(f"the number {token[:40]} is beyond the float range, at most 1.8e308", token)
    return value


def _no_constant(token: str) -> float:
    raise _Refused(f"{token} is not a JSON number; strict JSON readers refuse it", token)


def _nesting(value: object) -> int:
    """How deep arrays and objects nest in ``value`` (a number or string: 0), found without recursion."""
    depth, level = 0, [value]
    while containers := [item for item in level if isinstance(item, (dict, list))]:
        depth += 1
        level = [child for item in containers for child in (item.values() if isinstance(item, dict) else item)]
    return depth

"""Loops compiled by numba at their first call: numba is imported then, not when this package is, so that a
command that never calls one does not pay for it: the import, reading each loop from numba's cache next to
its module, or compiling it the first time on a machine (figures: docs/trust.md, "One compiled loop")."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps


def compiled(function: Callable) -> Callable:
    """``function``, compiled at its first call (no Python objects inside, the interpreter's lock released)."""
    @cache
    def build() -> Callable:
        from numba import njit
        return njit(cache=True, nogil=True)(function)

    @wraps(function)
    def call(*args):
        return build()(*args)
    return call

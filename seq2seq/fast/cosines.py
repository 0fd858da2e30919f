"""Dot products of sparse unit vectors, with the same bits as plain loops over them.

A vector here is a row of ``Rows``, its n-grams in its own order, and a sum "in its order" adds the terms
left to right, as a loop over it would. The products of a batch's answers with the actions of their past
cases (``seq2seq.agreement``) are one loop compiled by numba (``best_dots``), which sums each product so
(tests/test_trust.py holds it to plain loops).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seq2seq.fast.compiled import compiled


@dataclass(frozen=True)
class Rows:
    """Vectors as CSR rows, each in its vector's order (not sorted by column)."""

    indptr: np.ndarray  # (V + 1,)
    columns: np.ndarray  # (E,)
    values: np.ndarray  # (E,)

    def __len__(self) -> int:
        return len(self.indptr) - 1


@compiled
def best_dots(past_indptr: np.ndarray, past_columns: np.ndarray, past_values: np.ndarray, new_indptr: np.ndarray,
              new_columns: np.ndarray, new_values: np.ndarray, which: np.ndarray, starts: np.ndarray,
              others: np.ndarray, grams: int) -> np.ndarray:
    """For each item i, the highest dot product, at most 1 (0 without any), of vector ``which[i]`` with the past
    vectors ``others[starts[i]:starts[i + 1]]``. Vectors below the number of past rows are past rows, the rest
    new rows (which[i] - that number); every column is below ``grams``. Each product is summed over
    the shorter vector's n-grams in its order (``which[i]``'s when as long), as a loop over the shorter dict."""
    past = past_indptr.size - 1
    found = np.zeros(which.size)
    mine = np.zeros(grams)  # the item's vector by n-gram
    theirs = np.zeros(grams)  # a past vector by n-gram, while it is the longer
    for i in range(which.size):
        if which[i] < past:
            columns, values = past_columns, past_values
            start, end = past_indptr[which[i]], past_indptr[which[i] + 1]
        else:
            columns, values = new_columns, new_values
            start, end = new_indptr[which[i] - past], new_indptr[which[i] - past + 1]
        for entry in range(start, end):
            mine[columns[entry]] = values[entry]
        best = 0.0
        for other in others[starts[i]:starts[i + 1]]:
            first, last = past_indptr[other], past_indptr[other + 1]
            total = 0.0
            if last - first < end - start:
                for entry in range(first, last):
                    total += past_values[entry] * mine[past_columns[entry]]
            else:
                for entry in range(first, last):
                    theirs[past_columns[entry]] = past_values[entry]
                for entry in range(start, end):
                    total += values[entry] * theirs[columns[entry]]
                for entry in range(first, last):
                    theirs[past_columns[entry]] = 0.0
            best = max(best, total)
        found[i] = min(1.0, best)
        for entry in range(start, end):
            mine[columns[entry]] = 0.0
    return found

"""Dot products of sparse unit vectors, computed faster with the same bits: exact sums over chosen pairs in a
stated order (``Places``, ``sum_in_order``). ``seq2seq.agreement`` uses them to compare a batch's answers with
the actions of their past cases.

A vector here is a {column: weight} dict or a row of ``Rows``; its order is the dict's (the row's), and a
sum "in its order" adds the terms left to right (``left_to_right``) as a loop over the dict would, so that
results equal the dict loops they replace to the last bit (tests/test_trust.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from itertools import chain
from operator import add

import numpy as np

ARRAYS_FROM = 8  # vectors per call from which arrays are faster than plain loops (NumPy's fixed cost per call)


@dataclass(frozen=True)
class Rows:
    """Vectors as CSR rows, each in its vector's order (not sorted by column)."""

    indptr: np.ndarray  # (V + 1,)
    columns: np.ndarray  # (E,)
    values: np.ndarray  # (E,)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def row(self, v: int) -> Rows:
        """Vector v alone."""
        start, end = self.indptr[v], self.indptr[v + 1]
        return Rows(np.array([0, end - start]), self.columns[start:end], self.values[start:end])

    def take(self, rows: np.ndarray) -> Rows:
        """The vectors ``rows`` (R,), in that order."""
        offsets, _ = segments(self.indptr, rows)
        lengths = self.indptr[rows + 1] - self.indptr[rows]
        return Rows(np.concatenate(([0], np.cumsum(lengths))), self.columns[offsets], self.values[offsets])

    def as_dict(self, v: int) -> dict[int, float]:
        """Vector v as a {column: weight} dict, in its order."""
        start, end = self.indptr[v], self.indptr[v + 1]
        return dict(zip(self.columns[start:end].tolist(), self.values[start:end].tolist(), strict=True))

    def __add__(self, other: Rows) -> Rows:
        """These vectors, then ``other``'s."""
        return Rows(np.concatenate((self.indptr, self.indptr[-1] + other.indptr[1:])),
                    np.concatenate((self.columns, other.columns)), np.concatenate((self.values, other.values)))


def left_to_right(terms: Iterable[float]) -> float:
    """0.0 plus each term in turn, as NumPy's ``add.accumulate`` and ``bincount`` add them. Not ``sum``: from
    Python 3.12 it compensates the rounding of floats, and its last bit no longer matches the arrays'."""
    return reduce(add, terms, 0.0)


def shorter_dot(vector: dict[int, float], other: dict[int, float]) -> float:
    """The dot product summed over the shorter vector's n-grams in its order (``vector``'s when as long),
    as ``seq2seq.memory``'s arrays sum each product (``sum_in_order``)."""
    if len(other) < len(vector):
        vector, other = other, vector
    return left_to_right(w * other.get(j, 0.0) for j, w in vector.items())


def csr_rows(vectors: list[dict[int, float]]) -> Rows:
    """{column: weight} dicts as rows, float64."""
    lengths = [len(vector) for vector in vectors]
    return Rows(np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))),
                np.fromiter(chain.from_iterable(vectors), np.int64, sum(lengths)),
                np.fromiter(chain.from_iterable(map(dict.values, vectors)), np.float64, sum(lengths)))


class Places:
    """Where each n-gram stands in each of some vectors: ``at(v, j)`` is 1 + j's place in vector v's order,
    0 where v lacks j; ``weights`` (V, W) by place, column 0 zero, so that weights[v, at(v, j)] is v's
    weight of j. Only the n-grams some vector holds get a column (B x F would mostly be zeros to write)."""

    def __init__(self, vectors: Rows, grams: int) -> None:
        lengths = np.diff(vectors.indptr)
        holder = np.repeat(np.arange(len(vectors)), lengths)
        place = np.arange(1, len(holder) + 1) - np.repeat(vectors.indptr[:-1], lengths)
        held = np.zeros(grams, dtype=bool)
        held[vectors.columns] = True
        union = np.flatnonzero(held)
        self.compact = np.full(grams, len(union))  # (F,) n-gram -> its column here; the last, all 0, if none holds it
        self.compact[union] = np.arange(len(union))
        self.table = np.zeros((len(vectors), len(union) + 1), dtype=np.int32)  # (V, held n-grams + 1)
        self.table[holder, self.compact[vectors.columns]] = place
        self.weights = np.zeros((len(vectors), int(lengths.max(initial=0)) + 1))  # (V, W)
        self.weights[holder, place] = vectors.values

    def at(self, vector: np.ndarray, columns: np.ndarray) -> np.ndarray:
        return self.table[vector, self.compact[columns]]


def segments(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of ``rows``' entries in a CSR layout, row after row, and the row number (in ``rows``) of each."""
    starts, stored = indptr[rows], indptr[rows + 1] - indptr[rows]
    offsets = np.repeat(starts - np.cumsum(stored) + stored, stored) + np.arange(stored.sum())
    return offsets, np.repeat(np.arange(rows.size), stored)


def sum_in_order(places: Places, vector: np.ndarray, count: int,
                 owner: np.ndarray, columns: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each of ``count`` products, sum over its vector's n-grams in that vector's order of vector weight x
    the stored value (0 where none is stored); ``vector`` (count,) names the vector of each product and
    ``owner``, ``columns``, ``values`` its stored entries. Left to right, as ``left_to_right`` adds."""
    width = places.weights.shape[1]
    terms = np.zeros((count, width))  # (C, W): the stored value of each of the vector's n-grams, in its order
    terms.ravel()[owner * width + places.at(vector[owner], columns)] = values  # float32 -> float64 exactly
    terms[:, 0] = 0.0  # place 0 took the stored n-grams the vector lacks
    terms *= places.weights[vector]
    return np.add.accumulate(terms, axis=1)[:, -1]  # accumulate: strictly left to right

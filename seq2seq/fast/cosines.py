"""Cosines of sparse unit vectors, computed faster with the same bits: nearly exact upper bounds on many
cosines at once (``CosineBounds``), and exact sums over chosen pairs in a stated order (``Places``, ``sum_in_order``).
``seq2seq.memory`` uses them to find a batch's nearest past cases without scoring every case.

A vector here is a {column: weight} dict or a row of ``Rows``; its order is the dict's (the row's), and a
sum "in its order" adds the terms left to right (``left_to_right``) as a loop over the dict would, so that
results equal the dict loops they replace to the last bit (tests/test_trust.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from itertools import chain
from operator import add

import numpy as np
import torch
from scipy.sparse import csr_matrix

ARRAYS_FROM = 8  # vectors per call from which arrays are faster than plain loops (NumPy's fixed cost per call)
BOUND_SLACK = 1e-4  # added to each bound: the float32 sums' rounding (about 1e-5) stays far inside

# torch 2.11 warns of "memory errors" at a process's first sparse tensor, even one built with
# check_invariants=False as below (2.13 does not): a translate job on the GPU machine printed it on stderr.
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled", category=UserWarning)


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


def runs(starts: list[int], rows: list[int], *arrays: np.ndarray) -> tuple[list[np.ndarray], list[int]]:
    """What ``segments`` reads, copied as runs: the entries of ``rows`` in each of ``arrays`` (laid out by the
    CSR offsets ``starts``), row after row, and each row's count. Slices copy faster than a gather through
    index arrays when rows are long and the cache is cold (docs/trust.md, the UI's one alert)."""
    spans = [(starts[row], starts[row + 1]) for row in rows]
    joined = [np.concatenate([array[start:end] for start, end in spans]) if spans else array[:0] for array in arrays]
    return joined, [end - start for start, end in spans]


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


def largest(bounds: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The columns of the ``n`` largest values of each row of ``bounds`` (B, C), as (B, n), and the
    next largest value (B,); C > n. (torch's top-k: half the time of NumPy's argpartition on long rows.)"""
    values, columns = torch.from_numpy(bounds).topk(n + 1, dim=1)  # (B, n + 1) each, largest first
    return columns[:, :n].numpy(), values[:, n].numpy()


class CosineBounds:
    """Upper bounds on the cosines of query vectors with every past alert, nearly exact, for a whole batch.

    A query shares some n-gram with nearly every past alert, but most of those shared entries belong to
    a few n-grams held by many alerts ("re", "ed "). Those ``head`` n-grams are kept as a dense block, so
    their part of every cosine is one matrix product; the rest, held by few alerts each, are summed
    through their postings. Both in float32, whose rounding (about 1e-5 over a few hundred terms) the
    slack covers: each bound is at least the exact cosine and within about 2 x BOUND_SLACK of it.
    """

    def __init__(self, alerts, head: int) -> None:  # alerts: (U, F) sparse, nonnegative
        by_column = alerts.tocsc().astype(np.float32)
        held = np.diff(by_column.indptr)  # (F,) alerts holding each n-gram
        self.head = np.argsort(-held, kind="stable")[:head]  # (H,) the n-grams held by most alerts
        self.place = np.full(alerts.shape[1], -1)  # (F,) n-gram -> its row in the dense block, -1 in the tail
        self.place[self.head] = np.arange(len(self.head))
        self.dense = torch.from_numpy(np.ascontiguousarray(by_column[:, self.head].toarray().T))  # (H, U)
        tail = by_column.T.tocsr(copy=True)  # (F, U): each n-gram's postings
        tail.data[np.repeat(self.place >= 0, held)] = 0.0
        tail.eliminate_zeros()
        self.tail = tail  # (F, U): the postings of the tail n-grams, the head's left empty
        self.slack = BOUND_SLACK

    def __call__(self, queries: Rows) -> np.ndarray:
        """Query vectors -> bounds (B, U), each at least the exact cosine."""
        indptr, columns, values = queries.indptr, queries.columns, queries.values.astype(np.float32)
        place = self.place[columns]
        in_head = place >= 0
        tail = csr_matrix((np.where(in_head, 0.0, values), columns, indptr), shape=(len(queries), self.tail.shape[0]))
        # A query holds about one in eight of the head n-grams: its head part as a sparse row, times the dense
        # block, is half the time of the dense product. torch's product, not NumPy's: it runs on the threads the
        # caller gave torch (one per decoding worker), where OpenBLAS would wake its own pool on every core and
        # spin there between calls, which doubled the look-up's CPU time on 2 cores (docs/trust.md).
        owner = np.repeat(np.arange(len(queries)), np.diff(indptr))[in_head]
        order = np.lexsort((place[in_head], owner))  # coalesced: by query, then by n-gram
        rows, grams, weights = owner[order], place[in_head][order], values[in_head][order]
        head = torch.sparse_coo_tensor(torch.from_numpy(np.stack((rows, grams))), torch.from_numpy(weights),
                                       (len(queries), len(self.head)), is_coalesced=True,
                                       check_invariants=False)  # (B, H), valid as built
        bounds = torch.sparse.mm(head, self.dense).numpy()  # (B, U)
        bounds += (tail @ self.tail).toarray()
        bounds += self.slack
        return bounds

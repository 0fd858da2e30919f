"""Cosines of sparse unit vectors, computed faster with the same bits: upper bounds on many cosines from
a low-rank projection (``CosineBounds``), and exact sums over chosen pairs in a stated order (``sum_in_order``).
``seq2seq.memory`` uses them to find a batch's nearest past cases without scoring every case.

A vector here is a {column: weight} dict; its order is the dict's, and a sum "in its order" adds the
terms left to right as Python's ``sum`` over the dict would, so that results equal the dict loops they
replace to the last bit (tests/test_trust.py).
"""

from __future__ import annotations

from itertools import chain

import numpy as np
import torch
from scipy.sparse import csr_matrix
from sklearn.decomposition import TruncatedSVD

BOUND_SLACK = 1e-4  # added to each bound: the float32 product's rounding (about 1e-6) stays far inside


def in_order(vectors: list[dict[int, float]], grams: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each n-gram stands in each vector: places (V, F), 1 + its place in the vector's order (0:
    absent), and weights (V, W) by place, column 0 zero, so that weights[v, places[v, j]] is v's weight of j."""
    lengths = np.fromiter(map(len, vectors), np.int64, len(vectors))
    total = int(lengths.sum())
    holder = np.repeat(np.arange(len(vectors)), lengths)
    place = np.arange(1, total + 1) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    places = np.zeros((len(vectors), grams), dtype=np.int32)
    places[holder, np.fromiter(chain.from_iterable(vectors), np.int64, total)] = place
    weights = np.zeros((len(vectors), int(lengths.max(initial=0)) + 1))
    weights[holder, place] = np.fromiter(chain.from_iterable(map(dict.values, vectors)), np.float64, total)
    return places, weights


def csr_rows(vectors: list[dict[int, float]], dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectors as CSR rows (indptr, columns, values), each row in its vector's order (not sorted by column)."""
    lengths = [len(vector) for vector in vectors]
    return (np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))),
            np.fromiter(chain.from_iterable(vectors), np.int64, sum(lengths)),
            np.fromiter(chain.from_iterable(map(dict.values, vectors)), dtype, sum(lengths)))


def segments(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of ``rows``' entries in a CSR layout, row after row, and the row number (in ``rows``) of each."""
    starts, stored = indptr[rows], indptr[rows + 1] - indptr[rows]
    offsets = np.repeat(starts - np.cumsum(stored) + stored, stored) + np.arange(stored.sum())
    return offsets, np.repeat(np.arange(rows.size), stored)


def sum_in_order(places: np.ndarray, weights: np.ndarray, vector: np.ndarray, count: int,
                  owner: np.ndarray, columns: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each of ``count`` products, sum over its vector's n-grams in that vector's order of vector weight x
    the stored value (0 where none is stored); ``vector`` (count,) names the vector of each product and
    ``owner``, ``columns``, ``values`` its stored entries. Left to right, as Python's sum adds."""
    width = weights.shape[1]
    terms = np.zeros((count, width))  # (C, W): the stored value of each of the vector's n-grams, in its order
    terms.ravel()[owner * width + places[vector[owner], columns]] = values  # float32 -> float64 exactly
    terms[:, 0] = 0.0  # place 0 took the stored n-grams the vector lacks
    terms *= weights[vector]
    return np.add.accumulate(terms, axis=1)[:, -1]  # accumulate: strictly left to right


class CosineBounds:
    """Upper bounds on the cosines of unit query vectors with every past alert, from a rank-r projection.

    With an orthonormal basis P, q.m = (qP).(mP) + q'.m', q' and m' the parts outside P, and
    |q'.m'| <= |q'| |m'| (Cauchy-Schwarz). P is the past alerts' truncated SVD, which holds most of their
    length, so the bounds are tight: few cases reach the k-th best exact cosine, and only those are scored.
    """

    def __init__(self, alerts, rank: int) -> None:  # alerts: (U, F) sparse, rows of unit length or zero
        # Randomized: it always returns (ARPACK may fail to converge on some corpus), and any orthonormal
        # basis gives valid bounds; a good one only makes them tighter.
        basis = TruncatedSVD(rank, algorithm="randomized", random_state=0).fit(alerts).components_  # (r, F)
        projected = alerts @ basis.T  # (U, r)
        rest = np.sqrt(np.clip(1.0 - (projected ** 2).sum(1), 0.0, None))  # (U,) |m'|
        self.basis = np.ascontiguousarray(basis.T, dtype=np.float32)  # (F, r)
        # [mP, |m'|, slack] per alert, so that one product with [qP, |q'|, 1] gives every bound
        self.alerts = np.vstack([projected.T, rest, np.full(len(rest), BOUND_SLACK)]).astype(np.float32)  # (r+2, U)

    def __call__(self, queries: list[dict[int, float]]) -> np.ndarray:
        """Query vectors of unit length ({column: weight}) -> bounds (B, U), each at least the exact cosine."""
        indptr, columns, values = csr_rows(queries, np.float32)
        rows = csr_matrix((values, columns, indptr), shape=(len(queries), self.basis.shape[0]))
        extended = np.ones((len(queries), self.basis.shape[1] + 2), dtype=np.float32)  # (B, r+2)
        extended[:, :-2] = rows @ self.basis  # the query's n-grams' rows of the basis, summed
        extended[:, -2] = np.sqrt(np.clip(1.0 - np.einsum("br,br->b", extended[:, :-2], extended[:, :-2]), 0.0, None))
        # torch's product, not NumPy's: it runs on the threads the caller gave torch (one per decoding
        # worker), where OpenBLAS would wake its own pool on every core and spin there between calls,
        # which doubled the look-up's CPU time on 2 cores (docs/trust.md, "Cost of the look-up").
        return torch.from_numpy(extended).matmul(torch.from_numpy(self.alerts)).numpy()

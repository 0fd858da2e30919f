"""The case memory's search as a compiled loop (numba): each query's cosine with every past alert through the
postings of its n-grams, and its k best cases.

One pass reads each posting once and keeps the k best as it goes. NumPy needed many passes through
temporary arrays the size of a query's postings; float32 bounds on every cosine, with exact cosines for a
shortlist, were faster for a batch but still slower than this loop, for one alert and for a batch, for small
memories and large (figures: docs/trust.md, "One compiled loop").
Each alert's terms are added in the query's n-gram order, as plain loops over dicts
would add them, so every path gives the same bits. ``nogil``: a decoding worker's thread runs on meanwhile.
"""

from __future__ import annotations

import numpy as np

from seq2seq.fast.compiled import compiled


@compiled
def nearest(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, query_indptr: np.ndarray,
            columns: np.ndarray, values: np.ndarray, alert_of: np.ndarray, distinct: int,
            k: int) -> tuple[np.ndarray, np.ndarray]:
    """For each query (CSR rows ``query_indptr``, ``columns``, ``values``: its n-grams in its order), the ``k``
    pairs (B, k) whose alert ``alert_of[pair]`` is most similar, ties in pair order, and those similarities
    (B, k): cosines clipped to [0, 1]. The postings: n-gram j is held by the ``distinct`` past alerts
    ``indices[indptr[j]:indptr[j + 1]]`` with the weights ``data`` there. k is at most the number of pairs."""
    queries = query_indptr.size - 1
    pairs = np.full((queries, k), -1)
    similarities = np.full((queries, k), -1.0)  # below any clipped cosine: the first k pairs fill each row
    cosines = np.empty(distinct)
    for b in range(queries):
        cosines[:] = 0.0
        for q in range(query_indptr[b], query_indptr[b + 1]):
            weight = values[q]
            for entry in range(indptr[columns[q]], indptr[columns[q] + 1]):
                cosines[indices[entry]] += data[entry] * weight  # float32 data widened exactly
        best, kept = pairs[b], similarities[b]
        for pair in range(alert_of.size):
            similarity = min(max(cosines[alert_of[pair]], 0.0), 1.0)
            if similarity > kept[k - 1]:  # strictly: an equal one came earlier and stays ahead
                place = k - 1
                while place > 0 and kept[place - 1] < similarity:
                    kept[place], best[place] = kept[place - 1], best[place - 1]
                    place -= 1
                kept[place], best[place] = similarity, pair
    return pairs, similarities

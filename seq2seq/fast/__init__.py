"""Faster equivalents, the same functions computed faster: dropout for the CPU, mixed precision, int8 weights,
embedding tables folded for decoding, one-core decoding workers, and the case memory's search, vectors and
agreement as loops compiled by numba. Nothing here imports the translator core (only ``seq2seq.errors`` and the
names of ``seq2seq.config_checks``, leaves): the core uses these, and a folded or quantised model is built from a
trained one.
"""

"""Faster equivalents, the same functions computed faster: tanh and dropout for the CPU, mixed precision,
int8 weights, embedding tables folded for decoding, one-core decoding workers, the case memory's search and its
agreement's dot products as loops compiled by numba. Nothing here imports the translator core: the core uses
these, and a folded or quantised model is built from a trained one.
"""

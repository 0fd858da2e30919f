"""Faster equivalents, the same functions computed faster: tanh and dropout for the CPU, mixed precision,
int8 weights, embedding tables folded for decoding, one-core decoding workers, the case memory's search as a
compiled loop and exact dot products in a stated order. Nothing here imports
the translator core: the core uses these, and a folded or quantised model is built from a trained one.
"""

"""Maintenance-explanation generator: sensor alerts in, repair recommendations out.

A GRU encoder-decoder with switchable cross-attention (Bahdanau additive; Luong dot, general,
concat) translates alert phrases into recommendations and returns, for every output, the
alignment matrix between the alert's pieces and the recommendation's pieces.
"""

__version__ = "0.1.0"

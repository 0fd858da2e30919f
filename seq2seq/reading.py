"""How a translator reads one alert: normalised, cut into pieces, truncated to the model's limit, and
without the pieces its vocabulary does not know. ``Recommender.encode`` is the one caller, so every path
(CLI, batch job, UI, evaluation) reads an alert the same way."""

from __future__ import annotations

import re
from typing import NamedTuple

from seq2seq.data import truncate_source
from seq2seq.errors import CONTROLS
from seq2seq.tokenizer import UNK_ID, WORD_START, Tokenizer
from seq2seq.words import word_spans

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class Source(NamedTuple):
    """One alert as the encoder reads it: ``ids`` (EOS last) are those of ``pieces`` at ``places``. No ids: no
    recommendation, and ``warning`` says why; with ids, a warning says what was cut."""

    ids: list[int]
    pieces: list[str]
    warning: str | None = None
    places: tuple[int, ...] = ()
    text: str = ""  # what the case memory compares: the alert, or what is read of it when a piece is not
    unfamiliar: bool = False  # words, none of them known: unlike every past alert, whatever the case memory


def read_alert(tokenizer: Tokenizer, alert: str, limit: int) -> Source:
    """``alert`` as the encoder reads it, at most ``limit`` pieces (cut with a warning)."""
    if lone := LONE_SURROGATE.search(alert):  # half a character (a JSON "\\ud800"), which SentencePiece cannot take
        return Source([], [], f"not valid Unicode (a lone surrogate at character {lone.start() + 1}); no "
                      "recommendation")
    ids, pieces = tokenizer.encode_source(alert), tokenizer.source_pieces(alert)
    if len(ids) <= 1:  # a line of control characters (a NUL from a broken pipe) reads as spaces: say so
        control = CONTROLS.search(alert)
        return Source([], [], "empty alert" + (f": only control characters (U+{ord(control.group()):04X} first), read "
                                               "as spaces" if control else ""))
    if all(i == UNK_ID or not piece.strip(WORD_START) for i, piece in zip(ids[:-1], pieces, strict=False)):
        # A guess from nothing; and since the vocabulary holds every character of the training alerts, out of scope
        return Source([], [], "no word of the alert is known to the model; no recommendation", unfamiliar=True)
    places, warning = read_places(ids, pieces), None  # of the whole alert: a word cut short is read as it would be
    if len(ids) > limit:
        warning = f"alert truncated from {len(ids)} to {limit} pieces (the model's limit)"
        ids, pieces = truncate_source(ids, limit), truncate_source(pieces, limit)
        places = [*(i for i in places if i < limit - 1), limit - 1]
    if len(places) == len(pieces):
        return Source(ids, pieces, warning, tuple(places), alert)
    text = "".join(pieces[i] for i in places[:-1]).replace(WORD_START, " ").strip()  # for the case memory
    return Source([ids[i] for i in places], pieces, warning, tuple(places), text)


def read_places(ids: list[int], pieces: list[str]) -> list[int]:
    """Places of the pieces the encoder reads: all but the unknown ones (UNK_ID), and the word marker of a word whose
    other pieces are all unknown ("▁", "?"). The vocabulary holds every character of the training alerts, so the
    encoder never learned what an unknown piece means: reading one changed the answer and made it look surer
    ("EGT high ?" confident where "EGT high" is uncertain). Its word stays on the heatmap, with no attention."""
    places = []
    for _, start, end in word_spans(pieces):
        known = [i for i in range(start, end) if ids[i] != UNK_ID]
        if len(known) == end - start or any(pieces[i] != WORD_START for i in known):
            places.extend(known)
    return places

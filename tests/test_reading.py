"""How a translator reads an alert: the pieces its vocabulary does not know are not read."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.reading import read_places
from seq2seq.tokenizer import EOS_ID, EOS_PIECE, UNK_ID, WORD_START
from seq2seq.words import word_spans

KNOWN, UNKNOWN = 7, UNK_ID
# (piece, known?): a word-start marker alone, a marked piece, or an unmarked one
piece = st.tuples(st.sampled_from([WORD_START, WORD_START + "ab", "cd", "?"]), st.booleans())


@given(st.lists(piece, min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_every_known_piece_is_read_but_the_marker_of_a_word_with_nothing_else_known(drawn):
    pieces = [WORD_START + drawn[0][0].lstrip(WORD_START) or WORD_START] + [p for p, _ in drawn[1:]] + [EOS_PIECE]
    ids = [KNOWN if known else UNKNOWN for _, known in drawn] + [EOS_ID]
    places = read_places(ids, pieces)
    assert places == sorted(set(places)) and places[-1] == len(pieces) - 1  # in order, EOS read
    assert all(ids[i] != UNK_ID for i in places)
    for _, start, end in word_spans(pieces):
        word = range(start, end)
        unread = [i for i in word if i not in places]
        if all(ids[i] != UNK_ID for i in word):
            assert not unread  # a word the model knows is read whole
        else:
            something_known = any(ids[i] != UNK_ID and pieces[i] != WORD_START for i in word)
            expected = [i for i in word if ids[i] == UNK_ID or (not something_known and pieces[i] == WORD_START)]
            assert unread == expected


def test_an_alert_the_model_knows_wholly_is_read_whole():
    pieces = [WORD_START + "egt", WORD_START, "#3", WORD_START + "hi", "gh", EOS_PIECE]
    assert read_places([5, 4, 9, 6, 8, EOS_ID], pieces) == list(range(6))


def test_a_word_of_unknown_characters_is_not_read_and_a_known_word_loses_only_its_unknown_piece():
    pieces = [WORD_START + "egt", WORD_START, "?", WORD_START, "h", "ï", "gh", EOS_PIECE]
    assert read_places([5, 4, UNK_ID, 4, 6, UNK_ID, 8, EOS_ID], pieces) == [0, 3, 4, 6, 7]

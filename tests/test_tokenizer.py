import dataclasses
import io
import unicodedata

import pytest
import sentencepiece as spm
import torch
from hypothesis import given
from hypothesis import strategies as st
from support import TINY_PAIRS, TINY_TOKENIZER_CONFIG

from seq2seq.config import TokenizerConfig
from seq2seq.errors import CheckpointError, ConfigError, DataError
from seq2seq.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, normalize

SOURCES = [source for source, _ in TINY_PAIRS]
TARGETS = [target for _, target in TINY_PAIRS]
TARGET_WORDS = sorted({word for target in TARGETS for word in target.split()})


def assert_one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert message and "\n" not in message
    return message


# normalize


@given(st.text(), st.booleans(), st.booleans())
def test_normalize_is_idempotent(text, lowercase, uppercase):
    once = normalize(text, lowercase, uppercase)
    assert normalize(once, lowercase, uppercase) == once


@given(st.text())
def test_normalize_leaves_single_spaces_and_no_control_characters(text):
    result = normalize(text)
    assert result == result.strip()
    assert "  " not in result
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in result)
    assert result.split() == " ".join(result.split()).split()


@given(st.text())
def test_normalize_leaves_no_format_character(text):
    assert not any(unicodedata.category(char) == "Cf" for char in normalize(text))


@pytest.mark.parametrize("typed", ["\ufeffegt high", "egt high\u200b", "e\u00adgt high", "egt\u2060 high",
                                   "\u202aegt high\u202c", "egt\u200d high\u200e"])
def test_invisible_format_characters_read_as_the_text_a_technician_sees(typed):
    assert normalize(typed) == "egt high"


def test_normalize_applies_nfkc_turns_controls_into_spaces_and_lowercases_only_when_asked():
    text = "  ＰＵＭＰ\tVibration\r\nHIGH\x00 ﬁlter  "
    assert normalize(text) == "PUMP Vibration HIGH filter"
    assert normalize(text, lowercase=True) == "pump vibration high filter"
    assert normalize(text, uppercase=True) == "PUMP VIBRATION HIGH FILTER"


def test_a_turkish_keyboards_dotted_and_dotless_i_read_as_i_once_case_is_folded():
    """"PHİ A BİT HİGH" lowered was "phi̇ a bi̇t hi̇gh" (i and a combining dot, pieces the model never saw): a
    confident answer became uncertain, and "phı a bıt hıgh" out of scope."""
    for typed in ("PHİ A BİT HİGH", "phı a bıt hıgh", "PHI A BIT HIGH"):
        assert normalize(typed, lowercase=True) == "phi a bit high"
        assert normalize(typed, uppercase=True) == "PHI A BIT HIGH"
    assert normalize("phı a bıt", lowercase=False) == "phı a bıt"  # as typed when case is kept


# training and state


def test_special_ids_are_fixed_at_training(tokenizer):
    processor = spm.SentencePieceProcessor(model_proto=tokenizer.state_dict()["source_model"])
    assert (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()) == (0, 1, 2, 3)
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert processor.id_to_piece(EOS_ID) == "</s>"


def test_training_is_deterministic():
    first = Tokenizer.train(SOURCES, TARGETS, TINY_TOKENIZER_CONFIG).state_dict()
    second = Tokenizer.train(SOURCES, TARGETS, TINY_TOKENIZER_CONFIG).state_dict()
    assert first == second


def test_vocab_size_is_an_upper_bound_not_an_error_for_a_small_corpus():
    tokenizer = Tokenizer.train(SOURCES, TARGETS, TokenizerConfig(vocab_size=5000))
    assert 4 < tokenizer.src_vocab_size <= 5000


def test_rows_over_sentencepieces_default_4192_bytes_still_build_the_vocabulary():
    long = [" ".join(["pump vibration high"] * 300) + f" zeta{k}ζ" for k in range(3)]  # about 6,000 bytes each
    tokenizer = Tokenizer.train(long, ["replace pump"] * 3, TokenizerConfig(vocab_size=60))
    assert UNK_ID not in tokenizer.encode_source("ζ")  # found only in the long rows
    alongside = Tokenizer.train([*SOURCES, *long], [*TARGETS, "x", "y", "z"], TINY_TOKENIZER_CONFIG)
    assert UNK_ID not in alongside.encode_source("ζ")


def test_state_dict_holds_only_plain_types_and_survives_a_weights_only_load(tokenizer):
    state = tokenizer.state_dict()

    def plain(value):
        if isinstance(value, dict):
            return all(isinstance(key, str) and plain(item) for key, item in value.items())
        return isinstance(value, (str, int, bool, bytes, float))

    assert plain(state)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True) == state


@pytest.mark.parametrize("joint", [True, False])
def test_state_dict_round_trip_gives_identical_encodings(joint):
    config = dataclasses.replace(TINY_TOKENIZER_CONFIG, joint=joint)
    original = Tokenizer.train(SOURCES, TARGETS, config)
    restored = Tokenizer.from_state_dict(original.state_dict())
    assert restored.config == config
    assert (restored.src_vocab_size, restored.tgt_vocab_size) == (original.src_vocab_size, original.tgt_vocab_size)
    for source, target in [*TINY_PAIRS, ("UNSEEN Alert ##", "Unseen Advice ##")]:
        assert restored.encode_source(source) == original.encode_source(source)
        assert restored.encode_target(target) == original.encode_target(target)


BROKEN_STATES = {
    "not a dict": lambda state: [state],
    "wrong version": lambda state: dict(state, version=99),
    "unknown config key": lambda state: dict(state, config={**state["config"], "colour": "red"}),
    "config not a dict": lambda state: dict(state, config="joint"),
    "model missing": lambda state: {key: value for key, value in state.items() if key != "source_model"},
    "model not bytes": lambda state: dict(state, source_model="abc"),
    "corrupt bytes": lambda state: dict(state, source_model=b"not a sentencepiece model"),
    "truncated bytes": lambda state: dict(state, source_model=state["source_model"][:100]),
    "separate without target": lambda state: dict(state, config={**state["config"], "joint": False}),
}


@pytest.mark.parametrize("case", BROKEN_STATES)
def test_malformed_state_is_a_one_line_checkpoint_error(tokenizer, case):
    state = BROKEN_STATES[case](tokenizer.state_dict())
    with pytest.raises(CheckpointError) as error:
        Tokenizer.from_state_dict(state, where="model.pt")
    assert assert_one_line(error).startswith("model.pt: ")


def test_separate_vocabularies_train_one_model_per_side():
    sources = ["PUMP HOT", "PUMP COLD", "FAN HOT"]
    targets = ["cool the pump", "warm the pump", "cool the fan"]
    config = TokenizerConfig(vocab_size=40, joint=False, lowercase_source=False)
    tokenizer = Tokenizer.train(sources, targets, config)
    state = tokenizer.state_dict()
    assert state["source_model"] != state["target_model"]
    assert all(UNK_ID not in tokenizer.encode_source(text) for text in sources)
    assert all(UNK_ID not in tokenizer.encode_target(text) for text in targets)
    assert UNK_ID in tokenizer.encode_source("warm")  # W and R are target-only letters
    assert UNK_ID in tokenizer.encode_target("PUMP")


def test_too_small_vocabulary_is_a_config_error_naming_what_is_needed():
    with pytest.raises(ConfigError) as error:
        Tokenizer.train(SOURCES, TARGETS, TokenizerConfig(vocab_size=8))
    assert "vocab_size 8" in assert_one_line(error)


def test_unknown_model_type_is_a_config_error_listing_the_valid_ones():
    with pytest.raises(ConfigError) as error:
        Tokenizer.train(SOURCES, TARGETS, TokenizerConfig(model_type="bytes"))
    assert "unigram, bpe, char, word" in assert_one_line(error)


def test_training_on_only_empty_text_is_a_data_error():
    with pytest.raises(DataError):
        Tokenizer.train([" ", "\t"], ["", "\n"], TINY_TOKENIZER_CONFIG)


@pytest.mark.parametrize("model_type", ["bpe", "char", "word"])
def test_every_model_type_trains_and_encodes(model_type):
    tokenizer = Tokenizer.train(SOURCES, TARGETS, dataclasses.replace(TINY_TOKENIZER_CONFIG, model_type=model_type))
    assert tokenizer.decode_target(tokenizer.encode_target(TARGETS[0])) == TARGETS[0]


# encoding and decoding


def test_sources_are_lowercased_only_when_configured_and_targets_keep_their_case(tokenizer):
    assert tokenizer.config.lowercase_source and tokenizer.source_case == "lower"
    assert tokenizer.encode_source("PUMP  Vibration HIGH") == tokenizer.encode_source("pump vibration high")
    assert tokenizer.normalize_target("Check PUMP") == "Check PUMP"
    assert tokenizer.encode_target("Pump") != tokenizer.encode_target("pump")


CAPITALS = ["PUMP HOT", "PUMP COLD", "FAN HOT", "FAN VIBRATION HIGH"], ["COOL PUMP", "WARM PUMP", "COOL FAN",
                                                                       "CHECK FAN"]


@pytest.mark.parametrize("joint", [True, False])
def test_a_vocabulary_of_capitals_reads_every_alert_in_capitals(joint):
    # A logbook written in capitals (MaintNet) has no lower-case piece: "fan hot" typed by a technician
    # must read as "FAN HOT", not as unknown spans.
    tokenizer = Tokenizer.train(*CAPITALS, TokenizerConfig(vocab_size=40, joint=joint, lowercase_source=False))
    assert tokenizer.source_case == "upper"
    for alert in ("fan hot", "Fan Hot", "fAN hOT"):
        assert tokenizer.encode_source(alert) == tokenizer.encode_source("FAN HOT")
        assert UNK_ID not in tokenizer.encode_source(alert)
        assert tokenizer.source_pieces(alert) == tokenizer.source_pieces("FAN HOT")
    assert tokenizer.normalize_target("check fan") == "check fan"  # targets keep the case they are given


def test_a_vocabulary_of_lower_case_pieces_reads_alerts_in_lower_case_and_a_mixed_one_as_written():
    lower = [[text.lower() for text in side] for side in CAPITALS]
    tokenizer = Tokenizer.train(*lower, TokenizerConfig(vocab_size=40, lowercase_source=False))
    assert tokenizer.source_case == "lower"
    assert tokenizer.encode_source("FAN HOT") == tokenizer.encode_source("fan hot")
    mixed = Tokenizer.train([*CAPITALS[0], *lower[0]], [*CAPITALS[1], *lower[1]],
                            TokenizerConfig(vocab_size=60, lowercase_source=False))
    assert mixed.source_case is None
    assert mixed.normalize_source("Fan HOT") == "Fan HOT"
    assert mixed.encode_source("FAN HOT") != mixed.encode_source("fan hot")


def test_encode_source_ends_in_eos_and_has_no_bos(tokenizer):
    for source in SOURCES:
        ids = tokenizer.encode_source(source)
        assert ids[-1] == EOS_ID and ids.count(EOS_ID) == 1
        assert BOS_ID not in ids and PAD_ID not in ids and UNK_ID not in ids


def test_encode_target_has_neither_bos_nor_eos(tokenizer):
    for target in TARGETS:
        ids = tokenizer.encode_target(target)
        assert ids and not {BOS_ID, EOS_ID, PAD_ID, UNK_ID} & set(ids)


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))
def test_source_pieces_align_with_ids_and_end_in_eos(tokenizer, text):
    ids = tokenizer.encode_source(text)
    pieces = tokenizer.source_pieces(text)
    assert len(pieces) == len(ids)
    assert pieces[-1] == "</s>"


@given(st.lists(st.sampled_from(TARGET_WORDS), min_size=1, max_size=8), st.sampled_from([" ", "  ", "\t", " \n "]))
def test_decode_inverts_encode_for_in_vocabulary_text(tokenizer, words, separator):
    text = " " + separator.join(words) + "\t"
    assert tokenizer.decode_target(tokenizer.encode_target(text)) == normalize(text)


def test_decode_stops_at_the_first_eos_and_ignores_pad_and_bos(tokenizer):
    ids = tokenizer.encode_target("replace filter")
    noisy = [BOS_ID, *ids[:1], PAD_ID, *ids[1:], EOS_ID, *tokenizer.encode_target("tighten belt"), PAD_ID]
    assert tokenizer.decode_target(noisy) == "replace filter"
    assert tokenizer.decode_target(torch.tensor(noisy)) == "replace filter"


def test_target_pieces_end_in_eos_only_when_an_eos_was_present(tokenizer):
    ids = tokenizer.encode_target("replace filter")
    with_eos = tokenizer.target_pieces([BOS_ID, *ids, EOS_ID, *ids, PAD_ID])
    without_eos = tokenizer.target_pieces(ids)
    assert with_eos == [*without_eos, "</s>"]
    assert len(without_eos) == len(ids)
    assert "".join(without_eos).replace("▁", " ").strip() == "replace filter"


def test_unknown_characters_map_to_unk(tokenizer):
    assert UNK_ID in tokenizer.encode_target("Ω")
    assert "⁇" in tokenizer.decode_target(tokenizer.encode_target("replace Ω"))


@given(st.lists(st.integers(0, 200), max_size=30))
def test_decoded_targets_have_single_spaces_as_the_training_targets_had(ids):
    tokenizer = Tokenizer.train(SOURCES, TARGETS, TINY_TOKENIZER_CONFIG)
    word_start = tokenizer._target.piece_to_id("\u2581")  # a lone word-start piece: a space of its own
    text = tokenizer.decode_target([i % tokenizer.tgt_vocab_size for i in ids] + [word_start] * 2)
    assert text == " ".join(text.split())  # no space doubled, none at either end

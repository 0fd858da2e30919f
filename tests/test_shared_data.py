"""Integration tests on the real public data in ../shared/data (MaintNet, C-MAPSS sensor names).

These use ../shared beside the project and are skipped only when it is absent (a clone elsewhere).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seq2seq.catalog import SENSORS
from seq2seq.config import TokenizerConfig
from seq2seq.corpus import read_parallel
from seq2seq.tokenizer import Tokenizer, normalize

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent")


def test_maintnet_splits_read_completely_with_problem_action_columns():
    train = read_parallel(SHARED / "maintnet" / "train.tsv")
    dev = read_parallel(SHARED / "maintnet" / "dev.tsv")
    assert (len(train.examples), len(dev.examples)) == (4935, 616)
    assert train.skipped == [] and dev.skipped == []
    assert train.examples[0].line == 2  # physical line numbers: the header is line 1


def test_maintnet_tokenizer_round_trips_every_dev_target():
    train = read_parallel(SHARED / "maintnet" / "train.tsv")
    dev = read_parallel(SHARED / "maintnet" / "dev.tsv")
    config = TokenizerConfig(vocab_size=2000, lowercase_source=False)
    tokenizer = Tokenizer.train([e.source for e in train.examples], [e.target for e in train.examples], config)
    assert 1000 < tokenizer.tgt_vocab_size <= 2000
    seen = set("".join(normalize(e.source) + normalize(e.target) for e in train.examples))
    for example in dev.examples:
        target = normalize(example.target)
        if set(target) <= seen:  # characters never seen in training decode to the unknown piece
            assert tokenizer.decode_target(tokenizer.encode_target(example.target)) == target
    # The logbook is written in capitals: an alert typed in lower or title case reads as the same pieces.
    assert tokenizer.source_case == "upper"
    for example in dev.examples[:50]:
        written = tokenizer.encode_source(example.source)
        assert tokenizer.encode_source(example.source.lower()) == written
        assert tokenizer.encode_source(example.source.title()) == written


def test_catalog_sensors_are_the_cmapss_sensors_in_order():
    readme = (SHARED / "README.md").read_text(encoding="utf-8")
    listing = " ".join(readme.split("sensors 1..21:")[1].split())
    symbols = re.findall(r"(?:^|, )(\w+) ", listing)
    assert [sensor.symbol for sensor in SENSORS] == symbols

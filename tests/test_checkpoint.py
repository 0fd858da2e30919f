"""Checkpoints: an exact round trip, plain ``weights_only`` loading, one-line errors for every kind of
bad file, and atomic writes."""

from __future__ import annotations

import dataclasses
import errno
import os
import zipfile
from pathlib import Path

import pytest
import torch

from seq2seq import writing
from seq2seq.checkpoint import FORMAT_VERSION, KIND, save_checkpoint
from seq2seq.config import ModelConfig, SearchConfig, TrainConfig
from seq2seq.errors import CheckpointError, DataError
from seq2seq.model import build_model
from seq2seq.recommender import Recommender

ALERTS = ["pump vibration high", "belt worn", "compressor oil low and filter clogged", "", "fan speed low"]


def tiny_model(tokenizer, **changes):
    torch.manual_seed(0)
    config = ModelConfig(embed_size=8, encoder_hidden=8, decoder_hidden=16, attention_hidden=8,
                         src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size)
    return build_model(dataclasses.replace(config, **changes))


@pytest.fixture
def saved(tmp_path, tokenizer) -> tuple[Path, Recommender]:
    """A checkpoint of an untrained tiny model, and a recommender around the same model in memory."""
    model = tiny_model(tokenizer)
    path = tmp_path / "model.pt"
    save_checkpoint(path, model, tokenizer, TrainConfig())
    return path, Recommender(model, tokenizer)


@pytest.mark.parametrize("config", [SearchConfig(beam_size=1), SearchConfig(beam_size=3, n_best=3)],
                         ids=["greedy", "beam"])
def test_round_trip_reproduces_texts_scores_and_attention_exactly(saved, config):
    path, original = saved
    expected = original.recommend(ALERTS, config)
    loaded = Recommender.from_checkpoint(path).recommend(ALERTS, config)
    for before, after in zip(expected, loaded, strict=True):
        assert (after.alert, after.source_pieces, after.warning) == (before.alert, before.source_pieces,
                                                                     before.warning)
        assert len(after.candidates) == len(before.candidates)
        for a, b in zip(before.candidates, after.candidates, strict=True):
            assert (a.text, a.score, a.target_pieces) == (b.text, b.score, b.target_pieces)
            assert torch.equal(a.attention, b.attention)


def test_checkpoint_loads_with_weights_only_and_describes_itself(saved):
    path, original = saved
    payload = torch.load(path, weights_only=True)
    assert payload["kind"] == KIND and payload["format_version"] == FORMAT_VERSION
    assert payload["model_config"] == dataclasses.asdict(original.model.config)
    assert isinstance(payload["tokenizer"]["source_model"], bytes)
    for name, tensor in original.model.state_dict().items():
        assert torch.equal(payload["weights"][name], tensor)


# Each returns a bad checkpoint made from the good one at ``path``.


def _missing(path: Path) -> Path:
    return path.with_name("missing.pt")


def _directory(path: Path) -> Path:
    folder = path.with_name("folder.pt")
    folder.mkdir()
    return folder


def _truncated(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _random_bytes(path: Path) -> Path:
    path.write_bytes(torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0),
                                   dtype=torch.uint8).numpy().tobytes())
    return path


def _foreign_torch_file(path: Path) -> Path:
    torch.save({"a": 1}, path)
    return path


def _edited(path: Path, edit) -> Path:
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    return path


def _wrong_format_version(path: Path) -> Path:
    return _edited(path, lambda payload: payload.update(format_version=FORMAT_VERSION + 1))


def _weights_of_another_config(path: Path) -> Path:
    def edit(payload):
        config = ModelConfig(**payload["model_config"])
        other = build_model(dataclasses.replace(config, encoder_hidden=12))
        payload["weights"] = other.state_dict()

    return _edited(path, edit)


def _nan_weight(path: Path) -> Path:  # a run that diverged: every answer empty, every score NaN, "confident"
    return _edited(path, lambda payload: next(iter(payload["weights"].values())).fill_(float("nan")))


def _corrupt_tokenizer(path: Path) -> Path:
    def edit(payload):
        model = payload["tokenizer"]["source_model"]
        payload["tokenizer"]["source_model"] = model[: len(model) // 2]

    return _edited(path, edit)


def _flipped_weights(path: Path) -> Path:  # a disk or copy fault: torch loaded it, and it answered worse
    with zipfile.ZipFile(path) as archive:
        record = max(archive.infolist(), key=lambda info: info.file_size)
        stored = archive.read(record)
    data = bytearray(path.read_bytes())
    at = data.find(stored) + len(stored) // 2
    data[at:at + 100] = bytes(byte ^ 0xFF for byte in data[at:at + 100])
    flipped = path.with_name("flipped.pt")
    flipped.write_bytes(bytes(data))
    return flipped


BAD_CHECKPOINTS = {
    "missing": (_missing, "not found"),
    "directory": (_directory, "not a file"),
    "truncated": (_truncated, "truncated checkpoint ("),
    "empty": (_empty, "empty file, not a checkpoint"),
    "random-bytes": (_random_bytes, "not a checkpoint (neither a zip archive nor text)"),
    "foreign-torch-file": (_foreign_torch_file, "not a seq2seq-translator checkpoint"),
    "wrong-format-version": (_wrong_format_version, "format version"),
    "weights-of-another-config": (_weights_of_another_config, "weights do not match"),
    "corrupt-tokenizer": (_corrupt_tokenizer, "SentencePiece model is corrupt"),
    "nan-weight": (_nan_weight, "holds NaN or infinity: the checkpoint is damaged"),
    "flipped-weights": (_flipped_weights, "damaged checkpoint: its record archive/data/"),
}


@pytest.mark.parametrize("name", BAD_CHECKPOINTS)
def test_bad_checkpoint_is_a_one_line_checkpoint_error_naming_the_path(saved, name):
    make, reason = BAD_CHECKPOINTS[name]
    bad = make(saved[0])
    with pytest.raises(CheckpointError) as error:
        Recommender.from_checkpoint(bad)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{bad}: ")
    assert reason in message


def test_saving_leaves_no_temporary_file(saved):
    path, _ = saved
    assert os.listdir(path.parent) == [path.name]


def test_failed_save_keeps_the_existing_file_and_leaves_no_temporary_file(saved, tokenizer, monkeypatch):
    path, _ = saved
    before = path.read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(DataError, match=f"^{path}: cannot write \\(No space left on device\\)$"):  # one line, naming it
        save_checkpoint(path, tiny_model(tokenizer, embed_size=4), tokenizer, TrainConfig())
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == [path.name]


class Filling:
    """A file on a disk that fills after ``room`` bytes: its write fails as the OS's does (ENOSPC)."""

    def __init__(self, file, room: int) -> None:
        self.file, self.room = file, room

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


def test_a_disk_filling_inside_torch_save_is_one_line_naming_the_file_and_keeps_the_old_one(saved, tokenizer,
                                                                                            monkeypatch):
    path, _ = saved
    before, fdopen = path.read_bytes(), os.fdopen
    monkeypatch.setattr(writing.os, "fdopen", lambda fd, mode: Filling(fdopen(fd, mode), 2000))
    with pytest.raises(DataError, match=f"^{path}: cannot write \\(No space left on device\\)$"):  # not torch's
        save_checkpoint(path, tiny_model(tokenizer, embed_size=4), tokenizer, TrainConfig())  # "unexpected pos"
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == [path.name]


def test_save_replaces_an_existing_checkpoint(saved, tokenizer):
    path, _ = saved
    save_checkpoint(path, tiny_model(tokenizer, embed_size=4), tokenizer, TrainConfig())
    assert Recommender.from_checkpoint(path).model.config.embed_size == 4
    assert os.listdir(path.parent) == [path.name]

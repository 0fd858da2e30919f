"""Fine-tuning from corrections (seq2seq/finetune.py): ``seq2seq train --init-from``, on the tiny translator."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from support import TINY_PAIRS, assert_one_line_error, run_cli, trained, trained_rul, tsv

from seq2seq.checkpoint import read_checkpoint, save_atomic
from seq2seq.corpus import ParallelCorpus, read_parallel
from seq2seq.finetune import NEW_SHARE, Start
from seq2seq.recommender import Recommender
from seq2seq.serving.feedback import Feedback, FeedbackStore

CORRECTIONS = [("pump vibration high", "replace pump coupling"), ("fan speed low", "check fan motor relay")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return trained(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def corrections(tmp_path_factory) -> Path:
    """CORRECTIONS through the whole round trip: posted to a feedback database, exported by the CLI."""
    folder = tmp_path_factory.mktemp("corrections")
    store = FeedbackStore(folder / "feedback.sqlite")
    for alert, action in CORRECTIONS:
        store.add(Feedback.checked(alert, "inspect pump bearings", "wrong", action, "Ann"))
    store.add(Feedback.checked("valve leak detected", "replace valve seal", "wrong"))  # no correction: not exported
    store.close()
    output = folder / "corrections.tsv"
    assert run_cli("feedback", "export", "--db", str(folder / "feedback.sqlite"), "--output", str(output)).status == 0
    return output


def fine_tune(run, corrections: Path, output_dir: Path, *options: str):
    return run_cli("train", "--init-from", str(run.best), "--train", str(corrections), "--dev", str(run.data.dev),
                   "--output-dir", str(output_dir), "--device", "cpu", "--epochs", "1", *options)


@pytest.fixture(scope="module")
def frozen(run, corrections, tmp_path_factory):
    """A fine-tuning run whose learning rate is 0: its weights must be exactly the checkpoint's."""
    output_dir = tmp_path_factory.mktemp("frozen") / "run"
    result = fine_tune(run, corrections, output_dir, "--learning-rate", "0")
    assert result.status == 0, result.stderr
    return output_dir / "best.pt", result


def test_fine_tuning_starts_from_the_checkpoint_s_weights_tokenizer_and_configuration(run, frozen):
    before, after = read_checkpoint(run.best), read_checkpoint(frozen[0])
    assert after["model_config"] == before["model_config"]
    assert after["tokenizer"] == before["tokenizer"]
    assert after["weights"].keys() == before["weights"].keys()
    assert all(torch.equal(after["weights"][k], before["weights"][k]) for k in before["weights"])


def test_fine_tuning_learns_from_the_corrections(run, corrections, tmp_path):
    result = fine_tune(run, corrections, tmp_path / "run", "--learning-rate", "0.01")
    assert result.status == 0, result.stderr
    before, after = read_checkpoint(run.best)["weights"], read_checkpoint(tmp_path / "run" / "best.pt")["weights"]
    assert any(not torch.equal(after[k], before[k]) for k in before)


def test_the_fine_tuned_case_memory_shows_the_correction_first_and_keeps_the_old_cases(run, frozen):
    recommender = Recommender.from_checkpoint(frozen[0])
    old = Recommender.from_checkpoint(run.best).memory
    assert len(recommender.memory) == len(old) + len(CORRECTIONS)
    for alert, action in CORRECTIONS:
        top = recommender.memory.nearest([alert], 2)[0]
        assert (top[0].alert, top[0].action, top[0].similarity) == (alert, action, pytest.approx(1.0))
        assert top[1].alert == alert and top[1].action != action  # the old answer is still a past case


def test_replay_mixes_every_old_pair_in_with_the_new_ones_at_least_new_share(run, corrections):
    start = Start.load(run.best)
    new = read_parallel(corrections)
    train, cases = start.corpora(new, replay=True, log=lambda line: None)
    pairs = [(e.source, e.target) for e in train.examples]
    assert set(pairs) == {(e.source, e.target) for e in start.old} | set(CORRECTIONS)
    new_count = sum(pair in CORRECTIONS for pair in pairs)
    assert new_count / len(pairs) >= NEW_SHARE > (new_count - len(CORRECTIONS)) / (len(pairs) - len(CORRECTIONS))
    assert [(e.source, e.target) for e in cases.examples][:len(CORRECTIONS)] == CORRECTIONS


def test_no_replay_trains_on_the_new_pairs_alone_but_keeps_the_old_cases(run, corrections):
    start = Start.load(run.best)
    train, cases = start.corpora(read_parallel(corrections), replay=False, log=lambda line: None)
    assert [(e.source, e.target) for e in train.examples] == CORRECTIONS
    assert len(cases.examples) == len(CORRECTIONS) + len(start.old)


def test_a_checkpoint_without_case_memory_says_once_that_nothing_is_mixed_in(run, corrections, tmp_path):
    payload = read_checkpoint(run.best)
    del payload["memory"]
    bare = tmp_path / "bare.pt"
    save_atomic(payload, bare)
    lines = []
    train, _ = Start.load(bare).corpora(ParallelCorpus("c", read_parallel(corrections).examples, []), True,
                                        lines.append)
    assert len(train.examples) == len(CORRECTIONS)
    assert len(lines) == 1 and "no case memory" in lines[0] and "nothing is mixed in" in lines[0]


@pytest.mark.parametrize(("options", "words"), [
    (("--attention", "luong-dot"), ("--attention", "luong-dot", "bahdanau", "--init-from")),
    (("--vocab-size", "99"), ("--vocab-size", "vocab_size", "--init-from")),
    (("--no-input-feeding",), ("--no-input-feeding", "input_feeding")),
])
def test_a_setting_that_contradicts_the_checkpoint_is_a_one_line_error_naming_it(run, corrections, tmp_path,
                                                                                   options, words):
    result = fine_tune(run, corrections, tmp_path / "run", *options)
    assert_one_line_error(result, *words)
    assert not (tmp_path / "run").exists()


def test_a_config_file_that_contradicts_the_checkpoint_is_named_with_its_key(run, corrections, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"model": {"embed_size": 17}, "train": {"learning_rate": 0.5}}', encoding="utf-8")
    result = fine_tune(run, corrections, tmp_path / "run", "--config", str(config))
    assert_one_line_error(result, str(config), "model.embed_size", "17")


def test_a_config_file_that_agrees_with_the_checkpoint_is_accepted(run, corrections, tmp_path):
    result = fine_tune(run, corrections, tmp_path / "run", "--config", str(run.data.config), "--learning-rate", "0")
    assert result.status == 0, result.stderr


def test_a_checkpoint_of_another_kind_is_a_one_line_error(run, corrections, tmp_path_factory, tmp_path):
    rul = trained_rul(tmp_path_factory.getbasetemp()).output_dir / "best.pt"
    result = run_cli("train", "--init-from", str(rul), "--train", str(corrections), "--dev", str(run.data.dev),
                     "--output-dir", str(tmp_path / "run"), "--device", "cpu")
    assert_one_line_error(result, str(rul), "seq2seq-translator")


def test_no_replay_without_init_from_is_a_one_line_error(run, tmp_path):
    result = run_cli("train", "--train", str(run.data.train), "--dev", str(run.data.dev), "--output-dir",
                     str(tmp_path / "run"), "--no-replay")
    assert_one_line_error(result, "--no-replay", "--init-from")


def test_train_recognises_alert_and_action_columns(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(tsv(TINY_PAIRS[:3], header=("alert", "action")), encoding="utf-8")
    assert [(e.source, e.target) for e in read_parallel(path).examples] == list(TINY_PAIRS[:3])

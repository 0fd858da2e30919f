"""Fine-tuning from corrections (seq2seq/finetune.py): ``seq2seq train --init-from``, on the tiny translator."""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from support import TINY_PAIRS, assert_one_line_error, file_states, run_cli, trained, trained_rul, training_threads, tsv

from seq2seq.checkpoint import read_checkpoint, save_atomic
from seq2seq.config import TrainConfig
from seq2seq.corpus import Example, ParallelCorpus, read_parallel
from seq2seq.distributed import ONE_PROCESS
from seq2seq.errors import DataError
from seq2seq.finetune import BLENDS, NEW_SHARE, Learning, Start
from seq2seq.recommender import Recommender
from seq2seq.report import TrainingReport
from seq2seq.selection import Selection, score_greedy
from seq2seq.serving.feedback import Feedback
from seq2seq.serving.feedback_store import FeedbackStore
from seq2seq.tokenizer import normalize

CORRECTIONS = [("pump vibration high", "replace pump coupling"), ("fan speed low", "check fan motor cooling")]


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


def test_the_log_counts_what_is_trained_on_as_the_new_pairs_and_the_replay_not_as_the_file(run, corrections, frozen):
    """"corrections.tsv: 416 pairs" read as the file's count, which held 21 (found by a probe of the feedback loop)."""
    lines = frozen[1].stderr.splitlines()
    assert any(line.startswith(f"the new pairs of {corrections} and the replay of {run.best}: ") for line in lines)
    assert not any(line.startswith(f"{corrections}: ") and " pairs; " in line for line in lines)


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


def test_replay_mixes_the_old_pairs_of_other_alerts_in_with_the_new_ones_at_least_new_share(run, corrections):
    start = Start.load(run.best)
    new = read_parallel(corrections)
    lines = []
    train, cases, _ = start.corpora(new, replay=True, log=lines.append, max_target_length=100)
    pairs = [(e.source, e.target) for e in train.examples]
    corrected = {alert for alert, _ in CORRECTIONS}
    superseded = {(e.source, e.target) for e in start.old if e.source in corrected}
    assert superseded and "left out" in lines[-1]  # the old answers to a corrected alert are not replayed
    assert set(pairs) == {(e.source, e.target) for e in start.old} - superseded | set(CORRECTIONS)
    new_count = sum(pair in CORRECTIONS for pair in pairs)
    assert new_count / len(pairs) >= NEW_SHARE > (new_count - len(CORRECTIONS)) / (len(pairs) - len(CORRECTIONS))
    assert [(e.source, e.target) for e in cases.examples][:len(CORRECTIONS)] == CORRECTIONS


def test_the_share_learned_is_over_the_alerts_a_run_can_learn_each_counted_once(run):
    start = Start.load(run.best)
    alert, other = TINY_PAIRS[0][0], TINY_PAIRS[1][0]
    long_action = " ".join([TINY_PAIRS[0][1]] * 10)
    pieces = len(start.tokenizer.encode_target(long_action))
    new = [Example(alert, long_action, 2), Example(other, "inspect a", 3), Example(other.upper(), "inspect b", 4)]
    _, _, learn = start.corpora(ParallelCorpus("c.tsv", new, []), True, lambda line: None, pieces - 1)
    # the too-long pair is not trained on; the alert corrected two ways, in two cases, is one alert to this model
    learning = Learning.of(learn, start.tokenizer.normalize_source)
    assert learning.answers == ((other, frozenset({"inspect a", "inspect b"})),)
    either = SimpleNamespace(translate=lambda alerts, config, batch_size: ["inspect  b "] * len(alerts))
    assert learning.share(either) == 1.0  # a model gives one answer: either action is all it can learn


def test_old_answers_to_a_corrected_alert_are_left_out_whatever_its_case(run):
    start = Start.load(run.best)  # the tiny model reads alerts in lower case, as its training alerts were
    alert = TINY_PAIRS[0][0]
    old = [e for e in start.old if e.source == alert]
    lines = []
    train, _, _ = start.corpora(ParallelCorpus("c", [Example(alert.upper(), "new action", 2)], []), True, lines.append,
                                 100)
    assert old and not [e for e in train.examples if e.source == alert]
    assert (f"({len(old)} of its pairs have a new pair's alert, and are left out)" if len(old) > 1 else
            "(1 of its pairs has a new pair's alert, and is left out)") in lines[0]


def test_a_correction_too_long_to_train_on_is_named_and_leaves_its_alert_s_old_answers_in_the_replay(run):
    start = Start.load(run.best)
    alert, other = TINY_PAIRS[0][0], TINY_PAIRS[1][0]
    old = [(e.source, e.target) for e in start.old if e.source == alert]
    long_action = " ".join([TINY_PAIRS[0][1]] * 10)
    pieces = len(start.tokenizer.encode_target(long_action))
    new = [Example(alert, long_action, 2), Example(other, TINY_PAIRS[0][1], 3)]
    lines = []
    train, cases, _ = start.corpora(ParallelCorpus("c.tsv", new, []), True, lines.append, pieces - 1)
    pairs = {(e.source, e.target) for e in train.examples}
    assert old and set(old) <= pairs  # the alert keeps its old answers: its correction is not learned
    assert not [e for e in train.examples if e.source == other and e.target != TINY_PAIRS[0][1]]  # others left out
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert warnings == [f"warning: c.tsv: line 2: the action is {pieces} pieces, over train.max_target_length "
                        f"({pieces - 1}), so it is not trained on; its alert's old answers stay in the replay"]
    assert (alert, long_action) == (cases.examples[0].source, cases.examples[0].target)  # still a past case
    assert long_action not in {e.target for e in train.examples}  # named once, not dropped again x repeats
    kept = len(train.examples) - sum(e.source == other for e in train.examples)
    repeats = math.ceil(NEW_SHARE * kept / (1 - NEW_SHARE))  # sized by the one pair that is learned
    assert [line for line in lines if line.startswith("mixing")] == [
        f"mixing 1 new pair (x{repeats}) with {kept} training pairs of {run.best} (1 of its pairs has a new pair's "
        "alert, and is left out)"]


def test_corrections_all_too_long_to_train_on_are_refused_before_a_run_that_would_learn_nothing(run):
    start = Start.load(run.best)
    long_action = " ".join([TINY_PAIRS[0][1]] * 10)
    pieces = len(start.tokenizer.encode_target(long_action))
    with pytest.raises(DataError, match=rf"^c.tsv: no new pair can be learned \(each action is over "
                                        rf"train.max_target_length \({pieces - 1}\), or has characters "):
        start.corpora(ParallelCorpus("c.tsv", [Example(TINY_PAIRS[1][0], long_action, 2)], []), True,
                      lambda line: None, pieces - 1)


def test_a_correction_the_vocabulary_cannot_write_is_named_and_not_trained_on_and_the_others_are(run):
    """Trained on, it taught the model to answer "⁇ eplaced backup alarm ⁇ 55-1032" (found by a probe)."""
    start = Start.load(run.best)
    lines = []
    alert = TINY_PAIRS[1][0]
    new = [Example(TINY_PAIRS[0][0], TINY_PAIRS[1][1], 2), Example(alert, "replace part ζ-88231", 3)]
    train, cases, learn = start.corpora(ParallelCorpus("c.tsv", new, []), True, lines.append, 100)
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 1 and warnings[0].startswith("warning: c.tsv: line 3: the vocabulary of ")
    assert "cannot write the action 'replace part ζ-88231'" in warnings[0] and "not trained on" in warnings[0]
    assert "replace part ζ-88231" not in {e.target for e in train.examples}
    assert [e.line for e in learn.examples] == [2]  # what the run counts as learned
    old = {(e.source, e.target) for e in start.old if e.source == alert}
    assert old and old <= {(e.source, e.target) for e in train.examples}  # its alert keeps its old answers
    assert "replace part ζ-88231" in {e.target for e in cases.examples}  # still a past case, as the technician wrote


def test_corrections_that_disagree_about_one_alert_are_named(run):
    lines = []
    new = [Example(TINY_PAIRS[0][0], TINY_PAIRS[0][1], 2), Example(TINY_PAIRS[0][0].upper(), TINY_PAIRS[1][1], 3),
           Example(TINY_PAIRS[1][0], TINY_PAIRS[1][1], 4)]
    Start.load(run.best).corpora(ParallelCorpus("c.tsv", new, []), True, lines.append, 100)
    assert f"warning: c.tsv: corrections disagree about 1 alert ({TINY_PAIRS[0][0]!r} has 2 answers)" in lines[0]


def test_init_from_without_train_is_refused_not_a_fine_tuning_on_the_embedded_corpus(run, tmp_path):
    result = run_cli("train", "--init-from", str(run.best), "--output-dir", str(tmp_path / "run"), "--epochs", "1")
    assert_one_line_error(result, "--init-from needs --train")
    assert not (tmp_path / "run").exists()


def test_no_replay_trains_on_the_new_pairs_alone_but_keeps_the_old_cases(run, corrections):
    start = Start.load(run.best)
    train, cases, _ = start.corpora(read_parallel(corrections), replay=False, log=lambda line: None,
                                    max_target_length=100)
    assert [(e.source, e.target) for e in train.examples] == CORRECTIONS
    assert len(cases.examples) == len(CORRECTIONS) + len(start.old)


def test_a_checkpoint_without_case_memory_says_once_that_nothing_is_mixed_in(run, corrections, tmp_path):
    payload = read_checkpoint(run.best)
    del payload["memory"]
    bare = tmp_path / "bare.pt"
    save_atomic(payload, bare)
    lines = []
    train, _, _ = Start.load(bare).corpora(ParallelCorpus("c", read_parallel(corrections).examples, []), True,
                                        lines.append, 100)
    assert len(train.examples) == len(CORRECTIONS)
    notes = [line for line in lines if not line.startswith("warning: ")]  # the tiny vocabulary lacks "y" (relay)
    assert len(notes) == 1 and "no case memory" in notes[0] and "nothing is mixed in" in notes[0]


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


@pytest.mark.parametrize(("resumed", "words"), [
    ([], "from --init-from START, not none"),  # as a plain run: no replay, no blends, a memory of the corrections
    (["--init-from", "OTHER"], "not OTHER"),
    (["--init-from", "START", "--no-replay"], "with the other --no-replay setting"),
])
def test_a_fine_tuning_resumed_from_another_start_or_replay_is_refused(run, corrections, tmp_path, resumed, words):
    output_dir, other = tmp_path / "run", tmp_path / "other.pt"
    assert fine_tune(run, corrections, output_dir).status == 0
    average = run_cli("average", "--inputs", str(run.best), "--output", str(other), "--overwrite")
    assert average.status == 0, average.stderr
    given = [str(run.best) if arg == "START" else str(other) if arg == "OTHER" else arg for arg in resumed]
    words = words.replace("OTHER", str(other)).replace("START", str(run.best))
    before = file_states(output_dir / "best.pt", output_dir / "last.pt")
    result = run_cli("train", *given, "--train", str(corrections), "--dev", str(run.data.dev), "--output-dir",
                     str(output_dir), "--device", "cpu", "--epochs", "2", "--resume")
    assert result.status == 2 and result.error_lines[-1].startswith("seq2seq: error: --resume: ")  # after the mix
    assert words in result.error_lines[-1]
    assert file_states(*before) == before


def test_a_finished_fine_tuning_resumed_as_it_was_blends_and_reports_nothing_again(run, corrections, tmp_path):
    output_dir = tmp_path / "run"
    assert fine_tune(run, corrections, output_dir).status == 0
    metrics, best = (output_dir / "metrics.jsonl").read_bytes(), read_checkpoint(output_dir / "best.pt")["weights"]
    again = fine_tune(run, corrections, output_dir, "--resume")
    assert again.status == 0, again.stderr
    assert (output_dir / "metrics.jsonl").read_bytes() == metrics and "blend" not in again.stderr
    resumed = read_checkpoint(output_dir / "best.pt")["weights"]
    assert all(torch.equal(resumed[k], best[k]) for k in best)


def test_a_fine_tuning_stopped_by_sigterm_resumes_to_the_run_it_would_have_been(run, corrections, tmp_path,
                                                                                 monkeypatch):
    """SIGTERM (as timeout or a scheduler sends it) just after the first validation is logged, and a resume with the
    same flags: the run ends as the run never stopped does, bit for bit. A signal there once saved a last.pt that
    counted the weights as best.pt while best.pt was never written, and the resumed run ended without one (found in
    CI, where this test's signal landed there by chance; it now lands there every time)."""
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    real = TrainingReport.validation
    sent = []

    def logged_then_terminated(self, *args, **kwargs):
        real(self, *args, **kwargs)
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # the CLI's handler turns it into a stop that keeps last.pt

    with training_threads():
        assert fine_tune(run, corrections, whole, "--epochs", "3").status == 0
        monkeypatch.setattr(TrainingReport, "validation", logged_then_terminated)
        first = fine_tune(run, corrections, stopped, "--epochs", "3")
        monkeypatch.setattr(TrainingReport, "validation", real)
        assert (first.status, first.error_lines[-1]) == (143, "seq2seq: terminated; continue with --resume")
        assert (stopped / "best.pt").is_file()  # the first validation is the best so far, and was saved so
        resumed = fine_tune(run, corrections, stopped, "--epochs", "3", "--resume")
    assert resumed.status == 0, resumed.stderr
    metrics = stopped / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    assert [r.get("blend") for r in records] == [None] * 3 + list(BLENDS)  # each epoch and blend once
    expected = [json.loads(line) for line in (whole / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    drop = ("target_tokens_per_s", "train_seconds")  # how fast, not what
    assert [{k: v for k, v in r.items() if k not in drop} for r in records] == \
        [{k: v for k, v in r.items() if k not in drop} for r in expected]
    best, alone = read_checkpoint(stopped / "best.pt")["weights"], read_checkpoint(whole / "best.pt")["weights"]
    assert all(torch.equal(best[k], alone[k]) for k in alone)


def test_no_replay_without_init_from_is_a_one_line_error(run, tmp_path):
    result = run_cli("train", "--train", str(run.data.train), "--dev", str(run.data.dev), "--output-dir",
                     str(tmp_path / "run"), "--no-replay")
    assert_one_line_error(result, "--no-replay", "--init-from")


def test_train_recognises_alert_and_action_columns(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text(tsv(TINY_PAIRS[:3], header=("alert", "action")), encoding="utf-8")
    assert [(e.source, e.target) for e in read_parallel(path).examples] == list(TINY_PAIRS[:3])


def test_a_fine_tuning_run_prefers_corrections_learned_within_the_tolerance_then_dev_bleu():
    run = SimpleNamespace(learning=Learning.of(ParallelCorpus(Path("c.tsv"), [], []), str), state={"bleu_floor": 20.0})
    key = lambda bleu, learned: Selection.key(run, bleu, learned)  # noqa: E731
    assert key(20.5, 0.9) > key(25.0, 0.5)  # within the tolerance: more corrections learned wins
    assert key(22.0, 0.9) > key(21.0, 0.9)  # then dev BLEU
    assert key(20.0, 0.0) > key(19.9, 1.0)  # anything within beats anything that forgot more
    assert key(19.0, 0.0) > key(18.0, 1.0)  # below it, dev BLEU alone
    ordinary = SimpleNamespace(learning=None, state={})
    assert Selection.key(ordinary, 21.0, None) > Selection.key(ordinary, 20.0, None)


def test_a_fine_tuning_run_s_best_pt_is_the_validation_or_blend_that_learned_most_within_the_tolerance(
        run, corrections, tmp_path):
    result = fine_tune(run, corrections, tmp_path / "run", "--epochs", "4", "--learning-rate", "0.01")
    assert result.status == 0, result.stderr
    assert "start: dev BLEU" in result.stderr
    start = score_greedy(Recommender.from_checkpoint(run.best), read_parallel(run.data.dev))[0].bleu
    floor = start - TrainConfig().forget_tolerance
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r.get("blend") for r in records] == [None] * 4 + list(BLENDS)  # 4 epochs, then the blends
    assert all(0 <= r["learned"] <= 1 for r in records)
    ranked = [((1, r["learned"], r["dev_bleu"]) if r["dev_bleu"] >= floor else (0, r["dev_bleu"], r["learned"]), -i)
              for i, r in enumerate(records)]
    expected = records[-max(ranked)[1]]  # the first of the best: a later equal one is no improvement
    said = json.loads(result.stdout.splitlines()[-1])
    assert said["best_step"] == expected["step"]
    assert said["best_from"] == ("step" if expected.get("blend") is None else f"blend {expected['blend']:g}")
    answers = Recommender.from_checkpoint(tmp_path / "run" / "best.pt").translate([a for a, _ in CORRECTIONS])
    learned = sum(normalize(text) == normalize(fix) for text, (_, fix) in zip(answers, CORRECTIONS, strict=True))
    assert learned / len(CORRECTIONS) == pytest.approx(expected["learned"])


def test_blends_of_the_last_weights_with_the_start_s_compete_for_best_pt_and_training_keeps_the_last():
    """Stand-ins: a 1-weight model whose blend share a is its weight; dev BLEU 20 - 20a, learned a, floor 4.5;
    the best epoch is below the floor at 4.2. The blends 0.95 to 0.8 forget more than it (BLEU 1 to 4); 0.75
    is the first within the floor, and learns more than 0.7."""
    start, model = torch.nn.Linear(1, 1, bias=False), torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.zeros_(start.weight)
    torch.nn.init.ones_(model.weight)
    saved, reported = [], []

    def measure():
        share = model.weight.item()
        return SimpleNamespace(bleu=20 - 20 * share, chrf=0.0), [], 20 - 20 * share, share

    report = SimpleNamespace(blend=lambda progress, share, scores, learned, kept: reported.append((share, kept)))
    run = Selection(model, None, None, TrainConfig(), Path("unused"), torch.device("cpu"), ONE_PROCESS, report,
                    lambda name: saved.append((name, model.weight.item())), print)
    run.learning, run.start, run.measure = Learning(()), start, measure
    run.state.update(best_bleu=4.2, best_step=3, best_learned=0.79, bleu_floor=4.5)
    run.blend_with_start(step=7)
    assert saved == [("best.pt", pytest.approx(0.75))]
    assert run.state["best_learned"] == pytest.approx(0.75) and run.state["best_step"] == 7
    assert run.state["best_from"] == "blend 0.75"  # best_step alone names the last step, as the last epoch's
    assert reported == [(share, share == 0.75) for share in BLENDS]
    assert model.weight.item() == 1.0  # the last weights, for last.pt and a later resume

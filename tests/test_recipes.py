"""Recipes: a config's members (several seeds trained and decoded as one ensemble) and its search section
(stored in best.pt as the defaults of translate, evaluate, the UI and the batch job)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from support import (
    TINY_CONFIG,
    assert_one_line_error,
    cli_in_process,
    file_states,
    run_cli,
    tiny_config,
    tiny_data,
    train_args,
    trained,
    training_threads,
)

from seq2seq.checkpoint import load_model, read_checkpoint
from seq2seq.config import ModelConfig, SearchConfig, TokenizerConfig, TrainConfig
from seq2seq.corpus import read_parallel
from seq2seq.data import collate
from seq2seq.distributed import ONE_PROCESS
from seq2seq.ensemble import Ensemble
from seq2seq.errors import Seq2SeqError
from seq2seq.model import build_model
from seq2seq.optimizer import TrainStep, disagreement
from seq2seq.recommender import Recommender
from seq2seq.resume import RESULT, read_result
from seq2seq.tokenizer import normalize
from seq2seq.train import TrainResult

ALERTS = ["pump vibration high", "belt worn", "valve stuck closed"]
RECIPE = {**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "members": 2},
          "search": {"beam_size": 3, "length_penalty": 0.5, "beam_patience": 1.5}}


def trained_recipe(root, recipe: dict):
    """``recipe`` trained on the tiny data under ``root``: (root, data, config file, CLI result)."""
    data = tiny_data(root / "data")
    config = root / "recipe.json"
    config.write_text(json.dumps(recipe), encoding="utf-8")
    with training_threads():
        result = run_cli(*train_args(data, root / "run"), "--config", str(config))
    assert result.status == 0, result.stderr
    return root, data, config, result


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory):
    """A two-member recipe with a search section, trained on the tiny data."""
    return trained_recipe(tmp_path_factory.mktemp("recipe"), RECIPE)


def test_members_train_with_consecutive_seeds_and_best_pt_is_their_ensemble(recipe_run):
    root, _, _, result = recipe_run
    run = root / "run"
    model, _, payload = load_model(run / "best.pt")
    assert isinstance(model, Ensemble) and len(model.members) == 2
    members = [read_checkpoint(run / f"member-{k}" / "best.pt") for k in (1, 2)]
    assert [m["train_config"]["seed"] for m in members] == [1, 2]
    assert members[0]["tokenizer"] == members[1]["tokenizer"] == payload["tokenizer"]
    for member, weights in zip(model.members, [m["weights"] for m in members], strict=True):
        for name, tensor in member.state_dict().items():
            torch.testing.assert_close(tensor, weights[name])
    assert any(not torch.equal(members[0]["weights"][n], members[1]["weights"][n]) for n in members[0]["weights"])
    assert "memory" in payload  # trust fitted for the ensemble, as for one run
    assert json.loads(result.stdout)["stopped"] == "members"


def test_a_recipes_search_section_is_the_checkpoints_default_everywhere(recipe_run):
    root, data, _, _ = recipe_run
    best = root / "run" / "best.pt"
    stored = SearchConfig(beam_size=3, length_penalty=0.5, beam_patience=1.5)
    recommender = Recommender.from_checkpoint(best)
    assert recommender.search == stored
    by_default = recommender.recommend(ALERTS)
    named = recommender.recommend(ALERTS, stored)
    assert [r.text for r in by_default] == [r.text for r in named]
    assert [r.score for r in by_default] == [r.score for r in named]
    scores = run_cli("evaluate", "--model", str(best), "--data", str(data.dev), "--json")
    assert scores.status == 0, scores.stderr
    reported = json.loads(scores.stdout)
    assert (reported["beam_size"], reported["length_penalty"], reported["beam_patience"]) == (3, 0.5, 1.5)
    greedy = run_cli("evaluate", "--model", str(best), "--data", str(data.dev), "--json", "--beam-size", "1",
                     "--beam-patience", "2")
    reported = json.loads(greedy.stdout)
    assert (reported["beam_size"], reported["length_penalty"], reported["beam_patience"]) == (1, 0.5, 2.0)


def test_a_checkpoint_without_a_search_section_searches_greedily_by_default(tmp_path_factory):
    best = trained(tmp_path_factory.getbasetemp()).best
    assert "search" not in read_checkpoint(best)
    assert Recommender.from_checkpoint(best).search == SearchConfig()


def test_resume_skips_finished_members_and_rebuilds_the_ensemble(recipe_run, tmp_path):
    root, data, config, _ = recipe_run
    run = root / "run"
    before = read_checkpoint(run / "best.pt")
    with training_threads():
        result = run_cli(*train_args(data, run), "--config", str(config), "--resume")
    assert result.status == 0, result.stderr
    assert result.stderr.count("had finished") == 2
    after = read_checkpoint(run / "best.pt")
    for name, tensor in before["weights"].items():
        assert torch.equal(tensor, after["weights"][name])
    again = run_cli(*train_args(data, run), "--config", str(config))
    assert_one_line_error(again, "already holds a training run", "--resume")


def test_a_recipe_refused_on_the_way_with_overwrite_leaves_the_earlier_ensemble_as_it_was(recipe_run, tmp_path):
    root, data, config, _ = recipe_run
    run = tmp_path / "run"
    shutil.copytree(root / "run", run)
    before = file_states(run / "best.pt", *(run / f"member-{k}" / name for k in (1, 2)
                                             for name in ("best.pt", "last.pt", "result.json")))
    result = run_cli(*train_args(data, run), "--config", str(config), "--overwrite", "--vocab-size", "5")
    assert_one_line_error(result)
    assert file_states(*before) == before


@pytest.mark.parametrize("changed", [["--dropout", "0.5"], ["--seed", "3"]])
def test_resume_refuses_members_that_finished_under_other_settings(recipe_run, tmp_path, changed):
    root, data, config, _ = recipe_run
    shutil.copytree(root / "run", tmp_path / "run")
    before = file_states(*sorted((tmp_path / "run").rglob("*")))
    result = run_cli(*train_args(data, tmp_path / "run"), "--config", str(config), "--resume", *changed)
    assert_one_line_error(result, f"--resume: {tmp_path / 'run' / 'member-1' / 'last.pt'} was trained with ")
    assert file_states(*sorted((tmp_path / "run").rglob("*"))) == before  # nothing written


def test_resume_asking_fewer_members_than_the_run_trained_is_refused(recipe_run, tmp_path):
    root, data, config, _ = recipe_run  # a recipe of 2 members
    shutil.copytree(root / "run", tmp_path / "run")
    shutil.copytree(tmp_path / "run" / "member-2", tmp_path / "run" / "member-3")  # as if it had trained 3
    before = file_states(*sorted((tmp_path / "run").rglob("*")))
    result = run_cli(*train_args(data, tmp_path / "run"), "--config", str(config), "--resume")
    assert_one_line_error(result, f"--resume: {tmp_path / 'run' / 'member-3' / 'last.pt'} is a member of this run, "
                                  "which train.members 2 leaves out")
    assert file_states(*sorted((tmp_path / "run").rglob("*"))) == before  # nothing written


def test_members_side_by_side_are_the_members_trained_one_after_the_other(recipe_run, tmp_path):
    """train.parallel: each member in its own process, with the same tokenizer, seed and threads as in turn."""
    root, data, config, _ = recipe_run
    with training_threads():  # one thread here, so one in each of the two processes, as the recipe_run had
        result = run_cli(*train_args(data, tmp_path / "run"), "--config", str(config), "--parallel", "2")
    assert result.status == 0, result.stderr
    assert "2 members, seeds 1..2, 2 at once" in result.stderr and json.loads(result.stdout)["stopped"] == "members"
    for k in (1, 2):
        alone, side = (read_checkpoint(run / f"member-{k}" / "best.pt") for run in (root / "run", tmp_path / "run"))
        assert side["tokenizer"] == alone["tokenizer"] and side["train_config"]["seed"] == k
        assert all(torch.equal(tensor, alone["weights"][name]) for name, tensor in side["weights"].items())
        assert "dev BLEU" in (tmp_path / "run" / f"member-{k}" / "train.log").read_text(encoding="utf-8")
        assert (tmp_path / "run" / f"member-{k}" / "result.json").is_file()
    assert isinstance(load_model(tmp_path / "run" / "best.pt")[0], Ensemble)
    with training_threads():
        again = run_cli(*train_args(data, tmp_path / "run"), "--config", str(config), "--resume", "--parallel", "2")
    assert again.status == 0, again.stderr
    assert again.stderr.count("had finished") == 2 and "(its log:" not in again.stderr  # nothing trained again


def test_a_member_that_fails_side_by_side_stops_the_recipe_with_its_error_and_keeps_the_others(tmp_path):
    data = tiny_data(tmp_path / "data")
    config = tmp_path / "parallel.json"
    config.write_text(json.dumps({**RECIPE, "train": {**RECIPE["train"], "members": 3, "parallel": 2}}),
                      encoding="utf-8")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "member-2").write_text("in the way", encoding="utf-8")
    with training_threads():
        result = run_cli(*train_args(data, tmp_path / "run"), "--config", str(config))
    assert result.status == 2
    assert result.stderr.splitlines()[-1] == (f"seq2seq: error: {tmp_path / 'run' / 'member-2'}: is a file, but "
                                              f"{tmp_path / 'run' / 'member-2'} needs it to be a folder")
    assert (tmp_path / "run" / "member-1" / "result.json").is_file()  # it ran on and was kept
    assert not (tmp_path / "run" / "member-3").exists() and not (tmp_path / "run" / "best.pt").exists()
    result = run_cli(*train_args(data, tmp_path / "other"), "--config", str(config), "--parallel", "0")
    assert_one_line_error(result, "argument --parallel: must be in [1, 64], got 0")


def test_a_member_s_record_written_before_best_from_reads_as_its_validated_step(tmp_path):
    """A recipe run interrupted before best_from was recorded resumes its finished members as they were."""
    older = {"best_bleu": 30.1, "best_step": 900, "steps": 1000, "epochs": 9.5, "seconds": 120.0,
             "tokens_per_second": 900.0, "stopped": "early stopping", "parameters": 1_600_000}
    (tmp_path / RESULT).write_text(json.dumps(older), encoding="utf-8")
    assert read_result(tmp_path, TrainResult) == TrainResult(**older, best_from="step")


class _Doomed:
    """A member whose process dies as it reads its task, as one killed from outside (out of memory) does."""

    index, folder, config = 0, Path("member-1"), TrainConfig(seed=1)

    def __reduce__(self):
        return os._exit, (3,)


def test_a_member_process_killed_from_outside_is_a_one_line_error_that_says_to_resume():
    from seq2seq.side_by_side import train_side_by_side

    members, lines = [_Doomed()], []
    with pytest.raises(Seq2SeqError, match=r"^member-1: its process ended abruptly .*continue with --resume$"):
        train_side_by_side(lambda: members.pop() if members else None, lambda *_: None, 1, 1, 1, lines.append)
    assert lines == ["member-1: seed 1, in member-1 (its log: member-1/train.log)"]


def test_members_with_init_from_and_a_bad_search_section_are_one_line_errors(tmp_path, tmp_path_factory):
    base = trained(tmp_path_factory.getbasetemp())
    config = tmp_path / "members.json"
    config.write_text(json.dumps(RECIPE), encoding="utf-8")
    result = run_cli(*train_args(base.data, tmp_path / "tuned"), "--config", str(config),
                     "--init-from", str(base.best))
    assert_one_line_error(result, "train.members is 2 with --init-from")
    config.write_text(json.dumps({**TINY_CONFIG, "search": {"beam_size": 0}}), encoding="utf-8")
    result = run_cli(*train_args(base.data, tmp_path / "bad"), "--config", str(config))
    assert_one_line_error(result, "search", "beam_size")
    assert not (tmp_path / "tuned").exists() and not (tmp_path / "bad").exists()


def test_the_ui_searches_with_the_translators_own_default_when_no_beam_is_sent(recipe_run):
    from seq2seq.serving.handlers import Handlers

    root, _, _, _ = recipe_run
    handlers = Handlers({"recipe": Recommender.from_checkpoint(root / "run" / "best.pt")}, None, [])
    try:
        answer = asyncio.run(handlers.recommend_direct([ALERTS[0]]))
        assert (answer["beam_size"], answer["members"]) == (3, 2)
        assert asyncio.run(handlers.recommend_direct([ALERTS[0], None, 1]))["beam_size"] == 1
    finally:
        handlers.close()


@pytest.fixture(scope="module")
def distilled_run(tmp_path_factory):
    """The two-member recipe with train.distill: its ensemble teaches two students."""
    return trained_recipe(tmp_path_factory.mktemp("distil"), {**RECIPE, "train": {**RECIPE["train"], "distill": True}})


def test_with_distill_the_members_ensemble_teaches_students_whose_ensemble_is_best_pt(distilled_run):
    root, data, _, result = distilled_run
    run = root / "run"
    teacher = Recommender.from_checkpoint(run / "teacher.pt")
    train = read_parallel(data.train)
    taught = [json.loads(line) for line in (run / "distilled.jsonl").read_text(encoding="utf-8").splitlines()]
    answers = teacher.translate([e.source for e in train.examples], SearchConfig(beam_size=3, length_penalty=0.5))
    assert [(t["source"], t["target"]) for t in taught] == \
           [(e.source, answer or e.target) for e, answer in zip(train.examples, answers, strict=True)]
    assert sum(t["target"] != e.target for t, e in zip(taught, train.examples, strict=True)) > 0  # it did teach
    model, _, payload = load_model(run / "best.pt")
    assert isinstance(model, Ensemble) and len(model.members) == 2
    students = [read_checkpoint(run / f"student-{k}" / "best.pt") for k in (1, 2)]
    assert [s["train_config"]["seed"] for s in students] == [1, 2]
    assert students[0]["tokenizer"] == payload["tokenizer"] == read_checkpoint(run / "teacher.pt")["tokenizer"]
    for student, weights in zip(model.members, [s["weights"] for s in students], strict=True):
        for name, tensor in student.state_dict().items():
            torch.testing.assert_close(tensor, weights[name])
    # past cases are what technicians did, not what the teacher said
    cases = Recommender.from_checkpoint(run / "best.pt").memory
    assert sorted(zip(cases.alerts, cases.actions, strict=True)) == sorted({(normalize(e.source), normalize(e.target))
                                                                            for e in train.examples})
    assert "distilled.jsonl" in result.stderr and json.loads(result.stdout)["stopped"] == "members"


def test_resume_of_a_distilled_recipe_reuses_its_teacher_and_translations(distilled_run):
    root, data, config, _ = distilled_run
    run = root / "run"
    before = read_checkpoint(run / "best.pt")
    written = (run / "distilled.jsonl").stat().st_mtime_ns
    with training_threads():
        result = run_cli(*train_args(data, run), "--config", str(config), "--resume")
    assert result.status == 0, result.stderr
    assert result.stderr.count("had finished") == 4 and (run / "distilled.jsonl").stat().st_mtime_ns == written
    after = read_checkpoint(run / "best.pt")
    for name, tensor in before["weights"].items():
        assert torch.equal(tensor, after["weights"][name])


def test_distill_without_members_is_a_one_line_error(tmp_path):
    data = tiny_data(tmp_path / "data")
    config = tmp_path / "one.json"
    config.write_text(json.dumps({**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "distill": True}}), encoding="utf-8")
    result = run_cli(*train_args(data, tmp_path / "run"), "--config", str(config))
    assert_one_line_error(result, "distill needs members of at least 2")
    assert not (tmp_path / "run").exists()


def test_each_member_may_take_what_is_left_of_the_budget_shared_by_the_runs_still_to_train(tmp_path):
    from seq2seq.members import LAST_MINUTES, _Runs

    data = read_parallel(tiny_data(tmp_path).dev)
    runs = _Runs(data, tiny_config(), TrainConfig(max_minutes=10), TokenizerConfig(), False, False, print,
                 ONE_PROCESS, runs_left=4)
    assert runs.minutes() == pytest.approx(2.5, abs=1e-3)
    runs.started -= 6 * 60  # 6 of the 10 minutes spent, by runs that stopped early or late
    runs.runs_left = 2
    assert runs.minutes() == pytest.approx(2.0, abs=1e-3)
    runs.started -= 10 * 60  # overspent: the remaining runs still train a little each
    assert runs.minutes() == pytest.approx(LAST_MINUTES / 2)
    assert replace(runs, config=TrainConfig()).minutes() == 0  # no budget: none
    side_by_side = _Runs(data, tiny_config(), TrainConfig(max_minutes=10), TokenizerConfig(), False, False, print,
                         ONE_PROCESS, runs_left=4, slots=2)
    assert side_by_side.minutes() == pytest.approx(5.0, abs=1e-3)  # two at a time: half the budget each
    side_by_side.runs_left = 1
    assert side_by_side.minutes() == pytest.approx(10.0, abs=1e-3)  # the last one alone: all that is left


# -- RUL ------------------------------------------------------------------------------------------
def test_rul_members_train_into_one_ensemble_that_evaluates_and_monitors_like_one_model(tmp_path, tmp_path_factory):
    from support import RUL_CONFIG, trained_rul

    from seq2seq.rul.cmapss import read_cmapss
    from seq2seq.rul.model import RulEnsemble
    from seq2seq.rul.monitor import EngineMonitor
    from seq2seq.rul.train import load_rul_checkpoint

    tiny = trained_rul(tmp_path_factory.getbasetemp())
    config = tmp_path / "members.json"
    config.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 2, "members": 2, "schedule": "cosine"}}),
                      encoding="utf-8")
    with training_threads():
        result = run_cli("rul", "train", "--data", str(tiny.train), "--output-dir", str(tmp_path / "run"),
                         "--config", str(config), "--device", "cpu")
    assert result.status == 0, result.stderr
    model, _, _ = load_rul_checkpoint(tmp_path / "run" / "best.pt")
    assert isinstance(model, RulEnsemble) and len(model.members) == 2
    seeds = [load_rul_checkpoint(tmp_path / "run" / f"member-{k}" / "best.pt")[1].seed for k in (1, 2)]
    assert seeds == [1, 2]
    scores = run_cli("rul", "evaluate", "--model", str(tmp_path / "run" / "best.pt"), "--test", str(tiny.test),
                     "--rul", str(tiny.rul), "--json")
    assert scores.status == 0, scores.stderr
    assert json.loads(scores.stdout)["n_engines"] == 10
    report = EngineMonitor.from_checkpoint(tmp_path / "run" / "best.pt").analyse(read_cmapss(tiny.test)[0])
    assert sum(report.attention) == pytest.approx(1.0, abs=1e-5)
    assert sum(report.health_probabilities.values()) == pytest.approx(1.0, abs=1e-5)


def test_a_rul_ensemble_of_one_model_predicts_as_that_model_and_averages_its_members(tmp_path_factory):
    from support import trained_rul

    from seq2seq.rul.model import RulEnsemble
    from seq2seq.rul.train import load_rul_checkpoint

    model, _, _ = load_rul_checkpoint(trained_rul(tmp_path_factory.getbasetemp()).output_dir / "best.pt")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, model.config.window, model.n_features, generator=generator)
    mask = torch.ones(4, model.config.window, dtype=torch.bool)
    mask[0, :5] = False  # a short history, left-padded
    with torch.inference_mode():
        alone, one = model(x, mask), RulEnsemble([model]).eval()(x, mask)
        torch.testing.assert_close(one.rul, alone.rul)
        torch.testing.assert_close(torch.softmax(one.health_logits, -1), torch.softmax(alone.health_logits, -1))
        torch.testing.assert_close(one.attention, alone.attention)
        other = load_rul_checkpoint(trained_rul(tmp_path_factory.getbasetemp()).output_dir / "best.pt")[0]
        for parameter in other.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
        pair = RulEnsemble([model, other]).eval()(x, mask)
        torch.testing.assert_close(pair.rul, (alone.rul + other(x, mask).rul) / 2)
        torch.testing.assert_close(pair.attention.sum(-1), torch.ones(4))
        assert (pair.attention[0, :5] == 0).all()


# -- subword sampling -----------------------------------------------------------------------------
def test_sampled_segmentations_spell_the_same_text_and_repeat_with_their_seed(tmp_path_factory):
    from seq2seq.corpus import read_parallel
    from seq2seq.data import ParallelDataset

    run = trained(tmp_path_factory.getbasetemp())
    _, tokenizer, _ = load_model(run.best)
    examples = read_parallel(str(run.data.train)).examples
    dataset = ParallelDataset(examples, tokenizer, 100, 100)
    best = [target.tolist() for _, target in dataset]

    def sampled(seed):
        dataset.resample(tokenizer, 0.5, seed)
        return [(source.tolist(), target.tolist()) for source, target in dataset]

    first, again, other = sampled(7), sampled(7), sampled(8)
    assert first == again and first != other
    assert any(target != b for (_, target), b in zip(first, best, strict=True))  # not the one best segmentation
    for (source, target), example in zip(first, dataset.examples, strict=True):
        assert tokenizer.decode_target(target) == tokenizer.normalize_target(example.target)
        assert source[-1] == tokenizer.encode_source(example.source)[-1]  # EOS last


def test_the_rdrop_penalty_is_the_symmetric_kl_of_the_two_passes_and_zero_only_when_they_agree():
    generator = torch.Generator().manual_seed(0)
    first, second = torch.randn(6, 9, generator=generator), torch.randn(6, 9, generator=generator)
    p, q = first.log_softmax(-1), second.log_softmax(-1)
    kl_pq = torch.nn.functional.kl_div(q, p, log_target=True, reduction="sum")  # KL(p || q)
    kl_qp = torch.nn.functional.kl_div(p, q, log_target=True, reduction="sum")
    assert torch.allclose(disagreement(torch.cat([first, second])), 0.5 * (kl_pq + kl_qp))
    assert disagreement(torch.cat([first, second])) > 0
    assert float(disagreement(torch.cat([first, first + 3.0]))) == pytest.approx(0, abs=1e-9)  # same distributions


def test_without_dropout_an_rdrop_step_is_a_plain_step_and_counts_the_batch_once():
    """Both passes are then the same, so their mean loss is one pass's and the penalty is 0."""
    generator = torch.Generator().manual_seed(3)
    pairs = [(torch.randint(4, 12, (n,), generator=generator), torch.randint(4, 12, (n + 1,), generator=generator))
             for n in (3, 5, 4)]
    batch = collate(pairs)

    def step(rdrop: float, dropout: float):
        torch.manual_seed(0)
        model = build_model(ModelConfig(embed_size=8, encoder_hidden=8, decoder_hidden=8, attention_hidden=8,
                                        dropout=dropout, src_vocab_size=12, tgt_vocab_size=12, copy=True))
        loss, nll, tokens = TrainStep(model, TrainConfig(rdrop=rdrop), torch.device("cpu"), ONE_PROCESS)(batch, None)
        return model.state_dict(), loss, nll, tokens

    (plain, *plain_figures), (twice, *twice_figures) = step(0.0, 0.0), step(2.0, 0.0)
    assert twice_figures == pytest.approx(plain_figures) and twice_figures[2] == batch.n_tokens
    for name, tensor in plain.items():
        assert torch.allclose(tensor, twice[name], atol=1e-6), name
    # With dropout the passes differ (the same draws for either weight): the penalty is in the loss.
    (_, light, light_nll, _), (_, heavy, heavy_nll, _) = step(1.0, 0.5), step(3.0, 0.5)
    assert light_nll == pytest.approx(heavy_nll) and heavy - light > 1e-4


@pytest.mark.parametrize("option", [{"subword_alpha": 0.3}, {"word_dropout": 0.2}, {"rdrop": 1.0}],
                         ids=["sampling", "word-dropout", "rdrop"])
def test_a_run_with_subword_sampling_word_dropout_or_rdrop_resumed_ends_with_the_weights_of_an_uninterrupted_one(
        option, tmp_path):
    data = tiny_data(tmp_path / "data")
    config = tmp_path / "sampled.json"
    config.write_text(json.dumps({**TINY_CONFIG, "train": {**TINY_CONFIG["train"], **option}}))
    with training_threads():
        whole = run_cli(*train_args(data, tmp_path / "whole", "--epochs", "2"), "--config", str(config))
        first = run_cli(*train_args(data, tmp_path / "cut", "--epochs", "1"), "--config", str(config))
        second = run_cli(*train_args(data, tmp_path / "cut", "--epochs", "2"), "--config", str(config), "--resume")
        plain = run_cli(*train_args(data, tmp_path / "plain", "--epochs", "2"))
    assert whole.status == first.status == second.status == plain.status == 0, whole.stderr + second.stderr
    a, b, c = (read_checkpoint(tmp_path / name / "last.pt")["weights"] for name in ("whole", "cut", "plain"))
    for name, tensor in a.items():
        assert torch.equal(tensor, b[name]), name
    assert any(not torch.equal(tensor, c[name]) for name, tensor in a.items())  # the option took effect


def test_an_unknown_rul_schedule_is_a_one_line_error_before_training(tmp_path):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"rul": {"schedule": "linear"}}), encoding="utf-8")
    result = run_cli("rul", "train", "--output-dir", str(tmp_path / "run"), "--config", str(config))
    assert_one_line_error(result, f"{config}: rul: unknown schedule 'linear'; valid: plateau, cosine")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["maintnet-best.json", "fd001-best.json"])
def test_the_shipped_recipes_load_and_train_for_a_step(name, tmp_path, tmp_path_factory):
    from support import SCRIPTS, trained_rul

    recipe = SCRIPTS / "configs" / name
    with training_threads():
        if name.startswith("fd001"):
            data = trained_rul(tmp_path_factory.getbasetemp()).train
            result = run_cli("rul", "train", "--data", str(data), "--output-dir", str(tmp_path / "run"),
                             "--config", str(recipe), "--epochs", "1", "--device", "cpu")
        else:
            data = tiny_data(tmp_path / "data")
            result = run_cli("train", "--train", str(data.train), "--dev", str(data.dev), "--config", str(recipe),
                             "--output-dir", str(tmp_path / "run"), "--epochs", "1", "--device", "cpu")
    assert result.status == 0, result.stderr
    members = json.loads(recipe.read_text()).get("rul", json.loads(recipe.read_text()).get("train"))["members"]
    assert len(list((tmp_path / "run").glob("member-*/best.pt"))) == members
    assert (tmp_path / "run" / "best.pt").is_file()


# -- the scripts that chose the recipes -----------------------------------------------------------
def test_tune_search_scores_every_setting_and_names_the_best(tmp_path_factory, monkeypatch, capsys):
    import sys

    from support import SCRIPTS, load_script

    run = trained(tmp_path_factory.getbasetemp())
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(sys, "argv", ["tune_search.py", "--model", str(run.best), "--dev", str(run.data.dev),
                                      "--beams", "1", "3", "--length-penalties", "0.5", "1.0",
                                      "--beam-patiences", "1", "2"])
    assert load_script("tune_search").main() == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [row.split(" | ")[:3] for row in rows] == [["| 1", "-", "-"], ["| 3", "0.5", "1"], ["| 3", "0.5", "2"],
                                                      ["| 3", "1", "1"], ["| 3", "1", "2"]]
    bleu = {tuple(1.0 if cell == "-" else float(cell.strip("| ")) for cell in row.split(" | ")[:3]):
            float(row.split(" | ")[3]) for row in rows}
    assert all(0 <= b <= 100 for b in bleu.values())
    best = json.loads(out.split('best: "search": ')[1])
    assert bleu[best["beam_size"], best["length_penalty"], best["beam_patience"]] == max(bleu.values())


def test_ablate_rul_reports_runs_and_seed_ensembles_on_engines_no_run_saw(tmp_path, tmp_path_factory, monkeypatch,
                                                                          capsys):
    import sys

    from support import RUL_CONFIG, SCRIPTS, load_script, trained_rul

    from seq2seq.rul.cmapss import read_cmapss

    tiny = trained_rul(tmp_path_factory.getbasetemp())
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"rul": {**RUL_CONFIG["rul"], "epochs": 2}}), encoding="utf-8")
    monkeypatch.syspath_prepend(str(SCRIPTS))
    ablate = load_script("ablate_rul")
    monkeypatch.setattr(sys, "argv", ["ablate_rul.py", "--data", str(tiny.train), "--base", str(base),
                                      "--variant", "base", "--variant", "wide:lstm_hidden=12", "--folds", "0",
                                      "--seeds", "1", "2", "--members", "2", "--output-dir", str(tmp_path / "out")])
    with training_threads():
        assert ablate.main() == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| base") or
            line.startswith("| wide")]
    assert [row.split(" | ")[1] for row in rows] == ["2", "2"]  # runs per variant
    scores = json.loads((tmp_path / "out" / "base" / "fold0" / "seed1" / "scores.json").read_text())
    train, report = ablate.fold_engines(read_cmapss(tiny.train), 0)
    assert not {e.unit for e in train} & {e.unit for e in report}
    assert len(scores["predicted"]) == len(scores["true"]) > 0
    assert set(scores["true"]) <= {float(min(cut, 125)) for cut in ablate.CUTS}  # cut before failure, capped


def test_ablate_maintnet_trains_each_variant_and_seed_through_the_cli_and_prints_paired_deltas(
        tmp_path, monkeypatch, capsys):
    import sys

    from support import SCRIPTS, load_script

    data = tiny_data(tmp_path / "data")
    base = tmp_path / "base.json"
    base.write_text(json.dumps({**TINY_CONFIG, "train": {**TINY_CONFIG["train"], "epochs": 1}}), encoding="utf-8")
    monkeypatch.syspath_prepend(str(SCRIPTS))
    # The script's 34 commands run in this process: a new one loads torch again, about 8 s each on a busy 2-core
    # runner, most of this test's time. How it runs a process and quotes a failed one is tested below.
    monkeypatch.setattr(subprocess, "run", cli_in_process)
    argv = ["ablate_maintnet.py", "--base", str(base), "--train", str(data.train), "--dev", str(data.dev),
            "--source-column", "source", "--target-column", "target", "--variant", "base",
            "--variant", "drop:model.dropout=0.0", "--beam", "2",
            "--ensemble-size", "1", "--output-dir", str(tmp_path / "out")]  # ensembles of each seed alone
    monkeypatch.setattr(sys, "argv", [*argv, "--seeds", "1", "2"])
    assert load_script("ablate_maintnet").main() == 0
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| base") or line.startswith("| drop")}
    assert set(rows) == {"base", "drop"} and rows["base"][3] == "+0.00"
    # An ensemble of one is that model: each seed's window scores what the seed's run scored.
    assert rows["drop"][6] == rows["drop"][1] and rows["drop"][7].rstrip(" |") == rows["drop"][2]
    saved = json.loads((tmp_path / "out" / "drop" / "seed2" / "config.json").read_text())
    assert saved["model"]["dropout"] == 0.0 and saved["train"]["epochs"] == 1
    scores = tmp_path / "out" / "drop" / "seed2" / "scores.json"
    assert json.loads(scores.read_text())["search"] == {"beam_size": 2, "beam_patience": 1.0}
    first = (tmp_path / "out" / "drop" / "seed2" / "run" / "best.pt").stat().st_mtime
    assert load_script("ablate_maintnet").main() == 0  # a second call reads the runs back
    assert (tmp_path / "out" / "drop" / "seed2" / "run" / "best.pt").stat().st_mtime == first
    # Another search: seed 2's runs scored again, not trained (seed 1 left out: each score is a process).
    monkeypatch.setattr(sys, "argv", [*argv, "--seeds", "2", "--beam-patience", "1.5"])
    assert load_script("ablate_maintnet").main() == 0
    assert json.loads(scores.read_text())["search"] == {"beam_size": 2, "beam_patience": 1.5}
    assert (tmp_path / "out" / "drop" / "seed2" / "run" / "best.pt").stat().st_mtime == first


def test_ablate_maintnet_quotes_only_what_the_failed_command_wrote_not_earlier_runs_lines(tmp_path, monkeypatch):
    import sys

    from support import SCRIPTS, load_script

    monkeypatch.syspath_prepend(str(SCRIPTS))
    ablate, log = load_script("ablate_maintnet"), tmp_path / "train.err"
    log.write_text("an earlier run's error\n", encoding="utf-8")
    with pytest.raises(SystemExit) as failed:
        ablate.run([sys.executable, "-c", "import sys; sys.stderr.write('this one\\n'); sys.exit(3)"], log)
    assert str(failed.value).endswith("exited 3:\nthis one") and "earlier" not in str(failed.value)
    with pytest.raises(SystemExit) as silent:
        ablate.run([sys.executable, "-c", "import sys; sys.exit(4)"], log)
    assert str(silent.value).endswith("exited 4, writing nothing to stderr")
    assert log.read_text(encoding="utf-8") == "an earlier run's error\nthis one\n"  # the log keeps every line


@pytest.mark.slow
@pytest.mark.parametrize("attention, extra", [("luong-general", ()), ("luong-concat", ()),
                                              ("luong-dot", ("--encoder-hidden", "64"))])
def test_every_attention_type_trains_with_the_maintnet_recipe(attention, extra, tmp_path):
    from support import SCRIPTS

    recipe, data = SCRIPTS / "configs" / "maintnet-best.json", tiny_data(tmp_path / "data")
    command = ["train", "--train", str(data.train), "--dev", str(data.dev), "--config", str(recipe),
               "--epochs", "1", "--device", "cpu", "--attention", attention,
               "--parallel", "1"]  # members in this process: two spawned ones load torch; side by side is tested above
    with training_threads():
        result = run_cli(*command, *extra, "--output-dir", str(tmp_path / "run"))
    assert result.status == 0, result.stderr
    model, _, _ = load_model(tmp_path / "run" / "best.pt")
    assert isinstance(model, Ensemble) and model.config.attention == attention
    if extra:  # without the narrower encoder, one line says what to change, before any training
        assert_one_line_error(run_cli(*command, "--output-dir", str(tmp_path / "bare")), "encoder_hidden")


ORPHAN = """
import multiprocessing, os, signal, time
from concurrent.futures import ProcessPoolExecutor
from seq2seq.side_by_side import end_with_parent

if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=end_with_parent,
                               initargs=(os.getpid(),))
    print(pool.submit(os.getpid).result(), flush=True)  # the member process's id
    pool.submit(time.sleep, 120)  # a member at work
    os.kill(os.getpid(), signal.SIGKILL)  # the recipe's process killed from outside
"""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"  # a zombie is gone
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="parent-death signals are Linux's")
def test_a_member_process_ends_when_the_recipe_process_is_killed_rather_than_train_on_unseen(tmp_path):
    script = tmp_path / "recipe.py"
    script.write_text(ORPHAN, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == -signal.SIGKILL, result.stderr
    member = int(result.stdout)
    deadline = time.monotonic() + 30
    while alive(member) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(member):
        os.kill(member, signal.SIGKILL)
    assert time.monotonic() < deadline, "the member trained on after the recipe's process died"

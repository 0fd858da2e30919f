"""Ensembles and checkpoint averaging: seq2seq average | ensemble, and decoding several members together."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from support import UI_ALERTS, assert_one_line_error, file_states, run_cli, trained

from seq2seq.checkpoint import load_model, read_checkpoint, save_atomic
from seq2seq.config import SearchConfig
from seq2seq.ensemble import Ensemble, average_weights
from seq2seq.recommender import Recommender

ALERTS = ["pump vibration high", "belt worn", "valve stuck closed", "gearbox noise high and coolant temperature high"]
SEARCHES = [SearchConfig(), SearchConfig(beam_size=3, n_best=3)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny run's best.pt and a copy with every weight moved a little: two checkpoints of one recipe."""
    best = trained(tmp_path_factory.getbasetemp()).best
    payload = read_checkpoint(best)
    generator = torch.Generator().manual_seed(0)
    moved = {name: w + 0.05 * torch.randn(w.shape, generator=generator) if w.is_floating_point() else w
             for name, w in payload["weights"].items()}
    other = tmp_path_factory.mktemp("moved") / "best.pt"
    save_atomic({**payload, "weights": moved}, other)
    return best, other


def combine(command: str, output, *inputs, extra=()):
    result = run_cli(command, "--inputs", *map(str, inputs), "--output", str(output), *extra)
    assert result.status == 0, result.stderr
    return output


def test_averaging_gives_the_mean_of_the_inputs_weights(runs, tmp_path):
    average = combine("average", tmp_path / "avg.pt", *runs)
    weights = [read_checkpoint(path)["weights"] for path in runs]
    for name, tensor in read_checkpoint(average)["weights"].items():
        torch.testing.assert_close(tensor, (weights[0][name] + weights[1][name]) / 2)
    model, _, payload = load_model(average)
    assert not isinstance(model, Ensemble) and payload["combined_from"]["how"] == "average"
    assert payload["training_state"] == {}


def test_averaging_refuses_the_checkpoints_of_unrelated_runs_which_an_ensemble_takes(runs, tmp_path):
    payload = read_checkpoint(runs[0])
    generator = torch.Generator().manual_seed(1)
    unrelated = {name: w.std() * torch.randn(w.shape, generator=generator) if w.is_floating_point() else w
                 for name, w in payload["weights"].items()}  # another seed's weights: same layout, no shared basin
    other = tmp_path / "other-seed.pt"
    save_atomic({**payload, "weights": unrelated}, other)
    result = run_cli("average", "--inputs", str(runs[0]), str(other), "--output", str(tmp_path / "avg.pt"))
    message = assert_one_line_error(result, f"{other}: its weights are unrelated to {runs[0]}'s (cosine ")
    assert "seq2seq ensemble" in message and not (tmp_path / "avg.pt").exists()
    combine("ensemble", tmp_path / "ens.pt", runs[0], other)


@pytest.mark.parametrize("search", SEARCHES, ids=["greedy", "beam3"])
def test_an_ensemble_of_one_model_or_of_copies_of_it_answers_as_that_model(runs, tmp_path, search):
    alone = Recommender.from_checkpoint(runs[0]).recommend(ALERTS, search)
    one = Recommender.from_checkpoint(combine("ensemble", tmp_path / "ens1.pt", runs[0]))
    _, tokenizer, _ = load_model(runs[0])  # three copies decoded together (the command refuses a model twice)
    three = Recommender(Ensemble([load_model(runs[0])[0] for _ in range(3)]), tokenizer)
    for ensemble in (one, three):
        together = ensemble.recommend(ALERTS, search)
        for a, b in zip(together, alone, strict=True):
            assert [c.text for c in a.candidates] == [c.text for c in b.candidates]
            assert [c.score for c in a.candidates] == pytest.approx([c.score for c in b.candidates], abs=1e-4)
            for ca, cb in zip(a.candidates, b.candidates, strict=True):
                torch.testing.assert_close(ca.attention, cb.attention, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("search", SEARCHES, ids=["greedy", "beam3"])
def test_an_ensembles_attention_is_the_mean_of_its_members_and_its_rows_sum_to_one(runs, tmp_path, search):
    path = combine("ensemble", tmp_path / "ens.pt", *runs)
    model, _, payload = load_model(path)
    assert isinstance(model, Ensemble) and len(model.members) == 2 and len(payload["ensemble_weights"]) == 1
    for r in Recommender.from_checkpoint(path).recommend(ALERTS, search):
        for candidate in r.candidates:
            torch.testing.assert_close(candidate.attention.sum(-1), torch.ones(candidate.attention.size(0)))


def moved(path: Path, output: Path, seed: int) -> Path:
    """A copy of checkpoint ``path`` with every weight moved a little: another model of one recipe."""
    payload = read_checkpoint(path)
    generator = torch.Generator().manual_seed(seed)
    save_atomic({**payload, "weights": {name: w + 0.05 * torch.randn(w.shape, generator=generator)
                                        if w.is_floating_point() else w for name, w in payload["weights"].items()}},
                output)
    return output


def test_an_ensemble_of_an_ensemble_flattens_and_average_refuses_one(runs, tmp_path):
    pair = combine("ensemble", tmp_path / "pair.pt", *runs)
    model, _, _ = load_model(combine("ensemble", tmp_path / "three.pt", pair, moved(runs[0], tmp_path / "c.pt", 1)))
    assert len(model.members) == 3
    result = run_cli("average", "--inputs", str(runs[0]), str(pair), "--output", str(tmp_path / "x.pt"))
    assert_one_line_error(result, f"{pair}: an ensemble, and average takes single checkpoints")


@pytest.mark.parametrize(("command", "how"), [("ensemble", "copy"), ("ensemble", "hard link"), ("average", "copy"),
                                             ("average", "hard link"), ("ensemble", "inside an ensemble")])
def test_one_model_reached_by_two_files_counts_once(runs, tmp_path, command, how):
    """Only a path given twice (or a symbolic link) was caught: a copy gave a model twice the weight (average
    refuses any ensemble: the test above)."""
    if how == "inside an ensemble":
        again = combine("ensemble", tmp_path / "pair.pt", *runs)
    else:
        again = tmp_path / "again.pt"
        (shutil.copyfile if how == "copy" else os.link)(runs[0], again)
    result = run_cli(command, "--inputs", str(runs[0]), str(again), "--output", str(tmp_path / "x.pt"))
    assert_one_line_error(result, f"--inputs: {again} holds a model {runs[0]} holds too")
    assert not (tmp_path / "x.pt").exists()


def test_an_ensemble_is_no_start_for_fine_tuning(runs, tmp_path, tmp_path_factory):
    data = trained(tmp_path_factory.getbasetemp()).data
    pair = combine("ensemble", tmp_path / "pair.pt", *runs)
    result = run_cli("train", "--init-from", str(pair), "--train", str(data.train), "--dev", str(data.dev),
                     "--output-dir", str(tmp_path / "tuned"))
    assert_one_line_error(result, "--init-from takes one model, not an ensemble")
    assert not (tmp_path / "tuned").exists()


def test_with_dev_the_trust_model_is_fitted_again_for_the_combined_model(runs, tmp_path, tmp_path_factory):
    dev = trained(tmp_path_factory.getbasetemp()).data.dev
    kept = read_checkpoint(combine("ensemble", tmp_path / "kept.pt", *runs))["memory"]
    refit = read_checkpoint(combine("ensemble", tmp_path / "refit.pt", *runs, extra=("--dev", str(dev))))["memory"]
    assert kept["trust"] == read_checkpoint(runs[0])["memory"]["trust"]
    assert refit["trust"] != kept["trust"] and refit["cases"] == kept["cases"]
    one = tmp_path / "one.tsv"
    one.write_text(dev.read_text(encoding="utf-8").splitlines(keepends=True)[0] + dev.read_text(
        encoding="utf-8").splitlines(keepends=True)[1], encoding="utf-8")  # the header and one pair
    result = run_cli("ensemble", "--inputs", *map(str, runs), "--output", str(tmp_path / "one.pt"), "--dev", str(one))
    assert result.status == 0 and f"warning: {one}: trust and the out-of-scope threshold were fitted on 1 dev pair, " \
                                  "too few to rely on" in result.stderr


def test_inputs_of_other_recipes_or_the_output_over_an_input_are_one_line_errors(runs, tmp_path, tmp_path_factory):
    other = trained(tmp_path_factory.getbasetemp(), "luong-dot").best
    states = file_states(*runs)
    assert_one_line_error(run_cli("ensemble", "--inputs", str(runs[0]), str(other), "--output",
                                  str(tmp_path / "x.pt")), "model configuration differs",
                          "(attention 'luong-dot', not 'bahdanau')")
    assert_one_line_error(run_cli("average", "--inputs", str(runs[0]), str(runs[1]), "--output", str(runs[1])),
                          "--output is also")
    assert file_states(*runs) == states and not (tmp_path / "x.pt").exists()


def test_members_trained_with_other_dropout_rates_are_one_ensemble_as_dropout_acts_in_training_only(runs, tmp_path):
    payload = read_checkpoint(runs[1])
    other = tmp_path / "dropout.pt"
    save_atomic({**payload, "model_config": {**payload["model_config"], "dropout": 0.0}}, other)
    assert payload["model_config"]["dropout"] != 0.0
    one = Recommender.from_checkpoint(combine("ensemble", tmp_path / "ens.pt", runs[0], other))
    same = Recommender.from_checkpoint(combine("ensemble", tmp_path / "same.pt", runs[0], runs[1]))
    assert one.translate(UI_ALERTS) == same.translate(UI_ALERTS)


def test_a_weighted_average_is_the_weighted_mean_and_its_shares_must_sum_to_one():
    first, second = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    mixed = average_weights([first, second], [0.25, 0.75])
    for name, value in mixed.items():
        assert torch.allclose(value, 0.25 * first.state_dict()[name] + 0.75 * second.state_dict()[name])
    assert all(torch.equal(value, second.state_dict()[name])
               for name, value in average_weights([first, second], [0.0, 1.0]).items())
    with pytest.raises(ValueError, match="sum to 1"):
        average_weights([first, second], [0.5, 0.6])

"""Dynamic int8 quantisation: every linear and GRU layer quantised, the float model untouched, the
same recommendations in the same form, BLEU within tolerance of float32 on the tiny model."""

from __future__ import annotations

import json

import pytest
import torch
from support import TINY_PAIRS, run_cli, trained
from torch import nn

from seq2seq.config import SearchConfig
from seq2seq.errors import ConfigError
from seq2seq.evaluate import score_corpus
from seq2seq.fast.quantize import quantize_int8
from seq2seq.recommender import Recommender

ALERTS = [source for source, _ in TINY_PAIRS]
REFERENCES = [target for _, target in TINY_PAIRS]
BLEU_TOLERANCE = 5.0  # points, on the tiny 3-epoch model (MaintNet-size models: within 0.4, README)


@pytest.fixture(scope="module", params=["bahdanau", "luong-general"])
def run(request, tmp_path_factory, one_thread):
    return trained(tmp_path_factory.getbasetemp(), request.param)


def float_layers(model: nn.Module) -> list[str]:
    return [name for name, module in model.named_modules() if type(module) in (nn.Linear, nn.GRU)]


def test_every_linear_and_gru_layer_is_quantised_and_the_float_model_is_untouched(run):
    float_recommender = Recommender.from_checkpoint(run.best)
    before = {name: p.clone() for name, p in float_recommender.model.named_parameters()}
    quantized = quantize_int8(float_recommender.model, torch.device("cpu"))
    assert float_layers(float_recommender.model)  # there was something to quantise
    assert float_layers(quantized) == []
    assert all(torch.equal(before[name], p) for name, p in float_recommender.model.named_parameters())


def test_weights_have_one_scale_per_output_row(run):
    quantized = quantize_int8(Recommender.from_checkpoint(run.best).model, torch.device("cpu"))
    linear = quantized.decoder.output.weight()  # (V, H) int8
    assert linear.qscheme() == torch.per_channel_affine
    assert linear.q_per_channel_scales().shape == (linear.size(0),)
    gru = quantized.decoder.rnn.get_weight()["weight_hh_l0"]  # (3 H, H)
    assert gru.qscheme() == torch.per_channel_affine and gru.q_per_channel_scales().shape == (gru.size(0),)


def test_quantised_recommendations_keep_their_form_and_bleu(run):
    config = SearchConfig(beam_size=3, n_best=2)
    expected = Recommender.from_checkpoint(run.best).recommend(ALERTS, config)
    got = Recommender.from_checkpoint(run.best, quantize=True).recommend(ALERTS, config)
    for before, after in zip(expected, got, strict=True):
        assert after.source_pieces == before.source_pieces
        assert 1 <= len(after.candidates) <= 2  # fewer where two answers read alike (recommender.distinct)
        for candidate in after.candidates:
            assert candidate.attention.shape == (len(candidate.target_pieces), len(after.source_pieces))
            assert torch.allclose(candidate.attention.sum(-1), torch.ones(len(candidate.target_pieces)))
    float_bleu = score_corpus([r.text for r in expected], REFERENCES).bleu
    int8_bleu = score_corpus([r.text for r in got], REFERENCES).bleu
    assert abs(int8_bleu - float_bleu) <= BLEU_TOLERANCE, (float_bleu, int8_bleu)
    # Not compared text by text: this 3-epoch model is unsure of most pieces, so rounding flips
    # near-ties. A model that has learned its task keeps every output: test_learning.py.


def test_quantisation_is_refused_off_the_cpu(run):
    model = Recommender.from_checkpoint(run.best).model
    with pytest.raises(ConfigError, match="CPU only"):
        quantize_int8(model, torch.device("cuda"))


def test_cli_translate_and_evaluate_with_quantize(run):
    result = run_cli("translate", "--model", str(run.best), "--quantize", stdin=b"pump vibration high\n\nbelt worn\n")
    assert result.status == 0, result.stderr
    expected = Recommender.from_checkpoint(run.best, quantize=True).translate(["pump vibration high", "",
                                                                                "belt worn"])
    assert result.stdout_lines == expected
    result = run_cli("evaluate", "--model", str(run.best), "--data", str(run.data.dev), "--quantize", "--json")
    assert result.status == 0, result.stderr
    assert 0.0 <= json.loads(result.stdout)["bleu"] <= 100.0

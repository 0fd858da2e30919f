"""The folded decoding step (seq2seq/folding.py) is Decoder.step, with lookups for the token share."""

from __future__ import annotations

import pytest
import torch
from support import VARIANTS, V, sample_batch, tiny_config

from seq2seq.config import SearchConfig
from seq2seq.fast.folding import FoldedDecoder, fold_embeddings, gru_cell
from seq2seq.fast.quantize import quantize_int8
from seq2seq.model import build_model
from seq2seq.recommender import Recommender
from seq2seq.search import search
from seq2seq.tokenizer import BOS_ID


def test_gru_cell_is_torch_gru():
    torch.manual_seed(0)
    gru = torch.nn.GRU(6, 5)
    x, h = torch.randn(4, 6), torch.randn(4, 5)
    expected, _ = gru(x.unsqueeze(0), h.unsqueeze(0))
    gates = torch.nn.functional.linear(x, gru.weight_ih_l0, gru.bias_ih_l0)
    torch.testing.assert_close(gru_cell(gates, h, gru.weight_hh_l0.t(), gru.bias_hh_l0), expected[0])


@pytest.mark.parametrize(("name", "feeding"), VARIANTS)
@pytest.mark.parametrize(("layers", "copy"), [(1, False), (2, False), (1, True)])
def test_folded_steps_equal_the_decoder_steps(name, feeding, layers, copy):
    torch.manual_seed(0)
    model = build_model(tiny_config(name, input_feeding=feeding, num_layers=layers, dropout=0.3, copy=copy)).eval()
    folded = fold_embeddings(model)
    assert isinstance(folded.decoder, FoldedDecoder)
    src, lengths, mask = sample_batch()
    encoded, state = model.encode(src, lengths, mask)
    folded_state = state
    with torch.no_grad():  # with gradients recorded the folded modules hand over to the originals
        prev = torch.full((3,), BOS_ID)
        for t in range(6):
            logits, state, weights = model.step(prev, state, encoded)
            folded_logits, folded_state, folded_weights = folded.step(prev, folded_state, encoded)
            torch.testing.assert_close(folded_logits, logits, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(folded_weights, weights, atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(folded_state.hidden, state.hidden, atol=1e-6, rtol=1e-5)
            if feeding and name != "bahdanau":
                torch.testing.assert_close(folded_state.attentional, state.attentional, atol=1e-6, rtol=1e-5)
            else:
                assert folded_state.attentional is None and state.attentional is None
            prev = torch.randint(4, V, (3,), generator=torch.Generator().manual_seed(t))


@pytest.mark.parametrize("layers", [1, 2])
def test_the_folded_encoder_equals_the_encoder_and_ignores_padding(layers):
    torch.manual_seed(0)
    model = build_model(tiny_config(num_layers=layers, dropout=0.3)).eval()
    folded = fold_embeddings(model).encoder
    src, lengths, _ = sample_batch(lengths=(2, 5, 1, 5, 3))
    with torch.no_grad():
        expected, got = model.encoder(src, lengths), folded(src, lengths)
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
        wider = torch.cat([src, torch.zeros(5, 3, dtype=src.dtype)], dim=1)
        memory, final = folded(wider, lengths)
    torch.testing.assert_close(memory[:, :5], expected[0], atol=1e-6, rtol=1e-5)
    assert (memory[:, 5:] == 0).all() and (expected[0][2, 1:] == 0).all()
    torch.testing.assert_close(final, expected[1], atol=1e-6, rtol=1e-5)


def test_a_folded_model_shares_the_modules_and_trains_as_the_original():
    torch.manual_seed(0)
    model = build_model(tiny_config("luong-general")).eval()
    folded = fold_embeddings(model)
    assert folded.encoder.encoder is model.encoder and folded.decoder.decoder is model.decoder
    assert folded.bridge is model.bridge
    src, lengths, mask = sample_batch()
    tgt_in = torch.randint(4, V, (3, 4))
    for expected, got in zip(model(src, lengths, mask, tgt_in), folded(src, lengths, mask, tgt_in), strict=True):
        torch.testing.assert_close(got, expected)


def test_search_with_the_folded_model_gives_the_same_hypotheses():
    torch.manual_seed(3)
    model = build_model(tiny_config("bahdanau")).eval()
    batch = sample_batch(lengths=(6, 4, 4, 2))
    for beam_size in (1, 3):
        config = SearchConfig(beam_size=beam_size, n_best=beam_size)
        for expected, got in zip(search(model, *batch, config), search(fold_embeddings(model), *batch, config),
                                 strict=True):
            assert [h.tokens for h in got] == [h.tokens for h in expected]
            torch.testing.assert_close(torch.tensor([h.score for h in got]), torch.tensor([h.score for h in expected]))


def test_int8_models_are_left_unfolded_and_recommenders_fold_float_ones(tokenizer):
    model = build_model(tiny_config(src_vocab_size=tokenizer.src_vocab_size, tgt_vocab_size=tokenizer.tgt_vocab_size))
    quantized = quantize_int8(model, torch.device("cpu"))
    assert fold_embeddings(quantized) is quantized
    recommender = Recommender(model, tokenizer)
    assert isinstance(recommender.decoding_model.decoder, FoldedDecoder) and recommender.model is model
    assert recommender.model.state_dict().keys() == model.state_dict().keys()  # what a checkpoint would save
    assert not isinstance(Recommender(model, tokenizer, quantize=True).decoding_model.decoder, FoldedDecoder)

"""Encoder, bridge and decoders: shapes, step order equivalences and padding invariance."""

from __future__ import annotations

import pytest
import torch
from support import VARIANTS, V, sample_batch, tiny_config

from seq2seq.errors import ConfigError
from seq2seq.fast.dropout import Dropout
from seq2seq.model import build_model
from seq2seq.tokenizer import BOS_ID


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_bidirectional_encoder_and_bridge_shapes(layers):
    model = build_model(tiny_config(num_layers=layers))
    src, lengths, mask = sample_batch()
    memory, final = model.encoder(src, lengths)
    assert memory.shape == (3, 5, 8)  # (B, S, 2 x encoder_hidden)
    assert final.shape == (layers, 3, 8)
    encoded, state = model.encode(src, lengths, mask)
    assert state.hidden.shape == (layers, 3, 8)  # (N, B, decoder_hidden)
    assert encoded.mask.dtype == torch.bool and encoded.mask.shape == (3, 5)


def test_encoder_memory_is_zero_at_padding():
    model = build_model(tiny_config())
    src, lengths, _ = sample_batch()
    memory, _ = model.encoder(src, lengths)
    assert (memory[1, 3:] == 0).all() and (memory[2, 1:] == 0).all()


@pytest.mark.parametrize(("name", "feeding"), VARIANTS)
@pytest.mark.parametrize(("layers", "copy"), [(1, False), (2, False), (1, True)])
def test_teacher_forced_forward_equals_the_loop_over_steps(name, feeding, layers, copy):
    torch.manual_seed(0)
    model = build_model(tiny_config(name, input_feeding=feeding, num_layers=layers, copy=copy)).eval()
    src, lengths, mask = sample_batch()
    tgt_in = torch.cat([torch.full((3, 1), BOS_ID), torch.randint(4, V, (3, 6))], dim=1)
    logits, weights = model(src, lengths, mask, tgt_in)
    assert logits.shape == (3 * 7, V) and weights.shape == (3, 7, 5)
    logits = logits.view(3, 7, V)
    encoded, state = model.encode(src, lengths, mask)
    for t in range(tgt_in.size(1)):
        step_logits, state, step_weights = model.decoder.step(tgt_in[:, t], state, encoded)
        torch.testing.assert_close(step_logits, logits[:, t], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(step_weights, weights[:, t], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("name", "feeding"), VARIANTS)
def test_padding_a_batch_further_changes_no_output(name, feeding):
    torch.manual_seed(0)
    model = build_model(tiny_config(name, input_feeding=feeding)).eval()
    src, lengths, mask = sample_batch()
    tgt_in = torch.randint(4, V, (3, 4))
    logits, weights = model(src, lengths, mask, tgt_in)
    pad = torch.zeros(3, 4, dtype=torch.long)
    logits2, weights2 = model(torch.cat([src, pad], 1), lengths, torch.cat([mask, pad.bool()], 1), tgt_in)
    torch.testing.assert_close(logits2, logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights2[:, :, :5], weights, atol=1e-6, rtol=1e-5)
    assert (weights2[:, :, 5:] == 0).all()


def test_a_sentence_decodes_the_same_alone_and_in_a_batch():
    torch.manual_seed(0)
    model = build_model(tiny_config("luong-general")).eval()
    src, lengths, mask = sample_batch()
    tgt_in = torch.randint(4, V, (3, 4))
    logits, _ = model(src, lengths, mask, tgt_in)
    alone, _ = model(src[1:2, :3], lengths[1:2], mask[1:2, :3], tgt_in[1:2])
    torch.testing.assert_close(alone, logits[4:8], atol=1e-5, rtol=1e-4)  # row-major (B x T, V): row 1


def test_scheduled_sampling_with_all_gold_feeds_equals_teacher_forcing():
    torch.manual_seed(0)
    model = build_model(tiny_config("bahdanau")).eval()
    src, lengths, mask = sample_batch()
    tgt_in = torch.randint(4, V, (3, 4))
    forced, _ = model(src, lengths, mask, tgt_in)
    sampled, _ = model(src, lengths, mask, tgt_in, feed_mask=torch.ones(3, 4, dtype=torch.bool))
    torch.testing.assert_close(sampled, forced)
    own, _ = model(src, lengths, mask, tgt_in, feed_mask=torch.zeros(3, 4, dtype=torch.bool))
    assert not torch.allclose(own, forced)


@pytest.mark.parametrize("copy", [False, True])
def test_scheduled_sampling_feeds_the_token_the_model_predicts(copy):
    """Fed its own guesses everywhere, the model reads what greedy decoding of its own scores would feed it. A
    copying decoder guessed with its generator alone, not the mixture it predicts with."""
    torch.manual_seed(0)
    model = build_model(tiny_config("bahdanau", copy=copy)).eval()
    src, lengths, mask = sample_batch()
    tokens = torch.randint(4, V, (3, 4))
    own, _ = model(src, lengths, mask, tokens, feed_mask=torch.zeros(3, 4, dtype=torch.bool))
    for t in range(1, 4):
        scores, _ = model(src, lengths, mask, tokens)  # (3 x 4, V), row-major
        tokens[:, t] = scores.view(3, 4, -1)[:, t - 1].argmax(-1)
    forced, _ = model(src, lengths, mask, tokens)
    torch.testing.assert_close(own, forced)


@pytest.mark.parametrize("name", ["bahdanau", "luong-general"])
def test_a_copying_decoder_predicts_a_distribution_that_moves_attention_mass_to_the_source(name):
    """The mixture is normalised, and the copy share adds exactly g x attention to each source id."""
    torch.manual_seed(0)
    model = build_model(tiny_config(name, copy=True)).eval()
    src, lengths, mask = sample_batch()
    encoded, state = model.encode(src, lengths, mask)
    assert torch.equal(encoded.src, src)
    scores, _, weights = model.step(torch.full((3,), BOS_ID), state, encoded)
    torch.testing.assert_close(scores.exp().sum(-1), torch.ones(3))
    output, _, _ = model.decoder.step_output(model.decoder.embed(torch.full((3,), BOS_ID)), state, encoded,
                                             model.decoder)
    share = torch.sigmoid(model.decoder.copy_gate(output))  # (B, 1)
    plain = torch.softmax(model.decoder.logits(output), -1) * (1 - share)
    copied = torch.zeros(3, V).scatter_add(1, src, weights * share)
    torch.testing.assert_close(scores.exp(), plain + copied)
    assert (copied[:, 0] == 0).all()  # padding positions carry no weight, so nothing is copied to PAD


def test_a_plain_model_keeps_no_source_ids_and_no_gate():
    model = build_model(tiny_config())
    src, lengths, mask = sample_batch()
    assert model.encode(src, lengths, mask)[0].src is None and model.decoder.copy_gate is None


def test_tied_embeddings_share_one_matrix():
    model = build_model(tiny_config(embed_size=8, tie_embeddings=True))
    assert model.decoder.output.weight is model.decoder.embed.weight


def test_tied_embeddings_need_equal_sizes():
    with pytest.raises(ConfigError, match="tie_embeddings"):
        build_model(tiny_config(tie_embeddings=True))


@pytest.mark.parametrize(("name", "feeding"), VARIANTS)
@pytest.mark.parametrize(("forcing", "copy"), [(None, False), ("mixed", False), ("mixed", True)])
def test_target_padding_is_never_decoded_and_changes_nothing(name, feeding, forcing, copy):
    """Logits come only for real target positions, each equal to decoding its sentence alone."""
    torch.manual_seed(0)
    model = build_model(tiny_config(name, input_feeding=feeding, copy=copy)).eval()
    src, lengths, mask = sample_batch()
    tgt_lengths = [2, 5, 3]
    tgt_in = torch.randint(4, V, (3, 5))
    tgt_mask = torch.arange(5) < torch.tensor(tgt_lengths).unsqueeze(1)  # (B, T)
    feed = None if forcing is None else torch.rand(3, 5, generator=torch.Generator().manual_seed(1)) < 0.5
    logits, weights = model(src, lengths, mask, tgt_in.masked_fill(~tgt_mask, 0), tgt_mask, feed)
    assert logits.shape == (sum(tgt_lengths), V)
    assert (weights[~tgt_mask] == 0).all() and torch.allclose(weights[tgt_mask].sum(-1), torch.ones(10))
    start = 0
    for b, n in enumerate(tgt_lengths):
        alone, alone_weights = model(src[b: b + 1, : lengths[b]], lengths[b: b + 1], mask[b: b + 1, : lengths[b]],
                                     tgt_in[b: b + 1, :n], None, None if feed is None else feed[b: b + 1, :n])
        torch.testing.assert_close(logits[start: start + n], alone, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(weights[b, :n, : lengths[b]], alone_weights[0], atol=1e-6, rtol=1e-5)
        start += n


@pytest.mark.parametrize(("name", "feeding"), VARIANTS)
@pytest.mark.parametrize("layers", [1, 2])
def test_every_state_handed_to_the_gru_is_contiguous(name, feeding, layers):
    """cuDNN refuses a non-contiguous hx ("rnn: hx is not contiguous"); the CPU does not, so check it here:
    training steps over targets of different lengths, with and without scheduled sampling."""
    model = build_model(tiny_config(name, input_feeding=feeding, num_layers=layers)).train()
    seen = []
    model.decoder.rnn.register_forward_pre_hook(lambda _, args: seen.append(args[1].is_contiguous()))
    src, lengths, mask = sample_batch()
    tgt_mask = torch.arange(5) < torch.tensor([2, 5, 3]).unsqueeze(1)  # (B, T)
    tgt_in = torch.randint(4, V, (3, 5)).masked_fill(~tgt_mask, 0)
    model(src, lengths, mask, tgt_in, tgt_mask)
    model(src, lengths, mask, tgt_in, tgt_mask, torch.rand(3, 5) < 0.5)
    assert seen and all(seen)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_zeroes_about_p_and_keeps_the_expected_value(dtype):
    torch.manual_seed(0)
    dropout = Dropout(0.3).train()
    x = torch.ones(200_000, dtype=dtype, requires_grad=True)
    y = dropout(x)
    assert y.dtype == dtype
    assert abs((y == 0).float().mean().item() - 0.3) < 0.005
    torch.testing.assert_close(y[y != 0].float(), torch.full_like(y[y != 0], 1 / 0.7).float(), rtol=1e-2, atol=0)
    y.sum().backward()
    assert torch.equal(x.grad == 0, y == 0)  # the gradient flows through exactly the kept units
    assert torch.equal(dropout.eval()(x), x) and torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))

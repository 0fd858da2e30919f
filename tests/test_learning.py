"""Each attention type learns a tiny reversal task: exact greedy output, anti-diagonal attention."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from seq2seq.attention import ATTENTION_NAMES
from seq2seq.config import ModelConfig, SearchConfig
from seq2seq.data import collate, source_batch
from seq2seq.evaluate import Scores
from seq2seq.fast.folding import fold_embeddings
from seq2seq.fast.quantize import quantize_int8
from seq2seq.model import build_model
from seq2seq.optimizer import token_loss
from seq2seq.report import TrainingReport
from seq2seq.search import search
from seq2seq.tokenizer import EOS_ID

SYMBOLS = range(4, 14)  # ten ordinary ids; 0-3 are PAD, UNK, BOS, EOS


def reversal_pairs(n: int, generator: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    pairs = []
    for _ in range(n):
        length = int(torch.randint(3, 8, (1,), generator=generator))
        seq = torch.randint(SYMBOLS.start, SYMBOLS.stop, (length,), generator=generator)
        pairs.append((torch.cat([seq, torch.tensor([EOS_ID])]), seq.flip(0)))
    return pairs


def train_task(config: ModelConfig, pairs, steps: int = 500):
    """``steps`` Adam steps on batches of 48 ``pairs(48, generator)``."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = build_model(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # decayed to 0, so that the model settles instead of ending wherever Adam's last steps left it
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
    for _ in range(steps):
        batch = collate(pairs(48, generator))
        logits, _ = model(batch.src, batch.src_lengths, batch.src_mask, batch.tgt_in, batch.tgt_mask)
        loss, _ = token_loss(logits, batch.tgt_out[batch.tgt_mask], 0.0)
        optimizer.zero_grad()
        (loss / batch.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    return model.eval()


def train_reversal(name: str, steps: int = 500):
    config = ModelConfig(attention=name, embed_size=24, encoder_hidden=24, decoder_hidden=48, attention_hidden=32,
                         dropout=0.0, src_vocab_size=14, tgt_vocab_size=14)
    return train_task(config, reversal_pairs, steps)


pytestmark = pytest.mark.slow  # trains one model per attention type to convergence


@pytest.fixture(scope="module", params=ATTENTION_NAMES)
def learned(request):
    return request.param, train_reversal(request.param)


def test_each_attention_type_learns_to_reverse_exactly(learned):
    _, model = learned
    generator = torch.Generator().manual_seed(99)
    tests = [[int(x) for x in torch.randint(4, 14, (n,), generator=generator)] for n in (3, 4, 5, 6, 7, 7)]
    results = search(model, *source_batch([[*seq, EOS_ID] for seq in tests]), SearchConfig(beam_size=1))
    assert [hyps[0].tokens for hyps in results] == [seq[::-1] for seq in tests]


def test_a_learned_model_quantised_to_int8_keeps_nearly_every_output(learned):
    """Dynamic int8 rounding flips few decisions of a model that has learned its task: at least
    90% of 20 outputs stay those of the float model, greedy and beam."""
    _, model = learned
    quantized = quantize_int8(model, torch.device("cpu"))
    generator = torch.Generator().manual_seed(5)
    tests = [[int(x) for x in torch.randint(4, 14, (3 + i % 5,), generator=generator)] for i in range(20)]
    batch = source_batch([[*seq, EOS_ID] for seq in tests])
    for beam_size in (1, 3):
        config = SearchConfig(beam_size=beam_size)
        expected, got = search(model, *batch, config), search(quantized, *batch, config)
        same = sum(a[0].tokens == b[0].tokens for a, b in zip(expected, got, strict=True))
        assert same >= 18, (beam_size, same)


def test_a_learned_model_folded_for_decoding_keeps_every_output(learned):
    """Folding the embedding into tables changes only the rounding: the same texts, scores to 1e-4."""
    _, model = learned
    generator = torch.Generator().manual_seed(5)
    tests = [[int(x) for x in torch.randint(4, 14, (3 + i % 5,), generator=generator)] for i in range(20)]
    batch = source_batch([[*seq, EOS_ID] for seq in tests])
    for beam_size in (1, 3):
        config = SearchConfig(beam_size=beam_size)
        for a, b in zip(search(model, *batch, config), search(fold_embeddings(model), *batch, config), strict=True):
            assert a[0].tokens == b[0].tokens and abs(a[0].score - b[0].score) < 1e-4


def test_reversal_attention_is_anti_diagonal(learned):
    _, model = learned
    generator = torch.Generator().manual_seed(7)
    # distinct symbols, so that "which source position" has a single answer
    tests = [(torch.randperm(10, generator=generator)[:n] + 4).tolist() for n in (5, 6, 7)]
    results = search(model, *source_batch([[*seq, EOS_ID] for seq in tests]), SearchConfig(beam_size=3))
    for seq, hyps in zip(tests, results, strict=True):
        attention = hyps[0].attention  # (L + 1, L + 1): output pieces + EOS x source pieces + EOS
        n = len(seq)
        peaks = attention[:n, :n].argmax(dim=-1).tolist()
        # Bahdanau's query is the state *before* the step, so its peak may lead by one position.
        assert all(abs(p - (n - 1 - i)) <= 1 for i, p in enumerate(peaks)), (peaks, attention)
        assert peaks == sorted(peaks, reverse=True), peaks
        assert sum(p == n - 1 - i for i, p in enumerate(peaks)) >= n // 2, peaks


# The copy task: "filler... # N filler..." -> "replace # N". Part numbers N are 16-25 in training
# targets; 26-35 occur in training sources only (as filler), never in a target.
MARK, REPLACE, FILLER, TRAIN_NUMBERS, UNSEEN_NUMBERS = 4, 5, range(6, 16), range(16, 26), range(26, 36)


def copy_source(number: int, generator: torch.Generator) -> list[int]:
    words = list(FILLER) + list(UNSEEN_NUMBERS)
    filler = [words[int(i)] for i in torch.randint(len(words), (int(torch.randint(2, 6, (1,), generator=generator)),),
                                                    generator=generator)]
    at = int(torch.randint(len(filler) + 1, (1,), generator=generator))
    return [*filler[:at], MARK, number, *filler[at:], EOS_ID]


def copy_pairs(n: int, generator: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    numbers = torch.randint(TRAIN_NUMBERS.start, TRAIN_NUMBERS.stop, (n,), generator=generator).tolist()
    return [(torch.tensor(copy_source(k, generator)), torch.tensor([REPLACE, MARK, k])) for k in numbers]


@pytest.mark.parametrize("name", ["bahdanau", "luong-general"])
def test_a_copying_model_writes_a_number_that_never_occurred_in_a_training_target(name):
    """With copy, the unseen part numbers come out of the alert; the same model without copy cannot
    write them (its output layer only ever learnt to push them down)."""
    config = ModelConfig(attention=name, embed_size=24, encoder_hidden=24, decoder_hidden=48, attention_hidden=32,
                         dropout=0.0, src_vocab_size=36, tgt_vocab_size=36)
    generator = torch.Generator().manual_seed(42)
    numbers = list(UNSEEN_NUMBERS) * 2
    tests = [copy_source(k, generator) for k in numbers]
    exact = {}
    for copy in (True, False):
        model = train_task(dataclasses.replace(config, copy=copy), copy_pairs, steps=300)
        results = search(model, *source_batch(tests), SearchConfig(beam_size=1))
        exact[copy] = sum(hyps[0].tokens == [REPLACE, MARK, k] for hyps, k in zip(results, numbers, strict=True))
    assert exact[True] >= 0.9 * len(tests) and exact[False] == 0, exact


@pytest.mark.parametrize(("epoch", "batches_done", "said"), [(1, 0, "step 25 epoch 1:"),
                                                             (0, 25, "step 25 in epoch 1 (batch 25):")])
def test_a_validation_names_the_epoch_as_its_progress_bar_did_even_part_way_through_one(tmp_path, epoch, batches_done,
                                                                                       said):
    lines: list[str] = []
    state = {"epoch": epoch, "batches_done": batches_done, "step": 25, "best_bleu": 1.0, "train_seconds": 2.0}
    TrainingReport(tmp_path, lines.append, True).validation(state, Scores(1.0, 2.0, 3.0, {}, 4), "x", 1e-3, 100.0)
    assert lines[0].startswith(said)
    assert json.loads((tmp_path / "metrics.jsonl").read_text(encoding="utf-8"))["epoch"] == epoch  # as it was

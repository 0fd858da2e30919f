"""Frozen configuration records. The defaults, one comment per field, are the documentation.

Each record is checked when it is made, however it is made (flags, a JSON file, a checkpoint, code):
the types and intervals of its fields are in ``config_checks.py``, which also builds records from
plain data (``from_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from seq2seq.config_checks import DEVICES, check_ranges
from seq2seq.errors import ConfigError


@dataclass(frozen=True)
class TokenizerConfig:
    vocab_size: int = 2000  # pieces per vocabulary; a soft limit, small corpora get fewer
    model_type: str = "unigram"  # SentencePiece model: unigram | bpe | char | word
    joint: bool = True  # one vocabulary for source and target; False trains one each
    lowercase_source: bool = True  # alerts mean the same in any case; targets keep theirs

    def __post_init__(self) -> None:
        check_ranges(self)



@dataclass(frozen=True)
class ModelConfig:
    attention: str = "bahdanau"  # bahdanau | luong-dot | luong-general | luong-concat
    embed_size: int = 128  # E, source and target embeddings
    encoder_hidden: int = 128  # per direction; the encoder output (memory) is 2 x this
    decoder_hidden: int = 256  # H; luong-dot needs H == 2 x encoder_hidden
    attention_hidden: int = 256  # width of the additive (bahdanau, luong-concat) score layer
    num_layers: int = 1  # N, GRU layers in the encoder and in the decoder
    dropout: float = 0.3  # on embeddings, between GRU layers and before the output layer
    input_feeding: bool = True  # Luong family: feed the attentional vector into the next step
    tie_embeddings: bool = False  # share target embedding and output weights (needs E == H)
    copy: bool = False  # pointer-generator: mix copying source pieces into the output (needs a joint vocabulary)
    max_source_length: int = 100  # pieces; longer alerts are truncated with a warning
    src_vocab_size: int = 0  # set from the tokenizer at training time
    tgt_vocab_size: int = 0  # set from the tokenizer at training time

    def __post_init__(self) -> None:
        check_ranges(self)



@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 30  # upper bound on passes over the training data
    max_minutes: float = 0.0  # wall-clock budget for training (all members together); 0 = none
    batch_tokens: int = 1500  # token budget per batch (source or target, whichever is longer)
    learning_rate: float = 2e-3  # peak learning rate of AdamW
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    schedule: str = "plateau"  # plateau (halve on a dev BLEU plateau) | warmup (linear warm-up, inv. sqrt)
    warmup_steps: int = 200  # for schedule=warmup
    plateau_patience: int = 2  # validations without improvement before the rate is halved
    min_learning_rate: float = 1e-5  # the plateau schedule stops decaying here
    clip_grad_norm: float = 5.0  # maximum gradient L2 norm
    label_smoothing: float = 0.1  # of the cross-entropy loss
    teacher_forcing: float = 1.0  # probability of feeding the gold previous token
    word_dropout: float = 0.0  # probability of hiding each training source piece as UNK (data.drop_source_pieces)
    rdrop: float = 0.0  # > 0: R-Drop, each batch twice through dropout, their symmetric KL weighted so (optimizer.py)
    patience: int = 8  # validations without dev BLEU improvement before stopping early
    validate_every: int = 0  # steps between validations; 0 = once per epoch
    seed: int = 1  # seeds initialisation, shuffling and teacher forcing
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "auto"  # auto (fp32) | fp32 | bf16 | fp16: see precision.py
    max_target_length: int = 100  # pieces; longer training targets are skipped and counted
    subword_alpha: float = 0.0  # > 0: each epoch's training pairs in freshly sampled pieces (tokenizer.sample_options)
    members: int = 1  # runs of this recipe with seeds seed, seed + 1, ...; > 1: best.pt is their ensemble
    parallel: int = 1  # members trained at once, one process each (side_by_side.py; docs/gpu-and-torchrun.md)
    distill: bool = False  # members > 1: their ensemble teaches as many students; best.pt is theirs (members.py)
    average_best: int = 0  # k > 1: best.pt may be the mean of the k best validations' weights (selection.py)
    forget_tolerance: float = 1.0  # --init-from: dev BLEU best.pt may give up to learn the new pairs (selection.py)

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.distill and self.members < 2:
            raise ConfigError(f"distill needs members of at least 2 (their ensemble teaches), got {self.members}")



@dataclass(frozen=True)
class SearchConfig:
    beam_size: int = 1  # 1 = greedy search
    n_best: int = 1  # hypotheses returned per sentence (<= beam_size)
    length_penalty: float = 1.0  # alpha of GNMT's ((5 + len) / 6) ** alpha; 0 = none
    beam_patience: float = 1.0  # a beam ends once beam_size x this many hypotheses finished (search.py)
    max_length_ratio: float = 3.0  # output pieces per source piece (2 + 10 cut long answers to short alerts)
    max_length_extra: int = 20  # pieces allowed beyond the ratio, for very short alerts

    def __post_init__(self) -> None:
        check_ranges(self)



@dataclass(frozen=True)
class RulConfig:
    window: int = 30  # W, cycles per window; shorter histories are left-padded and masked (at most 1,000: longer
    # than any C-MAPSS engine, and memory grows with it: 2,000 took 4 GB on FD001)
    rul_cap: int = 125  # piecewise-linear RUL target: min(remaining cycles, cap)
    critical_below: int = 30  # health "critical" when RUL <= this many cycles
    degrading_below: int = 80  # "degrading" when RUL <= this, else "healthy"
    conv_channels: int = 32  # Conv1d feature maps over time
    kernel_size: int = 5  # Conv1d kernel width in cycles (odd, "same" padding)
    lstm_hidden: int = 64  # per direction; the BiLSTM output is 2 x this
    lstm_layers: int = 1  # BiLSTM layers
    attention_hidden: int = 32  # width of the additive temporal attention's score layer
    dropout: float = 0.1  # after the convolution and before the heads (chosen on FD001: docs/sensors.md)
    noise: float = 0.0  # std of Gaussian noise added to the real cycles of every training window (augmentation)
    time_warp: float = 0.0  # w: each training window's time runs 1 + U(-w, w) times as fast (augmentation)
    smoothing: float = 0.0  # a in [0, 1): each scaled reading becomes a x the previous smoothed one + (1 - a) x itself
    health_weight: float = 0.3  # multi-task loss = MSE(RUL / cap) + health_weight x cross-entropy(health)
    epochs: int = 60  # upper bound on passes over the training windows
    # wall-clock budget for training (all members together); 0 = none. Checked after each batch, so a run may
    # overrun it by one batch and one validation: about 9 s for 256 windows of 1,000 cycles on 2 cores
    max_minutes: float = 0.0
    batch_size: int = 256  # windows per batch
    learning_rate: float = 1e-3  # AdamW
    weight_decay: float = 1e-4  # AdamW decoupled weight decay
    plateau_patience: int = 3  # epochs without RMSE improvement before the learning rate is halved
    schedule: str = "plateau"  # plateau (halve on a validation plateau) | cosine (to 0 over ``epochs``, for a budget)
    patience: int = 15  # epochs without RMSE improvement before stopping early
    validation_engines: int = 20  # whole engines held out of training for model selection
    members: int = 1  # runs with seeds seed, seed + 1, ... (each its own held-out engines); > 1: best.pt averages them
    seed: int = 1  # seeds initialisation, the engine split and shuffling
    device: str = "auto"  # auto | cpu | cuda

    def __post_init__(self) -> None:
        check_ranges(self)


def resolve_device(name: str) -> torch.device:
    """auto -> CUDA when present, else CPU; cuda without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available (use --device auto or cpu)")
    if name not in ("cpu", "cuda"):
        raise ConfigError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    return torch.device(name)

"""Frozen configuration records. The defaults, one comment per field, are the documentation.

``from_dict`` builds any of them from plain data (a JSON config file, a checkpoint) and
rejects unknown keys, so a misspelt option is an error rather than a silent default.

Every number has its interval in ``RANGES`` (``[`` and ``]`` include the bound, ``(`` and ``)``
exclude it); a record is checked against them when it is made, however it is made (flags, a JSON
file, a checkpoint, code), so a value outside is a one-line ConfigError and never a traceback from
deep inside training or an allocation that cannot succeed. NaN lies inside no interval.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import re
import sys
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from seq2seq.errors import ConfigError

T = TypeVar("T")


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
        if self.schedule not in RUL_SCHEDULES:
            raise ConfigError(f"schedule must be plateau or cosine, got {self.schedule!r}")



DEVICES = ("auto", "cpu", "cuda")
RUL_SCHEDULES = ("plateau", "cosine")
MAX_WIDTH = 8192  # units of one layer: beyond any useful size for these models, refused before allocation
MAX_BEAM_SIZE = 50  # wider beams cost time and memory in proportion and lower quality (Koehn and Knowles 2017)
SEED = "[0, 4294967295]"  # numpy takes 32-bit seeds
WIDTH = f"[1, {MAX_WIDTH}]"
COUNT = "[0, 1000000]"  # patiences, validation counts, extra pieces
MINUTES = "[0, inf)"  # a wall-clock budget; 0 = none
RATE = "[0, 10]"  # 0 freezes the weights (a test of the loop around them)
RANGES: dict[str, dict[str, str]] = {
    "TokenizerConfig": {"vocab_size": "[5, 1000000]"},  # 4 special pieces and at least one more
    "ModelConfig": {
        "embed_size": WIDTH, "encoder_hidden": WIDTH, "decoder_hidden": WIDTH, "attention_hidden": WIDTH,
        "num_layers": "[1, 16]", "dropout": "[0, 1)", "max_source_length": "[1, 10000]",
        "src_vocab_size": "[0, 1000000]", "tgt_vocab_size": "[0, 1000000]"},
    "TrainConfig": {
        "epochs": "[1, 100000]", "max_minutes": MINUTES, "batch_tokens": "[1, 10000000]", "learning_rate": RATE,
        "weight_decay": "[0, 10]", "warmup_steps": "[0, 1000000000]", "plateau_patience": COUNT,
        "min_learning_rate": "[0, 10]", "clip_grad_norm": "(0, inf)", "label_smoothing": "[0, 1)",
        "teacher_forcing": "[0, 1]", "word_dropout": "[0, 1)", "rdrop": "[0, 100]", "patience": COUNT,
        "validate_every": "[0, 1000000000]", "seed": SEED,
        "max_target_length": "[1, 10000]", "members": "[1, 64]", "parallel": "[1, 64]", "subword_alpha": "[0, 1]",
        "average_best": "[0, 100]", "forget_tolerance": "[0, 100]"},
    "SearchConfig": {
        "beam_size": f"[1, {MAX_BEAM_SIZE}]", "n_best": "[1, beam_size]", "length_penalty": "[0, 5]",
        "beam_patience": "[1, 10]", "max_length_ratio": "[0, 10]", "max_length_extra": "[1, 1000]"},
    "RulConfig": {
        "window": "[1, 1000]", "noise": "[0, 10]", "time_warp": "[0, 0.9]", "smoothing": "[0, 1)",
        "rul_cap": "[1, 100000]", "critical_below": "[0, 100000]",
        "degrading_below": "(critical_below, 100000]", "conv_channels": WIDTH, "kernel_size": "[1, 99]",
        "lstm_hidden": WIDTH, "lstm_layers": "[1, 16]", "attention_hidden": WIDTH, "dropout": "[0, 1)",
        "health_weight": "[0, 100]", "epochs": "[1, 100000]", "max_minutes": MINUTES, "batch_size": "[1, 1000000]",
        "learning_rate": RATE, "weight_decay": "[0, 10]", "plateau_patience": COUNT, "patience": COUNT,
        "validation_engines": "[1, 1000000]", "seed": SEED, "members": "[1, 64]"},
}
SECTIONS = {"TokenizerConfig": "tokenizer", "ModelConfig": "model", "TrainConfig": "train",
            "SearchConfig": "search", "RulConfig": "rul"}
_INTERVAL = re.compile(r"([\[(])([^,]+), ([^\])]+)([\])])")


def range_problem(cls: type, values: dict[str, Any]) -> tuple[str, str] | None:
    """(field, problem) for the first of ``values`` (a field left out: its default) outside its interval in
    RANGES, as ("dropout", "must be in [0, 1), got 1.5"). A bound may name another field; a kernel size
    must be odd."""
    for name, interval in RANGES[cls.__name__].items():
        value = values.get(name, getattr(cls, name))
        opening, low, high, closing = _INTERVAL.fullmatch(interval).groups()
        low_value, high_value = _bound(low, cls, values), _bound(high, cls, values)
        above = low_value <= value if opening == "[" else low_value < value
        below = value <= high_value if closing == "]" else value < high_value
        if not (above and below):
            named = [f"{bound} is {_bound(bound, cls, values):g}" for bound in (low, high) if bound.isidentifier()
                     and bound != "inf"]
            return name, f"must be in {interval}, got {shown_number(value)}" + (
                f" ({', '.join(named)})" if named else "")
        if name == "kernel_size" and value % 2 == 0:
            return name, f"must be odd (for 'same' padding), got {value!r}"
    return None


def shown_number(value: Any) -> str:
    """``value`` for a message; a whole number too long to read (or to print in one line) by its length."""
    digits = len(str(abs(value))) if isinstance(value, int) else 0
    return f"a number of {digits} digits" if digits > 20 else repr(value)


def _bound(text: str, cls: type, values: dict[str, Any]) -> float:
    """An interval's bound: a number ("inf" included) or the name of another field."""
    try:
        return float(text)
    except ValueError:
        return float(values.get(text, getattr(cls, text)))


def check_ranges(config: object) -> None:
    """ConfigError naming the section and the first field of ``config`` of the wrong type (a program's
    ``SearchConfig(beam_size=2.5)`` failed deep in torch) or outside its interval. A number is kept as its
    field's type: ``beam_size=2.0`` as 2, ``length_penalty=1`` as 1.0, a numpy integer as an int."""
    for field in dataclasses.fields(config):
        default, value = getattr(type(config), field.name), getattr(config, field.name)
        if problem := _type_problem(default, value):
            raise ConfigError(f"{SECTIONS[type(config).__name__]}: {field.name} {problem}")
        if _is_number(default) and type(value) is not type(default):
            object.__setattr__(config, field.name, type(default)(value))  # frozen: set once, as it is made
    problem = range_problem(type(config), dataclasses.asdict(config))
    if problem:
        raise ConfigError(f"{SECTIONS[type(config).__name__]}: {' '.join(problem)}")


def from_dict(cls: type[T], data: dict[str, Any], where: str = "config", flags: dict[str, str] | None = None) -> T:
    """Build ``cls`` from ``data``; an unknown key or a value of the wrong type or outside its interval is a
    ConfigError naming ``where`` and the field, or, for a field in ``flags`` (field -> the flag that set its
    value), the flag: "argument --epochs: must be in [1, 100000], got -1"."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected an object of {cls.__name__} fields, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(fields)}")
    flags = flags or {}

    def fault(name: str, problem: str) -> ConfigError:
        return ConfigError(f"argument {flags[name]}: {problem}" if name in flags else f"{where}: {name} {problem}")

    values = {}
    for name, value in data.items():
        problem = _type_problem(getattr(cls, name), value)
        if problem:
            raise fault(name, problem)
        default = getattr(cls, name)
        values[name] = type(default)(value) if _is_number(default) else value
    problem = range_problem(cls, values)
    if problem:
        raise fault(*problem)
    try:
        return cls(**values)
    except ConfigError as err:  # a rule between fields (``__post_init__``)
        raise ConfigError(f"{where}: {err}") from None


def _type_problem(default: Any, value: Any) -> str | None:
    """Why ``value`` cannot stand for a field whose default is ``default``, or None."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else f"must be true or false, got {_json_word(value)}"
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's numbers too
            return f"must be a number, got {_json_word(value)}"
        if isinstance(default, int) and not isinstance(value, numbers.Integral) and not float(value).is_integer():
            return f"must be a whole number, got {value!r}"
        if isinstance(default, float) and isinstance(value, numbers.Integral) and abs(value) > sys.float_info.max:
            return f"is beyond the float range (at most 1.8e308), got {shown_number(value)}"
        return None
    if isinstance(default, str) and not isinstance(value, str):
        return f"must be a string, got {_json_word(value)}"
    return None


def _is_number(default: Any) -> bool:
    return isinstance(default, (int, float)) and not isinstance(default, bool)


def _json_word(value: Any) -> str:
    """``value`` as the config file wrote it: null, true and false in JSON's words."""
    return json.dumps(value) if value is None or isinstance(value, bool) else repr(value)


def resolve_device(name: str) -> torch.device:
    """auto -> CUDA when present, else CPU; cuda without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available (use --device auto or cpu)")
    if name not in ("cpu", "cuda"):
        raise ConfigError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    return torch.device(name)

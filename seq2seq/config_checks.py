"""How a configuration record is checked, and built from plain data.

``from_dict`` builds any record of ``config.py`` from plain data (a JSON config file, a checkpoint)
and rejects unknown keys, so a misspelt option is an error rather than a silent default.

Every number has its interval in ``RANGES`` (``[`` and ``]`` include the bound, ``(`` and ``)``
exclude it); a record is checked against them when it is made, so a value outside is a one-line
ConfigError and never a traceback from deep inside training or an allocation that cannot succeed.
NaN lies inside no interval.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import re
import sys
from typing import Any, TypeVar

from seq2seq.errors import ConfigError

T = TypeVar("T")
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
DEVICES = ("auto", "cpu", "cuda")
# Every field that takes one of a few names, and its names (the attention types are the model builder's:
# ``attention.ATTENTION_NAMES``). The modules that act on a name read their tuple here.
NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "TokenizerConfig": {"model_type": ("unigram", "bpe", "char", "word")},
    "TrainConfig": {"schedule": ("plateau", "warmup"), "precision": ("auto", "fp32", "bf16", "fp16"),
                    "device": DEVICES},
    "RulConfig": {"schedule": ("plateau", "cosine"), "device": DEVICES},
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
    for name, valid in NAMES.get(type(config).__name__, {}).items():
        if getattr(config, name) not in valid:
            raise ConfigError(f"{SECTIONS[type(config).__name__]}: unknown {name} {getattr(config, name)!r}; valid: "
                              f"{', '.join(valid)}")


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

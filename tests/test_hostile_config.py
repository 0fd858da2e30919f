"""Out-of-range numbers: every config field is checked against its interval when the record is made
(flags, a JSON file, code), and a flag that is no config field by its argparse type; either way one
line, exit status 2, and nothing written."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from support import assert_one_line_error, file_states, run_cli, tiny_data, train_args

from seq2seq.config import ModelConfig, RulConfig, SearchConfig, TokenizerConfig, TrainConfig
from seq2seq.config_checks import MAX_BEAM_SIZE, NAMES, RANGES, SECTIONS, from_dict
from seq2seq.errors import ConfigError

CLASSES = {cls.__name__: cls for cls in (TokenizerConfig, ModelConfig, TrainConfig, SearchConfig, RulConfig)}
OUT_OF_RANGE = [
    (ModelConfig, "embed_size", -1), (ModelConfig, "encoder_hidden", 0), (ModelConfig, "decoder_hidden", 10**9),
    (ModelConfig, "dropout", 1.5), (ModelConfig, "dropout", 1.0), (ModelConfig, "dropout", math.nan),
    (ModelConfig, "num_layers", 0), (ModelConfig, "max_source_length", 0),
    (TrainConfig, "epochs", -1), (TrainConfig, "epochs", 0), (TrainConfig, "max_minutes", -5.0),
    (TrainConfig, "max_minutes", math.inf), (TrainConfig, "learning_rate", -1e-3), (TrainConfig, "batch_tokens", 0),
    (TrainConfig, "label_smoothing", 1.0), (TrainConfig, "teacher_forcing", 1.5), (TrainConfig, "seed", -1),
    (SearchConfig, "beam_size", 0), (SearchConfig, "beam_size", MAX_BEAM_SIZE + 1), (SearchConfig, "beam_size", 10**9),
    (SearchConfig, "length_penalty", math.nan), (SearchConfig, "length_penalty", 1e308),
    (SearchConfig, "length_penalty", -1.0), (SearchConfig, "max_length_ratio", -1.0),
    (SearchConfig, "max_length_extra", 0),  # with max_length_ratio 0, every answer was empty and 'confident'
    (SearchConfig, "beam_patience", 0.5), (SearchConfig, "beam_patience", math.nan),
    (RulConfig, "window", 0), (RulConfig, "window", -3), (RulConfig, "rul_cap", 0), (RulConfig, "kernel_size", 4),
    (RulConfig, "window", 1001),  # longer than any C-MAPSS engine (543 cycles); 2,000 took 4 GB on FD001
    (RulConfig, "epochs", -1), (RulConfig, "max_minutes", -1.0), (RulConfig, "batch_size", 0),
    (RulConfig, "dropout", 2.0), (RulConfig, "lstm_hidden", 10**8),
    (TokenizerConfig, "vocab_size", 0), (TokenizerConfig, "vocab_size", 10**12),
]


@pytest.mark.parametrize(("cls", "field", "value"), OUT_OF_RANGE)
def test_a_value_outside_its_interval_is_a_one_line_config_error_naming_the_field(cls, field, value):
    with pytest.raises(ConfigError) as made:
        cls(**{field: value})
    with pytest.raises(ConfigError) as read:
        from_dict(cls, {field: value}, "x.json: section")
    for error in (made, read):
        assert "\n" not in str(error.value) and f"{field} must be" in str(error.value)
    assert str(read.value).startswith("x.json: section: ")


@pytest.mark.parametrize(("cls", "field", "value"), [
    (cls, field, value) for cls in (TokenizerConfig, TrainConfig, RulConfig)
    for field in NAMES[cls.__name__] for value in ("nope", "")])
def test_a_name_no_field_takes_is_a_one_line_config_error_when_the_record_is_made(cls, field, value):
    """A program's TrainConfig(schedule="cosine") was made, and failed only where the schedule was used."""
    with pytest.raises(ConfigError) as made:
        cls(**{field: value})
    assert str(made.value) == (f"{SECTIONS[cls.__name__]}: unknown {field} {value!r}; valid: "
                               f"{', '.join(NAMES[cls.__name__][field])}")
    assert all(cls(**{field: name}) for name in NAMES[cls.__name__][field])  # every name it lists is taken


@pytest.mark.parametrize(("critical", "degrading"), [(80, 80), (90, 80), (100, 0)])
def test_inverted_health_thresholds_are_refused(critical, degrading):
    with pytest.raises(ConfigError, match="degrading_below must be in \\(critical_below, "):
        RulConfig(critical_below=critical, degrading_below=degrading)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_default_lies_inside_its_interval(name):
    config = CLASSES[name]()
    assert set(RANGES[name]) <= {field.name for field in dataclasses.fields(config)}


@pytest.mark.parametrize("flags", [
    ["--dropout", "1.5"], ["--dropout", "nan"], ["--epochs", "-1"], ["--max-minutes", "-1"],
    ["--embed-size", "-4"], ["--layers", "0"], ["--batch-tokens", "0"], ["--learning-rate", "-1"],
    ["--vocab-size", "3"],
])
def test_train_refuses_an_out_of_range_flag_before_writing_anything(tmp_path, flags):
    output_dir = tmp_path / "run"
    result = run_cli("train", "--output-dir", str(output_dir), "--device", "cpu", *flags)
    assert_one_line_error(result, "must be in")
    assert not output_dir.exists()


@pytest.mark.parametrize("section, values", [
    ("model", {"dropout": 3}), ("train", {"epochs": -2}), ("model", {"embed_size": 10**10}),
])
def test_train_refuses_an_out_of_range_config_file_value_naming_the_file(tmp_path, section, values):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({section: values}), encoding="utf-8")
    result = run_cli("train", "--output-dir", str(tmp_path / "run"), "--config", str(config))
    assert_one_line_error(result, f"{config}: {section}: {next(iter(values))} must be in")


def test_copy_with_separate_vocabularies_is_refused_before_writing_anything(tmp_path):
    output_dir = tmp_path / "run"
    result = run_cli(*train_args(tiny_data(tmp_path / "data"), output_dir, "--copy", "--separate-vocab"))
    assert_one_line_error(result, "model.copy needs one vocabulary")
    assert not output_dir.exists()


@pytest.mark.parametrize("values", [{"window": 0}, {"critical_below": 90}, {"epochs": -1}, {"kernel_size": 2},
                                    {"validation_engines": 0},  # no engine to select the model on
                                    {"rul_cap": 10}, {"rul_cap": 80}])  # no engine would read as healthy
def test_rul_train_refuses_an_out_of_range_config_value(tmp_path, values):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"rul": values}), encoding="utf-8")
    result = run_cli("rul", "train", "--output-dir", str(tmp_path / "run"), "--config", str(config))
    line = assert_one_line_error(result, f"{config}: rul: ")
    assert "rul_cap" not in values or f"rul_cap ({values['rul_cap']}) must be above degrading_below (80)" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, words", [
    (["--batch-size", "0"], "argument --batch-size: must be in [1, "),
    (["--batch-size", "-1"], "argument --batch-size: must be in [1, "),
    (["--batch-size", "x"], "expected a whole number, got 'x'"),
    (["--batch-size", "\x1b[2J"], "got '\\x1b[2J'"),
    (["--beam-size", str(MAX_BEAM_SIZE + 1)], "argument --beam-size: must be in [1, 50]"),  # blamed on the flag
    (["--beam-size", "-1"], "argument --beam-size: must be in"),
    (["--beam-size", "0"], "argument --beam-size: must be in"),
    (["--length-penalty", "nan"], "argument --length-penalty: must be in"),
    (["--beam-patience", "0"], "argument --beam-patience: must be in [1, 10]"),
    (["--max-length-ratio", "-2"], "argument --max-length-ratio: must be in"),
    (["--n-best", "0"], "argument --n-best: must be in"),
    (["--beam-size", "2", "--n-best", "3"], "argument --n-best: must be in [1, beam_size], got 3 (beam_size is 2)"),
    (["--n-best", "51"], "argument --n-best: must be in [1, beam size], got 51 (beams are at most 50 wide)"),
])
def test_translate_on_stdin_refuses_an_out_of_range_number_before_loading_the_model(tmp_path, flags, words):
    model = tmp_path / "never-read.pt"
    result = run_cli("translate", "--model", str(model), *flags, stdin=b"pump vibration high\n")
    assert_one_line_error(result, words)
    assert result.stdout == ""


def test_an_unknown_choice_is_also_one_line(tmp_path):
    before = file_states(tmp_path / "x.pt")
    assert_one_line_error(run_cli("translate", "--model", str(tmp_path / "x.pt"), "--device", "tpu"), "--device")
    assert file_states(tmp_path / "x.pt") == before


# -- config files: what json reads but a run cannot use, and where a bad value came from ----------------------
def write_config(tmp_path, text: str | bytes):
    config = tmp_path / "config.json"
    config.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return config


@pytest.mark.parametrize("text, words", [
    ('{"train": {"epochs": 1' + "0" * 5000 + "}}", "line 1: invalid JSON (a number of 5001 digits; at most 4300)"),
    ('{"train":\n' + "[" * 50000 + "]" * 50000 + "}", "invalid JSON (arrays or objects nested more than"),
    ('{"train": {"learning_rate": 1' + "0" * 400 + "}}", "train: learning_rate is beyond the float range"),
    ('{"train": {"epochs": 1' + "0" * 400 + "}}", "train: epochs must be in [1, 100000], got a number of 401 digits"),
    ('{"train": {"epochs": 1, "epochs": 500}}', "train: key 'epochs' appears twice"),
    ('{"train": {}, "train": {"epochs": 5}}', "section 'train' appears twice"),
    ('{"rul": {"epochs": 3}}', "section 'rul' is not read by seq2seq train (it reads 'model', 'train'"),
    ('{"train": {"epochs": null}}', "train: epochs must be a number, got null"),
    ('{"model": {"attention": "luong"}}', "model: unknown attention 'luong'; valid: bahdanau"),
    ('{"train": {"device": "tpu"}}', "train: unknown device 'tpu'; valid: auto, cpu, cuda"),
    ('{"train": {"schedule": "cosine"}}', "train: unknown schedule 'cosine'; valid: plateau, warmup"),
    ('{"train": {"precision": "int8"}}', "train: unknown precision 'int8'; valid: auto"),
    ('{"tokenizer": {"model_type": "wordpiece"}}', "tokenizer: unknown model_type 'wordpiece'; valid: unigram"),
    ('{"Train": {"epochs": 1}}', "expected an object with sections model, rul, search, tokenizer, train (unknown "
                                 "section 'Train')"),
    # set by the tokenizer: it was replaced by the vocabulary's size without a word
    ('{"model": {"src_vocab_size": 50}}', "model.src_vocab_size is the tokenizer's vocabulary size, set at training "
                                          "time; set tokenizer.vocab_size instead"),
    # rules between fields, met when the model or run is made: the file was not named
    ('{"model": {"attention": "luong-dot", "decoder_hidden": 100}}', "luong-dot scores h_t . h_s and needs "
                                                                     "decoder_hidden (100) == 2 x encoder_hidden"),
    ('{"model": {"tie_embeddings": true, "embed_size": 64}}', "model: tie_embeddings needs embed_size (64) =="),
    ('{"train": {"distill": true}}', "train: distill needs members of at least 2"),
])
def test_a_config_file_fault_is_one_line_naming_the_file_and_nothing_is_written(tmp_path, text, words):
    config = write_config(tmp_path, text)
    result = run_cli("train", "--output-dir", str(tmp_path / "run"), "--config", str(config), "--device", "cpu")
    assert_one_line_error(result, f"{config}: ", words)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("text, words", [
    ('{"train": {"epochs": 3}, "model": {}}', "section 'train' is not read by seq2seq rul train (it reads 'rul')"),
    ('{"rul": {"device": "tpu"}}', "rul: unknown device 'tpu'"),
    ('{"rul": {"epochs": 2, "epochs": 3}}', "rul: key 'epochs' appears twice"),
    ('{"rul": [1, 2]}', "section rul must be an object of rul fields"),
    ('{"rul": [["epochs", 1]]}', "section rul must be an object of rul fields"),  # pairs dict() would have taken
    ('{"rul": null}', "section rul must be an object of rul fields"),
])
def test_rul_train_refuses_a_config_file_fault_naming_the_file(tmp_path, text, words):
    config = write_config(tmp_path, text)
    result = run_cli("rul", "train", "--output-dir", str(tmp_path / "run"), "--config", str(config))
    assert_one_line_error(result, f"{config}: ", words)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", [["train"], ["rul", "train"]])
def test_a_config_that_is_a_folder_is_one_line(tmp_path, command):
    result = run_cli(*command, "--output-dir", str(tmp_path / "run"), "--config", str(tmp_path))
    assert_one_line_error(result, f"{tmp_path}: is a directory, not a file")


def test_a_config_file_with_a_byte_order_mark_is_read_as_data_files_are(tmp_path):
    from seq2seq.config_file import load_config_file

    config = write_config(tmp_path, b"\xef\xbb\xbf" + json.dumps({"train": {"epochs": 3}}).encode())
    assert load_config_file(config) == {"train": {"epochs": 3}}


@pytest.mark.parametrize("flags, words", [
    (["--epochs", "-1"], "argument --epochs: must be in [1, 100000], got -1"),
    (["--dropout", "1.5"], "argument --dropout: must be in [0, 1), got 1.5"),
    (["--learning-rate", "inf"], "argument --learning-rate: must be in [0, 10], got inf"),
])
def test_a_bad_flag_is_blamed_on_the_flag_not_on_the_config_file(tmp_path, flags, words):
    config = write_config(tmp_path, json.dumps({"train": {"epochs": 2}}))
    for with_config in ([], ["--config", str(config)]):
        result = run_cli("train", "--output-dir", str(tmp_path / "run"), *with_config, *flags)
        line = assert_one_line_error(result, words)
        assert str(config) not in line and "options" not in line


@pytest.mark.parametrize("command, section, flags", [
    (["train"], "train", ["--epochs", "2"]), (["train"], "model", ["--dropout", "0.1"]),
    (["rul", "train"], "rul", ["--epochs", "2"]),
], ids=["train-epochs", "model-dropout", "rul-epochs"])
def test_a_config_file_value_a_flag_overrides_is_still_checked_and_named_with_its_file(tmp_path, command, section,
                                                                                     flags):
    """The file is kept for the next run, which may not pass the flag; its fault is named now, not then."""
    key = flags[0].removeprefix("--")
    config = write_config(tmp_path, json.dumps({section: {key: -7}}))
    result = run_cli(*command, "--output-dir", str(tmp_path / "run"), "--config", str(config), *flags)
    assert_one_line_error(result, f"{config}: {section}: {key} must be in ")
    assert not (tmp_path / "run").exists()


def test_rul_flags_are_blamed_on_the_flag(tmp_path):
    config = write_config(tmp_path, json.dumps({"rul": {"epochs": 2}}))
    result = run_cli("rul", "train", "--output-dir", str(tmp_path / "run"), "--config", str(config), "--epochs", "0")
    assert_one_line_error(result, "argument --epochs: must be in [1, 100000], got 0")
    result = run_cli("rul", "evaluate", "--model", "x.pt", "--test", "t.txt", "--rul", "r.txt", "--cap", str(10**23))
    assert_one_line_error(result, "argument --cap: ")


def test_rul_without_a_subcommand_names_the_subcommands_not_an_internal_name():
    result = run_cli("rul")
    line = assert_one_line_error(result, "train", "evaluate", "alerts")
    assert "rul_command" not in line

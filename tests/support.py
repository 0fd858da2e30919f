"""What the tests share besides fixtures: thirty tiny alert/recommendation pairs, the scripts as
modules, untrained tiny model configs, incident-log files, the UI launched on a free port, and tiny
translators trained through ``seq2seq.cli.main`` once per test session.

Training dominates the cost of the CLI, recommender and comparison tests, so each attention type
is trained at most once per session (under pytest's session temporary folder) and shared; a test
that changes a run's files works on a copy. ``run_cli`` runs the CLI in process, the way a shell
would: stdin from bytes, stdout and stderr captured, argparse's exit turned into a status.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib.util
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pytest
import torch

import gradio_app
from seq2seq.attention import ATTENTION_NAMES
from seq2seq.cli import main
from seq2seq.config import ModelConfig, TokenizerConfig
from seq2seq.data import source_batch
from seq2seq.rul.cmapss import write_cmapss, write_rul
from seq2seq.rul.synthetic import synthetic_engines, synthetic_test_set
from seq2seq.serving.smoke import free_port

TINY_PAIRS = (
    ("pump vibration high", "inspect pump bearings"),
    ("pump pressure low", "check pump inlet for blockage"),
    ("pump temperature high", "check pump cooling and lubrication"),
    ("pump flow low", "inspect pump impeller"),
    ("motor temperature high", "check motor cooling fan"),
    ("motor current high", "inspect motor windings"),
    ("motor vibration high", "check motor alignment and mounting bolts"),
    ("motor speed low", "inspect motor drive belt"),
    ("fan vibration high", "balance fan blades"),
    ("fan speed low", "replace fan belt"),
    ("fan noise high", "lubricate fan bearings"),
    ("valve leak detected", "replace valve seal"),
    ("valve stuck open", "inspect valve actuator"),
    ("valve stuck closed", "clean valve seat"),
    ("valve pressure high", "check valve setting"),
    ("compressor pressure high", "check compressor discharge valve"),
    ("compressor temperature high", "clean compressor cooler"),
    ("compressor oil low", "top up compressor oil"),
    ("compressor vibration high", "inspect compressor mounts"),
    ("bearing temperature high", "lubricate bearing"),
    ("bearing noise high", "replace bearing"),
    ("filter pressure high", "replace filter"),
    ("filter clogged", "clean filter element"),
    ("belt slipping", "tighten belt"),
    ("belt worn", "replace belt"),
    ("oil level low", "top up oil"),
    ("oil pressure low", "check oil pump"),
    ("coolant level low", "top up coolant"),
    ("coolant temperature high", "check coolant pump and radiator"),
    ("gearbox noise high", "inspect gearbox teeth"),
)

TINY_TOKENIZER_CONFIG = TokenizerConfig(vocab_size=60)
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str):
    """``scripts/NAME.py`` imported as module NAME (the scripts folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    spec.loader.exec_module(module)
    return module


MAX_SOURCE_LENGTH = 10  # pieces; small, so that an over-long alert is easy to write
EPOCHS = 3
TINY_CONFIG = {
    "model": {"embed_size": 16, "encoder_hidden": 16, "decoder_hidden": 32, "attention_hidden": 16,
              "max_source_length": MAX_SOURCE_LENGTH},
    "train": {"batch_tokens": 60, "learning_rate": 0.01},
    "tokenizer": {"vocab_size": 80},
}


@dataclass(frozen=True)
class CliResult:
    status: int
    stdout: str
    stderr: str

    @property
    def stdout_lines(self) -> list[str]:
        return self.stdout.split("\n")[:-1] if self.stdout else []

    @property
    def error_lines(self) -> list[str]:
        """Non-blank stderr lines (progress bars end in carriage returns, not newlines)."""
        return [line for line in self.stderr.splitlines() if line.strip()]


@dataclass(frozen=True)
class TinyData:
    train: Path  # TINY_PAIRS four times (120 pairs)
    dev: Path  # TINY_PAIRS once
    config: Path  # TINY_CONFIG as JSON


@dataclass(frozen=True)
class TinyRun:
    output_dir: Path
    data: TinyData
    result: CliResult  # of the training command

    @property
    def best(self) -> Path:
        return self.output_dir / "best.pt"

    @property
    def last(self) -> Path:
        return self.output_dir / "last.pt"


def run_cli(*argv: str, stdin: bytes = b"") -> CliResult:
    """``seq2seq.cli.main(argv)`` with ``stdin`` as its standard input; status, stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status = main(list(argv))
            except SystemExit as exit:  # argparse
                status = exit.code if isinstance(exit.code, int) else 1
    finally:
        sys.stdin = saved_stdin
    return CliResult(status, stdout.getvalue(), stderr.getvalue())


def cli_in_process(command: list[str], stdout: int, stderr: TextIO, text: bool) -> subprocess.CompletedProcess:
    """``subprocess.run`` of ``python -m seq2seq ARGS`` as a script calls it (its stderr to a file), run in this
    process by ``seq2seq.cli.main``."""
    assert command[1:3] == ["-m", "seq2seq"] and stdout == subprocess.PIPE and text
    result = run_cli(*command[3:])
    stderr.write(result.stderr)
    return subprocess.CompletedProcess(command, result.status, result.stdout)


def tsv(pairs, header=("source", "target")) -> str:
    return "".join("\t".join(row) + "\n" for row in [header, *pairs])


def tiny_data(folder: Path) -> TinyData:
    """The tiny training, dev and config files in ``folder`` (written once)."""
    data = TinyData(folder / "train.tsv", folder / "dev.tsv", folder / "config.json")
    if not data.config.exists():
        folder.mkdir(parents=True, exist_ok=True)
        data.train.write_text(tsv(TINY_PAIRS * 4), encoding="utf-8")
        data.dev.write_text(tsv(TINY_PAIRS), encoding="utf-8")
        data.config.write_text(json.dumps(TINY_CONFIG), encoding="utf-8")
    return data


def train_args(data: TinyData, output_dir: Path, *extra: str) -> list[str]:
    """A ``train`` command line on the tiny data (CPU, default seed); ``extra`` adds or overrides options."""
    return ["train", "--train", str(data.train), "--dev", str(data.dev), "--config", str(data.config),
            "--output-dir", str(output_dir), "--device", "cpu", "--epochs", str(EPOCHS), *extra]


@contextlib.contextmanager
def training_threads():
    """Tiny training on one intra-op thread, whatever the calling test set: a run compared bit for
    bit with the shared one (``--resume``) must sum in the same order (1 and 2 threads differ in
    the last bits), and the shared run may be trained first by a one-thread test module."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


_RUNS: dict[tuple[Path, str], TinyRun] = {}


def trained(root: Path, attention: str = "bahdanau") -> TinyRun:
    """A run of ``EPOCHS`` epochs with ``attention`` under ``root``, trained on first use only."""
    key = (root, attention)
    if key not in _RUNS:
        data = tiny_data(root / "tiny-data")
        output_dir = root / f"tiny-{attention}"
        with training_threads():
            result = run_cli(*train_args(data, output_dir, "--attention", attention))
        assert result.status == 0, result.stderr
        _RUNS[key] = TinyRun(output_dir, data, result)
    return _RUNS[key]


RUL_CONFIG = {"rul": {"conv_channels": 8, "lstm_hidden": 8, "attention_hidden": 8, "epochs": 12, "batch_size": 128,
                      "validation_engines": 5, "learning_rate": 0.005}}
DRIFT_UNIT, DRIFT_SENSOR = 1, "T30"


@dataclass(frozen=True)
class TinyRul:
    output_dir: Path
    train: Path  # C-MAPSS-format synthetic history, unit DRIFT_UNIT with an extra DRIFT_SENSOR drift
    test: Path  # truncated histories
    rul: Path  # their true remaining lives
    config: Path
    result: CliResult


def trained_rul(root: Path) -> TinyRul:
    """A tiny RUL model trained through ``seq2seq rul train`` on 30 synthetic engines, once per session."""
    folder = root / "tiny-rul"
    run = TinyRul(folder / "run", folder / "train_SYN.txt", folder / "test_SYN.txt", folder / "RUL_SYN.txt",
                  folder / "config.json", CliResult(0, "", ""))
    if (run.output_dir / "best.pt").is_file():
        return run
    folder.mkdir(parents=True, exist_ok=True)
    write_cmapss(run.train, synthetic_engines(30, seed=3, min_life=130, max_life=200,
                                              drift={DRIFT_UNIT: {DRIFT_SENSOR: 12.0}}))
    test_engines, true_rul = synthetic_test_set(10, seed=3, min_life=130, max_life=200)
    write_cmapss(run.test, test_engines)
    write_rul(run.rul, true_rul)
    run.config.write_text(json.dumps(RUL_CONFIG), encoding="utf-8")
    with training_threads():  # one thread: under OMP_WAIT_POLICY=PASSIVE (set by gradio_app) two are 3x slower
        result = run_cli("rul", "train", "--data", str(run.train), "--output-dir", str(run.output_dir),
                         "--config", str(run.config), "--device", "cpu")
    assert result.status == 0, result.stderr
    return TinyRul(run.output_dir, run.train, run.test, run.rul, run.config, result)


# -- untrained tiny models ------------------------------------------------------------------------
V = 17  # vocabulary size of the untrained tiny models


def tiny_config(attention: str = "bahdanau", **changes) -> ModelConfig:
    return dataclasses.replace(
        ModelConfig(attention=attention, embed_size=6, encoder_hidden=4, decoder_hidden=8, attention_hidden=5,
                    dropout=0.0, src_vocab_size=V, tgt_vocab_size=V), **changes)


def sample_batch(lengths=(5, 3, 1), seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = [torch.randint(4, V, (n,), generator=generator).tolist() for n in lengths]
    return source_batch(ids)


VARIANTS = [(name, feeding) for name in ATTENTION_NAMES for feeding in (True, False)
            if name.startswith("luong-") or feeding]  # (attention, input feeding) pairs a model can have


# -- incident logs ----------------------------------------------------------------------------------
LOG_ALERTS = ["pump vibration high", "belt worn", "valve stuck closed", "coolant temperature high",
              "oil level low", "fan speed low", "filter clogged"]
LOG_NOTES = ['plain', 'a, comma', 'say "hi"', 'two\nlines', 'tab\there', '1/2" bolt', '']  # one per alert


def write_csv(path: Path, rows: list[list[str]], header=("id", "source", "note")) -> Path:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *rows])
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def csv_input(tmp_path: Path) -> Path:
    rows = [[str(i), alert, note] for i, (alert, note) in enumerate(zip(LOG_ALERTS, LOG_NOTES, strict=True))]
    return write_csv(tmp_path / "in.csv", rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as file:  # as a spreadsheet reads it: a leading mark is no text
        return list(csv.DictReader(file))


def assert_same_rows(rows: list[dict], expected: list[dict]) -> None:
    """Equal rows, the scores up to float rounding (a product over 1 or 64 rows, or on 1 or 2
    threads, may round differently in the last bit, which can move a 4th decimal)."""
    assert [{k: v for k, v in row.items() if k != "score"} for row in rows] == \
           [{k: v for k, v in row.items() if k != "score"} for row in expected]
    for row, first in zip(rows, expected, strict=True):
        assert (row["score"] in ("", None)) == (first["score"] in ("", None))
        if row["score"] not in ("", None):
            assert float(row["score"]) == pytest.approx(float(first["score"]), abs=2e-4)


# -- the UI -----------------------------------------------------------------------------------------
UI_ALERTS = ["pump vibration high", "fan speed low", "valve leak detected"]


def launch(demo) -> str:
    """Serve ``demo`` on a free loopback port without blocking; its URL."""
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True,
                            quiet=True, max_file_size=gradio_app.MAX_FILE_SIZE)
    return url


# -- hostile input ----------------------------------------------------------------------------------
def call_endpoint(http, url: str, endpoint: str, data: list) -> tuple[str, object]:
    """POST /gradio_api/call/ENDPOINT with ``data`` as a program writes it, then read its event stream: the last
    event's kind and data; a join the app refuses gives (its HTTP status, (its JSON, its Retry-After))."""
    base = url.rstrip("/")
    joined = http.post(f"{base}/gradio_api/call/{endpoint}", json={"data": data})
    if joined.status_code != 200:
        return str(joined.status_code), (joined.json(), joined.headers.get("retry-after"))
    kind = payload = None
    for line in http.get(f"{base}/gradio_api/call/{endpoint}/{joined.json()['event_id']}").text.splitlines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            payload = json.loads(line[6:])
    return kind, payload


def assert_one_line_error(result: CliResult, *words: str) -> str:
    """The result is ``seq2seq: error: ...`` on one stderr line (no traceback) with exit status 2, naming ``words``.

    Lines count as a terminal shows them: a progress bar overwritten by a carriage return is gone."""
    assert result.status == 2, (result.status, result.stderr)
    seen = [text for line in result.stderr.split("\n") if (text := line.rsplit("\r", 1)[-1]).strip()]
    assert len(seen) == 1, result.stderr
    line = seen[0]
    assert line.startswith("seq2seq: error: "), line
    for word in words:
        assert word in line, (word, line)
    return line


def file_states(*paths: Path) -> dict[Path, bytes | None]:
    """The bytes of each path (None when absent), to assert afterwards that a refused job changed nothing."""
    return {path: path.read_bytes() if path.is_file() else None for path in paths}

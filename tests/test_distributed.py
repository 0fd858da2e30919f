"""Training and file translation split across processes by torchrun (seq2seq/distributed.py).

The torchrun tests start two gloo processes on the CPU (``--standalone`` picks a free loopback
port); the rest check the sharding rules and the refusals without starting any process group.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import support
import torch
import torch.distributed as dist
from support import TINY_PAIRS, CliResult, TinyData, file_states, run_cli, tiny_data, train_args, trained, tsv
from torch.nn.parallel import DistributedDataParallel

from seq2seq.checkpoint import load_model
from seq2seq.cli.common import read_corpus
from seq2seq.config import ModelConfig, TokenizerConfig, TrainConfig
from seq2seq.config_checks import from_dict
from seq2seq.corpus import read_parallel
from seq2seq.data import ParallelDataset, TokenBatchSampler
from seq2seq.distributed import World, close
from seq2seq.errors import ConfigError
from seq2seq.files import held_folder
from seq2seq.recommender import Recommender
from seq2seq.runs import build_trainer

PROCESSES = 2
EPOCHS = 2
ROWS = 2100  # three chunks of 1024 rows: rank 0 translates one, rank 1 two
TORCHRUN_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def torchrun(cwd: Path, *argv: str) -> CliResult:
    """``torchrun --standalone --nproc_per_node=2 -m seq2seq ARGV`` with this interpreter, one thread per process."""
    env = {key: value for key, value in os.environ.items() if key not in TORCHRUN_ENV}
    env["OMP_NUM_THREADS"] = "1"  # what torchrun would set, said here so that it does not warn about it
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={PROCESSES}",
               "-m", "seq2seq", *argv]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    return CliResult(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> tuple[TinyData, Path, CliResult]:
    """The tiny data, and a tiny model trained for EPOCHS epochs by two processes."""
    root = tmp_path_factory.mktemp("ddp")
    data = tiny_data(root / "data")
    output_dir = root / "run"
    result = torchrun(root, *train_args(data, output_dir, "--epochs", str(EPOCHS)))
    assert result.status == 0, result.stderr
    return data, output_dir, result


# Sharding rules


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_shards_of_an_epoch_are_disjoint_equal_and_cover_all_but_a_short_tail(size):
    lengths = torch.randint(2, 30, (300,), generator=torch.Generator().manual_seed(size)).tolist()
    plan = list(TokenBatchSampler(lengths, 120, shuffle=True, generator=torch.Generator().manual_seed(7)))
    shards = [World(rank, rank, size).shard(plan) for rank in range(size)]
    taken = [tuple(batch) for shard in shards for batch in shard]
    assert len(set(taken)) == len(taken)  # no batch twice
    assert {len(shard) for shard in shards} == {len(plan) // size}  # the same number of steps everywhere
    assert set(taken) == {tuple(batch) for batch in plan[:len(plan) - len(plan) % size]}
    assert World().shard(plan) == plan


@pytest.mark.parametrize("total", [0, 1, 1023, 1024, 1025, 5000])
@pytest.mark.parametrize("size", [1, 2, 3])
def test_shares_of_a_file_are_contiguous_whole_chunks_in_rank_order(total, size):
    shares = [World(rank, rank, size).share(total, 1024) for rank in range(size)]
    rows = [row for share in shares for row in range(total)[share]]
    assert rows == list(range(total))
    assert all(share.start % 1024 == 0 for share in shares)
    assert shares[-1].stop is None  # rows beyond a miscount still belong to the last process


# Training


@pytest.mark.slow
def test_two_processes_write_one_checkpoint_that_loads_and_translates(ddp_run):
    _, output_dir, result = ddp_run
    assert sorted(path.name for path in output_dir.iterdir()) == ["best.pt", "last.pt", "metrics.jsonl"]
    validations = (output_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["epoch"] for line in validations] == list(range(1, EPOCHS + 1))  # written once each
    assert len(result.stdout_lines) == 1 and json.loads(result.stdout)["stopped"] == "epochs"
    assert "Warning" not in result.stderr
    recommender = Recommender.from_checkpoint(output_dir / "best.pt")
    assert len(recommender.translate(["pump vibration high", "fan speed low"])) == 2


def test_each_process_takes_its_half_of_every_epochs_batches(ddp_run):
    data, output_dir, result = ddp_run
    model, tokenizer, payload = load_model(output_dir / "last.pt")
    config = from_dict(TrainConfig, payload["train_config"])
    dataset = ParallelDataset(read_parallel(str(data.train), None, None, None).examples, tokenizer,
                              model.config.max_source_length, config.max_target_length)
    sampler = TokenBatchSampler(dataset.batch_lengths(), config.batch_tokens, shuffle=True,
                                generator=torch.Generator().manual_seed(config.seed + 1))
    batches_per_epoch = [len(list(sampler)) for _ in range(EPOCHS)]
    assert json.loads(result.stdout)["steps"] == sum(count // PROCESSES for count in batches_per_epoch)
    assert payload["training_state"]["world_size"] == PROCESSES


def test_a_run_of_several_processes_is_not_resumed(ddp_run, tmp_path):
    data, output_dir, _ = ddp_run
    copy = tmp_path / "run"
    shutil.copytree(output_dir, copy)
    result = run_cli(*train_args(data, copy, "--resume"))
    assert result.status == 2 and len(result.error_lines) == 1
    assert f"written by {PROCESSES} processes" in result.stderr


def test_resume_is_refused_under_torchrun(ddp_run, tmp_path):
    data, _, _ = ddp_run
    train = read_parallel(str(data.train), None, None, None)
    with pytest.raises(ConfigError, match="not under torchrun"):
        build_trainer(train, train, tmp_path, ModelConfig(), TrainConfig(), TokenizerConfig(), resume=True,
                      world=World(rank=0, local_rank=0, size=PROCESSES))


@pytest.mark.slow
@pytest.mark.parametrize("case", ["existing-run", "one-batch"])
def test_a_start_refused_under_torchrun_ends_every_process_with_the_same_line(ddp_run, tmp_path, case):
    """An existing run in OUTPUT_DIR (checked by rank 0: rank 1 died in a gloo broadcast), or fewer batches
    in an epoch than processes (each would train no step and the run would pass for trained)."""
    data, output_dir, _ = ddp_run
    run = tmp_path / "run"
    if case == "existing-run":
        shutil.copytree(output_dir, run)
        argv = train_args(data, run)
    else:
        one = tmp_path / "one.tsv"
        one.write_text(tsv(TINY_PAIRS[:1]), encoding="utf-8")
        argv = [*train_args(data, run), "--train", str(one)]
    before = file_states(*(run / name for name in ("best.pt", "last.pt", "metrics.jsonl")))
    result = torchrun(tmp_path, *argv)
    errors = [line for line in result.stderr.splitlines() if line.startswith("seq2seq: error: ")]
    assert len(errors) == PROCESSES and len(set(errors)) == 1, result.stderr
    assert ("already holds a training run" if case == "existing-run" else "fewer than the 2 processes") in errors[0]
    assert "Traceback" not in result.stderr.split("torch/distributed/elastic")[0]  # before torchrun's own report
    assert file_states(*before) == before


@pytest.mark.slow
def test_a_folder_another_run_is_writing_is_refused_on_every_process(ddp_run, tmp_path):
    """Two runs into one folder interleaved their files; under torchrun the first process holds it for all."""
    data, _, _ = ddp_run
    run = tmp_path / "run"
    with held_folder(run):  # another run, writing there now
        result = torchrun(tmp_path, *train_args(data, run))
        assert result.status != 0
        errors = [line for line in result.stderr.splitlines() if line.startswith("seq2seq: error: ")]
        assert len(errors) == PROCESSES and len(set(errors)) == 1, result.stderr
        assert "another training run is writing there now" in errors[0]
        assert list(run.iterdir()) == []


@pytest.mark.parametrize(("rank", "warned"), [("0", True), ("1", False)])
def test_skipped_pairs_are_reported_by_the_first_process_alone(tmp_path, monkeypatch, capsys, rank, warned):
    data = tmp_path / "pairs.tsv"
    data.write_text(tsv([*TINY_PAIRS[:2], ("", "replace pump")]), encoding="utf-8")
    monkeypatch.setenv("RANK", rank)  # as torchrun sets it: every process reads the file alike
    read_corpus(str(data), None, argparse.Namespace(source_column=None, target_column=None))
    assert ("skipped 1 of 3 pairs" in capsys.readouterr().err) == warned


# Translating a file


@pytest.mark.slow
def test_two_processes_translate_a_file_into_the_bytes_of_one(ddp_run, tmp_path, one_thread):
    _, output_dir, _ = ddp_run
    alerts = [(source, str(number)) for number, (source, _) in enumerate(TINY_PAIRS * (ROWS // len(TINY_PAIRS)))]
    alerts[1500] = ("", "1500")  # a row with an error, in rank 1's share
    (tmp_path / "alerts.tsv").write_text(tsv(alerts, ("alert", "id")), encoding="utf-8")
    common = ["translate", "--model", str(output_dir / "best.pt"), "--input", str(tmp_path / "alerts.tsv"),
              "--column", "alert"]
    split = torchrun(tmp_path, *common, "--output", "two.tsv", "--attention-out", "two.jsonl")
    assert split.status == 0, split.stderr
    single = run_cli(*common, "--output", str(tmp_path / "one.tsv"), "--attention-out", str(tmp_path / "one.jsonl"))
    assert single.status == 0, single.stderr
    assert (tmp_path / "two.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    assert f"two.tsv: {ROWS} rows: {ROWS - 1} translated" in split.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == [  # the parts are gone; each job keeps its record
        "alerts.tsv", "one.jsonl", "one.tsv", "one.tsv.job.json", "two.jsonl", "two.tsv", "two.tsv.job.json"]


@pytest.mark.slow
def test_a_split_job_stopped_by_a_bad_row_gives_the_advice_of_one_process_and_the_advice_works(ddp_run, tmp_path,
                                                                                              one_thread, monkeypatch):
    _, output_dir, _ = ddp_run
    monkeypatch.chdir(tmp_path)
    good = "".join(f"{number}\t{TINY_PAIRS[number % len(TINY_PAIRS)][0]}\n" for number in range(ROWS))
    source = tmp_path / "alerts.tsv"
    lines = good.splitlines(keepends=True)
    lines[1500] = "1500\tone field too many\tx\n"  # in rank 1's share: file line 1502
    source.write_text("id\talert\n" + "".join(lines), encoding="utf-8")
    common = ["translate", "--model", str(output_dir / "best.pt"), "--input", "alerts.tsv", "--column", "alert",
              "--output", "out.tsv"]
    split = torchrun(tmp_path, *common)
    errors = [line for line in split.stderr.splitlines() if line.startswith("seq2seq: error: ")]
    assert len(errors) == PROCESSES and len(set(errors)) == 1, split.stderr
    assert errors[0].startswith("seq2seq: error: alerts.tsv: line 1502: ")
    kept = len((tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()) - 1
    assert kept == 1024 and "out.tsv keeps its first 1024 rows: fix the input, then delete out.tsv and " \
                             "out.tsv.job.json to start again" in errors[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["alerts.tsv", "out.tsv", "out.tsv.job.json"]
    source.write_text("id\talert\n" + good, encoding="utf-8")
    for name in ("out.tsv", "out.tsv.job.json"):
        (tmp_path / name).unlink()
    again = run_cli(*common)
    assert again.status == 0, again.stderr


@pytest.mark.slow
def test_two_processes_evaluate_as_one(ddp_run, tmp_path, one_thread):
    """Each process translates its share of the file; rank 0 alone scores all of it and prints."""
    data, output_dir, _ = ddp_run
    common = ["evaluate", "--model", str(output_dir / "best.pt"), "--data", str(data.train), "--json",
              "--batch-size", "16"]
    split = torchrun(tmp_path, *common, "--hypotheses", "two.txt")
    assert split.status == 0, split.stderr
    single = run_cli(*common, "--hypotheses", str(tmp_path / "one.txt"))
    assert single.status == 0, single.stderr
    assert len(split.stdout_lines) == 1 and json.loads(split.stdout) == json.loads(single.stdout)
    assert json.loads(single.stdout)["n"] == 4 * len(TINY_PAIRS)
    assert (tmp_path / "two.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()


def test_translate_under_torchrun_refuses_resume_and_stdin(ddp_run, tmp_path, monkeypatch):
    _, output_dir, _ = ddp_run
    monkeypatch.setenv("WORLD_SIZE", str(PROCESSES))  # refused before any process group is joined
    model = ["translate", "--model", str(output_dir / "best.pt")]
    resumed = run_cli(*model, "--input", "alerts.txt", "--output", "out.txt", "--resume")
    assert resumed.status == 2 and "resumed in one process" in resumed.stderr
    piped = run_cli(*model, stdin=b"pump vibration high\n")
    assert piped.status == 2 and "needs --input" in piped.stderr


@pytest.mark.slow
@pytest.mark.parametrize("clash", [["--output", "alerts.tsv"],
                                   ["--output", "out.tsv", "--attention-out", "./alerts.tsv"],
                                   ["--output", "out.tsv", "--attention-out", "out.tsv.job.json"]],
                         ids=["output-is-input", "attention-is-input", "attention-is-the-record"])
def test_a_destination_refused_by_rank_0_ends_every_process_with_the_same_line(tmp_path_factory, tmp_path, clash):
    """Rank 0 checks the destinations; the others learn its refusal instead of waiting for it at a barrier."""
    model = trained(tmp_path_factory.getbasetemp()).best
    source = tmp_path / "alerts.tsv"
    source.write_text(tsv(TINY_PAIRS[:4], ("alert", "id")), encoding="utf-8")
    before = file_states(source)
    result = torchrun(tmp_path, "translate", "--model", str(model), "--input", "alerts.tsv", "--column", "alert",
                      *clash)  # a hang would end in subprocess.TimeoutExpired
    assert result.status != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("seq2seq: error: ")]
    assert len(errors) == PROCESSES and len(set(errors)) == 1, result.stderr
    assert "each file a job writes must be a file of its own" in errors[0]
    assert "ChildFailedError" in result.stderr  # torchrun's own report that its processes exited with an error
    assert file_states(source) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["alerts.tsv"]  # no part, output or record


@pytest.mark.slow
def test_an_input_where_a_process_would_write_its_part_is_refused_before_anything_is_deleted(tmp_path_factory,
                                                                                            tmp_path):
    model = trained(tmp_path_factory.getbasetemp()).best
    source = tmp_path / ".out.part1.tsv"  # where process 1 writes its share of out.tsv
    source.write_text(tsv(TINY_PAIRS[:4], ("alert", "id")), encoding="utf-8")
    before = file_states(source)
    result = torchrun(tmp_path, "translate", "--model", str(model), "--input", source.name, "--column", "alert",
                      "--output", "out.tsv")
    errors = [line for line in result.stderr.splitlines() if line.startswith("seq2seq: error: ")]
    assert len(errors) == PROCESSES and len(set(errors)) == 1, result.stderr
    assert "is --input, and a process of this job writes its share of" in errors[0]
    assert file_states(source) == before


def test_closing_the_group_first_frees_a_ddp_model_left_as_cyclic_garbage(tmp_path):
    """A trainer and its DDP model refer to each other, so the model outlives its function until a collection.
    Freed only at the interpreter's exit, after the group, it tore Gloo's threads down mid-finalisation and the
    process aborted now and then ("terminate called without an active exception")."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        holder: dict = {"model": DistributedDataParallel(torch.nn.Linear(2, 2))}
        holder["self"] = holder  # the cycle
        model = weakref.ref(holder["model"])
        del holder
        close()
        assert model() is None and not dist.is_initialized()
    finally:
        if dist.is_initialized():  # the rest of the session runs without a group
            dist.destroy_process_group()


TORCHRUN_GIVEN = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                  "MASTER_PORT": "29701"}


@pytest.mark.parametrize("env", [{"WORLD_SIZE": "2"}, {"WORLD_SIZE": "two"}, TORCHRUN_GIVEN],
                         ids=["world-size-alone", "not-a-number", "all-but-torchrun-s-run-id"])
@pytest.mark.parametrize("command", ["train", "evaluate", "translate"])
def test_a_world_size_set_without_torchrun_is_one_line_not_a_traceback_or_a_wait(env, command, tmp_path_factory,
                                                                                 tmp_path, monkeypatch):
    """WORLD_SIZE left in a shell: a KeyError traceback; with the rank and the address given by hand too, a wait for
    peers that never come, which neither Ctrl-C nor SIGTERM ended."""
    data, model = tiny_data(tmp_path / "data"), trained(tmp_path_factory.getbasetemp()).best  # before the setting
    for name in (*TORCHRUN_ENV, "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = {"train": train_args(data, tmp_path / "run"),
            "evaluate": ["evaluate", "--model", str(model), "--data", str(data.dev)],
            "translate": ["translate", "--model", str(model), "--input", str(data.dev), "--output",
                          str(tmp_path / "out.tsv")]}[command]
    said = f"WORLD_SIZE={env['WORLD_SIZE']!r}" if env["WORLD_SIZE"] == "two" else \
        "WORLD_SIZE=2 is set, but this process was not started by torchrun"
    line = support.assert_one_line_error(run_cli(*argv), said)
    assert "unset" in line and not (tmp_path / "out.tsv").exists()


@pytest.mark.parametrize("argv", [["rul", "train", "--output-dir", "rul"], ["average", "--inputs", "a.pt", "b.pt",
                                                                           "--output", "avg.pt"]])
def test_a_command_that_runs_in_one_process_is_refused_under_torchrun(argv, tmp_path, monkeypatch):
    """Each process trained the same RUL model into the same folder, its files written by two at once."""
    monkeypatch.chdir(tmp_path)
    for name, value in {**TORCHRUN_GIVEN, "TORCHELASTIC_RUN_ID": "x"}.items():
        monkeypatch.setenv(name, value)
    support.assert_one_line_error(run_cli(*argv), f"{argv[0]} runs in one process, not under torchrun (2 processes)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_an_empty_input_split_by_torchrun_is_refused_leaving_no_job_record(tmp_path_factory, tmp_path):
    """One process refuses it before writing anything; split, rank 0 had written the job's record first."""
    model = trained(tmp_path_factory.getbasetemp()).best
    (tmp_path / "empty.tsv").write_bytes(b"")
    result = torchrun(tmp_path, "translate", "--model", str(model), "--input", "empty.tsv", "--output", "out.tsv")
    assert result.status != 0 and "empty.tsv: empty file" in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty.tsv"]

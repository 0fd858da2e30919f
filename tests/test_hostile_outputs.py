"""Where a file job writes: every destination distinct from the input and from each other, under
--resume too; --resume continues only an output whose job record names the same input, model and
settings. Each refusal is one line with exit status 2 and leaves every file as it was. A write that fails
(a full disk, a name too long) or a bad record met mid-file is one line saying what was kept and what to
do next, and that advice works; average and ensemble replace an existing --output only with --overwrite."""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
import signal
import stat
import subprocess
import sys

import pytest
from support import assert_one_line_error, file_states, run_cli, trained

from seq2seq.checkpoint import read_checkpoint, save_atomic
from seq2seq.distributed import ONE_PROCESS
from seq2seq.errors import DataError, Terminated, terminate_as_interrupt
from seq2seq.recommender import Recommender
from seq2seq.serving import destinations, sharding
from seq2seq.serving import output as sinks
from seq2seq.serving.batch import FileJob, JobStopped, translate_file
from seq2seq.serving.destinations import record_path
from seq2seq.writing import replacing, write_atomic

LOG = "problem\toperator\nENGINE OIL LEAK\tanna\nFUEL PUMP NOISY\tbob\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return trained(tmp_path_factory.getbasetemp()).best


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "log.tsv"
    path.write_text(LOG, encoding="utf-8")
    return path


def translate(model, *options: str):
    return run_cli("translate", "--model", str(model), *options)


@pytest.mark.parametrize("resume", [[], ["--resume"]])
@pytest.mark.parametrize("clash", [
    lambda d: ["--output", "out.tsv", "--attention-out", "log.tsv"],
    lambda d: ["--output", "o.tsv", "--attention-out", "o.tsv"],
    lambda d: ["--output", "./sub/../log.tsv"],
    lambda d: ["--output", "link.tsv"],
    lambda d: ["--output", "hard.tsv"],
    lambda d: ["--output", "out.tsv", "--attention-out", "out.tsv.job.json"],
    lambda d: ["--output", "out.tsv", "--heatmaps", "log.tsv"],
    lambda d: ["--output", "log.tsv/out.tsv"],
    lambda d: ["--output", "out.tsv", "--attention-out", "maps/row_000001.png", "--heatmaps", "maps"],
], ids=["attention-is-input", "attention-is-output", "output-is-input-by-path", "output-is-a-symlink-to-input",
        "output-is-a-hard-link-to-input", "attention-is-the-record", "heatmaps-is-a-file", "folder-is-a-file",
        "attention-is-a-heatmap"])
def test_a_destination_that_is_not_a_file_of_its_own_is_refused_and_nothing_changes(model, log, tmp_path,
                                                                                    monkeypatch, clash, resume):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.tsv").symlink_to(log)
    os.link(log, tmp_path / "hard.tsv")
    watched = [log, *(tmp_path / name for name in ("out.tsv", "o.tsv", "out.tsv.job.json", "o.tsv.job.json"))]
    before = file_states(*watched)
    result = translate(model, "--input", "log.tsv", *clash(tmp_path), *resume)
    assert_one_line_error(result)
    assert file_states(*watched) == before
    assert not (tmp_path / "maps").exists() or not any((tmp_path / "maps").iterdir())


def test_resume_of_a_file_no_job_of_ours_wrote_is_refused(model, log, tmp_path):
    header = "problem\toperator\trecommendation\tscore\terror\n"
    for name, text in (("notes.txt", "my own notes\n"), ("old.tsv", header)):
        output = tmp_path / name
        output.write_text(text, encoding="utf-8")
        result = translate(model, "--input", str(log), "--output", str(output), "--resume")
        assert_one_line_error(result, "found no record of the job that wrote it")
        assert output.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(("change", "words"), [
    (["--beam-size", "2"], "other search"),
    (["--max-length-ratio", "1.5"], "other search"),
    (["--column", "operator"], "other column"),
    (["--attention-out", "att.jsonl"], "other attention_out"),
    (["--edit-input"], "the input has changed"),
    (["--other-input"], "its input was"),
])
def test_resume_with_another_input_or_other_settings_is_refused_and_keeps_the_output(model, log, tmp_path,
                                                                                     change, words):
    output = tmp_path / "out.tsv"
    assert translate(model, "--input", str(log), "--output", str(output)).status == 0
    before = file_states(output, record_path(output))
    source = log
    if change == ["--edit-input"]:
        log.write_text(LOG + "VALVE STUCK\tcarl\n", encoding="utf-8")
        change = []
    elif change == ["--other-input"]:
        source = tmp_path / "other.tsv"
        source.write_text(LOG, encoding="utf-8")
        change = []
    result = translate(model, "--input", str(source), "--output", str(output), "--resume", *change)
    assert_one_line_error(result, "written by another job", words)
    assert file_states(output, record_path(output)) == before


def test_resume_with_another_model_is_refused(model, log, tmp_path):
    output = tmp_path / "out.tsv"
    translate_file(Recommender.from_checkpoint(model), log, output)
    before = file_states(output)
    with pytest.raises(Exception, match="another model"):
        translate_file(Recommender.from_checkpoint(model, quantize=True), log, output, resume=True)
    assert file_states(output) == before


def test_resume_of_this_jobs_finished_output_changes_nothing(model, log, tmp_path):
    output = tmp_path / "out.tsv"
    assert translate(model, "--input", str(log), "--output", str(output)).status == 0
    before = file_states(output, record_path(output))
    result = translate(model, "--input", str(log), "--output", str(output), "--resume")
    assert result.status == 0, result.stderr
    assert file_states(output, record_path(output)) == before


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_a_second_job_on_an_output_another_job_is_writing_is_refused_and_the_first_ends_whole(model, log, tmp_path,
                                                                                             resume):
    output = tmp_path / "out.tsv"
    first = FileJob.of(Recommender.from_checkpoint(model), log, output)
    with first.claimed(resume=False):  # the first job, between its claim and its last row
        result = translate(model, "--input", str(log), "--output", str(output), *resume)
        assert_one_line_error(result, f"{output}: another job is writing it now", "wait for that job to end")
        assert not output.exists()
    assert translate(model, "--input", str(log), "--output", str(output), "--resume").status == 0
    assert len(output.read_text(encoding="utf-8").splitlines()) == 3


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_resume_of_an_output_a_row_was_taken_from_by_hand_is_refused_and_changes_no_file(model, tmp_path, suffix):
    log = tmp_path / "log.tsv"
    log.write_text("problem\toperator\n" + "".join(f"ALERT {k} OIL LEAK\tanna\n" for k in range(6)), encoding="utf-8")
    output, attention = tmp_path / f"out{suffix}", tmp_path / "att.jsonl"
    recommender = Recommender.from_checkpoint(model)
    translate_file(recommender, log, output, chunk_rows=1, attention_out=attention)
    whole = output.read_bytes().splitlines(keepends=True)
    lines = whole[:-3] + whole[-2:]  # a row taken out by hand: the last row now stands where the one before belongs
    output.write_bytes(b"".join(lines))
    before = file_states(output, attention, record_path(output))
    with pytest.raises(DataError, match=rf"out{suffix}: its row 5 does not hold line 6 of .*log.tsv as this job "
                                        r"wrote it \(was the output edited\?\)"):
        translate_file(recommender, log, output, chunk_rows=1, attention_out=attention, resume=True)
    assert file_states(output, attention, record_path(output)) == before
    output.write_bytes(b"".join(whole[:-2]))  # rows taken from the end only: the job goes on, as it always did
    translate_file(recommender, log, output, chunk_rows=1, attention_out=attention, resume=True)
    assert output.read_bytes().splitlines(keepends=True) == whole


def test_a_refused_job_leaves_no_record_behind(model, log, tmp_path):
    output = tmp_path / "out.tsv"
    output.write_text("someone else's\n", encoding="utf-8")
    assert_one_line_error(translate(model, "--input", str(log), "--output", str(output)), "already exists")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["log.tsv", "out.tsv"]


def test_a_job_without_resume_into_a_new_output_keeps_its_old_behaviour(model, log, tmp_path):
    output = tmp_path / "out.tsv"
    result = translate(model, "--input", str(log), "--output", str(output), "--attention-out",
                       str(tmp_path / "att.jsonl"))
    assert result.status == 0, result.stderr
    lines = output.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and lines[0].startswith("problem\toperator\trecommendation\tscore\t")
    assert len((tmp_path / "att.jsonl").read_text(encoding="utf-8").splitlines()) == 2
    assert record_path(output).is_file()


@pytest.mark.parametrize("folder", ["afile", "afile/run"])
def test_rul_train_into_a_file_where_a_folder_is_needed_is_refused(tmp_path, folder):
    (tmp_path / "afile").write_text("keep\n", encoding="utf-8")
    result = run_cli("rul", "train", "--output-dir", str(tmp_path / folder), "--epochs", "1", "--device", "cpu")
    assert result.status == 2 and "Traceback" not in result.stderr  # after the log lines of reading the data
    assert result.error_lines[-1].startswith(f"seq2seq: error: {tmp_path / 'afile'}: is a file, but ")
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "keep\n"


@pytest.mark.parametrize("hypotheses, clashes_with", [
    ("data.tsv", "--data"), ("./sub/../data.tsv", "--data"), ("hard.tsv", "--data"), ("target.txt", "--data-target"),
    ("model.pt", "--model"), ("link.pt", "--model"),
], ids=["data", "data-by-path", "data-hard-link", "data-target", "model", "model-symlink"])
def test_evaluate_hypotheses_onto_an_input_is_refused_and_nothing_changes(model, tmp_path, monkeypatch, hypotheses,
                                                                          clashes_with):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    data = tmp_path / "data.tsv"
    data.write_text("source\npump vibration high\nbelt worn\n", encoding="utf-8")
    (tmp_path / "target.txt").write_text("inspect pump bearings\nreplace belt\n", encoding="utf-8")
    (tmp_path / "model.pt").write_bytes(model.read_bytes())
    os.link(data, tmp_path / "hard.tsv")
    (tmp_path / "link.pt").symlink_to(tmp_path / "model.pt")
    before = file_states(data, tmp_path / "target.txt", tmp_path / "model.pt")
    result = run_cli("evaluate", "--model", "model.pt", "--data", "data.tsv", "--data-target", "target.txt",
                     "--hypotheses", hypotheses)
    assert_one_line_error(result, f"--hypotheses is also the {clashes_with}", "a file of its own")
    assert file_states(data, tmp_path / "target.txt", tmp_path / "model.pt") == before


def test_evaluate_hypotheses_into_a_new_folder_are_written(model, tmp_path):
    data = tmp_path / "data.tsv"
    data.write_text("source\ttarget\npump vibration high\tinspect pump bearings\n", encoding="utf-8")
    result = run_cli("evaluate", "--model", str(model), "--data", str(data), "--hypotheses",
                     str(tmp_path / "new" / "hyp.txt"))
    assert result.status == 0, result.stderr
    assert (tmp_path / "new" / "hyp.txt").read_text(encoding="utf-8").count("\n") == 1


def test_the_model_digest_is_computed_once_per_loaded_model_and_unchanged(model, log, tmp_path, monkeypatch):
    recommender = Recommender.from_checkpoint(model)
    expected = destinations._hash_model(recommender)
    calls = []
    monkeypatch.setattr(destinations, "_hash_model", lambda r: calls.append(r) or expected)
    for name in ("a.tsv", "b.tsv", "c.tsv"):
        translate_file(recommender, log, tmp_path / name)
    records = [json.loads(record_path(tmp_path / name).read_text(encoding="utf-8")) for name in ("a.tsv", "c.tsv")]
    assert calls == [recommender]  # once, not once per job
    assert {record["model"] for record in records} == {expected}
    other = Recommender.from_checkpoint(model)  # another load of the same file: hashed afresh, the same value
    assert destinations.model_digest(other) == expected and calls == [recommender, other]


# -- writing: missing folders, long names, a full disk, a job stopped by its input ----------------------------


def test_an_output_in_a_missing_folder_gets_the_folder_as_its_companions_do(model, log, tmp_path):
    output = tmp_path / "new" / "deeper" / "out.tsv"
    result = translate(model, "--input", str(log), "--output", str(output))
    assert result.status == 0, result.stderr
    assert len(output.read_text(encoding="utf-8").splitlines()) == 3 and record_path(output).is_file()


@pytest.mark.parametrize("length", [245, 300], ids=["record-too-long", "output-too-long"])
def test_an_output_name_too_long_for_the_file_system_is_one_line_and_writes_nothing(model, log, tmp_path, length):
    output = tmp_path / ("x" * length + ".tsv")
    assert_one_line_error(translate(model, "--input", str(log), "--output", str(output)), "File name too long")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["log.tsv"]


def test_a_full_disk_mid_job_is_one_line_and_resume_then_finishes_the_output_as_one_run_would(model, log, tmp_path,
                                                                                             monkeypatch):
    assert translate(model, "--input", str(log), "--output", str(tmp_path / "whole.tsv")).status == 0
    output = tmp_path / "out.tsv"
    real_append = sinks._append
    appends = []

    def filling(file, text):  # the header fits; the rows find the disk full
        appends.append(text)
        if len(appends) > 1:
            real_append(file, text[:5])  # a partial row, as a short write leaves
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_append(file, text)

    monkeypatch.setattr(sinks, "_append", filling)
    assert_one_line_error(translate(model, "--input", str(log), "--output", str(output)),
                          f"{output}: cannot write (No space left on device); the rows written are kept: continue "
                          "with --resume")
    monkeypatch.setattr(sinks, "_append", real_append)
    assert translate(model, "--input", str(log), "--output", str(output), "--resume").status == 0
    assert output.read_bytes() == (tmp_path / "whole.tsv").read_bytes()


def test_a_full_disk_part_way_through_a_row_leaves_no_half_row_behind(model, log, tmp_path, monkeypatch):
    assert translate(model, "--input", str(log), "--output", str(tmp_path / "whole.tsv")).status == 0
    whole, output = (tmp_path / "whole.tsv").read_bytes(), tmp_path / "out.tsv"
    real_write = os.write

    def short(descriptor, data):  # the header fits; the rows get half way, as a disk filling up leaves them
        if bytes(data) not in whole or whole.startswith(bytes(data)):
            return real_write(descriptor, data)
        real_write(descriptor, bytes(data[:len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sinks.os, "write", short)
    result = translate(model, "--input", str(log), "--output", str(output))
    monkeypatch.undo()
    assert_one_line_error(result, "No space left on device")
    assert output.read_bytes() == whole[:whole.index(b"\n") + 1]  # the header, and no part of a row
    assert translate(model, "--input", str(log), "--output", str(output), "--resume").status == 0
    assert output.read_bytes() == whole


def test_a_job_stopped_part_way_tells_a_program_what_is_kept_and_whether_it_can_resume(model, tmp_path):
    source = tmp_path / "in.csv"
    source.write_text("id,source\n1,pump vibration high\n2,belt worn\nx\n", encoding="utf-8")
    with pytest.raises(JobStopped) as stopped:
        translate_file(Recommender.from_checkpoint(model), source, tmp_path / "out.csv", chunk_rows=1)
    assert (stopped.value.kept, stopped.value.resumable) == (2, False)
    assert str(stopped.value) == f"{source}: line 4: expected 2 comma-separated fields, found 1"  # no CLI advice
    copied = pickle.loads(pickle.dumps(stopped.value))  # as World.outcome hands it to the other processes
    assert (str(copied), copied.kept, copied.resumable) == (str(stopped.value), 2, False)


def test_a_split_job_whose_parts_cannot_be_merged_stops_resumable_naming_the_output(model, log, tmp_path,
                                                                                    monkeypatch):
    def full(path, count):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sharding, "merge_parts", full)
    job = FileJob.of(Recommender.from_checkpoint(model), log, tmp_path / "out.tsv", None)
    with pytest.raises(JobStopped) as stopped:
        sharding.translate_shared(ONE_PROCESS, job)
    assert stopped.value.resumable and str(stopped.value) == f"{tmp_path / 'out.tsv'}: cannot write (No space left " \
                                                             "on device)"


@pytest.mark.parametrize("companions", [[], ["--attention-out", "att.jsonl"]], ids=["output", "with-attention"])
def test_a_bad_record_mid_file_says_what_was_kept_and_the_advice_it_gives_works(model, tmp_path, monkeypatch,
                                                                                companions):
    monkeypatch.chdir(tmp_path)
    good = "".join(f"{i},pump vibration high\n" for i in range(1030))  # past the first chunk of 1024 rows
    source = tmp_path / "in.csv"
    source.write_text("id,source\n" + good + "x\n", encoding="utf-8")  # line 1032: one field of two
    line = assert_one_line_error(translate(model, "--input", "in.csv", "--output", "out.csv", *companions),
                                 "in.csv: line 1032: expected 2 comma-separated fields, found 1")
    kept = len((tmp_path / "out.csv").read_text(encoding="utf-8").splitlines()) - 1
    assert f"out.csv keeps its first {kept} rows: fix the input, then delete " in line and kept == 1024
    named = line.split("then delete ")[1].removesuffix(" to start again").replace(" and ", ", ").split(", ")
    assert sorted(named) == sorted(["out.csv", "out.csv.job.json", *companions[1:]])
    source.write_text("id,source\n" + good, encoding="utf-8")
    for name in named:
        (tmp_path / name).unlink()
    assert translate(model, "--input", "in.csv", "--output", "out.csv", *companions).status == 0


def test_row_warnings_of_a_txt_job_each_start_their_own_line(model, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("pump vibration high\n" + "pump vibration high and " * 5 + "\n\n", encoding="utf-8")
    result = translate(model, "--input", str(source), "--output", str(tmp_path / "out.txt"))
    assert result.status == 0, result.stderr
    warnings = [line for line in result.stderr.split("\n") if "warning:" in line]
    assert len(warnings) == 2 and all(line.startswith("warning: ") for line in warnings), result.stderr


def test_the_summary_counts_a_translated_row_with_a_warning_apart_from_the_failed_ones(model, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("pump vibration high\n" + "pump vibration high and " * 5 + "\n\n", encoding="utf-8")
    result = translate(model, "--input", str(source), "--output", str(tmp_path / "out.txt"))
    assert "out.txt: 3 rows: 2 translated (" in result.error_lines[-1]  # then any out of scope, apart too
    assert "1 with a warning), 1 with errors; " in result.error_lines[-1]


def test_evaluate_refuses_a_hypotheses_folder_before_decoding(model, tmp_path, monkeypatch):
    data = tmp_path / "data.tsv"
    data.write_text("source\ttarget\npump vibration high\tinspect pump bearings\n", encoding="utf-8")
    (tmp_path / "hyp").mkdir()
    monkeypatch.setattr(Recommender, "recommend", lambda *a, **k: pytest.fail("decoded before the check"))
    result = run_cli("evaluate", "--model", str(model), "--data", str(data), "--hypotheses", str(tmp_path / "hyp"))
    assert_one_line_error(result, f"{tmp_path / 'hyp'}: is a directory; --hypotheses needs a file name")


def test_feedback_export_under_a_file_names_the_output_it_was_asked_for(tmp_path):
    (tmp_path / "ok.csv").write_text("keep\n", encoding="utf-8")
    output = tmp_path / "ok.csv" / "x.tsv"
    result = run_cli("feedback", "export", "--db", str(tmp_path / "never-opened.sqlite"), "--output", str(output))
    assert_one_line_error(result, f"{tmp_path / 'ok.csv'}: is a file, but --output {output} needs it to be a folder")
    assert (tmp_path / "ok.csv").read_text(encoding="utf-8") == "keep\n"


@pytest.mark.parametrize("command", ["export", "average", "average-without-overwrite"])
def test_an_output_that_is_a_pipe_is_refused_and_stays_a_pipe(model, tmp_path, command):
    """Without --overwrite, average said "already exists; pass --overwrite", which led only to this refusal."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # as /dev/full or /dev/null: the rename would put a plain file where it was, as root too
    args = (["feedback", "export", "--db", str(tmp_path / "never-opened.sqlite")] if command == "export"
            else ["average", "--inputs", str(model)] + (["--overwrite"] if command == "average" else []))
    result = run_cli(*args, "--output", str(pipe))
    assert_one_line_error(result, f"{pipe}: is not a regular file (a device or a pipe)")
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


def test_a_replaced_file_keeps_its_mode_a_new_one_gets_the_umasks_and_a_link_points_at_the_new_content(tmp_path):
    kept, fresh, target, link = (tmp_path / name for name in ("kept.txt", "fresh.txt", "target.txt", "link.txt"))
    kept.write_text("old\n", encoding="utf-8")
    kept.chmod(0o640)
    target.write_text("old\n", encoding="utf-8")
    link.symlink_to(target)
    for path in (kept, fresh, link):
        write_atomic(path, "new\n")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600: others may read a model
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.txt", "kept.txt", "link.txt", "target.txt"]


def test_a_signal_during_a_write_takes_effect_once_the_file_is_whole(tmp_path):
    path = tmp_path / "x.bin"  # torch.save cut by Ctrl-C raised its own RuntimeError, not KeyboardInterrupt
    with terminate_as_interrupt(), pytest.raises(Terminated), replacing(path) as file:
        file.write(b"first half, ")
        os.kill(os.getpid(), signal.SIGTERM)
        file.write(b"second half")
    assert path.read_bytes() == b"first half, second half"


# -- average and ensemble --output ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["average", "ensemble"])
def test_a_combined_checkpoint_never_replaces_a_file_or_folder_without_overwrite(model, tmp_path, command):
    notes, folder = tmp_path / "notes.txt", tmp_path / "folder"
    notes.write_text("precious notes\n", encoding="utf-8")
    folder.mkdir()
    twin = tmp_path / "twin.pt"  # another model of the run: the same model twice is refused (below)
    payload = read_checkpoint(model)
    save_atomic({**payload, "weights": {name: w * 1.01 if w.is_floating_point() else w
                                        for name, w in payload["weights"].items()}}, twin)
    combine = ("--inputs", str(model), str(twin), "--output")
    assert_one_line_error(run_cli(command, *combine, str(folder)), f"{folder}: is a directory; --output needs a file")
    assert_one_line_error(run_cli(command, *combine, str(notes)),
                          f"{notes}: already exists; pass --overwrite to replace it")
    assert notes.read_text(encoding="utf-8") == "precious notes\n" and list(folder.iterdir()) == []
    assert run_cli(command, *combine, str(notes), "--overwrite").status == 0
    assert Recommender.from_checkpoint(notes).translate(["belt worn"])


@pytest.mark.parametrize("command", ["average", "ensemble"])
def test_one_checkpoint_given_twice_is_not_an_ensemble_of_two(model, tmp_path, command):
    output = tmp_path / "out.pt"
    again = tmp_path / ".." / tmp_path.name / ".." / tmp_path.name  # another spelling of the same folder
    shutil.copyfile(model, tmp_path / "m.pt")
    result = run_cli(command, "--inputs", str(tmp_path / "m.pt"), str(again / "m.pt"), "--output", str(output))
    assert_one_line_error(result, f"--inputs: {again / 'm.pt'} is given twice; each checkpoint counts once")
    assert not output.exists()


@pytest.mark.parametrize("resume", [[], ["--resume"]])
@pytest.mark.parametrize(("options", "words"), [
    (["--output", "out.tsv", "--heatmaps", "out.tsv"], "out.tsv: --heatmaps is also the --output; each file a job "
                                                       "writes must be a file of its own"),
    (["--output", "out.tsv", "--heatmaps", "./sub/../out.tsv"], "--heatmaps is also the --output"),
    (["--output", "out.tsv", "--heatmaps", "out.tsv.job.json"], "out.tsv.job.json: --heatmaps is also the job record"),
    (["--output", "out.tsv", "--attention-out", "att.jsonl", "--heatmaps", "att.jsonl"],
     "att.jsonl: --heatmaps is also the --attention-out"),
    (["--output", "out.tsv", "--heatmaps", "out.tsv/maps"], "out.tsv: is the --output, but --heatmaps out.tsv/maps "
                                                            "needs it to be a folder"),
    (["--output", "out.tsv", "--attention-out", "att.jsonl", "--heatmaps", "att.jsonl/maps"],
     "att.jsonl: is the --attention-out, but --heatmaps att.jsonl/maps needs it to be a folder"),
    (["--output", "att.jsonl/out.tsv", "--attention-out", "att.jsonl"],
     "att.jsonl: is the --attention-out, but --output att.jsonl/out.tsv needs it to be a folder"),
], ids=["is-the-output", "is-the-output-by-path", "is-the-record", "is-the-attention-file", "under-the-output",
        "under-the-attention-file", "output-under-the-attention-file"])
def test_a_heatmaps_folder_that_is_or_lies_under_a_file_the_job_writes_is_refused_and_nothing_is_written(
        model, log, tmp_path, monkeypatch, options, words, resume):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert_one_line_error(translate(model, "--input", "log.tsv", *options, *resume), words)
    assert sorted(tmp_path.rglob("*")) == before


def test_a_heatmaps_folder_that_holds_the_output_is_no_clash(model, log, tmp_path):
    result = translate(model, "--input", str(log), "--output", str(tmp_path / "maps" / "out.tsv"), "--heatmaps",
                       str(tmp_path / "maps"))
    assert result.status == 0, result.stderr
    assert (tmp_path / "maps" / "out.tsv").is_file() and next((tmp_path / "maps").glob("row_*.png"), None)


def test_a_written_file_s_folder_is_synced_so_its_name_survives_a_power_cut(model, log, tmp_path, monkeypatch):
    synced, real_fsync = [], os.fsync

    def recording(descriptor):
        synced.append("folder" if stat.S_ISDIR(os.fstat(descriptor).st_mode) else "file")
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording)
    write_atomic(tmp_path / "record.json", "{}")
    assert synced == ["file", "folder"]  # the bytes, then the name the rename gave them
    synced.clear()
    assert translate(model, "--input", str(log), "--output", str(tmp_path / "out.csv")).status == 0
    # the job record's bytes and name, then the output's name, before its rows are written and acknowledged
    assert synced[:3] == ["file", "folder", "folder"] and set(synced[3:]) == {"file"}


def test_a_job_record_the_disk_cannot_take_is_one_line_naming_it_and_leaves_no_record_cut_short(tmp_path):
    """Its write failed in Python's buffer, and closing the file tried the bytes again: a bare OSError ("a file could
    not be read or written") and a record cut short. A file-size limit stands in for a full disk."""
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from seq2seq.serving.destinations import held_record\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))\n"
        "try:\n"
        "    with held_record(Path(sys.argv[1])) as record:\n"
        "        record.write({'version': 1, 'input': {'path': 'x' * 300}})\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n")
    output = tmp_path / "o.csv"
    done = subprocess.run([sys.executable, "-c", script, str(output)], capture_output=True, text=True, timeout=60)
    assert done.stdout == f"DataError {output}: cannot write its job record o.csv.job.json (File too large)\n", (
        done.stdout + done.stderr)
    assert list(tmp_path.iterdir()) == []

"""Decoding in a child process: the same answers as the Recommender in this process, its errors raised
here, and a child that dies replaced by the next call."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch
from support import trained

from seq2seq.config import SearchConfig
from seq2seq.recommender import Recommender
from seq2seq.serving.batcher import MicroBatcher
from seq2seq.serving.decoder_process import DecoderProcess, read_frame, write_frame

CALLS = [  # (alerts, search settings, past cases): greedy and beam with n-best, an empty and an over-long alert
    (["pump vibration high", "belt worn"], SearchConfig(), 3),
    (["valve stuck closed", "", "Fan   Speed LOW"], SearchConfig(beam_size=3, n_best=2), 1),
    (["compressor temperature high " * 40, "the quick brown fox"], SearchConfig(beam_size=2), 0),
]


@pytest.fixture(scope="module")
def recommender(tmp_path_factory) -> Recommender:
    return Recommender.from_checkpoint(trained(tmp_path_factory.getbasetemp()).best)


@pytest.fixture(scope="module")
def decoder(recommender) -> DecoderProcess:
    process = DecoderProcess(recommender)
    yield process
    process.close()


def assert_same(got, expected) -> None:
    assert [(r.alert, r.source_pieces, r.warning, r.verdict, r.similar) for r in got] == \
           [(r.alert, r.source_pieces, r.warning, r.verdict, r.similar) for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert (a.trust is None) == (b.trust is None)
        assert a.trust is None or a.trust == pytest.approx(b.trust, abs=1e-6)
        assert [(c.text, c.target_pieces) for c in a.candidates] == [(c.text, c.target_pieces) for c in b.candidates]
        for c, d in zip(a.candidates, b.candidates, strict=True):
            assert (c.score, c.log_prob) == pytest.approx((d.score, d.log_prob), abs=1e-5)
            assert isinstance(c.attention, torch.Tensor) and c.attention.shape == d.attention.shape
            torch.testing.assert_close(c.attention, d.attention)


@pytest.mark.parametrize("alerts, config, similar", CALLS)
def test_a_child_process_answers_as_the_recommender_here(recommender, decoder, one_thread, alerts, config, similar):
    got = decoder.recommend(alerts, config, similar=similar)
    assert_same(got, recommender.recommend(alerts, config, similar=similar))


def test_the_micro_batcher_in_front_of_a_child_process_answers_concurrent_calls_as_one_by_one(
        recommender, decoder, one_thread):
    batcher = MicroBatcher(decoder, max_wait_s=0.2)
    answers: list = [None] * len(CALLS)
    start = threading.Barrier(len(CALLS))

    def call(k: int) -> None:
        alerts, config, similar = CALLS[k]
        start.wait()
        answers[k] = batcher.recommend(alerts, config, similar)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(len(CALLS))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        batcher.close()
    for (alerts, config, similar), got in zip(CALLS, answers, strict=True):
        assert_same(got, recommender.recommend(alerts, config, similar=similar))


def test_an_error_in_the_child_is_raised_here_and_the_child_keeps_serving(recommender, decoder):
    with pytest.raises(ValueError, match=r"batch size must be in \[1, "):  # a ConfigError, a ValueError
        decoder.recommend(["pump vibration high"], batch_size=0)
    assert decoder.alive
    assert decoder.recommend(["pump vibration high"])[0].text == recommender.recommend(["pump vibration high"])[0].text


def test_a_child_that_dies_fails_the_call_in_flight_in_one_line_and_the_next_call_starts_a_new_one(recommender):
    process = DecoderProcess(recommender)
    try:
        first = process._child.pid
        killer = threading.Timer(0.3, os.kill, (first, signal.SIGKILL))
        killer.start()
        with pytest.raises(RuntimeError, match=r"^the decoding process stopped \(exit status -9\) while decoding "
                                               r"6000 alerts; the next call starts a new one$"):
            process.recommend([f"pump vibration high and gearbox noise {n}" for n in range(6000)],  # about 2 s:
                              SearchConfig(beam_size=5))  # distinct alerts, as a repeat is decoded once
        killer.join()
        assert not process.alive
        again = process.recommend(["belt worn"])
        assert process.alive and process._child.pid != first
        assert again[0].text == recommender.recommend(["belt worn"])[0].text
        os.kill(process._child.pid, signal.SIGKILL)  # dead between calls: the next call simply starts a new one
        time.sleep(0.2)
        assert process.recommend(["belt worn"])[0].text == again[0].text
    finally:
        process.close()
    assert not process.alive


def test_frames_round_trip_and_a_cut_stream_ends_them():
    stream = io.BytesIO()
    write_frame(stream, b"")
    write_frame(stream, b"alerts \x00\xff")
    whole = stream.getvalue()
    stream = io.BytesIO(whole)
    assert [read_frame(stream), read_frame(stream), read_frame(stream)] == [b"", b"alerts \x00\xff", None]
    assert read_frame(io.BytesIO(whole[:-1])) == b"" and read_frame(io.BytesIO(whole[:3])) is None
    cut = io.BytesIO(whole[:-1])
    read_frame(cut)
    assert read_frame(cut) is None


def gone(pid: int) -> bool:
    """No such process, or a zombie its new parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in status)
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the orphan")
def test_an_app_killed_with_sigkill_leaves_no_decoding_process_behind(tmp_path, tmp_path_factory):
    best = trained(tmp_path_factory.getbasetemp()).best
    script = tmp_path / "app.py"
    script.write_text(
        "import sys, time\n"
        "from seq2seq.recommender import Recommender\n"
        "from seq2seq.serving.decoder_process import DecoderProcess\n"
        f"process = DecoderProcess(Recommender.from_checkpoint({str(best)!r}))\n"
        "print(process._child.pid, flush=True)\n"
        "time.sleep(120)\n", encoding="utf-8")
    app = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE)
    try:
        child = int(app.stdout.readline())
        assert not gone(child)
    finally:
        app.kill()  # SIGKILL: no handler runs, the pipes just close
        app.wait()
    deadline = time.monotonic() + 30
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(child)

"""A Recommender in a child process, so that decoding does not wait for the app's interpreter lock.

The app's event loop (Gradio, Starlette, uvicorn) and the micro-batcher's decoder passes are all Python,
and one process runs Python on one core at a time: under 50 concurrent technicians the app held one
core of two at 100% and left the other nearly idle (docs/serving.md). ``DecoderProcess`` runs a copy of
a Recommender in ``python -m seq2seq.serving.decoder_process`` and has the same ``recommend``: the
micro-batcher's thread sends the alerts over a pipe and waits for the answers without holding the lock,
so the event loop serves while the child decodes.

The answers are the Recommender's own: the child unpickles the very object (weights, tokenizer, case
memory, trust model) and runs the same code on one thread; an error it raises is raised to the caller.
Frames on the pipes are an 8-byte length and a pickle. Both ends are this program; nothing from outside is
unpickled (an alert is text inside a frame this side wrote). Attention matrices travel as numpy arrays
(pickling a small torch tensor costs ten times as much, and a view would carry its batch's whole storage).

If the child dies (killed, out of memory), the call in flight gets a one-line error and the next call
starts a new child.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import struct
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

import torch

from seq2seq.config import SearchConfig
from seq2seq.recommender import SIMILAR, Recommendation, Recommender

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_LENGTH = struct.Struct("<Q")
_READY = b"ready"


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def read_frame(stream: BinaryIO) -> bytes | None:
    """The next frame's payload; None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    payload = stream.read(length)
    if len(payload) < length:
        return None
    return payload


def _with_attention(recommendations: list[Recommendation], convert) -> list[Recommendation]:
    return [replace(r, candidates=[replace(c, attention=convert(c.attention)) for c in r.candidates])
            for r in recommendations]


class DecoderProcess:
    """``recommend`` as ``Recommender.recommend``, decoded in a child process; ``close`` stops the child.

    One call at a time (the micro-batcher's thread makes them); a lock keeps other callers in line.
    """

    def __init__(self, recommender: Recommender, threads: int = 1) -> None:
        """``threads``: torch threads in the child (one: the app's own process keeps the other core)."""
        self.recommender, self.threads = recommender, threads
        self.search = recommender.search
        self._lock = threading.Lock()
        self._child: subprocess.Popen | None = None
        with self._lock:
            self._start()

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.poll() is None

    def _start(self) -> None:
        # The package's folder leads the child's path, as it does this process's however it was started.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
        child = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env=env)
        try:
            write_frame(child.stdin, pickle.dumps((self.threads, self.recommender), protocol=5))
            ready = read_frame(child.stdout)
        except OSError:
            ready = None
        if ready != _READY:
            child.kill()
            child.wait()
            raise RuntimeError(f"the decoding process did not start (exit status {child.returncode}; its "
                               "error is on the app's standard error)")
        self._child = child

    def recommend(self, alerts: list[str], config: SearchConfig | None = None, batch_size: int = 64,
                  similar: int = SIMILAR) -> list[Recommendation]:
        with self._lock:
            if not self.alive:
                self._stop()
                self._start()
            child = self._child
            try:
                write_frame(child.stdin, pickle.dumps((alerts, config, batch_size, similar), protocol=5))
                reply = read_frame(child.stdout)
            except OSError:
                reply = None
            if reply is None:
                self._stop()
                raise RuntimeError(f"the decoding process stopped (exit status {child.returncode}) while decoding "
                                   f"{len(alerts)} alerts; the next call starts a new one")
        answer = pickle.loads(reply)
        if isinstance(answer, BaseException):
            raise answer
        return _with_attention(answer, torch.from_numpy)

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        for stream in (child.stdin, child.stdout):
            with contextlib.suppress(OSError):  # a broken pipe to a child that has gone
                stream.close()
        try:
            child.wait(timeout=10)  # its input closed, it finishes the frame it has and leaves
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def close(self) -> None:
        with self._lock:
            self._stop()


def _picklable(err: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # any error that cannot cross the pipe is told by its text
        return RuntimeError(f"{type(err).__name__}: {err}")
    return err


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """The child: the Recommender from the first frame, then one answer (or error) per request frame."""
    threads, recommender = pickle.loads(read_frame(requests))
    torch.set_num_threads(threads)
    gc.collect()
    gc.freeze()  # the loaded model and memory stay for the child's life (as the app's: App.launch)
    write_frame(replies, _READY)
    while (frame := read_frame(requests)) is not None:
        alerts, config, batch_size, similar = pickle.loads(frame)
        try:
            answer: object = _with_attention(recommender.recommend(alerts, config, batch_size, similar),
                                             lambda attention: attention.numpy().copy())
        except Exception as err:  # the caller raises it, as it would in its own process
            answer = _picklable(err)
        write_frame(replies, pickle.dumps(answer, protocol=5))


if __name__ == "__main__":
    # Frames go out on a private copy of standard output; whatever a library prints goes to standard error.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies)

"""Progress bars: redrawn in place on a terminal; in a log file, whole lines at most every LOG_SECONDS."""

from __future__ import annotations

import io
import itertools

from seq2seq import progress
from seq2seq.progress import LOG_SECONDS, progress_bar


def test_a_bar_in_a_log_file_writes_whole_lines_no_oftener_than_every_log_seconds(monkeypatch, capsys):
    clock = itertools.count(0.0, LOG_SECONDS / 3)  # each redraw a third of LOG_SECONDS after the last
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    with progress_bar(total=9, desc="epoch 1/3", unit="batch", leave=False) as bar:
        for _ in range(9):
            bar.update()
            bar.refresh()
    log = capsys.readouterr().err
    assert "\r" not in log and "\x1b" not in log
    lines = log.splitlines()
    assert len(lines) == 3 and all(line.startswith("epoch 1/3:") for line in lines)
    assert [line.split("|")[2].split()[0] for line in lines] == ["2/9", "5/9", "8/9"]  # the count when each was due


def test_work_shorter_than_log_seconds_writes_nothing_to_a_log(capsys):
    for _ in progress_bar(range(100), desc="translate", leave=False):
        pass
    assert capsys.readouterr().err == ""


def test_on_a_terminal_the_bar_redraws_in_place(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(progress.sys, "stderr", terminal)
    with progress_bar(total=3, desc="members") as bar:
        bar.update(3)
    assert "\rmembers: 100%" in terminal.getvalue()

"""Reading and writing C-MAPSS files: round trips and a one-line error naming file, line and column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from seq2seq.catalog import SENSORS
from seq2seq.errors import DataError
from seq2seq.rul.cmapss import (
    N_COLUMNS,
    Engine,
    column_name,
    read_cmapss,
    read_rul,
    units_held,
    write_cmapss,
    write_rul,
)


def _row(unit: int, cycle: int) -> str:
    settings = ["-0.0007", "-0.0004", "100.0"]
    sensors = [f"{100 + k}.{cycle:02d}" for k in range(1, 22)]
    return " ".join([str(unit), str(cycle), *settings, *sensors])


def _rows() -> list[str]:
    """Units 1 (cycles 1-4) and 2 (cycles 1-3): lines 1-7."""
    return [_row(1, c) for c in range(1, 5)] + [_row(2, c) for c in range(1, 4)]


def _write(tmp_path: Path, lines: list[str], name: str = "train.txt") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _replace_field(line: str, column: int, value: str) -> str:
    fields = line.split()
    fields[column - 1] = value
    return " ".join(fields)


def _error(path: Path) -> str:
    with pytest.raises(DataError) as info:
        read_cmapss(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message


def test_rows_of_each_unit_become_one_engine_in_file_order(tmp_path):
    lines = [_row(7, 1), _row(7, 2), _row(3, 1), _row(3, 5)]
    engines = read_cmapss(_write(tmp_path, lines))
    assert [e.unit for e in engines] == [7, 3]
    assert [e.length for e in engines] == [2, 2]
    assert engines[1].cycles.tolist() == [1, 5]  # gaps are allowed, only the order is checked
    assert engines[0].settings.shape == (2, 3) and engines[0].sensors.shape == (2, 21)
    assert engines[0].sensors[1, 1] == pytest.approx(102.02)  # column 7 is sensor 2


def test_trailing_spaces_blank_lines_and_crlf_are_accepted(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(("\r\n".join(line + "  " for line in _rows()) + "\r\n\r\n").encode())
    assert [e.length for e in read_cmapss(path)] == [4, 3]


@settings(max_examples=20)
@given(
    sensors=hnp.arrays(np.float64, (3, 21), elements=st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)),
    settings_=hnp.arrays(np.float64, (3, 3), elements=st.floats(-10, 10, allow_subnormal=False)),
)
def test_write_then_read_gives_back_every_value_exactly(tmp_path_factory, sensors, settings_):
    engines = [Engine(4, np.array([1, 2, 5]), settings_, sensors), Engine(9, np.array([3]), settings_[:1], sensors[:1])]
    path = tmp_path_factory.mktemp("round") / "x.txt"
    write_cmapss(path, engines)
    back = read_cmapss(path)
    assert all(len(line.split()) == N_COLUMNS for line in path.read_text().splitlines())
    for original, read in zip(engines, back, strict=True):
        assert read.unit == original.unit
        assert np.array_equal(read.cycles, original.cycles)
        assert np.array_equal(read.settings, original.settings)
        assert np.array_equal(read.sensors, original.sensors)


def test_column_names_follow_the_layout_and_the_catalog():
    names = [column_name(c) for c in range(1, N_COLUMNS + 1)]
    assert names[:5] == ["unit", "cycle", "setting 1", "setting 2", "setting 3"]
    assert names[5:] == [f"sensor {s.index}, {s.symbol}" for s in SENSORS]


@pytest.mark.parametrize(
    ("line", "column", "value", "expected"),
    [
        (3, 7, "abc", "line 3, column 7 (sensor 2, T24): not a number: 'abc'"),
        (2, 8, "nan", "line 2, column 8 (sensor 3, T30): NaN"),
        (5, 26, "inf", "line 5, column 26 (sensor 21, W32): inf"),
        (4, 3, "-1e999", "line 4, column 3 (setting 1): -inf"),
        (6, 1, "1.5", "line 6, column 1 (unit): not a positive whole number: '1.5'"),
        (6, 2, "0", "line 6, column 2 (cycle): not a positive whole number: '0'"),
        (1, 1, "9" * 23, f"line 1, column 1 (unit): '{'9' * 23}' is too large (at most 2147483647)"),
        (2, 2, "3e9", "line 2, column 2 (cycle): '3e9' is too large (at most 2147483647)"),
        (3, 2, "2", "line 3: unit 1 cycle 2 is given twice (on this line and the one before)"),
        (4, 2, "1", "line 4: unit 1 cycle 1 does not follow cycle 3"),
        (7, 1, "1", "line 7: unit 1 appears again after unit 2 started"),
    ],
)
def test_a_bad_field_is_one_line_naming_line_and_column(tmp_path, line, column, value, expected):
    lines = _rows()
    lines[line - 1] = _replace_field(lines[line - 1], column, value)
    assert expected in _error(_write(tmp_path, lines))


def test_a_row_with_the_wrong_number_of_columns_names_its_line(tmp_path):
    lines = _rows()
    lines[4] = lines[4].rsplit(" ", 1)[0]
    lines.insert(0, "")  # blank lines count in line numbers
    assert _error(_write(tmp_path, lines)).endswith(": line 6: expected 26 columns, found 25")


def test_the_first_error_in_the_file_is_the_one_reported(tmp_path):
    lines = _rows()
    lines[1] = _replace_field(lines[1], 9, "x")
    lines[5] = lines[5] + " 1"
    assert ": line 2, column 9 " in _error(_write(tmp_path, lines))


def test_bytes_that_are_not_utf8_name_their_line(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes("\n".join(_rows()[:2]).encode() + b"\n1 3 \xff\n")
    assert "line 3: not valid UTF-8 (byte 0xff at column 5)" in _error(path)


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_file_is_an_error(tmp_path, content):
    path = tmp_path / "train.txt"
    path.write_text(content, encoding="utf-8")
    assert "empty file" in _error(path)


def test_a_missing_file_is_an_error(tmp_path):
    assert _error(tmp_path / "absent.txt").endswith("file not found")


def test_an_engine_with_inconsistent_shapes_is_rejected():
    with pytest.raises(DataError, match="engine 3: sensors has shape"):
        Engine(3, np.arange(1, 4), np.zeros((3, 3)), np.zeros((3, 20)))
    with pytest.raises(DataError, match="no cycles"):
        Engine(3, np.arange(0), np.zeros((0, 3)), np.zeros((0, 21)))


@pytest.mark.parametrize(("cycles", "words"), [
    ([3, 2, 1], "cycles must be strictly increasing, but cycle 2 follows cycle 3"),
    ([1, 2, 2], "cycle 2 follows cycle 2"), ([1, 1.5, 2], "whole numbers from 1 on"), ([-1, 0, 1], "from 1 on"),
])
def test_an_engine_a_program_builds_is_held_to_the_cycles_a_file_is(cycles, words):
    """The reader refused these in a file; built in code, they were analysed without a word."""
    with pytest.raises(DataError, match=f"engine 7: .*{words}"):
        Engine(7, cycles, np.zeros((3, 3)), np.zeros((3, 21)))


def test_an_engine_given_lists_holds_arrays():
    engine = Engine(7, [1, 2, 3], [[0.0] * 3] * 3, [[1.0] * 21] * 3)  # a TypeError deep in the monitor, once
    assert isinstance(engine.sensors, np.ndarray) and engine.sensors.shape == (3, 21)


def test_rul_file_round_trips_and_gives_each_unit_its_own_line(tmp_path):
    path = tmp_path / "RUL_FD001.txt"
    write_rul(path, np.array([112.0, 98.0, 69.5]))
    assert path.read_text() == "112\n98\n69.5\n"
    assert read_rul(path).tolist() == read_rul(path, [1, 2, 3]).tolist() == [112.0, 98.0, 69.5]
    assert read_rul(path, [3, 1]).tolist() == [69.5, 112.0]  # units 1 and 3: lines 1 and 3, not lines 1 and 2
    with pytest.raises(DataError, match=r"^.*RUL_FD001\.txt: 3 lines, and none for unit 4 \(line k is unit k's"):
        read_rul(path, [1, 4])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("12\n-3\n", "line 2: negative remaining life: '-3'"),
        ("12\nx\n", "line 2: not a number: 'x'"),
        ("nan\n", "line 1: NaN (a remaining life must be a finite number)"),  # not "a reading"
        ("12\n4 5\n", "line 2: expected one number, found 2 fields"),
        ("50\n\n60\n70\n", "line 2: blank line among the remaining lives"),  # trailing blank lines are fine
        ("\n", "empty file"),
    ],
)
def test_a_bad_rul_file_is_one_line_naming_the_line(tmp_path, content, expected):
    path = tmp_path / "RUL_FD001.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_rul(path)
    assert expected in str(info.value) and str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_a_missing_rul_file_is_an_error(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_rul(tmp_path / "RUL_FD001.txt")


def test_the_units_a_file_holds_are_named_as_a_range_only_when_they_run_without_a_gap():
    """'no engine 3 (units 1..5)' was said of a file holding units 1 and 5."""
    assert units_held([3, 1, 2, 2]) == "units 1..3"
    assert units_held([7]) == "unit 7"
    assert units_held([5, 1]) == "units 1, 5"
    assert units_held(list(range(1, 60, 2))).endswith(", ... and 10 more")  # long lists are cut

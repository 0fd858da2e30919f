"""Reading and writing NASA C-MAPSS turbofan files, with one-line errors that say where.

Format (Saxena, Goebel, Simon and Eklund, "Damage Propagation Modeling for Aircraft Engine
Run-to-Failure Simulation", PHM 2008; ``readme.txt`` of the data set):

- ``train_FD00x.txt`` / ``test_FD00x.txt``: one row per engine and cycle, 26 numbers separated by
  spaces (rows may end with trailing spaces): 1 unit, 2 cycle, 3-5 operational settings 1-3,
  6-26 sensors 1-21 in the order of ``catalog.SENSORS``. The rows of one unit are contiguous and
  its cycles increase. Training engines run to failure; test engines stop some time before it.
- ``RUL_FD00x.txt``: one number per line, the true remaining life of each test engine after its
  last cycle, in unit order.

Blank lines are ignored. Line and column numbers in messages are 1-based, as an editor counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seq2seq.catalog import SENSORS
from seq2seq.errors import DataError, listed
from seq2seq.files import read_lines

N_SETTINGS = 3
N_SENSORS = len(SENSORS)  # 21
N_COLUMNS = 2 + N_SETTINGS + N_SENSORS  # 26
# The RUL model computes in float32: a reading beyond its range cannot be held, only turned into inf.
MAX_MAGNITUDE = float(np.finfo(np.float32).max)
MAX_ID = 2**31 - 1  # a unit or cycle number: far beyond any fleet or life, and exact as a float
_LAYOUT = f"{N_COLUMNS} space-separated columns: unit, cycle, {N_SETTINGS} settings, {N_SENSORS} sensors"


@dataclass(frozen=True, eq=False)  # eq=False: == on arrays is elementwise, not a truth value
class Engine:
    """One engine's history, a row per cycle: L cycles, 3 operational settings, 21 sensors."""

    unit: int  # engine number (column 1)
    cycles: np.ndarray  # (L,) int, strictly increasing (column 2)
    settings: np.ndarray  # (L, 3) float, operational settings 1-3 (columns 3-5)
    sensors: np.ndarray  # (L, 21) float, sensors 1-21 in catalog order (columns 6-26)

    def __post_init__(self) -> None:
        for name in ("cycles", "settings", "sensors"):  # lists, as a program may pass, became a TypeError later
            object.__setattr__(self, name, np.asarray(getattr(self, name)))
        L = len(self.cycles)
        expected = {"cycles": (L,), "settings": (L, N_SETTINGS), "sensors": (L, N_SENSORS)}
        for name, shape in expected.items():
            found = np.shape(getattr(self, name))
            if found != shape:
                raise DataError(f"engine {self.unit}: {name} has shape {found}, expected {shape}")
        if L == 0:
            raise DataError(f"engine {self.unit}: no cycles")
        for name in ("settings", "sensors"):  # strings were taken, and failed in numpy once analysed
            if not np.issubdtype(getattr(self, name).dtype, np.number):
                raise DataError(f"engine {self.unit}: {name} must be numbers, got {getattr(self, name).dtype.name} "
                                "values")
        cycles = self.cycles
        if not np.issubdtype(cycles.dtype, np.number) or not np.all(np.isfinite(cycles) & (cycles == np.round(cycles))
                                                                    & (cycles >= 1)):
            raise DataError(f"engine {self.unit}: cycles must be whole numbers from 1 on")
        if len(back := np.flatnonzero(np.diff(cycles) <= 0)):  # the reader refuses it in a file; a program may not
            later, earlier = cycles[back[0] + 1], cycles[back[0]]
            raise DataError(f"engine {self.unit}: cycles must be strictly increasing, but cycle {later:g} follows "
                            f"cycle {earlier:g}")

    @property
    def length(self) -> int:
        """L, the number of cycles recorded."""
        return len(self.cycles)


def column_name(column: int) -> str:
    """The name of 1-based ``column`` of a C-MAPSS row: "unit", "cycle", "setting 2", "sensor 2, T24"."""
    if column == 1:
        return "unit"
    if column == 2:
        return "cycle"
    if column <= 2 + N_SETTINGS:
        return f"setting {column - 2}"
    index = column - 2 - N_SETTINGS
    return f"sensor {index}, {SENSORS[index - 1].symbol}"


def read_cmapss(path: str | Path) -> list[Engine]:
    """The engines of a ``train_FD00x.txt`` / ``test_FD00x.txt`` file, in order of first appearance.

    Every problem is a one-line DataError naming the file, the line and, where it applies, the
    column: a wrong number of columns, a field that is not a number, NaN or inf or a magnitude
    beyond float32 (``MAX_MAGNITUDE``), a unit or cycle
    that is not a positive whole number, a cycle that does not increase, a unit that appears again
    after another one started, bytes that are not UTF-8, a missing or empty file.
    """
    path = Path(path)
    blocks: list[tuple[int, list[list[float]]]] = []  # (unit, rows) in file order
    seen: set[int] = set()
    for number, fields in _records(path):
        row = _parse_row(fields, f"{path}: line {number}")
        unit, cycle = int(row[0]), int(row[1])
        if blocks and blocks[-1][0] == unit:
            previous = int(blocks[-1][1][-1][1])
            if cycle == previous:
                raise DataError(f"{path}: line {number}: unit {unit} cycle {cycle} is given twice (on this line and "
                                "the one before)")
            if cycle < previous:
                raise DataError(f"{path}: line {number}: unit {unit} cycle {cycle} does not follow cycle {previous}")
            blocks[-1][1].append(row)
            continue
        if unit in seen:
            raise DataError(
                f"{path}: line {number}: unit {unit} appears again after unit {blocks[-1][0]} started "
                "(the rows of a unit must be contiguous)"
            )
        seen.add(unit)
        blocks.append((unit, [row]))
    if not blocks:
        raise DataError(f"{path}: empty file (expected rows of {_LAYOUT})")
    return [_engine(unit, np.array(rows)) for unit, rows in blocks]


def units_held(units: Sequence[int]) -> str:
    """The units a file holds, for a message: "units 1..100" when they run without a gap, else listed ("units 1,
    5"): "no engine 3 (units 1..5)" said of a file holding units 1 and 5 suggested it had a unit 3."""
    ordered = sorted(set(units))
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"units {ordered[0]}..{ordered[-1]}" if len(ordered) > 1 else f"unit {ordered[0]}"
    return "units " + listed([str(unit) for unit in ordered])


def read_rul(path: str | Path, units: Sequence[int] | None = None) -> np.ndarray:
    """The true remaining lives of ``RUL_FD00x.txt``, line k being unit k's: (B,) float for ``units`` (unit
    numbers, in their order), or every line's when None.

    One non-negative finite number per line; anything else is a one-line DataError naming the line, as is a blank
    line before a value (it would shift every later unit's) and a unit with no line.
    """
    path = Path(path)
    values: list[float] = []
    blank = None  # the first blank line, refused once a value follows it
    for number, line in enumerate(read_lines(path), 1):
        fields = line.split()
        if not fields:
            blank = blank or number
            continue
        where = f"{path}: line {number}"
        if blank is not None:
            raise DataError(f"{path}: line {blank}: blank line among the remaining lives (line k is unit k's, so "
                            "it would shift every later unit's)")
        if len(fields) != 1:
            raise DataError(f"{where}: expected one number, found {len(fields)} fields")
        value = _number(fields[0], where, "a remaining life")
        if value < 0:
            raise DataError(f"{where}: negative remaining life: {fields[0]!r}")
        values.append(value)
    if not values:
        raise DataError(f"{path}: empty file (expected one remaining life per line)")
    if units is None:
        return np.array(values, dtype=np.float64)
    if missing := [unit for unit in units if not 1 <= unit <= len(values)]:
        raise DataError(f"{path}: {len(values)} lines, and none for unit {missing[0]} (line k is unit k's true "
                        "remaining life)")
    return np.array([values[unit - 1] for unit in units], dtype=np.float64)


def write_cmapss(path: str | Path, engines: Sequence[Engine]) -> None:
    """Write ``engines`` in the C-MAPSS layout; floats in shortest round-trip form, so reading gives them back."""
    units = [engine.unit for engine in engines]
    if len(set(units)) != len(units):
        raise ValueError(f"unit numbers must be distinct, got {units}")
    lines = []
    for engine in engines:
        values = np.concatenate([engine.settings, engine.sensors], axis=1).tolist()  # (L, 24)
        for cycle, row in zip(engine.cycles.tolist(), values, strict=True):
            lines.append(f"{engine.unit} {cycle} " + " ".join(map(repr, row)))
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def write_rul(path: str | Path, rul: Sequence[float] | np.ndarray) -> None:
    """Write one remaining life per line (whole numbers without decimals), as ``RUL_FD00x.txt``."""
    values = [float(value) for value in np.asarray(rul, dtype=np.float64).ravel()]
    text = "".join(f"{int(v) if v.is_integer() else repr(v)}\n" for v in values)
    Path(path).write_text(text, encoding="utf-8")


def _engine(unit: int, rows: np.ndarray) -> Engine:
    return Engine(
        unit=unit,
        cycles=rows[:, 1].astype(np.int64),  # (L,)
        settings=rows[:, 2 : 2 + N_SETTINGS],  # (L, 3)
        sensors=rows[:, 2 + N_SETTINGS :],  # (L, 21)
    )


def _parse_row(fields: list[str], where: str) -> list[float]:
    """The 26 numbers of one row; unit and cycle must be positive whole numbers."""
    if len(fields) != N_COLUMNS:
        raise DataError(f"{where}: expected {N_COLUMNS} columns, found {len(fields)}")
    try:
        row = [float(field) for field in fields] if _plain("".join(fields)) else []
    except ValueError:
        row = []
    if len(row) != N_COLUMNS or not all(abs(value) <= MAX_MAGNITUDE for value in row):  # find the field to blame
        row = [_number(field, f"{where}, column {i} ({column_name(i)})") for i, field in enumerate(fields, 1)]
    for i in (1, 2):
        if row[i - 1] < 1 or not row[i - 1].is_integer():
            raise DataError(f"{where}, column {i} ({column_name(i)}): not a positive whole number: {fields[i - 1]!r}")
        if row[i - 1] > MAX_ID:  # beyond it a float no longer holds the number the file wrote
            raise DataError(f"{where}, column {i} ({column_name(i)}): {fields[i - 1].strip()[:40]!r} is too large "
                            f"(at most {MAX_ID})")
    return row


def _plain(text: str) -> bool:
    """Whether ``text`` holds no character that Python's float() reads but a data file's number never has:
    digit separators ("1_589.70") and digits of other scripts ("١٢")."""
    return text.isascii() and "_" not in text


def _number(field: str, where: str, what: str = "a reading") -> float:
    """``field`` as a finite number within float32; ``what`` it is, for the message ("a reading", "a remaining
    life")."""
    try:
        if not _plain(field):
            raise ValueError(field)
        value = float(field)
    except ValueError:
        raise DataError(f"{where}: not a number: {field!r}") from None
    if math.isnan(value):
        raise DataError(f"{where}: NaN ({what} must be a finite number)")
    if math.isinf(value):
        raise DataError(f"{where}: {'-inf' if value < 0 else 'inf'} ({what} must be a finite number)")
    if abs(value) > MAX_MAGNITUDE:
        raise DataError(f"{where}: {field!r} is beyond the model's float32 range (at most {MAX_MAGNITUDE:.4g})")
    return value


def _records(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, whitespace-separated fields) of each non-blank line of a UTF-8 file."""
    return [(number, fields) for number, line in enumerate(read_lines(path), 1) if (fields := line.split())]

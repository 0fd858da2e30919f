"""Sensors -> alerts -> recommendations, in one call.

``EngineMonitor.from_checkpoint(rul.pt).analyse(engine, recommender)`` takes one engine's sensor
history and returns its remaining useful life, health state, the temporal attention over its last
window, the alerts that attention points at (catalog phrases) and, with a translator, one
recommendation per alert with its own alignment matrix (pictures of it: ``seq2seq.serving.figures``).

Shapes (legend: seq2seq/__init__.py): L cycles of history, W window cycles, F kept sensors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from seq2seq.config import RulConfig, SearchConfig
from seq2seq.errors import DataError, counted
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.rul.alerts import BASELINE_CYCLES, Alert, engine_alerts, too_short
from seq2seq.rul.cmapss import Engine
from seq2seq.rul.evaluate import predict
from seq2seq.rul.model import RulModel
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.train import load_rul_checkpoint
from seq2seq.rul.windows import HEALTH_STATES, health_state, windows

# Training standard deviations from the fleet's mean beyond which a reading is called implausible: worn FD001
# engines stay within about 14 (the default RUL model, all of train_FD001.txt), a typo or a dead sensor lies far
# beyond (T24 at 1e6: about 2 million; every sensor at 1.0: about 1,300).
IMPLAUSIBLE_Z = 100.0
# The model learned remaining lives up to rul_cap; a prediction past this multiple of it reads wear it never saw.
# Every train_FD001.txt engine cut at 5, 20 and 50 cycles and whole stays within 1.13 (the default RUL model); the
# engine 1 file saved with readings rounded to whole numbers reads 1.26 ("RUL 157 cycles, healthy" at 46).
BEYOND_CAP = 1.2
# Windows built and predicted at a time: a history of tens of thousands of cycles built at once took twice the memory
# (docs/sensors.md). A multiple of predict's batch: every window is batched with the same others as in one piece.
CHUNK_WINDOWS = 8 * 512


@dataclass(frozen=True)
class EngineReport:
    unit: int
    rul: float  # predicted remaining useful life at the last cycle, in cycles
    health: str  # one of HEALTH_STATES
    health_probabilities: dict[str, float]
    window_cycles: list[int]  # the real cycles of the last window, oldest first
    attention: list[float]  # the model's temporal attention over those cycles (sums to 1)
    rul_trend: list[tuple[int, float]]  # (cycle, predicted RUL) over the whole history
    deviations: dict[str, float]  # attention-weighted signed deviation per kept sensor symbol
    window_values: dict[str, list[float]]  # normalised value of each kept sensor over the window
    alerts: list[Alert]
    recommendations: list[Recommendation] = field(default_factory=list)  # one per alert, same order
    warnings: list[str] = field(default_factory=list)  # why it may be wrong: readings, skipped cycles, the two heads

    def alert_lines(self) -> list[str]:
        return [alert.line(self.health) for alert in self.alerts]

    @property
    def note(self) -> str:
        """Why no alert could be raised at all ("" when the history was long enough to judge)."""
        return too_short(len(self.rul_trend))


GAP_EFFECT = "the model reads the cycles either side of a gap as successive"  # 1-20 then 181-192: 32 cycles of wear


def skipped_cycles(engine: Engine) -> str:
    """The cycles the history skips, for a message ("cycles 3-5 are missing from the history"), "" when none: a
    file may skip cycles, as only their order is checked."""
    gaps = np.flatnonzero(np.diff(engine.cycles) > 1)
    if not len(gaps):
        return ""
    first, last = int(engine.cycles[gaps[0]]) + 1, int(engine.cycles[gaps[0] + 1]) - 1
    more = f" and {counted(len(gaps) - 1, 'more gap')}" if len(gaps) > 1 else ""
    span = f"cycle {first} is" if first == last and not more else f"cycles {first}-{last}{more} are"
    return f"{span} missing from the history"


def missing_cycles(engine: Engine) -> list[str]:
    """A warning when the history skips cycles (``GAP_EFFECT``)."""
    skipped = skipped_cycles(engine)
    return [f"{skipped}: {GAP_EFFECT}, so the RUL and health may be wrong"] if skipped else []


def late_start(engine: Engine) -> list[str]:
    """A warning when the history starts after its first BASELINE_CYCLES cycles: the alerts measure the last cycles
    against the first ones given, which are then worn already (FD001 engine 1 from cycle 140 called its three
    sharp drifts moderate). The RUL does not use that reference."""
    first = int(engine.cycles[0])
    if first <= BASELINE_CYCLES:
        return []
    return [f"the history starts at cycle {first}: the alerts compare the last cycles with its first ones, which may "
            "be worn already, so the alerts may read weaker than the wear is"]


def beyond_training(rul: float, config: RulConfig) -> list[str]:
    """A warning when the predicted RUL lies well past the longest remaining life the model learned (``BEYOND_CAP``):
    readings unlike any it was trained on (rounded, from another engine type), which it may call healthy."""
    if rul <= BEYOND_CAP * config.rul_cap:
        return []
    return [f"the predicted RUL of {rul:.0f} cycles is beyond the longest the model learned ({config.rul_cap}): "
            "these readings are unlike its training data (rounded? another engine type?), so the RUL and health may "
            "be wrong"]


def implausible_readings(engine: Engine, values: np.ndarray, kept: list[int], symbols: list[str]) -> list[str]:
    """A warning for each kept sensor with a reading over IMPLAUSIBLE_Z training standard deviations from the
    fleet's mean (its most extreme one): a typo or a faulty sensor, not wear, which the model reads as whatever
    it resembles (T24 set to 1e6 on one cycle moved FD001 engine 81 from critical, RUL 31, to degrading, RUL 56).
    ``values``: the engine's z-scores (L, F)."""
    warnings = []
    for f, symbol in enumerate(symbols):
        row = int(np.argmax(np.abs(values[:, f])))
        if abs(values[row, f]) > IMPLAUSIBLE_Z:
            warnings.append(f"sensor {symbol} reads {engine.sensors[row, kept[f] - 1]:g} at cycle "
                            f"{int(engine.cycles[row])}, {abs(values[row, f]):,.0f} training standard deviations from "
                            "the fleet's mean: a faulty reading? this engine's RUL and health may be wrong")
    return warnings


class EngineMonitor:
    """A trained RUL model with the preprocessing it was trained with."""

    def __init__(self, model: RulModel, config: RulConfig, preprocessor: Preprocessor) -> None:
        self.model, self.config, self.preprocessor = model.eval(), config, preprocessor

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> EngineMonitor:
        model, config, preprocessor_state = load_rul_checkpoint(path)
        return cls(model, config, Preprocessor.from_state_dict(preprocessor_state))

    def health(self, called: int, rul: float) -> tuple[str, list[str]]:
        """The health state shown: the more severe of the health head's ``called`` class and the band of the
        predicted ``rul`` (``windows.health_state``), with a warning when they differ. The two heads are trained
        apart, and one said "RUL 27 cycles, degrading" (the band: critical) for 7% of FD001 histories: a failing
        engine under-warned, and two answers a technician cannot both believe."""
        band = health_state(rul, self.config)
        if band == called:
            return HEALTH_STATES[called], []
        shown = HEALTH_STATES[max(band, called)]
        return shown, [f"the health call ({HEALTH_STATES[called]}) and the RUL of {rul:.0f} cycles "
                       f"({HEALTH_STATES[band]} band) disagree: shown as {shown}, the more severe"]

    def analyse(self, engine: Engine, recommender: Recommender | None = None, search: SearchConfig | None = None,
                progress: Callable[[int], None] | None = None) -> EngineReport:
        """``progress(n)`` after each ``n`` cycles of the history are assessed (for a bar over a long history)."""
        if not isinstance(engine, Engine):  # a program's None or list failed on a missing attribute
            raise TypeError(f"engine must be a seq2seq.rul.cmapss.Engine, got {type(engine).__name__}")
        if recommender is not None and not isinstance(recommender, Recommender):
            raise TypeError(f"recommender must be a seq2seq.recommender.Recommender or None, got "
                            f"{type(recommender).__name__}")
        values = self.preprocessor.transform(engine)  # (L, F)
        L = values.shape[0]
        trend = []
        for start in range(0, L, CHUNK_WINDOWS):
            ends = np.arange(start, min(start + CHUNK_WINDOWS, L))  # (B,)
            x, mask = windows(values, ends, self.preprocessor.window)  # (B, W, F), (B, W)
            output = predict(self.model, torch.from_numpy(x), torch.from_numpy(mask))
            if not (torch.isfinite(output.rul).all() and torch.isfinite(output.health_logits).all()):
                # never turned into a health state: NaN would read as "healthy" (argmax of NaNs is 0)
                raise DataError(f"engine {engine.unit}: the RUL model's prediction is not a finite number; its "
                                "sensor readings lie too far outside the training range to be assessed")
            trend.append(output.rul)
            if progress is not None:
                progress(len(ends))
        real = torch.from_numpy(mask[-1])  # the last window's, as its outputs below
        attention = output.attention[-1][real].double().numpy()  # (n,)
        probabilities = torch.softmax(output.health_logits[-1].float(), dim=-1).tolist()
        rul_trend = torch.cat(trend)  # (L,)
        rul = float(rul_trend[-1])
        health, disagreement = self.health(int(np.argmax(probabilities)), rul)
        kept = self.preprocessor.kept_sensors
        alerts, deviations = engine_alerts(values, engine.cycles, attention, kept)
        n = attention.shape[0]
        symbols = list(deviations)
        recommendations = []
        if recommender is not None and alerts:
            recommendations = recommender.recommend([alert.phrase for alert in alerts], search)
        return EngineReport(
            warnings=implausible_readings(engine, values, kept, symbols) + missing_cycles(engine) + late_start(engine)
            + beyond_training(rul, self.config) + disagreement,
            unit=engine.unit, rul=rul, health=health,
            health_probabilities=dict(zip(HEALTH_STATES, probabilities, strict=True)),
            window_cycles=[int(c) for c in engine.cycles[L - n:]], attention=attention.tolist(),
            rul_trend=[(int(c), float(r)) for c, r in zip(engine.cycles, rul_trend.tolist(), strict=True)],
            deviations=deviations,
            window_values={s: values[L - n:, i].tolist() for i, s in enumerate(symbols)},
            alerts=alerts, recommendations=recommendations)

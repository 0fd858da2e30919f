"""Sensors -> alerts -> recommendations, in one call.

``EngineMonitor.from_checkpoint(rul.pt).analyse(engine, recommender)`` takes one engine's sensor
history and returns its remaining useful life, health state, the temporal attention over its last
window, the alerts that attention points at (catalog phrases) and, with a translator, one
recommendation per alert with its own alignment matrix (pictures of it: ``seq2seq.serving.figures``).

Shapes (legend: seq2seq/__init__.py): L cycles of history, W window cycles, F kept sensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from seq2seq.config import RulConfig, SearchConfig
from seq2seq.errors import DataError
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.rul.alerts import Alert, engine_alerts, too_short
from seq2seq.rul.cmapss import Engine
from seq2seq.rul.evaluate import predict
from seq2seq.rul.model import RulModel
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.train import load_rul_checkpoint
from seq2seq.rul.windows import HEALTH_STATES, windows


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

    def alert_lines(self) -> list[str]:
        return [alert.line(self.health) for alert in self.alerts]

    @property
    def note(self) -> str:
        """Why no alert could be raised at all ("" when the history was long enough to judge)."""
        return too_short(len(self.rul_trend))


class EngineMonitor:
    """A trained RUL model with the preprocessing it was trained with."""

    def __init__(self, model: RulModel, config: RulConfig, preprocessor: Preprocessor) -> None:
        self.model, self.config, self.preprocessor = model.eval(), config, preprocessor

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> EngineMonitor:
        model, config, preprocessor_state = load_rul_checkpoint(path)
        return cls(model, config, Preprocessor.from_state_dict(preprocessor_state))

    def analyse(self, engine: Engine, recommender: Recommender | None = None,
                search: SearchConfig | None = None) -> EngineReport:
        values = self.preprocessor.transform(engine)  # (L, F)
        L = values.shape[0]
        x, mask = windows(values, np.arange(L), self.preprocessor.window)  # (L, W, F), (L, W)
        output = predict(self.model, torch.from_numpy(x), torch.from_numpy(mask))
        if not (torch.isfinite(output.rul).all() and torch.isfinite(output.health_logits).all()):
            # never turned into a health state: NaN would read as "healthy" (argmax of NaNs is 0)
            raise DataError(f"engine {engine.unit}: the RUL model's prediction is not a finite number; its sensor "
                            "readings lie too far outside the training range to be assessed")
        real = torch.from_numpy(mask[-1])
        attention = output.attention[-1][real].double().numpy()  # (n,)
        probabilities = torch.softmax(output.health_logits[-1].float(), dim=-1).tolist()
        health = HEALTH_STATES[int(np.argmax(probabilities))]
        kept = self.preprocessor.kept_sensors
        alerts, deviations = engine_alerts(values, engine.cycles, attention, kept)
        n = attention.shape[0]
        symbols = list(deviations)
        recommendations = []
        if recommender is not None and alerts:
            recommendations = recommender.recommend([alert.phrase for alert in alerts], search)
        return EngineReport(
            unit=engine.unit, rul=float(output.rul[-1]), health=health,
            health_probabilities=dict(zip(HEALTH_STATES, probabilities, strict=True)),
            window_cycles=[int(c) for c in engine.cycles[L - n:]], attention=attention.tolist(),
            rul_trend=[(int(c), float(r)) for c, r in zip(engine.cycles, output.rul.tolist(), strict=True)],
            deviations=deviations,
            window_values={s: values[L - n:, i].tolist() for i, s in enumerate(symbols)},
            alerts=alerts, recommendations=recommendations)

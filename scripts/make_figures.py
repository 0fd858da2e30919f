"""Render the sensor -> alert -> recommendation chain for one engine as PNG files (for the README).

    python scripts/make_figures.py --rul-model RUL.pt --translator TRANSLATOR.pt --data train_FD001.txt \
        --engine 3 --out data/figures

Writes ``engine_attention.png`` (RUL trend and the temporal attention over the last window with the
alerting sensors), ``engine_deviations.png`` (per-sensor weighted deviations) and
``alert_heatmap.png`` (the first alert's recommendation with its alignment heatmap), and prints the
engine's report. ``--out`` defaults to the repository's ``data/figures``, the README's figures, whatever
the current folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from seq2seq.cli import run_script
from seq2seq.errors import ConfigError
from seq2seq.recommender import Recommender
from seq2seq.rul.cmapss import read_cmapss, units_held
from seq2seq.rul.monitor import EngineMonitor
from seq2seq.serving.figures import attention_figure, deviation_figure, recommendation_figures

ROOT = Path(__file__).resolve().parent.parent


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rul-model", required=True)
    p.add_argument("--translator", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--engine", type=int, required=True)
    p.add_argument("--out", default=str(ROOT / "data" / "figures"), help="default: the repository's data/figures")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    engines = read_cmapss(args.data)
    engine = next((e for e in engines if e.unit == args.engine), None)
    if engine is None:  # before either model loads
        raise ConfigError(f"{args.data}: no engine {args.engine} ({units_held([e.unit for e in engines])})")
    report = EngineMonitor.from_checkpoint(args.rul_model).analyse(engine, Recommender.from_checkpoint(args.translator))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    attention_figure(report).savefig(out / "engine_attention.png", dpi=90)
    deviation_figure(report).savefig(out / "engine_deviations.png", dpi=90)
    if report.recommendations:
        recommendation_figures(report.recommendations[0])[0].savefig(out / "alert_heatmap.png", dpi=90)
    print(f"engine {report.unit}: RUL {report.rul:.0f} cycles, {report.health}")
    for line, recommendation in zip(report.alert_lines(), report.recommendations, strict=True):
        print(f"  {line}  ->  {recommendation.text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "make_figures"))

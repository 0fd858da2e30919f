"""``seq2seq rul train | evaluate | alerts``: the sensor side on the command line."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from seq2seq.cli.common import path_flag
from seq2seq.cli.translate import search_flags
from seq2seq.config import DEVICES, RulConfig, SearchConfig, resolve_device
from seq2seq.config_checks import NAMES, from_dict
from seq2seq.config_file import check_names, load_config_file
from seq2seq.errors import ConfigError, DataError, FleetError
from seq2seq.files import held_folder
from seq2seq.progress import progress_bar
from seq2seq.recommender import Recommendation, Recommender
from seq2seq.resume import file_fingerprint
from seq2seq.rul.cmapss import read_cmapss, read_rul, units_held
from seq2seq.rul.evaluate import PROTOCOL_CAP, evaluate_windows
from seq2seq.rul.monitor import GAP_EFFECT, EngineMonitor, skipped_cycles
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.runs import prepare_run, split_engines, train_members, train_on_engines
from seq2seq.rul.synthetic import synthetic_engines
from seq2seq.rul.windows import last_windows
from seq2seq.serving.views import translation_json
from seq2seq.trust import NOT_ADVICE, UNLIKE_HISTORY

UNCAPPED = 100_000  # a cap beyond any engine's life


def add_rul_parser(commands: argparse._SubParsersAction) -> None:
    rul = commands.add_parser("rul", help="remaining-useful-life model on C-MAPSS data, and its alerts")
    sub = rul.add_subparsers(dest="rul_command", metavar="{train,evaluate,alerts}", required=True)
    p = sub.add_parser("train", help="train the RUL model (default data: synthetic engines)")
    p.add_argument("--data", type=path_flag,
                   help="C-MAPSS training file (train_FD00x.txt); default: 100 synthetic engines")
    p.add_argument("--output-dir", type=path_flag, required=True)
    p.add_argument("--config", type=path_flag, help="JSON file with a section 'rul' of RulConfig fields")
    p.add_argument("--epochs", type=int)
    p.add_argument("--max-minutes", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--device", choices=DEVICES)
    p.add_argument("--resume", action="store_true", help="continue the run in OUTPUT_DIR after its last finished "
                   "epoch (a recipe: its members that finished are kept)")
    p.add_argument("--overwrite", action="store_true", help="replace a finished or stopped run in OUTPUT_DIR")
    p = sub.add_parser("evaluate", help="RMSE and PHM08 score on an official test set")
    p.add_argument("--model", type=path_flag, required=True)
    p.add_argument("--test", type=path_flag, required=True, help="test_FD00x.txt (truncated histories)")
    p.add_argument("--rul", type=path_flag, required=True, help="RUL_FD00x.txt (true RUL of each test engine)")
    p.add_argument("--cap", type=int, default=PROTOCOL_CAP, help="score against true RULs capped at this many "
                   f"cycles (default {PROTOCOL_CAP}, the literature's protocol, whatever the model's own cap; 0: none)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("alerts", help="RUL, health and alerts per engine, optionally with recommendations")
    p.add_argument("--model", type=path_flag, required=True)
    p.add_argument("--data", type=path_flag, required=True, help="a C-MAPSS-format file of engine histories")
    p.add_argument("--engine", type=int, help="only this unit")
    p.add_argument("--translator", type=path_flag, help="a translator checkpoint: adds a recommendation per alert")
    p.add_argument("--beam-size", type=int, help="default: the translator's (greedy unless its recipe tuned one)")
    p.add_argument("--json", action="store_true")


def rul_config(args: argparse.Namespace) -> RulConfig:
    """The run's RulConfig; a bad value is blamed on the flag that set it, else on the config file."""
    values: dict[str, Any] = {}
    if args.config:
        section = load_config_file(args.config, ("rul",), "seq2seq rul train").get("rul", {})
        if not isinstance(section, dict):  # dict() would take a list of pairs, and fail on anything else
            raise ConfigError(f"{args.config}: section rul must be an object of rul fields")
        values = dict(section)
        check_names(values, NAMES["RulConfig"], f"{args.config}: rul")
        from_dict(RulConfig, values, f"{args.config}: rul")  # the file as written: a flag may hide a fault in it
    flags = {}
    for flag, key in (("epochs", "epochs"), ("max_minutes", "max_minutes"), ("seed", "seed"), ("device", "device")):
        if getattr(args, flag) is not None:
            values[key], flags[key] = getattr(args, flag), "--" + flag.replace("_", "-")
    config = from_dict(RulConfig, values, f"{args.config or 'options'}: rul", flags)
    if config.rul_cap <= config.degrading_below:  # a rule of training: a loaded model's config may be replaced
        raise ConfigError(f"{args.config or 'options'}: rul: rul_cap ({config.rul_cap}) must be above degrading_below "
                          f"({config.degrading_below}): the model predicts at most rul_cap cycles, so no engine "
                          "would read as healthy")
    return config


def run_rul(args: argparse.Namespace) -> int:
    return {"train": run_train, "evaluate": run_evaluate, "alerts": run_alerts}[args.rul_command](args)


def run_train(args: argparse.Namespace) -> int:
    config = rul_config(args)
    engines = read_cmapss(args.data) if args.data else synthetic_engines(100, seed=config.seed)
    # No --data: synthetic engines, made from the seed. A regular file is proven by its SHA-256; a pipe, which has
    # none, by what was read from it (else --resume took another fleet through the same pipe without a word).
    read = [] if args.data is None or Path(args.data).is_file() else \
        [(e.unit, e.cycles.tobytes(), e.settings.tobytes(), e.sensors.tobytes()) for e in engines]
    fingerprint = {"--data": file_fingerprint(args.data, read)}
    source = args.data or "synthetic engines"
    with fleet_named(source):  # engines no model can be trained on, refused before the run's folder is touched
        Preprocessor.fit(split_engines(engines, config)[0], config)
    resolve_device(config.device)  # a device this machine lacks: refused before --overwrite deletes the old run
    output_dir = Path(args.output_dir)
    # two runs into one folder: the second is refused before it deletes or writes anything
    with held_folder(output_dir), fleet_named(source):  # a later member's split may still hold no varying sensor
        # After the data is read (a bad file leaves an old run in place), before any log line (a refusal stands
        # alone)
        prepare_run(output_dir, config, args.resume, args.overwrite, fingerprint)
        log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        log(f"data: {source}")
        if config.members > 1:
            result = train_members(engines, config, output_dir, log, args.resume, fingerprint)
        else:
            result, _ = train_on_engines(engines, config, output_dir, log, resume=args.resume, fingerprint=fingerprint)
    print(json.dumps({"output_dir": args.output_dir, **dataclasses.asdict(result)}))
    return 0


@contextlib.contextmanager
def fleet_named(source: str) -> Iterator[None]:
    """A FleetError raised inside, with the file the engines came from in front."""
    try:
        yield
    except FleetError as err:
        raise FleetError(f"{source}: {err}") from None


def run_evaluate(args: argparse.Namespace) -> int:
    if not 0 <= args.cap <= UNCAPPED:  # refused before the model and files are read
        raise ConfigError(f"argument --cap: must be a number of cycles in [0, {UNCAPPED}] (0: uncapped), "
                          f"got {args.cap}")
    monitor = EngineMonitor.from_checkpoint(args.model)
    # RUL_FD00x.txt's line k is unit k's true life, whatever order and subset of units the test file holds; scored in
    # unit order, so that the sums come out alike
    engines = sorted(read_cmapss(args.test), key=lambda engine: engine.unit)
    true_rul = read_rul(args.rul, [engine.unit for engine in engines])
    if gappy := [engine for engine in engines if skipped_cycles(engine)]:  # scored, as the official files have none
        print(f"warning: {args.test}: {units_held([e.unit for e in gappy])} skip{'s' if len(gappy) == 1 else ''} "
              f"cycles (unit {gappy[0].unit}: {skipped_cycles(gappy[0])}): {GAP_EFFECT}, so their RUL may be wrong; "
              "scored as given", file=sys.stderr)
    if (lines := len(read_rul(args.rul))) > len(engines):  # any subset may be scored; another set's truth may not
        print(f"note: {args.rul}: {len(engines)} of its {lines} lines used, one per engine of {args.test} (is it "
              "this test file's truth?)", file=sys.stderr)
    # The truth's cap is the protocol's, not the model's: a model trained with a lower cap must not be scored
    # against an easier truth. Only the targets depend on it, not what the model reads.
    truth = replace(monitor.config, rul_cap=args.cap or UNCAPPED)
    windows = last_windows(engines, monitor.preprocessor, truth, final_rul=true_rul)
    scores = evaluate_windows(monitor.model, windows)
    if args.json:
        print(json.dumps({**scores.to_json(), "cap": args.cap}))
    else:
        print(f"RMSE {scores.rmse:.2f}  PHM08 score {scores.score:.1f}  ({scores.n_engines} engines, true RUL "
              + (f"capped at {args.cap})" if args.cap else "uncapped)"))
    return 0


def run_alerts(args: argparse.Namespace) -> int:
    if args.beam_size is not None and args.translator is None:
        raise ConfigError("argument --beam-size: sets the search of --translator, and no --translator is given")
    search_flags(args)  # a beam out of range is blamed on --beam-size, before anything loads
    monitor = EngineMonitor.from_checkpoint(args.model)
    engines = read_cmapss(args.data)
    if args.engine is not None:
        units = [e.unit for e in engines]
        engines = [e for e in engines if e.unit == args.engine]
        if not engines:
            raise ConfigError(f"{args.data}: no engine {args.engine} ({units_held(units)})")
    recommender = Recommender.from_checkpoint(args.translator) if args.translator else None
    search = SearchConfig() if recommender is None else recommender.search
    search = search if args.beam_size is None else replace(search, beam_size=args.beam_size)
    rows = []
    for engine in engines:
        try:  # a bar only for a history that takes a while (tens of thousands of cycles), gone before its lines
            with progress_bar(total=len(engine.cycles), desc=f"engine {engine.unit}", unit="cycle", leave=False,
                              delay=2.0, mininterval=1.0) as bar:
                report = monitor.analyse(engine, recommender, search, bar.update)
        except DataError as err:  # this engine's readings cannot be assessed; the others still are
            rows.append({"engine": engine.unit, "error": str(err)})
            print(f"warning: {args.data}: {err}", file=sys.stderr)
            if not args.json:
                print(f"engine {engine.unit}: no assessment (see the warning)")
            continue
        row = {"engine": report.unit, "rul": round(report.rul, 1), "health": report.health,
               "alerts": report.alert_lines(), "alert_cycles": [alert.cycle for alert in report.alerts],
               "note": report.note, "warnings": report.warnings}
        if recommender is not None:
            row["recommendations"] = [r.text for r in report.recommendations]  # as before: strings
            row["judgements"] = [translation_json(r) for r in report.recommendations]  # trust, verdict, warning
        rows.append(row)
        if not args.json:
            print(f"engine {row['engine']}: RUL {row['rul']:.0f} cycles, {row['health']}")
            if row["note"]:
                print(f"  no alerts: {row['note']}")
            for warning in report.warnings:
                print(f"  warning: {warning}")
            for i, line in enumerate(row["alerts"]):
                advice = f"  ->  {advice_line(report.recommendations[i])}" if recommender is not None else ""
                print(f"  {line} (peak at cycle {row['alert_cycles'][i]}){advice}")
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
    return 0


def advice_line(recommendation: Recommendation) -> str:
    """A recommendation in one line, with what tells whether to act on it: its verdict and trust, and any
    warning (an out-of-scope or empty answer must not read as advice)."""
    r = recommendation
    notes = [f"{r.verdict}, trust {r.trust:.2f}"] if r.verdict is not None and r.trust is not None else []
    notes += [r.warning] if r.warning else []
    text = r.text or "(no recommendation)"
    if r.verdict == "out-of-scope" and r.text:  # as the UI says it: the text is a guess, not advice
        text = f"OUT OF SCOPE, {UNLIKE_HISTORY}; {NOT_ADVICE}: \"{r.text}\""
    return f"{text}  [{'; '.join(notes)}]" if notes else text

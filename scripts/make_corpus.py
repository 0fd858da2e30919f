"""Generate the alert -> recommendation corpus (data/{train,dev,test}.tsv) from seq2seq.catalog.

Every meaning of the catalog (sensor x direction x strength, component x symptom x strength) gets
its canonical alert plus surface variants written the way technicians write: synonyms,
abbreviations, word order, letter case and an occasional typo. The target side is always the
catalog's canonical recommendation. Deterministic: one ``random.Random(seed)`` drives every choice,
so the files are byte-identical run to run.

    python scripts/make_corpus.py [--out DIR] [--seed N] [--check]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from seq2seq import catalog
from seq2seq.cli import run_script

SEED = 2024
VARIANTS = 18  # sources per meaning, the canonical alert included
DEV_SIZE = 500
TEST_SIZE = 500
TYPO_RATE = 0.03
MIN_WORDS = 3  # shorter variants ("pump leak") read as fragments; the canonical alerts have 3+
SPLITS = ("train", "dev", "test")
HEADER = "source\ttarget\n"

TREND_VERBS = {
    "up": ("rising", "increasing", "climbing", "trending up", "going up", "drifting up"),
    "down": ("falling", "decreasing", "dropping", "trending down", "going down", "drifting down"),
}
TREND_NOUNS = {
    "up": ("rise", "increase", "climb", "upward trend", "upshift"),
    "down": ("drop", "decrease", "decline", "fall", "downward trend"),
}
LEVELS = {"up": ("high", "elevated", "above baseline"), "down": ("low", "depressed", "below baseline")}
ADVERBS = {
    "slight": ("slightly", "a little", "marginally", "a bit"),
    "moderate": ("moderately", "steadily", "noticeably"),
    "sharp": ("sharply", "rapidly", "fast", "steeply", "quickly"),
}
ADJECTIVES = {
    "slight": ("slight", "small", "minor", "mild"),
    "moderate": ("moderate", "steady", "noticeable"),
    "sharp": ("sharp", "rapid", "steep", "sudden", "large"),
}
LEVEL_MODIFIERS = {"slight": ("slightly", "a bit", "marginally"), "moderate": ("moderately", "fairly"),
                   "sharp": ("very", "extremely", "way")}
# Verbs that carry the strength themselves; moderate has none.
STRENGTH_VERBS = {
    ("up", "slight"): ("creeping up", "edging up", "ticking up"),
    ("up", "sharp"): ("spiking", "surging", "jumping", "soaring"),
    ("down", "slight"): ("creeping down", "edging down", "sagging"),
    ("down", "sharp"): ("plunging", "plummeting", "crashing", "collapsing"),
}
# An alert without a severity word is read as moderate.
SEVERITIES = {
    "slight": ("minor", "slight", "small", "early"),
    "moderate": ("", "moderate", "noticeable"),
    "sharp": ("severe", "critical", "major", "excessive", "heavy"),
}
# The issue's own examples, kept in train so that they are answered exactly.
ISSUE_EXAMPLES = (
    ("vibration rise near motor bearings", "bearing", "vibration", "moderate"),
    ("hydraulic pressure drop and leakage", "hydraulic", "leak", "moderate"),
    ("coolant contamination alert triggered", "coolant", "contamination", "moderate"),
)


@dataclass(frozen=True)
class Pair:
    """One corpus line; ``anchor`` pairs (canonical alerts, issue examples) always go to train."""

    source: str
    target: str
    anchor: bool = False


def normalise(text: str) -> str:
    """The form sources are deduplicated and compared by: lower case, single spaces."""
    return " ".join(text.lower().split())


def sensor_forms(sensor: catalog.Sensor, direction: str, strength: str) -> list[str]:
    """Every source-side way of writing one sensor alert, in a fixed order."""
    names = (sensor.phrase, sensor.symbol, *sensor.aliases)
    verbs, nouns = TREND_VERBS[direction], TREND_NOUNS[direction]
    advs, adjs = ADVERBS[strength], ADJECTIVES[strength]
    forms = []
    for name in names:
        for verb, adv in itertools.product(verbs, advs):
            forms += [f"{name} {verb} {adv}", f"{adv} {verb} {name}", f"{verb} {name} {adv}"]
        for noun, adj in itertools.product(nouns, adjs):
            forms += [f"{adj} {noun} in {name}", f"{name} {adj} {noun}", f"{adj} {name} {noun}",
                      f"{name} alert: {adj} {noun}"]
        for level, mod in itertools.product(LEVELS[direction], LEVEL_MODIFIERS[strength]):
            forms += [f"{name} {mod} {level}"]
        for verb in STRENGTH_VERBS.get((direction, strength), ()):
            forms += [f"{name} {verb}", f"{verb} {name}"]
    return forms


def plant_forms(component: catalog.Component, symptom: str, strength: str) -> list[str]:
    """Every source-side way of writing one plant alert, in a fixed order."""
    forms = []
    names = (component.name, *component.aliases)
    for name, said, sev in itertools.product(names, catalog.SYMPTOMS[symptom], SEVERITIES[strength]):
        forms += [f"{sev} {said} near {name}", f"{sev} {said} at {name}", f"{sev} {name} {said}",
                  f"{name}: {sev} {said}", f"{sev} {name} {said} alert triggered",
                  f"{sev} {said} detected on {name}"]
        if sev:
            forms += [f"{name} {said} - {sev}"]
    return forms


def meanings() -> list[tuple[str, str, list[str]]]:
    """(canonical alert, recommendation, all source forms) for every meaning in the catalog."""
    out = []
    for sensor, direction, strength in itertools.product(catalog.SENSORS, catalog.DIRECTIONS, catalog.STRENGTHS):
        out.append((catalog.sensor_alert(sensor.index, direction, strength),
                    catalog.sensor_recommendation(sensor.index, direction, strength),
                    sensor_forms(sensor, direction, strength)))
    for component in catalog.COMPONENTS:
        for symptom, strength in itertools.product(component.symptoms, catalog.STRENGTHS):
            out.append((catalog.plant_alert(component.name, symptom, strength),
                        catalog.plant_recommendation(component.name, symptom, strength),
                        plant_forms(component, symptom, strength)))
    return out


def restyle(text: str, rng: random.Random) -> str:
    """``text`` in the letter case a technician might use, now and then with one typo."""
    case = rng.choices(("lower", "as is", "upper", "title"), weights=(60, 15, 15, 10))[0]
    text = {"lower": text.lower(), "as is": text, "upper": text.upper(), "title": text.title()}[case]
    return add_typo(text, rng) if rng.random() < TYPO_RATE else text


def add_typo(text: str, rng: random.Random) -> str:
    """``text`` with one letter dropped, swapped with its neighbour or doubled, inside a long word."""
    words = text.split(" ")
    candidates = [i for i, word in enumerate(words) if len(word) >= 4 and word.isalpha()]
    if not candidates:
        return text
    i = rng.choice(candidates)
    word, j = words[i], rng.randrange(1, len(words[i]) - 1)
    kind = rng.choice(("drop", "swap", "double"))
    if kind == "drop":
        word = word[:j] + word[j + 1 :]
    elif kind == "swap":
        word = word[:j] + word[j + 1] + word[j] + word[j + 2 :]
    else:
        word = word[:j] + word[j] + word[j:]
    words[i] = word
    return " ".join(words)


def generate(rng: random.Random) -> list[Pair]:
    """Canonical alerts, issue examples and sampled variants, unique by normalised source."""
    catalog_meanings = meanings()
    pairs = [Pair(alert, target, anchor=True) for alert, target, _ in catalog_meanings]
    pairs += [Pair(text, catalog.plant_recommendation(*parts), anchor=True) for text, *parts in ISSUE_EXAMPLES]
    for alert, target, forms in catalog_meanings:
        candidates = [f for f in dict.fromkeys(" ".join(f.split()) for f in forms)
                      if len(f.split()) >= MIN_WORDS and normalise(f) != alert]
        pairs += [Pair(restyle(form, rng), target) for form in rng.sample(candidates, VARIANTS - 1)]
    unique: dict[str, Pair] = {}
    for pair in pairs:
        # A clash between meanings (e.g. a typo landing on another alert) keeps the first pair.
        unique.setdefault(normalise(pair.source), pair)
    return list(unique.values())


def split(pairs: list[Pair], rng: random.Random) -> dict[str, list[Pair]]:
    """Seeded shuffle into dev, test and train; anchors all go to train."""
    rest = [pair for pair in pairs if not pair.anchor]
    rng.shuffle(rest)
    train = [pair for pair in pairs if pair.anchor] + rest[DEV_SIZE + TEST_SIZE :]
    rng.shuffle(train)
    return {"train": train, "dev": rest[:DEV_SIZE], "test": rest[DEV_SIZE : DEV_SIZE + TEST_SIZE]}


def render(pairs: list[Pair]) -> str:
    """The TSV text of ``pairs``: a header, then one ``source<TAB>target`` line each."""
    for pair in pairs:
        if any(ch in field for field in (pair.source, pair.target) for ch in "\t\n\r") or not pair.target:
            raise ValueError(f"unwritable pair {pair!r}")
    return HEADER + "".join(f"{pair.source}\t{pair.target}\n" for pair in pairs)


def build(seed: int = SEED) -> dict[str, str]:
    """The text of each split file, by split name."""
    rng = random.Random(seed)
    splits = split(generate(rng), rng)
    return {name: render(splits[name]) for name in SPLITS}


def check(texts: dict[str, str], out: Path) -> list[str]:
    """The split files under ``out`` that are missing or differ from ``texts``."""
    stale = []
    for name, text in texts.items():
        path = out / f"{name}.tsv"
        if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
            stale.append(str(path))
    return stale


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, verify) the corpus; print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--check", action="store_true", help="verify the files under --out instead of writing")
    args = parser.parse_args(argv)
    texts = build(args.seed)
    counts = ", ".join(f"{name} {text.count(chr(10)) - 1}" for name, text in texts.items())
    if args.check:
        stale = check(texts, args.out)
        if stale:
            print(f"corpus out of date: {', '.join(stale)}; run python scripts/make_corpus.py", file=sys.stderr)
            return 1
        print(f"corpus up to date ({counts})")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (args.out / f"{name}.tsv").write_bytes(text.encode("utf-8"))
    print(f"wrote {args.out}: {counts} pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main, "make_corpus"))

"""The catalog's contracts and the properties of the corpus generated from it (data/*.tsv)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from support import load_script

from seq2seq import catalog

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "make_corpus.py"
SPLITS = ("train", "dev", "test")


def read_split(name: str) -> list[tuple[str, str]]:
    lines = (ROOT / "data" / f"{name}.tsv").read_text(encoding="utf-8").split("\n")
    assert lines[0] == "source\ttarget" and lines[-1] == ""
    return [tuple(line.split("\t")) for line in lines[1:-1]]


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[tuple[str, str]]]:
    return {name: read_split(name) for name in SPLITS}


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def sensor_meanings():
    return itertools.product(catalog.SENSORS, catalog.DIRECTIONS, catalog.STRENGTHS)


def plant_meanings():
    for component in catalog.COMPONENTS:
        for symptom, strength in itertools.product(component.symptoms, catalog.STRENGTHS):
            yield component, symptom, strength


def names_by_recommendation() -> dict[str, tuple[str, ...]]:
    """Each catalog recommendation -> the source-side names of the component it is about."""
    names = {}
    for sensor, direction, strength in sensor_meanings():
        target = catalog.sensor_recommendation(sensor.symbol, direction, strength)
        names[target] = (sensor.phrase, sensor.symbol.lower(), *sensor.aliases)
    for component, symptom, strength in plant_meanings():
        names[catalog.plant_recommendation(component.name, symptom, strength)] = (component.name, *component.aliases)
    return names


def one_typo_apart(a: str, b: str) -> bool:
    """Equal, or one letter dropped, doubled or swapped with its neighbour (the generator's typos)."""
    if len(a) == len(b):
        diffs = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return not diffs or (len(diffs) == 2 and diffs[1] == diffs[0] + 1 and a[diffs[0]] == b[diffs[1]])
    short, long = sorted((a, b), key=len)
    return len(long) == len(short) + 1 and any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def mentions(source: str, name: str) -> bool:
    words, wanted = source.lower().split(), name.lower().split()
    return any(
        all(one_typo_apart(w, n) for w, n in zip(words[i : i + len(wanted)], wanted, strict=True))
        for i in range(len(words) - len(wanted) + 1)
    )


def test_there_are_21_sensors_with_unique_symbols_phrases_and_indices():
    assert [s.index for s in catalog.SENSORS] == list(range(1, 22))
    assert len({s.symbol.lower() for s in catalog.SENSORS}) == 21
    assert len({s.phrase for s in catalog.SENSORS}) == 21
    assert all(s.phrase == s.phrase.lower() and s.unit and s.description for s in catalog.SENSORS)


def test_sensor_lookup_accepts_index_and_symbol_in_any_case():
    for s in catalog.SENSORS:
        assert catalog.sensor(s.index) is s
        assert catalog.sensor(s.symbol.upper()) is s
        assert catalog.sensor(s.symbol.lower()) is s
    assert catalog.sensor("t30").description == "HPC outlet temperature"


@pytest.mark.parametrize("key", [0, 22, "T31", "", "hpc outlet temperature"])
def test_unknown_sensor_raises_key_error_listing_the_symbols(key):
    with pytest.raises(KeyError) as err:
        catalog.sensor(key)
    assert all(s.symbol in str(err.value) for s in catalog.SENSORS)


def test_invalid_direction_or_strength_raises_value_error_listing_valid_values():
    with pytest.raises(ValueError, match="up, down"):
        catalog.sensor_alert("T30", "sideways", "sharp")
    with pytest.raises(ValueError, match="slight, moderate, sharp"):
        catalog.sensor_alert("T30", "up", "huge")
    with pytest.raises(ValueError, match="slight, moderate, sharp"):
        catalog.sensor_recommendation("T30", "up", "huge")
    with pytest.raises(ValueError, match="leak"):
        catalog.plant_alert("pump", "tripping", "sharp")


def test_canonical_alerts_read_as_documented():
    assert catalog.sensor_alert("T30", "up", "sharp") == "hpc outlet temperature rising sharply"
    assert catalog.sensor_alert(15, "down", "slight") == "bypass ratio falling slightly"
    assert catalog.plant_alert("pump", "leak", "sharp") == "severe pump leak"


def test_every_recommendation_names_its_component_and_follows_the_strength():
    ladder = {"slight": "monitor ", "moderate": "", "sharp": "remove "}
    for sensor, direction, strength in sensor_meanings():
        target = catalog.sensor_recommendation(sensor.index, direction, strength)
        assert sensor.component in target and target.startswith(ladder[strength])
    for component, symptom, strength in plant_meanings():
        target = catalog.plant_recommendation(component.name, symptom, strength)
        assert component.name in target and target.startswith(ladder[strength])


def test_different_meanings_get_different_recommendations():
    targets = [catalog.sensor_recommendation(s.index, d, k) for s, d, k in sensor_meanings()]
    targets += [catalog.plant_recommendation(c.name, y, k) for c, y, k in plant_meanings()]
    assert len(set(targets)) == len(targets)


def test_every_canonical_alert_is_in_train(corpus):
    train = dict(corpus["train"])
    for sensor, direction, strength in sensor_meanings():
        alert = catalog.sensor_alert(sensor.symbol, direction, strength)
        assert train.get(alert) == catalog.sensor_recommendation(sensor.symbol, direction, strength)
    for component, symptom, strength in plant_meanings():
        alert = catalog.plant_alert(component.name, symptom, strength)
        assert train.get(alert) == catalog.plant_recommendation(component.name, symptom, strength)


def test_committed_corpus_passes_the_generators_check():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_check_fails_with_one_line_when_a_file_differs(tmp_path):
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    with (tmp_path / "dev.tsv").open("a", encoding="utf-8") as handle:
        handle.write("extra line\tinspect pump\n")
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--check"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "dev.tsv" in result.stderr and result.stderr.count("\n") == 1


def test_generation_is_deterministic_and_seeded():
    script = load_script("make_corpus")
    assert script.build(7) == script.build(7)
    assert script.build(7) != script.build(8)


def test_corpus_has_at_least_3000_pairs(corpus):
    assert sum(len(pairs) for pairs in corpus.values()) >= 3000


def test_splits_are_disjoint_by_normalised_source(corpus):
    seen = [{normalise(source) for source, _ in corpus[name]} for name in SPLITS]
    assert sum(len(sources) for sources in seen) == sum(len(corpus[name]) for name in SPLITS)
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])


def test_fields_are_non_empty_single_lines_of_sensible_length(corpus):
    for source, target in itertools.chain(*corpus.values()):
        assert source.strip() == source and target.strip() == target
        assert 2 <= len(source.split()) <= 10 and 4 <= len(target.split()) <= 16
        assert target == target.lower() and "\t" not in source + target and "\r" not in source + target


def test_every_target_is_a_catalog_recommendation_for_a_component_the_source_names(corpus):
    names = names_by_recommendation()
    for source, target in itertools.chain(*corpus.values()):
        assert target in names, target
        assert any(mentions(source, name) for name in names[target]), (source, target)


def test_sensor_and_plant_alerts_both_appear_in_every_split(corpus):
    sensor_targets = {catalog.sensor_recommendation(s.index, d, k) for s, d, k in sensor_meanings()}
    for pairs in corpus.values():
        sensor_pairs = sum(target in sensor_targets for _, target in pairs)
        assert 0 < sensor_pairs < len(pairs)

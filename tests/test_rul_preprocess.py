"""RUL targets, health states, fitted sensor scaling, windows and the window sets built from engines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seq2seq.config import RulConfig
from seq2seq.errors import CheckpointError, DataError
from seq2seq.rul.cmapss import Engine, read_cmapss
from seq2seq.rul.preprocess import Preprocessor
from seq2seq.rul.synthetic import synthetic_engines
from seq2seq.rul.windows import (
    CRITICAL,
    DEGRADING,
    HEALTH_STATES,
    HEALTHY,
    health_state,
    health_states,
    last_windows,
    rul_targets,
    time_warp,
    training_set,
    truncated_windows,
    windows,
)

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FD001 = SHARED / "data" / "cmapss" / "train_FD001.txt"
CONFIG = RulConfig(window=10)


@pytest.fixture(scope="module")
def engines() -> list[Engine]:
    return synthetic_engines(6, seed=3, min_life=8, max_life=40)


@pytest.fixture(scope="module")
def preprocessor(engines) -> Preprocessor:
    return Preprocessor.fit(engines, CONFIG)


def test_health_states_are_named_in_class_id_order():
    assert [HEALTH_STATES[i] for i in (HEALTHY, DEGRADING, CRITICAL)] == ["healthy", "degrading", "critical"]


@given(st.floats(0, 400, allow_nan=False))
def test_health_state_follows_the_thresholds(rul):
    config = RulConfig()
    expected = "critical" if rul <= 30 else "degrading" if rul <= 80 else "healthy"
    assert HEALTH_STATES[health_state(rul, config)] == expected
    assert health_states(np.array([rul]), config).tolist() == [health_state(rul, config)]


def test_health_state_boundaries_belong_to_the_worse_state():
    config = RulConfig()
    states = health_states(np.array([0, 30, 30.5, 80, 80.5, 500]), config)
    assert states.tolist() == [CRITICAL, CRITICAL, DEGRADING, DEGRADING, HEALTHY, HEALTHY]


@given(length=st.integers(1, 400), cap=st.integers(1, 200), final=st.integers(0, 300))
def test_rul_targets_count_down_to_the_final_rul_capped(length, cap, final):
    targets = rul_targets(length, cap, final_rul=final)
    assert targets.shape == (length,)
    assert targets[-1] == min(final, cap) and targets.max() <= cap
    steps = np.diff(targets)
    assert np.all((steps == -1) | ((steps == 0) & (targets[1:] == cap)))
    assert np.array_equal(targets, np.minimum(np.arange(length)[::-1] + final, cap))


def test_rul_targets_reject_a_negative_final_rul():
    with pytest.raises(ValueError, match="final_rul"):
        rul_targets(10, 125, final_rul=-1)


@settings(max_examples=50)
@given(length=st.integers(1, 50), window=st.integers(1, 40), features=st.integers(1, 3), data=st.data())
def test_windows_end_at_each_index_and_mask_the_left_padding(length, window, features, data):
    values = np.arange(1, length * features + 1, dtype=np.float32).reshape(length, features)  # no zero values
    ends = np.array(data.draw(st.lists(st.integers(0, length - 1), min_size=1, max_size=5)))
    x, mask = windows(values, ends, window)
    assert x.shape == (len(ends), window, features) and x.dtype == np.float32
    assert mask.shape == (len(ends), window) and mask.dtype == bool
    for i, end in enumerate(ends):
        real = min(end + 1, window)
        assert mask[i].sum() == real and mask[i, window - real :].all()  # padding only on the left
        assert np.array_equal(x[i, -1], values[end])
        assert np.array_equal(x[i, mask[i]], values[end + 1 - real : end + 1])
        assert np.all(x[i, ~mask[i]] == 0)


@settings(max_examples=50)
@given(length=st.integers(1, 40), window=st.integers(2, 30), factor=st.floats(0.5, 1.5))
def test_a_time_warp_reads_a_ramp_at_factor_times_its_pace_from_the_last_cycle_back(length, window, factor):
    ramp = np.arange(1, length + 1, dtype=np.float32)[:, None] * np.array([[1.0, -2.0]], dtype=np.float32)  # (L, 2)
    x, mask = (torch.from_numpy(a) for a in windows(ramp, np.array([length - 1]), window))
    warped, real = time_warp(x, mask, torch.tensor([factor]))
    assert warped.shape == x.shape and real.shape == mask.shape
    assert torch.equal(warped[0, -1], x[0, -1]) and real[0, -1]  # the newest cycle, unchanged
    steps = int(real[0].sum())
    assert real[0, window - steps:].all() and not real[0, : window - steps].any()  # still padded on the left only
    assert torch.all(warped[0, ~real[0]] == 0)
    offsets = torch.arange(steps - 1, -1, -1, dtype=torch.float32) * factor  # cycles back from the newest
    expected = (length - offsets).unsqueeze(1) * torch.tensor([1.0, -2.0])
    torch.testing.assert_close(warped[0, real[0]], expected, atol=1e-4, rtol=1e-5)
    assert steps == min(window, math.floor((min(length, window) - 1) / factor + 1e-4) + 1)


def test_a_time_warp_of_one_is_no_warp():
    x, mask = (torch.from_numpy(a) for a in windows(np.random.default_rng(0).normal(size=(12, 3)),
                                                     np.array([3, 8, 11]), 6))
    warped, real = time_warp(x, mask, torch.ones(3))
    assert torch.equal(real, mask)
    torch.testing.assert_close(warped, x)


def test_windows_reject_ends_outside_the_history():
    with pytest.raises(ValueError, match="cycle indices"):
        windows(np.zeros((5, 2)), np.array([5]), 3)


def test_fit_drops_sensors_that_vary_below_their_resolution():
    rng = np.random.default_rng(0)
    sensors = np.round(rng.normal(100, 1.0, size=(200, 21)), 2)
    sensors[:, 0] = 518.67  # constant
    sensors[:, 5] = 21.61
    sensors[::50, 5] = 21.60  # rare glitch of one step: rounding, not signal
    sensors[:, 16] = np.round(rng.normal(392, 0.9, size=200))  # whole numbers, spread about one step: kept
    engine = Engine(1, np.arange(1, 201), np.zeros((200, 3)), sensors)
    assert Preprocessor.fit([engine], CONFIG).kept_sensors == [k for k in range(1, 22) if k not in (1, 6)]


def test_fit_normalises_with_training_statistics_only(engines, preprocessor):
    train, other = engines[:4], engines[4:]
    fitted = Preprocessor.fit(train, CONFIG)
    before = fitted.state_dict()
    scaled = np.concatenate([fitted.transform(e) for e in train])  # (sum L, F)
    assert np.allclose(scaled.mean(axis=0), 0, atol=1e-4) and np.allclose(scaled.std(axis=0), 1, atol=1e-4)
    for engine in other:
        fitted.transform(engine)
    assert fitted.state_dict() == before
    assert Preprocessor.fit(engines, CONFIG).mean != fitted.mean
    assert fitted.window == CONFIG.window and fitted.n_features == len(fitted.kept_sensors)


def test_transform_gives_float32_kept_columns(engines, preprocessor):
    values = preprocessor.transform(engines[0])
    assert values.shape == (engines[0].length, preprocessor.n_features) and values.dtype == np.float32


def test_transform_rejects_nan_naming_unit_and_cycle(engines, preprocessor):
    sensors = engines[0].sensors.copy()
    sensors[2, 2] = np.nan
    broken = Engine(5, engines[0].cycles, engines[0].settings, sensors)
    with pytest.raises(DataError, match=r"^engine 5: cycle 3: sensor 3 \(T30\) is nan"):
        preprocessor.transform(broken)


def test_state_round_trips_through_plain_data(preprocessor, tmp_path):
    state = json.loads(json.dumps(preprocessor.state_dict()))
    assert Preprocessor.from_state_dict(state) == preprocessor
    torch.save({"preprocessor": preprocessor.state_dict()}, tmp_path / "p.pt")
    loaded = torch.load(tmp_path / "p.pt", weights_only=True)["preprocessor"]
    assert Preprocessor.from_state_dict(loaded) == preprocessor


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"extra": 1}, "expected keys"),
        ({"kept_sensors": [3, 2]}, "kept_sensors"),
        ({"kept_sensors": [0, 2]}, "kept_sensors"),
        ({"mean": [0.0]}, "mean must be 2 finite numbers"),
        ({"std": [1.0, float("nan")]}, "std must be 2 finite numbers"),
        ({"std": [1.0, 0.0]}, "std must be positive"),
        ({"window": 0}, "window"),
        ({"window": True}, "window"),
        ({"smoothing": 1.0}, "smoothing"),
        ({"smoothing": "0.5"}, "smoothing"),
    ],
)
def test_malformed_state_is_a_checkpoint_error(change, expected):
    state = {"kept_sensors": [2, 3], "mean": [0.0, 1.0], "std": [1.0, 2.0], "window": 30, **change}
    with pytest.raises(CheckpointError, match=expected):
        Preprocessor.from_state_dict(state)


def test_a_state_without_smoothing_loads_as_none_and_transforms_as_before(engines, preprocessor):
    old = {k: v for k, v in preprocessor.state_dict().items() if k != "smoothing"}  # written before smoothing
    loaded = Preprocessor.from_state_dict(old)
    assert loaded.smoothing == 0.0 and np.array_equal(loaded.transform(engines[0]), preprocessor.transform(engines[0]))


@settings(max_examples=30, deadline=None)
@given(a=st.floats(0.0, 0.95), cut=st.integers(1, 40))
def test_smoothing_follows_its_recurrence_and_sees_no_later_cycle(engines, a, cut):
    smoothed = Preprocessor.fit(engines, RulConfig(window=10, smoothing=a))
    plain = Preprocessor.fit(engines, RulConfig(window=10))
    engine = engines[0]
    x, s = plain.transform(engine), smoothed.transform(engine)  # (L, F) each
    assert np.allclose(s[0], x[0]) and np.allclose(s[1:], a * s[:-1] + (1 - a) * x[1:], atol=1e-5)
    prefix = Engine(engine.unit, engine.cycles[:cut], engine.settings[:cut], engine.sensors[:cut])
    assert np.array_equal(smoothed.transform(prefix), s[:cut])  # a truncated engine reads as its full history did
    assert Preprocessor.from_state_dict(json.loads(json.dumps(smoothed.state_dict()))) == smoothed


def test_training_set_has_a_window_per_cycle_with_capped_rul(engines, preprocessor):
    config = RulConfig(window=10, rul_cap=20, critical_below=5, degrading_below=15)
    data = training_set(engines, preprocessor, config)
    N = sum(e.length for e in engines)
    assert len(data) == N and data.x.shape == (N, 10, preprocessor.n_features)
    assert data.mask.shape == (N, 10) and data.mask.dtype == torch.bool
    assert data.x.dtype == torch.float32 and data.rul.dtype == torch.float32
    assert data.health.dtype == data.unit.dtype == data.cycle.dtype == torch.long
    assert float(data.rul.max()) <= 20 and int((data.rul == 0).sum()) == len(engines)
    assert torch.equal(data.health, torch.from_numpy(health_states(data.rul.numpy(), config)))
    first = engines[0]
    assert data.cycle[: first.length].tolist() == first.cycles.tolist()
    assert data.mask[: first.length].sum(dim=1).tolist() == [min(i + 1, 10) for i in range(first.length)]


def test_health_comes_from_the_uncapped_remaining_life(engines, preprocessor):
    config = RulConfig(window=10, rul_cap=3, critical_below=2, degrading_below=5)
    data = training_set(engines[:1], preprocessor, config)
    assert data.health[0] == HEALTHY and data.rul[0] == 3


def test_windows_sets_index_like_a_tensor_dataset(engines, preprocessor):
    data = training_set(engines, preprocessor, CONFIG)
    part = data.subset([5, 0, 2])
    assert len(part) == 3 and torch.equal(part.x[1], data.x[0])
    assert part.cycle.tolist() == data.cycle[[5, 0, 2]].tolist()
    batch = next(iter(torch.utils.data.DataLoader(data, batch_size=4)))
    assert [t.shape[0] for t in batch] == [4] * 6 and torch.equal(batch[0], data.x[:4])


def test_last_windows_end_at_each_engines_last_cycle(engines, preprocessor):
    final = np.array([0, 3, 30, 90, 200, 7])
    data = last_windows(engines, preprocessor, RulConfig(window=10), final_rul=final)
    assert data.unit.tolist() == [e.unit for e in engines]
    assert data.cycle.tolist() == [int(e.cycles[-1]) for e in engines]
    assert data.rul.tolist() == np.minimum(final, 125).tolist()
    assert data.health.tolist() == health_states(final, RulConfig()).tolist()
    assert last_windows(engines, preprocessor, CONFIG).rul.tolist() == [0.0] * len(engines)


def test_truncated_windows_end_at_fractions_of_each_life(engines, preprocessor):
    data = truncated_windows(engines, preprocessor, CONFIG, fractions=(0.5, 1.0))
    for engine in engines:
        rows = data.unit == engine.unit
        ends = sorted({math.ceil(0.5 * engine.length) - 1, engine.length - 1})
        assert data.cycle[rows].tolist() == [int(engine.cycles[e]) for e in ends]
        assert data.rul[rows].tolist() == [min(engine.length - 1 - e, 125) for e in ends]


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared is absent (a clone without the shared data)")
def test_fd001_reads_completely_and_keeps_the_standard_14_sensors():
    engines = read_cmapss(FD001)
    assert len(engines) == 100 and sum(e.length for e in engines) == 20631
    assert Preprocessor.fit(engines, RulConfig()).kept_sensors == [2, 3, 4, 7, 8, 9, 11, 12, 13, 14, 15, 17, 20, 21]

"""Change points of a metric's series (analyses/trend.py) and the selector syntax."""

from __future__ import annotations

import random

import pytest

from clusterbench.analyses.trend import (
    Selector,
    change_points,
    parse_selector,
    select,
    trends,
)
from clusterbench.history_db import MetricPoint
from clusterbench.thresholds import Thresholds

LIMITS = {"rel_floor": 0.05, "abs_floor": 0.0, "sigmas": 3.0}


def noisy(rng: random.Random, level: float, rel_sd: float, n: int) -> list[float]:
    return [level * (1 + rng.gauss(0, rel_sd)) for _ in range(n)]


@pytest.mark.parametrize("seed", range(50))
def test_a_planted_step_is_found_where_it_is(seed: int) -> None:
    rng = random.Random(seed)
    values = noisy(rng, 100, 0.01, 10) + noisy(rng, 80, 0.01, 10)
    (change,) = change_points(values, **LIMITS)
    assert change.index == 10
    assert change.before == pytest.approx(100, rel=0.02)
    assert change.after == pytest.approx(80, rel=0.02)
    assert change.rel_change == pytest.approx(-0.2, abs=0.03)


def test_a_flat_noisy_series_has_no_change_point() -> None:
    # GPU-like noise (1% per run, a fifth of the 5% practical limit): never a change point
    for seed in range(300):
        for n in (5, 10, 20, 60):
            values = noisy(random.Random(seed), 100, 0.01, n)
            assert change_points(values, **LIMITS) == [], (seed, n)
    # 2% noise: a 3-sigma rule on a handful of runs calls a very rare flat series changed
    # (3, 0, 1 and 1 of 2000 series of 5, 10, 20 and 60 runs, when measured)
    false_alarms = sum(
        bool(change_points(noisy(random.Random(seed), 100, 0.02, n), **LIMITS))
        for seed in range(300)
        for n in (5, 10, 20, 60)
    )
    assert false_alarms <= 6


def test_noise_above_the_practical_limit_is_judged_by_the_noise() -> None:
    # CPU-like noise (10% per run, twice the 5% limit): a move must also beat 3 x the noise.
    # A 3-sigma rule calls a rare flat series changed; in 300 series of 20 runs, at most 2%.
    false_alarms = sum(
        bool(change_points(noisy(random.Random(seed), 100, 0.10, 20), **LIMITS))
        for seed in range(300)
    )
    assert false_alarms <= 6
    # and a real step of 50% under that noise is still found
    found = [
        [
            c.index
            for c in change_points(noisy(rng, 100, 0.1, 10) + noisy(rng, 50, 0.1, 10), **LIMITS)
        ]
        for rng in (random.Random(seed) for seed in range(100))
    ]
    assert sum(f == [10] for f in found) >= 95


def test_two_steps_and_the_levels_between_them() -> None:
    rng = random.Random(7)
    values = noisy(rng, 100, 0.01, 8) + noisy(rng, 70, 0.01, 8) + noisy(rng, 100, 0.01, 8)
    changes = change_points(values, **LIMITS)
    assert [c.index for c in changes] == [8, 16]
    assert changes[0].after == pytest.approx(70, rel=0.03)
    assert changes[1].before == pytest.approx(70, rel=0.03)
    assert changes[1].after == pytest.approx(100, rel=0.03)


def test_runs_needed_before_and_after() -> None:
    assert change_points([100, 100, 100, 100, 100, 50], **LIMITS) == []  # one new run alone
    assert [c.index for c in change_points([100, 100, 100, 100, 50, 50], **LIMITS)] == [4]
    # two runs are no level: the change is not moved to run 3 to make room, it is not called
    assert change_points([100, 100, 50, 50, 50, 50], **LIMITS) == []
    assert [c.index for c in change_points([100, 100, 100, 50, 50, 50], **LIMITS)] == [3]
    # ...and the runs set aside do not hide a later change
    values = [50, 50, 100, 100, 100, 100, 100, 60, 60, 60]
    assert [c.index for c in change_points(values, **LIMITS)] == [7]
    assert change_points([100, 100, 50, 50], **LIMITS) == []


def test_a_latency_must_also_move_by_the_absolute_floor() -> None:
    # 2 us -> 3 us is +50%, but within the 5 us floor of small-message latencies
    values = [2.0, 2.01, 1.99, 2.0, 2.02, 3.0, 3.01, 2.99, 3.0]
    assert change_points(values, rel_floor=0.05, abs_floor=5.0, sigmas=3.0) == []
    assert change_points([v * 10 for v in values], rel_floor=0.05, abs_floor=5.0, sigmas=3.0)


def test_a_move_inside_the_practical_limit_is_no_change_even_without_noise() -> None:
    assert change_points([100.0] * 6 + [97.0] * 6, **LIMITS) == []
    assert [c.index for c in change_points([100.0] * 6 + [90.0] * 6, **LIMITS)] == [6]


# ----------------------------------------------------------------------------- selector


def test_parse_selector() -> None:
    assert parse_selector("gemm.tflops") == Selector(benchmark="gemm", metric="tflops")
    assert parse_selector("gemm.tflops[dtype=bf16, m=8192]@node7/cuda:3") == Selector(
        benchmark="gemm", metric="tflops", params={"dtype": "bf16", "m": "8192"},
        host="node7", device="cuda:3",
    )  # fmt: skip
    assert parse_selector("memory.bandwidth@node*").host == "node*"
    for bad in ("gemm", "gemm.", "gemm.tflops[dtype]", "gemm.tflops[dtype=bf16", "a.b@", ""):
        with pytest.raises(ValueError, match="bad selector") as info:
            parse_selector(bad)
        assert "\n" not in str(info.value)


def _point(run: int, value: float, **fields: object) -> MetricPoint:
    base: dict[str, object] = {
        "run_id": f"r{run}", "started": f"2026-12-{run + 1:02d}T00:00:00+00:00",
        "benchmark": "gemm", "metric": "tflops", "params": {"dtype": "bf16", "m": 8192},
        "host": "a", "device": "cuda:0", "rank": 0, "value": value, "unit": "TFLOP/s",
        "cv": 0.01, "samples": 20,
    }  # fmt: skip
    base.update(fields)
    return MetricPoint(**base)  # type: ignore[arg-type]


def test_select_filters_and_names_what_there_is() -> None:
    points = [
        _point(0, 1.0),
        _point(0, 2.0, params={"dtype": "fp32", "m": 8192}),
        _point(0, 3.0, host="b"),
        _point(0, 4.0, host="node10", device="cuda:1"),
    ]
    assert [p.value for p in select(points, parse_selector("gemm.tflops[m=8192]"))] == [1, 2, 3, 4]
    assert [p.value for p in select(points, parse_selector("gemm.tflops[dtype=fp32]"))] == [2]
    assert [p.value for p in select(points, parse_selector("gemm.tflops@node*"))] == [4]
    assert [p.value for p in select(points, parse_selector("gemm.tflops@*/cuda:1"))] == [4]
    for text, message in [
        ("gemm.tflops[dtyp=bf16]", "gemm.tflops has no param 'dtyp' (it has: dtype, m)"),
        ("gemm.tflops[dtype=fp8]", "no gemm.tflops with dtype=fp8 (dtype is one of: bf16, fp32)"),
        ("gemm.tflops@c", "no gemm.tflops on host 'c' (hosts: a, b, node10)"),
        ("gemm.tflops@a/cuda:9", "no gemm.tflops on device 'cuda:9' (devices: cuda:0)"),
    ]:
        with pytest.raises(ValueError) as info:
            select(points, parse_selector(text))
        assert str(info.value) == message


def test_trends_one_series_per_params_host_and_device() -> None:
    points = [_point(run, 100.0 if run < 5 else 80.0) for run in range(10)]
    points += [_point(run, 50.0, device="cuda:1") for run in range(10)]
    found = trends(points, thresholds=Thresholds())
    assert [(t.host, t.device, len(t.points)) for t in found] == [
        ("a", "cuda:0", 10),
        ("a", "cuda:1", 10),
    ]
    assert [c.index for c in found[0].change_points] == [5] and found[1].change_points == []
    assert [p.run_id for p in found[0].points] == [f"r{i}" for i in range(10)]  # oldest first
    last = trends(points, thresholds=Thresholds(), last=4)
    assert [p.run_id for p in last[0].points] == ["r6", "r7", "r8", "r9"]
    assert last[0].change_points == []


def test_cpu_workers_get_the_larger_cpu_limit() -> None:
    # a 20% step: beyond the 5% limit of a GPU, inside the 30% of CPU workers (whose honest
    # reruns on a shared 2-core machine differ by up to 30%)
    values = [100.0, 100.5, 99.5, 100.2, 99.8, 80.0, 80.4, 79.6]
    points = [_point(run, v, device=d) for d in ("cpu:0", "cuda:0") for run, v in enumerate(values)]
    cpu, gpu = trends(points, thresholds=Thresholds())
    assert (cpu.device, cpu.change_points, cpu.rel_floor) == ("cpu:0", [], 0.3)
    assert (gpu.device, [c.index for c in gpu.change_points], gpu.rel_floor) == (
        "cuda:0",
        [5],
        0.05,
    )

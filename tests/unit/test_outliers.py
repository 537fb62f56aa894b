"""Peer outliers: the slow device among identical peers, and no alarm on jitter."""

from __future__ import annotations

import importlib
import math

import pytest

from clusterbench import registry
from clusterbench.analyses.outliers.findings import (
    log_spread,
    noise_limit,
    peer_outliers,
    pooled_cv,
    repeat_cv,
    robust_zscores,
)
from clusterbench.analyses.run import analyze
from clusterbench.metrics import better_direction, declared_sets
from clusterbench.schema import (
    Finding,
    Measurement,
    ParamValue,
    Reference,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
)
from clusterbench.thresholds import Thresholds

MADS, MIN_REL = 3.0, 0.05


def meas(
    value: float,
    *,
    device: str,
    host: str = "h1",
    benchmark: str = "gemm",
    metric: str = "tflops_best",
    unit: str = "TFLOP/s",
    params: dict[str, ParamValue] | None = None,
    spec: float | None = None,
) -> Measurement:
    return Measurement(
        benchmark=benchmark,
        metric=metric,
        value=value,
        unit=unit,
        params={"dtype": "bf16"} if params is None else params,
        rank=0,
        host=host,
        device=device,
        reference=Reference(value=spec, kind="spec_peak", source="t") if spec else None,
    )


def gpus(values: list[float], **kw: object) -> list[Measurement]:
    return [meas(v, device=f"cuda:{i}", **kw) for i, v in enumerate(values)]  # type: ignore[arg-type]


def outliers(ms: list[Measurement]) -> list[Finding]:
    return peer_outliers(ms, mads=MADS, min_rel=MIN_REL)


# 8 healthy values within +-0.5% of 800.
JITTER = [800 * (1 + 0.005 * x) for x in (-1, -0.5, 0, 0.5, 1, 0.3, -0.3, 0.8)]


def test_robust_zscores_known_values() -> None:
    # median 3, |deviations| 2 1 0 1 97 -> MAD 1, scale 1.4826
    z = robust_zscores([1, 2, 3, 4, 100])
    assert z == pytest.approx([-2 / 1.4826, -1 / 1.4826, 0, 1 / 1.4826, 97 / 1.4826])
    assert robust_zscores([]) == []
    assert robust_zscores([5, 5, 5]) == [0, 0, 0]
    zero_mad = robust_zscores([5, 5, 5, 4])
    assert zero_mad[:3] == [0, 0, 0] and zero_mad[3] == -math.inf


def test_direction_by_unit() -> None:
    assert better_direction("GB/s") == "higher"
    assert better_direction("TFLOP/s") == "higher"
    assert better_direction("img/s") == "higher"
    assert better_direction("us") == "lower"
    assert better_direction("s") == "lower"
    for unit in ("ratio", "gen", "lanes", "bytes"):
        assert better_direction(unit) is None


def test_one_gpu_20_percent_slow_is_named_exactly() -> None:
    values = list(JITTER)
    values[5] = 640.0
    findings = outliers(gpus(values))
    assert len(findings) == 1
    f = findings[0]
    assert (f.severity, f.scope, f.id) == ("fail", "host:h1/cuda:5", "outlier.gemm.tflops_best")
    assert "h1 cuda:5" in f.message and "20%" in f.message and "640" in f.message
    assert f.evidence["num_peers"] == 8 and f.evidence["median"] == pytest.approx(800, rel=0.01)
    assert "-i 5" in f.fix


def test_slow_gpu_found_across_hosts() -> None:
    ms = gpus(JITTER[:4], host="h1") + gpus(JITTER[4:], host="h2")
    ms[5] = meas(600.0, device="cuda:1", host="h2")
    assert [f.scope for f in outliers(ms)] == ["host:h2/cuda:1"]


def test_healthy_gpus_with_half_percent_jitter_give_nothing() -> None:
    assert outliers(gpus(JITTER)) == []


def test_tiny_gap_is_not_flagged_even_with_zero_mad() -> None:
    # 7 identical values: MAD 0, so 0.5% below is infinitely many MADs, yet under min_rel.
    assert outliers(gpus([800.0] * 7 + [796.0])) == []


def test_two_gpus_are_never_judged() -> None:
    # Even with a hair-trigger threshold: each of two values is 0.67 scaled MADs from the median.
    assert peer_outliers(gpus([800.0, 400.0]), mads=0.1, min_rel=0.01) == []
    assert len(peer_outliers(gpus([800.0, 800.0, 400.0]), mads=0.1, min_rel=0.01)) == 1


def test_latency_higher_is_worse() -> None:
    slow = [10.0, 10.1, 9.9, 10.0, 15.0, 10.05]
    fast = [10.0, 10.1, 9.9, 10.0, 5.0, 10.05]
    kw = {"benchmark": "collective", "metric": "latency", "unit": "us", "params": {}}
    assert [f.scope for f in outliers(gpus(slow, **kw))] == ["host:h1/cuda:4"]
    assert outliers(gpus(fast, **kw)) == []


def test_faster_device_is_not_an_outlier() -> None:
    values = list(JITTER)
    values[2] = 1000.0
    assert outliers(gpus(values)) == []


def test_ratio_gen_and_lanes_are_skipped() -> None:
    for unit in ("ratio", "gen", "lanes"):
        assert outliers(gpus([1.0, 1.0, 1.0, 1.0, 50.0, 0.01], unit=unit)) == []


def test_p2p_groups_across_pairs_and_names_the_pair() -> None:
    def pair(src: int, dst: int, value: float) -> Measurement:
        params: dict[str, ParamValue] = {
            "src": f"cuda:{src}",
            "dst": f"cuda:{dst}",
            "mode": "oneway",
            "p2p_access": True,
        }
        return meas(
            value,
            device="cuda:0",
            benchmark="transfer",
            metric="p2p_bandwidth",
            unit="GB/s",
            params=params,
        )

    ms = [pair(0, 1, 395.0), pair(1, 0, 394.0), pair(2, 3, 200.0), pair(3, 2, 396.0)]
    findings = outliers(ms)
    assert [f.scope for f in findings] == ["host:h1/cuda:2-cuda:3"]
    assert "4 pairs" in findings[0].message and "nvlink" in findings[0].fix


def test_one_finding_per_device_and_metric_over_many_shapes() -> None:
    ms = []
    for shape in (1024, 2048, 4096):
        values = list(JITTER)
        values[3] = 0.7 * values[3] if shape != 4096 else 0.6 * values[3]
        params: dict[str, ParamValue] = {"dtype": "bf16", "m": shape, "n": shape, "k": shape}
        ms += gpus(values, metric="tflops", params=params)
    findings = outliers(ms)
    assert len(findings) == 1
    assert findings[0].evidence["num_param_sets_flagged"] == 3
    assert findings[0].evidence["params"]["m"] == 4096  # the worst shape


def test_best_shape_does_not_split_peers() -> None:
    values = list(JITTER)
    values[7] = 500.0
    ms = [
        meas(v, device=f"cuda:{i}", params={"dtype": "bf16", "m": 4096 * (1 + i % 2), "n": 8192})
        for i, v in enumerate(values)
    ]
    assert [f.scope for f in outliers(ms)] == ["host:h1/cuda:7"]


def test_different_skus_are_not_peers() -> None:
    h200 = [meas(800.0 + i, device=f"cuda:{i}", host="a", spec=989.0) for i in range(4)]
    a100 = [meas(270.0 + i, device=f"cuda:{i}", host="b", spec=312.0) for i in range(4)]
    assert outliers(h200 + a100) == []


def test_selftest_sync_time_is_not_judged() -> None:
    kw = {"benchmark": "selftest", "metric": "sync_time", "unit": "s", "params": {}}
    assert outliers(gpus([0.01, 0.01, 0.01, 0.5], **kw)) == []


def test_gpus_on_different_numa_nodes_are_peers() -> None:
    values = [55.0, 55.2, 54.9, 40.0]  # two GPUs per NUMA node; cuda:3 slow
    ms = [
        meas(
            v,
            device=f"cuda:{i}",
            benchmark="transfer",
            metric="bandwidth",
            unit="GB/s",
            params={"direction": "h2d", "memory": "pinned", "numa": "local", "numa_node": i // 2},
        )
        for i, v in enumerate(values)
    ]
    assert [f.scope for f in outliers(ms)] == ["host:h1/cuda:3"]


def test_cpu_ranks_sharing_a_host_are_reported_not_judged() -> None:
    values = [0.11, 0.112, 0.111, 0.1115, 0.095, 0.1105]  # rank 4 is 14% below
    shared = outliers([meas(v, device=f"cpu:{i}") for i, v in enumerate(values)])
    assert [(f.scope, f.severity) for f in shared] == [("host:h1/cpu:4", "info")]
    assert "share its cores" in shared[0].message
    # one CPU rank per host: separate machines, so the slow one is judged
    apart = outliers([meas(v, device="cpu:0", host=f"n{i}") for i, v in enumerate(values)])
    assert [(f.scope, f.severity) for f in apart] == [("host:n4/cpu:0", "fail")]


# Every benchmark's measurement module (each declares its MetricSet there, or will once converted).
BENCHMARK_MODULES = [
    f"clusterbench.benchmarks.{name}"
    for name in (
        "doctor",
        "selftest",
        "gemm",
        "memory",
        "transfer",
        "network",
        "collectives",
        "dataloader",
        "checkpoint",
        "training.bench",
        "attribution",
    )
]


def test_declared_better_agrees_with_the_unit_rule() -> None:
    """The declarations drive the peer comparison (and the report) where the unit rule did: they
    must agree with it wherever it gives a direction, and say "none" where it gave none for the
    benchmarks that are peer-compared, or the peer comparison would change."""
    for module in BENCHMARK_MODULES:
        importlib.import_module(module)
    sets = declared_sets()
    assert {"doctor", "selftest", "gemm", "memory", "transfer"} <= set(sets)
    for benchmark, metrics in sets.items():
        for metric in metrics:
            rule = better_direction(metric.unit)
            if rule is not None:
                assert metric.better == rule, f"{metric} ({metric.unit}): {metric.better} != {rule}"
            elif _judged(benchmark):
                assert metric.better == "none", f"{metric} ({metric.unit}) is compared by no rule"


def _judged(benchmark: str) -> bool:
    """Whether the peer comparison judges the benchmark's figures (one no module registered,
    such as the metrics of a run part, by default)."""
    declared = registry.find(benchmark)
    return declared is None or declared.peers.judged


def test_undeclared_metric_falls_back_to_the_unit_rule() -> None:
    values = list(JITTER)
    values[2] = 600.0
    kw = {"benchmark": "custom", "metric": "img_per_s", "unit": "img/s", "params": {}}
    assert [f.scope for f in outliers(gpus(values, **kw))] == ["host:h1/cuda:2"]


# --- judged against the noise of the repeats ----------------------------------------------------


def with_cv(m: Measurement, cv: float, samples: int = 5) -> Measurement:
    v = m.value
    low, high = v * max(0.05, 1 - 2 * cv), v * (1 + 2 * cv)
    stats = Stats(samples=samples, median=v, min=low, max=high, mean=v, cv=cv)
    return m.model_copy(update={"stats": stats})


def test_log_spread_and_noise_limit_known_values() -> None:
    assert log_spread(0.0) == 0.0
    assert log_spread(0.3) == pytest.approx(math.sqrt(math.log(1.09)))
    assert log_spread(0.01) == pytest.approx(0.01, rel=1e-4)  # ~cv for small spreads
    # 3 x sqrt(2 x ln(1.09)): a member with the peers' 30% spread must be 3.47x worse
    assert math.exp(noise_limit(0.3, 0.3, sigmas=3.0)) == pytest.approx(3.47, abs=0.01)
    assert noise_limit(None, 0.3, sigmas=3.0) == noise_limit(0.3, 0.3, sigmas=3.0)
    assert noise_limit(0.3, None, sigmas=3.0) == 0.0  # no spread known: not applied
    assert noise_limit(0.1, 0.3, sigmas=3.0) == noise_limit(0.3, 0.3, sigmas=3.0)  # at least
    assert pooled_cv([None, 0.1, 0.4, 0.2]) == pytest.approx(math.sqrt(0.07))  # sqrt(mean cv^2)
    assert pooled_cv([None]) is None


def test_repeat_cv_needs_two_repeats() -> None:
    m = meas(800.0, device="cuda:0")
    assert repeat_cv(m) is None
    assert repeat_cv(with_cv(m, 0.02)) == 0.02
    assert repeat_cv(with_cv(m, 0.0, samples=1)) is None  # back-to-back: one timing


# Memory copy bandwidth of an unshaped 3-node run (one CPU rank per simulated node, all on one
# 2-core machine, tests/multinode): node0 was descheduled during its repeats.
NETNS_MEMORY = [("node0", 14.738, 0.194), ("node1", 24.972, 0.012), ("node2", 26.532, 0.033)]


def _netns_memory(*, stats: bool) -> list[Measurement]:
    out = []
    for host, value, cv in NETNS_MEMORY:
        m = meas(value, device="cpu:0", host=host, benchmark="memory", metric="bandwidth",
                 unit="GB/s", params={"op": "copy", "size_bytes": 2**27})  # fmt: skip
        out.append(with_cv(m, cv) if stats else m)
    return out


def test_a_gap_inside_the_repeats_noise_is_no_outlier() -> None:
    assert outliers(_netns_memory(stats=True)) == []
    # without the repeats' spread the same values fail: the spread is what clears them
    blind = outliers(_netns_memory(stats=False))
    assert [(f.id, f.severity, f.scope) for f in blind] == [
        ("outlier.memory.bandwidth", "fail", "host:node0/cpu:0")
    ]


def test_steady_repeats_keep_a_20_percent_slow_gpu_a_fail() -> None:
    values = list(JITTER)
    values[5] = 640.0
    ms = [with_cv(m, 0.005, samples=30) for m in gpus(values)]
    findings = outliers(ms)
    assert [(f.severity, f.scope) for f in findings] == [("fail", "host:h1/cuda:5")]
    assert "beyond the noise of the repeats (CV 0.5%, peers' pooled CV 0.5%)" in findings[0].message
    assert findings[0].evidence["repeat_cv"] == 0.005
    assert findings[0].evidence["noise_factor"] == pytest.approx(math.exp(3 * math.hypot(
        log_spread(0.005), log_spread(0.005))), rel=1e-3)  # fmt: skip


def test_erratic_repeats_do_not_hide_a_device_100_times_slower() -> None:
    ms = [with_cv(m, 0.3) for m in gpus([800.0, 790.0, 805.0, 8.0])]
    ms[3] = with_cv(ms[3], 0.9)
    assert [f.scope for f in outliers(ms)] == ["host:h1/cuda:3"]
    # ...but one 2x slower is inside 30% repeats of its peers and 90% of its own
    ms[3] = with_cv(meas(400.0, device="cuda:3"), 0.9)
    assert outliers(ms) == []


def test_noise_band_for_times_is_a_factor_above_the_median() -> None:
    kw = {"benchmark": "collective", "metric": "latency", "unit": "us", "params": {}}
    slow = [10.0, 10.1, 9.9, 10.0, 15.0, 10.05]
    noisy = [with_cv(m, 0.2) for m in gpus(slow, **kw)]  # 1.5x: inside 3 x 20% spreads
    assert outliers(noisy) == []
    steady = [with_cv(m, 0.02) for m in gpus(slow, **kw)]
    assert [f.scope for f in outliers(steady)] == ["host:h1/cuda:4"]


def test_spread_sigmas_is_the_threshold_applied() -> None:
    run = RunInfo(id="r", started="t", suite="quick", world_size=3, num_nodes=3, backend="gloo",
                  command="c")  # fmt: skip
    results = Results(tool=ToolInfo(version="0"), run=run, measurements=_netns_memory(stats=True))
    ids = [f.id for f in analyze(results, Thresholds())]
    assert "outlier.memory.bandwidth" not in ids
    tight = analyze(results, Thresholds(outlier_spread_sigmas=0.5))
    assert "outlier.memory.bandwidth" in [f.id for f in tight]

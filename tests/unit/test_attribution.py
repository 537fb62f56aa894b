"""Attribution of step time over hand-built Kineto events, and its verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from clusterbench.benchmarks.attribution import findings as attribution_analysis
from clusterbench.benchmarks.attribution import section as attribution_report
from clusterbench.benchmarks.attribution import stragglers as attribution_stragglers
from clusterbench.schema import Finding, Measurement, NcclRankInfo, Results, RunInfo, ToolInfo
from clusterbench.thresholds import Thresholds
from clusterbench.traces.ranks import collective_waits, start_lateness
from clusterbench.traces.trace import (
    Collective,
    Peaks,
    mean_percentages,
    op_flops_bytes,
    step_breakdowns,
)

MAIN, GLOO = 10, 11
H200 = Peaks(flops_per_s=989e12, bytes_per_s=4.8e12)  # ridge ~206 FLOP/byte


def ev(name: str, ts: float, dur: float, *, cat: str = "cpu_op", tid: int = MAIN,
       **args: Any) -> dict[str, Any]:  # fmt: skip
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return ev(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def cpu_trace() -> list[dict[str, Any]]:
    """0-30 mm, 30-50 add_, gloo all-reduce 40-80 on its thread, idle 80-100."""
    return [
        step(3, 0, 100),
        ev("DistributedDataParallel.forward", 0, 100, cat="user_annotation"),
        ev("autograd::engine::evaluate_function: MmBackward0", 0, 30),
        ev("aten::mm", 1, 29),
        ev("aten::add_", 30, 20),
        ev("gloo:all_reduce", 40, 40, cat="user_annotation", tid=GLOO),
    ]


def test_cpu_classes_overlap_and_exposed_sum_to_the_step() -> None:
    [s] = step_breakdowns(cpu_trace())
    assert s.step == 3 and s.step_ms == pytest.approx(0.1)
    pct = s.percentages()
    # the wrapper's 0-1 us counts as memory; the annotation spanning the step is not busy
    assert pct["compute"] == pytest.approx(29) and pct["memory"] == pytest.approx(21)
    assert pct["communication"] == pytest.approx(30)
    assert pct["communication_overlapped"] == pytest.approx(10)
    assert pct["coordination"] == pytest.approx(20)
    assert sum(pct[c] for c in ("compute", "memory", "communication", "coordination")) == 100
    assert s.collectives == (Collective("gloo:all_reduce", 0.04, 0.04, at_ms=0.04),)


def test_a_collective_waiting_for_peers_is_coordination() -> None:
    [s] = step_breakdowns(cpu_trace(), waits_ms={3: [0.015]})
    pct = s.percentages()
    assert pct["communication"] == pytest.approx(25)  # 55-80 us
    assert pct["coordination"] == pytest.approx(25)
    assert pct["communication_overlapped"] == 0


def gpu_trace(*, gemm_name: str, dims: list[list[int]]) -> list[dict[str, Any]]:
    return [
        step(1, 0, 100),
        ev(
            "aten::mm",
            0,
            5,
            **{"External id": 7, "Input Dims": dims, "Input type": ["float", "float"]},
        ),
        ev(gemm_name, 0, 40, cat="kernel", tid=7, **{"External id": 7}),
        ev("void at::native::vectorized_elementwise_kernel<4>", 40, 20, cat="kernel", tid=7),
        ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 30, 60, cat="kernel", tid=20),
    ]


def test_gpu_kernels_by_name() -> None:
    big = [[4096, 4096], [4096, 4096]]
    [s] = step_breakdowns(gpu_trace(gemm_name="sm90_xmma_gemm_f32f32", dims=big))
    pct = s.percentages()
    assert (pct["compute"], pct["memory"]) == (pytest.approx(40), pytest.approx(20))
    assert pct["communication_overlapped"] == pytest.approx(30)  # 30-60 under kernels
    assert pct["communication"] == pytest.approx(30) and pct["coordination"] == pytest.approx(10)


def test_roofline_overrides_the_name() -> None:
    # a gemm-named kernel of a matrix-vector product: 0.5 FLOP/byte, far below the ridge
    skinny = [[4096, 4096], [4096, 1]]
    [s] = step_breakdowns(gpu_trace(gemm_name="cutlass_gemm", dims=skinny), peaks=H200)
    assert s.percentages()["compute"] == 0 and s.percentages()["memory"] == pytest.approx(60)
    # an unnamed kernel of a large square matmul: 683 FLOP/byte, above the ridge
    big = [[4096, 4096], [4096, 4096]]
    [s] = step_breakdowns(gpu_trace(gemm_name="kernel_x", dims=big), peaks=H200)
    assert s.percentages()["compute"] == pytest.approx(40)
    [s] = step_breakdowns(gpu_trace(gemm_name="kernel_x", dims=big))  # no peaks: by name
    assert s.percentages()["compute"] == 0


def test_op_flops_bytes_from_shapes() -> None:
    mm = ev("aten::mm", 0, 1, **{"Input Dims": [[2, 3], [3, 5]], "Input type": ["float"] * 2})
    assert op_flops_bytes(mm) == (60.0, (6 + 15 + 10) * 4)
    addmm = ev("aten::addmm", 0, 1, **{"Input Dims": [[5], [2, 3], [3, 5]],
                                       "Input type": ["c10::BFloat16"] * 3})  # fmt: skip
    assert op_flops_bytes(addmm) == (60.0, (5 + 6 + 15 + 10) * 2)
    linear = ev("aten::linear", 0, 1, **{"Input Dims": [[4, 2, 3], [5, 3]],
                                         "Input type": ["float"] * 2})  # fmt: skip
    assert op_flops_bytes(linear) == (2.0 * 8 * 5 * 3, (24 + 15 + 40) * 4)
    assert op_flops_bytes(ev("aten::add_", 0, 1)) is None


def test_collective_waits_and_start_lateness() -> None:
    r0 = {1: [Collective("a", 1.0, 9.0), Collective("b", 12.0, 2.0)]}
    r1 = {1: [Collective("a", 8.0, 2.0), Collective("b", 12.5, 1.5)], 2: []}
    assert collective_waits([r0, r1]) == [{1: [7.0, 0.5]}, {1: [0.0, 0.0]}]
    spreads, late = start_lateness([r0, r1])
    assert spreads == [7.0, 0.5] and late == [[0.0, 0.0], [7.0, 0.5]]


def test_no_steps_is_an_error() -> None:
    assert step_breakdowns([ev("aten::mm", 0, 1)]) == []
    with pytest.raises(ValueError, match="no profiled steps"):
        mean_percentages([])


def m(metric: str, value: float, *, rank: int, unit: str = "%") -> Measurement:
    return Measurement(benchmark="attribution", metric=metric, value=value, unit=unit,
                       rank=rank, host="h", device=f"cuda:{rank}")  # fmt: skip


def results(per_rank: dict[int, dict[str, float]], *, backend: str = "nccl") -> Results:
    ms = [m(k, v, rank=r, unit="ms" if k.endswith("_ms") else "%")
          for r, metrics in per_rank.items() for k, v in metrics.items()]  # fmt: skip
    run = RunInfo(id="t", started="now", suite="standard", world_size=len(per_rank),
                  num_nodes=1, backend=backend, command="test")  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, measurements=ms)


def ranks(*classes: tuple[float, float, float, float], lateness: list[float]) -> dict:
    names = ("compute", "memory", "communication", "coordination")
    return {
        r: {**dict(zip(names, c, strict=True)), "communication_overlapped": 5.0,
            "step_time_ms": 100.0, "collective_start_lateness_ms": late}
        for r, (c, late) in enumerate(zip(classes, lateness, strict=True))
    }  # fmt: skip


def test_verdict_names_the_dominant_class_with_evidence_and_fix() -> None:
    res = results(ranks((20, 10, 41, 29), (20, 10, 41, 29), lateness=[0.1, 0.0]))
    res.nccl = [NcclRankInfo(rank=0, host="h", transports={"NET/Socket": 2}, log="nccl/0")]
    [verdict] = attribution_analysis.findings(res, thresholds=Thresholds())
    assert verdict.id == "attribution.verdict" and verdict.severity == "warn"
    assert verdict.message.startswith("This run is communication-bound: 41% exposed")
    assert "2 GPUs" in verdict.message and "NET/Socket" in verdict.message
    assert "bucket" in verdict.fix and "NCCL" in verdict.fix


def test_verdict_on_cpu_workers_is_stated_not_judged() -> None:
    res = results(ranks((20, 10, 41, 29), (20, 10, 41, 29), lateness=[0.1, 0.0]), backend="gloo")
    [verdict] = attribution_analysis.findings(res, thresholds=Thresholds())
    assert verdict.severity == "info" and verdict.evidence["bound"] == "communication"
    assert "2 CPU ranks" in verdict.message
    # a fix in CPU words: no NCCL transport or GPU to point at
    assert "gloo between CPU ranks" in verdict.fix and "NCCL_DEBUG" not in verdict.fix
    for bound in ((60, 10, 5, 25), (20, 10, 5, 65)):  # compute-, coordination-bound
        [v] = attribution_analysis.findings(
            results(ranks(bound, bound, lateness=[0.1, 0.0]), backend="gloo"), Thresholds()
        )
        assert "CUDA graphs" not in v.fix and "The GPUs" not in v.fix, v.fix


def test_compute_bound_is_info() -> None:
    [verdict] = attribution_analysis.findings(
        results(ranks((70, 10, 10, 10), lateness=[0.0])), Thresholds()
    )
    assert verdict.severity == "info" and verdict.evidence["bound"] == "compute"


def test_the_rank_everyone_waits_for_is_the_straggler() -> None:
    res = results(ranks((20, 10, 5, 65), (60, 10, 5, 25), (20, 10, 5, 65),
                        lateness=[0.0, 30.0, 0.2]))  # fmt: skip
    found = {f.id: f for f in attribution_analysis.findings(res, thresholds=Thresholds())}
    straggler = found["attribution.straggler"]
    assert straggler.severity == "fail" and straggler.scope == "host:h/cuda:1"
    assert straggler.evidence["rank"] == 1 and "Rank 1 (h cuda:1)" in straggler.message
    assert found["attribution.verdict"].evidence["bound"] == "coordination"
    assert "straggler" in found["attribution.verdict"].message


def test_no_straggler_when_starts_agree_or_the_late_rank_also_waits() -> None:
    def ids(res: Results) -> list[str]:
        return [f.id for f in attribution_analysis.findings(res, Thresholds())]

    close = results(ranks((20, 10, 5, 65), (60, 10, 5, 25), lateness=[0.0, 0.5]))
    assert "attribution.straggler" not in ids(close)
    waits = results(ranks((60, 10, 5, 25), (20, 10, 5, 65), lateness=[0.0, 30.0]))
    assert "attribution.straggler" not in ids(waits)


def test_report_section_has_a_row_per_rank() -> None:
    res = results(ranks((20, 10, 41, 29), (20, 10, 41, 29), lateness=[0.1, 0.0]))
    [grid] = attribution_report.section(res.measurements, multi_host=False).grids
    assert [row[0] for row in grid.rows] == ["0", "1"]
    assert grid.rows[0][3] == "20.0" and grid.rows[0][5] == "41.0"


def test_a_rank_busy_longer_than_its_peers_is_named() -> None:
    def ms(rank: int, coordination: float) -> list[Measurement]:
        base = {"rank": rank, "host": f"h{rank // 2}", "device": f"cuda:{rank % 2}",
                "benchmark": "attribution", "params": {"rank_step": "mean"}}  # fmt: skip
        return [
            Measurement(metric="step_time_ms", value=400.0, unit="ms", **base),  # type: ignore[arg-type]
            Measurement(metric="coordination", value=coordination, unit="%", **base),  # type: ignore[arg-type]
        ]

    run = RunInfo(id="r", started="t", suite="standard", world_size=4, num_nodes=2,
                  backend="nccl", command="c")  # fmt: skip
    # ranks 0, 1, 3 wait 30% of the step for rank 2, which is busy 99% of it
    slow_ranks = [*ms(0, 30.0), *ms(1, 31.0), *ms(2, 1.0), *ms(3, 29.5)]
    slow = Results(tool=ToolInfo(version="0"), run=run, measurements=slow_ranks)
    [finding] = attribution_stragglers.busy_time_outliers(slow, mads=3.0, min_rel=0.05)
    assert finding.evidence["rank"] == 2 and finding.scope == "host:h1/cuda:0"
    even = Results(tool=ToolInfo(version="0"), run=run,
                   measurements=[*ms(0, 3.0), *ms(1, 3.2), *ms(2, 2.9), *ms(3, 3.1)])  # fmt: skip
    assert attribution_stragglers.busy_time_outliers(even, mads=3.0, min_rel=0.05) == []


def test_a_rank_busy_a_fraction_of_a_millisecond_longer_is_no_finding() -> None:
    """Ranks busy 1.5 ms a step against the others' 1.3 ms, in a 16 ms step: beyond their MAD
    and 5% relative, yet 0.2 ms is under the floor (1 ms, 5% of the step); from traces, a rank
    busy longer is a finding only where the what-if says the others wait for it."""
    run = RunInfo(id="r", started="t", suite="analyze", world_size=8, num_nodes=1,
                  backend="nccl", command="c")  # fmt: skip

    def results_of(busy: list[float], savings: list[float] | None = None) -> Results:
        out = []
        for rank, busy_ms in enumerate(busy):
            base = {"rank": rank, "host": "h", "device": f"cuda:{rank}",
                    "benchmark": "attribution", "params": {"rank_step": "mean"}}  # fmt: skip
            rows = [("step_time_ms", 16.0, "ms"), ("coordination", 100 * (1 - busy_ms / 16), "%")]
            for name, value, unit in rows:
                out.append(Measurement.model_validate({**base, "metric": name, "value": value,
                                                       "unit": unit}))  # fmt: skip
            if savings is not None:
                params = {"rank_step": "mean", "whatif": "straggler"}
                out.append(Measurement.model_validate({**base, "params": params, "unit": "ms",
                                                       "metric": "whatif_saving_ms",
                                                       "value": savings[rank]}))  # fmt: skip
        return Results(tool=ToolInfo(version="0"), run=run, measurements=out)

    def slow(res: Results) -> list[Finding]:
        return attribution_stragglers.busy_time_outliers(res, mads=3.0, min_rel=0.05,
                                                         min_spread_pct=5.0)  # fmt: skip

    busy = [1.3, 1.5, 1.3, 1.5, 1.31, 1.29, 1.3, 1.3]
    assert slow(results_of(busy)) == []
    busy[1] = 5.3  # 4 ms longer: past the floor, and from traces it must cost the others too
    [finding] = slow(results_of(busy, [3.9 if r == 1 else 0.0 for r in range(8)]))
    assert finding.evidence["rank"] == 1 and "would save 3.9 ms per step" in finding.message
    assert slow(results_of(busy, [0.0] * 8)) == []


@pytest.mark.parametrize(("one_host", "severity"), [(True, "info"), (False, "fail")])
def test_straggler_among_cpu_ranks_of_one_host_is_not_judged(one_host: bool, severity: str) -> None:
    res = results(
        ranks((20, 10, 5, 65), (60, 10, 5, 25), (20, 10, 5, 65), (20, 10, 5, 65),
              lateness=[0.0, 30.0, 0.2, 0.1]),
        backend="gloo",
    )  # fmt: skip
    host = (lambda rank: "h") if one_host else (lambda rank: f"h{rank}")  # one rank per machine
    res.measurements = [
        x.model_copy(update={"host": host(x.rank), "device": f"cpu:{x.rank}"})
        for x in res.measurements
    ]
    found = {f.id: f for f in attribution_analysis.findings(res, thresholds=Thresholds())}
    straggler = found["attribution.straggler"]
    assert straggler.severity == severity and straggler.evidence["rank"] == 1
    assert ("4 CPU ranks share the cores of h" in straggler.message) == one_host
    assert straggler.fix.startswith("Look at that rank's cores") and "GPU" not in straggler.fix


def test_config_takes_the_check_workloads_and_refuses_unknown_models() -> None:
    from clusterbench.config import ConfigError, build_run_config

    cfg = build_run_config(
        device_type="cpu", suite="standard", sets=["attribution.model=comm_heavy"]
    )
    assert cfg.benchmarks["attribution"].model == "comm_heavy"
    with pytest.raises(
        ConfigError, match=r"input should be 'tiny', .* 'comm_heavy' or 'gemm_heavy'"
    ):
        build_run_config(device_type="cpu", suite="standard", sets=["attribution.model=nosuch"])
    with pytest.raises(ConfigError, match="active must be >= 1"):
        build_run_config(device_type="cpu", suite="standard", sets=["attribution.active=0"])

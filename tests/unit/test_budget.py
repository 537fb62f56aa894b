"""Time budgets, pure parts: the duration models scale with their settings, the fit cuts in the
declared order until the estimate fits (and reports only cuts that saved time), the plan
calibrates by a measured run and shares a budget, the deadlines of a run, the findings and
the printed plan."""

from __future__ import annotations

import dataclasses

import pytest

from clusterbench import catalog, registry
from clusterbench.analyses.budget import findings as budget_findings
from clusterbench.analyses.budget.plan import PlanInput, Reference, make_plan, reserve_s
from clusterbench.benchmarks.attribution import sweep_counts
from clusterbench.benchmarks.attribution.duration import estimate as attribution_estimate
from clusterbench.benchmarks.collectives.duration import estimate as collectives_estimate
from clusterbench.benchmarks.gemm import GemmConfig
from clusterbench.benchmarks.gemm.duration import MODEL as GEMM
from clusterbench.benchmarks.network.duration import estimate as network_estimate
from clusterbench.benchmarks.pair_plan import planned_rounds
from clusterbench.benchmarks.sdc.duration import DRAW_M_PER_S
from clusterbench.benchmarks.sdc.duration import estimate as sdc_estimate
from clusterbench.benchmarks.training.duration import MODEL as TRAINING
from clusterbench.benchmarks.training.settings import TrainingConfig
from clusterbench.config import ConfigError, build_run_config
from clusterbench.durations import NodeFacts, fit, smallest
from clusterbench.report.plan import plan_lines
from clusterbench.runtime.budget import MIN_SHARE, BudgetSchedule, TimeBudget
from clusterbench.schema import BenchmarkPlan, BudgetStop, PlanInfo, Results, RunInfo, ToolInfo
from clusterbench.thresholds import Thresholds

catalog.register_builtin()
CPU = NodeFacts(device_type="cpu", world_size=2, local_world_size=2)
GPU8 = NodeFacts(
    device_type="cuda",
    world_size=8,
    local_world_size=8,
    gpu="NVIDIA H200",
    spec_tflops={"bf16": 989.0, "fp32": 67.0},
    spec_memory_gbps=4800.0,
)


@pytest.mark.parametrize("facts", [CPU, GPU8], ids=["cpu", "8 gpus"])
@pytest.mark.parametrize("suite", ["quick", "standard", "full"])
def test_every_builtin_benchmark_has_a_positive_estimate(facts: NodeFacts, suite: str) -> None:
    for bench in registry.all_benchmarks():
        if bench.durations is None or not bench.supports(facts.device_type):
            continue
        cfg = bench.preset(suite=suite, device_type=facts.device_type)
        est = bench.durations.estimate(cfg, facts)
        assert est.seconds > 0 and est.points >= 1, bench.name
        assert all(t.seconds >= 0 and t.what for t in est.terms), bench.name


def test_gemm_estimate_scales_with_repeats_and_shapes() -> None:
    one = GemmConfig(dtypes=["fp32"], shapes=["512x512x512"], warmup=0, repeats=9)
    two = dataclasses.replace(one, shapes=["512x512x512", "512x512x512"])
    base, doubled = GEMM.estimate(one, CPU).seconds, GEMM.estimate(two, CPU).seconds
    assert doubled == pytest.approx(2 * base)
    longer = GEMM.estimate(dataclasses.replace(one, repeats=19), CPU).seconds
    assert base < longer < 2.1 * base  # 10 -> 20 products plus the fixed check and fill


def test_a_measured_rate_replaces_the_nominal_one() -> None:
    cfg = GemmConfig(dtypes=["fp32"], shapes=["1024x1024x1024"], warmup=0, repeats=20)
    measured = dataclasses.replace(CPU, measured={"gemm_tflops_fp32": 0.5})
    est = GEMM.estimate(cfg, measured)
    assert "(measured)" in est.terms[0].what
    assert est.seconds < GEMM.estimate(cfg, CPU).seconds  # 0.5 TFLOP/s beats the nominal 0.05


def test_network_rounds_follow_the_node_pair_plan() -> None:
    cfg = registry.get("network").preset(suite="standard", device_type="cuda")
    for nodes in (4, 8, 16, 64):
        facts = NodeFacts(
            device_type="cuda", world_size=8 * nodes, local_world_size=8, num_nodes=nodes
        )
        rounds = planned_rounds(nodes, strategy=cfg.node_pairs, partners=cfg.pair_partners)
        assert network_estimate(cfg, facts).points == 2 * rounds.total
    small = NodeFacts(device_type="cuda", world_size=128, local_world_size=8, num_nodes=16)
    big = dataclasses.replace(small, world_size=512, num_nodes=64)
    # the sparse plan above 8 nodes: as many rounds at 64 nodes as at 16
    assert network_estimate(cfg, big).seconds == pytest.approx(network_estimate(cfg, small).seconds)


def test_collectives_on_one_rank_cost_nothing_and_grow_with_nodes() -> None:
    cfg = registry.get("collectives").preset(suite="standard", device_type="cuda")
    alone = NodeFacts(device_type="cuda", world_size=1, local_world_size=1)
    assert collectives_estimate(cfg, alone).seconds == 0
    one_node = collectives_estimate(cfg, GPU8).seconds
    four = NodeFacts(device_type="cuda", world_size=32, local_world_size=8, num_nodes=4)
    assert collectives_estimate(cfg, four).seconds > 2 * one_node  # + per node, rail, pairs


def test_fit_cuts_repeats_first_then_sweep_points_and_fits() -> None:
    cfg = registry.get("gemm").preset(suite="standard", device_type="cuda")
    full = GEMM.estimate(cfg, GPU8).seconds
    assert fit(GEMM, cfg, GPU8, full / 3).cuts == ("repeats 30 -> 5", "warmup 10 -> 5")
    fitted = fit(GEMM, cfg, GPU8, full / 10)
    assert fitted.after.seconds <= full / 10 < fitted.before.seconds
    assert fitted.cuts[0] == "repeats 30 -> 5"  # 15, 8, then its floor: before any dtype
    assert fitted.settings.repeats == 5 and fitted.settings.dtypes != cfg.dtypes
    assert "bf16" in fitted.settings.dtypes  # the dtype training runs in is kept to the end
    assert fit(GEMM, cfg, GPU8, 2 * full).cuts == ()  # it fits: nothing cut


def test_fit_reports_only_cuts_that_save_time() -> None:
    cfg = TrainingConfig.preset(suite="quick", device_type="cpu")  # no sweep, no partition
    fitted = fit(TRAINING, cfg, CPU, 0.0)
    assert not any(c.startswith(("sweep_", "partition")) for c in fitted.cuts), fitted.cuts
    floor = smallest(TRAINING, cfg, CPU)
    assert floor.seconds == fitted.after.seconds <= TRAINING.estimate(cfg, CPU).seconds


def test_the_plan_is_the_measured_time_at_the_measured_settings() -> None:
    cfg = registry.get("gemm").preset(suite="standard", device_type="cpu")
    ref = Reference(seconds=4.0, settings=cfg, facts=CPU, source="table", label="table: x")
    same = make_plan([PlanInput(name="gemm", settings=cfg, model=GEMM, facts=CPU, reference=ref)])
    assert same.benchmarks[0].expected_s == pytest.approx(4.0) and not same.benchmarks[0].scaled
    double = dataclasses.replace(cfg, shapes=[*cfg.shapes, *cfg.shapes])
    item = PlanInput(name="gemm", settings=double, model=GEMM, facts=CPU, reference=ref)
    scaled = make_plan([item]).benchmarks[0]
    assert scaled.scaled and scaled.source == "table"
    ratio = GEMM.estimate(double, CPU).seconds / GEMM.estimate(cfg, CPU).seconds
    assert scaled.expected_s == pytest.approx(4.0 * ratio)


def _items() -> list[PlanInput]:
    out = []
    for name in ("gemm", "collectives", "training"):
        bench = registry.get(name)
        cfg = bench.preset(suite="standard", device_type="cpu")
        out.append(PlanInput(name=name, settings=cfg, model=bench.durations, facts=CPU))
    return out


def test_a_budget_is_shared_and_every_share_is_fitted() -> None:
    items = _items()
    free = make_plan(items)
    total = free.expected_s
    assert total is not None and all(b.budget_s is None and not b.cuts for b in free.benchmarks)
    plan = make_plan(items, budget_s=total / 2 + 10, reserve_s=10)
    shares = [b.budget_s or 0 for b in plan.benchmarks]
    assert sum(shares) == pytest.approx(total / 2) and plan.fits
    for b in plan.benchmarks:
        assert b.expected_s is not None and b.budget_s is not None
        assert b.expected_s <= b.budget_s * (1 + 1e-6), b
    assert any(b.cuts for b in plan.benchmarks)
    # a benchmark's own time_budget_s is taken as given, the others share the rest
    own = [dataclasses.replace(items[0], time_budget_s=3.0), *items[1:]]
    mixed = make_plan(own, budget_s=total / 2 + 10, reserve_s=10)
    assert mixed.benchmarks[0].budget_s == 3.0
    assert sum(b.budget_s or 0 for b in mixed.benchmarks[1:]) == pytest.approx(total / 2 - 3)


def test_a_budget_below_the_smallest_forms_does_not_fit() -> None:
    plan = make_plan(_items(), budget_s=1.0, reserve_s=0.5)
    assert not plan.fits
    assert sum(b.budget_s or 0 for b in plan.benchmarks) == pytest.approx(0.5)


def test_reserve_never_takes_most_of_a_short_budget() -> None:
    assert reserve_s("cpu", 20.0) == pytest.approx(12.0)
    assert reserve_s("cpu", 600.0) == pytest.approx(30.0)


def test_budget_settings_parse_and_bad_ones_are_one_line() -> None:
    cfg = build_run_config(
        suite="standard",
        device_type="cpu",
        budget="1m30s",
        sets=["gemm.time_budget_s=20", "checkpoint.time_budget_s=2m"],
    )
    assert cfg.budget_s == 90.0 and cfg.time_budgets == {"gemm": 20.0, "checkpoint": 120.0}
    assert cfg.to_dict()["budget"] == {"total_s": 90.0, "benchmarks": cfg.time_budgets}
    assert "budget" not in build_run_config(suite="quick", device_type="cpu").to_dict()
    for kwargs, text in (
        ({"budget": "ten minutes"}, "--budget: 'ten minutes' is not a duration"),
        ({"sets": ["gemm.time_budget_s=0"]}, "gemm.time_budget_s: '0': a duration must be"),
        ({"budget": "10m", "repeat": 2}, "--budget with a soak"),
    ):
        with pytest.raises(ConfigError, match=text):
            build_run_config(suite="quick", device_type="cpu", **kwargs)  # type: ignore[arg-type]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_time_budget_expires_on_its_clock() -> None:
    clock = _Clock()
    budget = TimeBudget(seconds=2.0, clock=clock)
    assert not budget.expired() and budget.left_s() == 2.0
    clock.now += 2.5
    assert budget.expired() and budget.left_s() == pytest.approx(-0.5)
    budget.stopped(done=3, total=7, unit="shapes")
    assert budget.stop == BudgetStop(after_s=2.5, done=3, total=7, unit="shapes")
    assert not TimeBudget().expired() and TimeBudget().agree_expired(None) is False  # type: ignore[arg-type]


def test_the_schedule_shares_what_is_left_of_the_run() -> None:
    clock = _Clock()
    plan = PlanInfo(
        budget_s=100.0,
        benchmarks=[
            BenchmarkPlan(benchmark=n, expected_s=1.0, source="model", budget_s=s)
            for n, s in (("a", 10.0), ("b", 30.0))
        ],
    )
    schedule = BudgetSchedule.from_plan(plan, ends_at=1040.0)
    schedule._clock = schedule._wall = clock  # type: ignore[method-assign]
    first = schedule.start("a")
    assert first.seconds == pytest.approx(10.0)  # 40 s left, a's share is 10 of 40
    clock.now += 20.0  # a overran its 10 s by 10 s: b has 20 s, not its 30
    schedule.finish("a", first)
    assert schedule.start("b").seconds == pytest.approx(20.0)
    clock.now += 30.0  # past the end: b would still get a quarter of its own
    assert schedule.start("b").seconds == pytest.approx(MIN_SHARE * 30.0)
    alone = BudgetSchedule.from_plan(plan.model_copy(update={"budget_s": None}), ends_at=0.0)
    assert alone.start("b").seconds == 30.0 and alone.start("x").seconds is None


def _results(plan: PlanInfo, seconds: dict[str, float]) -> Results:
    run = RunInfo(
        id="r",
        started="t",
        suite="standard",
        world_size=2,
        num_nodes=1,
        backend="gloo",
        command="c",
        benchmark_seconds=seconds,
        plan=plan,
    )
    return Results(tool=ToolInfo(version="1"), run=run)


def test_findings_say_what_was_cut_stopped_and_overran() -> None:
    stop = BudgetStop(after_s=5.1, done=4, total=9, unit="sizes")
    plan = PlanInfo(
        budget_s=60.0,
        reserve_s=20.0,
        fits=False,
        benchmarks=[
            BenchmarkPlan(
                benchmark="gemm",
                expected_s=4.0,
                source="table",
                budget_s=5.0,
                cuts=["repeats 30 -> 8"],
                expected_before_s=12.0,
                stopped=stop,
            ),
            BenchmarkPlan(benchmark="training", expected_s=4.0, source="model", budget_s=5.0),
            BenchmarkPlan(benchmark="memory", expected_s=1.0, source="model", budget_s=5.0),
        ],
    )
    got = budget_findings.findings(_results(plan, {"training": 20.0, "memory": 6.0}), Thresholds())
    by_id = {f.id: f for f in got}
    assert set(by_id) == {"budget.fitted", "budget.too_small", "budget.stopped", "budget.overrun"}
    assert "gemm: repeats 30 -> 8" in by_id["budget.fitted"].message
    assert by_id["budget.stopped"].message.startswith(
        "gemm stopped at its budget after 5.1 s: measured 4 of 9 sizes"
    )
    assert "gemm.time_budget_s=12" in by_id["budget.stopped"].fix  # 5.1 s x 9 / 4, rounded up
    assert "training took 20.0 s of a 5.0 s budget" in by_id["budget.overrun"].message
    assert by_id["budget.overrun"].severity == "warn"  # memory's 1 s over is within the grace
    assert budget_findings.findings(_results(PlanInfo(), {}), Thresholds()) == []


def test_the_printed_plan_names_sources_shares_and_cuts() -> None:
    bench = registry.get("gemm")
    cfg = bench.preset(suite="standard", device_type="cpu")
    ref = Reference(seconds=0.5, settings=cfg, facts=CPU, source="table", label="table: 2 CPU")
    items = [
        PlanInput(name="gemm", settings=cfg, model=bench.durations, facts=CPU, reference=ref),
        PlanInput(name="plugin", settings=None, model=None, facts=CPU),
    ]
    lines = plan_lines(make_plan(items))
    assert lines[0] == "plan: expected ~0.5 s for 1 of 2 benchmarks"
    assert lines[1].split() == ["gemm", "~0.5", "s", "table:", "2", "CPU"]
    assert lines[2].split()[:2] == ["plugin", "?"]
    cut = plan_lines(make_plan(items[:1], budget_s=10.2, reserve_s=10.0))
    assert "budget 10.2 s (10.0 s of it to start" in cut[0]
    assert "scaled to these settings; share 0.2 s; cut from ~0.5 s: " in cut[1]


def test_the_attribution_accumulation_sweep_costs_nothing_on_one_rank() -> None:
    cfg = registry.get("attribution").preset(suite="standard", device_type="cuda")
    assert cfg.accum_sweep == [1, 2, 4, 8]
    one = NodeFacts(device_type="cuda", world_size=1, local_world_size=1)
    alone, eight = attribution_estimate(cfg, one), attribution_estimate(cfg, GPU8)
    assert eight.points == 1 + 4 and alone.points == 1
    assert [t.what for t in eight.terms][1] == "accumulation sweep: k in [1, 2, 4, 8]"
    assert not any("accumulation" in t.what for t in alone.terms)
    assert sweep_counts(cfg, world_size=1) == [] and sweep_counts(cfg, world_size=2) == [1, 2, 4, 8]


def test_the_sdc_inputs_a_cpu_draws_do_not_shrink_with_repeats() -> None:
    """The standard preset's inputs are drawn once per case: fewer repeats cut the products and
    the hashes, not the draw; a GPU draws its own inputs, at no counted cost."""
    cfg = registry.get("sdc").preset(suite="standard", device_type="cuda")
    elements = sum(c.m * c.k + c.k * c.n + c.n * c.k for c in cfg.cases())
    on_cpu = sdc_estimate(cfg, CPU)
    draw = [t for t in on_cpu.terms if "input elements drawn" in t.what]
    assert len(draw) == 1 and draw[0].seconds == pytest.approx(elements / (DRAW_M_PER_S * 1e6))
    halved = sdc_estimate(dataclasses.replace(cfg, repeats=cfg.repeats // 2), CPU)
    rest = on_cpu.seconds - draw[0].seconds
    assert halved.seconds == pytest.approx(draw[0].seconds + rest / 2)
    assert not any("drawn" in t.what for t in sdc_estimate(cfg, GPU8).terms)

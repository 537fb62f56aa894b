"""The HTML report's figures of every benchmark, from a real CPU run and from synthetic
measurements of what CPU workers cannot measure (spec peaks, GPU pairs, several nodes): the
values drawn are the measurements' own, every value axis and hover carries its unit, the slow
node and the straggler that analysis names are the ones marked, a comparison's base run is
drawn only in a comparison, a 64-node run stays compact, and every figure is valid by plotly's
schema."""

from __future__ import annotations

import bisect
import itertools
import json
import math
from collections.abc import Iterator
from typing import Any, Literal

import plotly.graph_objects as go
import pytest

from clusterbench import catalog, registry
from clusterbench.analyses.run import report_plots
from clusterbench.benchmarks.attribution import AttributionMetrics as A
from clusterbench.benchmarks.attribution import figures as attribution_figures
from clusterbench.benchmarks.attribution import findings as attribution_analysis
from clusterbench.benchmarks.attribution import stragglers as attribution_stragglers
from clusterbench.benchmarks.attribution.thresholds import AttributionThresholds
from clusterbench.benchmarks.collectives import CollectivesMetrics as C
from clusterbench.benchmarks.collectives import figures as collectives_figures
from clusterbench.benchmarks.collectives import findings as collectives_analysis
from clusterbench.benchmarks.dataloader import DataloaderMetrics as D
from clusterbench.benchmarks.dataloader import figures as dataloader_figures
from clusterbench.benchmarks.gemm import GemmMetrics as G
from clusterbench.benchmarks.gemm import figures as gemm_figures
from clusterbench.benchmarks.memory import MemoryMetrics
from clusterbench.benchmarks.network import NetworkMetrics as N
from clusterbench.benchmarks.network import findings as network_analysis
from clusterbench.benchmarks.training import figures as training_figures
from clusterbench.benchmarks.training.settings import TrainingMetrics as T
from clusterbench.benchmarks.transfer import TransferMetrics as X
from clusterbench.benchmarks.transfer import figures as transfer_figures
from clusterbench.metrics import Metric
from clusterbench.schema import (
    Measurement,
    ParamValue,
    Reference,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
)
from clusterbench.thresholds import Thresholds, run_thresholds
from clusterbench.views.plots import Plot, PlotContext

MIB = 2**20
_CPU_BENCHMARKS = ("gemm", "memory", "collectives", "checkpoint", "attribution")
"""What two CPU workers measure in seconds (the loader sweep takes half a minute: synthetic)."""


def make(
    metric: Metric,
    value: float,
    *,
    rank: int = 0,
    host: str = "node0",
    device: str = "cuda:0",
    reference: Reference | None = None,
    cv: float | None = None,
    **params: ParamValue,
) -> Measurement:
    """A measurement of ``metric`` as its benchmark records it (name and unit declared once)."""
    stats = None
    if cv is not None:
        stats = Stats(samples=5, median=value, min=value, max=value, mean=value, cv=cv)
    return Measurement(
        benchmark=metric.benchmark,
        metric=metric.name,
        value=value,
        unit=metric.unit,
        params=params,
        rank=rank,
        host=host,
        device=device,
        stats=stats,
        reference=reference,
    )


def results_of(ms: list[Measurement], *, num_nodes: int, backend: str = "nccl") -> Results:
    run = RunInfo(
        id="r",
        started="2026-11-01T00:00:00Z",
        suite="standard",
        world_size=8 * num_nodes,
        num_nodes=num_nodes,
        backend=backend,
        command="clusterbench run",
    )
    return Results(tool=ToolInfo(version="0.1.0"), run=run, measurements=ms)


# --- what every figure must satisfy --------------------------------------------------------


def traces(plot: Plot, meta: str | None = None) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = plot.figure["data"]
    return [t for t in data if meta is None or t.get("meta") == meta]


def drawn(trace: dict[str, Any]) -> list[float]:
    """The numbers a trace draws: bar heights, curve points, heatmap cells."""
    if trace["type"] == "heatmap":
        return [v for row in trace["z"] for v in row if v is not None]
    return [v for v in trace["y"] if v is not None]


def check_figure(plot: Plot, ms: list[Measurement], base: list[Measurement] | None = None) -> None:
    """Valid by plotly's schema (it raises on a wrong property); JSON as it is; every value
    axis and colour bar names its unit and so does every hover; each trace's values are the
    measurements' own (``meta`` "measurement"; of an even count, the median: the mean of two
    of them), their references' or the base run's."""
    go.Figure(plot.figure)
    assert json.loads(json.dumps(plot.figure)) == plot.figure
    units = {m.unit for m in ms}
    layout = plot.figure["layout"]
    for key, ax in layout.items():
        if key.startswith(("xaxis", "yaxis")) and ax.get("visible", True):
            title = ax["title"]["text"]
            if ax.get("type") != "category":
                assert "(" in title and title.endswith(")"), f"{key} has no unit: {title!r}"
    values = {m.value for m in ms}
    references = {m.reference.value for m in ms if m.reference} | {100.0}
    for trace in traces(plot):
        meta = trace["meta"]
        pool = {
            "measurement": values,
            "reference": references,
            "base": {m.value for m in base or []},
        }[meta]
        odd = [v for v in drawn(trace) if v not in pool]
        if meta != "reference":  # an even count's median: the mean of two middle values
            odd = [v for v in odd if not _midpoint(v, sorted(pool))]
        assert not odd, (plot.title, trace.get("name"), odd[:5])
        assert any(f" {u}" in trace["hovertemplate"] for u in units | {"%"}), trace["name"]
        if trace["type"] == "heatmap" and "colorbar" in trace:
            assert trace["colorbar"]["title"]["text"].endswith(")")


def _midpoint(v: float, ordered: list[float]) -> bool:
    """``v`` is the mean of two of the values ``ordered`` (sorted)."""
    for a in ordered:
        b = 2 * v - a
        i = bisect.bisect_left(ordered, b - 1e-9 * abs(b))
        if i < len(ordered) and math.isclose(ordered[i], b, rel_tol=1e-9, abs_tol=1e-12):
            return True
    return False


def figures_of(name: str, ms: list[Measurement], ctx: PlotContext | None = None) -> list[Plot]:
    fn = registry.get(name).plots()
    assert fn is not None
    plots = fn(ms, ctx or PlotContext())
    for plot in plots:
        check_figure(plot, ms, (ctx.base or []) if ctx else [])
    return plots


@pytest.fixture(autouse=True, scope="module")
def _registered() -> None:
    catalog.register_builtin()


def test_every_benchmark_with_something_to_draw_names_its_figures() -> None:
    drawn_by = {b.name: b.plots() for b in catalog.BUILTIN}
    for name in ("doctor", "selftest", "sdc"):  # sdc: a table of hashes, nothing to draw
        assert drawn_by[name] is None
    assert drawn_by["collectives"] is collectives_figures.figures
    assert all(drawn_by[n] is not None for n in set(drawn_by) - {"doctor", "selftest", "sdc"})


# --- a real CPU run ---------------------------------------------------------------------------


# --- synthetic: GPUs ------------------------------------------------------------------------

H200 = "NVIDIA H200 datasheet"


def spec(value: float, kind: Literal["spec_peak", "link_rate"] = "spec_peak") -> Reference:
    return Reference(value=value, kind=kind, source=H200)


def test_gemm_against_the_spec_peak_with_each_dtypes_best_outlined() -> None:
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 16384)]
    tflops = {
        "bf16": [700.0, 690.0, 720.0],
        "fp16": [680.0, 650.0, 660.0],
        "fp8": [1390, 1470, 1550.0],
    }
    peak = {"bf16": 989.0, "fp16": 989.0, "fp8": 1979.0}
    ms = []
    for dtype, values in tflops.items():
        for (m, n, k), v in zip(shapes, values, strict=True):
            ms.append(make(G.tflops, v, reference=spec(peak[dtype]), dtype=dtype, m=m, n=n, k=k))
        best = max(zip(values, shapes, strict=True))
        m, n, k = best[1]
        ms.append(
            make(G.tflops_best, best[0], reference=spec(peak[dtype]), dtype=dtype, m=m, n=n, k=k)
        )
    (plot,) = gemm_figures.figures(ms, PlotContext())
    check_figure(plot, ms)
    bars = {t["name"]: t for t in traces(plot, "measurement")}
    assert {d: b["y"] for d, b in bars.items()} == tflops
    assert bars["bf16"]["x"] == ["4096³", "8192³", "4096×4096×16384"]
    assert bars["bf16"]["text"] == ["", "", "best"] and bars["fp16"]["text"] == ["best", "", ""]
    assert bars["fp8"]["marker"]["line"]["width"] == [0, 0, 2.5]
    assert "73% of the spec peak" in bars["bf16"]["customdata"][2][0]  # 720 / 989
    lines = {t["name"]: t["y"][0] for t in traces(plot, "reference")}
    assert lines == {
        "bf16, fp16 peak 989.0 TFLOP/s": 989.0,
        "fp8 peak 1,979 TFLOP/s": 1979.0,
    }


def test_transfer_bars_against_the_link_and_the_slowest_host_per_gpu_pair() -> None:
    link = spec(63.0, "link_rate")
    ms = [
        make(
            X.bandwidth,
            v,
            host=h,
            reference=link,
            direction=d,
            memory=mem,
            numa="local",
            numa_node=0,
            size_bytes=256 * MIB,
        )
        for h, base in (("node0", 55.0), ("node1", 54.0), ("node2", 20.0))
        for d, mem, v in (
            ("h2d", "pinned", base),
            ("d2h", "pinned", base + 1),
            ("h2d", "pageable", base / 5),
        )
    ]
    gpus = range(4)
    for h, i, j in itertools.product(("node0", "node1"), gpus, gpus):
        if i != j:
            slow = h == "node1" and (i, j) == (2, 3)
            for size, v in ((64 * MIB, 300.0), (1024 * MIB, 390.0 + i + j)):
                ms.append(
                    make(
                        X.p2p_bandwidth,
                        v / 30 if slow else v,  # through the host: 10-13 GB/s
                        host=h,
                        device=f"cuda:{i}",
                        reference=spec(450.0),
                        src=i,
                        dst=j,
                        mode="oneway",
                        p2p_access=not slow,
                        size_bytes=size,
                    )
                )
    plots = transfer_figures.figures(ms, PlotContext(multi_host=True))
    for plot in plots:
        check_figure(plot, ms)
    bars, heat = plots
    h2d = next(t for t in traces(bars, "measurement") if t["name"] == "h2d")
    assert h2d["x"] == ["pinned, NUMA local", "pageable, NUMA local"]
    assert h2d["y"] == [54.0, 54.0 / 5]  # node1 is the median of three hosts
    assert h2d["error_y"]["arrayminus"][0] == 34.0 and h2d["error_y"]["array"][0] == 1.0
    assert "node2/cuda:0" in h2d["customdata"][0]
    assert [t["y"][0] for t in traces(bars, "reference")] == [63.0]
    (z,) = traces(heat)
    labels = z["x"]
    assert labels == z["y"] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    slow = (390.0 + 2 + 3) / 30  # node1's best over sizes, below node0's
    assert z["z"][2][3] == slow and "node1; no peer access" in z["customdata"][2][3]
    assert z["z"][0][1] == 391.0 and z["z"][0][0] is None
    assert z["zmax"] == 450.0
    assert heat.table is not None and heat.table.cells[("cuda:2", "cuda:3")] == slow


# --- synthetic: several nodes -----------------------------------------------------------------


def pair_busbw(
    nodes: list[str], slow: str | None, *, ops: tuple[str, ...] = ("all_reduce",)
) -> list[Measurement]:
    """Back-to-back and blocking busbw of every node pair; pairs of ``slow`` at a tenth."""
    out = []
    for op, (i, (a, b)) in itertools.product(ops, enumerate(itertools.combinations(nodes, 2))):
        for size in (MIB, 64 * MIB):
            value = (4.0 if size == MIB else 40.0 + (i % 5) * 0.3) / (10 if slow in (a, b) else 1)
            for mode in ("back_to_back", "blocking"):
                out.append(
                    make(
                        C.busbw,
                        value,
                        host=a,
                        cv=0.02,
                        op=op,
                        size_bytes=size,
                        group=f"pair{i}",
                        group_kind="node_pairs",
                        group_size=16,
                        hosts=f"{a},{b}",
                        mode=mode,
                        dtype="bf16",
                    )
                )
    return out


def group_sweeps(kind: str, groups: list[str], *, ops: tuple[str, ...]) -> list[Measurement]:
    sizes = [2**e for e in range(3, 34, 2)]
    return [
        make(
            C.busbw,
            (1 + g) * size / 2**28,
            host=f"node{g}",
            op=op,
            size_bytes=size,
            group=group,
            group_kind=kind,
            group_size=8,
            mode="back_to_back",
            dtype="bf16",
            reference=spec(450.0) if kind == "intra_node" else None,
        )
        for op, (g, group), size in itertools.product(ops, enumerate(groups), sizes)
    ]


def test_the_node_pair_heatmap_marks_the_slow_node_analysis_names() -> None:
    nodes = [f"node{i}" for i in range(5)]
    ms = pair_busbw(nodes, "node3")
    (slow,) = collectives_analysis.findings(results_of(ms, num_nodes=5), Thresholds())
    assert slow.evidence["common_nodes"] == ["node3"]
    plots = figures_of("collectives", ms)
    heat = plots[-1]
    (z,) = traces(heat)
    assert z["x"] == z["y"] == nodes
    plateau = {m.params["hosts"]: m.value for m in ms if m.params["size_bytes"] == 64 * MIB}
    for (i, a), (j, b) in itertools.permutations(enumerate(nodes), 2):
        assert z["z"][i][j] == plateau.get(f"{a},{b}", plateau.get(f"{b},{a}"))
    (note,) = heat.figure["layout"]["annotations"]
    assert note["x"] == "node3" and "node3" in note["text"]
    row, column = heat.figure["layout"]["shapes"][:2]
    assert (row["y0"], row["y1"], column["x0"], column["x1"]) == (2.5, 3.5, 2.5, 3.5)
    assert "node3" in heat.notes[0] and "collectives.slow_node_pair" in heat.notes[0]
    assert len(heat.figure["layout"]["shapes"]) == 2 + 2 * 4  # node3's 4 pairs, both halves


def test_the_marked_node_is_judged_by_the_runs_own_thresholds() -> None:
    """A run made with node_pair_min_rel=0.95 does not call a node at a tenth slow (90% below
    the others): neither its findings nor its heatmap name node3."""
    nodes = [f"node{i}" for i in range(5)]
    run = results_of(pair_busbw(nodes, "node3"), num_nodes=5)
    run.run.config = {"thresholds": {"node_pair_min_rel": 0.95}}
    assert collectives_analysis.findings(run, run_thresholds(run)) == []
    heat = report_plots(run)["collectives"][-1]
    assert heat.notes == ["No slow node: no pair falls behind the others."]
    run.run.config = {}
    marked = report_plots(run)["collectives"][-1]
    assert "node3" in marked.notes[0]


def test_healthy_node_pairs_mark_nothing() -> None:
    heat = figures_of("collectives", pair_busbw([f"node{i}" for i in range(5)], None))[-1]
    assert "annotations" not in heat.figure["layout"] and "shapes" not in heat.figure["layout"]
    assert heat.notes == ["No slow node: no pair falls behind the others."]


def test_a_kind_of_many_groups_draws_one_curve_per_op_with_its_spread() -> None:
    groups = [f"node{i}" for i in range(8)]
    ms = group_sweeps("intra_node", groups, ops=("all_reduce", "all_gather"))
    (plot,) = figures_of("collectives", ms, PlotContext(multi_host=True))
    curves = traces(plot, "measurement")
    assert len(curves) == 2 and len(traces(plot)) == 3  # and the NVLink spec line
    top = [m for m in ms if m.params["op"] == "all_reduce" and m.params["size_bytes"] == 2**33]
    by_value = sorted(top, key=lambda m: m.value)
    # the median of 8 groups, as the tables give it: the mean of the two middle ones
    median = (by_value[3].value + by_value[4].value) / 2
    assert curves[0]["y"][-1] == median
    assert curves[0]["error_y"]["array"][-1] == by_value[-1].value - median
    assert curves[0]["customdata"][-1][1].startswith("median of 8 groups; min ")
    assert "group node0" in curves[0]["customdata"][-1][1]  # the lowest, named
    assert traces(plot, "reference")[0]["y"] == [450.0, 450.0]
    assert "within each node" in plot.title and "8 groups" in plot.title
    # both axes log: busbw spans 8 B to 8 GiB messages, orders of magnitude apart
    layout = plot.figure["layout"]
    assert layout["xaxis"]["type"] == layout["yaxis"]["type"] == "log"
    assert "log scale" in layout["yaxis"]["title"]["text"]


def directed_tcp(nodes: list[str], slow: str | None) -> list[Measurement]:
    link = spec(100.0, "link_rate")
    out = []
    for a, b in itertools.permutations(nodes, 2):
        fast = 94.0 + nodes.index(a) * 0.1 + nodes.index(b) * 0.01
        value = fast / 20 if slow in (a, b) else fast
        out.append(
            make(
                N.tcp_throughput,
                value,
                host=a,
                device="cpu:0",
                reference=link,
                src_host=a,
                dst_host=b,
                loopback=False,
                streams=4,
                tool="iperf3",
            )
        )
        out.append(
            make(
                N.tcp_latency_us,
                30.0 + nodes.index(b),
                host=a,
                device="cpu:0",
                src_host=a,
                dst_host=b,
                loopback=False,
            )
        )
    return out


def test_network_heatmaps_mark_the_slow_node_analysis_names() -> None:
    nodes = [f"node{i}" for i in range(6)]
    ms = directed_tcp(nodes, "node4")
    found = network_analysis.slow_node_pair_findings(
        results_of(ms, num_nodes=6), mads=3.0, min_rel=0.4
    )
    assert [f.evidence["common_nodes"] for f in found] == [["node4"]]
    tcp, latency = figures_of("network", ms)
    (z,) = traces(tcp)
    assert z["z"][1][4] == next(
        m.value
        for m in N.tcp_throughput.select(ms)
        if m.params["src_host"] == "node1" and m.params["dst_host"] == "node4"
    )
    assert z["zmax"] == 100.0 and tcp.table is not None and tcp.table.reference == 100.0
    assert tcp.figure["layout"]["annotations"][0]["x"] == "node4"
    assert "Gb/s" in z["colorbar"]["title"]["text"]
    (lat,) = traces(latency)
    assert lat["reversescale"] is True and "shapes" not in latency.figure["layout"]
    assert lat["z"][0][5] == 35.0


def test_attribution_stacks_the_four_classes_per_rank_and_marks_the_straggler() -> None:
    shares = {
        0: (50.0, 20.0, 10.0, 20.0),
        1: (48.0, 21.0, 9.0, 22.0),
        2: (70.0, 22.0, 6.0, 2.0),
        3: (49.0, 20.0, 11.0, 20.0),
    }
    ms = []
    for rank, values in shares.items():
        common: dict[str, ParamValue] = {"rank_step": "mean", "world_size": 4}
        host, device = f"node{rank // 2}", f"cuda:{rank % 2}"
        for metric, v in zip(attribution_analysis.CLASSES, values, strict=True):
            ms.append(make(metric, v, rank=rank, host=host, device=device, **common))
            ms.append(make(metric, v + 1, rank=rank, host=host, device=device, rank_step="2"))
        ms.append(make(A.step_time_ms, 100.0, rank=rank, host=host, device=device, **common))
        ms.append(
            make(
                A.collective_start_lateness_ms,
                30.0 if rank == 2 else 1.0,
                rank=rank,
                host=host,
                device=device,
                **common,
            )
        )
    (finding,) = attribution_stragglers.straggler_findings(
        results_of(ms, num_nodes=2), min_spread_pct=AttributionThresholds().straggler_min_spread_pct
    )
    assert finding.evidence["rank"] == 2
    (plot,) = figures_of("attribution", ms, PlotContext(multi_host=True))
    bars = traces(plot, "measurement")
    assert [b["name"] for b in bars] == [
        "compute",
        "memory",
        "communication (exposed)",
        "coordination",
    ]
    for i, bar in enumerate(bars):
        assert bar["x"] == ["0", "1", "2", "3"]
        assert bar["y"] == [shares[r][i] for r in range(4)]  # the means, not the steps
    assert plot.figure["layout"]["barmode"] == "stack"
    (mark,) = plot.figure["layout"]["annotations"]
    assert mark["x"] == "2" and "straggler" in mark["text"]
    assert "rank 2 (node1 cuda:0)" in plot.notes[0]
    assert bars[0]["customdata"][2] == "node1/cuda:0"


def test_no_straggler_no_mark() -> None:
    ms = [
        make(metric, 25.0, rank=r, rank_step="mean")
        for r in range(3)
        for metric in attribution_analysis.CLASSES
    ]
    (plot,) = attribution_figures.figures(ms, PlotContext())
    assert "annotations" not in plot.figure["layout"] and plot.notes == []


def test_training_throughput_and_scaling_efficiency_against_gpu_count() -> None:
    case: dict[str, ParamValue] = {
        "model": "8b",
        "strategy": "fsdp2",
        "precision": "bf16",
        "series": "scaling",
    }
    worlds = [1, 2, 4, 8]
    per_gpu = {1: 4000.0, 2: 3900.0, 4: 3800.0, 8: 3500.0}
    ms = []
    for w in worlds:
        ms.append(make(T.tokens_per_s, per_gpu[w] * w, world_size=w, **case))
        ms.append(make(T.tokens_per_s_per_gpu, per_gpu[w], world_size=w, **case))
        if w > 1:
            eff = 100 * per_gpu[w] / per_gpu[1]
            ms.append(make(T.scaling_efficiency, eff, world_size=w, scaling_mode="weak", **case))
    (plot,) = training_figures.figures(ms, PlotContext())
    check_figure(plot, ms)
    throughput, efficiency = traces(plot, "measurement")
    assert throughput["x"] == worlds and throughput["y"] == [4000.0, 7800.0, 15200.0, 28000.0]
    assert throughput["customdata"][-1] == "3,500"
    assert efficiency["x"] == [2, 4, 8] and efficiency["yaxis"] == "y2"
    assert efficiency["y"] == [97.5, 95.0, 87.5]
    layout = plot.figure["layout"]
    assert layout["yaxis"]["title"]["text"].endswith("(tokens/s)")
    assert layout["yaxis2"]["title"]["text"] == "scaling efficiency (%)"
    assert traces(plot, "reference")[0]["y"] == [100.0] * 4


def test_the_training_sweep_draws_what_ran_and_names_what_did_not() -> None:
    combos = [("ddp", "bf16", False, 5200.0), ("fsdp2", "bf16", True, 4100.0)]
    ms = []
    for strategy, precision, ckpt, value in combos:
        case: dict[str, ParamValue] = {
            "strategy": strategy,
            "precision": precision,
            "activation_checkpointing": ckpt,
            "compile": False,
            "series": "sweep",
            "world_size": 8,
        }
        ms.append(make(T.tokens_per_s_per_gpu, value, **case))
        ms.append(make(T.mfu, value / 100, **case))
        ms.append(make(T.fits, 1, **case))
    ms.append(
        make(
            T.fits,
            0,
            strategy="tp",
            precision="fp16",
            activation_checkpointing=False,
            compile=False,
            series="sweep",
            world_size=8,
            reason="out of memory",
        )
    )
    (plot,) = training_figures.figures(ms, PlotContext())
    check_figure(plot, ms)
    (bars,) = traces(plot)
    assert bars["x"] == ["ddp bf16", "fsdp2 bf16 ckpt"] and bars["y"] == [5200.0, 4100.0]
    assert bars["customdata"] == ["MFU 52.0 %", "MFU 41.0 %"]
    assert plot.notes == ["Not run: tp fp16: out of memory."]


def test_nothing_to_draw_is_no_figure() -> None:
    loopback = make(
        N.tcp_throughput,
        16.0,
        device="cpu:0",
        src_host="node0",
        dst_host="node0",
        loopback=True,
        streams=2,
        tool="iperf3",
    )
    assert figures_of("network", [loopback]) == []
    for name in (
        "gemm",
        "memory",
        "transfer",
        "collectives",
        "training",
        "attribution",
        "dataloader",
        "checkpoint",
    ):
        assert figures_of(name, []) == []


def test_the_dataloader_panels_per_pin_memory_share_one_scale() -> None:
    ms = []
    for pin, workers in itertools.product((False, True), (0, 2, 4)):
        for pf in (None,) if workers == 0 else (2, 4):
            value = 100.0 + workers * 50 + (pf or 0) * 5 + (25 if pin else 0)
            ms.append(
                make(
                    D.loader_samples_per_s,
                    value,
                    dataset="images",
                    num_workers=workers,
                    pin_memory=pin,
                    prefetch_factor=pf,
                    batch_size=32,
                )
            )
    (plot,) = dataloader_figures.figures(ms, PlotContext())
    check_figure(plot, ms)
    left, right = traces(plot)
    assert left["coloraxis"] == right["coloraxis"] == "coloraxis"
    assert (left["xaxis"], right["xaxis"]) == ("x", "x2")
    assert left["y"] == ["0", "2", "4"] and left["x"] == ["none", "2", "4"]
    assert right["z"][2] == [None, 335.0, 345.0] and left["z"][0] == [100.0, None, None]
    (best,) = plot.figure["layout"]["shapes"]
    assert best["xref"] == "x2" and (best["x0"], best["y0"]) == (1.5, 1.5)
    assert "pin_memory=True" in plot.notes[0] and "345" in plot.notes[0]


# --- a 64-node run -------------------------------------------------------------------------


def cluster(num_nodes: int) -> Iterator[Measurement]:
    """Per GPU gemm and memory, collectives per node, per rail and per node pair, TCP between
    every ordered pair, attribution per rank; one slow node."""
    nodes = [f"node{i:02d}" for i in range(num_nodes)]
    for n, g in itertools.product(range(num_nodes), range(8)):
        for shape in (4096, 8192, 16384):
            yield make(
                G.tflops,
                700.0 + g + n / 100,
                host=nodes[n],
                device=f"cuda:{g}",
                rank=8 * n + g,
                dtype="bf16",
                m=shape,
                n=shape,
                k=shape,
            )
        yield make(
            MemoryMetrics.bandwidth,
            4300.0 - g,
            host=nodes[n],
            device=f"cuda:{g}",
            rank=8 * n + g,
            op="copy",
            size_bytes=4 * 2**30,
        )
        for metric in attribution_analysis.CLASSES:
            yield make(metric, 25.0, rank=8 * n + g, host=nodes[n], rank_step="mean")
    yield from group_sweeps("intra_node", nodes, ops=("all_reduce", "all_gather"))
    yield from group_sweeps("inter_node", [f"rail{j}" for j in range(8)], ops=("all_reduce",))
    yield from pair_busbw(nodes, nodes[5])
    yield from directed_tcp(nodes, nodes[5])


def test_a_64_node_run_draws_compact_figures_and_marks_its_slow_node() -> None:
    ms = list(cluster(64))
    assert len(ms) > 20_000
    by_benchmark: dict[str, list[Measurement]] = {}
    for m in ms:
        by_benchmark.setdefault(m.benchmark, []).append(m)
    ctx = PlotContext(multi_host=True)
    plots = {name: figures_of(name, group, ctx) for name, group in by_benchmark.items()}
    size = {name: sum(len(json.dumps(p.figure)) for p in ps) for name, ps in plots.items()}
    # curves and bars do not grow with the devices; a heatmap is one trace of a cell per pair
    assert max(len(traces(p)) for ps in plots.values() for p in ps) <= 4
    assert size["gemm"] < 10_000 and size["memory"] < 5_000
    heatmaps = [
        p for p in plots["collectives"] + plots["network"] if traces(p)[0]["type"] == "heatmap"
    ]
    assert len(heatmaps) == 3  # busbw, TCP throughput, TCP latency
    for heat in heatmaps[:2]:
        assert len(traces(heat)) == 1 and "texttemplate" not in traces(heat)[0]
        assert heat.figure["layout"]["annotations"][0]["x"] == "node05"
        assert len(json.dumps(heat.figure)) < 150_000
    assert sum(size.values()) < 600_000

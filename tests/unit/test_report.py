"""Rendering: the console summary, summary.md and the benchmark list, on known numbers."""

from __future__ import annotations

import io

from rich.console import Console

from clusterbench import registry
from clusterbench.report.console import render_summary
from clusterbench.report.listing import render_benchmark_list
from clusterbench.report.markdown import render_markdown as markdown_of
from clusterbench.schema import (
    ErrorRecord,
    Finding,
    Measurement,
    ParamValue,
    Reference,
    Results,
    RunInfo,
    ToolInfo,
)
from tests.pages import analysis


def meas(
    benchmark: str,
    metric: str,
    value: float,
    *,
    unit: str = "GB/s",
    params: dict[str, ParamValue],
    device: str = "cuda:0",
    ref: tuple[float, str] | None = None,
) -> Measurement:
    reference = Reference(value=ref[0], kind=ref[1], source="t") if ref else None  # type: ignore[arg-type]
    return Measurement(
        benchmark=benchmark,
        metric=metric,
        value=value,
        unit=unit,
        params=params,
        rank=int(device[-1]),
        host="node1",
        device=device,
        reference=reference,
    )


def gemm(metric: str, value: float, device: str, dtype: str = "bf16") -> Measurement:
    params: dict[str, ParamValue] = {"dtype": dtype, "m": 8192, "n": 8192, "k": 8192}
    if metric == "tflops_geomean":
        params = {"dtype": dtype, "num_shapes": 27}
    peak = {"bf16": 989.0, "fp32": 67.0}[dtype]
    return meas(
        "gemm", metric, value, unit="TFLOP/s", params=params, device=device, ref=(peak, "spec_peak")
    )


def transfer(direction: str, value: float, size: int) -> Measurement:
    params: dict[str, ParamValue] = {
        "direction": direction,
        "memory": "pinned",
        "numa": "local",
        "numa_node": 0,
        "size_bytes": size,
    }
    return meas("transfer", "bandwidth", value, params=params, ref=(63.0, "link_rate"))


def p2p(src: int, dst: int, mode: str, value: float) -> Measurement:
    params: dict[str, ParamValue] = {
        "src": src,
        "dst": dst,
        "mode": mode,
        "p2p_access": True,
        "size_bytes": 1 << 30,
    }
    peak = 450.0 if mode == "oneway" else 900.0
    return meas("transfer", "p2p_bandwidth", value, params=params, ref=(peak, "spec_peak"))


def make_results() -> Results:
    measurements = [
        gemm("tflops_best", 800.0, "cuda:0"),
        gemm("tflops_best", 712.5, "cuda:1"),
        gemm("tflops_geomean", 690.0, "cuda:0"),
        gemm("tflops_geomean", 650.0, "cuda:1"),
        gemm("tflops_best", 51.0, "cuda:0", dtype="fp32"),
        meas(
            "memory",
            "bandwidth",
            4273.0,
            params={"op": "copy", "size_bytes": 1 << 31},
            ref=(4800.0, "spec_peak"),
        ),
        transfer("h2d", 20.0, 1 << 20),
        transfer("h2d", 55.4, 1 << 30),
        meas("transfer", "pcie_link_gen", 4, unit="gen", params={"max_gen": 5}),
        p2p(0, 1, "oneway", 395.0),
        p2p(1, 0, "oneway", 391.0),
        p2p(0, 1, "bidir", 702.0),
        meas("selftest", "sync_time", 0.0123, unit="s", params={}),
    ]
    findings = [
        Finding(
            id="spec.unknown_sku",
            severity="info",
            scope="host:node1",
            message="An info message.",
            fix="Add the SKU.",
        ),
        Finding(
            id="pcie.low_gen",
            severity="fail",
            scope="host:node1/cuda:0",
            message="PCIe link runs at gen 4 under load, below its maximum gen 5.",
            evidence={"gen": 4, "max_gen": 5},
            fix="Reseat the GPU; check `nvidia-smi -q -d PCIE`.",
        ),
    ]
    run = RunInfo(
        id="2026-11-29T120000Z-node1",
        started="2026-11-29T12:00:00Z",
        suite="quick",
        world_size=2,
        num_nodes=1,
        backend="nccl",
        command="clusterbench run",
        status="failed",
        unfinished=["collectives"],
        skipped={"network": "needs 2 nodes"},
    )
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=run,
        measurements=measurements,
        findings=findings,
        errors=[ErrorRecord(benchmark="collectives", rank=1, host="node1", message="timed out")],
    )


def render(results: Results, *, verbose: bool = False) -> str:
    buf = io.StringIO()
    render_summary(analysis(results), Console(file=buf, width=160), verbose=verbose)  # fmt: skip
    return buf.getvalue()


def render_markdown(results: Results) -> str:
    return markdown_of(analysis(results))


def test_console_header_and_tables_show_achieved_next_to_limit() -> None:
    out = render(make_results())
    for text in ("2026-11-29T120000Z-node1", "suite quick", "world size 2", "1 node", "nccl"):
        assert text in out
    assert "status failed" in out
    # gemm: median of 800 and 712.5, both extremes named, the peak and % of it
    assert "bf16 best shape" in out and "756.2" in out
    assert "712.5 (cuda:1)" in out and "800.0 (cuda:0)" in out
    assert "989.0 spec" in out and "76%" in out
    assert "bf16 geomean of 27 shapes" in out and "fp32 best shape" in out
    # memory and transfer: best over sizes, next to HBM spec and link rate
    assert "4,273" in out and "4,800" in out and "89%" in out
    assert "h2d pinned, NUMA local, best of 1 MiB–1 GiB" in out
    assert "55.4" in out and "63.0 link" in out and "88%" in out
    assert "PCIe link gen under load" in out and "5 max" in out
    assert "sync_time" in out and "0.0123" in out


def test_console_p2p_matrix() -> None:
    out = render(make_results())
    assert "GPU→GPU copy, oneway" in out and "GPU→GPU copy, bidir" in out
    assert "395.0 (88%)" in out and "391.0 (87%)" in out and "702.0 (78%)" in out
    assert "src \\ dst" in out


def test_console_findings_errors_and_unfinished() -> None:
    out = render(make_results())
    assert "Findings: 1 fail" in out
    # the info finding is a note: counted, printed only with --verbose, after the fail
    assert "1 note that needs no action" in out and "INFO" not in out
    loud = render(make_results(), verbose=True)
    assert loud.index("FAIL") < loud.index("Notes: 1 info") < loud.index("INFO")
    assert "PCIe link runs at gen 4 under load" in out
    assert "nvidia-smi -q -d PCIE" in out
    assert "ERROR collectives rank 1 host node1: timed out" in out
    assert "Did not finish: collectives" in out
    assert "Skipped: network: needs 2 nodes" in out


def test_console_shows_brackets_literally() -> None:
    results = make_results()
    results.measurements.append(
        meas("custom", "rate", 1.5, unit="items/s", params={"tag": "[bold]x[/bold]"})
    )
    results.findings[0].message = "see [red]this[/red]"
    out = render(results, verbose=True)
    assert "rate (tag=[bold]x[/bold])" in out and "see [red]this[/red]" in out


def test_console_empty_run() -> None:
    results = make_results().model_copy(update={"measurements": [], "findings": []})
    out = render(results)
    assert "No measurements." in out and "No findings." in out


def test_markdown_has_tables_and_findings() -> None:
    md = render_markdown(make_results())
    assert md.startswith("# clusterbench run 2026-11-29T120000Z-node1\n")
    assert "## gemm" in md and "## memory" in md and "## transfer" in md
    assert "| what | unit | devices | median | min | max | reference | % of ref |" in md
    assert "| bf16 best shape | TFLOP/s | 2 | 756.2 | 712.5 (cuda:1) | 800.0 (cuda:0) |" in md
    assert "| src \\ dst | cuda:0 | cuda:1 |" in md and "| cuda:1 | 391.0 (87%) | - |" in md
    assert "## Findings" in md and "| FAIL | host:node1/cuda:0 |" in md
    assert md.index("| FAIL |") < md.index("## Notes") < md.index("| INFO |")
    assert "Reseat the GPU; check `nvidia-smi -q -d PCIE`." in md
    assert "## Errors" in md and "timed out" in md
    assert "did not finish: collectives" in md and "skipped network: needs 2 nodes" in md


def test_markdown_escapes_pipes() -> None:
    results = make_results()
    results.findings[0].message = "a | b"
    assert "a \\| b" in render_markdown(results)


def test_benchmark_list() -> None:
    buf = io.StringIO()
    render_benchmark_list(registry.all_benchmarks(), Console(file=buf, width=200))
    out = buf.getvalue()
    assert "gemm" in out and "1 (one node)" in out and "per_device" in out
    assert "cpu, cuda" in out and "Matrix-multiply TFLOP/s per dtype" in out
    assert "quick, standard, full" in out and "standard, full" in out and "(--only)" in out
    # by level: the self-test and doctor first, training's benchmarks last
    assert out.index("selftest") < out.index("gemm") < out.index("network") < out.index("training")


# --- node-pair and network matrices ----------------------------------------------------------


def on_host(m: Measurement, host: str) -> Measurement:
    return m.model_copy(update={"host": host, "device": "cpu:0", "rank": 0})


def pair_busbw(a: str, b: str, value: float, size: int) -> Measurement:
    params: dict[str, ParamValue] = {
        "op": "all_reduce",
        "group": f"{a}-{b}",
        "group_kind": "node_pairs",
        "hosts": f"{a},{b}",
        "mode": "back_to_back",
        "dtype": "fp32",
        "group_size": 2,
        "size_bytes": size,
    }
    return on_host(meas("collectives", "busbw", value, params=params), a)


def net(metric: str, src: str, dst: str, value: float, **extra: ParamValue) -> Measurement:
    unit = "us" if metric == "tcp_latency_us" else "Gb/s"
    params: dict[str, ParamValue] = {"src_host": src, "dst_host": dst, "loopback": src == dst}
    if metric == "tcp_throughput":
        params |= {"streams": 2, "tool": "iperf3"}
    ref = (10.0, "link_rate") if metric == "tcp_throughput" and src != dst else None
    return on_host(
        meas("network", metric, value, unit=unit, params={**params, **extra}, ref=ref), src
    )


def network_results() -> Results:
    hosts = ["node0", "node1", "node2"]
    slow = {("node0", "node2"): 0.00466, ("node1", "node2"): 0.0047, ("node0", "node1"): 0.649}
    ms = [pair_busbw(a, b, v, 1 << 20) for (a, b), v in slow.items()]
    ms.append(pair_busbw("node0", "node1", 0.5, 1 << 10))  # a smaller size: not shown
    nic: dict[str, ParamValue] = {"nic": "mlx5_0", "kind": "infiniband", "state": "ACTIVE"}
    ms += [on_host(meas("network", "nic_rate", 400.0, unit="Gb/s", params=nic), h) for h in hosts]
    for i, src in enumerate(hosts):
        for j, dst in enumerate(hosts):
            if src != dst:
                tcp = 0.0386 if "node2" in (src, dst) else 9.1 + 0.2 * i
                ms.append(net("tcp_throughput", src, dst, tcp))
                ms.append(net("tcp_latency_us", src, dst, 20.0 + 10 * i + j))
    ms.append(net("rdma_write_bw", "node0", "node1", 390.5, nic="mlx5_0", peer_nic="mlx5_0"))
    base = make_results()
    return base.model_copy(update={"measurements": ms, "findings": [], "errors": []})


def test_console_node_pair_and_network_matrices() -> None:
    out = render(network_results())
    lines = out.splitlines()

    def row(first: str, after: str) -> list[str]:
        start = next(i for i, line in enumerate(lines) if after in line)
        return next(line.split() for line in lines[start:] if line.split()[:1] == [first])

    title = "all_reduce busbw between node pairs (largest size 1 MiB), GB/s"
    assert title in out
    assert row("node", title) == ["node", "node0", "node1", "node2"]
    assert row("node0", title) == ["node0", "-", "0.649", "0.00466"]
    assert row("node2", title) == ["node2", "0.00466", "0.0047", "-"]  # symmetric
    assert "nic mlx5_0 (infiniband, ACTIVE)" in out and "400.0" in out
    tcp = "TCP throughput, iperf3, 2 streams (rows: sender, columns: receiver), Gb/s; link 10.0"
    assert tcp in out
    assert row("sender", tcp) == ["sender", "\\", "receiver", "node0", "node1", "node2"]
    assert row("node1", tcp) == ["node1", "9.3", "(93%)", "-", "0.0386", "(0%)"]
    lat = "TCP latency, median round trip of 64 B (rows: sender, columns: receiver), us"
    assert row("node2", lat) == ["node2", "40.0", "41.0", "-"]
    rdma = "RDMA write bandwidth, ib_write_bw (rows: sender, columns: receiver), Gb/s"
    assert row("node0", rdma) == ["node0", "-", "390.5"]
    assert "loopback" not in out


def test_markdown_node_pair_and_network_matrices() -> None:
    md = render_markdown(network_results())
    assert "**all_reduce busbw between node pairs (largest size 1 MiB), GB/s**" in md
    assert "| node | node0 | node1 | node2 |" in md
    assert "| node1 | 0.649 | - | 0.0047 |" in md
    assert "| sender \\ receiver | node0 | node1 | node2 |" in md
    assert "| node0 | - | 9.1 (91%) | 0.0386 (0%) |" in md
    assert "| node2 | 40.0 | 41.0 | - |" in md
    assert "| nic mlx5_0 (infiniband, ACTIVE) | Gb/s | 3 | 400.0 |" in md


def test_loopback_is_one_row_not_a_matrix() -> None:
    ms = [
        net("tcp_throughput", "node0", "node0", 31.5),
        net("tcp_latency_us", "node0", "node0", 12.0),
    ]
    results = make_results().model_copy(update={"measurements": ms})
    out, md = render(results), render_markdown(results)
    assert "loopback TCP throughput" in out and "31.5" in out and "sender" not in out
    assert "| loopback TCP throughput | Gb/s | 1 | 31.5 |" in md
    assert "| loopback TCP latency (round trip) | us | 1 | 12.0 |" in md
    assert "receiver" not in md

"""The verdict line per node: healthy, or what falls short of known-good and by how much."""

from __future__ import annotations

from clusterbench.analyses.baseline import builtin_baseline
from clusterbench.analyses.verdict.nodes import node_verdicts, other_findings_line
from clusterbench.report.verdict import verdict_lines
from clusterbench.schema import ErrorRecord, Finding, GpuInfo, HostInfo
from tests.pages import analysis
from tests.unit.test_baseline import h200_run
from tests.unit.test_compare import meas, results


def _h100(**figures: float):
    run = h200_run(**figures)
    run.hosts[0].gpus = [GpuInfo(index=0, name="NVIDIA H100 80GB HBM3")]
    return run


def test_a_healthy_h100_gets_each_figure_as_a_share_of_known_good() -> None:
    # known-good H100 SXM: GEMM bf16 794.5, HBM copy 2900, H2D 50.5 TFLOP/s and GB/s
    [v] = node_verdicts(_h100(gemm=802.0, copy=2900.0, h2d=50.0), builtin_baseline())
    assert v.healthy
    assert v.line() == (
        "node h1: healthy: GEMM bf16 101%, HBM copy 100%, H2D 99% "
        "of a known-good NVIDIA H100 80GB HBM3"
    )


def test_a_figure_short_of_known_good_is_named_with_its_share_and_device() -> None:
    [v] = node_verdicts(_h100(gemm=600.0, copy=2900.0, h2d=50.0), builtin_baseline())
    assert not v.healthy
    assert v.line() == (
        "node h1: short of known-good: GEMM bf16 76% on cuda:0; "
        "HBM copy 100%, H2D 99% of a known-good NVIDIA H100 80GB HBM3"
    )


def test_within_the_practical_limit_is_healthy_beyond_it_is_not() -> None:
    # 5% below known-good is the limit (thresholds.regression_min_rel)
    assert node_verdicts(_h100(gemm=794.5 * 0.96), builtin_baseline())[0].healthy
    assert not node_verdicts(_h100(gemm=794.5 * 0.93), builtin_baseline())[0].healthy


def test_the_worst_device_of_a_node_speaks_for_it() -> None:
    r = results(*[meas(v, device=f"cuda:{i}") for i, v in enumerate([790.0, 620.0, 785.0])])
    r.hosts[0].gpus = [GpuInfo(index=i, name="NVIDIA H200") for i in range(3)]
    [v] = node_verdicts(r, builtin_baseline())
    assert v.line().startswith("node h1: short of known-good: GEMM bf16 79% on cuda:1")


def test_findings_to_act_on_and_failed_ranks_make_a_node_unhealthy() -> None:
    run = _h100(gemm=802.0)
    run.findings = [
        Finding(id="pcie.link_below_max", severity="warn", scope="host:h1/gpu:0", message="x"),
        Finding(id="env.omp_threads", severity="info", scope="host:h1", message="x"),
    ]
    [v] = node_verdicts(run, builtin_baseline())
    assert not v.healthy
    assert v.line() == (
        "node h1: 1 warn (pcie.link_below_max); GEMM bf16 101% "
        "of a known-good NVIDIA H100 80GB HBM3"
    )
    run.errors = [
        ErrorRecord(rank=1, host="h1", benchmark="gemm", message="rank 1 on host h1 died"),
        ErrorRecord(rank=0, host="h1", benchmark="gemm",
                    message="rank 0 on host h1 was waiting for rank 1 in gemm"),
    ]  # fmt: skip
    assert node_verdicts(run, builtin_baseline())[0].failed_ranks == (1,)


def test_cpu_workers_are_judged_by_their_findings_alone() -> None:
    cpu = results(meas(0.09, device="cpu:0", host="vm"), host="vm")
    cpu.hosts[0].gpus = []
    [v] = node_verdicts(cpu, builtin_baseline())
    assert v.healthy and v.model is None
    assert (
        v.line()
        == "node vm: healthy (by its findings: no known-good figures for what it measured on "
        "CPU workers)"
    )


def test_one_line_per_node_then_the_findings_about_no_one_node() -> None:
    a = meas(790.0, device="cuda:0", host="n1")
    b = meas(700.0, device="cuda:0", host="n2")
    run = results(a, b, host="n1")
    run.hosts = [
        HostInfo(hostname=h, gpus=[GpuInfo(index=0, name="NVIDIA H200")]) for h in ("n1", "n2")
    ]
    run.findings = [
        Finding(id="network.slow_node_pair", severity="fail", scope="pair:n1-n2", message="x")
    ]
    lines = [line.text for line in verdict_lines(analysis(run))]
    assert [line.split(":")[0] for line in lines] == ["node n1", "node n2", "across nodes"]
    assert lines[0].startswith("node n1: healthy: GEMM bf16 101%")
    assert lines[1].startswith("node n2: short of known-good: GEMM bf16 90% on cuda:0")
    assert lines[2] == "across nodes: 1 fail (network.slow_node_pair)"
    assert other_findings_line(results(a)) == ""


def _with_findings():
    run = _h100(gemm=802.0)
    run.findings = [
        Finding(id="env.omp_threads", severity="info", scope="host:h1", message="OMP unset"),
        Finding(id="pcie.link_below_max", severity="warn", scope="host:h1/gpu:0",
                message="PCIe Gen4 of Gen5", fix="reseat the card"),
    ]  # fmt: skip
    return run


def test_the_console_prints_the_verdict_then_the_findings_and_counts_the_notes() -> None:
    from rich.console import Console

    from clusterbench.report.console import render_summary

    def printed(run, **kw) -> str:
        console = Console(record=True, width=200)
        render_summary(analysis(run, []), console, **kw)
        return console.export_text()

    text = printed(_with_findings())
    verdict = text.index("node h1: 1 warn (pcie.link_below_max); GEMM bf16 101%")
    assert verdict < text.index("Findings: 1 warn") < text.index("PCIe Gen4 of Gen5")
    assert "OMP unset" not in text
    assert "1 note that needs no action: in summary.md and report.html (--verbose" in text
    loud = printed(_with_findings(), verbose=True)
    assert loud.index("PCIe Gen4 of Gen5") < loud.index("Notes: 1 info") < loud.index("OMP unset")
    quiet = _with_findings()
    quiet.findings = quiet.findings[:1]
    text = printed(quiet)
    assert "node h1: healthy: GEMM bf16 101%" in text and "No findings to act on." in text


def test_summary_md_and_the_page_hold_the_verdict_first_and_the_notes_apart() -> None:
    from clusterbench.report.html_header import verdict_block
    from clusterbench.report.markdown import render_markdown

    md = render_markdown(analysis(_with_findings(), []))
    order = ["## Verdict", "- node h1: 1 warn (pcie.link_below_max)", "## Findings",
             "PCIe Gen4 of Gen5", "## Notes", "OMP unset"]  # fmt: skip
    assert [md.index(s) for s in order] == sorted(md.index(s) for s in order)
    assert md.count("OMP unset") == 1
    page = verdict_block(analysis(_with_findings()))
    assert '<li class="short">node h1: 1 warn (pcie.link_below_max); GEMM bf16 101%' in page
    findings, notes = page.split('<details class="notes">')
    assert "PCIe Gen4 of Gen5" in findings and "OMP unset" not in findings
    assert "Notes: 1 that needs no action" in notes and "OMP unset" in notes


def test_nodes_judged_alike_share_a_line_that_names_three_and_counts_the_rest() -> None:
    hosts = [f"n{i:02d}" for i in range(10)]
    run = results(*(meas(0.09, device="cpu:0", host=h) for h in hosts), host=hosts[0])
    run.hosts = [HostInfo(hostname=h, gpus=[]) for h in hosts]
    run.findings = [
        Finding(id="pcie.link_below_max", severity="warn", scope="host:n04/gpu:0", message="x")
    ]
    lines = [line.text for line in verdict_lines(analysis(run))]
    assert lines == [
        "9 nodes (n00, n01, n02 and 6 more): healthy (by their findings: no known-good figures "
        "for what they measured on CPU workers)",
        "node n04: 1 warn (pcie.link_below_max) (by its findings: no known-good figures for what "
        "it measured on CPU workers)",
    ]
    two = results(*(meas(0.09, device="cpu:0", host=h) for h in hosts[:2]), host=hosts[0])
    two.hosts = [HostInfo(hostname=h, gpus=[]) for h in hosts[:2]]
    assert [line.text for line in verdict_lines(analysis(two))] == [
        "2 nodes (n00, n01): healthy (by their findings: no known-good figures for what they "
        "measured on CPU workers)"
    ]


def test_healthy_nodes_of_one_model_share_a_line_with_each_share_as_a_range() -> None:
    # known-good H100 SXM: GEMM bf16 794.5 TFLOP/s, HBM copy 2900 GB/s
    figures = {"a": (802.0, 2900.0), "b": (780.0, 2950.0), "c": (820.0, 2901.0),
               "d": (600.0, 2900.0), "e": (790.0, 2902.0)}  # fmt: skip
    ms = [
        meas(value, host=h, params=params, **kw)
        for h, (gemm, copy) in figures.items()
        for value, params, kw in (
            (gemm, {"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192}, {}),
            (copy, {"op": "copy", "size_bytes": 2**31},
             {"benchmark": "memory", "metric": "bandwidth", "unit": "GB/s"}),
        )
    ]  # fmt: skip
    run = results(*ms, host="a")
    run.hosts = [
        HostInfo(hostname=h, gpus=[GpuInfo(index=0, name="NVIDIA H100 80GB HBM3")]) for h in figures
    ]
    lines = verdict_lines(analysis(run, []))
    assert [(line.text, line.nodes, line.healthy) for line in lines] == [
        ("4 nodes (a, b, c and 1 more): healthy: GEMM bf16 98-103%, HBM copy 100-102% "
         "of a known-good NVIDIA H100 80GB HBM3", 4, True),
        ("node d: short of known-good: GEMM bf16 76% on cuda:0; HBM copy 100% of a known-good "
         "NVIDIA H100 80GB HBM3", 1, False),
    ]  # fmt: skip
    # one node alone keeps its own figures; shares that round alike print once
    run.hosts, run.measurements = run.hosts[:1], ms[:2]
    assert [line.text for line in verdict_lines(analysis(run, []))] == [
        "node a: healthy: GEMM bf16 101%, HBM copy 100% of a known-good NVIDIA H100 80GB HBM3"
    ]
    run.hosts = [HostInfo(hostname=h, gpus=run.hosts[0].gpus) for h in ("a", "e")]
    run.measurements = [m for m in ms if m.host in ("a", "e")]
    assert [line.text for line in verdict_lines(analysis(run, []))] == [
        "2 nodes (a, e): healthy: GEMM bf16 99-101%, HBM copy 100% of a known-good "
        "NVIDIA H100 80GB HBM3"
    ]


def test_the_console_prints_twelve_node_lines_those_to_act_on_and_counts_the_rest() -> None:
    from rich.console import Console

    from clusterbench.report.console import VERDICT_SHOWN, render_summary

    hosts = [f"n{i:02d}" for i in range(40)]
    run = results(*(meas(0.09, device="cpu:0", host=h) for h in hosts), host=hosts[0])
    run.hosts = [HostInfo(hostname=h, gpus=[]) for h in hosts]
    short = hosts[5:35:2]  # 15 nodes, each with a warn of its own: 15 lines that differ
    run.findings = [
        Finding(id=f"check.number_{i}", severity="warn", scope=f"host:{h}", message=h)
        for i, h in enumerate(short)
    ]
    console = Console(record=True, width=300)
    render_summary(analysis(run, []), console)
    text = console.export_text()
    named = [line.split(":")[0] for line in text.splitlines() if line.startswith("node ")]
    assert named == [f"node {h}" for h in short[:VERDICT_SHOWN]]
    assert "25 healthy" not in text and "healthy (by their findings" not in text
    assert (
        "28 more nodes, 25 of them healthy: summary.md and report.html give each its line" in text
    )
    md_lines = verdict_lines(analysis(run, []))
    assert sum(line.nodes for line in md_lines) == 40 and len(md_lines) == 16

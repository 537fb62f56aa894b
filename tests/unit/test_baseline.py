"""Fleet baselines (median, MAD, count per GPU model) and the built-in known-good figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyses.baseline import Baseline, build_baseline, compare_baseline
from clusterbench.compare_io import builtin_baseline, load_baseline, write_baseline
from clusterbench.schema import GpuInfo, HostInfo, Measurement, Results
from clusterbench.thresholds import Thresholds
from tests.unit.test_compare import meas, results, samples

T = Thresholds()
ROOT = Path(__file__).resolve().parents[2]


def eight_gpu_node(values: list[float], *, host: str = "n1") -> Results:
    """One run of one node with a GPU per value: bf16 best GEMM TFLOP/s of each."""
    r = results(*[meas(v, device=f"cuda:{i}", host=host) for i, v in enumerate(values)], host=host)
    r.hosts[0].gpus = [GpuInfo(index=i, name="NVIDIA H200") for i in range(len(values))]
    return r


def test_build_from_two_runs() -> None:
    a = results(meas(790.0), meas(4270.0, benchmark="memory", metric="bandwidth", unit="GB/s",
                                  params={"op": "copy"}), run_id="a")  # fmt: skip
    b = results(meas(780.0), run_id="b")
    baseline = build_baseline([a, b], name="fleet")
    by_metric = {e.metric: e for e in baseline.entries}
    gemm = by_metric["tflops_best"]
    assert (gemm.median, gemm.mad, gemm.count, gemm.model) == (785.0, 5.0, 2, "NVIDIA H200")
    assert gemm.sources == ["a:h1", "b:h1"]
    assert by_metric["bandwidth"].count == 1
    assert baseline.runs == ["a", "b"]


def test_one_nodes_ranks_make_a_baseline_that_finds_the_slow_gpu(tmp_path: Path) -> None:
    node = eight_gpu_node([790.0, 786.0, 793.0, 789.0, 650.0, 791.0, 788.0, 792.0])
    baseline = build_baseline([node])
    [entry] = baseline.entries
    assert entry.count == 8 and entry.median == pytest.approx(789.5)
    path = tmp_path / "fleet.json"
    write_baseline(baseline, path)
    assert load_baseline(path) == baseline
    c = compare_baseline(baseline, node, T)
    bad = [r for r in c.rows if r.verdict == "regression"]
    assert [r.device for r in bad] == ["cuda:4"]
    assert bad[0].severity == "warn" and "baseline of 8" in bad[0].noise
    assert [f.id for f in c.findings] == ["regression.gemm.tflops_best"]
    assert all(r.verdict == "unchanged" for r in c.rows if r.device != "cuda:4")


def test_a_baseline_of_fewer_than_three_has_no_spread() -> None:
    baseline = build_baseline([eight_gpu_node([790.0, 788.0])])
    c = compare_baseline(baseline, eight_gpu_node([600.0]), T)
    row = next(r for r in c.rows if r.verdict != "missing")
    assert row.verdict == "unchanged" and row.reason == "noise_unknown"


def test_fleet_lists_new_and_missing_figures() -> None:
    baseline = build_baseline([results(meas(790.0), meas(51.0, params={"dtype": "fp32"}))])
    c = compare_baseline(baseline, results(meas(790.0), meas(1400.0, params={"dtype": "fp8"})), T)
    assert sorted(r.verdict for r in c.rows) == ["missing", "new", "unchanged"]


def test_builtin_baseline_is_package_data_with_sources() -> None:
    b = builtin_baseline()
    assert b.kind == "builtin" and b.entries
    assert load_baseline("builtin") == b
    for e in b.entries:
        assert e.sources and e.sources[0].startswith("docs/"), e
        doc = e.sources[0].split(",")[0]
        assert (ROOT / doc).exists(), doc
        assert e.params_match == "subset" and e.median > 0
    mfu = [e for e in b.entries if e.metric == "mfu"]
    assert mfu and all(e.better == "higher" for e in mfu)
    # every common GPU model, as its driver names it, with a bf16 GEMM figure and, but for the
    # two PCIe cards of no NVLink board, an HBM copy and (8-GPU boards) a large all_reduce
    models = {"NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA B200",
              "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "AMD Instinct MI300X",
              "AMD Instinct MI300X VF"}  # fmt: skip
    assert set(b.models()) == models

    def figures(model: str) -> set[tuple[str, str]]:
        return {(e.benchmark, str(e.params.get("dtype") or e.params.get("op")))
                for e in b.entries if e.model == model}  # fmt: skip

    for model in models:
        assert ("gemm", "bf16") in figures(model) and ("memory", "copy") in figures(model), model
    for model in models - {"NVIDIA H100 PCIe", "NVIDIA L40S"}:
        assert ("collectives", "all_reduce") in figures(model), model
    # where sources disagree, the lowest healthy figure: published figures below our own H200s'
    h200 = {(e.benchmark, str(e.params.get("dtype") or e.params.get("op"))): e
            for e in b.entries if e.model == "NVIDIA H200"}  # fmt: skip
    assert (
        h200[("memory", "copy")].median == 4010.0
        and "the lowest" in h200[("memory", "copy")].sources[-1]
    )
    assert h200[("gemm", "fp8")].median == 1333.2
    # each figure names its source in docs/reference.md's table
    table = (ROOT / "docs/reference.md").read_text(encoding="utf-8")
    for e in b.entries:
        if e.sources[0].startswith("docs/reference.md"):
            assert f"| {e.model} |" in table and f"{e.median:,.6g} {e.unit}" in table, e


def h200_run(**figures: float) -> Results:
    """A synthetic H200 run: bf16 best GEMM, HBM copy, pinned h2d and 1.3b MFU."""
    ms: list[Measurement] = []
    if "gemm" in figures:
        ms.append(meas(figures["gemm"], values=samples(figures["gemm"]),
                       params={"dtype": "bf16", "m": 8192, "n": 8192, "k": 8192}))  # fmt: skip
    if "copy" in figures:
        ms.append(meas(figures["copy"], benchmark="memory", metric="bandwidth", unit="GB/s",
                       params={"op": "copy", "size_bytes": 2**31}))  # fmt: skip
    if "h2d" in figures:
        ms.append(meas(figures["h2d"], benchmark="transfer", metric="bandwidth", unit="GB/s",
                       params={"direction": "h2d", "memory": "pinned", "numa": "local",
                               "numa_node": 0, "size_bytes": 2**30}))  # fmt: skip
    if "mfu" in figures:
        ms.append(meas(figures["mfu"], benchmark="training", metric="mfu", unit="%",
                       params={"model": "1.3b", "strategy": "ddp", "precision": "bf16",
                               "world_size": 1, "batch_size": 8, "global_batch": 8,
                               "grad_accum": 1, "activation_checkpointing": False,
                               "compile": True, "cuda_graphs": False, "seq_len": 2048,
                               "series": "weak", "flops_formula": "6N+12LHQT"}))  # fmt: skip
    return results(*ms)


def test_builtin_flags_an_h200_below_its_known_good_figures() -> None:
    healthy = compare_baseline(builtin_baseline(), h200_run(gemm=786.0, copy=4100.0, h2d=54.0,
                                                            mfu=55.2), T)  # fmt: skip
    assert [r.verdict for r in healthy.rows] == ["unchanged"] * 4
    assert not healthy.findings
    slow = compare_baseline(builtin_baseline(), h200_run(gemm=600.0, copy=3700.0, h2d=40.0,
                                                         mfu=45.0), T)  # fmt: skip
    verdicts = {(r.benchmark, r.metric): (r.verdict, r.severity) for r in slow.rows}
    assert verdicts == {
        ("gemm", "tflops_best"): ("regression", "fail"),  # -23% of 780.8
        ("memory", "bandwidth"): ("regression", "warn"),  # -8% of 4010
        ("transfer", "bandwidth"): ("regression", "fail"),  # -26% of 54.2
        ("training", "mfu"): ("regression", "warn"),  # -18% of 54.9
    }
    gemm = next(r for r in slow.rows if r.benchmark == "gemm")
    assert gemm.base == 780.8 and "known-good: docs/results/H200.md" in gemm.noise
    assert slow.failed and slow.base.kind == "builtin"


def test_builtin_has_known_good_figures_for_an_h100() -> None:
    """An H100 SXM run is judged against its model's figures, not told there are none."""
    run = h200_run(gemm=600.0, copy=2950.0, h2d=51.0)
    run.hosts[0].gpus = [GpuInfo(index=0, name="NVIDIA H100 80GB HBM3")]
    c = compare_baseline(builtin_baseline(), run, T)
    verdicts = {r.benchmark: (r.verdict, r.base) for r in c.rows if r.verdict != "missing"}
    assert verdicts == {
        "gemm": ("regression", 794.5),  # -24% of MAMF's 794.5
        "memory": ("unchanged", 2900.0),
        "transfer": ("unchanged", 50.5),
    }
    assert "has no figure" not in c.note


def test_builtin_matches_nothing_on_cpu() -> None:
    cpu = results(meas(0.09, device="cpu:0"), host="vm")
    cpu.hosts[0].gpus = []
    c = compare_baseline(builtin_baseline(), cpu, T)
    assert c.rows == [] and not c.findings
    assert "no figure for this run's devices (cpu)" in c.note and "NVIDIA H200" in c.note


def test_a_baseline_file_is_validated() -> None:
    with pytest.raises(ValueError):
        Baseline.model_validate({"format": "clusterbench-baseline", "name": "x", "entries": [{}]})
    assert HostInfo(hostname="x").gpus == []

"""`collectives.busbw_dip`: busbw that falls over a range of sizes, judged on outputs others
published (tests/data/nccl-tests/public, each file's source in its README): the three-node
all_reduce of NVIDIA/nccl#1453 is flagged; the healthy outputs of 2 to 80 ranks are not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterbench.analyses.nccl.nccl_tests import hosts, measurements, parse_texts
from clusterbench.benchmarks.collectives.findings import busbw_dip_findings, findings
from clusterbench.benchmarks.collectives.thresholds import CollectivesThresholds
from clusterbench.config import Thresholds
from clusterbench.schema import HostInfo, Measurement, ParamValue, Results, RunInfo, ToolInfo

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "nccl-tests" / "public"
MIB = 2**20
LIMITS = CollectivesThresholds()
_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+")


def _results(ms: list[Measurement], *, backend: str = "nccl", hosts_: list[HostInfo]) -> Results:
    run = RunInfo(
        id="r", started="2026-12-07T00:00:00Z", suite="nccl-tests", world_size=24,
        num_nodes=len(hosts_), backend=backend, command="clusterbench import nccl-tests",
    )  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, hosts=hosts_, measurements=ms)


def _busbw(size: int, value: float, *, ranks: int = 24, **extra: ParamValue) -> Measurement:
    params: dict[str, ParamValue] = {
        "op": "all_reduce", "size_bytes": size, "group": "world", "group_kind": "world",
        "group_size": ranks, "mode": "back_to_back", "dtype": "fp32", **extra,
    }  # fmt: skip
    return Measurement(
        benchmark="collectives", metric="busbw", value=value, unit="GB/s", params=params,
        rank=0, host="h1", device="cuda:0",
    )  # fmt: skip


def _issue_1453() -> list[Measurement]:
    """The size rows NVIDIA/nccl#1453 quotes, out of place, as its launcher printed them
    (`[0]` before every line and inside each row)."""
    out = []
    text = (PUBLIC / "all_reduce_24ranks_3nodes_rows_nccl_issue1453.txt").read_text()
    for line in text.splitlines():
        row = _ROW.match(line.replace("[0]", " "))
        if row:
            out.append(_busbw(int(row[1]), float(row[3])))
    return out


def test_the_three_node_cliff_of_nccl_issue_1453_is_flagged() -> None:
    ms = _issue_1453()
    assert ms[0].params["size_bytes"] == MIB and len(ms) == 10
    results = _results(ms, hosts_=[HostInfo(hostname=f"h{i}") for i in range(3)])
    (dip,) = busbw_dip_findings(results, ratio=LIMITS.busbw_dip_ratio, min_sizes=2)
    assert dip.id == "collectives.busbw_dip" and dip.severity == "warn"
    assert dip.evidence["best_gbps"] == 29.50 and dip.evidence["best_size_bytes"] == 32 * MIB
    assert dip.evidence["lowest_gbps"] == 4.09
    assert dip.evidence["dip_sizes_bytes"] == [64 * MIB, 128 * MIB, 256 * MIB, 512 * MIB]
    assert dip.evidence["back_at_bytes"] is None
    assert "falls from 29.5 GB/s at 32 MiB to 4.09 GB/s at 256 MiB" in dip.message
    assert "4 successive sizes, from 64 MiB to 512 MiB, up to the largest size" in dip.message
    # the same rows through every collectives finding, with the defaults of the thresholds
    assert [f.id for f in findings(results, Thresholds())] == ["collectives.busbw_dip"]


@pytest.mark.parametrize(
    "name",
    [
        "h100_five_ops_80ranks_10nodes.txt",
        "p5_all_reduce_16ranks_2nodes_tag_output.txt",
        "rccl_mi300x_all_reduce_16ranks_2nodes.txt",
        "v100_all_reduce_4nodes_old_format.txt",
        "rtx2080ti_g2_one_process_six_runs.txt",
    ],
)
def test_healthy_published_outputs_raise_no_dip(name: str) -> None:
    runs = parse_texts((PUBLIC / name).read_text())
    ms = [m for run in runs for m in measurements(run)]
    judged = [m for m in ms if m.metric == "busbw" and m.params.get("group_size", 0) >= 2]
    assert len(judged) >= 10  # the series are there to judge
    results = _results(ms, hosts_=hosts(runs))
    assert busbw_dip_findings(results, ratio=LIMITS.busbw_dip_ratio, min_sizes=2) == []


def test_a_dip_that_recovers_says_where_and_one_size_alone_is_not_a_dip() -> None:
    curve = [(MIB, 10.0), (2 * MIB, 20.0), (4 * MIB, 8.0), (8 * MIB, 9.0), (16 * MIB, 22.0)]
    hosts_ = [HostInfo(hostname="h1")]
    (dip,) = busbw_dip_findings(
        _results([_busbw(s, v) for s, v in curve], hosts_=hosts_), ratio=0.5, min_sizes=2
    )
    assert dip.evidence["back_at_bytes"] == 16 * MIB
    assert "from 4 MiB to 8 MiB; it is back to 22.0 GB/s at 16 MiB." in dip.message
    one = [(MIB, 10.0), (2 * MIB, 20.0), (4 * MIB, 8.0), (8 * MIB, 21.0), (16 * MIB, 22.0)]
    ms = [_busbw(s, v) for s, v in one]
    assert busbw_dip_findings(_results(ms, hosts_=hosts_), ratio=0.5, min_sizes=2) == []
    assert len(busbw_dip_findings(_results(ms, hosts_=hosts_), ratio=0.5, min_sizes=1)) == 1


def test_not_judged_on_gloo_on_one_rank_below_1_mib_or_other_modes() -> None:
    hosts_ = [HostInfo(hostname="h1")]
    cliff = [(MIB, 20.0), (2 * MIB, 2.0), (4 * MIB, 2.0)]

    def judged(ms: list[Measurement], backend: str = "nccl") -> list[str]:
        r = _results(ms, backend=backend, hosts_=hosts_)
        return [f.id for f in busbw_dip_findings(r, ratio=0.5, min_sizes=2)]

    assert judged([_busbw(s, v) for s, v in cliff]) == ["collectives.busbw_dip"]
    assert judged([_busbw(s, v) for s, v in cliff], backend="gloo") == []
    assert judged([_busbw(s, v, ranks=1) for s, v in cliff]) == []
    assert judged([_busbw(s, v, mode="blocking") for s, v in cliff]) == []
    small = [(128 * 1024, 20.0), (256 * 1024, 2.0), (512 * 1024, 2.0), (MIB, 25.0)]
    assert judged([_busbw(s, v) for s, v in small]) == []

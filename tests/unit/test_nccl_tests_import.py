"""nccl-tests' outputs read into measurements, on real outputs recorded on one H100
(tests/data/nccl-tests: the text and the -J JSON each binary wrote in one run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analysis.nccl_tests import hosts, measurements, parse_json, parse_text
from clusterbench.benchmarks.collectives.facts import bus_factor

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
BINARIES = {
    "all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "broadcast": "broadcast", "alltoall": "all_to_all", "sendrecv": "send_recv",
}  # fmt: skip


@pytest.mark.parametrize("binary", sorted(BINARIES))
def test_the_text_and_the_json_of_one_run_say_the_same(binary: str) -> None:
    text = parse_text((DATA / f"{binary}_perf.txt").read_text())
    json_ = parse_json((DATA / f"{binary}_perf.json").read_text())
    assert text.op == json_.op == BINARIES[binary]
    assert text.ranks == json_.ranks == 1 and text.hosts == json_.hosts == ["vm"]
    assert text.devices == json_.devices == ["NVIDIA H100 80GB HBM3"]
    assert text.version == "2.19.6" and text.out_of_bounds == json_.out_of_bounds == 0
    assert [r.size_bytes for r in text.rows] == [r.size_bytes for r in json_.rows]
    assert len(text.rows) == 24 and {r.dtype for r in text.rows} == {"fp32"}
    for t, j in zip(text.rows, json_.rows, strict=True):
        for mode in ("out_of_place", "in_place"):  # the text rounds to 2 decimals or 5 digits
            assert t.time_us[mode] == pytest.approx(j.time_us[mode], rel=1e-3, abs=0.006)
            assert t.algbw[mode] == pytest.approx(j.algbw[mode], rel=1e-3, abs=0.006)
            assert t.busbw[mode] == pytest.approx(j.busbw[mode], rel=1e-3, abs=0.006)
            assert t.wrong[mode] == j.wrong[mode]


@pytest.mark.parametrize("binary", sorted(BINARIES))
def test_busbw_is_algbw_times_our_bus_factor(binary: str) -> None:
    """nccl-tests' own busbw against the bus factor the collectives benchmark uses."""
    run = parse_json((DATA / f"{binary}_perf.json").read_text())
    factor = bus_factor(run.op, run.ranks)  # one rank: 0, but 1 for broadcast and send_recv
    for row in run.rows:
        assert row.busbw["out_of_place"] == pytest.approx(
            row.algbw["out_of_place"] * factor, rel=1e-5, abs=1e-6
        )


def test_the_measurements_use_clusterbench_s_metrics_and_units() -> None:
    run = parse_text((DATA / "alltoall_perf.txt").read_text())
    ms = measurements(run, host="gpu-17")
    assert {m.host for m in ms} == {"gpu-17"} and {m.benchmark for m in ms} == {"collectives"}
    units = {m.metric: m.unit for m in ms}
    assert units == {"latency_us": "us", "algbw": "GB/s", "busbw": "GB/s", "num_wrong": "count"}
    last = [m for m in ms if m.params.get("size_bytes") == 67108864]
    # out of place as clusterbench's back-to-back mode (how nccl-tests times by default)
    assert {m.params["mode"] for m in last} == {"back_to_back", "in_place"}
    assert all(m.params["op"] == "all_to_all" and m.params["source"] == "nccl-tests" for m in ms)
    # in place, alltoall checks nothing (N/A): no num_wrong for it, 0 out of place
    wrong = {m.params["mode"]: m.value for m in ms if m.metric == "num_wrong"}
    assert wrong == {"back_to_back": 0.0}


def test_a_bf16_sweep_and_what_is_not_an_nccl_tests_output() -> None:
    run = parse_text((DATA / "all_reduce_bf16.txt").read_text())
    assert [r.size_bytes for r in run.rows] == [1 << 20, 1 << 22, 1 << 24, 1 << 26]
    assert {r.dtype for r in run.rows} == {"bf16"}
    with pytest.raises(ValueError, match="not an nccl-tests output"):
        parse_text("hello\nworld\n")
    with pytest.raises(ValueError, match="not an nccl-tests size row"):
        header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong\n"
        parse_text(f"# Collective test starting: all_reduce_perf\n{header}  8  2  float  sum\n")
    with pytest.raises(ValueError, match="not an nccl-tests JSON output"):
        parse_json('{"version": 3}')


def test_the_timing_modes_of_real_runs() -> None:
    """-z 1 (blocking) and -G 5 (CUDA graphs), recorded on the H100: the out-of-place columns
    take clusterbench's mode of that name; the graph run's text and JSON agree."""
    blocking = parse_text((DATA / "all_reduce_blocking.txt").read_text())
    graph_text = parse_text((DATA / "all_reduce_graph.txt").read_text())
    graph_json = parse_json((DATA / "all_reduce_graph.json").read_text())
    default = parse_text((DATA / "all_reduce_perf.txt").read_text())
    assert (blocking.timing, graph_text.timing, graph_json.timing) == ("blocking", "graph", "graph")
    assert default.timing == "back_to_back"
    modes = {m.params["mode"] for m in measurements(blocking)}
    assert modes == {"blocking", "in_place"}
    assert {m.params["mode"] for m in measurements(graph_json)} == {"graph", "in_place"}
    for t, j in zip(graph_text.rows, graph_json.rows, strict=True):
        assert t.time_us["out_of_place"] == pytest.approx(j.time_us["out_of_place"], abs=0.006)


def test_a_sweep_of_every_reduction_keys_each_by_its_redop() -> None:
    """reduce_perf -o all (real): six reductions at each size; redop joins the params so that
    no two measurements share a key; the root (0 throughout) does not."""
    run = parse_text((DATA / "reduce_all_ops.txt").read_text())
    assert run.op == "reduce" and len(run.rows) == 12
    assert [r.redop for r in run.rows[::2]] == ["sum", "prod", "max", "min", "avg", "mulsum"]
    assert {r.root for r in run.rows} == {0}
    ms = measurements(run)
    keys = [(m.metric, tuple(sorted(m.params.items()))) for m in ms]
    assert len(keys) == len(set(keys)) == 12 * 2 * 3 + 2  # num_wrong: out of place, in place
    assert {m.params.get("redop") for m in ms if m.metric == "busbw"} == {
        "sum", "prod", "max", "min", "avg", "mulsum"
    }  # fmt: skip
    assert not any("root" in m.params for m in ms)


def test_old_twelve_column_rows_without_root() -> None:
    """Versions before the root column (2.0-2.10) print 12 cells a row and 'error' (a max
    error, not a count) for #wrong: rows from a real output with the root cell taken out."""
    lines = (DATA / "all_reduce_perf.txt").read_text().splitlines()
    old = []
    for line in lines:
        cells = line.split()
        if line.startswith("#") and "redop" in line and "root" in line:
            line = line.replace(" root", "").replace("#wrong", " error")
        elif cells and cells[0].isdigit() and len(cells) == 13:
            line = " ".join(cells[:4] + cells[5:])
        old.append(line)
    run = parse_text("\n".join(old))
    new = parse_text("\n".join(lines))
    assert [r.busbw for r in run.rows] == [r.busbw for r in new.rows]
    assert all(r.root == -1 and r.wrong == {"out_of_place": None, "in_place": None}
               for r in run.rows)  # fmt: skip


def test_the_device_lines_of_several_ranks_and_hosts() -> None:
    """A real one-GPU output with the device lines of 8 ranks on two hosts, written as
    nccl-tests prints them for each rank (no multi-GPU machine was lent to record one): the
    ranks, hosts, device indices and PCI addresses, rank 0's host on the measurements."""
    lines = (DATA / "all_reduce_perf.txt").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("#  Rank  0"))
    ranks = [
        f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on {host:>10} device {r % 4:2d} "
        f"[0000:{0x18 + r % 4:02x}:00] NVIDIA H100 80GB HBM3"
        for r, host in enumerate(["gpu-a"] * 4 + ["gpu-b"] * 4)
    ]
    run = parse_text("\n".join([*lines[:at], *ranks, *lines[at + 1 :]]))
    assert run.ranks == 8 and run.hosts == ["gpu-a"] * 4 + ["gpu-b"] * 4
    assert run.device_indices == [0, 1, 2, 3] * 2 and run.pci_bus_ids[5] == "0000:19:00"
    ms = measurements(run)
    assert {m.host for m in ms} == {"gpu-a"} and {m.params["group_size"] for m in ms} == {8}
    (a, b) = hosts([run])
    assert (a.hostname, b.hostname) == ("gpu-a", "gpu-b")
    assert [g.index for g in b.gpus] == [0, 1, 2, 3]

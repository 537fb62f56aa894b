"""nccl-tests' outputs read into measurements, on real outputs recorded on one H100
(tests/data/nccl-tests: the text and the -J JSON each binary wrote in one run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.analyses.nccl.nccl_tests import (
    hosts,
    measurements,
    parse_json,
    parse_text,
    ranks_from_bus_factor,
)
from clusterbench.cli import app
from clusterbench.collective_facts import bus_factor
from clusterbench.schema import load_results

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
    with pytest.raises(ValueError, match="not an nccl-tests JSON output: it has no 'args'"):
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


def _two_gpus_text(*, device_lines: bool, busbw: bool = True) -> str:
    """The real one-GPU all_reduce output with the header nccl-tests prints for ``-g 2`` (one
    process, one thread, two GPUs: ``# nThread 1 nGpus 2``; util.cu writeDeviceReport prints a
    device line per GPU, the second on device 1, its PCI address made up here), or without
    its device lines (the "Using devices" block empty, as in the output reported in the
    issue); ``busbw``: each row's busbw rewritten as nccl-tests computes it for two ranks
    (algbw x 2(n-1)/n = algbw), else left as one rank's (0)."""
    out = []
    for line in (DATA / "all_reduce_perf.txt").read_text().splitlines():
        cells = line.split()
        if line.startswith("# nThread 1 nGpus 1 "):
            line = line.replace("nGpus 1 ", "nGpus 2 ")
        elif line.startswith("#  Rank  0"):
            second = line.replace("Rank  0", "Rank  1").replace("device  0", "device  1")
            line = f"{line}\n{second.replace('0000:00:06', '0000:00:07')}"
            if not device_lines:
                continue
        elif busbw and cells and cells[0].isdigit():
            factor = bus_factor("all_reduce", 2)
            cells[7] = f"{float(cells[6]) * factor:.2f}"
            cells[11] = f"{float(cells[10]) * factor:.2f}"
            line = "  ".join(cells)
        out.append(line)
    return "\n".join(out) + "\n"


def _two_gpus_json(*, processes: int = 1) -> str:
    """The real one-GPU JSON with ``config`` as nccl-tests writes it for ``-g 2``: ngpus 2 and
    one ``devices`` entry per process (util.cu parses only each process's first device line
    into it), busbw as for the ranks it then has (all_reduce: algbw x 2(n-1)/n)."""
    data = json.loads((DATA / "all_reduce_perf.json").read_text())
    data["config"]["ngpus"] = 2
    first = data["config"]["devices"][0]
    data["config"]["devices"] = [
        {**first, "rank": 2 * p, "pid": first["pid"] + p, "hostname": f"gpu-{p}"}
        for p in range(processes)
    ]
    factor = bus_factor("all_reduce", 2 * processes)
    for row in data["results"]:
        for place in ("out_of_place", "in_place"):
            row[place]["bus_bw"] = row[place]["alg_bw"] * factor
    return json.dumps(data)


def test_one_process_with_two_gpus_is_two_ranks() -> None:
    """``-g 2`` in one process: two ranks from the header and the device lines, and from the
    header alone where the device lines are absent; busbw and algbw as printed."""
    real = parse_text((DATA / "all_reduce_perf.txt").read_text())
    listed = parse_text(_two_gpus_text(device_lines=True))
    assert (listed.ranks, listed.num_processes, listed.gpus_per_thread) == (2, 1, 2)
    assert listed.hosts == ["vm", "vm"] and listed.device_indices == [0, 1]
    bare = parse_text(_two_gpus_text(device_lines=False))
    assert (bare.ranks, bare.num_processes, bare.hosts) == (2, 1, [])
    for run in (listed, bare):
        assert ranks_from_bus_factor(run) == 2
        ms = measurements(run)
        assert {m.params["group_size"] for m in ms} == {2}
        busbw = [m.value for m in ms if m.metric == "busbw" and m.params["mode"] == "back_to_back"]
        assert busbw == [r.algbw["out_of_place"] for r in real.rows]  # as printed: F = 1
    assert {m.host for m in measurements(bare)} == {"unknown"}
    # the header changed alone: two ranks, but the rows' busbw is one rank's
    header_only = parse_text(_two_gpus_text(device_lines=True, busbw=False))
    assert header_only.ranks == 2 and ranks_from_bus_factor(header_only) == 1


@pytest.mark.parametrize(("processes", "ranks"), [(1, 2), (2, 4)])
def test_the_json_of_two_gpus_a_process_counts_every_rank(processes: int, ranks: int) -> None:
    run = parse_json(_two_gpus_json(processes=processes))
    assert (run.ranks, run.num_processes, run.gpus_per_thread) == (ranks, processes, 2)
    assert ranks_from_bus_factor(run) == ranks
    assert run.hosts == [f"gpu-{p}" for p in range(processes)]


def _cli(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["import", "nccl-tests", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_the_import_of_two_gpus_is_world_size_two(tmp_path: Path) -> None:
    two = tmp_path / "two.txt"
    two.write_text(_two_gpus_text(device_lines=False))
    code, out, err = _cli(two, "-o", tmp_path / "run", "--no-history")
    assert code == 0, err
    results = load_results(tmp_path / "run")
    assert results.run.world_size == 2
    assert "world size 2" in out and "(2 ranks, fp32)" in out
    assert {m.params["group_size"] for m in results.measurements} == {2}
    assert "bus factor" not in err
    # the header's two GPUs with one rank's busbw: imported as two, with a warning
    header_only = tmp_path / "header_only.txt"
    header_only.write_text(_two_gpus_text(device_lines=True, busbw=False))
    code, _, err = _cli(header_only, "-o", tmp_path / "run2", "--no-history")
    assert code == 0 and f"{header_only}: all_reduce: the output names 2 rank(s)" in err
    assert "bus factor of 1" in err


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("trace.json", '{"traceEvents": [], "schemaVersion": 1}',
         "not an nccl-tests JSON output: it has no 'args' and no 'results' (nccl-tests' -J "
         "writes both; this file's keys: schemaVersion, traceEvents)"),
        ("broken.json", '{"args": ["all_reduce_perf"], "results": [',
         "not an nccl-tests JSON output: not valid JSON (Expecting value at line 1, column 43)"),
        ("iperf3.txt", "Connecting to host 10.0.0.2, port 5201\n[  5] 0.00-10.00 sec  1.09 GB\n",
         "not an nccl-tests output: no '# Collective test starting' line with size rows after it"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_nccl_tests_output_is_one_sentence_naming_it(
    tmp_path: Path, name: str, content: str, says: str
) -> None:
    bad = tmp_path / name
    bad.write_text(content)
    code, _, err = _cli(bad, "-o", tmp_path / "run", "--no-history")
    assert code == 2
    assert err.strip() == f"clusterbench: error: {bad}: {says}"
    assert not (tmp_path / "run").exists()

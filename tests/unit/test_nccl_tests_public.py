"""nccl-tests' and rccl-tests' outputs that others recorded on several GPUs and nodes and
published (tests/data/nccl-tests/public, each file's source in its README), read as the
importer reads them; every expected figure is as the file prints it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterbench.analyses.nccl.nccl_tests import (
    NcclTestsRun,
    hosts,
    measurements,
    parse_text,
    parse_texts,
    ranks_from_bus_factor,
)

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "nccl-tests" / "public"


def _runs(name: str) -> list[NcclTestsRun]:
    return parse_texts((PUBLIC / name).read_text())


def _row(run: NcclTestsRun, size: int) -> tuple[float, ...]:
    """algbw and busbw out of place, then in place, of the row of that size."""
    (row,) = [r for r in run.rows if r.size_bytes == size]
    return (row.algbw["out_of_place"], row.busbw["out_of_place"], row.algbw["in_place"],
            row.busbw["in_place"])  # fmt: skip


def test_eighty_ranks_on_ten_nodes_five_ops_in_one_log() -> None:
    """nccl-tests 2.17.8, srun of 80 processes (one GPU each) on 10 hosts of 8 H100s, five
    binaries one after another; each prints its version line before its start line."""
    runs = _runs("h100_five_ops_80ranks_10nodes.txt")
    ops = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]
    assert [r.op for r in runs] == ops
    for run in runs:
        assert (run.ranks, run.num_processes, run.gpus_per_thread) == (80, 80, 1)
        assert len(run.rows) == 10 and {r.dtype for r in run.rows} == {"fp64"}
        assert len(set(run.hosts)) == 10 and run.hosts[0] == "cnode3-002"
        assert run.hosts[79] == "cnode3-011" and run.device_indices[79] == 7
        assert run.version == "2.17.8" and run.nccl_version == "2.29.2"
    all_reduce, *_, send_recv = runs
    assert _row(all_reduce, 33554432) == (42.02, 82.99, 39.15, 77.32)
    assert _row(all_reduce, 17179869184) == (162.30, 320.54, 163.39, 322.70)
    assert _row(send_recv, 17179869184) == (15.22, 15.22, 15.23, 15.23)
    assert [r.avg_busbw for r in runs] == [265.631, 218.677, 216.683, 47.1472, 15.1671]
    assert all(ranks_from_bus_factor(r) == 80 for r in runs[:4])
    assert [h.hostname for h in hosts(runs)][:2] == ["cnode3-002", "cnode3-003"]
    assert len(hosts(runs)) == 10 and all(len(h.gpus) == 8 for h in hosts(runs))


def test_mpirun_tag_output_inside_the_size_rows() -> None:
    """Open MPI's --tag-output of 16 ranks on 2 nodes (8 H100s each), NCCL_DEBUG=INFO lines of
    every rank around the table, and '[1,0]<stdout>:' also inside each size row (rank 0
    wrote the row in pieces); it crashed the importer ('-1[1,0]<stdout>:' read as root)."""
    (run,) = _runs("p5_all_reduce_16ranks_2nodes_tag_output.txt")
    assert run.op == "all_reduce" and (run.ranks, run.num_processes) == (16, 16)
    assert len(run.rows) == 32 and run.rows[0].size_bytes == 8
    assert sorted(set(run.hosts)) == ["test-nccl-worker-0", "test-nccl-worker-1"]
    assert run.rows[0].root == -1 and run.rows[0].time_us["out_of_place"] == 85.14
    assert _row(run, 1048576) == (8.55, 16.03, 8.58, 16.08)
    assert _row(run, 17179869184) == (259.88, 487.27, 259.74, 487.01)
    assert run.avg_busbw == 124.196 and run.out_of_bounds == 0
    assert ranks_from_bus_factor(run) == 16
    assert {m.params["group_size"] for m in measurements(run)} == {16}


def test_a_launcher_that_puts_the_rank_before_every_piece_of_a_line() -> None:
    """The form of NVIDIA/nccl#1453's log (all_reduce_24ranks_3nodes_rows_nccl_issue1453.txt):
    `[0]` before each line and before each piece of a size row (`-1[0]    1626.5 ...`).  The
    p5 output above, its Open MPI tags put in that form, reads as the original does."""
    plain = [
        _OMPI_TAG.sub("", line)
        for line in (PUBLIC / "p5_all_reduce_16ranks_2nodes_tag_output.txt")
        .read_text()
        .splitlines()
    ]
    ranked = []
    for line in plain:
        row = _ROW_PIECES.match(line)
        ranked.append("[0] " + ("[0]".join(row.groups()) if row else line))
    assert sum(line.count("-1[0]") for line in ranked) == 32  # each size row, in pieces
    (original,) = _runs("p5_all_reduce_16ranks_2nodes_tag_output.txt")
    (run,) = parse_texts("\n".join(ranked))
    assert (run.op, run.ranks, run.rows) == (original.op, original.ranks, original.rows)
    # the quoted rows of that issue read as rows, not as root "-1[0]"
    quoted = (PUBLIC / "all_reduce_24ranks_3nodes_rows_nccl_issue1453.txt").read_text()
    table = "# Collective test starting: all_reduce_perf\n" + _HEADER + quoted
    (issue,) = parse_texts(table)
    assert [r.size_bytes for r in issue.rows][:2] == [1048576, 2097152]
    assert issue.rows[5].busbw["out_of_place"] == 29.50 and len(issue.rows) == 10
    assert ranks_from_bus_factor(issue) == 24  # three nodes of 8 GPUs, as the issue says


_OMPI_TAG = re.compile(r"\[1,\d+\]<std\w+>:")
_ROW_PIECES = re.compile(
    r"^(\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+)(\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\S+)"
    r"(\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+\S+)\s*$"
)
_HEADER = (
    "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
)


def test_rccl_tests_on_two_nodes_without_a_binary_name() -> None:
    """rccl-tests (develop:448c4c7), 16 MI300X ranks on 2 nodes: device lines without Group,
    RCCL's version lines, and no line naming the binary; the rows can only be all_reduce
    (a reduction, no root, count x 4 bytes = size, busbw / algbw = 2(16-1)/16)."""
    run = parse_text((PUBLIC / "rccl_mi300x_all_reduce_16ranks_2nodes.txt").read_text())
    assert run.op == "all_reduce" and run.ranks == 16 and len(run.rows) == 32
    assert run.hosts == ["gpu-53"] * 8 + ["gpu-56"] * 8
    assert run.pci_bus_ids[15] == "0000:e5:00.0" and run.devices[0] == "AMD Instinct MI300X"
    assert _row(run, 8589934592) == (189.94, 356.14, 189.87, 356.00)
    assert run.avg_busbw == 92.3318 and ranks_from_bus_factor(run) == 16
    assert [h.hostname for h in hosts([run])] == ["gpu-53", "gpu-56"]


def test_an_old_output_of_four_nodes() -> None:
    """nccl-tests of 2020 (no Group, no root column, 'error' instead of '#wrong', no line
    naming the binary), 4 processes on 4 hosts, one V100 each."""
    run = parse_text((PUBLIC / "v100_all_reduce_4nodes_old_format.txt").read_text())
    assert run.op == "all_reduce" and (run.ranks, run.num_processes) == (4, 4)
    assert len(run.rows) == 17 and len(set(run.hosts)) == 4
    assert run.rows[0].size_bytes == 8192 and run.rows[-1].size_bytes == 536870912
    assert _row(run, 536870912) == (3.35, 5.03, 3.36, 5.04)
    assert all(r.wrong == {"out_of_place": None, "in_place": None} for r in run.rows)
    assert run.avg_busbw == 2.41523 and ranks_from_bus_factor(run) == 4


def test_a_console_log_of_six_runs_two_gpus_in_one_process() -> None:
    """A shell session: each binary's command line, then its output (no start lines), five
    with -g 2 (one process, two RTX 2080 Ti) and one reduce with one GPU; each output is
    read with its own binary (the op of each was the next one's, and the last lost)."""
    runs = _runs("rtx2080ti_g2_one_process_six_runs.txt")
    ops = ["all_reduce", "all_gather", "broadcast", "reduce", "reduce", "all_to_all"]
    assert [r.op for r in runs] == ops
    assert [r.ranks for r in runs] == [2, 2, 2, 2, 1, 2]
    assert [r.gpus_per_thread for r in runs] == [2, 2, 2, 2, 1, 2]
    assert all(r.num_processes == 1 and len(r.rows) == 28 for r in runs)
    assert [r.rows[0].size_bytes for r in runs] == [8, 0, 8, 8, 8, 0]
    assert _row(runs[0], 1073741824) == (4.00, 4.00, 4.00, 4.00)
    assert _row(runs[1], 1073741824) == (7.58, 3.79, 7.69, 3.84)
    assert _row(runs[5], 1073741824) == (9.21, 4.61, 9.45, 4.73)
    assert [r.avg_busbw for r in runs] == [2.05774, 1.6651, 5.07658, 5.23248, 202818, 2.06935]
    assert ranks_from_bus_factor(runs[0]) == ranks_from_bus_factor(runs[5]) == 2
    assert runs[0].hosts == ["autodl-container-xxxxx"] * 2


def test_an_output_that_names_no_binary_and_is_no_clear_all_reduce() -> None:
    """The old V100 output's rows with the busbw of send_recv (= algbw): not all_reduce on
    4 ranks, so the importer says what is missing rather than guess."""
    lines = (PUBLIC / "v100_all_reduce_4nodes_old_format.txt").read_text().splitlines()
    edited = []
    for line in lines:
        cells = line.split()
        if cells and cells[0].isdigit():
            cells[6], cells[10] = cells[5], cells[9]
            line = "  ".join(cells)
        edited.append(line)
    with pytest.raises(ValueError, match="names no binary"):
        parse_text("\n".join(edited))
    run = parse_text("./build/sendrecv_perf -b 8K -e 512M\n" + "\n".join(edited))
    assert run.op == "send_recv" and run.ranks == 4

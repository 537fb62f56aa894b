"""``clusterbench history``'s table of runs: a run's folder is what one copies, so it is never
broken mid-name; when the folders do not fit beside the table, they follow it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from clusterbench.history_db import RunRow
from clusterbench.report.history import render_runs

LONG = "/home/user/projects/cluster-acceptance/clusterbench-runs/20261206T144414Z-gpu-node-017"


def _row(run_id: str, run_dir: str) -> RunRow:
    return RunRow(
        id=run_id, started="2026-12-06T14:44:14+00:00", finished=None, suite="quick",
        status="completed", hosts=["gpu-node-017"], gpu_models=["NVIDIA H100 80GB HBM3"],
        versions={}, world_size=8, num_nodes=1, backend="nccl", run_dir=run_dir,
        tool_version="0", num_measurements=412, num_fail=0, num_warn=1,
    )  # fmt: skip


def _render(rows: list[RunRow], width: int, cwd: Path | None = None) -> str:
    buf = io.StringIO()
    render_runs(rows, Console(file=buf, width=width), where="history.sqlite", cwd=cwd)
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 120, 200])
def test_every_folder_is_on_one_line_whole(width: int) -> None:
    rows = [_row("20261206T144414Z-gpu-node-017", LONG), _row("short", "/data/r1")]
    out = _render(rows, width)
    lines = out.splitlines()
    for folder in (LONG, "/data/r1"):
        assert any(folder in line for line in lines), out
    assert "…" not in "".join(line for line in lines if "/" in line), out


def test_folders_that_fit_stay_in_the_table() -> None:
    out = _render([_row("20261206T144414Z-node", "/runs/a")], 200)
    assert "folder" in out.splitlines()[1] and "folders:" not in out
    row = next(line for line in out.splitlines() if line.startswith("2026-12-06"))
    assert row.rstrip().endswith("/runs/a")


def test_folders_that_do_not_fit_follow_the_table() -> None:
    out = _render([_row("20261206T144414Z-gpu-node-017", LONG), _row("r2", "/r2")], 80)
    lines = out.splitlines()
    at = lines.index("folders:")
    assert "folder" not in lines[1]
    assert lines[at + 1] == f"  20261206T144414Z-gpu-node-017  {LONG}"
    assert lines[at + 2].split() == ["r2", "/r2"]


def test_a_folder_inside_the_working_folder_is_shown_relative() -> None:
    out = _render([_row("r1", "/srv/x/clusterbench-runs/r1")], 200, cwd=Path("/srv/x"))
    assert "clusterbench-runs/r1" in out and "/srv/x" not in out

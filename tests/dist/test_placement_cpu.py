"""Placement facts of real CPU runs on one host: clusterbench's own launch and ranks that join
with the environment srun gives each task; every rank recorded, no warning on a block layout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import cpu_run

from clusterbench import load_results
from clusterbench.analyses.placement.facts import placements
from clusterbench.doctor.numa_cpu import format_cpulist
from clusterbench.report.markdown import render_markdown
from clusterbench.analyses.placement.section import section
from clusterbench.schema import Results
from tests.pages import analysis

pytestmark = pytest.mark.dist

AFFINITY = format_cpulist(os.sched_getaffinity(0))
"""The workers inherit this process's CPU affinity: what each rank must have recorded."""


def _placement_findings(results: Results) -> dict[str, str]:
    return {f.id: f.severity for f in results.findings if f.id.startswith("placement.")}


def _check_block(results: Results, *, world: int, launcher: str) -> None:
    ranks = placements(results)
    assert [p.rank for p in ranks] == list(range(world))
    assert [p.local_rank for p in ranks] == list(range(world))
    assert {p.host for p in ranks} == {results.hosts[0].hostname}
    assert all(p.node == 0 and p.gpu is None and p.cpus == AFFINITY for p in ranks)
    assert all(p.cpu_numa_nodes for p in ranks)  # the affinity's NUMA node(s), from sysfs
    [facts] = [f for f in results.findings if f.id == "doctor.placement"]
    assert facts.evidence["launcher"] == launcher
    assert _placement_findings(results) == {"placement.layout": "info"}  # no false warning
    [layout] = [f for f in results.findings if f.id == "placement.layout"]
    assert layout.evidence["order"] == "block" and layout.fix == ""


def test_own_launch_records_every_rank_and_warns_of_nothing(tmp_path: Path) -> None:
    results = cpu_run(tmp_path / "run", "doctor", nproc=3)
    _check_block(results, world=3, launcher="clusterbench")
    table = section(results, analysis(results))
    assert table is not None
    text = render_markdown(analysis(results, [table]))
    assert "placement: where each rank ran" in text
    assert f"| 2 | {results.hosts[0].hostname} | 2 | - | - | {AFFINITY} |" in text


def test_ranks_joined_under_the_srun_task_environment(tmp_path: Path) -> None:
    out = tmp_path / "run"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    procs = []
    for rank in range(2):
        env = {**base, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
               "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2",
               "SLURM_JOB_ID": "4243", "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1"}  # fmt: skip
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "clusterbench", "run", "--device", "cpu", "--only", "doctor",
             "--out", str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode in (0, 1), err[-2000:]
    results = load_results(out)
    assert results.run.status == "completed"
    _check_block(results, world=2, launcher="slurm")

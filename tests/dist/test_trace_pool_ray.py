"""``read_traces(..., ray_address=...)``: the traces read as Ray tasks on a real local Ray
head equal the pool's reading of them, in the files' order, a file that cannot be read a
TraceError in its slot; and ``clusterbench analyze --ray`` writes the run the pool writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterbench import load_results
from clusterbench.analyses.trace.file import RankTrace, TraceError
from clusterbench.analyses.trace.pool import read_traces
from tests.dist.test_ray_cpu import _free_port, _ray_start, _stop

pytest.importorskip("ray", reason="needs Ray: pip install 'clusterbench[ray]'")

pytestmark = [pytest.mark.dist, pytest.mark.ray]

TRACES = sorted((Path(__file__).parents[1] / "data" / "traces").rglob("*.json.gz"))
SLOW = Path(__file__).parents[1] / "data" / "traces" / "cpu-gloo-slow-rank"


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """One Ray node of two CPUs, as ``ray start --head`` starts it."""
    temp = Path(tempfile.mkdtemp(prefix="cb-rp-"))  # short: Ray's socket paths live under it
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    head = _ray_start(["--head", f"--port={port}", "--include-dashboard=false",
                       "--disable-usage-stats", f"--temp-dir={temp}", "--num-cpus=2",
                       "--num-gpus=0", "--object-store-memory=100000000"],
                      temp / "head.log", env)  # fmt: skip
    try:
        yield f"127.0.0.1:{port}"
    finally:
        _stop(head)
        shutil.rmtree(temp, ignore_errors=True)


def _same(a: RankTrace | TraceError, b: RankTrace | TraceError) -> bool:
    if isinstance(a, TraceError) or isinstance(b, TraceError):
        return type(a) is type(b) and str(a) == str(b)
    return a == b


def test_ray_tasks_read_what_the_pool_reads(ray_head: str, tmp_path: Path) -> None:
    bad = tmp_path / "rank-7.json"
    bad.write_text('{"traceEvents": [{"ph": "X"')
    files = [*TRACES[::-1], bad]
    seen: list[int] = []
    on_ray = read_traces(files, ray_address=ray_head, progress=lambda n, _, __: seen.append(n))
    pooled = read_traces(files, jobs=2)
    assert len(on_ray) == len(files) and sorted(seen) == list(range(1, len(files) + 1))
    assert all(_same(a, b) for a, b in zip(on_ray, pooled, strict=True))
    assert isinstance(on_ray[-1], TraceError) and str(on_ray[-1]).startswith(f"{bad}: ")
    assert sum(isinstance(r, RankTrace) for r in on_ray) >= len(TRACES) - 1


def test_analyze_on_ray_is_the_pools_run(ray_head: str, tmp_path: Path) -> None:
    runs = {}
    for name, how in (("ray", ["--ray", ray_head]), ("pool", ["--jobs", "2"])):
        done = subprocess.run(
            [sys.executable, "-m", "clusterbench", "analyze", str(SLOW), "-o",
             str(tmp_path / name), "--no-history", *how],
            capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr[-3000:]
        runs[name] = load_results(tmp_path / name / "results.json")
    key = [(m.metric, m.rank, sorted(m.params.items()), m.value) for m in runs["ray"].measurements]
    assert key == [
        (m.metric, m.rank, sorted(m.params.items()), m.value) for m in runs["pool"].measurements
    ]
    assert [f.id for f in runs["ray"].findings] == [f.id for f in runs["pool"].findings]

"""``read_traces`` in this process (``jobs=1``, and one file): each file as ``read_trace`` reads
it, in the files' order, a bad one a TraceError in its slot; what a pool worker sends back is
small.  The pool itself (processes) is tested in tests/integration/test_trace_pool.py."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from clusterbench.analyses.trace.file import RankTrace, TraceError, read_trace
from clusterbench.analyses.trace.pool import default_jobs, read_traces

TRACES = sorted((Path(__file__).parents[1] / "data" / "traces").rglob("*.json.gz"))


def test_in_process_each_file_as_read_trace_reads_it(tmp_path: Path) -> None:
    bad = tmp_path / "rank-9.json"
    bad.write_text('{"traceEvents": [')
    files = [TRACES[2], bad, TRACES[0]]
    seen: list[tuple[int, int, Path]] = []
    out = read_traces(files, jobs=1, progress=lambda *args: seen.append(args))
    assert out[0] == read_trace(TRACES[2]) and out[2] == read_trace(TRACES[0])
    assert isinstance(out[1], TraceError) and str(out[1]).startswith(f"{bad}: cannot read")
    assert seen == [(1, 3, files[0]), (2, 3, files[1]), (3, 3, files[2])]


def test_one_file_is_read_here_with_its_default_rank() -> None:
    one = next(p for p in TRACES if p.parent.name == "lightning-1proc")
    (missing,) = read_traces([one], jobs=8)
    assert isinstance(missing, TraceError) and "no rank" in str(missing)
    (read,) = read_traces([one], jobs=8, default_rank=0)
    assert isinstance(read, RankTrace) and read.rank == 0


def test_small_traces_are_read_here_by_default() -> None:
    """A pool's start costs more than reading a few MB: no process is started (this tier
    refuses them), and every file is read."""
    assert sum(p.stat().st_size for p in TRACES) < 16 << 20
    out = read_traces(TRACES)
    assert [r.path for r in out if isinstance(r, RankTrace)] == [
        p for p in TRACES if p.parent.name != "lightning-1proc"
    ]


def test_jobs_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="jobs must be 1 or more, not 0"):
        read_traces(TRACES, jobs=0)
    assert default_jobs() >= 1


@pytest.mark.parametrize("path", TRACES[:4], ids=lambda p: p.parent.name)
def test_a_read_trace_pickles_as_its_flat_arrays(path: Path) -> None:
    """What crosses back from a worker: about 22 bytes per activity (two float64, two int8,
    one int32) and the names once each, not an object per activity."""
    trace = read_trace(path)
    size = len(pickle.dumps(trace, protocol=pickle.HIGHEST_PROTOCOL))
    names = sum(len(n.encode()) + 8 for n in trace.name_table)
    assert size <= 22 * len(trace.starts) + names + 2_000
    assert pickle.loads(pickle.dumps(trace)) == trace

"""The pool of processes that reads many ranks' traces (``read_traces`` with ``jobs`` > 1): the
same RankTraces as a read in this process, in the files' order; a file that cannot be read, and
a file whose reading process is killed mid-read, each a TraceError naming it in its slot, the
other files read."""

from __future__ import annotations

import gzip
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from clusterbench.analyses.trace.file import RankTrace, TraceError
from clusterbench.analyses.trace.pool import read_traces

TRACES = sorted((Path(__file__).parents[1] / "data" / "traces").rglob("*.json.gz"))


def _same(a: RankTrace | TraceError, b: RankTrace | TraceError) -> bool:
    if isinstance(a, TraceError) or isinstance(b, TraceError):
        return type(a) is type(b) and str(a) == str(b)
    return a == b


def test_the_pool_reads_what_one_process_reads_in_the_files_order() -> None:
    files = TRACES[::-1]  # not the order they finish in
    alone = read_traces(files, jobs=1)
    seen: list[tuple[int, int, Path]] = []
    pooled = read_traces(files, jobs=2, progress=lambda *args: seen.append(args))
    assert len(pooled) == len(files)
    assert all(_same(a, b) for a, b in zip(alone, pooled, strict=True))
    assert [p.path for p in pooled if isinstance(p, RankTrace)] == [
        f for f, a in zip(files, alone, strict=True) if isinstance(a, RankTrace)
    ]
    assert sum(isinstance(p, RankTrace) for p in pooled) >= len(files) - 1
    assert sorted(n for n, _, _ in seen) == list(range(1, len(files) + 1))
    assert {total for _, total, _ in seen} == {len(files)}
    assert sorted(map(str, (p for _, _, p in seen))) == sorted(map(str, files))


def test_a_bad_file_is_a_trace_error_in_its_slot(tmp_path: Path) -> None:
    bad = tmp_path / "rank-1.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "k", "cat": "kernel", "ts": 1')
    files = [TRACES[0], bad, TRACES[1]]
    out = read_traces(files, jobs=2)
    assert isinstance(out[0], RankTrace) and isinstance(out[2], RankTrace)
    assert isinstance(out[1], TraceError)
    assert str(out[1]).startswith(f"{bad}: cannot read it as a trace (truncated")


def _endless_trace(path: Path) -> None:
    """A gzip trace of some 500 MB of events in a few hundred KB: one compressed member of
    events written again and again (gzip reads its members one after another), so that
    reading it takes seconds."""
    event = b',\n{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2, "args": {}}'
    body = gzip.compress(event * 20_000, compresslevel=9)
    with path.open("wb") as f:
        f.write(gzip.compress(b'{"distributedInfo": {"rank": 1}, "traceEvents": [{}'))
        for _ in range(340):
            f.write(body)
        f.write(gzip.compress(b"]}"))


def _readers_of(path: Path) -> list[int]:
    """This process's descendants that hold ``path`` open."""
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            fds = os.listdir(f"/proc/{child.pid}/fd")
            if any(os.readlink(f"/proc/{child.pid}/fd/{fd}") == str(path) for fd in fds):
                out.append(child.pid)
        except OSError:
            continue
    return out


def _kill_each_reader(path: Path, stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL every process that opens ``path``, while it reads it."""
    while not stop.is_set():
        for pid in _readers_of(path):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.02)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds the reader in /proc")
def test_a_killed_reader_costs_its_file_only(tmp_path: Path) -> None:
    endless = tmp_path / "rank-1.json.gz"
    _endless_trace(endless)
    stop, killed = threading.Event(), []  # type: ignore[var-annotated]
    killer = threading.Thread(target=_kill_each_reader, args=(endless, stop, killed), daemon=True)
    killer.start()
    try:
        files = [TRACES[0], endless, TRACES[1], TRACES[2]]
        out = read_traces(files, jobs=2)
    finally:
        stop.set()
        killer.join(timeout=5)
    assert len(set(killed)) == 2, "killed in the pool, then read alone and killed again"
    assert isinstance(out[1], TraceError)
    assert str(out[1]) == (
        f"{endless}: the process reading it ended abruptly (killed, or out of memory)"
    )
    expected = read_traces([TRACES[0], TRACES[1], TRACES[2]], jobs=1)
    assert all(_same(a, b) for a, b in zip([out[0], out[2], out[3]], expected, strict=True))

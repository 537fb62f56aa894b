"""A trace in the Chrome trace format's array form (a JSON array of events, as torch.profiler
wrote it before PyTorch 1.8.0) is read as the same events in ``traceEvents`` are; its rank
comes from a worker name ``workerN`` where nothing else names one, never before
``distributedInfo``, ``rank-N`` or the one file given, and never from a host name."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from clusterbench.analyses.trace import file as trace_file
from clusterbench.pipeline.imported import analyze_traces

SLOW = Path(__file__).parents[1] / "data" / "traces" / "cpu-gloo-slow-rank"
"""Two gloo ranks, rank 1 100 ms late in every step (tests/data/traces/README.md)."""


def _recorded() -> list[dict[str, Any]]:
    return [json.loads(gzip.decompress(p.read_bytes())) for p in sorted(SLOW.iterdir())]


def _as_array(events: list[dict[str, Any]]) -> str:
    return "[\n\n" + ",\n".join(json.dumps(e, indent=2) for e in events) + "\n]\n"


def _job(tmp_path: Path) -> tuple[Path, Path]:
    """The recorded job twice: as objects without distributedInfo or host_name, named
    rank-N, and as arrays of the same events, named as the TensorBoard plugin's tests name a
    DDP job's traces (worker0_span1, worker1_span1)."""
    objects, arrays = tmp_path / "objects", tmp_path / "arrays"
    objects.mkdir()
    arrays.mkdir()
    for rank, data in enumerate(_recorded()):
        bare = {k: v for k, v in data.items() if k not in ("distributedInfo", "host_name")}
        (objects / f"rank-{rank}.json").write_text(json.dumps(bare))
        text = _as_array(data["traceEvents"]).encode()
        (arrays / f"worker{rank}_span1.pt.trace.json.gz").write_bytes(gzip.compress(text))
    return objects, arrays


def test_the_array_form_reads_as_the_object_form(tmp_path: Path) -> None:
    objects, arrays = _job(tmp_path)
    for rank in (0, 1):
        want = trace_file.read_trace(objects / f"rank-{rank}.json")
        got = trace_file.read_trace(arrays / f"worker{rank}_span1.pt.trace.json.gz")
        assert (got.rank, got.rank_from, want.rank_from) == (rank, "worker name", "file name")
        assert got.steps and len(got.starts) > 100
        same = ("path", "rank_from", "num_bytes")
        assert dataclasses.replace(got, **{k: getattr(want, k) for k in same}) == want
    assert trace_file.find_traces([arrays]) == sorted(arrays.iterdir())


def _but_trace(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "trace"}


def test_a_job_of_arrays_is_analysed_as_the_job_of_objects(tmp_path: Path) -> None:
    objects, arrays = _job(tmp_path)
    figures = []
    for folder in (objects, arrays):
        finished = analyze_traces([folder], out=tmp_path / f"run-{folder.name}",
                                  use_history=False, jobs=1)  # fmt: skip
        results = finished.results
        assert results.run.config["imported"]["ranks"] == [0, 1]
        figures.append(sorted((m.metric, m.rank, str(_but_trace(m.params)), m.value)
                              for m in results.measurements))  # fmt: skip
    assert figures[0] == figures[1] and len(figures[0]) > 10


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_arrays_that_are_not_trace_events_are_passed_over(tmp_path: Path) -> None:
    events = _recorded()[0]["traceEvents"]
    trace = _write(tmp_path / "worker0.pt.trace.json", _as_array(events))
    # the first event larger than the head read to tell: its keys are enough
    big = {"ph": "X", "name": "n", "ts": 1, "dur": 1, "args": {"x": "y" * (1 << 17)}}
    large = _write(tmp_path / "worker1.pt.trace.json", _as_array([big, *events]))
    others = [
        _write(tmp_path / "sizes.json", "[1, 2, 3]"),
        _write(tmp_path / "empty.json", " []"),
        _write(tmp_path / "configs.json", '[{"name": "a", "lr": 0.1}, {"name": "b"}]'),
        _write(tmp_path / "some.json", '[{"ph": "X", "ts": 1}, {"name": "b"}]'),
    ]
    scan = trace_file.scan_traces([tmp_path])
    assert scan.files == [trace, large]
    assert sorted(scan.passed_over) == sorted(others)
    for path in others:
        with pytest.raises(trace_file.TraceError, match="a JSON array, not of trace events"):
            trace_file.read_trace(path)


def _one(tmp_path: Path, name: str, *, pid: int | None = None) -> Path:
    """The recorded rank 0 as an array, under ``name`` (``{pid}``: its process's pid)."""
    events = _recorded()[0]["traceEvents"]
    own = trace_file.read_trace(sorted(SLOW.iterdir())[0]).pid
    path = tmp_path / name.format(pid=own if pid is None else pid)
    return _write(path, _as_array(events))


@pytest.mark.parametrize(
    ("name", "rank", "rank_from"),
    [
        ("worker3.1623143089861.pt.trace.json", 3, "worker name"),
        ("Worker12_round1.json", 12, "worker name"),
        ("rank-5_worker3.json", 5, "file name"),  # rank-N first
        ("job-worker3_999999.1796552542.pt.trace.json", 3, "worker name"),  # not its pid
        ("job-worker3_{pid}.1796552542.pt.trace.json", None, None),  # HOST_PID: a host
        ("networker2.json", None, None),
        ("num_workers4.json", None, None),
    ],
)
def test_the_rank_of_a_worker_name(
    tmp_path: Path, name: str, rank: int | None, rank_from: str | None
) -> None:
    path = _one(tmp_path, name)
    if rank is None:
        with pytest.raises(trace_file.NoRankError, match="no rank-N or workerN"):
            trace_file.read_trace(path)
        return
    t = trace_file.read_trace(path)
    assert (t.rank, t.rank_from) == (rank, rank_from)


def test_the_one_file_given_is_rank_0_whatever_its_worker_name(tmp_path: Path) -> None:
    t = trace_file.read_trace(_one(tmp_path, "worker5.pt.trace.json"), default_rank=0)
    assert (t.rank, t.rank_from) == (0, "lone trace")
    with_info = trace_file.read_trace(sorted(SLOW.iterdir())[1], default_rank=0)
    assert (with_info.rank, with_info.rank_from) == (1, "distributedInfo")

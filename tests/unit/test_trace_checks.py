"""What a set of trace files says about itself (``analysis.trace_checks``), judged on the
recorded traces of tests/data/traces read once, their rank, world size or host then changed
as a job's files would have them: each case is one line and one finding."""

from __future__ import annotations

import dataclasses
from functools import cache
from pathlib import Path

import pytest

from clusterbench.analyses.trace.checks import check_traces, format_ranks
from clusterbench.analyses.trace.file import NoRankError, RankTrace, TraceError, read_trace
from clusterbench.schema import Finding

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


@cache
def _read(folder: str, index: int) -> RankTrace:
    return read_trace(sorted((DATA / folder).iterdir())[index], default_rank=0)


def _world(ranks: list[int], size: int | None) -> list[RankTrace]:
    """Ranks of one job: the two recorded gloo ranks in turn, each given its rank and size."""
    return [
        dataclasses.replace(
            _read("cpu-gloo-slow-rank", r % 2), rank=r, world_size=size, path=Path(f"rank-{r}.json")
        )
        for r in ranks
    ]


def _ids(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.id, f.severity) for f in findings]


@pytest.mark.parametrize(
    ("ranks", "text"),
    [([5], "5"), ([40, 5, 9, 10, 11, 12], "5, 9-12, 40"), ([0, 1, 2, 3], "0-3"),
     (list(range(0, 48, 2)), "0, 2, 4, 6, 8, 10, 12, 14, 16, 18, ... (24 in all)")],
)  # fmt: skip
def test_ranks_are_told_as_runs(ranks: list[int], text: str) -> None:
    assert format_ranks(ranks) == text


def test_a_rank_missing_from_the_world_the_traces_name() -> None:
    checks = check_traces(_world([0, 1, 2, 3, 4, 6, 7], 8), unread=[], passed_over=[])
    assert checks.lines == [
        "rank 5 of world size 8 has no trace: cross-rank findings cover the 7 present"
    ]
    (finding,) = checks.findings
    assert (finding.id, finding.severity) == ("attribution.trace.missing_ranks", "warn")
    assert finding.evidence["missing"] == [5] and len(checks.traces) == 7
    many = check_traces(_world([0, 1, 2, 3, 4, 6, 7, 8, 13], 41), unread=[], passed_over=[])
    assert many.lines == [
        "ranks 5, 9-12, 14-40 of world size 41 have no trace: cross-rank findings cover the "
        "9 present"
    ]
    # a file that could not be read leaves its rank without a trace read
    told = check_traces(
        _world([0, 1, 2], 4), unread=[TraceError("rank-3.json: truncated")], passed_over=[]
    )
    assert told.lines[-1] == (
        "rank 3 of world size 4 has no trace read: cross-rank findings cover the 3 present"
    )
    assert _ids(told.findings) == [("attribution.trace.unread", "warn"),
                                   ("attribution.trace.missing_ranks", "warn")]  # fmt: skip
    # every rank of the world present: nothing to say
    assert check_traces(_world([0, 1], 2), unread=[], passed_over=[]).lines == []


def test_ranks_missing_where_the_traces_give_no_world_size() -> None:
    checks = check_traces(_world([0, 1, 3], None), unread=[], passed_over=[])
    assert checks.lines == [
        "rank 2 (the traces give no world size; the ranks present run to 3) has no trace: "
        "cross-rank findings cover the 3 present"
    ]


def test_one_rank_of_a_larger_world_is_stated() -> None:
    checks = check_traces(_world([0], 64), unread=[], passed_over=[])
    assert checks.lines == ["rank 0 of 64: cross-rank findings need the other ranks' files"]
    assert _ids(checks.findings) == [("attribution.trace.one_rank", "info")]
    # no world size, but a rank above 0: the others exist
    checks = check_traces(_world([1], None), unread=[], passed_over=[])
    assert checks.lines == ["rank 1 of at least 2: cross-rank findings need the other ranks' files"]
    assert check_traces(_world([0], None), unread=[], passed_over=[]).lines == []


def test_files_of_one_process_that_name_no_rank_are_rank_0() -> None:
    """A job of one process whose schedule repeats writes one file per cycle, none naming a
    rank: they are its cycles, as a lone trace is rank 0; two processes' files stay unread."""
    # rank 0's two cycles, as a trace without distributedInfo has them
    cycles = [dataclasses.replace(_read("lightning-cycles", i), world_size=None) for i in (0, 1)]
    unread = [NoRankError(f"{t.path}: no rank", trace=t) for t in cycles]
    checks = check_traces([], unread=unread, passed_over=[])
    assert [t.path for t in checks.traces] == [cycles[0].path] and checks.unread == []
    assert _ids(checks.findings) == [("attribution.trace.extra", "info")]
    two = [_read("cpu-gloo-plain", i) for i in range(2)]
    unread = [NoRankError(f"{t.path}: no rank", trace=t) for t in two]
    checks = check_traces([], unread=unread, passed_over=[])
    assert checks.traces == [] and checks.unread == [str(e) for e in unread]
    assert _ids(checks.findings) == [("attribution.trace.unread", "warn")] * 2


def test_traces_of_different_world_sizes() -> None:
    checks = check_traces(_world([0, 1], 2) + _world([2], 8), unread=[], passed_over=[])
    assert checks.lines == [
        "the traces give different world sizes (2 in 2, 8 in 1 trace(s)): the files of more "
        "than one job?"
    ]
    assert _ids(checks.findings) == [("attribution.trace.world_size", "warn")]


def test_a_repeating_schedule_s_cycles_are_one_line_and_a_note_per_rank() -> None:
    """Lightning's schedule repeats: each rank's two files come from one process."""
    read = [_read("lightning-cycles", i) for i in range(4)]
    checks = check_traces(read, unread=[], passed_over=[])
    assert [t.path for t in checks.traces] == [read[0].path, read[2].path]
    assert checks.lines == [
        "ranks 0-1: 2 files each (a profiler schedule that repeats writes one per cycle); the "
        "first of each analysed, the others named in the notes"
    ]
    assert _ids(checks.findings) == [("attribution.trace.extra", "info")] * 2
    assert checks.findings[0].message == (
        f"rank 0: 2 files (a profiler schedule that repeats writes one per cycle); "
        f"{read[0].path.name} analysed, not {read[1].path.name}"
    )
    one = check_traces(read[:3], unread=[], passed_over=[])
    assert one.lines == [one.findings[0].message]  # one rank's cycles: its note is the line


def test_copies_and_traces_of_different_processes_claiming_one_rank() -> None:
    first = _read("cpu-gloo-slow-rank", 0)
    copy = dataclasses.replace(first, path=Path("copy/rank-0.json"))
    checks = check_traces([first, copy, _read("cpu-gloo-slow-rank", 1)], unread=[],
                          passed_over=[])  # fmt: skip
    assert checks.lines == [
        f"rank 0: 2 copies of one trace ({first.path.name}, rank-0.json); {first.path.name} "
        "analysed"
    ]
    assert _ids(checks.findings) == [("attribution.trace.copies", "info")]
    other = dataclasses.replace(_read("cpu-gloo-plain", 0), path=Path("other/rank-0.json"))
    checks = check_traces([first, other, _read("cpu-gloo-slow-rank", 1)], unread=[],
                          passed_over=[])  # fmt: skip
    assert checks.lines[0] == (
        f"rank 0: 2 traces of different processes claim it ({first.path.name}: pid {first.pid}, "
        f"rank-0.json: pid {other.pid}); {first.path.name} analysed, not rank-0.json"
    )
    assert _ids(checks.findings)[0] == ("attribution.trace.duplicate", "warn")
    assert [t.path for t in checks.traces] == [first.path, _read("cpu-gloo-slow-rank", 1).path]


def test_ranks_without_profiler_steps_among_ranks_with_them() -> None:
    plain = dataclasses.replace(_read("cpu-gloo-plain", 1), rank=4, world_size=None)
    assert plain.windowed
    checks = check_traces([*_world([0, 1, 2, 3], None), plain], unread=[], passed_over=[])
    assert checks.lines == [
        "rank 4 read as one window (no ProfilerStep spans); the others' steps are timed among "
        "themselves"
    ]
    assert _ids(checks.findings) == [("attribution.trace.mixed_steps", "warn")]
    # every rank without: the attribution's own note says it, not this check
    both = [_read("cpu-gloo-plain", 0), _read("cpu-gloo-plain", 1)]
    assert check_traces(both, unread=[], passed_over=[]).lines == []


def test_ranks_whose_host_is_unknown() -> None:
    workers = [
        dataclasses.replace(t, host="unknown", worker_name=f"worker{t.rank}_step_12")
        for t in _world([0, 1], 2)
    ]
    checks = check_traces(workers, unread=[], passed_over=[])
    assert checks.lines == [
        "ranks 0-1: host unknown (no host_name in the traces; the file names' worker name "
        "(worker0_step_12, ...) is not tensorboard_trace_handler's HOST_PID: 12 is not the "
        f"process's pid {workers[0].pid}): counted as one node"
    ]
    assert _ids(checks.findings) == [("attribution.trace.host_unknown", "info")]
    mixed = [*_world([0, 1], 2)[:1], dataclasses.replace(_world([1], 2)[0], host="unknown")]
    assert check_traces(mixed, unread=[], passed_over=[]).lines == [
        "rank 1: host unknown (no host_name in the trace): not counted as a node beside the 1 "
        "named (they may run on those)"
    ]
    # one trace of one process, its host unknown: nothing in question
    lone = dataclasses.replace(_read("h100-plain", 0), host="unknown")
    assert check_traces([lone], unread=[], passed_over=[]).lines == []


def test_files_passed_over_are_counted() -> None:
    passed = [Path("run/config.json"), Path("run/trainer_state.json")]
    checks = check_traces(_world([0, 1], 2), unread=[], passed_over=passed)
    assert checks.lines == [
        "2 file(s) passed over: JSON without traceEvents, not torch.profiler traces "
        "(config.json, trainer_state.json)"
    ]
    assert _ids(checks.findings) == [("attribution.trace.passed_over", "info")]

"""What a set of trace files says about itself, before the traces are attributed: the files
that could not be read, the JSON passed over, two files of one rank, ranks missing from the
world the traces name, ranks without ``ProfilerStep#N`` spans among ranks with them, and ranks
whose host the traces do not give.  Each case is one line for the console and one finding
(``warn`` where data is lost or a cross-rank figure covers fewer ranks than the job ran,
``info`` where it is only stated), so that ``clusterbench analyze`` says everything it did
with its input.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterbench.analyses.trace.file import NoRankError, RankTrace, TraceError
from clusterbench.schema import Finding, Severity

__all__ = ["FileChecks", "check_traces", "format_ranks"]

_MAX_RANGES = 10
_MAX_NAMES = 3
_UNREAD_FIX = (
    "profile that rank again; a trace is whole once the profiler has stopped (the with-block "
    "ended, or prof.stop())"
)
_NO_RANK_FIX = (
    "start the process group before the profiler (its traces then carry distributedInfo), or "
    "name each rank's file rank-N"
)


@dataclass(kw_only=True)
class FileChecks:
    """The traces to analyse, and what the files said about themselves."""

    traces: list[RankTrace] = field(default_factory=list)
    """One trace per rank, the ones to analyse, in the order read."""
    findings: list[Finding] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """One line for the console per case (a finding per rank may share one line)."""
    unread: list[str] = field(default_factory=list)
    """The line of each file left unread."""

    def add(
        self,
        finding_id: str,
        severity: Severity,
        message: str,
        *,
        fix: str,
        evidence: dict[str, object] | None = None,
    ) -> None:
        self.findings.append(Finding(id=finding_id, severity=severity, scope="run", message=message,
                                     evidence=evidence or {}, fix=fix))  # fmt: skip
        self.lines.append(message)


def check_traces(
    read: Sequence[RankTrace], *, unread: Sequence[TraceError], passed_over: Sequence[Path]
) -> FileChecks:
    """The traces to analyse (the first file of each rank) and what the files say about
    themselves: ``unread``, the error of each file that could not be read; ``passed_over``,
    a folder's JSON that is not a trace.  Files that name no rank are rank 0 where no other
    trace was read and one process wrote them all (a job of one process, its schedule
    repeating), as a lone trace is."""
    checks = FileChecks()
    rankless = [e.trace for e in unread if isinstance(e, NoRankError)]
    if not read and rankless and _one_process(rankless):
        read, unread = rankless, [e for e in unread if not isinstance(e, NoRankError)]
    checks.unread = [str(e) for e in unread]
    for error in unread:
        checks.add("attribution.trace.unread", "warn", str(error),
                   fix=_NO_RANK_FIX if isinstance(error, NoRankError) else _UNREAD_FIX)  # fmt: skip
    if passed_over:
        _passed_over(passed_over, checks)
    checks.traces = _one_per_rank(read, checks)
    if checks.traces:
        _missing_ranks(checks.traces, num_unread=len(unread), checks=checks)
        _mixed_steps(checks.traces, checks)
        _unknown_hosts(checks.traces, checks)
    return checks


def format_ranks(ranks: Sequence[int]) -> str:
    """Ranks as runs: ``5, 9-12, 40``; past ten runs, the rest counted."""
    runs: list[tuple[int, int]] = []
    for rank in sorted(set(ranks)):
        if runs and rank == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], rank)
        else:
            runs.append((rank, rank))
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:_MAX_RANGES])
    if len(runs) > _MAX_RANGES:
        text += f", ... ({len(set(ranks))} in all)"
    return text


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(set(ranks)) == 1 else "ranks ") + format_ranks(ranks)


def _names(paths: Sequence[Path]) -> str:
    text = ", ".join(p.name for p in paths[:_MAX_NAMES])
    return text + (f" and {len(paths) - _MAX_NAMES} more" if len(paths) > _MAX_NAMES else "")


def _passed_over(paths: Sequence[Path], checks: FileChecks) -> None:
    checks.add(
        "attribution.trace.passed_over",
        "info",
        f"{len(paths)} file(s) passed over: JSON without traceEvents, not torch.profiler traces "
        f"({_names(paths)})",
        fix="nothing to do for a config or a trainer's state; a trace that was meant to be read "
        "has no traceEvents: profile that rank again",
        evidence={"files": [str(p) for p in paths]},
    )


def _one_per_rank(read: Sequence[RankTrace], checks: FileChecks) -> list[RankTrace]:
    """The first file of each rank; the others named: a repeating schedule's cycles and
    copies of one trace as a note, traces of different processes as a warning."""
    by_rank: dict[int, list[RankTrace]] = {}
    for t in read:
        by_rank.setdefault(t.rank, []).append(t)
    cycles: dict[int, Finding] = {}
    for rank, group in sorted(by_rank.items()):
        if len(group) == 1:
            continue
        finding = _duplicates(rank, group)
        checks.findings.append(finding)
        if finding.id == "attribution.trace.extra":
            cycles[rank] = finding
        else:
            checks.lines.append(finding.message)
    if len(cycles) == 1:
        checks.lines += [f.message for f in cycles.values()]
    elif cycles:  # one line for every rank's cycles; the notes name each rank's files
        counts = {len(by_rank[rank]) for rank in cycles}
        each = f"{counts.pop()} files each" if len(counts) == 1 else "more than one file each"
        checks.lines.append(
            f"{_ranks(list(cycles))}: {each} (a profiler schedule that repeats writes one per "
            "cycle); the first of each analysed, the others named in the notes"
        )
    return [group[0] for group in by_rank.values()]


def _one_process(traces: Sequence[RankTrace]) -> bool:
    """Whether one process wrote every trace: one pid, one host."""
    first = traces[0]
    return first.pid is not None and all((t.pid, t.host) == (first.pid, first.host)
                                         for t in traces)  # fmt: skip


def _duplicates(rank: int, group: Sequence[RankTrace]) -> Finding:
    """Two or more files of one rank: of one process (a repeating schedule's cycles, or
    copies of one trace), or of different processes (two runs' files in one folder)."""
    first, more = group[0], [t.path for t in group[1:]]
    evidence = {"rank": rank, "analysed": str(first.path), "not_analysed": [str(p) for p in more]}
    one_process = _one_process(group)
    if one_process and all((t.steps, t.num_events) == (first.steps, first.num_events)
                           for t in group):  # fmt: skip
        return Finding(id="attribution.trace.copies", severity="info", scope="run",
                       message=f"rank {rank}: {len(group)} copies of one trace "
                       f"({_names([first.path, *more])}); {first.path.name} analysed",
                       fix="give one file per rank", evidence=evidence)  # fmt: skip
    if one_process:
        return Finding(id="attribution.trace.extra", severity="info", scope="run",
                       message=f"rank {rank}: {len(group)} files (a profiler schedule that "
                       f"repeats writes one per cycle); {first.path.name} analysed, not "
                       f"{_names(more)}",
                       fix="give one file per rank to analyze another cycle",
                       evidence=evidence)  # fmt: skip
    pids = ", ".join(f"{t.path.name}: pid {t.pid if t.pid is not None else 'unknown'}"
                     for t in group[:_MAX_NAMES])  # fmt: skip
    return Finding(id="attribution.trace.duplicate", severity="warn", scope="run",
                   message=f"rank {rank}: {len(group)} traces of different processes claim it "
                   f"({pids}{', ...' if len(group) > _MAX_NAMES else ''}); {first.path.name} "
                   f"analysed, not {_names(more)}",
                   fix="the traces of two jobs or two runs in one folder: give the files of one "
                   "run, one per rank", evidence=evidence)  # fmt: skip


def _missing_ranks(traces: Sequence[RankTrace], *, num_unread: int, checks: FileChecks) -> None:
    present = sorted({t.rank for t in traces})
    sizes = Counter(t.world_size for t in traces if t.world_size)
    if len(sizes) > 1:
        told = ", ".join(f"{size} in {n}" for size, n in sorted(sizes.items()))
        checks.add("attribution.trace.world_size", "warn",
                   f"the traces give different world sizes ({told} trace(s)): the files of more "
                   "than one job?", fix="give the files of one run, one per rank",
                   evidence={"world_sizes": dict(sizes)})  # fmt: skip
        return
    world = next(iter(sizes), None)
    if world is None:
        missing = sorted(set(range(present[-1] + 1)) - set(present))
        told = f" (the traces give no world size; the ranks present run to {present[-1]})"
    else:
        missing = sorted(set(range(world)) - set(present))
        told = f" of world size {world}"
    if not missing:
        return
    evidence: dict[str, object] = {"world_size": world, "present": present, "missing": missing}
    if len(present) == 1:
        of = str(world) if world is not None else f"at least {present[0] + 1}"
        checks.add("attribution.trace.one_rank", "info",
                   f"rank {present[0]} of {of}: cross-rank findings need the other ranks' files",
                   fix="give every rank's file (one folder for all of them) to compare the ranks",
                   evidence=evidence)  # fmt: skip
        return
    have = "has" if len(missing) == 1 else "have"
    trace = "no trace" if not num_unread else "no trace read"
    checks.add("attribution.trace.missing_ranks", "warn",
               f"{_ranks(missing)}{told} {have} {trace}: cross-rank findings cover the "
               f"{len(present)} present",
               fix="give every rank's file: copy every node's trace folder into one (or profile "
               "into shared storage)", evidence=evidence)  # fmt: skip


def _mixed_steps(traces: Sequence[RankTrace], checks: FileChecks) -> None:
    windowed = [t.rank for t in traces if t.windowed]
    if not windowed or len(windowed) == len(traces):
        return
    checks.add(
        "attribution.trace.mixed_steps",
        "warn",
        f"{_ranks(windowed)} read as one window (no ProfilerStep spans); the others' steps are "
        "timed among themselves",
        fix="profile every rank with the same torch.profiler schedule, and call prof.step() "
        "on every rank",
        evidence={"windowed": windowed},
    )


def _unknown_hosts(traces: Sequence[RankTrace], checks: FileChecks) -> None:
    unknown = [t for t in traces if t.host == "unknown"]
    workers = [t for t in unknown if t.worker_name]
    if not unknown or (len(traces) == 1 and not workers):
        return
    named = sorted({t.host for t in traces if t.host != "unknown"})
    why = "no host_name in the trace" if len(unknown) == 1 else "no host_name in the traces"
    if workers:
        w = workers[0]
        pid = w.worker_name.rsplit("_", 1)[1] if w.worker_name else ""
        why += (
            f"; the file names' worker name ({w.worker_name}"
            + (", ..." if len(workers) > 1 else "")
            + f") is not tensorboard_trace_handler's HOST_PID: {pid} is not the process's pid "
            + (str(w.pid) if w.pid is not None else "(unknown)")
        )
    counted = (
        "counted as one node"
        if not named
        else f"not counted as a node beside the {len(named)} named (they may run on those)"
    )
    checks.add(
        "attribution.trace.host_unknown",
        "info",
        f"{_ranks([t.rank for t in unknown])}: host unknown ({why}): {counted}",
        fix="keep tensorboard_trace_handler's default worker_name (HOST_PID), or profile with a "
        "PyTorch whose traces carry host_name",
        evidence={
            "ranks": [t.rank for t in unknown],
            "named_hosts": named,
            "worker_names": [t.worker_name for t in workers],
        },
    )

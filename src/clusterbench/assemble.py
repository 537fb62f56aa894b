"""Build results.json from the ranks' records and what the launcher saw.

Pure over its inputs: records (from the partial files, or gathered by rank 0), the launcher's
failures and the run's metadata.  Names the rank(s) that caused a failure, telling them apart
from ranks that were only waiting for them.
"""

from __future__ import annotations

import signal
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from clusterbench.runtime.launch import WorkerFailure
from clusterbench.runtime.records import (
    End,
    Error,
    FindingRecord,
    Hello,
    HostRecord,
    Interrupted,
    MeasurementRecord,
    NcclRecord,
    Record,
    Skip,
    Start,
)
from clusterbench.schema import ErrorRecord, HostInfo, Results, RunInfo, RunStatus, ToolInfo

__all__ = ["RunMeta", "assemble_results", "dedupe"]


@dataclass(kw_only=True)
class RunMeta:
    id: str
    started: str
    finished: str
    suite: str
    world_size: int
    backend: str
    command: str
    config: dict[str, Any]
    benchmarks: list[str]
    version: str
    fallback_host: str
    """Host named for a rank that died before saying where it ran (one-node runs)."""


def dedupe(records: Iterable[Record]) -> list[Record]:
    """One copy of each record (rank 0 may hold a record gathered and read back from a file),
    by rank, then in the order the rank wrote them."""
    seen: dict[tuple[int, int], Record] = {}
    for rec in records:
        seen.setdefault((rec.rank, rec.seq), rec)
    return [seen[k] for k in sorted(seen)]


def assemble_results(
    *,
    records: list[Record],
    meta: RunMeta,
    failures: list[WorkerFailure],
    interrupted: bool = False,
    running: bool = False,
) -> Results:
    """``running``: the run goes on (rank 0 rewrites results.json after each benchmark), so
    benchmarks not yet finished are not a failure; errors, or an interruption, still decide."""
    records = dedupe(records)
    hosts_by_rank = {r.rank: r.host for r in records if isinstance(r, Hello)}

    def host_of(rank: int) -> str:
        return hosts_by_rank.get(rank, meta.fallback_host)

    ends, starts, skipped = _progress(records)
    errors = _errors(records, failures, host_of=host_of, starts=starts, ends=ends)
    interrupted = interrupted or any(isinstance(r, Interrupted) for r in records)
    unfinished = [
        b for b in meta.benchmarks if b not in skipped and len(ends.get(b, ())) < meta.world_size
    ]
    status: RunStatus = "interrupted" if interrupted else "failed" if errors else "completed"
    if status == "completed" and unfinished:
        status = "running" if running else "failed"
    run = RunInfo(
        id=meta.id,
        started=meta.started,
        finished=None if status == "running" else meta.finished,
        suite=meta.suite,
        world_size=meta.world_size,
        num_nodes=max(1, len(set(hosts_by_rank.values()))),
        backend=meta.backend,
        command=meta.command,
        config=meta.config,
        status=status,
        benchmarks=meta.benchmarks,
        unfinished=unfinished,
        skipped=skipped,
    )
    return Results(
        tool=ToolInfo(version=meta.version),
        run=run,
        hosts=_hosts(records),
        measurements=[r.data for r in records if isinstance(r, MeasurementRecord)],
        errors=errors,
        nccl=[r.data for r in records if isinstance(r, NcclRecord)],
        findings=[r.data for r in records if isinstance(r, FindingRecord)],
    )


def _progress(
    records: list[Record],
) -> tuple[dict[str, set[int]], dict[int, list[str]], dict[str, str]]:
    ends: dict[str, set[int]] = defaultdict(set)
    starts: dict[int, list[str]] = defaultdict(list)
    skipped: dict[str, str] = {}
    for r in records:
        if isinstance(r, End):
            ends[r.benchmark].add(r.rank)
        elif isinstance(r, Start):
            starts[r.rank].append(r.benchmark)
        elif isinstance(r, Skip):
            skipped[r.benchmark] = r.reason
    return ends, starts, skipped


def _hosts(records: list[Record]) -> list[HostInfo]:
    hosts: dict[str, HostInfo] = {}
    for r in records:
        if isinstance(r, HostRecord):
            hosts.setdefault(r.data.hostname, r.data)
    return list(hosts.values())


def _errors(
    records: list[Record],
    failures: list[WorkerFailure],
    *,
    host_of: Callable[[int], str],
    starts: dict[int, list[str]],
    ends: dict[str, set[int]],
) -> list[ErrorRecord]:
    """Culprits first (ranks that raised, hung or died), then ranks that were only waiting."""
    culprits: list[ErrorRecord] = []
    waiting: list[ErrorRecord] = []
    wrote_error: set[int] = set()
    for r in records:
        if not isinstance(r, Error):
            continue
        rank, bench = r.rank, r.benchmark
        wrote_error.add(rank)
        where = f"rank {rank} on host {host_of(rank)}"
        if r.while_waiting:
            msg = f"{where} stopped while waiting for other ranks in {bench}: {r.message}"
            waiting.append(ErrorRecord(benchmark=bench, rank=rank, host=host_of(rank), message=msg))
        else:
            msg = f"{where} failed in {bench}: {r.message}"
            culprits.append(
                ErrorRecord(benchmark=bench, rank=rank, host=host_of(rank), message=msg)
            )
    for f in failures:
        if f.rank in wrote_error:
            continue
        bench = _current_benchmark(f.rank, starts=starts, ends=ends)
        msg = f"rank {f.rank} on host {host_of(f.rank)} {_exit_text(f.exitcode)} during "
        msg += bench or "start-up"
        if f.message:
            msg += f": {f.message}"
        culprits.append(
            ErrorRecord(benchmark=bench, rank=f.rank, host=host_of(f.rank), message=msg)
        )
        wrote_error.add(f.rank)
    if not culprits and (waiting or failures):
        culprits = _silent_ranks(starts=starts, ends=ends, skip=wrote_error, host_of=host_of)
    return culprits + waiting


def _silent_ranks(
    *,
    starts: dict[int, list[str]],
    ends: dict[str, set[int]],
    skip: set[int],
    host_of: Callable[[int], str],
) -> list[ErrorRecord]:
    """Ranks that stopped inside a benchmark without a word (e.g. exited or were killed)."""
    out = []
    for rank in sorted(starts):
        bench = _current_benchmark(rank, starts=starts, ends=ends)
        if bench is None or rank in skip:
            continue
        msg = f"rank {rank} on host {host_of(rank)} stopped during {bench} without reporting why"
        out.append(ErrorRecord(benchmark=bench, rank=rank, host=host_of(rank), message=msg))
    return out


def _current_benchmark(
    rank: int, *, starts: dict[int, list[str]], ends: dict[str, set[int]]
) -> str | None:
    for bench in reversed(starts.get(rank, [])):
        if rank not in ends.get(bench, set()):
            return bench
    return None


def _exit_text(exitcode: int) -> str:
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"

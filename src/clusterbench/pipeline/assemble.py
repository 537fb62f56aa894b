"""Build results.json from the ranks' records and what the launcher saw.

Pure over its inputs: records (from the partial files, or gathered by rank 0), the launcher's
failures and the run's metadata.  Names the rank(s) that caused a failure, telling them apart
from ranks that were only waiting for them.
"""

from __future__ import annotations

import signal
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from clusterbench.runtime.flight import FlightState, heartbeat_stopped
from clusterbench.runtime.launch import WorkerFailure
from clusterbench.runtime.phases import ordered_phases
from clusterbench.runtime.records import (
    End,
    Error,
    Hello,
    HostRecord,
    Interrupted,
    MeasurementRecord,
    NcclRecord,
    Phase,
    Record,
    Skip,
    Start,
    TelemetryRecord,
)
from clusterbench.runtime.rounds import last_round, round_findings, soak_info, with_round
from clusterbench.schema import (
    BudgetStop,
    ErrorRecord,
    HostInfo,
    PlanInfo,
    Results,
    RunInfo,
    RunStatus,
    ToolInfo,
)

__all__ = ["RunMeta", "assemble_results", "benchmark_seconds", "dedupe"]


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
    plan: PlanInfo | None = None
    """The plan printed before the run (``run.plan``), without where benchmarks stopped."""
    phases: dict[str, float] = field(default_factory=dict)
    """The phases the starting process timed (start, imports, plan)."""
    not_applicable: dict[str, str] = field(default_factory=dict)
    """Benchmarks with no form for the run's device, and why (``no cpu form``): skipped, not
    unfinished, though the run ended before a rank came to them and said so."""


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
    flights: dict[int, FlightState] | None = None,
    stacks: dict[int, str] | None = None,
    interrupted: bool = False,
    running: bool = False,
) -> Results:
    """``running``: the run goes on (rank 0 rewrites results.json after each benchmark), so
    benchmarks not yet finished are not a failure; errors, or an interruption, still decide.
    ``stacks``: rank -> a line on its saved Python stack, added to that rank's error.

    A soak (``--soak``/``--repeat``): what did not finish is judged in the round the run
    ended in, errors name that round, ``run.soak`` says how the rounds went, and the findings
    benchmarks recorded themselves are those of the round the summary shows."""
    records = dedupe(records)
    hosts_by_rank = {r.rank: r.host for r in records if isinstance(r, Hello)}

    flights = flights or {}

    def host_of(rank: int) -> str:
        flight = flights.get(rank)
        return hosts_by_rank.get(rank, flight.host if flight else meta.fallback_host)

    ends, starts, skipped = _progress(last_round(records))
    for name, reason in meta.not_applicable.items():
        skipped.setdefault(name, reason)
    culprits, waiting = _errors(records, failures, host_of=host_of, starts=starts, ends=ends,
                                flights=flights)  # fmt: skip
    errors = with_round(_with_stacks(culprits, stacks or {}) + waiting, records)
    interrupted = interrupted or any(isinstance(r, Interrupted) for r in records)
    unfinished = [
        b for b in meta.benchmarks if b not in skipped and len(ends.get(b, ())) < meta.world_size
    ]
    status: RunStatus = "interrupted" if interrupted else "failed" if errors else "completed"
    if status == "completed" and unfinished:
        status = "running" if running else "failed"
    soak = soak_info(
        records,
        asked=meta.config.get("soak"),
        benchmarks=[b for b in meta.benchmarks if b not in skipped],
        world_size=meta.world_size,
        stopped=status in ("failed", "interrupted"),
    )
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
        benchmark_seconds=benchmark_seconds(records, world_size=meta.world_size),
        phase_seconds=ordered_phases(
            meta.phases, [(r.name, r.seconds) for r in records if isinstance(r, Phase)]
        ),
        soak=soak,
        plan=_with_stops(meta.plan, records),
    )
    return Results(
        tool=ToolInfo(version=meta.version),
        run=run,
        hosts=_hosts(records),
        measurements=[r.data for r in records if isinstance(r, MeasurementRecord)],
        errors=errors,
        nccl=[r.data for r in records if isinstance(r, NcclRecord)],
        telemetry=[r.data for r in records if isinstance(r, TelemetryRecord)],
        findings=round_findings(records, keep=None if soak is None else soak.summary_round),
    )


def _with_stops(plan: PlanInfo | None, records: Iterable[Record]) -> PlanInfo | None:
    """``plan`` with each benchmark that stopped at its budget marked: the rank that measured
    the fewest of its points."""
    if plan is None:
        return None
    stops: dict[str, BudgetStop] = {}
    for r in records:
        if isinstance(r, End) and r.budget_stop is not None:
            held = stops.get(r.benchmark)
            if held is None or r.budget_stop.done < held.done:
                stops[r.benchmark] = r.budget_stop
    entries = [b.model_copy(update={"stopped": stops.get(b.benchmark)}) for b in plan.benchmarks]
    return plan.model_copy(update={"benchmarks": entries})


def benchmark_seconds(records: Iterable[Record], *, world_size: int) -> dict[str, float]:
    """Benchmark -> wall seconds of its slowest rank (start to end on that rank's clock), for
    each benchmark that every rank finished and timed, in the order they ran."""
    seconds: dict[str, dict[int, float]] = defaultdict(dict)
    for r in records:
        if isinstance(r, End) and r.seconds is not None:
            seconds[r.benchmark][r.rank] = r.seconds
    return {
        bench: round(max(by_rank.values()), 3)
        for bench, by_rank in seconds.items()
        if len(by_rank) >= world_size
    }


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
    flights: dict[int, FlightState],
) -> tuple[list[ErrorRecord], list[ErrorRecord]]:
    """The culprits (ranks that hung, died or raised), and the ranks that were only waiting.

    A rank whose heartbeat stopped long before the others' hung (its flight record says where);
    a rank the launcher saw end without it writing an error died.  Either makes every other
    failed rank one that waited for it, whatever its own error says (a peer's reset connection,
    its own timeout).  With neither, the ranks that raised on their own are the culprits.
    """
    own: dict[int, Error] = {}
    for r in records:
        if isinstance(r, Error):
            own.setdefault(r.rank, r)
    if not own and not failures:
        return [], []
    # a rank that raised on its own (not in a collective, not waiting) is a culprit: then only
    # a stopped heartbeat may add another
    raised = any(not (e.while_waiting or e.in_collective) for e in own.values())
    first_error_at = None if raised else min((e.at for e in own.values()), default=None)
    stalled = _stalled(flights, skip=set(own), seen_ending={f.rank for f in failures},
                       first_error_at=first_error_at)  # fmt: skip
    dead = [f for f in failures if f.rank not in own and f.rank not in stalled]
    if stalled or dead:
        return _blame(stalled, dead, own=own, host_of=host_of, starts=starts, ends=ends,
                      flights=flights)  # fmt: skip
    culprits: list[ErrorRecord] = []
    waiting: list[ErrorRecord] = []
    for rank, r in sorted(own.items()):
        where = f"rank {rank} on host {host_of(rank)}"
        if r.benchmark is None and not r.while_waiting:
            # the run could not start (nodes missing): the message says it all, as written
            culprits.append(ErrorRecord(benchmark=None, rank=rank, host=host_of(rank),
                                        message=r.message))  # fmt: skip
        elif r.while_waiting:
            bench = r.benchmark or "start-up"
            msg = f"{where} stopped while waiting for other ranks in {bench}: {r.message}"
            waiting.append(ErrorRecord(benchmark=r.benchmark, rank=rank, host=host_of(rank),
                                       message=msg))  # fmt: skip
        else:
            msg = f"{where} failed in {r.benchmark}: {r.message}"
            culprits.append(ErrorRecord(benchmark=r.benchmark, rank=rank, host=host_of(rank),
                                        message=msg))  # fmt: skip
    if not culprits:
        culprits = _silent_ranks(starts=starts, ends=ends, skip=set(own), host_of=host_of)
    if not culprits:  # nobody to wait for (e.g. the launcher ended every rank): say what it was
        waiting = [_stopped(e, own[e.rank]) for e in waiting if e.rank is not None]
    return culprits, waiting


def _stopped(err: ErrorRecord, own: Error) -> ErrorRecord:
    where = f"rank {err.rank} on host {err.host}"
    message = f"{where} stopped in {own.benchmark or 'start-up'}: {own.message}"
    return err.model_copy(update={"message": message})


def _stalled(
    flights: dict[int, FlightState],
    *,
    skip: set[int],
    seen_ending: set[int],
    first_error_at: float | None,
) -> dict[int, float]:
    """Ranks that went silent -> for how many seconds before the latest heartbeat.

    Silent: the heartbeat stopped well before the latest one (a stopped or wedged rank), or,
    for a rank the launcher did not see end (no launcher under torchrun across nodes), it
    stopped before the first error while another rank's went on past it (a dead rank: the
    others' errors came from it)."""
    if not flights:
        return {}
    latest = max(f.heartbeat for f in flights.values())
    out = {}
    for rank, f in sorted(flights.items()):
        if rank in skip:
            continue
        silent_s = latest - f.heartbeat
        died_first = (
            first_error_at is not None
            and rank not in seen_ending
            and f.heartbeat < first_error_at
            and any(o.heartbeat > first_error_at + o.interval_s / 2 for o in flights.values())
        )
        if died_first or heartbeat_stopped(f, silent_s=silent_s):
            out[rank] = silent_s
    return out


def _blame(
    stalled: dict[int, float],
    dead: list[WorkerFailure],
    *,
    own: dict[int, Error],
    host_of: Callable[[int], str],
    starts: dict[int, list[str]],
    ends: dict[str, set[int]],
    flights: dict[int, FlightState],
) -> tuple[list[ErrorRecord], list[ErrorRecord]]:
    def doing(rank: int) -> tuple[str | None, str]:
        bench = _current_benchmark(rank, starts=starts, ends=ends)
        flight = flights.get(rank)
        what = f", {flight.activity}" if flight and bench and flight.benchmark == bench else ""
        return bench, f"{bench or 'start-up'}{what}"

    culprits: list[ErrorRecord] = []
    for rank, silent_s in stalled.items():
        bench, where = doing(rank)
        msg = (f"rank {rank} on host {host_of(rank)} stopped responding during {where} (no "
               f"heartbeat for the last {silent_s:.0f} s of the run)")  # fmt: skip
        culprits.append(ErrorRecord(benchmark=bench, rank=rank, host=host_of(rank), message=msg))
    for f in dead:
        bench, where = doing(f.rank)
        msg = f"rank {f.rank} on host {host_of(f.rank)} {_exit_text(f.exitcode)} during {where}"
        msg += f": {f.message}" if f.message else ""
        culprits.append(ErrorRecord(benchmark=bench, rank=f.rank, host=host_of(f.rank),
                                    message=msg))  # fmt: skip
    blamed = {*stalled, *(f.rank for f in dead)}
    names = ", ".join(f"rank {r}" for r in sorted(blamed))
    others = sorted((set(own) | {r for r in starts if doing(r)[0]}) - blamed)
    waiting = []
    for rank in others:
        bench, where = doing(rank)
        err = own.get(rank)
        bench = bench or (err.benchmark if err else None)
        msg = f"rank {rank} on host {host_of(rank)} was waiting for {names} in {where}"
        msg += f": {err.message}" if err else ""
        waiting.append(ErrorRecord(benchmark=bench, rank=rank, host=host_of(rank), message=msg))
    if waiting:
        who = ", ".join(f"rank {e.rank} (host {e.host})" for e in waiting)
        culprits[0] = culprits[0].model_copy(
            update={"message": f"{culprits[0].message}; waiting for it: {who}"}
        )
    return culprits, waiting


def _with_stacks(errors: list[ErrorRecord], stacks: dict[int, str]) -> list[ErrorRecord]:
    """The culprits' errors with their stack's line, put before the ranks waiting for them."""
    out = []
    for err in errors:
        note = stacks.get(err.rank) if err.rank is not None else None
        if note is None:
            out.append(err)
            continue
        head, sep, tail = err.message.partition("; waiting for it: ")
        out.append(err.model_copy(update={"message": f"{head}; {note}{sep}{tail}"}))
    return out


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

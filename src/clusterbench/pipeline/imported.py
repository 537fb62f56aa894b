"""``clusterbench import``: the results of tools a team already runs, as a run folder.

nccl-tests' outputs (text, or the JSON of ``-J``) become the collectives benchmark's
measurements (``analyses/nccl/nccl_tests.py``); ``dcgmi diag -j``'s JSON becomes findings, one per
test that failed or warned and one line for the rest (``doctor/dcgm.py``, as ``doctor --dcgm``
gives them).  Either way the folder is a run's: results.json, summary.md and report.html
written once by the one finish of every run, so that compare, the history, baselines, the
report and the exports take it as they take clusterbench's own runs.  A file that cannot be
read or is not that tool's output stops the import before anything is written, naming the
file.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench._version import __version__
from clusterbench.config import ConfigError
from clusterbench.pipeline.finish import Finished, finish_results
from clusterbench.pipeline.spec import finish_options, now_utc, prepare_run_dir, run_id_for
from clusterbench.schema import Finding, HostInfo, Measurement, Results, RunInfo, ToolInfo

if TYPE_CHECKING:
    from clusterbench.analyses.baseline import Baseline
    from clusterbench.analyses.trace.file import RankTrace

__all__ = ["IMPORTERS", "Imported", "analyze_traces", "import_run"]


@dataclass(kw_only=True)
class Imported:
    """What the files said, before it is a run."""

    measurements: list[Measurement] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    hosts: list[HostInfo] = field(default_factory=list)
    world_size: int = 1
    started: str | None = None
    """When the tool ran (ISO 8601, UTC), where its output says; else the files' time."""
    details: dict[str, object] = field(default_factory=dict)
    """What results.json keeps of the import under ``run.config.imported``."""
    warnings: list[str] = field(default_factory=list)
    num_nodes: int | None = None
    """The run's nodes where its hosts do not count them (a host that is unknown); else one
    node a host."""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None


def _file_time(paths: Sequence[Path]) -> str | None:
    try:
        stamp = min(p.stat().st_mtime for p in paths)
    except (OSError, ValueError):
        return None
    return dt.datetime.fromtimestamp(stamp, dt.timezone.utc).isoformat(timespec="seconds")


def _local_to_utc(text: str) -> str | None:
    """nccl-tests' ``start_time`` (``2026-12-06 08:39:59``, the local time of the machine that
    ran it, taken as this machine's zone) in UTC."""
    try:
        local = dt.datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S").astimezone()
    except ValueError:
        return None
    return local.astimezone(dt.timezone.utc).isoformat(timespec="seconds")


def _nccl_tests(paths: Sequence[Path], host: str | None, level: int | None) -> Imported:
    from clusterbench.analyses.nccl import nccl_tests

    if level is not None:
        raise ConfigError("--level: only for dcgm-diag")
    runs: list[tuple[Path, nccl_tests.NcclTestsRun]] = []
    for path in paths:
        text = _read(path)
        try:
            if text.lstrip().startswith("{"):
                found = [nccl_tests.parse_json(text)]
            else:
                found = nccl_tests.parse_texts(text)
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        runs += [(path, run) for run in found]
    imported = Imported()
    seen: dict[tuple[str, int, tuple[str, ...], str], Path] = {}
    kept: list[nccl_tests.NcclTestsRun] = []
    for path, run in runs:
        key = (run.op, run.ranks, tuple(sorted({row.dtype for row in run.rows})), run.timing)
        if key in seen:  # the text and the JSON of one run, or the same test twice
            imported.warnings.append(
                f"{path}: {run.op} on {run.ranks} rank(s), timed {run.timing}, again (as in "
                f"{seen[key]}); the first is imported"
            )
            continue
        seen[key] = path
        kept.append(run)
        implied = nccl_tests.ranks_from_bus_factor(run)
        if implied is not None and implied != run.ranks:
            imported.warnings.append(
                f"{path}: {run.op}: the output names {run.ranks} rank(s) ({run.num_processes} "
                f"process(es) x {run.threads_per_process} thread(s) x {run.gpus_per_thread} "
                f"GPU(s)), but its busbw / algbw is the bus factor of {implied}; imported as "
                f"{run.ranks} rank(s), busbw and algbw as printed"
            )
        imported.measurements += nccl_tests.measurements(run, host=host)
    if host is not None:
        for run in kept:
            run.hosts = [host] * len(run.hosts)
    imported.hosts = nccl_tests.hosts(kept)
    imported.world_size = max(run.ranks for run in kept)
    starts = sorted(s for run in kept if run.started and (s := _local_to_utc(run.started)))
    imported.started = starts[0] if starts else _file_time(paths)
    imported.details = {
        "tool": "nccl-tests",
        "version": next((run.version for run in kept if run.version), None),
        "nccl": next((run.nccl_version for run in kept if run.nccl_version), None),
        "files": [str(p) for p in paths],
        "ops": sorted({run.op for run in kept}),
        "out_of_bounds": sum(run.out_of_bounds or 0 for run in kept),
    }
    bad = [run for run in kept if run.out_of_bounds]
    for run in bad:
        imported.findings.append(
            Finding(
                id="collectives.nccl_tests.out_of_bounds",
                severity="fail",
                scope=f"host:{run.hosts[0]}" if run.hosts else "run",
                message=f"nccl-tests {run.op}: {run.out_of_bounds} value(s) out of bounds "
                "(results that differ from the expected beyond the tolerance)",
                evidence={"op": run.op, "out_of_bounds": run.out_of_bounds},
                fix="a GPU or link corrupts data: run the test on subsets of the GPUs to find "
                "it ('clusterbench doctor', 'dcgmi diag -r 3'), then drain it",
            )
        )
    return imported


_DCGM_LEVEL_TESTS = (
    (4, {"memtest", "pulse_test", "eud"}),
    (3, {"targeted_stress", "targeted_power", "memory_bandwidth", "diagnostic"}),
    (2, {"pcie", "memory", "sm_stress", "context_create"}),
)
"""The tests that first appear at each ``dcgmi diag -r`` level (DCGM's documentation): the
deepest named in an output is its level, where --level does not say."""


def _dcgm_level(tests: set[str]) -> int:
    names = {re.sub(r"[^a-z0-9]+", "_", t.lower()).strip("_") for t in tests}
    return next((level for level, wanted in _DCGM_LEVEL_TESTS if names & wanted), 1)


def _dcgm_diag(paths: Sequence[Path], host: str | None, level: int | None) -> Imported:
    from clusterbench.doctor.dcgm import diag_findings, parse_diag

    if len(paths) != 1:
        raise ConfigError("dcgm-diag: one FILE, the output of one node's 'dcgmi diag -j'")
    (path,) = paths
    try:
        report = parse_diag(_read(path))
    except ValueError as exc:
        raise ConfigError(f"{path}: not 'dcgmi diag -j' output: {exc}") from None
    where = host or path.name.split(".", 1)[0]
    depth = level or _dcgm_level({r.test for r in report.results})
    gpus = sorted({r.gpu for r in report.results if r.gpu is not None})
    imported = Imported(
        findings=diag_findings(report, level=depth, host=where),
        hosts=[HostInfo(hostname=where)],
        started=_file_time(paths),
    )
    imported.details = {
        "tool": "dcgm-diag",
        "level": depth,
        "files": [str(path)],
        "gpus": gpus,
        "tests": sorted({r.test for r in report.results}),
        "failed": sorted({r.test for r in report.results if r.status == "Fail"}),
    }
    return imported


IMPORTERS: dict[str, Callable[[Sequence[Path], str | None, int | None], Imported]] = {
    "nccl-tests": _nccl_tests,
    "dcgm-diag": _dcgm_diag,
}
"""What ``clusterbench import KIND`` reads, by KIND."""


def import_run(
    kind: str,
    files: Sequence[Path | str],
    *,
    out: Path | str | None = None,
    host: str | None = None,
    level: int | None = None,
    baseline: str | Results | Baseline | None = None,
    exports: Sequence[str] = (),
    pushgateway: str | None = None,
    history: Path | None = None,
    use_history: bool = True,
    command: str = "",
    warn: Callable[[str], None] | None = None,
) -> Finished:
    """Read ``files`` (the output of the tool ``kind``), write them as a run folder under
    ``out`` (default ``clusterbench-runs/<UTC time>-<kind>``) and finish it as a run: compared
    with ``baseline``, recorded in the history, exported.  ConfigError (one line, nothing
    written) for an unknown kind, a missing or foreign file, a bad baseline or export."""
    entered = time.monotonic()
    if kind not in IMPORTERS:
        raise ConfigError(f"unknown tool {kind!r}: {', '.join(IMPORTERS)}")
    paths = [Path(f) for f in files]
    if not paths:
        raise ConfigError("give the files to import")
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{path}: no such file")
    imported = IMPORTERS[kind](paths, host, level)
    return _finish_imported(kind, imported, entered=entered, out=out, baseline=baseline,
                            exports=exports, pushgateway=pushgateway, history=history,
                            use_history=use_history, command=command, warn=warn)  # fmt: skip


def analyze_traces(
    paths: Sequence[Path | str],
    *,
    out: Path | str | None = None,
    top: int = 10,
    baseline: str | Results | Baseline | None = None,
    exports: Sequence[str] = (),
    pushgateway: str | None = None,
    history: Path | None = None,
    use_history: bool = True,
    command: str = "",
    warn: Callable[[str], None] | None = None,
    progress: Callable[[int, int, Path], None] | None = None,
    jobs: int | None = None,
    ray_address: str | None = None,
) -> Finished:
    """``clusterbench analyze``: the profiler traces under ``paths`` (files or folders, one
    file per rank) attributed as the attribution benchmark attributes its own, written as a
    run folder (default ``clusterbench-runs/<UTC time>-traces``).  A trace that cannot be
    read costs one ``warn`` line naming it and a warn finding, the other ranks are analysed;
    ConfigError (nothing written) when no trace can be read.  ``jobs`` processes read the
    files at once, or Ray tasks on the cluster at ``ray_address``; ``progress`` is told of
    each file read (:func:`~clusterbench.analyses.trace.pool.read_traces`)."""
    from clusterbench.analyses.trace import attribution as trace_attribution
    from clusterbench.analyses.trace import checks as trace_checks
    from clusterbench.analyses.trace import file as trace_file
    from clusterbench.analyses.trace.pool import read_traces

    entered = time.monotonic()
    try:
        scan = trace_file.scan_traces(paths)
    except trace_file.TraceError as exc:
        raise ConfigError(str(exc)) from None
    files = scan.files
    if not files:
        raise ConfigError("give the trace files or folders to analyze")
    try:
        reads = read_traces(files, jobs=jobs, ray_address=ray_address, progress=progress,
                            default_rank=0 if len(files) == 1 else None)  # fmt: skip
    except ValueError as exc:  # a bad --jobs
        raise ConfigError(str(exc)) from None
    traces = [r for r in reads if isinstance(r, trace_file.RankTrace)]
    unread = [r for r in reads if isinstance(r, trace_file.TraceError)]
    checks = trace_checks.check_traces(traces, unread=unread, passed_over=scan.passed_over)
    if not checks.traces:
        raise ConfigError("no trace could be read: " + "; ".join(checks.unread))
    traces = checks.traces  # one per rank
    result = trace_attribution.attribute(traces, top=top, jobs=jobs)
    imported = Imported(
        measurements=trace_attribution.measurements(result),
        findings=checks.findings + trace_attribution.trace_findings(result),
        hosts=_trace_hosts(traces),
        world_size=len(traces),
        # ranks whose host is unknown make no node of their own beside named ones
        num_nodes=max(1, len({t.host for t in traces} - {"unknown"})),
        started=_file_time([t.path for t in traces]),
        warnings=checks.lines,
    )
    imported.details = {
        "tool": "torch.profiler",
        "files": [str(t.path) for t in traces],
        "ranks": [t.rank for t in traces],
        "steps": sorted({n for t in traces for n, _, _ in t.steps}),
        "device_timeline": all(t.device for t in traces),
        "unread": checks.unread,
        "passed_over": [str(p) for p in scan.passed_over],
        "events": sum(t.num_events for t in traces),
        "bytes": sum(t.num_bytes for t in traces),
    }
    named = {t.backend for t in traces}
    backend = "nccl" if all(t.device for t in traces) else "gloo"
    if len(named) == 1 and None not in named:
        backend = str(named.pop())  # the process group's own: nccl, gloo
    return _finish_imported("traces", imported, entered=entered, out=out, baseline=baseline,
                            exports=exports, pushgateway=pushgateway, history=history,
                            use_history=use_history, command=command, warn=warn,
                            backend=backend, suite="analyze")  # fmt: skip


def _trace_hosts(traces: Sequence[RankTrace]) -> list[HostInfo]:
    """The hosts the traces ran on, each with the GPUs its ranks' kernels ran on."""
    from clusterbench.hardware.specs import spec_ref_for
    from clusterbench.schema import GpuInfo

    hosts: dict[str, dict[int, GpuInfo]] = {}
    for t in traces:
        gpus = hosts.setdefault(t.host, {})
        if t.device and t.device_index not in gpus:
            name = t.gpu_names[t.device_index] if t.device_index < len(t.gpu_names) else "GPU"
            gpus[t.device_index] = GpuInfo(index=t.device_index, name=name,
                                           spec=spec_ref_for(name))  # fmt: skip
    return [HostInfo(hostname=h, gpus=[g[i] for i in sorted(g)]) for h, g in hosts.items()]


def _finish_imported(
    kind: str,
    imported: Imported,
    *,
    entered: float,
    out: Path | str | None,
    baseline: str | Results | Baseline | None,
    exports: Sequence[str],
    pushgateway: str | None,
    history: Path | None,
    use_history: bool,
    command: str,
    warn: Callable[[str], None] | None,
    backend: str | None = None,
    suite: str | None = None,
) -> Finished:
    options = finish_options(baseline, exports, pushgateway, history=history,
                             use_history=use_history, finishes=True)  # fmt: skip
    if out is None:
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = Path("clusterbench-runs") / f"{stamp}-{kind}"
    run_dir = prepare_run_dir(out)
    for line in imported.warnings:
        if warn is not None:
            warn(line)
    started = imported.started or now_utc()
    results = Results(
        tool=ToolInfo(version=__version__),
        run=RunInfo(
            id=run_id_for(run_dir, started),
            started=started,
            finished=now_utc(),
            suite=suite or kind,
            world_size=imported.world_size,
            num_nodes=imported.num_nodes or max(1, len(imported.hosts)),
            backend=backend or ("nccl" if kind == "nccl-tests" else "none"),
            command=command or f"clusterbench import {kind}",
            config={"imported": imported.details},
            benchmarks=sorted({m.benchmark for m in imported.measurements}),
            phase_seconds={"import": time.monotonic() - entered},
        ),
        hosts=imported.hosts,
        measurements=imported.measurements,
        findings=imported.findings,
    )
    return finish_results(results, run_dir=run_dir, options=options, entered=entered)

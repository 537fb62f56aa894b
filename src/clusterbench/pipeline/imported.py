"""``clusterbench import`` and ``clusterbench analyze``: the results of tools a team already
runs, as a run folder.

Each importer lives with what it knows and returns what the files said
(:class:`~clusterbench.tool_files.Imported`): nccl-tests' outputs become the collectives
benchmark's measurements (:mod:`clusterbench.analyses.nccl.imported`); ``dcgmi diag -j``'s JSON
becomes findings, as ``doctor --dcgm`` gives them (:func:`clusterbench.doctor.dcgm.import_diag`);
profiler traces are attributed per rank and step (:mod:`clusterbench.analyses.trace`).  Here
the folder is made a run's: results.json, summary.md and report.html written once by the one
finish of every run, so that compare, the history, baselines, the report and the exports take
it as they take clusterbench's own runs.  A file that cannot be read or is not that tool's
output stops the import before anything is written, naming the file.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench._version import __version__
from clusterbench.config import ConfigError
from clusterbench.pipeline.finish import Finished, finish_results
from clusterbench.pipeline.spec import finish_options, now_utc, prepare_run_dir, run_id_for
from clusterbench.schema import HostInfo, Results, RunInfo, ToolInfo
from clusterbench.tool_files import Imported, file_time

if TYPE_CHECKING:
    from clusterbench.analyses.baseline import Baseline
    from clusterbench.analyses.trace.file import RankTrace

__all__ = ["IMPORTERS", "analyze_traces", "import_run"]


def _nccl_tests(paths: Sequence[Path], host: str | None, level: int | None) -> Imported:
    from clusterbench.analyses.nccl.imported import import_nccl_tests

    return import_nccl_tests(paths, host, level)


def _dcgm_diag(paths: Sequence[Path], host: str | None, level: int | None) -> Imported:
    from clusterbench.doctor.dcgm import import_diag

    return import_diag(paths, host, level)


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
        started=file_time([t.path for t in traces]),
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
    imported.backend = "nccl" if all(t.device for t in traces) else "gloo"
    if len(named) == 1 and None not in named:
        imported.backend = str(named.pop())  # the process group's own: nccl, gloo
    return _finish_imported("traces", imported, entered=entered, out=out, baseline=baseline,
                            exports=exports, pushgateway=pushgateway, history=history,
                            use_history=use_history, command=command, warn=warn,
                            suite="analyze")  # fmt: skip


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
            backend=imported.backend,
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

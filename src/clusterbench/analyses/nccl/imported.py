"""``clusterbench import nccl-tests``: nccl-tests' outputs (text, or the JSON of ``-J``) become
the collectives benchmark's measurements (:mod:`clusterbench.analyses.nccl.nccl_tests` reads
them), each test kept once, its ranks counted as the output states them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from clusterbench.analyses.nccl import nccl_tests
from clusterbench.exits import ConfigError
from clusterbench.schema import Finding
from clusterbench.tool_files import Imported, file_time, read_file

__all__ = ["import_nccl_tests", "local_to_utc"]


def local_to_utc(text: str) -> str | None:
    """nccl-tests' ``start_time`` (``2026-12-06 08:39:59``, the local time of the machine that
    ran it, taken as this machine's zone) in UTC."""
    try:
        local = dt.datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S").astimezone()
    except ValueError:
        return None
    return local.astimezone(dt.timezone.utc).isoformat(timespec="seconds")


def import_nccl_tests(paths: Sequence[Path], host: str | None, level: int | None) -> Imported:
    """``clusterbench import nccl-tests``: the outputs (text, or the JSON of ``-J``) as the
    collectives benchmark's measurements, one run of each test kept where a file repeats it,
    a fail finding for values out of bounds; ConfigError naming a file that is not one."""
    if level is not None:
        raise ConfigError("--level: only for dcgm-diag")
    runs: list[tuple[Path, nccl_tests.NcclTestsRun]] = []
    for path in paths:
        text = read_file(path)
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
    starts = sorted(s for run in kept if run.started and (s := local_to_utc(run.started)))
    imported.started = starts[0] if starts else file_time(paths)
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
    imported.backend = "nccl"
    return imported

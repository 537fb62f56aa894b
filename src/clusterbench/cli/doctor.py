"""``clusterbench doctor``: the checks (all, or ``--fast`` under a deadline), the DCGM
diagnostic when asked, the output (table, JSON or scheduler lines) and the exit code."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clusterbench.cli.common import PlainUsage, _console, _usage_error, app
from clusterbench.exits import EXIT_FAIL_FINDING, EXIT_OK

if TYPE_CHECKING:
    from clusterbench.schema import Finding

__all__ = ["DOCTOR_HELP", "doctor", "run_doctor"]

DOCTOR_HELP = """Check this node's configuration and GPU health in seconds.

--fast is the node check for schedulers (a Slurm Prolog or HealthCheckProgram, a Kubernetes
init container or readiness probe): every check at once, done 8.5 s after the command started
(at least 2 s for the checks), commands killed after at most 3 s, a check that hangs reported
as a fail, so the command ends in under 10 s.  It prints one line per problem (fail, warn)
and a last line with the verdict and the seconds since the command started.

--dcgm LEVEL also runs NVIDIA DCGM's diagnostic (dcgmi diag -r LEVEL -j) where dcgmi is
installed and folds its results in: level 1 takes seconds, 2 about 2 minutes, 3 about 15 and 4
longer (stopped after 2 min, 15 min, 1 h, 4 h); it is not bounded by --fast.

Exit codes: 0 no fail finding (healthy); 1 some fail finding; 2 bad usage.
"""


def _checks(*, fast: bool, checkpoint_dir: Path | None) -> tuple[str, list[Finding], bool]:
    """(hostname, findings, abandoned: a hung check's thread is still running)."""
    if fast:
        from clusterbench.doctor.fast import check_node_fast

        result = check_node_fast(env=os.environ, checkpoint_dir=checkpoint_dir)
        return result.hostname, result.findings, result.abandoned
    from clusterbench.doctor import run_checks
    from clusterbench.hardware.probe import nvml_session, probe_host

    with nvml_session() as nvml:  # one NVML session for the probe and the checks
        host = probe_host(nvml=nvml)
        findings = run_checks(host=host, env=os.environ, checkpoint_dir=checkpoint_dir, nvml=nvml)
    return host.hostname, findings, False


def _exit(code: int, *, now: bool) -> None:
    if now:
        # --fast: the output is written and nothing is left to save, so skip the interpreter's
        # shutdown (seconds with torch loaded on a busy node) and leave no hung check's thread
        # a say (NVML, a dead file system).  Hence: test --fast in a subprocess.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)


def run_doctor(*, as_json: bool, checkpoint_dir: Path | None, fast: bool, dcgm: int | None) -> None:
    """Run the checks, print them, exit 0 (no fail finding) or 1."""
    from clusterbench.doctor.dcgm import LEVELS

    if dcgm is not None and dcgm not in LEVELS:
        raise _usage_error(f"--dcgm takes a DCGM diagnostic level 1, 2, 3 or 4, not {dcgm}")
    hostname, findings, abandoned = _checks(fast=fast, checkpoint_dir=checkpoint_dir)
    if dcgm is not None:
        from clusterbench.doctor.dcgm_run import dcgm_findings

        findings = [*findings, *dcgm_findings(dcgm, host=hostname)]
    if as_json:
        typer.echo(json.dumps([f.model_dump(mode="json") for f in findings], indent=2))
    elif fast:
        from clusterbench.doctor.fast import process_age_s
        from clusterbench.report.doctor import problem_lines

        lines = problem_lines(findings, host=hostname, elapsed_s=process_age_s())
        typer.echo("\n".join(lines))
    else:
        from clusterbench.report.doctor import render_findings

        render_findings(findings, _console(), host=hostname)
    failed = any(f.severity == "fail" for f in findings)
    _exit(EXIT_FAIL_FINDING if failed else EXIT_OK, now=fast or abandoned)


@app.command(cls=PlainUsage, help=DOCTOR_HELP)
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")] = False,
    checkpoint_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Checkpoint folder to check for file system and free space."
        ),
    ] = None,
    fast: Annotated[
        bool,
        typer.Option("--fast", help="Node check for schedulers: under 10 s, one line per problem."),
    ] = False,
    dcgm: Annotated[
        int | None,
        typer.Option(
            "--dcgm", metavar="LEVEL", help="Also run dcgmi diag -r LEVEL (1-4) where installed."
        ),
    ] = None,
) -> None:
    run_doctor(as_json=as_json, checkpoint_dir=checkpoint_dir, fast=fast, dcgm=dcgm)

"""The ``device coverage`` run part's findings: they read the run's one coverage, never
compute it again."""

from __future__ import annotations

from clusterbench.analyses.view import RunView
from clusterbench.schema import Finding, Results
from tests.example_run_part.compute import NAME, HostCoverage

__all__ = ["findings"]


def findings(results: Results, run: RunView) -> list[Finding]:
    """A warning per host with a GPU that measured nothing; else one info line."""
    hosts: list[HostCoverage] = run.part(NAME)
    short = [h for h in hosts if h.num_measured < h.num_gpus]
    if short:
        return [
            Finding(
                id="coverage.unmeasured_gpus",
                severity="warn",
                scope=f"host:{h.host}",
                message=f"{h.num_gpus - h.num_measured} of {h.num_gpus} GPUs measured nothing",
                fix="check the host's GPUs with `clusterbench doctor`",
            )
            for h in short
        ]
    if not hosts:
        return []
    num_gpus = sum(h.num_gpus for h in hosts)
    message = f"every GPU measured: {num_gpus} on {len(hosts)} hosts"
    return [Finding(id="coverage.all_measured", severity="info", scope="run", message=message)]

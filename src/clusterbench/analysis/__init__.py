"""Analysis: pure functions from results to findings (no I/O, no printing).

Each benchmark's verdicts live in the module of its name (:mod:`.gemm`, :mod:`.memory`, ...:
``findings(results, thresholds)``), named by its registration; :func:`clusterbench.registry.analyze`
applies them all, then :func:`run_findings`: the verdicts that belong to no one benchmark.
Errors recorded in ``results.errors`` are reported separately and not repeated as findings.
"""

from __future__ import annotations

from clusterbench.analysis import budget, hosts, placement, prediction_findings, telemetry
from clusterbench.analysis.nccl import nccl_findings
from clusterbench.analysis.outliers import peer_outliers
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds

__all__ = ["run_findings"]


def run_findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """Findings that belong to no one benchmark: the host inventory's, NCCL's own log's, each
    device against its peers, the scaling prediction (training and collectives together), and
    what the GPUs' telemetry says held their clocks down, and how the run fitted its time
    budget."""
    return [
        *hosts.findings(results, thresholds),
        *nccl_findings(results),
        *prediction_findings.findings(results, thresholds),
        *placement.findings(results, thresholds),
        *telemetry.findings(results, thresholds),
        *budget.findings(results, thresholds),
        *peer_outliers(
            results.measurements,
            mads=thresholds.outlier_mads,
            min_rel=thresholds.outlier_min_rel,
            sigmas=thresholds.outlier_spread_sigmas,
        ),
    ]

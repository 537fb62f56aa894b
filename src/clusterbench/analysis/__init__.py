"""Analysis: pure functions from results to findings (no I/O, no printing).

:func:`analyze` applies every rule: the Level-1 verdicts (:mod:`.verdicts`, each measurement
against its limit) and the peer comparison (:mod:`.outliers`, each device against its peers).
Errors recorded in ``results.errors`` are reported separately and not repeated as findings.
"""

from __future__ import annotations

from clusterbench.analysis.attribution_findings import attribution_findings
from clusterbench.analysis.checkpoint import checkpoint_findings
from clusterbench.analysis.collectives import collective_findings
from clusterbench.analysis.input_pipeline import input_findings
from clusterbench.analysis.nccl import nccl_findings
from clusterbench.analysis.network import network_findings
from clusterbench.analysis.outliers import peer_outliers, robust_zscores
from clusterbench.analysis.training import training_findings
from clusterbench.analysis.verdicts import level1_findings
from clusterbench.schema import SEVERITY_ORDER, Finding, Results
from clusterbench.thresholds import Thresholds

__all__ = ["SEVERITY_ORDER", "analyze", "level1_findings", "peer_outliers", "robust_zscores"]


def analyze(results: Results, thresholds: Thresholds) -> list[Finding]:
    """All findings for a run, fail first, then warn, then info (stable within a severity)."""
    findings = [
        *level1_findings(results, thresholds),
        *network_findings(results, thresholds),
        *nccl_findings(results),
        *collective_findings(results, thresholds),
        *input_findings(results, thresholds),
        *checkpoint_findings(results, thresholds),
        *training_findings(results, thresholds),
        *attribution_findings(results, thresholds),
        *peer_outliers(
            results.measurements,
            mads=thresholds.outlier_mads,
            min_rel=thresholds.outlier_min_rel,
        ),
    ]
    return sorted(findings, key=lambda f: SEVERITY_ORDER[f.severity])

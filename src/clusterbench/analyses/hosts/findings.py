"""Verdicts on the host inventory itself (no benchmark): GPUs the spec table does not know.

Pure functions: a :class:`~clusterbench.schema.Results` in, a list of findings out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from clusterbench.judging.measurements import scope_label
from clusterbench.schema import Finding, Results

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["findings", "unknown_sku_findings"]


def findings(results: Results, run: RunView) -> list[Finding]:
    """Every verdict on the run's hosts (no threshold applies yet)."""
    return unknown_sku_findings(results)


def unknown_sku_findings(results: Results) -> list[Finding]:
    """GPUs with no spec-table entry -> info, one per host and GPU name."""
    out = []
    for host in results.hosts:
        unknown: dict[str, list[int]] = defaultdict(list)
        for gpu in host.gpus:
            if gpu.spec is None:
                unknown[gpu.name].append(gpu.index)
        for name, indices in unknown.items():
            out.append(
                Finding(
                    id="spec.unknown_sku",
                    severity="info",
                    scope=scope_label(host.hostname),
                    message=(
                        f"No spec entry for {name} ({len(indices)} GPU(s)): its results are "
                        "compared with peers only, not with a datasheet peak."
                    ),
                    evidence={"gpu": name, "indices": indices},
                    fix=(
                        "Add the SKU's dense peaks, HBM and link rates to the spec table "
                        "(clusterbench.hardware.specs) to get % of peak."
                    ),
                )
            )
    return out

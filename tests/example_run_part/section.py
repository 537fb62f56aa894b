"""The ``device coverage`` run part's section: the table of the run's one coverage."""

from __future__ import annotations

from clusterbench.analyses.view import RunView
from clusterbench.schema import Results
from clusterbench.views.cells import Grid, Section
from tests.example_run_part.compute import NAME, HostCoverage

__all__ = ["section"]


def section(results: Results, run: RunView) -> Section | None:
    """One row per host, the least covered first (None: no host lists a GPU)."""
    hosts: list[HostCoverage] = run.part(NAME)
    if not hosts:
        return None
    ordered = sorted(hosts, key=lambda h: h.num_measured / h.num_gpus)
    rows: list[tuple[str, ...]] = [(h.host, str(h.num_gpus), str(h.num_measured)) for h in ordered]
    grid = Grid(
        title=f"{NAME}: GPUs measured per host", header=("host", "GPUs", "measured"), rows=rows
    )
    return Section(NAME, grids=[grid])

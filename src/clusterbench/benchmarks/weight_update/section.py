"""The weight_update section: each optimizer and layout's GB/s against the HBM spec, and the
update times side by side."""

from __future__ import annotations

import statistics
from collections import defaultdict

from clusterbench.benchmarks.weight_update import WeightUpdateMetrics
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Section, format_value, metric_rows, param

__all__ = ["section"]


def _label(m: Measurement) -> str | None:
    if WeightUpdateMetrics.bandwidth.matches(m):
        return (
            f"{param(m, 'optimizer')}, {param(m, 'layout')} ({param(m, 'bytes_per_param')} B/param)"
        )
    return None  # step times: the grid; the reference check: results.json


def _times(ms: list[Measurement]) -> Grid | None:
    """Median update time over devices, optimizers as rows and layouts as columns."""
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for m in WeightUpdateMetrics.step_time_ms.select(ms):
        times[(str(param(m, "optimizer")), str(param(m, "layout")))].append(m.value)
    if not times:
        return None
    optimizers = list(dict.fromkeys(o for o, _ in times))
    layouts = list(dict.fromkeys(layout for _, layout in times))
    rows = [
        (o, *(format_value(statistics.median(times[(o, lay)])) if (o, lay) in times else "-"
              for lay in layouts))
        for o in optimizers
    ]  # fmt: skip
    first = ms[0]
    n = param(first, "num_params")
    count = f"{n:,} parameters" if isinstance(n, int) else "parameters"
    title = f"weight update time, ms (model {param(first, 'model')}, {count}; median over devices)"
    return Grid(title=title, header=("optimizer", *layouts), rows=rows)


def section(ms: list[Measurement], multi_host: bool) -> Section:
    grid = _times(ms)
    return Section(
        "weight_update",
        rows=metric_rows(ms, label=_label, multi_host=multi_host),
        grids=[grid] if grid is not None else [],
    )

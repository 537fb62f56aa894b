"""The checkpoint part of the summary: save and load per format, what an async save costs the
training steps, and the free space where checkpoints go."""

from __future__ import annotations

import statistics
from collections import defaultdict

from clusterbench.benchmarks.checkpoint import CheckpointMetrics
from clusterbench.metrics import Metric
from clusterbench.report.cells import Grid, Section, format_bytes, format_value
from clusterbench.schema import Measurement

__all__ = ["section"]

_C = CheckpointMetrics
_SAVE_LOAD = (_C.save_gbps, _C.save_s, _C.load_gbps, _C.load_s)
_ASYNC = (_C.async_block_s, _C.async_stall_pct)


def _case(m: Measurement) -> tuple[str, object, object]:
    return (str(m.params.get("format")), m.params.get("size_bytes"), m.params.get("num_ranks", 1))


def section(ms: list[Measurement], multi_host: bool) -> Section:
    grids = [
        _grid(ms, _SAVE_LOAD, header=("save GB/s", "save s", "load GB/s", "load s"),
              title="checkpoint: save (made durable) and load (page cache dropped) by format"
              + _free_space(ms)),
        _grid(ms, _ASYNC, header=("blocks s", "slower %"),
              title="checkpoint: async save; blocks: how long it holds training up, slower: "
              "how much slower training steps run while it writes"),
    ]  # fmt: skip
    return Section("checkpoint", grids=[g for g in grids if g is not None])


def _grid(
    ms: list[Measurement], metrics: tuple[Metric, ...], *, header: tuple[str, ...], title: str
) -> Grid | None:
    names = [metric.name for metric in metrics]
    values: dict[tuple[str, object, object], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for m in ms:
        if m.metric in names:
            values[_case(m)][m.metric].append(m.value)
    if not values:
        return None
    rows = []
    for (fmt, size, ranks), by_metric in values.items():
        cells = (
            format_value(statistics.median(by_metric[name])) if by_metric.get(name) else "-"
            for name in names
        )
        size_text = format_bytes(size) if isinstance(size, int | float) else "-"
        rows.append((fmt, size_text, str(ranks), *cells))
    return Grid(title=title, header=("format", "size", "ranks", *header), rows=rows)


def _free_space(ms: list[Measurement]) -> str:
    free = _C.free_space_gb.select(ms)
    if not free:
        return ""
    where = "; ".join(
        f"{m.params.get('directory')} ({m.params.get('filesystem')}) {format_value(m.value)} GB"
        for m in {(m.host, str(m.params.get("directory"))): m for m in free}.values()
    )
    return f"; free: {where}"

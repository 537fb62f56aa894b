"""The checkpoint part of the summary: save and load per format and state size, what an async
save costs the training steps, the free space where checkpoints go, the α–β fit of each
operation and the predicted times of whole checkpoints (the workload's model, 7B, 70B)."""

from __future__ import annotations

import statistics
from collections import defaultdict

from clusterbench.benchmarks.checkpoint import FORMATS, CheckpointMetrics
from clusterbench.benchmarks.checkpoint.predict import duration_text
from clusterbench.metrics import Metric
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Section, format_bytes, format_value

__all__ = ["predicted_grid", "section"]

_C = CheckpointMetrics
_SAVE_LOAD = (_C.save_gbps, _C.save_s, _C.load_gbps, _C.load_s)
_ASYNC = (_C.async_block_s, _C.async_total_s, _C.async_stall_pct)
_FIT = (_C.fit_gbps, _C.fit_latency_s, _C.fit_error_pct)


def _case(m: Measurement) -> tuple[str, object, object]:
    return (str(m.params.get("format")), m.params.get("size_bytes"), m.params.get("num_ranks", 1))


def section(ms: list[Measurement], multi_host: bool) -> Section:
    grids = [
        _grid(ms, _SAVE_LOAD, header=("save GB/s", "save s", "load GB/s", "load s"),
              title="checkpoint: save (made durable) and load (page cache dropped) by format"
              + _free_space(ms)),
        _grid(ms, _ASYNC, header=("blocks s", "written s", "slower %"),
              title="checkpoint: async save; blocks: how long it holds training up, written: "
              "until its files are written, slower: how much slower training steps run "
              "meanwhile (at the largest size)"),
        _fit_grid(ms),
        predicted_grid(ms),
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


def _fit_grid(ms: list[Measurement]) -> Grid | None:
    """One row per format and operation: β, α and the held-out error of t = α + S/β."""
    names = [metric.name for metric in _FIT]
    rows: dict[tuple[str, str], dict[str, Measurement]] = defaultdict(dict)
    for m in ms:
        if m.metric in names:
            rows[(str(m.params.get("format")), str(m.params.get("op")))][m.metric] = m
    if not rows:
        return None
    out = []
    for (fmt, op), by_metric in rows.items():
        first = next(iter(by_metric.values()))
        size = first.params.get("max_size_bytes")
        sizes = f"{first.params.get('num_sizes')} up to " + (
            format_bytes(size) if isinstance(size, int | float) else "-"
        )
        cells = (format_value(by_metric[n].value) if n in by_metric else "-" for n in names)
        out.append((fmt, op, sizes, *cells))
    return Grid(
        title="checkpoint: fit t = α + S/β over the sizes measured; held-out: the fit of the "
        "smaller sizes at the largest, %",
        header=("format", "op", "sizes", "β GB/s", "α s", "held-out %"),
        rows=out,
    )


def predicted_grid(ms: list[Measurement]) -> Grid | None:
    """Rows: model x what the checkpoint holds x format; cells: save and load, and on DCP's row
    what its async save (dcp_async) blocks of training and hides behind it."""
    cells: dict[tuple[str, str, object], dict[str, dict[str, float]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for m in _C.predicted_s.select(ms):
        p = m.params
        state = str(p.get("state")).replace("optimizer", "opt")  # 80 columns
        case = (str(p.get("model")), state, p.get("checkpoint_bytes"))
        fmt = "dcp" if p.get("format") == "dcp_async" else str(p.get("format"))
        cells[case][fmt][str(p.get("op"))] = m.value
    if not cells:
        return None
    rows = []
    for (model, state, size), by_format in cells.items():
        size_text = f"{size / 1e9:.3g}" if isinstance(size, int | float) else "-"
        for fmt in (f for f in FORMATS if f in by_format):
            ops = by_format[fmt]
            times = (_time(ops, op) for op in ("save", "load", "async_block", "async_hidden"))
            rows.append((model, state, size_text, fmt, *times))
    return Grid(
        title="checkpoint: predicted time of a whole checkpoint at this run's rates "
        "(α + N·B/β); async: what dcp.async_save blocks of training and hides behind it "
        "(the dcp_async rounds)",
        header=("model", "holds", "GB", "format", "save", "load", "async blocks", "hides"),
        rows=rows,
    )


def _time(ops: dict[str, float], op: str) -> str:
    return duration_text(ops[op]) if op in ops else "-"

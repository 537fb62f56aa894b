"""The training part of the summary: one table per world size of the scaling series, and the
sweep's table of throughput and memory per combination (or why it did not run)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from clusterbench.benchmarks.training.settings import TrainingMetrics as _T
from clusterbench.report.cells import Grid, Section, metric_cell
from clusterbench.schema import Measurement

__all__ = ["section"]

_SCALING_HEADER = (
    "model", "strategy", "precision", "GPUs", "global batch", "step ms", "throughput/GPU",
    "total", "MFU %", "scaling eff. %", "peak mem GB", "loss",
)  # fmt: skip
_SWEEP_HEADER = (
    "strategy", "precision", "act. ckpt", "compile", "throughput/GPU", "MFU %", "peak mem GB",
    "fits",
)  # fmt: skip
_CASE_KEYS = ("model", "strategy", "precision", "activation_checkpointing", "compile",
              "cuda_graphs", "world_size", "grad_accum")  # fmt: skip


def _key(m: Measurement) -> tuple[object, ...]:
    return tuple(m.params.get(k) for k in _CASE_KEYS)


def _by_case(ms: Iterable[Measurement]) -> dict[tuple[object, ...], dict[str, Measurement]]:
    out: dict[tuple[object, ...], dict[str, Measurement]] = defaultdict(dict)
    for m in ms:
        out[_key(m)][m.metric] = m
    return out


def _scaling_grid(ms: list[Measurement]) -> Grid | None:
    rows: list[tuple[str, ...]] = []
    for metrics in _by_case(m for m in ms if m.params.get("series") == "scaling").values():
        first = next(iter(metrics.values())).params
        rows.append((
            str(first.get("model")), str(first.get("strategy")), str(first.get("precision")),
            str(first.get("world_size")), str(first.get("global_batch", "-")),
            metric_cell(metrics, _T.step_time_ms),
            metric_cell(metrics, _T.tokens_per_s_per_gpu, _T.samples_per_s_per_gpu),
            metric_cell(metrics, _T.tokens_per_s, _T.samples_per_s), metric_cell(metrics, _T.mfu),
            metric_cell(metrics, _T.scaling_efficiency), metric_cell(metrics, _T.peak_memory_gb),
            metric_cell(metrics, _T.loss),
        ))  # fmt: skip
    if not rows:
        return None
    return Grid(title="training: scaling (throughput in tokens/s or samples/s)",
                header=_SCALING_HEADER, rows=rows)  # fmt: skip


def _sweep_grid(ms: list[Measurement]) -> Grid | None:
    rows: list[tuple[str, ...]] = []
    for metrics in _by_case(m for m in ms if m.params.get("series") == "sweep").values():
        p = next(iter(metrics.values())).params
        fits = metrics.get(_T.fits.name)
        fit = "yes" if fits is None or fits.value else f"no: {fits.params.get('reason')}"
        rows.append((
            str(p.get("strategy")), str(p.get("precision")),
            str(p.get("activation_checkpointing")), str(p.get("compile")),
            metric_cell(metrics, _T.tokens_per_s_per_gpu, _T.samples_per_s_per_gpu),
            metric_cell(metrics, _T.mfu), metric_cell(metrics, _T.peak_memory_gb), fit,
        ))  # fmt: skip
    if not rows:
        return None
    w = next((m.params.get("world_size") for m in ms if m.params.get("series") == "sweep"), "?")
    return Grid(title=f"training: sweep at {w} GPUs", header=_SWEEP_HEADER, rows=rows)


def _accum_grid(ms: list[Measurement]) -> Grid | None:
    cases = _by_case(m for m in ms if m.params.get("series") == "grad_accum")
    rows: list[tuple[str, ...]] = [
        (str(next(iter(c.values())).params.get("grad_accum")),
         metric_cell(c, _T.accum_step_time_ms), metric_cell(c, _T.compute_only_step_time_ms),
         metric_cell(c, _T.sync_idle_ms), metric_cell(c, _T.sync_idle_fraction))
        for c in cases.values()
    ]  # fmt: skip
    if not rows:
        return None
    header = ("grad accum", "step ms", "compute-only ms", "sync idle ms", "idle %")
    return Grid(title="training: gradient accumulation vs synchronisation idle (DDP)",
                header=header, rows=rows)  # fmt: skip


def section(ms: list[Measurement], multi_host: bool) -> Section:
    grids = [g for g in (_scaling_grid(ms), _sweep_grid(ms), _accum_grid(ms)) if g is not None]
    return Section("training", grids=grids)

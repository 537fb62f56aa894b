"""The training part of the summary: one table per world size of the scaling series, and the
sweep's table of throughput and memory per combination (or why it did not run).

The batch-size partition search is a run part of its own (``analyses/partition/section.py``):
its predicted rows need the run's collectives too (the links), which the training
measurements alone do not hold."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from clusterbench.benchmarks.training.settings import TrainingMetrics as _T
from clusterbench.schema import Measurement
from clusterbench.views.cells import Grid, Section, metric_cell

__all__ = ["section"]

# Short names, so that the tables fit 80 columns; the titles say what they mean.
_SCALING_HEADER = (
    "model", "strategy", "precision", "GPUs", "batch", "step ms", "per GPU", "total", "MFU %",
    "eff. %", "mem GB", "loss",
)  # fmt: skip
_SWEEP_HEADER = (
    "strategy", "precision", "act. ckpt", "compile", "per GPU", "MFU %", "mem GB", "fits",
)  # fmt: skip
_FOLD = ("model", "strategy", "precision", "act. ckpt", "compile")
_CASE_KEYS = ("model", "strategy", "precision", "activation_checkpointing", "compile",
              "cuda_graphs", "world_size", "grad_accum")  # fmt: skip


def _key(m: Measurement) -> tuple[object, ...]:
    return tuple(m.params.get(k) for k in _CASE_KEYS)


def _by_case(ms: Iterable[Measurement]) -> dict[tuple[object, ...], dict[str, Measurement]]:
    out: dict[tuple[object, ...], dict[str, Measurement]] = defaultdict(dict)
    for m in ms:
        out[_key(m)][m.metric] = m
    return out


def _throughput_unit(ms: Iterable[Measurement]) -> str:
    """tokens/s (decoders), samples/s (vision models), or both."""
    units = sorted({m.unit for m in ms if _T.tokens_per_s_per_gpu.matches(m)
                    or _T.samples_per_s_per_gpu.matches(m)})  # fmt: skip
    return " or ".join(units) or "tokens/s or samples/s"


def _scaling_grid(ms: list[Measurement]) -> Grid | None:
    rows: list[tuple[str, ...]] = []
    scaling = [m for m in ms if m.params.get("series") == "scaling"]
    for metrics in _by_case(scaling).values():
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
    title = (f"training: scaling; throughput per GPU and total in {_throughput_unit(scaling)}, "
             "batch: global, eff.: scaling efficiency, mem: peak memory")  # fmt: skip
    return Grid(title=title, header=_SCALING_HEADER, rows=rows, fold=_FOLD)


def _sweep_grid(ms: list[Measurement]) -> Grid | None:
    rows: list[tuple[str, ...]] = []
    sweep = [m for m in ms if m.params.get("series") == "sweep"]
    for metrics in _by_case(sweep).values():
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
    w = next((m.params.get("world_size") for m in sweep), "?")
    title = (f"training: sweep at {w} GPUs; throughput per GPU in {_throughput_unit(sweep)}, "
             "act. ckpt: activation checkpointing, mem: peak memory")  # fmt: skip
    return Grid(title=title, header=_SWEEP_HEADER, rows=rows, fold=_FOLD)


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

"""How long the ``dataloader`` benchmark takes, and how it is cut to a time budget.

Per dataset: writing it (``num_samples`` files or token windows); timing the step alone
(``step_s`` where set, else the workload's FLOPs at training's step rate,
:func:`.training.duration.step_seconds`); the loader sweep, worker count by worker count
(:mod:`.sweep`: 0, 1, 2, 4, ... up to the cores per rank), each count's pin x
prefetch settings starting their workers and loading warm-up + measured batches; then training
from the loader at the best and at the default setting.

A loader process decodes a sample at the rate this node's earlier run measured without workers
(the history), else in a nominal time (:data:`DECODE_S`, images scaled by their area); ``n``
workers decode ``n`` at once.  With ``sweep_stop`` the sweep is counted up to the first
worker count whose rate reaches the stopping rule's multiple of the step's demand (the plateau
cannot be foreseen: without a sufficient count the estimate runs the whole ladder).
"""

from __future__ import annotations

import dataclasses
import math

from clusterbench.benchmarks.dataloader.kinds import (
    SERIAL_MARGIN,
    SMALL_CNN,
    small_cnn_flops,
    worker_counts,
)
from clusterbench.benchmarks.dataloader.settings import DataloaderConfig
from clusterbench.benchmarks.training.duration import MODEL as TRAINING_MODEL
from clusterbench.benchmarks.training.duration import flops_per_sample, step_seconds
from clusterbench.durations import (
    Cut,
    DurationModel,
    Estimate,
    FactQuery,
    NodeFacts,
    Term,
    drop_cut,
    halve_cut,
)
from clusterbench.runtime.cores import cores_per_rank

__all__ = ["MODEL", "estimate", "sweep_counts"]

DECODE_S = {"images": 2e-3, "tokens": 2e-5}
"""Nominal seconds one loader process takes per sample: a 256 px JPEG decoded, cropped and
converted; a token window read from a memmapped shard."""
WRITE_S = {"images": 1e-3, "tokens": 1e-6}
"""Nominal seconds to write one sample of the dataset."""
WORKER_START_S = 0.3
"""Starting one loader worker process (nominal; every setting starts its own)."""
STEP_WARMUP = 2
"""Untimed steps before the step is timed alone (the benchmark's ``_STEP_WARMUP``)."""


def _decode(cfg: DataloaderConfig, facts: NodeFacts, dataset: str) -> tuple[float, str]:
    """Seconds one loader process takes per sample, and where the figure comes from."""
    nominal = DECODE_S[dataset] * ((cfg.image_size / 256) ** 2 if dataset == "images" else 1)
    rate = facts.rate(f"dataloader_{dataset}_per_process", nominal=1 / nominal)
    return 1 / rate.value, rate.source


def _decode_s(cfg: DataloaderConfig, facts: NodeFacts, dataset: str) -> float:
    return _decode(cfg, facts, dataset)[0]


def _step_s(cfg: DataloaderConfig, facts: NodeFacts, dataset: str, batch: int) -> float:
    """One training step of ``batch`` samples (``step_s`` where it is set)."""
    if cfg.step_s > 0:
        return cfg.step_s
    if dataset == "tokens":
        return step_seconds(facts, model=cfg.model, precision=cfg.precision, samples=batch,
                            seq_len=cfg.seq_len or None)  # fmt: skip
    if cfg.vision_model != SMALL_CNN:
        return step_seconds(facts, model=cfg.vision_model, precision=cfg.precision,
                            samples=batch)  # fmt: skip
    # the CPU-sized classifier: its FLOPs at the rate the table gives resnet50's
    overhead = step_seconds(facts, model="resnet50", precision=cfg.precision, samples=0)
    per_image = step_seconds(facts, model="resnet50", precision=cfg.precision, samples=1)
    per_flop = (per_image - overhead) / flops_per_sample("resnet50")
    return overhead + per_flop * small_cnn_flops() * batch


def sweep_counts(cfg: DataloaderConfig, facts: NodeFacts, dataset: str) -> list[int]:
    """The worker counts expected to run: the ladder, up to the first sufficient one with
    ``sweep_stop``."""
    counts = worker_counts(cfg.num_workers, cores=cores_per_rank(facts.local_world_size))
    if not cfg.sweep_stop:
        return counts
    batch = cfg.batch_size if dataset == "images" else cfg.token_batch_size
    demand = batch / _step_s(cfg, facts, dataset, batch)  # samples/s the step consumes
    for i, n in enumerate(counts):
        rate = max(1, n) / _decode_s(cfg, facts, dataset)
        if rate >= (SERIAL_MARGIN if n == 0 else cfg.sufficient_margin) * demand:
            return counts[: i + 1]
    return counts


def _loading_s(cfg: DataloaderConfig, *, n: int, batch: int, decode_s: float) -> float:
    """One loader setting: its workers start, then warm-up + windows of one batch per worker."""
    window = max(1, n)
    batches = cfg.warmup_batches + math.ceil(cfg.measure_batches / window) * window
    return WORKER_START_S * n + batches * batch * decode_s / window


def _dataset_terms(cfg: DataloaderConfig, facts: NodeFacts, dataset: str) -> tuple[Term, int]:
    batch = cfg.batch_size if dataset == "images" else cfg.token_batch_size
    decode, source = _decode(cfg, facts, dataset)
    step = _step_s(cfg, facts, dataset, batch)
    counts = sweep_counts(cfg, facts, dataset)
    pins = len({p and facts.cuda for p in cfg.pin_memory})
    per_count = [pins * (len(set(cfg.prefetch_factor)) if n > 0 else 1) for n in counts]
    loading = sum(k * _loading_s(cfg, n=n, batch=batch, decode_s=decode)
                  for n, k in zip(counts, per_count, strict=True))  # fmt: skip
    steps = cfg.warmup_batches + cfg.train_steps
    best = max(counts)  # the sweep's best is mostly its largest count
    busy = steps * max(step, batch * decode / max(1, best)) + WORKER_START_S * best
    default = steps * (step + batch * decode) if best > 0 else 0.0
    seconds = (
        cfg.num_samples * WRITE_S[dataset]
        + (STEP_WARMUP + cfg.measure_batches) * step
        + loading
        + busy
        + default
    )
    what = (
        f"{dataset}: {sum(per_count)} loader settings at {len(counts)} worker counts "
        f"(up to {counts[-1]}), {cfg.warmup_batches + cfg.measure_batches} batches each at "
        f"{decode * 1e3:.3g} ms a sample ({source}), a {step * 1e3:.3g} ms step"
    )
    return Term(what, seconds), sum(per_count)


def estimate(cfg: DataloaderConfig, facts: NodeFacts) -> Estimate:
    terms, points = [], 0
    for dataset in cfg.datasets:
        term, n = _dataset_terms(cfg, facts, dataset)
        terms.append(term)
        points += n
    return Estimate(terms=tuple(terms), points=max(1, points))


def _fewer_workers(cfg: DataloaderConfig, facts: NodeFacts) -> Cut | None:
    """The largest worker count dropped from the ladder, down to two counts."""
    counts = worker_counts(cfg.num_workers, cores=cores_per_rank(facts.local_world_size))
    if len(counts) <= 2:
        return None
    fewer = dataclasses.replace(cfg, num_workers=counts[:-1])
    return Cut(settings=fewer, key="num_workers", before=str(counts), after=str(counts[:-1]))


_PER_PROCESS = tuple(
    FactQuery(
        name=f"dataloader_{d}_per_process",
        benchmark="dataloader",
        metric="loader_samples_per_s",
        params={"dataset": d, "num_workers": 0, "pin_memory": False},
    )
    for d in ("images", "tokens")
)
"""The loader's samples/s without workers (one process) measured in an earlier run."""

MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("measure_batches", floor=4),
        halve_cut("train_steps", floor=4),
        halve_cut("warmup_batches", floor=1),
        drop_cut("prefetch_factor"),
        # pinned memory goes first: the unpinned default is what the advice compares with
        drop_cut("pin_memory", order=[True]),
        _fewer_workers,
    ),
    facts=(*TRAINING_MODEL.facts, *_PER_PROCESS),
)

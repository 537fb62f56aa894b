"""How long the ``checkpoint`` benchmark takes, and how it is cut to a time budget.

Per format, the state written is at most ``max_bytes`` of the workload's (12 B per parameter:
fp32 weights and AdamW's two moments; safetensors the weights alone, 4 B), at ``num_sizes``
sizes halving from there: S·(1 + 1/2 + ...) bytes per round, written (made durable) at the
disk's save rate and read back at its load rate — this node's fitted β of an earlier run
(``fit_gbps``), else its save/load GB/s, else nominal.  Rounds per size: the stopping rule
usually ends one round after ``min_repeats`` (never past ``repeats``); a warm-up round at the
smallest size; the async rounds run ``stall_steps`` training steps each (and once without a
save).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from clusterbench.benchmarks.training.duration import step_seconds
from clusterbench.durations import (
    Cut,
    DurationModel,
    Estimate,
    FactQuery,
    NodeFacts,
    Rate,
    Term,
    drop_cut,
    halve_cut,
)

__all__ = ["MIN_BYTES", "MODEL", "estimate", "state_bytes"]

STATE_BYTES_PER_PARAM = 12
"""fp32 parameters + AdamW's two fp32 moments (the 1.3b's 1.42 B parameters: 15.9 GiB)."""
WEIGHT_BYTES_PER_PARAM = 4
"""fp32 parameters: what safetensors writes."""
NOMINAL_GBPS = {"save": 1.0, "load": 2.0}
"""Nominal disk rates where nothing was measured (a local NVMe, fsync'd, through one rank)."""
MIN_BYTES = 256 * 2**20
"""The smallest bound a budget cuts ``max_bytes`` to: below it fixed costs swamp the rate."""


def _params(model: str) -> float:
    from clusterbench.benchmarks.training.duration import num_params

    return num_params(model) if model != "small_cnn" else 1e6


def state_bytes(cfg: Any, *, per_param: int = STATE_BYTES_PER_PARAM) -> float:
    """Bytes of the largest state one format writes: the whole state, or ``max_bytes``."""
    whole = per_param * _params(getattr(cfg, "model", "tiny"))
    bound = getattr(cfg, "max_bytes", 0) or 0
    return float(min(whole, bound) if bound > 0 else whole)


def _rate(facts: NodeFacts, op: str) -> Rate:
    fitted = facts.measured.get(f"checkpoint_fit_{op}_gbps")
    if fitted is not None and fitted > 0:
        return Rate(fitted, "measured")
    return facts.rate(f"checkpoint_{op}_gbps", nominal=NOMINAL_GBPS[op])


def _rounds(cfg: Any) -> int:
    """Rounds per size the stopping rule usually takes: one past ``min_repeats`` (a first
    round apart from the rest), one where ``min_repeats`` is 1 (one round has no spread),
    never past ``repeats``."""
    return min(cfg.repeats, 1 if cfg.min_repeats <= 1 else cfg.min_repeats + 1)


def estimate(cfg: Any, facts: NodeFacts) -> Estimate:
    save, load = _rate(facts, "save"), _rate(facts, "load")
    rounds = _rounds(cfg)
    halving = 2 - 2 ** (1 - cfg.num_sizes)  # 1 + 1/2 + ... (num_sizes terms)
    step = step_seconds(facts, model=cfg.model if cfg.model != "small_cnn" else "tiny",
                        precision="bf16", samples=cfg.batch_size)  # fmt: skip
    terms = []
    for fmt in cfg.formats:
        per_param = WEIGHT_BYTES_PER_PARAM if fmt == "safetensors" else STATE_BYTES_PER_PARAM
        largest = state_bytes(cfg, per_param=per_param)
        written = largest * (rounds * halving + cfg.warmup * 2 ** (1 - cfg.num_sizes))
        if fmt == "dcp_async":
            steps = (1 + cfg.warmup + rounds * cfg.num_sizes) * cfg.stall_steps
            seconds = written / (save.value * 1e9) + steps * step
            what = f"dcp_async: {written / 1e9:.3g} GB at {save.value:.3g} GB/s, {steps} steps"
        else:
            seconds = written / (save.value * 1e9) + written / (load.value * 1e9)
            what = (f"{fmt}: {written / 1e9:.3g} GB saved and loaded at {save.value:.3g} / "
                    f"{load.value:.3g} GB/s")  # fmt: skip
        terms.append(Term(f"{what} ({save.source}; {rounds} rounds x {cfg.num_sizes} sizes)",
                          seconds))  # fmt: skip
    return Estimate(terms=tuple(terms), points=len(cfg.formats) * cfg.num_sizes)


def _no_warmup(settings: Any, facts: NodeFacts) -> Cut | None:
    if settings.warmup == 0:
        return None
    return Cut(settings=dataclasses.replace(settings, warmup=0), key="warmup",
               before=str(settings.warmup), after="0")  # fmt: skip


def _bound_cut(settings: Any, facts: NodeFacts) -> Cut | None:
    """Halve the largest state written (from the whole state where ``max_bytes`` is 0), not
    below :data:`MIN_BYTES`."""
    now = int(state_bytes(settings))
    new = max(MIN_BYTES, now // 2)
    if new >= now:
        return None
    try:
        smaller = dataclasses.replace(settings, max_bytes=new)
    except (ValueError, TypeError):
        return None
    return Cut(settings=smaller, key="max_bytes", before=f"{now / 2**30:.3g} GiB",
               after=f"{new / 2**30:.3g} GiB")  # fmt: skip


MODEL = DurationModel(
    estimate=estimate,
    cuts=(
        halve_cut("repeats", floor=2),
        halve_cut("min_repeats", floor=1),
        halve_cut("repeats", floor=1),
        _no_warmup,
        halve_cut("stall_steps", floor=2),
        halve_cut("num_sizes", floor=2),
        _bound_cut,
        drop_cut("formats", order=["dcp_async", "safetensors", "dcp"]),
    ),
    facts=tuple(
        FactQuery(
            name=f"checkpoint_{name}_gbps",
            benchmark="checkpoint",
            metric=metric,
            params=params,
            pick="median",
        )
        for name, metric, params in (
            ("fit_save", "fit_gbps", {"op": "save"}),
            ("fit_load", "fit_gbps", {"op": "load"}),
            ("save", "save_gbps", {}),
            ("load", "load_gbps", {}),
        )
    ),
)

"""The partition search's plan, without torch: the candidates (data x tensor x pipeline), which
of them it tries and in what order, and what a measured peak memory rules out (the duration model
and the analysis read it; :mod:`.partition` trains the candidates)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from clusterbench.benchmarks.training.settings import TrainingConfig
from clusterbench.model_shapes import DECODER_MODELS, decoder_config
from clusterbench.schema import ParamValue

__all__ = [
    "Candidate",
    "MemoryPoint",
    "candidates",
    "default_candidate",
    "estimate_bytes",
    "global_batch",
    "num_candidates",
    "params",
    "planned",
    "prune_reason",
    "run_order",
    "select",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One partition of the global batch: d x micro_batch x accum samples per step."""

    d: int
    """Data-parallel size (ranks)."""
    micro_batch: int
    """Samples per rank per micro-step."""
    accum: int
    """Micro-steps per optimizer step."""
    activation_checkpointing: bool

    @property
    def global_batch(self) -> int:
        return self.d * self.micro_batch * self.accum


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPoint:
    """What a candidate that ran used: its largest rank's peak and resident bytes."""

    candidate: Candidate
    peak_bytes: int
    resident_bytes: int


def global_batch(cfg: TrainingConfig, *, largest: int) -> int:
    """The global batch to partition: ``partition_global_batch``, else the workload's
    (batch_size x the largest world size x grad_accum)."""
    unit = cfg.batch_size * largest
    batch = cfg.partition_global_batch or unit * cfg.grad_accum
    if batch % unit:
        raise ValueError(
            f"partition_global_batch {batch} is not a multiple of batch_size x the largest "
            f"world size ({cfg.batch_size} x {largest}): the default partition would not be a "
            "candidate"
        )
    return batch


def default_candidate(cfg: TrainingConfig, *, largest: int, batch: int) -> Candidate:
    """The workload's own partition of ``batch``: its batch_size at the largest world size."""
    return Candidate(
        d=largest, micro_batch=cfg.batch_size, accum=batch // (largest * cfg.batch_size),
        activation_checkpointing=cfg.activation_checkpointing,
    )  # fmt: skip


def _divisors(n: int) -> list[int]:
    return [i for i in range(1, n + 1) if n % i == 0]


def candidates(
    *, batch: int, sizes: Sequence[int], checkpointing: Sequence[bool]
) -> list[Candidate]:
    """Every d in ``sizes`` dividing ``batch``, every m dividing batch / d, k = batch / (d m),
    each checkpointing setting."""
    return [
        Candidate(d=d, micro_batch=m, accum=batch // (d * m), activation_checkpointing=ckpt)
        for d in sorted(set(sizes))
        if batch % d == 0
        for m in _divisors(batch // d)
        for ckpt in dict.fromkeys(checkpointing)
    ]


def select(cands: Sequence[Candidate], *, default: Candidate, limit: int) -> list[Candidate]:
    """At most ``limit`` candidates, the default always: then the largest d's, largest
    micro-batch first, each followed by its twin at the smallest d (same m and
    checkpointing: the step without, or with the least, communication), then the rest by
    d and m descending; within each, the default's checkpointing setting first."""
    if not cands:
        return [default]
    top, bottom = max(c.d for c in cands), min(c.d for c in cands)

    def order(c: Candidate) -> tuple[int, int, bool]:
        return -c.d, -c.micro_batch, c.activation_checkpointing != default.activation_checkpointing

    ranked = [default]
    pool = set(cands)
    for c in sorted((c for c in cands if c.d == top), key=order):
        twin = dataclasses.replace(c, d=bottom, accum=c.global_batch // (bottom * c.micro_batch))
        ranked += [c] + ([twin] if twin in pool else [])
    ranked += sorted(cands, key=order)
    return list(dict.fromkeys(ranked))[:limit]


def run_order(cands: Sequence[Candidate]) -> list[Candidate]:
    """Each checkpointing setting's candidates by ascending micro-batch, then d: every memory
    estimate rests on a smaller micro-batch measured before."""
    return sorted(cands, key=lambda c: (c.activation_checkpointing, c.micro_batch, c.d))


def estimate_bytes(c: Candidate, points: Sequence[MemoryPoint]) -> tuple[float, MemoryPoint] | None:
    """The memory rule (module docstring): R0 + (P0 - R0) x m / m0 from the point of the same
    checkpointing setting with the largest m0 <= m at d0 <= d (the largest such d0); None
    without one."""
    usable = [
        p
        for p in points
        if p.candidate.activation_checkpointing == c.activation_checkpointing
        and p.candidate.micro_batch <= c.micro_batch
        and p.candidate.d <= c.d
    ]
    if not usable:
        return None
    p = max(usable, key=lambda p: (p.candidate.micro_batch, p.candidate.d))
    activations = max(0, p.peak_bytes - p.resident_bytes)
    return p.resident_bytes + activations * c.micro_batch / p.candidate.micro_batch, p


def prune_reason(
    c: Candidate,
    *,
    points: Sequence[MemoryPoint],
    out_of_memory: Sequence[Candidate],
    limit_bytes: int | None,
) -> tuple[str, float | None] | None:
    """Why ``c`` is not run (and its estimate in bytes), None: it is run."""
    for o in out_of_memory:
        same = o.activation_checkpointing == c.activation_checkpointing
        if same and c.micro_batch >= o.micro_batch and c.d <= o.d:
            return (
                f"not run: {o.d} x {o.micro_batch} x {o.accum} (same checkpointing, micro-batch "
                f"<= {c.micro_batch}, d >= {c.d}) ran out of memory",
                None,
            )
    got = estimate_bytes(c, points) if limit_bytes is not None else None
    if got is None or limit_bytes is None:
        return None
    estimate, p = got
    if estimate <= limit_bytes:
        return None
    return (
        f"not run: estimated {estimate / 1e9:.3g} GB > {limit_bytes / 1e9:.3g} GB free "
        f"(from micro-batch {p.candidate.micro_batch}: peak {p.peak_bytes / 1e9:.3g} GB, "
        f"resident {p.resident_bytes / 1e9:.3g} GB)",
        estimate,
    )


def params(cfg: TrainingConfig, c: Candidate, *, default: Candidate) -> dict[str, ParamValue]:
    """What identifies a partition candidate in the results (seq_len: a decoder's tokens per
    sample, None for the other models)."""
    seq_len = (
        decoder_config(cfg.model, seq_len=cfg.seq_len).seq_len
        if cfg.model in DECODER_MODELS
        else None
    )
    return {
        "model": cfg.model, "strategy": cfg.strategy, "precision": cfg.precision,
        "compile": cfg.compile, "cuda_graphs": cfg.cuda_graphs, "seq_len": seq_len, "d": c.d,
        "micro_batch": c.micro_batch, "accum": c.accum,
        "activation_checkpointing": c.activation_checkpointing,
        "global_batch": c.global_batch, "default": c == default, "series": "partition",
    }  # fmt: skip


def planned(cfg: TrainingConfig, sizes: Sequence[int]) -> tuple[Candidate, list[Candidate]]:
    """(the default partition, the candidates to try in run order) at world sizes ``sizes``."""
    sizes = sorted(sizes)
    batch = global_batch(cfg, largest=sizes[-1])
    default = default_candidate(cfg, largest=sizes[-1], batch=batch)
    cands = candidates(
        batch=batch, sizes=sizes, checkpointing=cfg.partition_activation_checkpointing
    )
    return default, run_order(select(cands, default=default, limit=cfg.partition_max_candidates))


def num_candidates(cfg: TrainingConfig, sizes: Sequence[int]) -> int:
    """How many candidates the search tries (pruned ones included)."""
    return len(planned(cfg, sizes)[1])

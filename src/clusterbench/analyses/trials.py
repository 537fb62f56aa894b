"""Which comparisons that can yield advice a run made: what an empty advice list means (none of
them beat the defaults beyond the noise)."""

from __future__ import annotations

from collections.abc import Callable

from clusterbench.declared.dataloader import DataloaderMetrics
from clusterbench.schema import Results

__all__ = ["tried"]


def _has_finding(id_: str, key: str | None = None) -> Callable[[Results], bool]:
    def test(results: Results) -> bool:
        return any(f.id.startswith(id_) and (key is None or key in f.evidence)
                   for f in results.findings)  # fmt: skip

    return test


def _loader_sweep(results: Results) -> bool:
    return any(DataloaderMetrics.loader_samples_per_s.matches(m) for m in results.measurements)


_TRIALS: tuple[tuple[str, Callable[[Results], bool]], ...] = (
    ("the NCCL tuning sweep", _has_finding("collectives.tune.")),
    ("the DataLoader settings sweep", _loader_sweep),
    ("fused against foreach optimizer steps", _has_finding("weight_update.fused_vs_foreach")),
    ("the accumulation sweep", _has_finding("attribution.accum_idle", "rises")),
    ("the scaling prediction", _has_finding("prediction.scaling", "rows")),
    ("the batch-partition search", _has_finding("training.partition", "rows")),
)
"""The comparisons that can yield advice, and how a run shows it made them."""


def tried(results: Results) -> list[str]:
    """The comparisons this run made that can yield advice (what an empty advice list means:
    none of them beat the defaults beyond the noise); [] when it made none."""
    return [name for name, made in _TRIALS if made(results)]

"""Settings and metrics of the ``weight_update`` benchmark: no torch (the CLI, analysis and the
report read them); its measurement is :mod:`.measure`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterbench.benchmarks.training.settings import TrainingConfig
from clusterbench.benchmarks.weight_update.optimizers import (
    LAYOUTS,
    OPTIMIZERS,
    Layout,
    OptimizerName,
)
from clusterbench.declared.weight_update import WeightUpdateMetrics
from clusterbench.model_shapes import PRESETS, Model
from clusterbench.suites import check_suite

if TYPE_CHECKING:
    from typing import Self

__all__ = ["WeightUpdateConfig", "WeightUpdateMetrics"]


@dataclass(kw_only=True, slots=True)
class WeightUpdateConfig:
    """Settings of the ``weight_update`` benchmark; ``model`` is ``training``'s
    (``--set training.model=X`` sets both)."""

    model: Model = "tiny"
    """Workload whose parameters are updated: a ``training`` preset (tiny, 125m, 1.3b, ...)."""
    optimizers: list[OptimizerName] = field(default_factory=lambda: list(OPTIMIZERS))
    """adamw_fused, adamw_foreach, adamw_forloop, sgd_fused, sgd_foreach, sgd_forloop
    (torch.optim.AdamW / SGD with momentum, fused=True, foreach=True or neither)."""
    layouts: list[Layout] = field(default_factory=lambda: list(LAYOUTS))
    """fp32 (fp32 parameters and gradients, as autocast trains); bf16_master, fp16_master
    (half parameters and gradients, fp32 master weights; fp16 with a GradScaler)."""
    warmup: int = 3
    """Untimed updates before the timed ones (the first creates the optimizer state)."""
    repeats: int = 10
    """Timed updates per optimizer and layout; the median is reported."""

    def __post_init__(self) -> None:
        if self.model not in PRESETS:
            raise ValueError(f"unknown model {self.model!r} (choose from {', '.join(PRESETS)})")
        for name, known in (("optimizers", OPTIMIZERS), ("layouts", LAYOUTS)):
            chosen = getattr(self, name)
            if not chosen:
                raise ValueError(f"{name} must not be empty")
            unknown = [c for c in chosen if c not in known]
            if unknown:
                raise ValueError(f"unknown {name} {unknown} (choose from {', '.join(known)})")
        if self.warmup < 1:
            raise ValueError(f"warmup must be >= 1 (the first update creates the state), got "
                             f"{self.warmup}")  # fmt: skip
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")

    @classmethod
    def preset(cls, *, suite: str, device_type: str) -> Self:
        """The ``training`` preset's model; on GPUs the fused and foreach optimizers in the
        standard suite, every optimizer and more repeats in full.  The 1.3b's 1.42B parameters
        move 28-48 B each per update (40-70 GB), so 12 cases x 13 updates at a few TB/s should
        take a few seconds (an estimate, not yet measured)."""
        check_suite(suite, device_type)
        model = TrainingConfig.preset(suite=suite, device_type=device_type).model
        if device_type == "cpu":
            return cls(model=model, warmup=2, repeats=5)
        if suite == "full":
            return cls(model=model, warmup=5, repeats=30)
        fused_foreach = [o for o in OPTIMIZERS if not o.endswith("_forloop")]
        return cls(model=model, optimizers=fused_foreach, warmup=3, repeats=10)

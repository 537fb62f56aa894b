"""The ``training`` benchmark's limits: keys of the ``[thresholds]`` table (``--set
thresholds.KEY=VALUE``), each with its default; its findings read them with
``thresholds.of(TrainingThresholds)``.  Declared in :mod:`clusterbench.declared.training`,
below the benchmarks, since the cost analysis judges training's scaling by the same limit."""

from __future__ import annotations

from clusterbench.declared.training import TrainingThresholds

__all__ = ["TrainingThresholds"]

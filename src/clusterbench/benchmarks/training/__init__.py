"""Level 3: real distributed training workloads, and what costs hide outside the step.

The ``training`` benchmark, from the top down: :mod:`.bench` (the registered run function:
world sizes, groups, the series), :mod:`.sweeps` (the combination and accumulation sweeps),
:mod:`.partition` (the batch-size partition search),
:mod:`.cases` (one case: build, warm up, time, check), :mod:`.record` (its measurements),
:mod:`.strategies` / :mod:`.pipeline` / :mod:`.blocks` (wrapping a model for a strategy),
:mod:`.models` / :mod:`.decoder` / :mod:`.encoder` / :mod:`.workload` (the workloads),
:mod:`.formulas` (MFU, scaling efficiency), and :mod:`.settings` (``TrainingConfig``, the
cases and ``TrainingMetrics``).
"""

from clusterbench.benchmarks.training.duration import MODEL
from clusterbench.benchmarks.training.settings import TrainingConfig, TrainingMetrics
from clusterbench.benchmarks.training.thresholds import TrainingThresholds
from clusterbench.registry import FROM_STANDARD, Benchmark
from clusterbench.rules import VerdictLabel

__all__ = ["BENCHMARK"]

BENCHMARK = Benchmark(
    name="training",
    level=3,
    scope="workload",
    suites=FROM_STANDARD,
    run="clusterbench.benchmarks.training.bench:training",
    description=(
        "Training throughput, MFU, memory and scaling efficiency of a model and strategy."
    ),
    settings=TrainingConfig,
    metrics=TrainingMetrics,
    thresholds=TrainingThresholds,
    durations=MODEL,
    findings="clusterbench.benchmarks.training.findings:findings",
    section="clusterbench.benchmarks.training.section:section",
    figures="clusterbench.benchmarks.training.figures:figures",
    verdict_labels=(
        VerdictLabel(metric=TrainingMetrics.mfu, group="MFU", detail="{model} x{world_size}"),
    ),
)

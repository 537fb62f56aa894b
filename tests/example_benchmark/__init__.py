"""A benchmark of one's own, as a user would add it: this folder, and the ``register`` line.

``tiny`` all-reduces a vector of ones over the world, checks the sum and times it.  Its folder
takes the built-in benchmarks' shape: settings and metrics (:mod:`.settings`, no torch), the
measurement (:mod:`.measure`, the only module that imports torch), its verdicts
(:mod:`.findings`) and its summary section (:mod:`.section`), named below as
``"module:function"``, and its own rules: its limit (:mod:`.thresholds`) and its label in a
node's verdict line.  Nothing in clusterbench names it: the registration makes the config
accept ``--only tiny``, ``--set tiny.size=...`` and ``--set
thresholds.tiny_min_elements_per_s=...``, the rank loop run it, analysis apply its findings,
the verdict name its figure and the summary show its section.  A worker that runs it imports
``tests.example_benchmark.measure``, and with it this package, which registers it.
"""

from clusterbench.registry import Benchmark, register
from clusterbench.rules import VerdictLabel
from tests.example_benchmark.settings import TinyConfig, TinyMetrics
from tests.example_benchmark.thresholds import TinyThresholds

__all__ = ["BENCHMARK", "TinyConfig", "TinyMetrics", "TinyThresholds"]

BENCHMARK = Benchmark(
    name="tiny",
    level=2,
    scope="collective",
    run="tests.example_benchmark.measure:tiny",
    description="All-reduce a vector of ones, check the sum, time it.",
    settings=TinyConfig,
    metrics=TinyMetrics,
    findings="tests.example_benchmark.findings:findings",
    section="tests.example_benchmark.section:section",
    thresholds=TinyThresholds,
    verdict_labels=(VerdictLabel(metric=TinyMetrics.elements_per_s, group="tiny all-reduce"),),
)
register(BENCHMARK)

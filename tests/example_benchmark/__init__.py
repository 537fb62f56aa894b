"""A benchmark of one's own, as a user would add it: this folder, and the ``register`` line.

``tiny`` all-reduces a vector of ones over the world, checks the sum and times it.  Its folder
takes the built-in benchmarks' shape: settings and metrics (:mod:`.settings`, no torch), the
measurement (:mod:`.measure`, the only module that imports torch), its verdicts
(:mod:`.findings`) and its summary section (:mod:`.section`), named below as
``"module:function"``.  Nothing in clusterbench names it: the registration makes the config
accept ``--only tiny`` and ``--set tiny.size=...``, the rank loop run it, analysis apply its
findings and the summary show its section.  A worker that runs it imports
``tests.example_benchmark.measure``, and with it this package, which registers it.
"""

from clusterbench.registry import Benchmark, register
from tests.example_benchmark.settings import TinyConfig, TinyMetrics

__all__ = ["BENCHMARK", "TinyConfig", "TinyMetrics"]

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
)
register(BENCHMARK)

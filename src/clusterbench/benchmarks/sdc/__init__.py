"""The ``sdc`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its duration model (:mod:`.duration`)."""

from clusterbench.benchmarks.sdc.duration import MODEL
from clusterbench.benchmarks.sdc.settings import (
    SDC_DTYPES,
    SdcConfig,
    SdcDtype,
    SdcMetrics,
)
from clusterbench.registry import ALL_SUITES, Benchmark

__all__ = ["SDC_DTYPES", "SdcConfig", "SdcDtype", "SdcMetrics"]

BENCHMARK = Benchmark(
    name="sdc",
    level=1,
    scope="per_device",
    suites=ALL_SUITES,
    run="clusterbench.benchmarks.sdc.measure:sdc",
    description=(
        "Bit-for-bit GEMM check: fixed inputs on every device, across repeats and like devices."
    ),
    settings=SdcConfig,
    metrics=SdcMetrics,
    durations=MODEL,
    findings="clusterbench.benchmarks.sdc.findings:findings",
    section="clusterbench.benchmarks.sdc.section:section",
)

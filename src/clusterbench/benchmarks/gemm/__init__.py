"""The ``gemm`` benchmark: dense matrix-multiply throughput per device (:mod:`.measure`), its
settings and metrics (:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.gemm.settings import (
    DTYPES,
    TOLERANCE,
    Dtype,
    GemmConfig,
    GemmMetrics,
    check_shape_lists,
    parse_shape,
)

__all__ = [
    "DTYPES",
    "TOLERANCE",
    "Dtype",
    "GemmConfig",
    "GemmMetrics",
    "check_shape_lists",
    "parse_shape",
]

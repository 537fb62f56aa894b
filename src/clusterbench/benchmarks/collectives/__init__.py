"""The ``collectives`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch), the per-op facts (:mod:`.facts`, no torch: bus factor, buffer
sizes, the size sweep) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.collectives.settings import (
    MODES,
    TUNE_ALGOS,
    TUNE_OPS,
    TUNE_PROTOS,
    CollectivesConfig,
    CollectivesMetrics,
    DtypeAlias,
    TuneAlgo,
    TuneOp,
    TuneProto,
)

__all__ = [
    "MODES",
    "TUNE_ALGOS",
    "TUNE_OPS",
    "TUNE_PROTOS",
    "CollectivesConfig",
    "CollectivesMetrics",
    "DtypeAlias",
    "TuneAlgo",
    "TuneOp",
    "TuneProto",
]

"""The ``sdc`` benchmark: its measurement (:mod:`.measure`), its settings and metrics
(:mod:`.settings`, no torch) and its cost model (:mod:`.cost`)."""

from clusterbench.benchmarks.sdc.settings import (
    SDC_DTYPES,
    SdcConfig,
    SdcDtype,
    SdcMetrics,
)

__all__ = ["SDC_DTYPES", "SdcConfig", "SdcDtype", "SdcMetrics"]

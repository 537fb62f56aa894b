"""clusterbench: benchmark GPU clusters for AI workloads and say what to fix."""

from __future__ import annotations

from clusterbench._version import __version__
from clusterbench.config import ConfigError
from clusterbench.runner import RunOutcome, run
from clusterbench.schema import Results, load_results

__all__ = ["ConfigError", "Results", "RunOutcome", "__version__", "load_results", "run"]

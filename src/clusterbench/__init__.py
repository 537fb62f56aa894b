"""clusterbench: benchmark GPU clusters for AI workloads and say what to fix."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("clusterbench")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0+src"

# Imported after __version__: the runner reads it.
from clusterbench.config import ConfigError
from clusterbench.runner import RunOutcome, run
from clusterbench.schema import Results, load_results

__all__ = ["ConfigError", "Results", "RunOutcome", "__version__", "load_results", "run"]

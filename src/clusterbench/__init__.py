"""clusterbench: benchmark GPU clusters for AI workloads and say what to fix.

The names below load on first use (PEP 562), so that ``import clusterbench`` (and every
command that measures nothing) starts without the run machinery."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from clusterbench._version import __version__
from clusterbench.exits import ConfigError

if TYPE_CHECKING:
    from clusterbench.pipeline.options import RunOptions
    from clusterbench.pipeline.start import RunOutcome, run
    from clusterbench.schema import Results, load_results

__all__ = [
    "ConfigError",
    "Results",
    "RunOptions",
    "RunOutcome",
    "__version__",
    "load_results",
    "run",
]

_LAZY = {
    "RunOptions": "clusterbench.pipeline.options",
    "RunOutcome": "clusterbench.pipeline.start",
    "run": "clusterbench.pipeline.start",
    "Results": "clusterbench.schema",
    "load_results": "clusterbench.schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'clusterbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

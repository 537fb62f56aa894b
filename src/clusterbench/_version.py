"""The installed version of clusterbench (one place; the package face re-exports it)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("clusterbench")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0+src"

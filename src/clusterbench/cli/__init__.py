"""Command line: parse, build the config, call the library, map the outcome to an exit code.

Each command lives in its own module, ``cli/<command>.py`` (``import`` in ``imports.py``,
``list`` in ``listing.py``), and defines itself on ``app`` from ``cli/common.py``; importing
the module below registers it.  Heavy imports stay inside the commands' functions, so a usage
error and ``--help`` come before torch or the pipeline load.

Exit codes: 0 no ``fail`` finding; 1 some ``fail`` finding; 2 bad usage or config; 3 run error.
"""

from __future__ import annotations

import sys

import typer

from clusterbench.cli.common import app
from clusterbench.exits import EXIT_RUN_ERROR

# The order of these lines is the order of 'clusterbench --help': typer lists the commands in
# the order they were defined, then the groups (history, baseline, import) in theirs.
# isort: off
from clusterbench.cli import run  # noqa: F401
from clusterbench.cli import listing  # noqa: F401
from clusterbench.cli import info  # noqa: F401
from clusterbench.cli import doctor  # noqa: F401
from clusterbench.cli import launch  # noqa: F401
from clusterbench.cli import schema  # noqa: F401
from clusterbench.cli import history  # noqa: F401
from clusterbench.cli import compare  # noqa: F401
from clusterbench.cli import baseline  # noqa: F401
from clusterbench.cli import cost  # noqa: F401
from clusterbench.cli import export  # noqa: F401
from clusterbench.cli import imports  # noqa: F401
from clusterbench.cli import predict  # noqa: F401
from clusterbench.cli import report  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("clusterbench: interrupted", err=True)
        sys.exit(EXIT_RUN_ERROR)
    except SystemExit:
        # click (and typer's copy of it) ends a write to a closed pipe (| head) with exit 1
        # after wrapping stdout in its PacifyFlushWrapper; a reader that stopped early is no
        # failure
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            sys.exit(0)
        raise

"""The ``clusterbench`` command's entry point.

``clusterbench run`` on a machine with a GPU driver starts the workers' fork server first,
before the command line is read: the server imports torch (and the rank loop), the longest
wait of a run's start on a fresh machine, while this process reads the command line, builds
the config and the plan.  A command line that turns out wrong stops the server at once.
Everything else goes straight to the command line (:func:`clusterbench.cli.main`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from itertools import pairwise

__all__ = ["main", "starts_workers"]


def starts_workers(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether this command will start GPU workers of its own: ``run`` (not ``--help``,
    ``--plan`` or ``--device cpu``), under no launcher, on a machine with a GPU driver."""
    from clusterbench.hardware.visible import gpu_driver_loaded
    from clusterbench.runtime.launch import detect_launcher

    if not argv or argv[0] != "run":
        return False
    if {"-h", "--help", "--plan", "--device=cpu"} & set(argv):
        return False
    if any(a == "--device" and b == "cpu" for a, b in pairwise(argv)):
        return False
    try:
        if detect_launcher(env) is not None:
            return False
    except ValueError:  # a launcher's variable that is no number: the run says so
        return False
    return gpu_driver_loaded()


def main() -> None:
    started = starts_workers(sys.argv[1:], os.environ)
    if started:
        from clusterbench.runtime.launch import start_fork_server, stop_fork_server

        start_fork_server()
    from clusterbench.cli import main as cli_main

    try:
        cli_main()
    except SystemExit as exc:
        if started and exc.code == 2:  # a usage error: no worker will come
            stop_fork_server()
        raise

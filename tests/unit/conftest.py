"""The fast tier holds in-process tests only: a test here that starts a process (a subprocess,
a forked or spawned worker, a browser, a server) fails at once with ``StartsAProcess``, which
names the tier where it belongs. Tests that need processes live in ``tests/integration``,
``tests/dist`` and ``tests/multinode``."""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

_HERE = Path(__file__).parent


class StartsAProcess(RuntimeError):
    """Raised by any attempt to start a process inside a ``tests/unit`` test."""


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise StartsAProcess(
        "tests/unit is the in-process tier: a test that starts a process belongs in "
        "tests/integration, tests/dist or tests/multinode (docs/architecture.md, 'Tests')"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """Around each test here, its fixtures' setup and teardown included (a module-scoped
    fixture sets up inside its first test's protocol).  pytest calls this hook for every test
    of the session, so tests of other folders collected beside these pass through."""
    if not item.path.is_relative_to(_HERE):
        return (yield)
    # subprocess (and so every library that runs a command) goes through _fork_exec or
    # posix_spawn; multiprocessing's fork start method through os.fork, spawn and forkserver
    # through _posixsubprocess.fork_exec.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "_fork_exec", _refuse, raising=False)
        patch.setattr(subprocess, "_USE_POSIX_SPAWN", False, raising=False)
        patch.setattr(_posixsubprocess, "fork_exec", _refuse)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                patch.setattr(os, name, _refuse)
        return (yield)

"""The fast tier's guard: starting a process in a ``tests/unit`` test fails at once."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest

TIER = "tests/unit is the in-process tier"


def test_a_subprocess_is_refused() -> None:
    with pytest.raises(RuntimeError, match=TIER):
        subprocess.run([sys.executable, "-c", "pass"], check=False)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_worker_process_is_refused(method: str) -> None:
    process = multiprocessing.get_context(method).Process(target=print)
    with pytest.raises(RuntimeError, match=TIER):
        process.start()


def test_a_shell_command_is_refused() -> None:
    with pytest.raises(RuntimeError, match=TIER):
        os.system("true")

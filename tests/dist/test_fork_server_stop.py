"""A fork server that ``clusterbench run`` started before reading its command line is stopped
at once when the command line is wrong (no worker will be asked of it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.dist


def test_a_started_server_is_stopped_at_once(tmp_path: Path) -> None:
    """A fork server whose preload would take a minute (a module that sleeps) ends within
    seconds of stop_fork_server, in a process of its own (this one's multiprocessing state is
    left alone)."""
    (tmp_path / "slow_preload.py").write_text("import time\ntime.sleep(60)\n")
    script = textwrap.dedent(
        """
        import multiprocessing.forkserver, os, sys, time
        from clusterbench.runtime.launch import start_fork_server, stop_fork_server
        start_fork_server("slow_preload")
        pid = multiprocessing.forkserver._forkserver._forkserver_pid
        stop_fork_server()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                print("stopped")
                break
            time.sleep(0.05)
        """
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=60, check=True)  # fmt: skip
    assert out.stdout.strip() == "stopped", out.stderr

"""The small process between a Ray worker and its clusterbench run: it passes the exit code on
and tells the command when its parent dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from clusterbench.ray._child import __file__ as CHILD


def _child(*command: str, parent: int | None = None) -> list[str]:
    return [sys.executable, CHILD, str(parent or os.getpid()), *command]


def test_child_passes_the_exit_code_on() -> None:
    code = subprocess.run(_child(sys.executable, "-c", "raise SystemExit(5)"), check=False)
    assert code.returncode == 5
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    assert subprocess.run(_child(sys.executable, "-c", killed), check=False).returncode == 137


def test_child_tells_the_command_when_its_parent_dies(tmp_path: Path) -> None:
    """A parent (the Ray worker) killed: the child goes, and the command gets SIGTERM."""
    said = tmp_path / "said"
    command = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(said)!r}, 'w').write('TERM'),"
        " sys.exit(0)))\n"
        f"open({str(said)!r} + '.up', 'w').close()\n"
        "time.sleep(60)\n"
    )
    parent_code = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {CHILD!r}, str(os.getpid()), sys.executable, '-c',"
        f" {command!r}])\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 30
        while not Path(f"{said}.up").exists():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        parent.send_signal(signal.SIGKILL)
        while not said.exists():
            assert time.monotonic() < deadline, "the command was not told"
            time.sleep(0.05)
        assert said.read_text() == "TERM"
    finally:
        parent.kill()
        parent.wait()

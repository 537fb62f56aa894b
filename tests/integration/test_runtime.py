"""Deadlines over real processes: a hung process is ended, and the grace lets a waiter finish."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from clusterbench.runtime.watchdog import EXIT_TIMEOUT


def test_deadline_ends_a_hung_process(tmp_path: Path) -> None:
    marker = tmp_path / "expired"
    code = textwrap.dedent(f"""
        import time
        from clusterbench.runtime.watchdog import Deadline
        with Deadline(0.5, lambda: open({str(marker)!r}, "w").write("x")):
            time.sleep(30)
    """)
    proc = subprocess.run([sys.executable, "-c", code], timeout=20, check=False)
    assert proc.returncode == EXIT_TIMEOUT
    assert marker.read_text() == "x"


def test_deadline_grace_lets_the_waiter_finish(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import time
        from clusterbench.runtime.watchdog import Deadline
        with Deadline(0.3, lambda: None, grace_s=5, grace_if=lambda: True):
            time.sleep(1.0)
        print("finished")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code], timeout=20, check=False, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "finished" in proc.stdout

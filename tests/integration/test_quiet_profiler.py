"""torch.profiler's kineto lines stay off a real process's stderr; real errors written meanwhile
still show, and a rank that dies inside the profiler leaves what it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.unit.test_quiet_profiler import PROFILE


def _python(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
        check=False,
    )


def test_a_real_profiler_leaves_no_kineto_lines(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    bare = _python(
        PROFILE.format(spill=str(tmp_path / "unused"), last="pass").replace(
            "with quiet_profiler(spill), ", "with "
        )
    )
    assert bare.returncode == 0, bare.stderr
    assert "profiler_start" in bare.stderr  # what the profiler prints without it

    proc = _python(PROFILE.format(spill=str(spill), last="pass"))
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout
    assert "python says hello" in proc.stderr and "a real error from C" in proc.stderr
    assert "USDT:" not in proc.stderr and "STAGE:" not in proc.stderr, proc.stderr
    assert not spill.exists()


def test_kineto_log_level_set_by_the_user_is_left_alone(tmp_path: Path) -> None:
    proc = _python(
        PROFILE.format(spill=str(tmp_path / "spill"), last="pass"), env={"KINETO_LOG_LEVEL": "3"}
    )
    assert proc.returncode == 0, proc.stderr
    assert "STAGE:" in proc.stderr and "a real error from C" in proc.stderr


def test_a_rank_that_dies_inside_leaves_what_it_wrote(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    proc = _python(PROFILE.format(spill=str(spill), last="os._exit(3)"))
    assert proc.returncode == 3
    assert "a real error from C" in spill.read_text()

"""The documentation's runnable examples: every fenced command under a ``<!-- runnable -->``
line in docs/ and README.md runs here, on CPU, and must succeed, so a renamed command or flag
in the docs fails a test instead of a reader."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"<!-- runnable -->\n```[\w-]*\n(?P<command>[^\n]+)\n```", re.M)


def _examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for m in _BLOCK.finditer(page.read_text(encoding="utf-8")):
            found.append((str(page.relative_to(ROOT)), m.group("command")))
    return found


EXAMPLES = _examples()


def test_the_docs_have_runnable_examples() -> None:
    assert len(EXAMPLES) >= 5, EXAMPLES
    assert all(cmd.startswith("clusterbench ") for _, cmd in EXAMPLES), EXAMPLES


@pytest.mark.parametrize(("page", "command"), EXAMPLES, ids=[f"{p}:{c}" for p, c in EXAMPLES])
def test_a_runnable_example_runs(page: str, command: str, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "clusterbench", *shlex.split(command)[1:]]
    env = {**os.environ, "COLUMNS": "100", "CLUSTERBENCH_HISTORY": str(tmp_path / "h.db")}
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, f"{page}: {command}\n{proc.stderr[-2000:]}"
    assert proc.stdout.strip(), f"{page}: {command} printed nothing"
    if command.endswith("--help"):  # the usage line names the command the page documents
        usage = next(line for line in proc.stdout.splitlines() if "Usage:" in line)
        assert all(word in usage.split() for word in command.split()[:-1]), usage

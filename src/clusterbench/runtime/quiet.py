"""Keep torch.profiler's progress lines off the terminal, and everything else on it.

Kineto (the profiler's C++ library) writes ``STAGE:... Completed Stage: Warm Up`` and
``USDT:... profiler_start`` lines straight to file descriptor 2 at its default log level, and
``KINETO_LOG_LEVEL`` cannot drop them without dropping its errors too (USDT is its highest
level).  So, around the profiler, descriptor 2 goes to a file; Python's ``sys.stderr`` keeps
writing to the terminal (progress bars, warnings, tracebacks); when the block ends, every line
written to descriptor 2 meanwhile except kineto's INFO/STAGE/USDT chatter is passed on (a
kineto ERROR, a C++ warning).  The file sits in the run folder until then, so a rank that dies
inside the block leaves what it wrote there.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["KINETO_CHATTER", "quiet_profiler"]

KINETO_CHATTER = re.compile(
    r"^(?:INFO|STAGE|USDT):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \S+:\d+\] "
)
"""A line of kineto's own progress log (its levels below WARNING, and its USDT markers)."""


@contextlib.contextmanager
def quiet_profiler(spill: Path) -> Iterator[None]:
    """Drop kineto's chatter written to descriptor 2 inside the block; ``spill`` holds what
    was written until the block ends.  With ``KINETO_LOG_LEVEL`` set, the user asked for
    kineto's log: nothing is held back."""
    if os.environ.get("KINETO_LOG_LEVEL") or not _has_fd2():
        yield
        return
    spill.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    held = os.open(spill, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    python_stderr = sys.stderr
    terminal = io.TextIOWrapper(
        os.fdopen(os.dup(saved), "wb", buffering=0), encoding="utf-8", errors="backslashreplace",
        line_buffering=True, write_through=True,
    )  # fmt: skip
    os.dup2(held, 2)
    if _writes_to_fd2(python_stderr):  # else Python's stderr goes elsewhere already
        sys.stderr = terminal
    try:
        yield
    finally:
        terminal.flush()
        os.dup2(saved, 2)
        sys.stderr = python_stderr
        terminal.close()
        os.close(saved)
        os.close(held)
        _pass_on(spill)


def _has_fd2() -> bool:
    try:
        os.fstat(2)
    except OSError:
        return False
    return True


def _writes_to_fd2(stream: object) -> bool:
    try:
        return stream.fileno() == 2  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _pass_on(spill: Path) -> None:
    """Write the held lines that are not kineto's chatter to stderr, then remove the file."""
    text = spill.read_text(encoding="utf-8", errors="replace")
    kept = [line for line in text.splitlines(keepends=True) if not KINETO_CHATTER.match(line)]
    if kept:
        sys.stderr.write("".join(kept))
        sys.stderr.flush()
    spill.unlink(missing_ok=True)

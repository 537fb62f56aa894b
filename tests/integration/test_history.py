"""A history database locked by another process past the timeout: one error, then it works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.history_db import (
    HistoryError,
    open_history,
)
from tests.unit.test_history import _HOLD_LOCK, make_results


def test_a_database_locked_past_the_timeout_is_one_error_then_works(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with open_history(db) as history:  # created, in WAL mode
        history.record(make_results("first", "2026-12-01T10:00:00+00:00"), tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        history = open_history(db, timeout_s=0.3)
        with pytest.raises(HistoryError, match="locked") as info:
            history.record(make_results("second", "2026-12-02T10:00:00+00:00"), tmp_path)
        history.close()
        assert "\n" not in str(info.value)
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    with open_history(db, timeout_s=0.3) as history:
        history.record(make_results("second", "2026-12-02T10:00:00+00:00"), tmp_path)
        assert [r.id for r in history.runs()] == ["second", "first"]

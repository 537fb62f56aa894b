"""Runs that tests in several modules read: made once a session (the tests that read one share
an ``xdist_group``, so under pytest-xdist they run in the worker that made it)."""

from __future__ import annotations

import pytest

from clusterbench import load_results
from tests.helpers import Run, cli


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``clusterbench run`` of the default (quick) suite on two CPU workers."""
    out = tmp_path_factory.mktemp("quick") / "run"
    proc = cli("run", "--device", "cpu", "--nproc", "2", "--out", str(out), timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return Run(proc, out, load_results(out))

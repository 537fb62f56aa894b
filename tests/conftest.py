"""Shared pytest hooks: tests marked ``gpu`` are skipped where CUDA is unavailable, and every
test's runs are recorded in a history database of its own (a module's shared fixtures' in one
of the session's), never the user's, and caches go to the session's folder; ``world``: a
one-rank gloo process group for a test that calls a benchmark in its own process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterbench import catalog
from clusterbench.history_db import HISTORY_ENV

# as the entry points do (the command line, the run pipeline): the registry holds the built-in
# benchmarks before a test looks one up
catalog.register_builtin()


@pytest.fixture(scope="session", autouse=True)
def _shared_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Module- and session-scoped fixtures run before a test's own fixtures: the runs they
    start record into this temporary database, not the user's."""
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("history-shared") / "history.sqlite"
        patch.setenv(HISTORY_ENV, str(path))
        # the report's packed plotly.js is cached here, not in the user's ~/.cache
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        # the CLI's tables are as wide as COLUMNS says (120 without it, off a terminal):
        # pytest-xdist sets it to 80 in its workers, a user's shell may set anything
        patch.delenv("COLUMNS", raising=False)
        yield


@pytest.fixture(autouse=True)
def _own_history(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs started by a test (in this process or its subprocesses) record into a temporary
    database instead of ~/.local/share/clusterbench/history.sqlite."""
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path_factory.mktemp("history") / "history.sqlite"))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[None]:
    """A one-rank gloo process group (a file store under the test's folder), destroyed after."""
    import torch.distributed as dist

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under pytest-xdist's --dist loadgroup (.ci/run) a module's tests run in one worker, so
    # its module-scoped runs are made once, unless a test names a group of its own: tests in
    # several modules that read one session-scoped run share a group (before xdist's own
    # hook reads the groups, hence tryfirst).
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if not any("gpu" in item.keywords for item in items):
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

"""Shared pytest hooks: tests marked ``gpu`` are skipped where CUDA is unavailable, and every
test's runs are recorded in a history database of its own, never the user's."""

from __future__ import annotations

import pytest

from clusterbench.history import HISTORY_ENV


@pytest.fixture(autouse=True)
def _own_history(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs started by a test (in this process or its subprocesses) record into a temporary
    database instead of ~/.local/share/clusterbench/history.sqlite."""
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path_factory.mktemp("history") / "history.sqlite"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any("gpu" in item.keywords for item in items):
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

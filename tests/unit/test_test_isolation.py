"""The tests' own runs never reach the user's history: a module-scoped fixture (which runs
before any test's own fixtures) already sees a temporary database."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterbench.history_db import HISTORY_ENV


@pytest.fixture(scope="module")
def module_history() -> str | None:
    return os.environ.get(HISTORY_ENV)


def test_a_module_fixture_records_into_a_temporary_history(
    module_history: str | None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert module_history is not None
    assert Path(module_history).is_relative_to(tmp_path_factory.getbasetemp())
    assert os.environ[HISTORY_ENV] != module_history  # and each test has one of its own

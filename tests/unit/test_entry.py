"""The command's entry point: which command lines start the workers' fork server before the
command line is read (tests/dist/test_fork_server_stop.py: a started server stopped at once
when no worker will come)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench import entry
from clusterbench.hardware import visible


@pytest.fixture
def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU driver's control device, as a file of the test's own."""
    node = tmp_path / "nvidiactl"
    node.touch()
    monkeypatch.setattr(visible, "GPU_DRIVER_NODES", (str(node),))
    return node


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run"], True),
        (["run", "--only", "gemm", "--out", "x"], True),
        (["run", "--device", "cuda"], True),
        (["run", "--device", "cpu"], False),
        (["run", "--device=cpu"], False),
        (["run", "--plan"], False),
        (["run", "--help"], False),
        (["run", "-h"], False),
        (["doctor"], False),
        (["report", "run"], False),
        ([], False),
    ],
)
def test_only_a_run_that_starts_gpu_workers_here_starts_the_server(
    driver: Path, argv: list[str], expected: bool
) -> None:
    assert entry.starts_workers(argv, {}) is expected


def test_no_server_under_a_launcher_or_without_a_driver(driver: Path) -> None:
    assert entry.starts_workers(["run"], {"RANK": "0", "WORLD_SIZE": "2"}) is False
    assert entry.starts_workers(["run"], {"RANK": "x", "WORLD_SIZE": "2"}) is False
    driver.unlink()
    assert entry.starts_workers(["run"], {}) is False

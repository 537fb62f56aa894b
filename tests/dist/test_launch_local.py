"""``launch_local`` forks its workers from a fork server started at the first launch: every
later launch from the same process must still give its workers that process's environment and
working directory as they are at that launch, plus the launcher's own variables."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterbench.runtime.launch import launch_local

pytestmark = pytest.mark.dist


def report_environment(out: str) -> None:
    """A worker: write what it sees (its rank's file under ``out``)."""
    rank = os.environ["RANK"]
    seen = {
        "rank": rank,
        "world_size": os.environ["WORLD_SIZE"],
        "marker": os.environ.get("CB_TEST_MARKER"),
        "gone": os.environ.get("CB_TEST_GONE"),
        "cwd": os.getcwd(),
        "parent": os.getppid(),
    }
    Path(out, f"rank-{rank}.json").write_text(json.dumps(seen))


def _launch(out: Path, *, run_id: str) -> list[dict[str, str | None]]:
    out.mkdir()
    failures = launch_local(
        report_environment, str(out), nproc=2, run_id=run_id, log_dir=out / "logs"
    )
    assert failures == []
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]


def test_each_launch_sees_the_environment_and_directory_of_its_own_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_dir, second_dir = tmp_path / "d1", tmp_path / "d2"
    first_dir.mkdir()
    second_dir.mkdir()
    monkeypatch.setenv("CB_TEST_MARKER", "first")
    monkeypatch.setenv("CB_TEST_GONE", "here")
    monkeypatch.chdir(first_dir)
    first = _launch(tmp_path / "a", run_id="first")
    assert [(s["rank"], s["world_size"]) for s in first] == [("0", "2"), ("1", "2")]
    assert all(s["parent"] != os.getpid() for s in first)  # the fork server's children
    assert {(s["marker"], s["gone"], s["cwd"]) for s in first} == {
        ("first", "here", str(first_dir))
    }
    # the fork server now runs with the first moment's environment: the second launch must
    # not see it
    monkeypatch.setenv("CB_TEST_MARKER", "second")
    monkeypatch.delenv("CB_TEST_GONE")
    monkeypatch.chdir(second_dir)
    second = _launch(tmp_path / "b", run_id="second")
    assert [(s["rank"], s["world_size"]) for s in second] == [("0", "2"), ("1", "2")]
    assert {(s["marker"], s["gone"], s["cwd"]) for s in second} == {
        ("second", None, str(second_dir))
    }


def test_a_fork_server_started_early_is_the_one_the_workers_come_from(tmp_path: Path) -> None:
    """runner.run starts the GPU workers' fork server before it imports torch itself, so that
    the two imports overlap; the launch then forks its workers from that server."""
    import multiprocessing.forkserver

    from clusterbench.runtime.launch import start_fork_server

    start_fork_server(__name__)
    server = multiprocessing.forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    assert server is not None
    seen = _launch(tmp_path / "a", run_id="early")
    assert {s["parent"] for s in seen} == {server}

"""``launch_local`` forks its workers from a fork server started at the first launch: every
later launch from the same process must still give its workers that process's environment and
working directory as they are at that launch, plus the launcher's own variables.  A worker
that fails (raises, exits, is killed) is the one failure returned and the others are ended;
a SIGINT or SIGTERM to the launching process stops them with the same signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.runtime.launch import WorkerFailure, launch_local

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


def _launch(out: Path) -> list[dict[str, str | None]]:
    out.mkdir()
    failures = launch_local(report_environment, str(out), nproc=2, log_dir=out / "logs")
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
    first = _launch(tmp_path / "a")
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
    second = _launch(tmp_path / "b")
    assert [(s["rank"], s["world_size"]) for s in second] == [("0", "2"), ("1", "2")]
    assert {(s["marker"], s["gone"], s["cwd"]) for s in second} == {
        ("second", None, str(second_dir))
    }


def done_but_slow_to_end(out: str) -> None:
    """A worker whose work is done at once but whose process ends only once ``out/go``
    exists (as a GPU process's end waits on its CUDA context's teardown)."""
    import multiprocessing.util

    def wait_for_go() -> None:
        while not Path(out, "go").exists():
            time.sleep(0.01)
        Path(out, f"ended-{os.environ['RANK']}").touch()

    multiprocessing.util.Finalize(None, wait_for_go, exitpriority=0)  # runs at its exit
    Path(out, f"done-{os.environ['RANK']}").touch()


def test_the_launch_returns_when_the_workers_are_done_not_when_they_have_ended(
    tmp_path: Path,
) -> None:
    """A worker that said it is done lets the launch return while its process still ends;
    wait_for_workers then waits for that end, and the next launch waits for it first."""
    from clusterbench.runtime import launch

    out = tmp_path / "w"
    out.mkdir()
    assert launch_local(done_but_slow_to_end, str(out), nproc=2, log_dir=out / "logs") == []
    assert {p.name for p in out.glob("done-*")} == {"done-0", "done-1"}
    ending = list(launch._ending)
    assert len(ending) == 2 and all(worker.is_alive() for worker in ending)
    assert not list(out.glob("ended-*"))
    (out / "go").touch()
    launch.wait_for_workers()
    assert [worker.exitcode for worker in ending] == [0, 0]
    assert {p.name for p in out.glob("ended-*")} == {"ended-0", "ended-1"}
    assert launch._ending == []


def test_a_fork_server_started_early_is_the_one_the_workers_come_from(tmp_path: Path) -> None:
    """runner.run starts the GPU workers' fork server before it imports torch itself, so that
    the two imports overlap; the launch then forks its workers from that server."""
    import multiprocessing.forkserver

    from clusterbench.runtime.launch import start_fork_server

    start_fork_server(__name__)
    server = multiprocessing.forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    assert server is not None
    seen = _launch(tmp_path / "a")
    assert {s["parent"] for s in seen} == {server}


def fail_or_wait(out: str, how: str) -> None:
    """A worker: rank 1 fails ``how`` (raise, exit, kill); the others wait to be stopped."""
    rank = int(os.environ["RANK"])
    print(f"rank {rank} says hello", flush=True)
    if rank != 1:
        Path(out, f"rank-{rank}.pid").write_text(str(os.getpid()))
        time.sleep(120)
        return
    while len(list(Path(out).glob("rank-*.pid"))) < int(os.environ["WORLD_SIZE"]) - 1:
        time.sleep(0.05)
    if how == "raise":
        raise RuntimeError("failed on purpose\nsecond line")
    if how == "exit":
        os._exit(17)
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize(
    ("how", "exitcode", "message"),
    [("raise", 1, "RuntimeError: failed on purpose"), ("exit", 17, ""),
     ("kill", -signal.SIGKILL, "")],
)  # fmt: skip
def test_a_failing_worker_is_the_failure_and_the_others_are_stopped(
    tmp_path: Path, how: str, exitcode: int, message: str
) -> None:
    t0 = time.monotonic()
    failures = launch_local(fail_or_wait, str(tmp_path), how, nproc=3, log_dir=tmp_path / "logs")
    assert failures == [WorkerFailure(rank=1, exitcode=exitcode, message=message)]
    assert time.monotonic() - t0 < 60  # the waiting ranks were ended, not waited for
    for rank in (0, 2):
        pid = int((tmp_path / f"rank-{rank}.pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # rank 0 keeps the terminal; the others' output is in their own files
    assert (tmp_path / "logs" / "rank-00001.stdout.log").read_text() == "rank 1 says hello\n"
    assert (tmp_path / "logs" / "rank-00002.stdout.log").read_text() == "rank 2 says hello\n"
    stderr = (tmp_path / "logs" / "rank-00001.stderr.log").read_text()
    assert ("Traceback" in stderr) == (how == "raise")


def test_the_entry_point_by_name_is_imported_in_the_worker(tmp_path: Path) -> None:
    failures = launch_local(f"{__name__}:report_environment", str(tmp_path), nproc=2,
                            log_dir=tmp_path / "logs")  # fmt: skip
    assert failures == []
    assert {json.loads(p.read_text())["rank"] for p in tmp_path.glob("rank-*.json")} == {"0", "1"}


_INTERRUPT = """
import os, signal, sys, threading, time
from pathlib import Path
from clusterbench.runtime.launch import Interrupted, launch_local
from tests.dist.test_launch_local import wait_to_be_stopped
out = Path(sys.argv[1])
threading.Timer(3.0, os.kill, (os.getpid(), signal.{signal})).start()
try:
    launch_local(wait_to_be_stopped, str(out), nproc=2, log_dir=out / "logs")
except Interrupted as exc:
    print("interrupted by", signal.Signals(exc.signum).name)
"""


def wait_to_be_stopped(out: str) -> None:
    """A worker: says which signal ended it (SIGINT: KeyboardInterrupt; SIGTERM: its death)."""
    rank = os.environ["RANK"]
    try:
        time.sleep(120)
    except KeyboardInterrupt:
        Path(out, f"rank-{rank}.interrupted").write_text("")
        raise


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_to_the_launcher_stops_the_workers_with_it(tmp_path: Path, signame: str) -> None:
    """Only the launching process gets the signal (no terminal's group): it passes it on."""
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT.format(signal=signame), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2], check=False,
    )  # fmt: skip
    assert proc.stdout.strip() == f"interrupted by {signame}", proc.stderr[-3000:]
    interrupted = sorted(p.name for p in tmp_path.glob("*.interrupted"))
    assert interrupted == (["rank-0.interrupted", "rank-1.interrupted"]
                           if signame == "SIGINT" else [])  # fmt: skip


def test_a_launch_from_another_thread_runs_its_workers(tmp_path: Path) -> None:
    """Signal handlers are the main thread's only: from another thread the launch goes on
    without them."""
    import threading

    seen: list[list[dict[str, str | None]]] = []
    thread = threading.Thread(target=lambda: seen.append(_launch(tmp_path / "a")))
    thread.start()
    thread.join(timeout=120)
    assert [[s["rank"] for s in ranks] for ranks in seen] == [["0", "1"]]

"""Real faults, not planted ones: a CPU worker killed (SIGKILL) or stopped (SIGSTOP) in the middle
of the collectives benchmark.  The first failure line must name that rank, with what it was
doing, and then the rank that only waited for it; what finished before stays on disk."""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.helpers import wait_for_activity

pytestmark = pytest.mark.dist

HOST = socket.gethostname()
TIMEOUT_S = 15


def _args(out: Path) -> list[str]:
    # gemm finishes first (kept); collectives then runs long enough to be caught in an op
    return [
        "run", "--device", "cpu", "--nproc", "2", "--out", str(out), "--timeout", str(TIMEOUT_S),
        "--only", "gemm,collectives", "--set", "gemm.shapes=64x64x64", "--set", "gemm.dtypes=fp32",
        "--set", "collectives.ops=all_reduce", "--set", "collectives.modes=back_to_back",
        "--set", "collectives.min_bytes=1048576", "--set", "collectives.max_bytes=1048576",
        "--set", "collectives.iters=100000",
    ]  # fmt: skip


def _start(out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "clusterbench", *_args(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def _rank1_in_collective(out: Path, proc: subprocess.Popen[str]) -> int:
    """Rank 1's pid, once its flight record says it is inside the all-reduce."""
    try:
        return int(wait_for_activity(out, 1, "in all_reduce", timeout=120)["pid"])
    except AssertionError:
        proc.kill()
        raise AssertionError(f"rank 1 never entered the all-reduce: {proc.communicate()}") from None


def _first_line_names_rank1(proc: subprocess.Popen[str], out: Path, what: str) -> str:
    """The run's stderr, once its first failure line named rank 1 doing ``what``."""
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 3, stderr
    assert "Traceback" not in stderr
    failure = next(line for line in stderr.splitlines() if "run failed" in line)
    assert failure.startswith(f"clusterbench: run failed: rank 1 on host {HOST} {what}"), failure
    assert "in all_reduce of 1 MiB on group world" in failure
    assert f"waiting for it: rank 0 (host {HOST})" in failure
    results = load_results(out)
    assert results.run.status == "failed"
    assert [e.rank for e in results.errors] == [1, 0]
    assert results.errors[1].message.startswith(
        f"rank 0 on host {HOST} was waiting for rank 1 in collectives"
    )
    assert {m.rank for m in results.measurements if m.benchmark == "gemm"} == {0, 1}
    return stderr


def test_a_killed_worker_is_the_culprit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    os.kill(_rank1_in_collective(out, proc), signal.SIGKILL)
    _first_line_names_rank1(proc, out, "was killed by SIGKILL during collectives")


def test_a_stopped_worker_is_the_culprit(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _start(out)
    pid = _rank1_in_collective(out, proc)
    os.kill(pid, signal.SIGSTOP)
    try:
        stderr = _first_line_names_rank1(proc, out, "stopped responding during collectives")
        _stack_of_rank1_kept(out)
        # rank 0 ended the stopped rank once its stack was kept: the launcher did not wait
        # 30 s for a SIGTERM it cannot hear (torch then says it had to use SIGKILL)
        assert "Unable to shutdown process" not in stderr, stderr
    finally:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break


def test_a_stopped_run_leaves_the_terminal_clean(tmp_path: Path) -> None:
    """On a terminal, the launcher stopped (SIGTERM) while rank 0 draws its bars and waits in a
    collective: rank 0 ends its bars' line and shows the cursor again before it goes, so
    every line the launcher writes after it begins a line of its own."""
    out = tmp_path / "run"
    primary, secondary = pty.openpty()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "xterm-256color", "COLUMNS": "100"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterbench", *_args(out)],
        stdin=secondary, stdout=secondary, stderr=secondary, env=env, close_fds=True,
    )  # fmt: skip
    os.close(secondary)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(primary, chunks), daemon=True)
    reader.start()
    try:
        _rank1_in_collective(out, proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=30)
    os.close(primary)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    assert "clusterbench: interrupted" in text, text
    hidden = text.rfind("\x1b[?25l")
    assert hidden >= 0 and "\x1b[?25h" in text[hidden:], repr(text[-400:])  # cursor shown
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    for start in (m.start() for m in re.finditer("clusterbench: ", plain)):
        assert start == 0 or plain[start - 1] == "\n", repr(plain[max(0, start - 120) : start + 40])


def _read_all(fd: int, chunks: list[bytes]) -> None:
    """Everything the terminal shows until the last process holding it closes it."""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: no process holds the terminal any more
            return
        if not data:
            return
        chunks.append(data)


def _stack_of_rank1_kept(out: Path) -> None:
    """py-spy (the test extra installs it) read the stopped rank's Python stack: kept in the
    run folder, named in its error, and showing where in clusterbench it stopped."""
    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        pytest.skip("py-spy is not installed")
    stack = out / "ranks" / "rank-00001.stack.txt"
    assert stack.exists(), sorted(p.name for p in (out / "ranks").iterdir())
    text = stack.read_text()
    assert text.startswith(f"# rank 1 on host {HOST}, no heartbeat for ")
    assert "clusterbench" in text and "run_benchmarks" in text and "collectives" in text, text
    results = load_results(out)
    assert f"its Python stack: {stack}" in results.errors[0].message


def test_a_stack_py_spy_cannot_read_is_one_line_of_why(tmp_path: Path) -> None:
    """py-spy on a process that is not Python fails: the run keeps its reason in one line,
    and the culprit's error names it, instead of a stack."""
    from clusterbench.runtime.flight import FlightState, read_stacks, save_stack

    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        pytest.skip("py-spy is not installed")
    (tmp_path / "ranks").mkdir()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        state = FlightState(rank=3, host=HOST, pid=sleeper.pid)
        assert save_stack(tmp_path, state, why="no heartbeat for 20 s")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not (tmp_path / "ranks" / "rank-00003.stack.txt").exists()
    reason = (tmp_path / "ranks" / "rank-00003.stack-failed.txt").read_text()
    assert reason.count("\n") == 1 and "Stack backtrace" not in reason and reason.strip()
    assert read_stacks(tmp_path) == {3: f"py-spy could not read its Python stack: {reason.strip()}"}


def test_ranks_whose_heartbeat_stopped_are_ended_and_live_ones_kept(tmp_path: Path) -> None:
    """When a rank's deadline passes, the ranks of its host whose heartbeat stopped are ended
    (SIGKILL, after their stack is tried); a rank still beating, another host's and this rank
    itself are left alone."""
    from clusterbench.runtime.flight import FlightState, end_stalled_ranks, flight_path

    (tmp_path / "ranks").mkdir()
    procs = {r: subprocess.Popen(["sleep", "60"]) for r in (1, 2, 3)}
    now = time.time()
    try:
        for rank, host, beat in ((1, HOST, now - 60), (2, HOST, now), (3, "elsewhere", now - 60)):
            state = FlightState(rank=rank, host=host, pid=procs[rank].pid, heartbeat=beat)
            flight_path(tmp_path, rank).write_text(json.dumps(dataclasses.asdict(state)))
        end_stalled_ranks(tmp_path, rank=0, host=HOST, include_self=True)
        assert procs[1].wait(timeout=10) == -signal.SIGKILL
        assert procs[2].poll() is None and procs[3].poll() is None
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()

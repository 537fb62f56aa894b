"""clusterbench on a Ray cluster: a head and a worker node on this machine, the run through
Ray Train (``python -m clusterbench.ray``), results.json on rank 0.

Each node is ``ray start --block`` in a session of its own, ended by that session's process
group (never ``ray stop``, which stops every Ray cluster on the machine).  Ray advertises the
machine's own address even when told 127.0.0.1, so the nodes talk over it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from clusterbench import load_results
from clusterbench.doctor.placement import FINDING_ID as PLACEMENT_FINDING

pytest.importorskip("ray.train", reason="needs Ray Train: pip install 'clusterbench[ray]'")

pytestmark = [pytest.mark.dist, pytest.mark.ray]

HOST = socket.gethostname()
RAY_START_S = 120.0
"""How long ``ray start`` may take on a busy 2-core machine (about 5 s for the head, 2 s
for a worker node when idle)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ray_start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``ray start ARGS --block`` in a session of its own, once it says the node is up."""
    ray = [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` command, of this Python
    with log.open("wb") as sink:
        proc = subprocess.Popen([*ray, "start", "--block", *args], stdout=sink, env=env,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + RAY_START_S
    while b"Ray runtime started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(f"ray start {' '.join(args)} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a ``ray start --block`` and every process of its session."""
    with_children = [proc.pid]
    with contextlib.suppress(psutil.NoSuchProcess):
        with_children += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            continue
    for pid in with_children:  # Ray's workers live in process groups of their own
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """A Ray head and one worker node, one CPU each: Ray Train's two workers land one on each."""
    temp = Path(tempfile.mkdtemp(prefix="cb-rt-"))  # short: Ray's socket paths live under it
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--num-cpus=1", "--num-gpus=0", "--object-store-memory=100000000"]
    head = _ray_start(["--head", f"--port={port}", "--include-dashboard=false",
                       "--disable-usage-stats", f"--temp-dir={temp}", *common],
                      temp / "head.log", env)  # fmt: skip
    try:
        worker = _ray_start([f"--address=127.0.0.1:{port}", *common], temp / "worker.log", env)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            _stop(worker)
    finally:
        _stop(head)
        shutil.rmtree(temp, ignore_errors=True)


def _driver(address: str, *run_args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "clusterbench.ray", "--nodes", "1", "--gpus-per-node", "2",
           "--cpu", "--address", address, "--", "--no-history", *run_args]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})  # fmt: skip


_DRIVER_SAYS = re.compile(r"clusterbench: (?:exit code|run failed on Ray).*$", re.MULTILINE)


def _last_word(err: str) -> str:
    """The driver's last line: how the run ended.  Ray's own log lines (and the workers'
    forwarded ones) may come after it, and one of Ray's that lacks its newline may run into
    it (seen once in CI: the line did not start with "clusterbench: "), so it is taken from
    where the driver's words start, wherever that is on its line."""
    return _DRIVER_SAYS.findall(err)[-1]


def test_quick_suite_through_ray_train(ray_address: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _driver(ray_address, "--out", str(out))
    _, err = proc.communicate(timeout=420)
    last = _last_word(err)
    assert proc.returncode in (0, 1), err[-4000:]
    assert last == (f"clusterbench: exit code {proc.returncode}; rank 0 (host {HOST}) wrote "
                    f"{out / 'results.json'}")  # fmt: skip
    results = load_results(out)
    assert results.run.status == "completed" and results.errors == []
    assert results.run.world_size == 2 and results.run.backend == "gloo"
    assert results.run.unfinished == []
    by_bench: dict[str, set[int]] = {}
    for m in results.measurements:
        by_bench.setdefault(m.benchmark, set()).add(m.rank)
        assert m.host == HOST
    # rank 1's records reached rank 0 through the run's store (rank 0 gathers under a launcher)
    assert by_bench == {
        "doctor": {0}, "gemm": {0, 1}, "sdc": {0, 1}, "memory": {0, 1}, "collectives": {0}
    }  # fmt: skip
    placement = [f for f in results.findings if f.id == PLACEMENT_FINDING]
    assert placement and placement[0].evidence["launcher"] == "ray", placement
    has_fail = any(f.severity == "fail" for f in results.findings)
    assert proc.returncode == (1 if has_fail else 0)


def _rank_process(out: Path, rank: int, *, timeout_s: float) -> psutil.Process:
    """The ``clusterbench run`` of ``rank`` writing to ``out``, once it runs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            try:
                mine = cmd[1:3] == ["-m", "clusterbench"] and str(out) in cmd
                if mine and p.environ().get("RANK") == str(rank):
                    return p
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        time.sleep(0.5)
    pytest.fail(f"rank {rank}'s clusterbench run never started")


def test_a_lost_ray_worker_ends_the_run_naming_its_rank(ray_address: str, tmp_path: Path) -> None:
    """As when a node is preempted: rank 1's Ray worker and its clusterbench run are killed
    mid-run (SIGKILL); rank 0 writes results.json naming rank 1 before Ray ends its worker
    (its clusterbench run is then told, SIGTERM), and the driver exits 3 naming rank 1."""
    out = tmp_path / "run"
    proc = _driver(ray_address, "--only", "selftest", "--set", "selftest.sleep_s=10",
                   "--out", str(out))  # fmt: skip
    try:
        rank1 = _rank_process(out, 1, timeout_s=300)
        ray_worker = rank1.parent().parent()  # Ray's worker -> _child.py -> clusterbench run
        assert "RayTrainWorker" in " ".join(ray_worker.cmdline()), ray_worker.cmdline()
        deadline = time.monotonic() + 120
        while not (out / "ranks" / "rank-00001.jsonl").exists():  # rank 1 is in the run
            assert time.monotonic() < deadline, "rank 1 never opened its rank file"
            time.sleep(0.2)
        time.sleep(2.0)
        for victim in (rank1, ray_worker):
            victim.kill()
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 3, err[-4000:]
    last = _last_word(err)
    assert last.startswith("clusterbench: run failed on Ray: Ray worker of rank 1: "), last
    assert f"{out / 'results.json'}: failed: rank 1 on host {HOST}" in last, last
    results = load_results(out)
    assert results.run.status == "failed" and results.run.unfinished == ["selftest"]
    assert results.errors[0].rank == 1, results.errors

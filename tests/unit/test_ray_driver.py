"""``python -m clusterbench.ray`` without a Ray cluster: the workers' command, the driver's last
line and exit code, and the small process between a Ray worker and its clusterbench run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterbench.launchers import LaunchSpec
from clusterbench.ray import RankOutcome, _final_results, _not_started, _report, worker_argv
from clusterbench.ray._child import __file__ as CHILD


def test_worker_argv_makes_out_absolute_and_passes_the_run_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = LaunchSpec(nodes=2, gpus_per_node=4, suite="standard",
                      run_args=("--out", "first", "--only", "gemm", "--out=runs/b"))  # fmt: skip
    argv, out = worker_argv(spec, cpu=False)
    assert out == tmp_path / "runs" / "b"
    assert argv == ["run", "--suite", "standard", "--expect-nodes", "2", "--join-timeout",
                    "300", "--out", str(out), "--only", "gemm"]  # fmt: skip


def test_worker_argv_cpu_and_default_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = LaunchSpec(nodes=1, gpus_per_node=2, run_args=("--timeout", "40"))
    argv, out = worker_argv(spec, cpu=True)
    # clusterbench's default folder, here; the join timeout follows the run's shorter --timeout
    assert out.parent == tmp_path / "clusterbench-runs" and out.is_absolute()
    assert argv == ["run", "--suite", "quick", "--join-timeout", "40", "--out", str(out),
                    "--device", "cpu", "--timeout", "40"]  # fmt: skip


def test_report_takes_rank_0s_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results.json").write_text("{}")
    ended = {0: RankOutcome(rank=0, host="n0", exit_code=1),
             1: RankOutcome(rank=1, host="n1", exit_code=0)}  # fmt: skip
    assert _report(ended, out=tmp_path, error=None) == 1
    assert capsys.readouterr().err == (
        f"clusterbench: exit code 1; rank 0 (host n0) wrote {tmp_path / 'results.json'}\n"
    )
    # on another node (not visible here), and a code that is not clusterbench's (a signal)
    other = tmp_path / "elsewhere"
    assert _report({0: RankOutcome(rank=0, host="n3", exit_code=137)}, out=other, error=None) == 3
    assert capsys.readouterr().err.endswith(f"wrote {other / 'results.json'} on its node\n")


def test_report_without_rank_0_reads_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("clusterbench.ray._RESULTS_WAIT_S", 0.0)
    error = "Ray worker of rank 1: ActorDiedError: The actor died"
    assert _report({}, out=tmp_path, error=error) == 3
    assert capsys.readouterr().err == (
        f"clusterbench: run failed on Ray: {error}; whatever rank 0 wrote is in {tmp_path} on "
        "its node\n"
    )
    results = {"run": {"status": "failed"}, "errors": [{"message": "rank 1 on host n1 died"}]}
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert _report({}, out=tmp_path, error=error) == 3
    assert capsys.readouterr().err.endswith(
        f"{tmp_path / 'results.json'}: failed: rank 1 on host n1 died\n"
    )


def test_final_results_waits_past_running(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"run": {"status": "running"}, "errors": []}))
    assert _final_results(path, wait_s=0.0) == (None, "")
    path.write_text(json.dumps({"run": {"status": "completed"}, "errors": []}))
    assert _final_results(path, wait_s=0.0) == ("completed", "")


def test_not_started_says_what_the_cluster_has() -> None:
    spec = LaunchSpec(nodes=2, gpus_per_node=8, join_timeout_s=60)
    text = _not_started(spec, cpu=False, cluster={"CPU": 64.0, "GPU": 8.0})
    assert text.startswith("run failed: Ray did not start the 16 workers within 60 s")
    assert "1 GPU each; the cluster has 64 CPU and 8 GPU in all" in text


def _child(*command: str, parent: int | None = None) -> list[str]:
    return [sys.executable, CHILD, str(parent or os.getpid()), *command]


def test_child_passes_the_exit_code_on() -> None:
    code = subprocess.run(_child(sys.executable, "-c", "raise SystemExit(5)"), check=False)
    assert code.returncode == 5
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    assert subprocess.run(_child(sys.executable, "-c", killed), check=False).returncode == 137


def test_child_tells_the_command_when_its_parent_dies(tmp_path: Path) -> None:
    """A parent (the Ray worker) killed: the child goes, and the command gets SIGTERM."""
    said = tmp_path / "said"
    command = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(said)!r}, 'w').write('TERM'),"
        " sys.exit(0)))\n"
        f"open({str(said)!r} + '.up', 'w').close()\n"
        "time.sleep(60)\n"
    )
    parent_code = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {CHILD!r}, str(os.getpid()), sys.executable, '-c',"
        f" {command!r}])\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 30
        while not Path(f"{said}.up").exists():
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        parent.send_signal(signal.SIGKILL)
        while not said.exists():
            assert time.monotonic() < deadline, "the command was not told"
            time.sleep(0.05)
        assert said.read_text() == "TERM"
    finally:
        parent.kill()
        parent.wait()


def test_a_wrong_cluster_address_is_said_at_once() -> None:
    import socket

    from clusterbench.ray import gcs_unreachable

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert gcs_unreachable(f"127.0.0.1:{port}") is None
        assert gcs_unreachable(f"ray://127.0.0.1:{port}") is None
    started = time.monotonic()
    said = gcs_unreachable(f"127.0.0.1:{port}")  # closed now: refused
    assert said is not None and said.startswith(f"no Ray cluster at 127.0.0.1:{port}: ")
    assert time.monotonic() - started < 5
    for found_by_ray in ("", "auto", "local"):
        assert gcs_unreachable(found_by_ray) is None

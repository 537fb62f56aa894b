"""``python -m clusterbench.ray`` without a Ray cluster: the workers' command, the driver's last
line and exit code, and the small process between a Ray worker and its clusterbench run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from clusterbench.job_scripts import LaunchSpec
from clusterbench.ray import RankOutcome, _final_results, _not_started, _report, worker_argv


def test_worker_argv_makes_out_absolute_and_passes_the_run_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = LaunchSpec(nodes=2, gpus_per_node=4, suite="standard",
                      run_args=("--out", "first", "--only", "gemm", "--out=runs/b"))  # fmt: skip
    argv, out = worker_argv(spec, cpu=False)
    assert out == tmp_path / "runs" / "b"
    assert argv == ["run", "--suite", "standard", "--expect-nodes", "2", "--join-timeout",
                    "300", "--out", str(out), "--launcher", "ray", "--only", "gemm"]  # fmt: skip


def test_worker_argv_cpu_and_default_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = LaunchSpec(nodes=1, gpus_per_node=2, run_args=("--timeout", "40"))
    argv, out = worker_argv(spec, cpu=True)
    # clusterbench's default folder, here; the join timeout follows the run's shorter --timeout
    assert out.parent == tmp_path / "clusterbench-runs" and out.is_absolute()
    assert argv == ["run", "--suite", "quick", "--join-timeout", "40", "--out", str(out),
                    "--device", "cpu", "--launcher", "ray", "--timeout", "40"]  # fmt: skip


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


def test_a_ray_failure_is_named_even_when_rank_0_said_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 may see its peer go and end the run before Ray reports the worker it lost (a
    busy machine): the line still names Ray's lost worker first, then what rank 0 wrote."""
    monkeypatch.setattr("clusterbench.ray._RESULTS_WAIT_S", 0.0)
    results = {"run": {"status": "failed"}, "errors": [{"message": "rank 1 on host n1 died"}]}
    (tmp_path / "results.json").write_text(json.dumps(results))
    error = "Ray worker of rank 1: ActorDiedError: The actor died"
    ended = {0: RankOutcome(rank=0, host="n0", exit_code=3)}
    assert _report(ended, out=tmp_path, error=error) == 3
    assert capsys.readouterr().err == (
        f"clusterbench: run failed on Ray: {error}; {tmp_path / 'results.json'}: failed: "
        "rank 1 on host n1 died\n"
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

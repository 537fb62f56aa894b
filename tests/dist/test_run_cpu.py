"""The real launcher with gloo workers on CPU: whole runs, and runs where a rank fails."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from clusterbench import load_results
from tests.helpers import QUICK_RUN, Run, cli

pytestmark = pytest.mark.dist

HOST = socket.gethostname()
# A tiny GEMM so the failure tests spend their time on what they test.
SMALL_GEMM = ["--set", "gemm.shapes=64x64x64", "--set", "gemm.dtypes=fp32"]


@pytest.mark.xdist_group(QUICK_RUN)
def test_quick_suite_on_two_cpu_workers(quick_run: Run) -> None:
    proc, out, results = quick_run.proc, quick_run.out, quick_run.results
    assert results.schema_version == 1
    assert results.run.status == "completed"
    assert results.run.world_size == 2
    assert results.run.backend == "gloo"
    assert results.run.unfinished == []
    assert results.run.skipped.get("transfer") == "no cpu form"
    # CPU workers sample no GPU telemetry, and the run says why
    assert results.run.skipped.get("telemetry") == "no NVML: CPU workers"
    assert results.run.config["telemetry"] == {"enabled": True, "interval_s": 0.1}
    assert results.telemetry == [] and all(m.telemetry is None for m in results.measurements)
    assert not (out / "telemetry").exists()
    assert results.errors == []
    assert [h.hostname for h in results.hosts] == [HOST]
    by_bench: dict[str, set[int]] = {}
    for m in results.measurements:
        by_bench.setdefault(m.benchmark, set()).add(m.rank)
        assert m.host == HOST and m.unit
    # collectives are recorded once per group, by the group's rank 0
    # doctor: local rank 0 of each node runs the host checks
    assert by_bench == {
        "doctor": {0}, "gemm": {0, 1}, "sdc": {0, 1}, "memory": {0, 1}, "collectives": {0}
    }  # fmt: skip
    doctor_ids = {f.id for f in results.findings if f.id.startswith("doctor.")}
    assert "doctor.storage.checkpoint_dir" in doctor_ids
    best = [m for m in results.measurements if m.metric == "tflops_best"]
    assert best and all(m.value > 0 and m.params["dtype"] for m in best)
    assert (out / "summary.md").read_text().startswith("#")
    assert sorted(p.name for p in (out / "ranks").iterdir()) == [
        "rank-00000.flight.json",
        "rank-00000.jsonl",
        "rank-00001.flight.json",
        "rank-00001.jsonl",
    ]
    # the exit code follows the findings: 1 exactly when one of them is a fail
    has_fail = any(f.severity == "fail" for f in results.findings)
    assert proc.returncode == (1 if has_fail else 0)


def _failing_run(
    tmp_path: Path, mode: str, *extra: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / f"run-{mode}"
    proc = cli(
        "run", "--device", "cpu", "--nproc", "2", "--out", str(out),
        "--only", "gemm,selftest", *SMALL_GEMM,
        "--set", "selftest.fail_rank=1", "--set", f"selftest.mode={mode}", *extra,
    )  # fmt: skip
    return proc, out


def _assert_kept_and_named(proc: subprocess.CompletedProcess[str], out: Path, text: str) -> None:
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert "rank 1" in proc.stderr and HOST in proc.stderr and text in proc.stderr
    assert "Traceback" not in proc.stderr
    results = load_results(out)
    assert results.run.status == "failed"
    assert results.run.unfinished == ["selftest"]
    assert results.errors[0].rank == 1 and results.errors[0].host == HOST
    assert text in results.errors[0].message
    # the benchmark that finished before the failure is kept, from both ranks
    gemm_ranks = {m.rank for m in results.measurements if m.benchmark == "gemm"}
    assert gemm_ranks == {0, 1}


def test_a_rank_that_raises_ends_the_run_named(tmp_path: Path) -> None:
    proc, out = _failing_run(tmp_path, "raise")
    _assert_kept_and_named(proc, out, "failed on purpose")


def test_a_rank_that_exits_ends_the_run_named(tmp_path: Path) -> None:
    proc, out = _failing_run(tmp_path, "exit")
    _assert_kept_and_named(proc, out, "exited with code 17")


def test_a_rank_that_hangs_is_timed_out_and_named(tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc, out = _failing_run(tmp_path, "hang", "--timeout", "8")
    _assert_kept_and_named(proc, out, "timeout")
    assert time.monotonic() - t0 < 120
    results = load_results(out)
    # rank 0 was only waiting for rank 1: it is not blamed first
    assert all(e.rank != 0 for e in results.errors[:1])


def test_ctrl_c_keeps_what_finished(tmp_path: Path) -> None:
    out = tmp_path / "run-int"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterbench", "run", "--device", "cpu", "--nproc", "2",
         "--out", str(out), "--only", "gemm,selftest", *SMALL_GEMM,
         "--set", "selftest.sleep_s=60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ranks = out / "ranks"
        texts = [p.read_text() for p in ranks.glob("*.jsonl")] if ranks.exists() else []
        if len(texts) == 2 and all('"start", "rank"' in t and "selftest" in t for t in texts):
            break
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    results = load_results(out)
    assert results.run.status == "interrupted"
    assert "selftest" in results.run.unfinished
    assert {m.rank for m in results.measurements if m.benchmark == "gemm"} == {0, 1}


def test_ctrl_c_says_it_once_in_our_words(tmp_path: Path) -> None:
    """Ctrl-C in memory, before the ranks came to transfer (no CPU form): torch's agent says
    nothing ('Received 2 death signal, shutting down workers'), clusterbench says it was
    interrupted, and transfer is skipped, not unfinished."""
    out = tmp_path / "run-int"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterbench", "run", "--device", "cpu", "--nproc", "2",
         "--out", str(out), "--only", "memory,transfer", "--no-history",
         "--set", "memory.repeats=1000000", "--set", "memory.size_bytes=1048576"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ranks = out / "ranks"
        texts = [p.read_text() for p in ranks.glob("*.jsonl")] if ranks.exists() else []
        if len(texts) == 2 and all('"start", "rank"' in t and "memory" in t for t in texts):
            break
        time.sleep(0.2)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr  # docs/getting-started.md: interrupted -> 3
    assert "death signal" not in stdout + stderr, stderr
    assert f"clusterbench: interrupted; results kept in {out}" in stderr, stderr
    assert "status interrupted" in stdout
    results = load_results(out)
    assert results.run.status == "interrupted"
    assert results.run.unfinished == ["memory"]
    assert results.run.skipped["transfer"] == "no cpu form"
    assert "Did not finish: memory\n" in stdout


def test_joins_under_torchrun(tmp_path: Path) -> None:
    out = tmp_path / "run-torchrun"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "clusterbench", "run", "--device", "cpu", "--only", "gemm", "--out", str(out),
         *SMALL_GEMM],
        capture_output=True, text=True, timeout=240, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    results = load_results(out)
    assert results.run.status == "completed"
    assert results.run.world_size == 2
    assert {m.rank for m in results.measurements} == {0, 1}
    assert json.loads((out / "results.json").read_text())["schema_version"] == 1
    # the expected time is said once, by rank 0, before the summary; the time taken after it
    assert proc.stdout.count("expected") == 1, proc.stdout
    assert proc.stdout.index("expected") < proc.stdout.index("clusterbench run")
    assert (
        set(results.run.benchmark_seconds) == {"gemm"} and results.run.benchmark_seconds["gemm"] > 0
    )
    assert "time: gemm " in proc.stdout


def test_the_library_run_finishes_as_the_command_does(tmp_path: Path) -> None:
    """clusterbench.run() compares with the baseline, records the history and exports, once,
    at the run's finish, as 'clusterbench run --baseline --export' does."""
    import clusterbench

    history = tmp_path / "history.sqlite"
    options = clusterbench.RunOptions(
        only=["gemm"], sets=SMALL_GEMM[1::2], device="cpu", history=history
    )
    first = clusterbench.run(replace(options, out=tmp_path / "first"))
    assert first.exit_code == 0 and first.history == history and first.comparison is None
    second = clusterbench.run(
        replace(options, out=tmp_path / "second", baseline=str(tmp_path / "first"),
                exports=["csv"])
    )  # fmt: skip
    assert second.exit_code in (0, 1) and second.results is not None
    comparison = second.comparison
    assert comparison is not None and comparison.rows
    saved = json.loads((tmp_path / "second" / "comparison.json").read_text())
    assert len(saved["rows"]) == len(comparison.rows)
    # the comparison's regressions are among the findings results.json holds
    written = load_results(tmp_path / "second")
    assert [f.id for f in written.findings] == [f.id for f in second.results.findings]
    assert "gemm" in (tmp_path / "second" / "results.csv").read_text()
    assert second.exported == [f"csv: {tmp_path / 'second' / 'results.csv'}"]
    assert (tmp_path / "second" / "report.html").is_file()
    from clusterbench.history_db import open_history

    with open_history(history) as store:
        ids = sorted(r.id for r in store.runs())
    # folders named by hand: the name and the run's start make the id
    assert [i.rsplit("-", 1)[0] for i in ids] == ["first", "second"]
    assert second.results.run.id in ids
    # a bad baseline is refused before anything runs or is written
    with pytest.raises(clusterbench.ConfigError, match="--baseline"):
        clusterbench.run(
            replace(options, out=tmp_path / "third", baseline=str(tmp_path / "nowhere"))
        )
    assert not (tmp_path / "third").exists()

"""Soaks through the real launcher on 2 CPU workers: rounds kept with their times, a planted
slowdown found as drift, an intermittent failure named with its round, and Ctrl-C keeping
every round done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers import cli

from clusterbench import load_results

pytestmark = pytest.mark.dist

# selftest's timed work is a sleep (plus two barriers): its sync_time is steady on a busy
# 2-core machine, and the planted slowdown adds 0.1 s to it each round
BASE = ["run", "--device", "cpu", "--nproc", "2", "--only", "selftest", "--no-history"]


@pytest.mark.timing
def test_planted_slowdown_is_a_drift(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    proc = cli(*BASE, "--out", str(out), "--repeat", "6", "--set", "selftest.sleep_s=0.3",
               "--set", "selftest.slowdown_per_round_s=0.1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]  # drift on CPU workers is info
    results = load_results(out)
    soak = results.run.soak
    assert results.run.status == "completed" and soak is not None
    assert (soak.repeat, soak.rounds, soak.completed, soak.stopped_in) == (6, 6, 6, None)
    assert len(soak.round_started) == 6 and all(s is not None for s in soak.round_seconds)
    for rank in (0, 1):
        mine = sorted((m for m in results.measurements if m.rank == rank),
                      key=lambda m: m.round or 0)  # fmt: skip
        assert [m.round for m in mine] == list(range(6))
        times = [m.time or 0.0 for m in mine]
        assert times == sorted(times) and times[0] > 1e9
        # the planted 0.1 s a round (0.5 s from the first round to the last), and nothing like
        # it in the barriers around it: measured, each round's time past its sleeps was 2-4 ms
        # idle and 2-13 ms with two processes spinning beside the run (4 runs x 2 ranks), so
        # 0.1 s of margin is more than 7x that spread
        rise = mine[-1].value - mine[0].value
        assert abs(rise - 0.5) < 0.1, [m.value for m in mine]
    drift = [f for f in results.findings if f.id == "soak.drift"]
    assert len(drift) == 1 and drift[0].severity == "info"
    assert "selftest.sync_time rose during the soak" in drift[0].message
    assert drift[0].evidence["num_series"] == 2  # both devices
    assert {f.id for f in results.findings} == {"soak.drift", "soak.summary"}
    summary = (out / "summary.md").read_text()
    assert "## soak" in summary and "| drift |" in summary
    assert "selftest.sync_time over the soak's rounds" in (out / "report.html").read_text()
    last = proc.stdout.strip().splitlines()
    soak_line = next(line for line in reversed(last) if line.startswith("soak: "))
    assert soak_line.startswith("soak: 6 rounds, 6 complete")
    assert "drift: selftest.sync_time" in soak_line
    assert last.index(soak_line) >= len(last) - 4  # among the last lines, before the paths


def test_intermittent_failure_is_named_with_its_round(tmp_path: Path) -> None:
    out = tmp_path / "flaky"
    proc = cli(*BASE, "--out", str(out), "--repeat", "7", "--set", "selftest.sleep_s=0.2",
               "--set", "selftest.fail_rank=1", "--set", "selftest.fail_round=5")  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "failed in selftest (round 5)" in proc.stderr
    results = load_results(out)
    soak = results.run.soak
    assert results.run.status == "failed" and soak is not None
    assert (soak.rounds, soak.completed, soak.stopped_in) == (6, 5, 5)
    assert {m.round for m in results.measurements} == set(range(5))  # every round that passed
    ids = [f.id for f in results.findings]
    # five steady rounds without the slowdown: no drift
    assert "soak.drift" not in ids
    flaky = [f for f in results.findings if f.id == "soak.intermittent"]
    assert len(flaky) == 1 and flaky[0].severity == "fail"
    assert "selftest passed round(s) 0-4 of the soak, then failed in round 5" in flaky[0].message


def test_ctrl_c_keeps_every_round(tmp_path: Path) -> None:
    out = tmp_path / "soak-int"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterbench", *BASE, "--out", str(out), "--soak", "1h",
         "--set", "selftest.sleep_s=0.3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # both ranks in round 2 at least
        files = list((out / "ranks").glob("*.jsonl")) if (out / "ranks").exists() else []
        if len(files) == 2 and all('"round": 2' in p.read_text() for p in files):
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr[-3000:]
    results = load_results(out)
    soak = results.run.soak
    assert results.run.status == "interrupted" and soak is not None
    assert soak.duration_s == 3600 and soak.completed >= 2
    assert soak.stopped_in is not None and soak.stopped_in >= 2
    rounds = {m.round for m in results.measurements}
    assert set(range(soak.completed)) <= rounds and len(rounds) >= 2
    assert any(f.id == "soak.summary" and "interrupted" in f.message for f in results.findings)

"""doctor --fast: checks under a deadline (a hung check is reported, not waited for), a hung or
broken probe, commands killed past their time, the scheduler's output lines and the CLI.

These test the deadline's behaviour with generous slack; how fast the real command is on a
machine is measured by scripts/doctor_fast_time.py, not here.  ``doctor --fast`` leaves through
``os._exit``, so the CLI runs in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.helpers import cli

from clusterbench.doctor import Sources, run_checks
from clusterbench.doctor.deadline import BoundedRunner
from clusterbench.doctor.fast import check_node_fast, check_window_s, process_age_s
from clusterbench.report.doctor import problem_lines
from clusterbench.schema import Finding, HostInfo

_SLACK_S = 2.0  # a loaded CI machine may start threads late; the hang itself is 60 s


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test: the hung checks' threads then finish instead of lingering."""
    event = threading.Event()
    yield event
    event.set()


def _host() -> HostInfo:
    return HostInfo(hostname="n0")


def _quick(src: Sources) -> list[Finding]:
    return [Finding(id="test.quick", severity="warn", scope=src.scope, message="quick")]


def test_a_check_past_the_deadline_is_reported_and_not_waited_for(
    release: threading.Event,
) -> None:
    def check_hangs(src: Sources) -> list[Finding]:
        release.wait(60)
        return [Finding(id="test.late", severity="info", scope=src.scope, message="too late")]

    start = time.monotonic()
    found = run_checks(
        host=_host(), env={}, nvml=None, checks=[check_hangs, _quick], deadline_s=0.5
    )
    took = time.monotonic() - start
    assert 0.5 <= took < 0.5 + _SLACK_S
    late, quick = found  # check order kept
    assert (late.id, late.severity, late.scope) == ("doctor.check_timeout", "fail", "host:n0")
    assert late.evidence == {"check": "test_doctor_fast.check_hangs", "deadline_s": 0.5}
    assert "did not finish within 0.5 s" in late.message
    assert quick.id == "test.quick" and "test.late" not in {f.id for f in found}


def test_checks_that_finish_in_time_lose_nothing() -> None:
    def check_raises(src: Sources) -> list[Finding]:
        raise OSError("no such file")

    checks = [_quick, check_raises, _quick]
    timed = run_checks(host=_host(), env={}, nvml=None, checks=checks, deadline_s=5.0)
    plain = run_checks(host=_host(), env={}, nvml=None, checks=checks)
    assert [f.id for f in timed] == [f.id for f in plain] == [
        "test.quick", "doctor.check_failed", "test.quick",
    ]  # fmt: skip


def test_a_hung_probe_fails_the_node_within_the_deadline(release: threading.Event) -> None:
    def probe(**_: Any) -> HostInfo:
        release.wait(60)  # nvmlInit on a GPU that fell off the bus
        return _host()

    start = time.monotonic()
    result = check_node_fast(env={}, probe=probe, nvml=None, deadline_s=0.5)
    assert time.monotonic() - start < 0.5 + _SLACK_S
    [found] = result.findings
    assert (found.id, found.severity) == ("doctor.check_timeout", "fail")
    assert found.evidence["check"].startswith("hardware.probe_host")
    assert result.abandoned


def test_a_probe_that_raises_fails_the_node() -> None:
    def probe(**_: Any) -> HostInfo:
        raise RuntimeError("NVML: driver/library version mismatch")

    result = check_node_fast(env={}, probe=probe, nvml=None, deadline_s=2.0)
    [found] = result.findings
    assert (found.id, found.severity) == ("doctor.probe_failed", "fail")
    assert "driver/library version mismatch" in found.message and not result.abandoned


def test_fast_check_of_a_healthy_fake_node() -> None:
    result = check_node_fast(
        env={}, probe=lambda **_: _host(), nvml=None, checks=[_quick], deadline_s=2.0
    )
    assert [f.id for f in result.findings] == ["test.quick"]
    assert result.hostname == "n0" and not result.abandoned and result.elapsed_s < 2.0


def test_a_command_past_its_time_is_killed_and_named() -> None:
    runner = BoundedRunner(timeout_s=0.3)
    start = time.monotonic()
    assert runner([sys.executable, "-c", "import time; time.sleep(30)"]) is None
    assert time.monotonic() - start < 0.3 + _SLACK_S
    assert runner([sys.executable, "-c", "print('ok')"]) == "ok\n"
    assert runner([sys.executable, "-c", "import sys; sys.exit(3)"]) is None  # failed, not slow
    [found] = runner.findings(scope="host:n0")
    assert (found.id, found.severity) == ("doctor.command_timeout", "warn")
    assert found.evidence["timeout_s"] == 0.3 and "time.sleep(30)" in found.message


def test_commands_get_only_what_is_left_of_the_deadline() -> None:
    # a check that runs two slow commands must still return before the checks' deadline
    runner = BoundedRunner(timeout_s=3.0, deadline=time.monotonic() + 0.6)
    start = time.monotonic()
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    assert runner(slow) is None and runner([*slow, "again"]) is None
    assert time.monotonic() - start < 0.6 + _SLACK_S
    assert len(runner.timed_out) == 2  # the second had no time left: not run, still named


def test_process_age_counts_from_the_process_start() -> None:
    # the budget counts Python's start and imports: the age a new process reads after sleeping
    # 1 s lies between 1 s and the wall time the parent saw (psutil's whole-second boot time
    # would miss by up to a second)
    code = "import time; time.sleep(1.0); from clusterbench.doctor.fast import process_age_s; "
    code += "print(process_age_s())"
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.monotonic() - start
    assert 1.0 <= float(out.stdout) <= wall + 0.05
    assert process_age_s() > 0


def test_the_checks_get_what_the_start_left_of_the_budget() -> None:
    assert check_window_s(age_s=3.0, budget_s=8.5, min_window_s=2.0) == 5.5
    assert check_window_s(age_s=8.0, budget_s=8.5, min_window_s=2.0) == 2.0  # a slow import


def test_problem_lines_for_a_scheduler_log() -> None:
    findings = [
        Finding(id="doctor.a", severity="info", scope="host:n0", message="fine"),
        Finding(id="doctor.w", severity="warn", scope="host:n0", message="two\nlines", fix="x"),
        Finding(id="doctor.f", severity="fail", scope="host:n0/cuda:1", message="broken"),
    ]
    assert problem_lines(findings, host="n0", elapsed_s=1.234) == [
        "FAIL doctor.f host:n0/cuda:1: broken",
        "WARN doctor.w host:n0: two lines | fix: x",
        "clusterbench doctor --fast n0: FAIL (1 fail, 1 warn, 1 info) in 1.2 s",
    ]
    [last] = problem_lines(findings[:1], host="n0", elapsed_s=0.05)
    assert last == "clusterbench doctor --fast n0: OK (1 info) in 0.1 s"


def test_cli_fast_on_this_machine() -> None:
    proc = cli("doctor", "--fast", timeout=60, env={"NCCL_SOCKET_IFNAME": "nosuch0"})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stderr  # the planted NCCL_SOCKET_IFNAME is a fail
    assert lines[-1].startswith("clusterbench doctor --fast ") and ": FAIL (" in lines[-1]
    assert all(line.split(" ", 1)[0] in ("FAIL", "WARN") for line in lines[:-1])
    assert any(line.startswith("FAIL doctor.nccl.socket_ifname ") for line in lines)
    as_json = cli("doctor", "--fast", "--json", timeout=60, env={"NCCL_SOCKET_IFNAME": ""})
    findings = [Finding.model_validate(f) for f in json.loads(as_json.stdout)]
    failed = any(f.severity == "fail" for f in findings)
    assert as_json.returncode == (1 if failed else 0), as_json.stderr
    assert "doctor.storage.checkpoint_dir" in {f.id for f in findings}


def test_cli_fast_exits_while_a_check_still_hangs() -> None:
    # a real process: the hung check's thread must hold neither the output nor the exit
    code = textwrap.dedent("""
        import sys, time
        from clusterbench import doctor
        def check_hangs(src):
            time.sleep(60)
            return []
        doctor.FAMILIES["hang"] = (check_hangs,)
        from clusterbench.cli import main
        sys.argv = ["clusterbench", "doctor", "--fast"]
        main()
    """)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert time.monotonic() - start < 40, "waited for the hung check"
    assert proc.returncode == 1, proc.stderr
    [late] = [line for line in proc.stdout.splitlines() if "doctor.check_timeout" in line]
    assert late.startswith("FAIL ") and "check __main__.check_hangs did not finish" in late

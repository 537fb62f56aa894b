"""doctor --fast: checks under a deadline (a hung check is reported, not waited for), a hung or
broken probe and the scheduler's output lines (commands and the CLI, which leaves through
``os._exit``, run as real processes in tests/integration/test_doctor_fast.py).

These test the deadline's behaviour with generous slack; how fast the real command is on a
machine is measured by scripts/doctor_fast_time.py, not here."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from clusterbench.doctor import Sources, run_checks
from clusterbench.doctor.fast import check_node_fast, check_window_s
from clusterbench.report.doctor import problem_lines
from clusterbench.schema import Finding, HostInfo

# The hung checks wait 60 s: ending within 10 s of the deadline shows they were not waited for,
# with room for a loaded CI machine that starts threads late (seen: up to ~1 s).
_SLACK_S = 10.0


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

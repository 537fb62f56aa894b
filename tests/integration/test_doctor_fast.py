"""doctor --fast with real processes: commands killed past their time or the deadline, the
process's age, and the CLI on this machine and with a check that never ends."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from clusterbench.doctor.deadline import BoundedRunner
from clusterbench.doctor.fast import process_age_s
from clusterbench.schema import Finding
from tests.helpers import cli

# The planted commands sleep 30 s (and each may take 10 s below): ending within 8 s of the time
# allowed shows they were killed, with room for a loaded machine that starts a process late.
_SLACK_S = 8.0


@pytest.fixture
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
    # (each one's own timeout would allow 2 x 10 s)
    runner = BoundedRunner(timeout_s=10.0, deadline=time.monotonic() + 0.6)
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

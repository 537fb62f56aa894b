"""doctor --dcgm through a stand-in dcgmi executable on PATH: pass, fail and warn, a run that could
not start, malformed output, a non-zero exit without JSON, a hang, and the CLI (the JSON
parsing alone is in tests/unit/test_doctor_dcgm.py)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from clusterbench.doctor.dcgm_run import dcgm_findings
from clusterbench.schema import Finding
from tests.helpers import cli
from tests.unit.test_doctor_dcgm import _FAIL_AND_WARN, _PASS

_FAULTY = "Found 2 faulty memory elements on GPU 1 Run a field diagnostic on the GPU."


def _fake_dcgmi(
    tmp_path: Path, *, stdout: str = "", exit_code: int = 0, sleep_s: float = 0
) -> Path:
    """A dcgmi on PATH that records its arguments, prints ``stdout`` and exits ``exit_code``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "out.txt").write_text(stdout)
    script = bin_dir / "dcgmi"
    body = f'echo "$@" > {tmp_path / "args.txt"}\ncat {tmp_path / "out.txt"}\n'
    if sleep_s:
        body += f"exec sleep {sleep_s}\n"
    script.write_text(f"#!/bin/sh\n{body}exit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    def put(**kwargs: Any) -> Path:
        bin_dir = _fake_dcgmi(tmp_path, **kwargs)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        return tmp_path / "args.txt"

    return put


def _by_id(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.id, []).append(f)
    return out


def test_all_passed_is_one_info_summary(on_path: Any) -> None:
    args = on_path(stdout=json.dumps(_PASS))
    [summary] = dcgm_findings(2, host="n0")
    assert args.read_text().split() == ["diag", "-r", "2", "-j"]
    assert (summary.id, summary.severity, summary.scope) == (
        "doctor.dcgm.summary",
        "info",
        "host:n0",
    )
    assert summary.evidence["passed"] == ["software", "memory"]
    assert summary.evidence["gpus"] == [0, 1] and summary.evidence["not_passed"] == []
    assert "2 test(s) passed (software, memory) on GPU 0, 1" in summary.message


def test_fail_and_warn_each_a_finding_with_gpu_message_and_dcgm_verdict(on_path: Any) -> None:
    on_path(stdout=json.dumps(_FAIL_AND_WARN), exit_code=226)  # dcgmi exits -30 on a failed test
    found = _by_id(dcgm_findings(3, host="n0"))
    fail, warn = found["doctor.dcgm.test"]  # fail first
    assert (fail.severity, fail.scope, fail.evidence["test"]) == (
        "fail",
        "host:n0/cuda:1",
        "memory",
    )
    assert fail.message == f"DCGM diag -r 3: test memory (Hardware) failed on GPU 1: {_FAULTY}"
    assert fail.evidence["results"][0]["error_ids"] == [52]
    assert fail.fix.startswith("DCGM rates it ISOLATE")  # error_severity 2
    assert (warn.severity, warn.evidence["test"], warn.evidence["gpus"]) == (
        "warn",
        "software",
        [1],
    )
    assert "nvidia-smi -i <gpuId> -pm 1" in warn.message and "CONFIG" in warn.fix
    [summary] = found["doctor.dcgm.summary"]
    assert summary.evidence["skipped"] == ["pcie"] and summary.evidence["passed"] == []
    assert summary.evidence["not_passed"] == ["software", "memory"]


def test_runtime_error_is_one_info_line(on_path: Any) -> None:
    on_path(stdout=json.dumps({"DCGM Diagnostic": {"version": "4.2.3",
            "runtime_error": "Unable to connect to the host engine"}}), exit_code=1)  # fmt: skip
    [found] = dcgm_findings(1, host="n0")
    assert (found.id, found.severity) == ("doctor.dcgm.unavailable", "info")
    assert "could not run: Unable to connect to the host engine" in found.message
    assert "nvidia-dcgm" in found.fix


def test_malformed_output_is_one_info_line_not_a_crash(on_path: Any) -> None:
    on_path(stdout="Error: unable to establish a connection to the host engine\n{ not json")
    [found] = dcgm_findings(1, host="n0")
    assert (found.id, found.severity) == ("doctor.dcgm.unavailable", "info")
    assert "printed no DCGM results (not JSON" in found.message
    assert "\n" not in found.message and found.evidence["returncode"] == 0


def test_json_of_another_shape_is_malformed_too(on_path: Any) -> None:
    on_path(stdout=json.dumps({"something": "else"}))
    [found] = dcgm_findings(1, host="n0")
    assert found.id == "doctor.dcgm.unavailable" and "no 'DCGM Diagnostic'" in found.message


def test_non_zero_exit_without_output(on_path: Any) -> None:
    on_path(stdout="", exit_code=3)
    [found] = dcgm_findings(1, host="n0")
    assert (found.severity, found.evidence["returncode"]) == ("info", 3)
    assert "exit status 3" in found.message


def test_a_diagnostic_past_its_timeout_is_stopped(on_path: Any) -> None:
    on_path(stdout="", sleep_s=30)
    start = time.monotonic()
    [found] = dcgm_findings(1, host="n0", timeout_s=0.5)
    assert time.monotonic() - start < 10  # stopped, not waited for (30 s)
    assert (found.id, found.severity, found.evidence["timeout_s"]) == (
        "doctor.dcgm.timeout",
        "warn",
        0.5,
    )


def test_cli_folds_dcgm_into_doctor_fast(tmp_path: Path) -> None:
    bin_dir = _fake_dcgmi(tmp_path, stdout=json.dumps(_FAIL_AND_WARN), exit_code=226)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "NCCL_SOCKET_IFNAME": ""}
    proc = cli("doctor", "--fast", "--dcgm", "3", "--json", timeout=60, env=env)
    assert proc.returncode == 1, proc.stderr  # the memory test's fail
    tests = [f for f in json.loads(proc.stdout) if f["id"] == "doctor.dcgm.test"]
    assert sorted((f["severity"], f["evidence"]["test"]) for f in tests) == [
        ("fail", "memory"), ("warn", "software"),
    ]  # fmt: skip
    bad = cli("doctor", "--dcgm", "7", timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "clusterbench: error: --dcgm takes a DCGM diagnostic level 1, 2, 3 or 4, not 7"
    ]

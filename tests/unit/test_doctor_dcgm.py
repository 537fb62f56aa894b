"""doctor --dcgm: dcgmi diag's JSON (DCGM 4 and 3 shapes) into findings, through a fake dcgmi
executable on PATH: pass, fail, warn, a run that could not start, malformed output, a non-zero
exit without JSON, a hang, and no dcgmi at all."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import cli

from clusterbench.doctor.dcgm import parse_diag
from clusterbench.doctor.dcgm_run import dcgm_findings
from clusterbench.schema import Finding

_PERSISTENCE = (
    'Persistence mode for GPU 1 is disabled. Enable persistence mode by running "nvidia-smi -i '
    '<gpuId> -pm 1 " as root.'
)
_FAULTY = "Found 2 faulty memory elements on GPU 1 Run a field diagnostic on the GPU."


def _gpu(index: int, status: str, *warnings: tuple[str, int, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "entity_group": "GPU", "entity_group_id": 1, "entity_id": index, "status": status,
    }  # fmt: skip
    if warnings:
        result["warnings"] = [
            {"warning": msg, "error_id": code, "error_category": 8, "error_severity": sev}
            for msg, code, sev in warnings
        ]
    return result


def _test(name: str, *results: dict[str, Any]) -> dict[str, Any]:
    statuses = ("Fail", "Warn", "Pass", "Skip")
    worst = next(s for s in statuses if any(r["status"] == s for r in results))
    summary = {"status": worst, "warnings": [w for r in results for w in r.get("warnings", [])]}
    return {"name": name, "results": list(results), "test_summary": summary}


def _dcgm4(*categories: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Output shaped as DCGM 4's dcgmi diag -j writes it (dcgmi/Diag.cpp)."""
    return {
        "DCGM Diagnostic": {
            "test_categories": [{"category": c, "tests": tests} for c, tests in categories]
        },
        "entity_groups": [
            {
                "entity_group": "GPU",
                "entity_group_id": 1,
                "entities": [
                    {"entity_id": 0, "device_id": "2335"},
                    {"entity_id": 1, "device_id": "2335"},
                ],
            }
        ],
        "metadata": {"version": "4.2.3", "Driver Version Detected": "570.148.08"},
    }


_PASS = _dcgm4(
    ("Deployment", [_test("software", _gpu(0, "Pass"), _gpu(1, "Pass"))]),
    ("Hardware", [_test("memory", _gpu(0, "Pass"), _gpu(1, "Pass"))]),
)
_FAIL_AND_WARN = _dcgm4(
    ("Deployment", [_test("software", _gpu(0, "Pass"), _gpu(1, "Warn", (_PERSISTENCE, 29, 5)))]),
    ("Hardware", [_test("memory", _gpu(0, "Pass"), _gpu(1, "Fail", (_FAULTY, 52, 2)))]),
    ("Integration", [_test("pcie", _gpu(0, "Skip"), _gpu(1, "Skip"))]),
)
# DCGM 3: root "DCGM GPU Diagnostic", gpu_id as a string, level-1 messages keyed "warnings"
_DCGM3 = {
    "DCGM GPU Diagnostic": {
        "test_categories": [
            {"category": "Deployment", "tests": [
                {"name": "Denylist", "results": [{"status": "Pass"}]},
                {"name": "Persistence Mode", "results": [
                    {"status": "Warn", "gpu_id": 0, "warnings": [
                        {"warnings": "Persistence mode for GPU 0 is disabled.", "error_id": 29,
                         "error_category": 8, "error_severity": 5}]}]},
            ]},
            {"category": "Hardware", "tests": [
                {"name": "GPU Memory", "results": [
                    {"gpu_id": "0", "status": "Fail", "warnings": [
                        {"warning": "Found 3 faulty memory elements on GPU 0", "error_id": 52,
                         "error_category": 10, "error_severity": 2}]},
                    {"gpu_id": "1", "status": "Pass"}]},
            ]},
        ]
    },
    "version": "3.3.9",
}  # fmt: skip


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


def test_dcgm3_shape_is_read_too() -> None:
    report = parse_diag(json.dumps(_DCGM3))
    statuses = {(r.test, r.gpu): r.status for r in report.results}
    assert statuses == {
        ("Denylist", None): "Pass",
        ("Persistence Mode", 0): "Warn",
        ("GPU Memory", 0): "Fail",
        ("GPU Memory", 1): "Pass",
    }
    warn = next(r for r in report.results if r.status == "Warn")
    assert warn.messages == ("Persistence mode for GPU 0 is disabled.",)  # the "warnings" key


def test_a_summary_verdict_without_an_entity_result_is_kept() -> None:
    # DCGM 4 reports an error with no entity (e.g. a plugin that could not load) only in the
    # test's summary: it must not be lost
    test = {"name": "eud", "results": [], "test_summary": {"status": "Fail", "warnings": [
        {"warning": "plugin failed to load", "error_id": 90, "error_severity": 4}]}}  # fmt: skip
    report = parse_diag(json.dumps(_dcgm4(("Hardware", [test]))))
    [result] = report.results
    assert (result.test, result.status, result.gpu, result.messages) == (
        "eud", "Fail", None, ("plugin failed to load",),
    )  # fmt: skip


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


def test_missing_dcgmi_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dcgmi
    [found] = dcgm_findings(1, host="n0")
    assert (found.id, found.severity) == ("doctor.dcgm.unavailable", "info")
    assert "not installed" in found.message
    assert "datacenter-gpu-manager" in found.fix and "nv-hostengine" in found.fix


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


def test_bad_level_is_refused() -> None:
    with pytest.raises(ValueError, match="1, 2, 3 or 4"):
        dcgm_findings(5, host="n0")


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

"""doctor --dcgm: dcgmi diag's JSON (DCGM 4 and 3 shapes) into findings, through a fake dcgmi
executable on PATH: pass, fail, warn, a run that could not start, malformed output, a non-zero
exit without JSON, a hang, and no dcgmi at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterbench.doctor.dcgm import parse_diag
from clusterbench.doctor.dcgm_run import dcgm_findings

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


def test_before_dcgm_3_3_gpu_ids_and_a_warning_string_are_read() -> None:
    # dcgmi/Diag.cpp before DCGM 3.3.1: "gpu_ids" names the GPU, "warnings" is one string and
    # "error_id" its sibling (no severity)
    test = {"name": "GPU Memory", "results": [
        {"gpu_ids": "0", "status": "Pass"},
        {"gpu_ids": "1,2", "status": "Fail", "warnings": _FAULTY, "error_id": 52}]}  # fmt: skip
    root = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [test]}]}}
    report = parse_diag(json.dumps(root))
    assert [(r.gpu, r.status, r.messages, r.error_ids) for r in report.results] == [
        (0, "Pass", (), ()),
        (1, "Fail", (_FAULTY,), (52,)),
        (2, "Fail", (_FAULTY,), (52,)),
    ]


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


def test_missing_dcgmi_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dcgmi
    [found] = dcgm_findings(1, host="n0")
    assert (found.id, found.severity) == ("doctor.dcgm.unavailable", "info")
    assert "not installed" in found.message
    assert "datacenter-gpu-manager" in found.fix and "nv-hostengine" in found.fix


def test_bad_level_is_refused() -> None:
    with pytest.raises(ValueError, match="1, 2, 3 or 4"):
        dcgm_findings(5, host="n0")

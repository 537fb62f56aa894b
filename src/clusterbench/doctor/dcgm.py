"""DCGM diagnostics: ``dcgmi diag -r LEVEL -j`` run on this node and folded into findings.

The JSON, as dcgmi writes it (dcgmi/Diag.cpp and nvvs/include/NvvsJsonStrings.h of
NVIDIA/DCGM, 3.x and 4.x)::

    {"DCGM Diagnostic": {                    # "DCGM GPU Diagnostic" before DCGM 4
       "test_categories": [{"category": "Hardware", "tests": [{"name": "memory",
          "results": [{"entity_group": "GPU", "entity_id": 0,      # DCGM 3.3: "gpu_id": "0",
                                                                   # before: "gpu_ids": "0"
                       "status": "Fail",                           # Pass, Warn, Skip, Fail
                       "warnings": [{"warning": "...", "error_id": 42, "error_severity": 2}],
                       # before DCGM 3.3: "warnings": "...", "error_id": 42 (no severity)
                       "info": ["..."]}],
          "test_summary": {"status": "Fail", "warnings": [...]}}]}]}}   # DCGM 4 only

A run that could not start prints ``{"DCGM Diagnostic": {"runtime_error": "..."}}``.  dcgmi exits
non-zero when a test reports an error (DCGM_ST_NVVS_ERROR, -30, seen as 226), its JSON still on
stdout, so the exit status alone says nothing; the results do.  A message ends with DCGM's own
next step; ``error_severity`` is DCGM's verdict on what to do with the GPU (dcgm_errors.h,
dcgmErrorSeverity_t), which the finding's fix states.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterbench.exits import ConfigError
from clusterbench.schema import Finding, HostInfo, Severity
from clusterbench.tool_files import Imported, file_time, read_file

__all__ = [
    "LEVELS",
    "DiagReport",
    "DiagResult",
    "diag_findings",
    "import_diag",
    "parse_diag",
    "unavailable",
]

LEVELS = (1, 2, 3, 4)
_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")  # DCGM 4, DCGM 3
_GPU_GROUP_ID = 1  # dcgm_fields.h: DCGM_FE_GPU
_SEVERITY: dict[str, Severity] = {"Fail": "fail", "Warn": "warn"}
# dcgm_errors.h, dcgmErrorSeverity_t: what DCGM says to do, most urgent first.
_ACTIONS: dict[int, str] = {
    2: "DCGM rates it ISOLATE: the GPU cannot run work; drain the node and take the GPU out of "
    "service, replace it (RMA) if a rerun fails again",
    6: "DCGM rates it RESET: drain the node and reset the GPU (nvidia-smi -r -i N) or reboot, "
    "then rerun the diagnostic",
    4: "DCGM rates it TRIAGE: rerun that test alone (dcgmi diag -r <test> -j) and read dmesg for "
    "Xid errors before returning the node",
    3: "DCGM does not know this error code: read the full dcgmi diag output and DCGM's "
    "diagnostic errors reference",
    5: "DCGM rates it CONFIG: a setting of the node, not the GPU; the message says which",
    1: "DCGM rates it MONITOR: the GPU can run work but should be watched; rerun the diagnostic "
    "after the next job",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class DiagResult:
    """One test's result on one entity (or the test's overall result)."""

    category: str
    test: str
    status: str
    """Pass, Fail, Warn or Skip, as dcgmi prints it."""
    gpu: int | None
    """The GPU (DCGM's GPU id, NVML's index); None for another entity or the whole test."""
    entity: str | None
    messages: tuple[str, ...] = ()
    error_ids: tuple[int, ...] = ()
    error_severities: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class DiagReport:
    results: list[DiagResult]
    runtime_error: str | None = None


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _entity(result: dict[str, Any]) -> tuple[int | None, str | None]:
    if "gpu_id" in result:  # DCGM 3
        gpu = _int(result["gpu_id"])
        return gpu, None if gpu is None else f"GPU {gpu}"
    if "entity_id" not in result:  # DCGM 4 test summary: the whole test
        return None, None
    group, entity_id = str(result.get("entity_group", "")), _int(result["entity_id"])
    is_gpu = group.upper() == "GPU" or _int(result.get("entity_group_id")) == _GPU_GROUP_ID
    return (entity_id if is_gpu else None), f"{group or 'entity'} {entity_id}"


def _warnings(raw: dict[str, Any]) -> list[dict[str, Any]]:
    found = raw.get("warnings")
    if isinstance(found, str):  # before DCGM 3.3: one string, its error_id beside it
        return [{"warning": found, "error_id": raw.get("error_id")}]
    return [w for w in found or [] if isinstance(w, dict)]


def _result(category: str, test: str, raw: dict[str, Any]) -> DiagResult:
    warnings = _warnings(raw)
    # DCGM 3 keys the level-1 tests' message "warnings", the others "warning"
    messages = [str(w.get("warning", w.get("warnings", ""))).strip() for w in warnings]
    gpu, entity = _entity(raw)
    return DiagResult(
        category=category,
        test=test,
        status=str(raw.get("status", "")),
        gpu=gpu,
        entity=entity,
        messages=tuple(m for m in messages if m),
        error_ids=tuple(i for w in warnings if (i := _int(w.get("error_id"))) is not None),
        error_severities=tuple(
            s for w in warnings if (s := _int(w.get("error_severity"))) is not None
        ),
    )


def _per_gpu(raw: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The result once per GPU it names: before DCGM 3.3 keyed "gpu_ids", a string ("0", "0,1")."""
    ids = [i.strip() for i in str(raw.get("gpu_ids", "")).split(",") if i.strip()]
    if "gpu_id" in raw or not ids:
        yield raw
        return
    for gpu in ids:
        yield {**raw, "gpu_id": gpu}


def _test_results(category: str, test: dict[str, Any]) -> Iterator[DiagResult]:
    name = str(test.get("name", "?"))
    results = [
        _result(category, name, per_gpu)
        for raw in test.get("results") or []
        if isinstance(raw, dict)
        for per_gpu in _per_gpu(raw)
    ]
    yield from results
    summary = test.get("test_summary")
    if not isinstance(summary, dict):
        return
    overall = _result(category, name, summary)
    # the summary repeats the entities' errors; it adds only a verdict no entity carries
    if not any(r.status == overall.status for r in results):
        yield overall


def _sections(root: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for iteration in root.get("iterations") or [root]:  # dcgmi diag --iterations N
        for key in _ROOTS:
            if isinstance(iteration, dict) and isinstance(iteration.get(key), dict):
                yield iteration[key]


def parse_diag(text: str) -> DiagReport:
    """The results of ``dcgmi diag -j`` output; ValueError when it is not that JSON."""
    try:
        root = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    sections = list(_sections(root)) if isinstance(root, dict) else []
    if not sections:
        raise ValueError(f"no {' or '.join(repr(k) for k in _ROOTS)} object")
    errors = [str(s["runtime_error"]) for s in sections if s.get("runtime_error")]
    results = [
        result
        for section in sections
        for category in section.get("test_categories") or []
        if isinstance(category, dict)
        for test in category.get("tests") or []
        if isinstance(test, dict)
        for result in _test_results(str(category.get("category", "")), test)
    ]
    return DiagReport(results=results, runtime_error="; ".join(errors) or None)


# ---------------------------------------------------------------------------- findings


def _gpu_list(gpus: Sequence[int]) -> str:
    return ", ".join(str(g) for g in gpus)


def _fix(results: Sequence[DiagResult], level: int) -> str:
    severities = {s for r in results for s in r.error_severities}
    action = next((text for code, text in _ACTIONS.items() if code in severities), None)
    rerun = f"dcgmi diag -r {level} -j shows every message; each ends with DCGM's next step"
    return f"{action}; {rerun}" if action else rerun


def _test_finding(results: list[DiagResult], *, level: int, host: str) -> Finding:
    first = results[0]
    gpus = sorted({r.gpu for r in results if r.gpu is not None})
    entities = sorted({r.entity for r in results if r.entity and r.gpu is None})
    where = [f"GPU {_gpu_list(gpus)}"] if gpus else []
    where += entities
    messages = list(dict.fromkeys(m for r in results for m in r.messages))
    said = messages[0] if messages else "no message"
    if len(messages) > 1:
        said += f" (+{len(messages) - 1} more)"
    verb = "failed" if first.status == "Fail" else "warned"
    return Finding(
        id="doctor.dcgm.test",
        severity=_SEVERITY[first.status],
        scope=f"host:{host}/cuda:{gpus[0]}" if len(gpus) == 1 and not entities else f"host:{host}",
        message=f"DCGM diag -r {level}: test {first.test} ({first.category}) {verb}"
        + (f" on {', '.join(where)}" if where else "")
        + f": {said}",
        evidence={
            "level": level,
            "category": first.category,
            "test": first.test,
            "status": first.status,
            "gpus": gpus,
            "results": [
                {
                    "entity": r.entity,
                    "gpu": r.gpu,
                    "messages": list(r.messages),
                    "error_ids": list(r.error_ids),
                    "error_severities": list(r.error_severities),
                }
                for r in results
            ],
        },
        fix=_fix(results, level),
    )


def _summary(results: Sequence[DiagResult], *, level: int, host: str) -> Finding:
    bad = list(dict.fromkeys(r.test for r in results if r.status in _SEVERITY))
    passed = list(
        dict.fromkeys(r.test for r in results if r.status == "Pass" and r.test not in bad)
    )
    done = {*bad, *passed}
    skipped = list(dict.fromkeys(r.test for r in results if r.test not in done))
    gpus = sorted({r.gpu for r in results if r.gpu is not None})
    text = f"{len(passed)} test(s) passed" + (f" ({', '.join(passed)})" if passed else "")
    if not results:
        text = "no test results in the output"
    if skipped:
        text += f", {len(skipped)} skipped ({', '.join(skipped)})"
    if bad:
        text += f", {len(bad)} failed or warned (above)"
    return Finding(
        id="doctor.dcgm.summary",
        severity="info",
        scope=f"host:{host}",
        message=f"DCGM diag -r {level}: {text}" + (f" on GPU {_gpu_list(gpus)}" if gpus else ""),
        evidence={
            "level": level,
            "passed": passed,
            "skipped": skipped,
            "not_passed": bad,
            "gpus": gpus,
        },
    )


def diag_findings(report: DiagReport, *, level: int, host: str) -> list[Finding]:
    """One finding per test that failed or warned (its GPUs, messages and DCGM's verdict), and
    one info line for the rest; a diagnostic that could not run is one info finding."""
    if report.runtime_error:
        return [
            unavailable(
                f"dcgmi diag -r {level} could not run: {report.runtime_error}",
                host=host,
                evidence={"runtime_error": report.runtime_error},
                fix="start the host engine (systemctl enable --now nvidia-dcgm, or nv-hostengine); "
                "'dcgmi discovery -l' must list the GPUs",
            )
        ]
    groups: dict[tuple[str, str, str], list[DiagResult]] = {}
    for result in report.results:
        if result.status in _SEVERITY:
            groups.setdefault((result.category, result.test, result.status), []).append(result)
    tests = [_test_finding(g, level=level, host=host) for g in groups.values()]
    tests.sort(key=lambda f: f.severity != "fail")
    return [*tests, _summary(report.results, level=level, host=host)]


def unavailable(message: str, *, host: str, evidence: dict[str, Any], fix: str) -> Finding:
    """An info finding: the DCGM diagnostic was asked for but gave no results (not installed,
    could not run, output not understood); the node is not judged by it."""
    return Finding(
        id="doctor.dcgm.unavailable",
        severity="info",
        scope=f"host:{host}",
        message=message,
        evidence=evidence,
        fix=fix,
    )


_DCGM_LEVEL_TESTS = (
    (4, {"memtest", "pulse_test", "eud"}),
    (3, {"targeted_stress", "targeted_power", "memory_bandwidth", "diagnostic"}),
    (2, {"pcie", "memory", "sm_stress", "context_create"}),
)
"""The tests that first appear at each ``dcgmi diag -r`` level (DCGM's documentation): the
deepest named in an output is its level, where --level does not say."""


def _dcgm_level(tests: set[str]) -> int:
    names = {re.sub(r"[^a-z0-9]+", "_", t.lower()).strip("_") for t in tests}
    return next((level for level, wanted in _DCGM_LEVEL_TESTS if names & wanted), 1)


def import_diag(paths: Sequence[Path], host: str | None, level: int | None) -> Imported:
    """``clusterbench import dcgm-diag``: one node's ``dcgmi diag -j`` output as findings (one
    per test that failed or warned, one line for the rest), its level where ``level`` does not
    say it; ConfigError naming a file that is not one."""
    if len(paths) != 1:
        raise ConfigError("dcgm-diag: one FILE, the output of one node's 'dcgmi diag -j'")
    (path,) = paths
    try:
        report = parse_diag(read_file(path))
    except ValueError as exc:
        raise ConfigError(f"{path}: not 'dcgmi diag -j' output: {exc}") from None
    where = host or path.name.split(".", 1)[0]
    depth = level or _dcgm_level({r.test for r in report.results})
    gpus = sorted({r.gpu for r in report.results if r.gpu is not None})
    imported = Imported(
        findings=diag_findings(report, level=depth, host=where),
        hosts=[HostInfo(hostname=where)],
        started=file_time(paths),
    )
    imported.details = {
        "tool": "dcgm-diag",
        "level": depth,
        "files": [str(path)],
        "gpus": gpus,
        "tests": sorted({r.test for r in report.results}),
        "failed": sorted({r.test for r in report.results if r.status == "Fail"}),
    }
    return imported

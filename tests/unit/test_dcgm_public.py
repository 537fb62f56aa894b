"""``import dcgm-diag`` on ``dcgmi diag -j`` outputs that others recorded and published
(tests/data/dcgm-diag, sources in its README.md): every failed test is a finding with its GPU
and DCGM's own message, the passes and skips are counted, the level is told from the tests.

The expectations are read from the files themselves, not from the parser's output."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.doctor.dcgm import import_diag, parse_diag
from clusterbench.schema import load_results

DATA = Path(__file__).resolve().parents[1] / "data" / "dcgm-diag"
GB10_R1 = DATA / "gb10-dcgm4-2-3-r1-software-fail.json"
GB10_R2_SKIP = DATA / "gb10-dcgm4-2-3-r2-software-fail-memory-pcie-skip.json"
GB10_R2_PASS = DATA / "gb10-dcgm4-5-2-r2-software-fail-memory-pcie-pass.json"
VC_R3 = DATA / "virtualclient-gpu-ids-r3-pass-eud-skip.json"

# the one warning of the GB10 files' software test, on GPU 0: DCGM_FR_PERSISTENCE_MODE (29),
# error severity 5 (CONFIG)
PERSISTENCE = (
    "Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running "
    '"nvidia-smi -i <gpuId> -pm 1 " as root.'
)
DEPLOYMENT_3X = [
    "Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
    "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap",
    "Graphics Processes", "Inforom",
]  # fmt: skip
VC_GPU_TESTS = [
    "PCIe", "GPU Memory", "Diagnostic", "Targeted Stress", "Targeted Power", "Memory Bandwidth",
]  # fmt: skip

# file: (level told from its tests, passed, skipped, failed)
EXPECTED = {
    GB10_R1: (1, [], [], ["software"]),
    GB10_R2_SKIP: (2, [], ["memory", "pcie"], ["software"]),
    GB10_R2_PASS: (2, ["memory", "pcie"], [], ["software"]),
    VC_R3: (3, [*DEPLOYMENT_3X, *VC_GPU_TESTS], ["EUD Test"], []),
}


def test_every_published_file_is_kept_with_its_source() -> None:
    readme = (DATA / "README.md").read_text()
    files = sorted(p.name for p in DATA.glob("*.json"))
    assert files == sorted(p.name for p in EXPECTED)
    assert all(name in readme for name in files)


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.stem)
def test_tests_are_counted_as_the_file_says(path: Path) -> None:
    level, passed, skipped, failed = EXPECTED[path]
    imported = import_diag([path], host="n0", level=None)
    assert imported.details["level"] == level
    assert imported.details["failed"] == sorted(failed)
    assert imported.details["gpus"] == [0]  # each file is one GPU, GPU 0
    summary = imported.findings[-1]
    assert summary.id == "doctor.dcgm.summary"
    assert summary.evidence["passed"] == passed
    assert summary.evidence["skipped"] == skipped
    assert summary.evidence["not_passed"] == failed


@pytest.mark.parametrize("path", [GB10_R1, GB10_R2_SKIP, GB10_R2_PASS], ids=lambda p: p.stem)
def test_dcgm4_failed_software_test_is_one_finding_on_gpu_0(path: Path) -> None:
    imported = import_diag([path], host="gb10", level=None)
    [fail] = [f for f in imported.findings if f.severity == "fail"]
    assert [f.severity for f in imported.findings] == ["fail", "info"]  # nothing warned
    assert fail.id == "doctor.dcgm.test" and fail.scope == "host:gb10/cuda:0"
    assert (fail.evidence["category"], fail.evidence["test"]) == ("Deployment", "software")
    assert fail.evidence["gpus"] == [0]
    # the entity's warning once: 4.5.2 repeats it in the test summary, which adds nothing
    [result] = fail.evidence["results"]
    assert result["messages"] == [PERSISTENCE]
    assert (result["error_ids"], result["error_severities"]) == ([29], [5])
    assert fail.message.endswith(f"failed on GPU 0: {PERSISTENCE}")
    assert fail.fix is not None and fail.fix.startswith("DCGM rates it CONFIG")


def test_gpu_ids_before_dcgm_3_3_name_the_gpu() -> None:
    # dcgmi before DCGM 3.3 keys a result's GPU "gpu_ids" (a string); Deployment tests name none
    report = parse_diag(VC_R3.read_text())
    gpus = {r.test: r.gpu for r in report.results}
    assert gpus == {**dict.fromkeys(DEPLOYMENT_3X), **dict.fromkeys([*VC_GPU_TESTS, "EUD Test"], 0)}
    statuses = {r.test: r.status for r in report.results}
    assert statuses.pop("EUD Test") == "Skip"
    assert set(statuses.values()) == {"Pass"}


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.stem)
def test_the_cli_imports_each_file(path: Path, tmp_path: Path) -> None:
    level, passed, skipped, failed = EXPECTED[path]
    result = CliRunner().invoke(
        app, ["import", "dcgm-diag", str(path), "-o", str(tmp_path / "run"), "--no-history", "-v"]
    )
    assert result.exit_code == (1 if failed else 0), result.stderr
    out = " ".join(result.stdout.split())  # as printed, less the line wrapping
    results = load_results(tmp_path / "run")
    assert [h.hostname for h in results.hosts] == [path.stem]  # no dot: the whole name
    assert results.run.config["imported"]["level"] == level
    assert results.run.config["imported"]["gpus"] == [0]
    assert f"DCGM diag -r {level}: {len(passed)} test(s) passed" in out
    if skipped:
        assert f"{len(skipped)} skipped ({', '.join(skipped)})" in out
    if failed:
        assert "test software (Deployment) failed on GPU 0" in out

"""Doctor as a whole: consistency across hosts, storage, the guard, the benchmark and the CLI."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clusterbench import doctor as doctor_package
from clusterbench.benchmarks.doctor import DoctorConfig
from clusterbench.benchmarks.doctor.measure import doctor
from clusterbench.doctor import (
    FAMILIES,
    Check,
    Sources,
    all_checks,
    check_consistency,
    run_checks,
    run_guarded,
    storage,
)
from clusterbench.schema import Finding, GpuInfo, HostInfo, Measurement
from tests.helpers import one_rank_ctx


def _host(name: str, driver: str, gpu: str = "NVIDIA H200") -> HostInfo:
    return HostInfo(
        hostname=name,
        gpus=[GpuInfo(index=0, name=gpu), GpuInfo(index=1, name=gpu)],
        versions={"driver": driver, "torch": "2.8.0", "nccl": "2.27.3"},
    )


def test_consistency_names_nodes_and_values() -> None:
    hosts = [_host("node0", "570.86.15"), _host("node1", "550.54.14"), _host("node2", "570.86.15")]
    [found] = check_consistency(hosts)
    assert (found.id, found.severity, found.scope) == ("doctor.consistency.driver", "warn", "run")
    assert "570.86.15 on node0, node2; 550.54.14 on node1" in found.message
    assert found.evidence["by_host"] == {
        "node0": "570.86.15",
        "node1": "550.54.14",
        "node2": "570.86.15",
    }
    assert check_consistency(hosts[:1]) == [] and check_consistency([hosts[0], hosts[2]]) == []


def test_consistency_of_gpu_models() -> None:
    [found] = check_consistency([_host("a", "1"), _host("b", "1", gpu="NVIDIA H100 80GB HBM3")])
    assert (
        found.id == "doctor.consistency.gpus" and "2x NVIDIA H100 80GB HBM3 on b" in found.message
    )


def _statvfs(free_bytes: int) -> Any:
    return lambda path: SimpleNamespace(f_bavail=free_bytes // 4096, f_frsize=4096, f_blocks=10**9)


def test_storage_low_free_space_and_fs_type(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/mounts").write_text(
        f"/dev/sda1 / ext4 rw 0 0\n/dev/nvme0n1 {tmp_path} xfs rw 0 0\n"
    )
    ckpt = tmp_path / "ckpt" / "not-yet"
    src = Sources(
        host=HostInfo(hostname="n0"), root=tmp_path, checkpoint_dir=ckpt, statvfs=_statvfs(10**10)
    )
    [found] = storage.check_storage(src)
    assert (found.id, found.severity) == ("doctor.storage.checkpoint_dir", "warn")
    assert found.evidence["fs_type"] == "xfs" and found.evidence["checked"] == str(tmp_path)
    assert "10.0 GB free" in found.message
    roomy = Sources(
        host=HostInfo(hostname="n0"), root=tmp_path, checkpoint_dir=ckpt, statvfs=_statvfs(10**12)
    )
    assert storage.check_storage(roomy)[0].severity == "info"


def test_a_broken_check_becomes_an_info_finding() -> None:
    def check_broken(src: Sources) -> list[Finding]:
        raise KeyError("nope")

    [found] = run_guarded(check_broken, Sources(host=HostInfo(hostname="n0")))
    assert (found.id, found.severity, found.scope) == ("doctor.check_failed", "info", "host:n0")
    assert found.evidence == {"check": "check_broken", "error": "KeyError: 'nope'"}


def test_run_checks_on_a_fake_node(tmp_path: Path) -> None:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/numa_balancing").write_text("1\n")
    env = {"NCCL_P2P_DISABLE": "1", "OMP_NUM_THREADS": "4"}
    found = run_checks(
        host=_host("n0", "1"), env=env, root=tmp_path, nvml=None, run=lambda cmd: None
    )
    ids = {f.id for f in found}
    assert {
        "doctor.numa.balancing",
        "doctor.nccl.p2p_disable",
        "doctor.storage.checkpoint_dir",
    } <= ids
    assert "doctor.check_failed" not in ids


def test_benchmark_on_one_cpu_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    # every check counted as it runs: the reported count must be the checks that ran, once each
    calls: list[str] = []

    def counted(check: Check) -> Check:
        def run(src: Sources) -> list[Finding]:
            calls.append(check.__name__)
            return check(src)

        return run

    families = {name: tuple(counted(c) for c in checks) for name, checks in FAMILIES.items()}
    originals = [c.__name__ for c in all_checks()]
    monkeypatch.setattr(doctor_package, "FAMILIES", families)
    ctx = one_rank_ctx("doctor", host="n0")
    items = list(doctor(ctx, DoctorConfig()))
    [checks_run] = [m for m in items if isinstance(m, Measurement)]
    assert sorted(calls) == sorted(originals) and len(originals) >= len(FAMILIES)
    assert (checks_run.metric, checks_run.value, checks_run.unit) == (
        "checks_run",
        len(calls),
        "count",
    )
    assert any(isinstance(f, Finding) and f.id == "doctor.storage.checkpoint_dir" for f in items)

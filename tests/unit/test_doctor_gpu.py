"""Doctor's NVLink/P2P checks and NVML health checks against a stand-in NVML."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from clusterbench.doctor import Sources, gpu_health, nvlink_p2p
from clusterbench.hardware.specs import match_spec, to_spec_ref
from clusterbench.schema import GpuInfo, HostInfo, Topology

H200_MEMORY_BYTES = 143771 * 2**20
H200_SPEC = to_spec_ref(match_spec("NVIDIA H200", H200_MEMORY_BYTES))  # type: ignore[arg-type]


class NVMLError(Exception):
    pass


class FakeNvml:
    """Healthy GPUs unless a test sets a field; ``broken`` names fields whose query raises."""

    NVMLError = NVMLError

    def __init__(self, **state: Any) -> None:
        self.state = {
            "ecc": {},  # (error type, counter type) -> count
            "retired_pending": 0,
            "remap": (0, 0, 0, 0),
            "reasons": 0x1,  # GPU idle
            "persistence": 1,
            "procs": [],
            "mig": (0, 0),
            "clocks": (1980, 1980),
            "used": 500 * 2**20,
        } | state
        self.broken: set[str] = set()

    def _get(self, key: str, name: str) -> Any:
        if name in self.broken:
            raise NVMLError("Not Supported")
        return self.state[key]

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(index=index)

    def nvmlDeviceGetTotalEccErrors(self, h: Any, error_type: int, counter_type: int) -> int:
        return int(self._get("ecc", "ecc").get((error_type, counter_type), 0))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: Any) -> int:
        return int(self._get("retired_pending", "retired"))

    def nvmlDeviceGetRemappedRows(self, h: Any) -> tuple[int, int, int, int]:
        return tuple(self._get("remap", "remap"))  # type: ignore[return-value]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        return int(self._get("reasons", "reasons"))

    def nvmlDeviceGetPersistenceMode(self, h: Any) -> int:
        return int(self._get("persistence", "persistence"))

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[SimpleNamespace]:
        return list(self._get("procs", "procs"))

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> SimpleNamespace:
        return SimpleNamespace(used=self.state["used"], total=H200_MEMORY_BYTES)

    def nvmlDeviceGetMigMode(self, h: Any) -> tuple[int, int]:
        return tuple(self._get("mig", "mig"))  # type: ignore[return-value]

    def nvmlDeviceGetApplicationsClock(self, h: Any, clock: int) -> int:
        return int(self._get("clocks", "clocks")[0])

    def nvmlDeviceGetDefaultApplicationsClock(self, h: Any, clock: int) -> int:
        return int(self.state["clocks"][1])


def _host(*, nvlinks: tuple[int, ...] = (18, 18), topology: Topology | None = None) -> HostInfo:
    gpus = [
        GpuInfo(index=i, name="NVIDIA H200", spec=H200_SPEC, nvlink_active=n)
        for i, n in enumerate(nvlinks)
    ]
    return HostInfo(hostname="n0", gpus=gpus, topology=topology or Topology())


def _src(nvml: Any = None, **kw: Any) -> Sources:
    return Sources(host=kw.pop("host", None) or _host(), nvml=nvml, **kw)


# ---------------------------------------------------------------------------- NVLink and P2P


def test_17_of_18_nvlinks() -> None:
    [found] = nvlink_p2p.check_nvlinks(_src(host=_host(nvlinks=(18, 17))))
    assert (found.id, found.severity, found.scope) == (
        "doctor.nvlink.inactive",
        "warn",
        "host:n0/cuda:1",
    )
    assert found.evidence == {"active": 17, "expected": 18, "name": "NVIDIA H200"}


def test_no_nvlink_at_all_fails_and_unknown_skus_are_skipped() -> None:
    assert [f.severity for f in nvlink_p2p.check_nvlinks(_src(host=_host(nvlinks=(0, 18))))] == [
        "fail"
    ]
    host = HostInfo(hostname="n0", gpus=[GpuInfo(index=0, name="Some GPU", nvlink_active=0)])
    assert nvlink_p2p.check_nvlinks(_src(host=host)) == []


@pytest.mark.parametrize("active", [0, 12])
def test_inactive_nvlinks_of_the_only_visible_gpu_are_information(active: int) -> None:
    # one H200 of a board passed through to a VM: its links lead to GPUs it cannot see
    [found] = nvlink_p2p.check_nvlinks(_src(host=_host(nvlinks=(active,))))
    assert (found.id, found.severity, found.scope) == (
        "doctor.nvlink.inactive",
        "info",
        "host:n0/cuda:0",
    )
    assert f"{18 - active} of 18 NVLinks inactive" in found.message
    assert "one visible GPU" in found.message and "costs nothing here" in found.message
    assert "cut" not in found.message
    assert found.evidence["active"] == active and found.evidence["visible_gpus"] == 1
    assert nvlink_p2p.check_nvlinks(_src(host=_host(nvlinks=(18,)))) == []


def test_inactive_nvlinks_with_a_second_gpu_still_warn_or_fail() -> None:
    found = nvlink_p2p.check_nvlinks(_src(host=_host(nvlinks=(0, 0))))
    assert [f.severity for f in found] == ["fail", "fail"]
    found = nvlink_p2p.check_nvlinks(_src(host=_host(nvlinks=(12, 18, 18, 18))))
    assert [(f.severity, f.scope) for f in found] == [("warn", "host:n0/cuda:0")]
    assert "6 of 18 NVLinks inactive: GPU-to-GPU bandwidth is cut" in found[0].message


def _topology(label: str, p2p: bool) -> Topology:
    return Topology(
        devices=["GPU0", "GPU1"],
        matrix=[["X", label], [label, "X"]],
        p2p=[[True, p2p], [p2p, True]],
    )


@pytest.mark.parametrize(
    ("label", "p2p", "count"),
    [("NV18", False, 1), ("PIX", False, 1), ("NV18", True, 0), ("SYS", False, 0)],
)
def test_p2p_impossible_on_a_direct_pair(label: str, p2p: bool, count: int) -> None:
    found = nvlink_p2p.check_p2p(_src(host=_host(topology=_topology(label, p2p))))
    assert len(found) == count
    if found:
        assert found[0].severity == "fail"
        assert found[0].evidence["pairs"] == [{"pair": ["GPU0", "GPU1"], "link": label}]


# ---------------------------------------------------------------------------- NVML health


def test_healthy_gpus_give_no_findings() -> None:
    src = _src(FakeNvml())
    assert [f for check in gpu_health.CHECKS for f in check(src)] == []
    assert [f for check in gpu_health.CHECKS for f in check(_src(None))] == []  # no NVML


def test_ecc_uncorrected_fails_corrected_is_info() -> None:
    [found, _] = gpu_health.check_ecc(_src(FakeNvml(ecc={(1, 0): 2, (1, 1): 5})))
    assert (found.severity, found.scope) == ("fail", "host:n0/cuda:0")
    assert found.evidence["volatile_uncorrected"] == 2
    assert gpu_health.check_ecc(_src(FakeNvml(ecc={(1, 1): 1})))[0].severity == "warn"
    assert gpu_health.check_ecc(_src(FakeNvml(ecc={(0, 0): 9})))[0].severity == "info"


def test_retired_pages_pending_and_remap_failure() -> None:
    found = gpu_health.check_retired_memory(_src(FakeNvml(retired_pending=1)))
    assert [f.severity for f in found] == ["fail", "fail"]
    assert "retired pages pending" in found[0].message and "nvidia-smi -r -i 0" in found[0].fix
    [failed, _] = gpu_health.check_retired_memory(_src(FakeNvml(remap=(0, 1, 0, 1))))
    assert failed.evidence["row_remap_failure"] is True and "RMA" in failed.fix


def test_thermal_throttle_active() -> None:
    found = gpu_health.check_throttle(_src(FakeNvml(reasons=0x1 | 0x40)))
    assert [f.id for f in found] == ["doctor.gpu.throttle"] * 2
    assert found[0].evidence["active"] == ["HW thermal slowdown"] and found[0].severity == "warn"


def test_persistence_off_mig_on_and_lowered_clocks() -> None:
    [persistence] = gpu_health.check_persistence(_src(FakeNvml(persistence=0)))
    assert persistence.severity == "info" and persistence.evidence == {"gpus": [0, 1]}
    mig = gpu_health.check_mig(_src(FakeNvml(mig=(1, 1))))
    assert [(f.id, f.severity) for f in mig] == [("doctor.gpu.mig", "warn")] * 2
    [clocks, _] = gpu_health.check_clocks(_src(FakeNvml(clocks=(1410, 1980))))
    assert clocks.evidence == {"sm_app_clock_mhz": 1410, "sm_default_clock_mhz": 1980}


def test_other_processes_are_listed_but_our_own_are_not() -> None:
    procs = [
        SimpleNamespace(pid=100, usedGpuMemory=2**30),
        SimpleNamespace(pid=4242, usedGpuMemory=None),
    ]
    found = gpu_health.check_other_processes(_src(FakeNvml(procs=procs), own_pids=frozenset({100})))
    assert [f.evidence["processes"] for f in found] == [[{"pid": 4242, "used_bytes": None}]] * 2
    assert "4242" in found[0].message
    # pids from another namespace: our rank is one of them, so one process is not a finding
    alone = [SimpleNamespace(pid=7, usedGpuMemory=1)]
    assert (
        gpu_health.check_other_processes(_src(FakeNvml(procs=alone), own_pids=frozenset({1}))) == []
    )


def test_memory_in_use_without_visible_processes() -> None:
    found = gpu_health.check_other_processes(_src(FakeNvml(used=20 * 2**30)))
    assert [f.id for f in found] == ["doctor.gpu.memory_in_use"] * 2


def test_nvml_errors_skip_only_that_check() -> None:
    nvml = FakeNvml(reasons=0x40, mig=(1, 0))
    nvml.broken = {"reasons", "mig", "persistence"}
    src = _src(nvml)
    assert gpu_health.check_throttle(src) == [] and gpu_health.check_mig(src) == []
    assert gpu_health.check_persistence(src) == []

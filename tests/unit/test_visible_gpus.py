"""The GPUs a run's workers will see, counted by NVML and CUDA_VISIBLE_DEVICES without CUDA."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from clusterbench.hardware import probe
from clusterbench.hardware.visible import visible_cuda_gpus
from clusterbench.pipeline import workers

UUIDS = ["GPU-aaaa1111", "GPU-aaaa2222", "GPU-bbbb3333", "GPU-cccc4444"]


class FakeNvml:
    class NVMLError(Exception):
        pass

    def __init__(
        self, *, uuids: list[str] = UUIDS, mig: bool = False, cuda_driver: int = 12080
    ) -> None:
        self.uuids, self.mig, self.cuda_driver = uuids, mig, cuda_driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(index=index)

    def nvmlDeviceGetUUID(self, handle: SimpleNamespace) -> str:
        return self.uuids[handle.index]

    def nvmlDeviceGetMigMode(self, handle: SimpleNamespace) -> list[int]:
        if not self.mig:
            raise self.NVMLError("Not Supported")
        return [1, 1]

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda_driver


def _count(visible: str | None, nvml: Any = None, **kw: Any) -> int | None:
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    return visible_cuda_gpus(nvml or FakeNvml(), env=env, **kw)


@pytest.mark.parametrize(
    ("visible", "count"),
    [
        (None, 4),
        ("", 0),
        ("2", 1),
        ("0,1,2,3", 4),
        (" 3 , 1", 2),
        ("1gpu2,0", 2),  # read as strtoul reads: 1, 0
        ("0,5,1", 1),  # up to the first GPU that does not exist
        ("0,-1,1", 1),  # up to the first negative entry
        ("0,x,1", 1),
        ("abc", 0),
        ("0,0", 0),  # a repeated entry leaves none
        ("0,7,0", 0),  # ...even after one that does not exist
        ("GPU-aaaa1111,GPU-bbbb3333", 2),
        ("GPU-bbbb,GPU-cccc", 2),  # unique prefixes
        ("GPU-cccc,GPU-aaaa,GPU-bbbb", 1),  # an ambiguous prefix ends the list
        ("GPU-bbbb3333,GPU-nosuch,GPU-cccc4444", 1),
        ("GPU-bbbb3333,1", 1),
        ("GPU-bbbb3333,GPU-bbbb3333", 0),
        ("GPU-bbbb,GPU-bbbb3333", 0),  # two names of one GPU
    ],
)
def test_cuda_visible_devices_narrow_nvml_count(visible: str | None, count: int) -> None:
    assert _count(visible) == count


@pytest.mark.parametrize("visible", ["0,1", "3,2,1,0,4", "1gpu2,2ampere", "2,2", "0,-1,1", ""])
def test_ordinals_read_as_torch_reads_them(monkeypatch: pytest.MonkeyPatch, visible: str) -> None:
    parse = getattr(torch.cuda, "_parse_visible_devices", None)
    if parse is None:
        pytest.skip("this torch has no _parse_visible_devices")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    ordinals = parse()
    expected = next((i for i, o in enumerate(ordinals) if o >= len(UUIDS)), len(ordinals))
    assert _count(visible) == expected


def test_none_where_nvml_cannot_tell_as_cuda_would() -> None:
    assert _count("MIG-1234") is None
    assert _count(None, FakeNvml(mig=True)) is None
    assert _count(None, cuda_version="13.0") is None  # driver 12.8 runs no CUDA 13 runtime
    assert _count(None, cuda_version="12.4") == 4  # minor-version compatibility
    assert _count(None, cuda_version="11.8") == 4
    broken = FakeNvml()
    broken.nvmlDeviceGetCount = _raises(broken)  # type: ignore[method-assign]
    assert _count(None, broken) is None


def _raises(nvml: FakeNvml) -> Any:
    def fail(*args: Any) -> Any:
        raise nvml.NVMLError("Unknown Error")

    return fail


@pytest.fixture
def no_cuda_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA build of torch whose is_available would fail the test: the count must not run it."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: pytest.fail("cuInit in the parent"))


def _session(nvml: Any) -> Any:
    @contextlib.contextmanager
    def session(arg: Any = None) -> Iterator[Any]:
        yield nvml

    return session


@pytest.mark.usefixtures("no_cuda_init")
def test_run_counts_gpus_without_initialising_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "nvml_session", _session(FakeNvml()))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert workers.resolve_device("auto") == "cuda"
    assert workers.worker_count(None, "cuda") == 2
    with pytest.raises(ValueError, match=r"^--nproc 3: only 2 GPU\(s\) visible on this machine$"):
        workers.worker_count(3, "cuda")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert workers.resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match=r"^--device cuda: no CUDA GPU is visible on this"):
        workers.resolve_device("cuda")


def test_torch_answers_where_nvml_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(probe, "nvml_session", _session(None))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert workers.worker_count(None, "cuda") == 3
    monkeypatch.setattr(probe, "nvml_session", _session(FakeNvml(mig=True)))
    assert workers.worker_count(None, "cuda") == 3


def test_a_run_with_its_own_workers_counts_them_from_torch_s_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch's build read from its files, NVML's count for a CUDA build; the workers' fork
    server (which imports torch) asked only where neither can tell."""
    asked: list[Any] = []

    def in_fork_server(function: Any) -> int:
        asked.append(function)
        return 7

    monkeypatch.setattr(workers, "in_fork_server", in_fork_server)
    monkeypatch.setattr(probe, "nvml_session", _session(FakeNvml()))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    stated: dict[str, str] = {}
    monkeypatch.setattr(probe, "_torch_versions_unimported", lambda: stated)
    cases = [
        ({"torch": "2.13.0", "cuda": "12.8"}, 4),
        ({"torch": "2.13.0"}, 0),  # a CPU-only build sees no GPU
        ({"torch": "2.13.0", "hip": "6.4"}, 7),  # ROCm: only torch can tell
        ({}, 7),  # torch's files unread
    ]
    for stated_now, count in cases:
        stated.clear()
        stated.update(stated_now)
        assert workers.visible_gpus_torch_unimported() == count, stated
    stated.update({"torch": "2.13.0", "cuda": "12.8"})
    monkeypatch.setattr(probe, "nvml_session", _session(None))  # no NVML
    assert workers.visible_gpus_torch_unimported() == 7
    assert asked == [workers.visible_gpus] * 3

"""The run's own workers: the device they use and how many there are.

``--device``, ``--nproc`` and ``--oversubscribe`` as a run with its own workers checks them, and
the GPUs those workers will see, counted without a CUDA context in this process (NVML, where it
can tell; else torch, here or in the workers' fork server).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from clusterbench.config import ConfigError
from clusterbench.runtime.launch import in_fork_server

__all__ = [
    "OVERSUBSCRIBE_FACTOR",
    "OVERSUBSCRIBE_MAX",
    "check_before_torch",
    "resolve_device",
    "visible_gpus",
    "visible_gpus_torch_unimported",
    "worker_count",
]

OVERSUBSCRIBE_FACTOR = 4
"""``--oversubscribe`` allows up to this many CPU workers per core available to the run..."""
OVERSUBSCRIBE_MAX = 256
"""...and never more than this many."""


def _check_device_name(device: str) -> None:
    if device not in ("auto", "cuda", "cpu"):
        raise ConfigError(f"--device must be auto, cuda or cpu, got {device!r}")


def check_before_torch(device: str, *, nproc: int | None, oversubscribe: bool) -> None:
    """The usage errors of a run with its own workers that are told before torch loads and
    the workers' fork server starts: the device's name, the CPU workers' count."""
    _check_device_name(device)
    if nproc is not None and (nproc < 1 or device == "cpu"):
        worker_count(nproc, "cpu", oversubscribe=oversubscribe)


def resolve_device(device: str, *, count_gpus: Callable[[], int] | None = None) -> str:
    """``device`` (auto, cuda, cpu) as the run will use it; ``count_gpus`` counts the GPUs
    (default :func:`visible_gpus`, which imports torch) unless ``device`` is cpu."""
    _check_device_name(device)
    if device == "cpu":
        return device
    has_cuda = (count_gpus or visible_gpus)() > 0
    if device == "cuda" and not has_cuda:
        raise ConfigError("--device cuda: no CUDA GPU is visible on this machine")
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    return device


def visible_gpus() -> int:
    """The GPUs this process's workers will see, counted by NVML: this process initialises no
    CUDA (``torch.cuda.is_available()`` runs cuInit, seconds on a fresh machine, and each
    worker runs its own).  torch's count where NVML cannot tell (no NVML, MIG, ROCm).  Imports
    torch; :func:`visible_gpus_torch_unimported` does not."""
    import torch  # here, not at the top: the commands that do not run import no torch

    count = None
    if torch.version.cuda is not None:  # a CPU-only or ROCm build: only torch can say
        count = _nvml_count(cuda_version=torch.version.cuda)
    if count is None:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    return count


def visible_gpus_torch_unimported() -> int:
    """:func:`visible_gpus` without importing torch here (a run with its own workers leaves
    torch to their fork server): torch's build as its files state it (one for neither CUDA
    nor HIP sees no GPU; a CUDA build, NVML's count), else asked of the fork server."""
    from clusterbench.hardware.probe import _torch_versions_unimported

    stated = _torch_versions_unimported()
    if "torch" in stated and "cuda" not in stated and "hip" not in stated:
        return 0
    count = _nvml_count(cuda_version=stated["cuda"]) if "cuda" in stated else None
    return in_fork_server(visible_gpus) if count is None else count


def _nvml_count(*, cuda_version: str) -> int | None:
    from clusterbench.hardware.probe import nvml_session
    from clusterbench.hardware.visible import visible_cuda_gpus

    with nvml_session() as nvml:
        return None if nvml is None else visible_cuda_gpus(nvml, cuda_version=cuda_version)


def worker_count(
    nproc: int | None,
    device_type: str,
    *,
    oversubscribe: bool = False,
    count_gpus: Callable[[], int] | None = None,
) -> int:
    """How many workers the run starts: ``nproc`` once checked, else 2 on CPU and one per
    visible GPU."""
    if nproc is not None and nproc < 1:
        raise ConfigError(f"--nproc must be at least 1, got {nproc}")
    if device_type == "cpu":
        if nproc is not None:
            _check_cpu_workers(nproc, oversubscribe=oversubscribe)
        return nproc or 2
    count = (count_gpus or visible_gpus)()
    if nproc is not None and nproc > count:
        raise ConfigError(f"--nproc {nproc}: only {count} GPU(s) visible on this machine")
    return nproc or count


def _available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _check_cpu_workers(nproc: int, *, oversubscribe: bool) -> None:
    """At most one CPU worker per core; ``--oversubscribe``: up to 4x the cores, at most 256."""
    cores = _available_cores()
    cap = min(OVERSUBSCRIBE_FACTOR * cores, OVERSUBSCRIBE_MAX)
    if nproc <= cores or (oversubscribe and nproc <= cap):
        return
    rule = f"{OVERSUBSCRIBE_FACTOR}x the cores, at most {OVERSUBSCRIBE_MAX}"
    if oversubscribe:
        raise ConfigError(
            f"--nproc {nproc}: --oversubscribe allows at most {cap} CPU workers here ({rule})"
        )
    raise ConfigError(
        f"--nproc {nproc}: more CPU workers than the {cores} CPU core(s) this process may use; "
        f"--oversubscribe allows up to {cap} ({rule})"
    )

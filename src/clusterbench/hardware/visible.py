"""How many GPUs a CUDA process started now would see, told by NVML without initialising CUDA.

``torch.cuda.is_available()`` calls ``cuInit`` in the asking process: seconds on a fresh H100
machine, and paid again by every worker.  NVML's device list, narrowed by
``CUDA_VISIBLE_DEVICES`` as the CUDA driver reads it, answers the same question without it.
The parsing follows the driver's rules as ``torch.cuda._parse_visible_devices`` states them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from clusterbench.hardware.topology import nvml_query, text

__all__ = ["gpu_driver_loaded", "visible_cuda_gpus"]

GPU_DRIVER_NODES = ("/dev/nvidiactl", "/dev/kfd")
"""NVIDIA's and AMD's control devices: present where a GPU driver is loaded."""


def gpu_driver_loaded() -> bool:
    """Whether a GPU driver is loaded here (its control device exists)."""
    return any(os.path.exists(p) for p in GPU_DRIVER_NODES)


_ORDINAL = re.compile(r"\+?\d+")
"""An entry's leading digits, read as strtoul reads them: ``1gpu2`` is 1."""


def visible_cuda_gpus(
    nvml: Any, *, cuda_version: str | None = None, env: Mapping[str, str] | None = None
) -> int | None:
    """GPUs a CUDA process would see here: NVML's count narrowed by ``CUDA_VISIBLE_DEVICES``
    (ordinals or ``GPU-`` UUIDs, whole or a unique prefix; read up to the first entry that
    names no GPU; a repeated entry leaves none; empty: none).  None where NVML cannot tell
    as CUDA would: a failed query, ``MIG-`` entries or a GPU in MIG mode, or a driver older
    than ``cuda_version``'s major (the CUDA runtime's, e.g. torch's ``12.4``)."""
    env = os.environ if env is None else env
    count = nvml_query(nvml, "nvmlDeviceGetCount")
    if count is None or not _driver_runs(nvml, cuda_version):
        return None
    handles = [nvml_query(nvml, "nvmlDeviceGetHandleByIndex", i) for i in range(int(count))]
    if any(h is None for h in handles) or any(_mig_enabled(nvml, h) for h in handles):
        return None
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return len(handles)
    entries = [entry.strip() for entry in visible.split(",")]
    if entries[0].startswith("MIG-"):
        return None
    if not entries[0].startswith("GPU-"):
        return _count_ordinals(entries, num_gpus=len(handles))
    uuids = [text(nvml_query(nvml, "nvmlDeviceGetUUID", h)) for h in handles]
    if any(uuid is None for uuid in uuids):
        return None
    return _count_uuids(entries, [uuid for uuid in uuids if uuid is not None])


def _count_ordinals(entries: list[str], *, num_gpus: int) -> int:
    """The ordinals read up to the first entry with none (``1gpu2`` reads as 1, as strtoul
    does), none if one repeats; then those before the first GPU that does not exist."""
    ordinals: list[int] = []
    for entry in entries:
        match = _ORDINAL.match(entry)
        ordinal = int(match.group()) if match else -1
        if ordinal in ordinals:
            return 0
        if ordinal < 0:
            break
        ordinals.append(ordinal)
    return next((i for i, o in enumerate(ordinals) if o >= num_gpus), len(ordinals))


def _count_uuids(entries: list[str], uuids: list[str]) -> int:
    """The ``GPU-`` entries read up to the first other one, none if one repeats; then those
    before the first that is no GPU's UUID or a prefix of several."""
    named: list[str] = []
    for entry in entries:
        if entry in named:
            return 0
        if not entry.startswith("GPU-"):
            break
        named.append(entry)
    indices: list[int] = []
    for entry in named:
        matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)]
        if len(matches) != 1:
            break
        if matches[0] in indices:
            return 0
        indices.append(matches[0])
    return len(indices)


def _mig_enabled(nvml: Any, handle: Any) -> bool:
    mode = nvml_query(nvml, "nvmlDeviceGetMigMode", handle)  # [current, pending]; None: no MIG
    return mode is not None and int(mode[0]) == 1


def _driver_runs(nvml: Any, cuda_version: str | None) -> bool:
    """Whether the driver runs CUDA ``cuda_version`` (same major or newer: minor-version
    compatibility); True when either version is unknown."""
    driver = nvml_query(nvml, "nvmlSystemGetCudaDriverVersion")  # e.g. 12080
    if driver is None or not cuda_version:
        return True
    try:
        return int(driver) // 1000 >= int(cuda_version.split(".")[0])
    except ValueError:
        return True

"""Host inventory: GPUs (NVML, else torch + sysfs), CPU, NICs, versions and GPU topology.

Every reader takes the filesystem root (``/`` by default; tests pass a fake sysfs/proc tree) and
the NVML module (``pynvml`` by default; tests pass a stand-in).  With NVML present the probe
uses NVML only and never creates a CUDA context.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import platform
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clusterbench.hardware.specs import match_spec, pcie_gen_from_rate, to_spec_ref
from clusterbench.hardware.sysfs import (
    numa_node_cpus,
    numa_of,
    parse_cpulist,
    pci_device_dir,
    probe_cpu,
    probe_nics,
    read_int,
    read_text,
)
from clusterbench.hardware.topology import (
    active_nvlinks,
    gpu_topology,
    nvml_bus_id,
    nvml_query,
    text,
    torch_pci_bus_id,
    torch_topology,
)
from clusterbench.schema import GpuInfo, HostInfo, PCIeLink, Topology

__all__ = [
    "AUTO",
    "cpu_only_torch_unimported",
    "load_nvml",
    "numa_node_cpus",
    "nvml_session",
    "parse_cpulist",
    "probe_cpu",
    "probe_gpus",
    "probe_host",
    "probe_nics",
    "probe_versions",
    "read_pcie_link",
    "sysfs_pcie_link",
]

log = logging.getLogger(__name__)

AUTO: Any = object()
"""Default for ``nvml=``: import ``pynvml`` and initialise it (None if that fails)."""


# ---------------------------------------------------------------------------- NVML session


def load_nvml() -> Any | None:
    """``pynvml`` after ``nvmlInit``, or None without the bindings or the driver library."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        log.debug("nvmlInit failed: %s", exc)
        return None
    return pynvml


@contextlib.contextmanager
def nvml_session(nvml: Any = AUTO) -> Iterator[Any | None]:
    """Yield an initialised NVML (or None); shut it down after if this session started it."""
    if nvml is not AUTO:
        yield nvml
        return
    lib = load_nvml()
    try:
        yield lib
    finally:
        if lib is not None:
            nvml_query(lib, "nvmlShutdown")


# ---------------------------------------------------------------------------- GPUs


def _parse_link_speed(raw: str | None) -> int | None:
    """``32.0 GT/s PCIe`` -> 5."""
    if not raw:
        return None
    try:
        return pcie_gen_from_rate(float(raw.split()[0]))
    except ValueError:
        return None


def sysfs_pcie_link(root: str | Path, bus_id: str) -> PCIeLink:
    """Current and maximum PCIe link of a PCI device, from sysfs."""
    device = pci_device_dir(Path(root), bus_id)
    return PCIeLink(
        gen=_parse_link_speed(read_text(device / "current_link_speed")),
        width=read_int(device / "current_link_width"),
        max_gen=_parse_link_speed(read_text(device / "max_link_speed")),
        max_width=read_int(device / "max_link_width"),
    )


def _nvml_pcie_link(nvml: Any, handle: Any) -> PCIeLink:
    return PCIeLink(
        gen=nvml_query(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle),
        width=nvml_query(nvml, "nvmlDeviceGetCurrPcieLinkWidth", handle),
        max_gen=nvml_query(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", handle),
        max_width=nvml_query(nvml, "nvmlDeviceGetMaxPcieLinkWidth", handle),
    )


def _gpu_info(
    *,
    index: int,
    name: str,
    memory_bytes: int | None,
    bus_id: str | None,
    root: Path,
) -> GpuInfo:
    spec = match_spec(name, memory_bytes)
    return GpuInfo(
        index=index,
        name=name,
        pci_bus_id=bus_id,
        memory_bytes=memory_bytes,
        numa_node=numa_of(pci_device_dir(root, bus_id)) if bus_id else None,
        spec=to_spec_ref(spec) if spec is not None else None,
    )


def _nvml_gpu(nvml: Any, index: int, root: Path) -> GpuInfo:
    handle = nvml_query(nvml, "nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        return GpuInfo(index=index, name="unknown")
    memory = nvml_query(nvml, "nvmlDeviceGetMemoryInfo", handle)
    info = _gpu_info(
        index=index,
        name=text(nvml_query(nvml, "nvmlDeviceGetName", handle)) or "unknown",
        memory_bytes=int(memory.total) if memory is not None else None,
        bus_id=nvml_bus_id(nvml, handle),
        root=root,
    )
    links = active_nvlinks(nvml, handle)
    return info.model_copy(
        update={
            "uuid": text(nvml_query(nvml, "nvmlDeviceGetUUID", handle)),
            "pcie": _nvml_pcie_link(nvml, handle),
            "nvlink_active": len(links) if links is not None else None,
        }
    )


def _torch_gpus(root: Path) -> list[GpuInfo]:
    """GPUs through torch.cuda (CUDA or ROCm) when NVML is absent; PCIe from sysfs."""
    if cpu_only_torch_unimported():
        return []
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        bus_id = torch_pci_bus_id(index)
        info = _gpu_info(
            index=index, name=props.name, memory_bytes=props.total_memory, bus_id=bus_id, root=root
        )
        if bus_id is not None:
            info = info.model_copy(update={"pcie": sysfs_pcie_link(root, bus_id)})
        gpus.append(info)
    return gpus


def probe_gpus(nvml: Any | None, *, root: str | Path = "/") -> list[GpuInfo]:
    """Every GPU of the host: NVML if given (no CUDA context), else torch.cuda; [] without."""
    if nvml is None:
        return _torch_gpus(Path(root))
    count = nvml_query(nvml, "nvmlDeviceGetCount") or 0
    return [_nvml_gpu(nvml, index, Path(root)) for index in range(count)]


def read_pcie_link(index: int, *, nvml: Any = AUTO, root: str | Path = "/") -> PCIeLink | None:
    """The PCIe link of GPU ``index`` right now (idle GPUs down-train; read it under load).

    ``index`` is the NVML index when NVML is present, else the torch device index.
    """
    with nvml_session(nvml) as lib:
        if lib is not None:
            handle = nvml_query(lib, "nvmlDeviceGetHandleByIndex", index)
            return _nvml_pcie_link(lib, handle) if handle is not None else None
    try:
        bus_id = torch_pci_bus_id(index)
    except (ImportError, RuntimeError, AssertionError) as exc:  # no torch / no such device
        log.debug("no PCI address for torch device %d: %s", index, exc)
        return None
    return sysfs_pcie_link(root, bus_id) if bus_id else None


# ---------------------------------------------------------------------------- versions


def _package_version() -> str:
    try:
        return importlib.metadata.version("clusterbench")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0+src"


def _nccl_version(torch: Any) -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError) as exc:  # CPU or ROCm-less builds lack NCCL
        log.debug("no NCCL version: %s", exc)
        return None
    if isinstance(version, tuple):
        return ".".join(str(v) for v in version)
    # Old torch: one int, NCCL_VERSION_CODE of nccl.h: major*1000+minor*100+patch before
    # NCCL 2.9 (2708), major*10000+minor*100+patch since (20903).
    code = int(version)
    major, rest = divmod(code, 10000 if code >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _torch_versions() -> dict[str, str]:
    if cpu_only_torch_unimported():
        return _torch_versions_unimported()
    try:
        import torch
    except ImportError:
        return {}
    found = {
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "nccl": _nccl_version(torch),
    }
    return {key: value for key, value in found.items() if value}


def _nvml_versions(nvml: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    driver = text(nvml_query(nvml, "nvmlSystemGetDriverVersion"))
    if driver:
        found["driver"] = driver
    cuda = nvml_query(nvml, "nvmlSystemGetCudaDriverVersion")  # e.g. 12080
    if cuda is not None:
        found["nvml_cuda"] = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"
    return found


def _torch_versions_unimported() -> dict[str, str]:
    """torch's, CUDA's and HIP's versions as ``torch/version.py`` states them, read as text:
    importing torch takes seconds, more than ``doctor --fast`` may.  No NCCL version (only
    torch's library knows it)."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")  # finds the package without importing it
    except (ImportError, ValueError):
        return {}
    if spec is None or spec.origin is None:
        return {}
    try:
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    stated: dict[str, str] = {}
    for node in tree.body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        text = value.value if isinstance(value, ast.Constant) else None
        if isinstance(target, ast.Name) and isinstance(text, str) and text:
            stated[target.id] = text
    found = {"torch": stated.get("__version__"), "cuda": stated.get("cuda"),
             "hip": stated.get("hip")}  # fmt: skip
    return {key: value for key, value in found.items() if value}


def cpu_only_torch_unimported() -> bool:
    """Whether torch is not imported yet and its files state a build for neither CUDA nor
    HIP: such a torch sees no GPU and has no NCCL, so importing it (seconds) would tell
    nothing that its files do not (``info`` on a CPU machine).  Once imported, ask torch."""
    if "torch" in sys.modules:
        return False
    stated = _torch_versions_unimported()
    return "torch" in stated and "cuda" not in stated and "hip" not in stated


def probe_versions(nvml: Any | None, *, import_torch: bool = True) -> dict[str, str]:
    """Python, torch, CUDA/HIP, NCCL, driver, kernel and clusterbench versions
    (``import_torch=False``: torch's from its files, without NCCL's)."""
    versions = {
        "python": platform.python_version(),
        "kernel": platform.release(),
        "clusterbench": _package_version(),
        **(_torch_versions() if import_torch else _torch_versions_unimported()),
    }
    if nvml is not None:
        versions.update(_nvml_versions(nvml))
    return versions


# ---------------------------------------------------------------------------- host


def probe_host(*, root: str | Path = "/", nvml: Any = AUTO, import_torch: bool = True) -> HostInfo:
    """Everything about this host that results.json records.  ``import_torch=False`` (``doctor
    --fast``): torch's version from its files, no NCCL version; torch is still imported where
    NVML cannot list the GPUs or answer their peer access."""
    with nvml_session(nvml) as lib:
        gpus = probe_gpus(lib, root=root)
        topology = Topology()
        if lib is not None and gpus:
            topology = gpu_topology(lib)
        elif gpus:
            topology = torch_topology(len(gpus))
        versions = probe_versions(lib, import_torch=import_torch)
    return HostInfo(
        hostname=socket.gethostname(),
        gpus=gpus,
        cpu=probe_cpu(root),
        nics=probe_nics(root),
        versions=versions,
        topology=topology,
    )

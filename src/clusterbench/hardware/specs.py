"""Dense peak specs of known GPUs (vendor datasheets) and PCIe link rates.

Every figure is *dense* (without 2:4 sparsity): datasheets print the sparsity figure next to
it, twice as large.  Units: TFLOP/s = 1e12 FLOP/s, GB/s = 1e9 B/s.  An unknown SKU gets no
spec and is compared with its peers only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterbench.schema import GpuSpecRef

__all__ = [
    "SPECS",
    "GpuSpec",
    "match_spec",
    "pcie_gen_from_rate",
    "pcie_link_gbps",
    "spec_ref_for",
    "to_spec_ref",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """Datasheet peaks of one GPU model, as one torch device sees it."""

    sku: str
    dense_tflops: dict[str, float]
    """Dense peak TFLOP/s keyed by dtype: fp32, tf32, fp16, bf16, fp8 (absent if unsupported)."""
    hbm_gbps: float
    """Device memory bandwidth, GB/s."""
    nvlink_gbps_per_dir: float | None
    """NVLink bandwidth per direction summed over the GPU's links, GB/s (None: no NVLink)."""
    pcie_gen: int | None
    pcie_width: int | None
    source: str
    """The vendor datasheet the figures come from."""
    busbw_achievable: dict[str, float] = field(default_factory=dict)
    """Large-message NCCL busbw within one node that healthy hardware reaches, GB/s, keyed by
    collective (all_reduce, all_gather, ...): what collectives are judged against, since no
    collective reaches the raw NVLink rate (empty: judged against ``nvlink_gbps_per_dir``)."""
    busbw_source: str = ""


def _tflops(*, fp32: float, tf32: float | None, bf16: float, fp8: float | None) -> dict[str, float]:
    # fp16 and bf16 have the same dense tensor-core rate on every SKU of the table.
    values = {"fp32": fp32, "tf32": tf32, "fp16": bf16, "bf16": bf16, "fp8": fp8}
    return {dtype: v for dtype, v in values.items() if v is not None}


# Figures: docs/reference.md "Dense peak specs", taken from the datasheets named in
# `source`.
A100_SXM_80GB = GpuSpec(
    sku="A100 SXM 80GB",
    dense_tflops=_tflops(fp32=19.5, tf32=156.0, bf16=312.0, fp8=None),
    hbm_gbps=2039.0,
    nvlink_gbps_per_dir=300.0,
    pcie_gen=4,
    pcie_width=16,
    source="NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB, dense)",
)
# NVLink 4 (H100/H200 SXM, 18 links): busbw at 8 GiB of nccl-tests-style runs on 2x H200 NV18,
# NVLS off (docs/reference.md, "Measured on this project's GPU machine"); public 8-GPU ring
# figures are a little higher (8x H100 all_reduce about 370, 8x H200 368 GB/s), so these are
# the conservative choice.  clusterbench's own run on such a machine gave 344.5 / 296.9 / 304.0
# / 339.1 / 371.0 / 366.2 in this order (docs/results/H200-level2.md), within 3% of them.
_NVLINK4_BUSBW = {
    "all_reduce": 342.0,
    "all_gather": 298.0,
    "reduce_scatter": 296.0,
    "all_to_all": 339.0,
    "broadcast": 367.0,
    "send_recv": 366.0,
}
_NVLINK4_BUSBW_SOURCE = (
    "clusterbench measurements: nccl-tests-style busbw at 8 GiB, 2x H200 NV18, NVLS off"
)
H100_SXM = GpuSpec(
    sku="H100 SXM",
    dense_tflops=_tflops(fp32=67.0, tf32=494.5, bf16=989.0, fp8=1979.0),
    hbm_gbps=3350.0,
    nvlink_gbps_per_dir=450.0,
    pcie_gen=5,
    pcie_width=16,
    source="NVIDIA H100 Tensor Core GPU datasheet (SXM5 80GB, dense)",
    busbw_achievable=_NVLINK4_BUSBW,
    busbw_source=_NVLINK4_BUSBW_SOURCE,
)
H100_PCIE = GpuSpec(
    sku="H100 PCIe",
    dense_tflops=_tflops(fp32=51.0, tf32=378.0, bf16=756.0, fp8=1513.0),
    hbm_gbps=2000.0,
    nvlink_gbps_per_dir=None,  # only through an optional NVLink bridge
    pcie_gen=5,
    pcie_width=16,
    source="NVIDIA H100 Tensor Core GPU datasheet (PCIe 80GB, dense)",
)
H200_SXM = GpuSpec(
    sku="H200 SXM",
    dense_tflops=_tflops(fp32=67.0, tf32=494.5, bf16=989.0, fp8=1979.0),
    hbm_gbps=4800.0,
    nvlink_gbps_per_dir=450.0,
    pcie_gen=5,
    pcie_width=16,
    source="NVIDIA H200 Tensor Core GPU datasheet (SXM 141GB, dense)",
    busbw_achievable=_NVLINK4_BUSBW,
    busbw_source=_NVLINK4_BUSBW_SOURCE,
)
B200 = GpuSpec(
    sku="B200",
    dense_tflops=_tflops(fp32=75.0, tf32=1125.0, bf16=2250.0, fp8=4500.0),
    # The datasheets give 7.7-8.0 TB/s depending on revision; 8.0 = DGX B200's 64 TB/s / 8.
    hbm_gbps=8000.0,
    nvlink_gbps_per_dir=900.0,
    # The GPU supports Gen6 but HGX/DGX B200 hosts link it at Gen5 x16.
    pcie_gen=5,
    pcie_width=16,
    source="NVIDIA HGX B200 / DGX B200 datasheet (dense)",
)
L40S = GpuSpec(
    sku="L40S",
    dense_tflops=_tflops(fp32=91.6, tf32=183.0, bf16=362.0, fp8=733.0),
    hbm_gbps=864.0,  # GDDR6, not HBM
    nvlink_gbps_per_dir=None,
    pcie_gen=4,
    pcie_width=16,
    source="NVIDIA L40S GPU datasheet (dense)",
)
# torch sees each of the MI250X's two GCDs as one device, so the per-package figures of the
# datasheet (FP32 47.9, BF16 383 TFLOP/s, 3.2768 TB/s) are halved here.
MI250X = GpuSpec(
    sku="MI250X (one GCD)",
    dense_tflops=_tflops(fp32=47.9 / 2, tf32=None, bf16=383.0 / 2, fp8=None),
    hbm_gbps=3276.8 / 2,
    nvlink_gbps_per_dir=None,  # Infinity Fabric, not NVLink
    pcie_gen=4,
    pcie_width=16,
    source="AMD Instinct MI250X datasheet (per package, halved per GCD)",
)
MI300X = GpuSpec(
    sku="MI300X",
    dense_tflops=_tflops(fp32=163.4, tf32=653.7, bf16=1307.4, fp8=2614.9),
    hbm_gbps=5300.0,
    # Infinity Fabric: 64 GB/s per direction to each of 7 peers; not an NVLink aggregate.
    nvlink_gbps_per_dir=None,
    pcie_gen=5,
    pcie_width=16,
    source="AMD Instinct MI300X datasheet (dense)",
)

SPECS: tuple[GpuSpec, ...] = (
    A100_SXM_80GB,
    H100_SXM,
    H100_PCIE,
    H200_SXM,
    B200,
    L40S,
    MI250X,
    MI300X,
)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    """Full match on the normalised device name (upper case, vendor prefix removed)."""
    spec: GpuSpec
    memory_gib: float
    """Nominal device memory, to reject a same-named part of another size (or a MIG slice)."""


# Names as NVML (nvidia-smi) and torch.cuda.get_device_name report them.  Full matches only, so
# "H200 NVL", "H100 NVL", "A100-PCIE-40GB", "A100-SXM4-40GB", "GB200", "L40" stay unknown.
_RULES: tuple[_Rule, ...] = (
    _Rule(re.compile(r"A100[- ]SXM4?[- ]80GB"), A100_SXM_80GB, 80.0),
    _Rule(re.compile(r"H100 80GB HBM3|H100[- ]SXM5?([- ]80GB)?"), H100_SXM, 80.0),
    _Rule(re.compile(r"H100 PCIE( 80GB)?"), H100_PCIE, 80.0),
    _Rule(re.compile(r"H200( SXM5?)?( 141GB)?( HBM3E)?"), H200_SXM, 141.0),
    _Rule(re.compile(r"B200( SXM6?)?( \d+GB)?( HBM3E)?"), B200, 180.0),
    _Rule(re.compile(r"L40S"), L40S, 48.0),
    _Rule(re.compile(r"MI250X"), MI250X, 64.0),
    _Rule(re.compile(r"MI300X( OAM)?"), MI300X, 192.0),
)
_VENDOR_PREFIX = re.compile(r"^(NVIDIA|AMD)\s+(INSTINCT\s+)?")
# Usable memory is a little under the nominal size (H200: 140.4 GiB of 141 GB; L40S: 45 GiB
# of 48 GB); a MIG slice or another memory size falls outside.
_MEMORY_TOLERANCE = (0.85, 1.15)


def _normalise_name(name: str) -> str:
    upper = " ".join(name.upper().split())
    return _VENDOR_PREFIX.sub("", upper)


def match_spec(name: str, memory_bytes: int | None = None) -> GpuSpec | None:
    """The spec entry for a device name as NVML or torch report it; None for an unknown SKU."""
    normalised = _normalise_name(name)
    for rule in _RULES:
        if rule.pattern.fullmatch(normalised) is None:
            continue
        if memory_bytes is not None:
            ratio = memory_bytes / 2**30 / rule.memory_gib
            low, high = _MEMORY_TOLERANCE
            if not low <= ratio <= high:
                return None
        return rule.spec
    return None


def spec_ref_for(name: str) -> GpuSpecRef | None:
    """The results.json spec of the GPU a tool names (nccl-tests' device lines, a trace's
    deviceProperties), or None for a model without an entry."""
    spec = match_spec(name)
    return None if spec is None else to_spec_ref(spec)


def to_spec_ref(spec: GpuSpec) -> GpuSpecRef:
    """The results.json form of a spec entry."""
    return GpuSpecRef(
        sku=spec.sku,
        dense_tflops=dict(spec.dense_tflops),
        hbm_gbps=spec.hbm_gbps,
        nvlink_gbps_per_dir=spec.nvlink_gbps_per_dir,
        pcie_gen=spec.pcie_gen,
        pcie_width=spec.pcie_width,
        source=spec.source,
        busbw_achievable=dict(spec.busbw_achievable),
        busbw_source=spec.busbw_source,
    )


# PCI-SIG PCI Express Base Specification rates per lane: Gen1 2.5 and Gen2 5.0 GT/s with
# 8b/10b encoding; Gen3 8, Gen4 16, Gen5 32 GT/s with 128b/130b; Gen6 64 GT/s PAM4 with FLIT
# mode (242 data bytes of each 256-byte FLIT).
_PCIE_GT_PER_S: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_PCIE_ENCODING: dict[int, float] = {
    1: 8 / 10,
    2: 8 / 10,
    3: 128 / 130,
    4: 128 / 130,
    5: 128 / 130,
    6: 242 / 256,
}


def pcie_link_gbps(gen: int, width: int) -> float:
    """Theoretical one-direction data rate of a PCIe link, GB/s (Gen5 x16: 63.0)."""
    if gen not in _PCIE_GT_PER_S:
        raise ValueError(f"unknown PCIe generation {gen} (known: 1-6)")
    if width < 1:
        raise ValueError(f"PCIe width must be >= 1, got {width}")
    # GT/s per lane x encoding efficiency x lanes / 8 bits per byte
    return _PCIE_GT_PER_S[gen] * _PCIE_ENCODING[gen] * width / 8


def pcie_gen_from_rate(gt_per_s: float) -> int | None:
    """The PCIe generation of a per-lane rate in GT/s (sysfs ``current_link_speed``)."""
    for gen, rate in _PCIE_GT_PER_S.items():
        if abs(rate - gt_per_s) < 0.01:
            return gen
    return None

"""The dense peak table, device-name matching and PCIe link rates."""

from __future__ import annotations

import pytest

from clusterbench.hardware.specs import (
    SPECS,
    match_spec,
    pcie_gen_from_rate,
    pcie_link_gbps,
    to_spec_ref,
)

GIB = 2**30


@pytest.mark.parametrize(
    ("name", "sku"),
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA L40S", "L40S"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI250X", "MI250X (one GCD)"),
        ("MI250X", "MI250X (one GCD)"),
    ],
)
def test_known_names_match(name: str, sku: str) -> None:
    spec = match_spec(name)
    assert spec is not None
    assert spec.sku == sku


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA H200 NVL",
        "NVIDIA H100 NVL",
        "NVIDIA A100-PCIE-40GB",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA GB200",
        "NVIDIA L40",
        "NVIDIA H100",
        "AMD Instinct MI300A",
        "AMD Instinct MI325X",
        "NVIDIA GeForce RTX 4090",
        "",
    ],
)
def test_other_names_are_unknown(name: str) -> None:
    assert match_spec(name) is None


def test_memory_size_must_fit_the_sku() -> None:
    # nvidia-smi on an H200 shows 143771 MiB; an H100 80GB 81559 MiB.
    assert match_spec("NVIDIA H200", 143771 * 2**20) is not None
    assert match_spec("NVIDIA H100 80GB HBM3", 81559 * 2**20) is not None
    # A MIG slice or another memory size is not the datasheet part.
    assert match_spec("NVIDIA H200", 18 * GIB) is None
    assert match_spec("NVIDIA A100-SXM4-80GB", 40 * GIB) is None


def test_peaks_are_dense_datasheet_values() -> None:
    h200 = match_spec("NVIDIA H200")
    assert h200 is not None
    assert h200.dense_tflops == {
        "fp32": 67.0,
        "tf32": 494.5,
        "fp16": 989.0,
        "bf16": 989.0,
        "fp8": 1979.0,
    }
    assert h200.hbm_gbps == 4800.0
    assert h200.nvlink_gbps_per_dir == 450.0
    assert (h200.pcie_gen, h200.pcie_width) == (5, 16)


def test_missing_dtypes_are_omitted() -> None:
    a100 = match_spec("NVIDIA A100-SXM4-80GB")
    mi250x = match_spec("MI250X")
    assert a100 is not None and mi250x is not None
    assert "fp8" not in a100.dense_tflops
    assert "tf32" not in mi250x.dense_tflops and "fp8" not in mi250x.dense_tflops
    assert mi250x.dense_tflops["bf16"] == pytest.approx(383.0 / 2)


def test_every_spec_is_consistent() -> None:
    for spec in SPECS:
        assert spec.dense_tflops["fp16"] == spec.dense_tflops["bf16"], spec.sku
        assert spec.dense_tflops["bf16"] > spec.dense_tflops["fp32"], spec.sku
        assert spec.source, spec.sku


def test_to_spec_ref_copies_every_field() -> None:
    spec = match_spec("NVIDIA H100 PCIe")
    assert spec is not None
    ref = to_spec_ref(spec)
    assert ref.sku == "H100 PCIe"
    assert ref.dense_tflops["fp8"] == 1513.0
    assert ref.hbm_gbps == 2000.0
    assert ref.nvlink_gbps_per_dir is None
    assert ref.source == spec.source
    ref.dense_tflops["fp8"] = 0.0
    assert spec.dense_tflops["fp8"] == 1513.0  # the table is not aliased


@pytest.mark.parametrize(
    ("gen", "width", "gbps"),
    [
        (1, 16, 4.0),  # 2.5 GT/s * 8/10 * 16 / 8
        (2, 16, 8.0),
        (3, 16, 15.754),  # 8 GT/s * 128/130 * 16 / 8
        (4, 16, 31.508),
        (5, 16, 63.015),
        (5, 8, 31.508),
        (6, 16, 121.0),  # 64 GT/s * 242/256 * 16 / 8
    ],
)
def test_pcie_link_gbps(gen: int, width: int, gbps: float) -> None:
    assert pcie_link_gbps(gen, width) == pytest.approx(gbps, abs=1e-3)


def test_pcie_link_gbps_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="generation"):
        pcie_link_gbps(9, 16)
    with pytest.raises(ValueError, match="width"):
        pcie_link_gbps(5, 0)


def test_pcie_gen_from_rate() -> None:
    assert pcie_gen_from_rate(32.0) == 5
    assert pcie_gen_from_rate(2.5) == 1
    assert pcie_gen_from_rate(64.0) == 6
    assert pcie_gen_from_rate(3.0) is None

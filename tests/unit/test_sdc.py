"""The silent-data-corruption check: the vote, the verdicts on hand-built hashes, the section,
and the computation itself on one CPU rank (inputs, chain, planted flip)."""

from __future__ import annotations

import pytest
import torch

from clusterbench.benchmarks.sdc import SdcConfig, SdcMetrics
from clusterbench.benchmarks.sdc import findings as sdc_analysis
from clusterbench.benchmarks.sdc import section as sdc_section
from clusterbench.benchmarks.sdc.compute import (
    Case,
    chain,
    diff,
    flip_bit,
    make_inputs,
    result_hash,
)
from clusterbench.benchmarks.sdc.measure import case_params, sdc
from clusterbench.benchmarks.sdc.vote import differing_repeats, modal, vote
from clusterbench.config import ConfigError, Thresholds, build_run_config
from clusterbench.schema import (
    Finding,
    GpuInfo,
    HostInfo,
    Measurement,
    ParamValue,
    Results,
    RunInfo,
    ToolInfo,
)
from tests.helpers import one_rank_ctx

CASE = Case("bf16", 4096, 4096, 4096, depth=4)
H200 = "NVIDIA H200 (132 SMs) · driver 570.1 · torch 2.11 · CUDA 13.0 · cuBLAS 13.1"
GOOD, BAD = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"


def device(
    rank: int, hashes: list[str], *, group: str = H200, host: str = "node0", cpu: bool = False
) -> Measurement:
    """The sdc.mismatches record of one rank for CASE (the vote recomputes from the hashes)."""
    params: dict[str, ParamValue] = {
        **case_params(CASE, len(hashes)),
        "group": group,
        "hash": modal(hashes),
        "repeat_hashes": ",".join(hashes),
    }
    return Measurement(
        benchmark="sdc", metric="mismatches", value=0.0, unit="count", params=params, rank=rank,
        host=host, device=f"cpu:{rank}" if cpu else f"cuda:{rank}",
    )  # fmt: skip


def diffs(rank: int, elements: int, gap: float, *, against: str = "peers") -> list[Measurement]:
    params: dict[str, ParamValue] = {**case_params(CASE, 5), "against": against}
    return [
        Measurement(benchmark="sdc", metric=metric.name, value=value, unit=metric.unit,
                    params=params, rank=rank, host="node0", device=f"cuda:{rank}")
        for metric, value in ((SdcMetrics.diff_elements, elements), (SdcMetrics.max_abs_diff, gap))
    ]  # fmt: skip


def results(
    measurements: list[Measurement], *, backend: str = "nccl", planted: int = -1
) -> Results:
    gpus = [GpuInfo(index=i, name="NVIDIA H200", uuid=f"GPU-{i}{i}{i}") for i in range(8)]
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=RunInfo(id="r", started="2026-12-01T00:00:00Z", suite="quick", world_size=8,
                    num_nodes=1, backend=backend, command="clusterbench run",
                    config={"benchmarks": {"sdc": {"plant_flip_rank": planted}}}),
        hosts=[HostInfo(hostname="node0", gpus=gpus)],
        measurements=measurements,
    )  # fmt: skip


def judged(rs: Results) -> list[Finding]:
    return sdc_analysis.findings(rs, Thresholds())


# --- the vote --------------------------------------------------------------------------------


def test_the_majority_is_the_reference_and_the_odd_one_is_named() -> None:
    v = vote({0: [GOOD] * 3, 1: [GOOD] * 3, 2: [BAD] * 3, 3: [GOOD] * 3})
    assert (v.reference, v.against, v.pivot, v.odd, v.decided) == (GOOD, GOOD, 0, (2,), True)
    # the odd one first: the pivot is the lowest rank holding the reference
    v = vote({0: [BAD], 1: [GOOD], 2: [GOOD]})
    assert (v.reference, v.pivot, v.odd) == (GOOD, 1, (0,))


def test_two_that_disagree_have_no_majority() -> None:
    v = vote({0: [GOOD] * 5, 1: [BAD] * 5})
    assert v.reference is None and not v.decided
    assert (v.against, v.pivot, v.odd) == (GOOD, 0, (0, 1))


@pytest.mark.parametrize(
    ("hashes", "reference"),
    [
        ({0: ["a"], 1: ["b"], 2: ["c"]}, None),  # all differ
        ({0: ["a"], 1: ["a"], 2: ["b"], 3: ["b"]}, None),  # a tie at the top
        ({0: ["a"], 1: ["a"], 2: ["b"], 3: ["c"]}, "a"),  # two alike beat two lone ones
        ({0: ["a"]}, "a"),  # one device is its own reference
    ],
)
def test_ties_and_lone_results(hashes: dict[int, list[str]], reference: str | None) -> None:
    assert vote(hashes).reference == reference


def test_a_device_votes_its_most_common_repeat() -> None:
    assert modal(["x", "y", "y"]) == "y"
    assert modal(["x", "y"]) == "x"  # a tie: the first seen
    assert differing_repeats(["x", "y", "x", "z"], "x") == [1, 3]
    v = vote({0: [GOOD, BAD, GOOD], 1: [GOOD] * 3, 2: [GOOD] * 3})
    assert v.reference == GOOD and v.odd == ()  # one bad repeat: unstable, not outvoted


# --- verdicts --------------------------------------------------------------------------------


def test_one_gpu_that_differs_fails_named_with_its_uuid() -> None:
    ms = [device(r, [BAD if r == 2 else GOOD] * 5) for r in range(4)]
    found = judged(results([*ms, *diffs(2, 3, 0.0078125)]))
    assert [f.id for f in found] == ["sdc.mismatch"]
    f = found[0]
    assert (f.severity, f.scope) == ("fail", "host:node0/cuda:2")
    assert "rank 2 (host node0, cuda:2, GPU 2, uuid GPU-222)" in f.message
    assert "3 other devices" in f.message and H200 in f.message
    assert "all 5 repeats differ: 3 of 16,777,216 elements differ" in f.message
    assert "0.00781" in f.message
    for other in ("rank 0", "rank 1", "rank 3"):
        assert other not in f.message
    case = f.evidence["cases"][0]
    assert case["repeats_differing"] == [0, 1, 2, 3, 4] and case["reference"] == GOOD
    assert case["diff_elements"] == 3 and f.evidence["uuid"] == "GPU-222"
    assert "dcgmi diag" in f.fix


def test_two_gpus_that_disagree_cannot_tell_which() -> None:
    found = judged(results([device(0, [GOOD] * 5), device(1, [BAD] * 5), *diffs(1, 1, 0.5)]))
    assert [f.id for f in found] == ["sdc.mismatch"]
    f = found[0]
    assert f.severity == "fail" and f.evidence["undecided"] is True
    assert f.evidence["ranks"] == [0, 1]
    assert "rank 0 (host node0, cuda:0" in f.message and "rank 1 (host node0, cuda:1" in f.message
    assert "which cannot be told from 2" in f.message and "third device" in f.message
    assert "1 of 16,777,216 elements differs" in f.message


def test_a_repeat_that_differs_is_unstable_not_outvoted() -> None:
    flaky = [GOOD, GOOD, GOOD, BAD, GOOD]
    ms = [device(0, [GOOD] * 5), device(1, flaky), device(2, [GOOD] * 5)]
    found = judged(results([*ms, *diffs(1, 1, 2.0**-8, against="repeats")]))
    assert [f.id for f in found] == ["sdc.unstable"]
    f = found[0]
    assert f.scope == "host:node0/cuda:1" and "rank 1 (" in f.message
    assert "repeat 3 of 5 differs from the other 4: 1 of 16,777,216 elements differs" in f.message
    assert "rank 0" not in f.message and "rank 2" not in f.message


def test_a_clean_check_says_what_it_compared() -> None:
    a100 = "NVIDIA A100 (108 SMs) · driver 570.1 · torch 2.11 · CUDA 13.0 · cuBLAS 13.1"
    ms = [device(0, [GOOD] * 5), device(1, [GOOD] * 5), device(2, [BAD] * 5, group=a100)]
    (f,) = judged(results(ms))
    assert (f.id, f.severity) == ("sdc.ok", "info")
    assert "3 device(s)" in f.message and f"2 × {H200}" in f.message and f"1 × {a100}" in f.message
    assert "bf16 4096x4096x4096" in f.message and "chain of 4 GEMMs run 5 times" in f.message
    assert "compared within themselves only" in f.message  # other bits on the A100: no verdict
    assert "checked across repeats only" in f.message  # the lone A100
    assert f.evidence["groups"] == {H200: 2, a100: 1}


def test_cpu_workers_state_it_as_info_but_still_name_the_rank() -> None:
    ms = [device(r, [BAD if r == 1 else GOOD] * 5, cpu=True, group="CPU") for r in range(3)]
    (f,) = judged(results(ms, backend="gloo", planted=1))
    assert (f.id, f.severity, f.scope) == ("sdc.mismatch", "info", "host:node0/cpu:1")
    assert "rank 1 (host node0, cpu:1)" in f.message and "rank 0" not in f.message
    assert "sdc.plant_flip_rank=1" in f.fix


def test_no_sdc_measurements_no_findings() -> None:
    assert judged(results([])) == []


def test_section_shows_each_devices_hash_and_verdict() -> None:
    ms = [device(r, [BAD if r == 2 else GOOD] * 5) for r in range(3)]
    (grid,) = sdc_section.section(ms, multi_host=False).grids
    assert f"reference {GOOD[:8]}" in grid.title and "bf16 4096x4096x4096" in grid.title
    assert grid.rows[0] == ("cuda:0", "0", GOOD[:8], "5 identical", "match")
    assert grid.rows[2] == ("cuda:2", "2", BAD[:8], "5 identical", "DIFFERS (5 of 5)")


# --- the computation, on one CPU rank --------------------------------------------------------


def test_inputs_are_fixed_and_exact_in_every_dtype() -> None:
    small = Case("bf16", 64, 32, 48, depth=3)
    cpu = torch.device("cpu")
    first = make_inputs(small, seed=7, device=cpu)
    again = make_inputs(small, seed=7, device=cpu)
    other = make_inputs(small, seed=8, device=cpu)
    assert [t.shape for t in first] == [(64, 48), (48, 32), (32, 48)]
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])
    fp32 = make_inputs(Case("fp32", 64, 32, 48, depth=3), seed=7, device=cpu)
    # the same numbers in fp32 and bf16: integers times powers of two, exact in both
    assert all(torch.equal(x.float(), y) for x, y in zip(first, fp32, strict=True))
    out = chain(*first, depth=3)
    assert out.shape == small.out_shape == (64, 32)
    assert 0.1 < float(out.float().std()) < 10  # the scaling keeps the chain near unit size


def test_a_flipped_bit_is_one_element_one_ulp_off() -> None:
    x = torch.linspace(1, 2, 100, dtype=torch.float32).reshape(10, 10)
    y = x.clone()
    flip_bit(y)
    count, gap = diff(y, x)
    assert count == 1 and gap == pytest.approx(float(torch.finfo(torch.float32).eps) * 1.5, rel=0.5)
    assert result_hash(x) != result_hash(y) and result_hash(x) == result_hash(x.clone())
    assert diff(x, x.clone()) == (0, 0.0)


def test_one_rank_with_a_flip_in_one_repeat_counts_it() -> None:
    cfg = SdcConfig(dtypes=["fp32", "bf16"], shapes=["64x32x48"], repeats=4, plant_flip_rank=0,
                    plant_flip_repeat=2)  # fmt: skip
    ms = list(sdc(one_rank_ctx("sdc"), cfg))
    unstable = {m.params["dtype"]: m.value for m in SdcMetrics.unstable_repeats.select(ms)}
    assert unstable == {"fp32": 1, "bf16": 1}
    elements = [m for m in SdcMetrics.diff_elements.select(ms) if m.params["against"] == "repeats"]
    assert [m.value for m in elements] == [1, 1]
    (checked,) = SdcMetrics.checked.select(ms)
    assert checked.value == 8
    found = judged(results([m.model_copy(update={"host": "node0"}) for m in ms], backend="gloo"))
    assert [f.id for f in found] == ["sdc.unstable"]
    assert "repeat 2 of 4 differs from the other 3: 1 of 3,072 elements differs" in found[0].message


def test_a_clean_rank_repeats_bit_for_bit() -> None:
    ms = list(sdc(one_rank_ctx("sdc"), SdcConfig(shapes=["64x64x64"], repeats=3)))
    (m,) = SdcMetrics.mismatches.select(ms)
    assert m.value == 0 and len(set(str(m.params["repeat_hashes"]).split(","))) == 1
    assert [f.id for f in judged(results(ms))] == ["sdc.ok"]


@pytest.mark.parametrize(
    ("sets", "text"),
    [
        (["sdc.plant_flip_repeat=5"], "plant_flip_repeat must be -1 (every repeat) or a repeat"),
        (["sdc.plant_flip_rank=-2"], "plant_flip_rank must be a rank or -1"),
        (["sdc.depth=0"], "depth must be >= 1"),
        (["sdc.shapes=64x64"], "bad GEMM shape"),
        (["sdc.dtypes=fp8"], "sdc.dtypes"),
    ],
)
def test_bad_settings_are_one_clear_error(sets: list[str], text: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_run_config(device_type="cpu", only=["sdc"], sets=sets)
    assert text in str(info.value)


def test_presets_run_on_every_suite_and_device() -> None:
    for device_type in ("cpu", "cuda"):
        cfgs = [SdcConfig.preset(suite=s, device_type=device_type) for s in ("quick", "standard")]
        assert all(c.cases() for c in cfgs)
    gpu = SdcConfig.preset(suite="quick", device_type="cuda")
    assert {c.dtype for c in gpu.cases()} == {"bf16", "fp32"}
    assert "sdc" in build_run_config(device_type="cpu").benchmarks

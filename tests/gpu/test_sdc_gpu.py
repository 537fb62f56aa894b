"""The silent-data-corruption check on the GPUs of this machine: every GPU gives the same bits
for the quick preset's GEMM chains, every repeat the same, and a planted flip is caught."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clusterbench import load_results
from clusterbench.benchmarks.sdc import SdcMetrics
from clusterbench.benchmarks.sdc.compute import Case, chain, make_inputs
from clusterbench.runtime.precision import matmul_precision
from tests.helpers import cli

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_every_gpu_gives_the_same_bits_every_time(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = cli("run", "--only", "sdc", "--out", str(out), timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: a run-wide fail elsewhere
    results = load_results(out)
    assert results.run.backend == "nccl" and results.run.status == "completed"
    records = SdcMetrics.mismatches.select(results)
    ranks = {m.rank for m in records}
    assert ranks == set(range(torch.cuda.device_count()))
    by_case: dict[tuple[object, ...], set[object]] = {}
    for m in records:
        key = tuple(m.params[k] for k in ("dtype", "m", "n", "k"))
        by_case.setdefault(key, set()).add(m.params["hash"])
        assert len(set(str(m.params["repeat_hashes"]).split(","))) == 1  # repeats identical
        assert m.value == 0
    assert {key[0] for key in by_case} == {"bf16", "fp32"}
    assert all(len(hashes) == 1 for hashes in by_case.values()), by_case  # GPUs agree
    assert all(m.value == 0 for m in SdcMetrics.unstable_repeats.select(results))
    ids = [f.id for f in results.findings if f.id.startswith("sdc.")]
    assert ids == ["sdc.ok"]


def test_a_flip_planted_in_one_repeat_is_caught(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sets = ["--set", "sdc.plant_flip_rank=0", "--set", "sdc.plant_flip_repeat=2"]
    proc = cli("run", "--only", "sdc", "--out", str(out), *sets, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]  # a fail finding
    found = [f for f in load_results(out).findings if f.id == "sdc.unstable"]
    assert len(found) == 1 and found[0].severity == "fail"
    assert "rank 0 (" in found[0].message and "repeat 2 of 5 differs" in found[0].message


def test_fp32_runs_with_tf32_off() -> None:
    """The fp32 chain is IEEE fp32: near a float64 replay (4.4e-7 on a CPU), far below the
    ~3e-3 that 8-bit significands give (the same chain in bf16 on a CPU) and TF32's 11 bits
    would come near."""
    case = Case("fp32", 2048, 2048, 2048, depth=4)
    a, b1, b2 = make_inputs(case, seed=1, device=torch.device("cuda", 0))
    with matmul_precision("fp32"):
        got = chain(a, b1, b2, depth=case.depth)
    ref = chain(a.double(), b1.double(), b2.double(), depth=case.depth)
    rel = float(torch.linalg.vector_norm(got.double() - ref) / torch.linalg.vector_norm(ref))
    assert rel < 1e-4, rel


def test_inputs_are_drawn_on_each_gpu_with_the_same_bits() -> None:
    """A GPU draws its own inputs (the CPU's sequential generator took seconds a case); the
    same seed gives the same bits on every draw and on every GPU of this machine's one model,
    another seed other bits, and every value is an exact multiple of its power of two."""
    case = Case("bf16", 8192, 2048, 4096, depth=4)
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    first = make_inputs(case, seed=3, device=devices[0])
    assert all(t.device == devices[0] and t.dtype == torch.bfloat16 for t in first)
    for dev in devices:
        again = make_inputs(case, seed=3, device=dev)
        assert all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(first, again, strict=True))
    other = make_inputs(case, seed=4, device=devices[0])
    assert not torch.equal(first[0], other[0])
    ints = first[0].float() * 2.0**7  # A is integers in [-128, 128] times 2^-7
    assert torch.equal(ints, ints.round()) and float(ints.abs().max()) <= 128
    assert len(torch.unique(ints)) > 200  # a real draw, not a constant

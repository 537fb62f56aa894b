"""The silent-data-corruption check on real CPU ranks (gloo): a bit flipped on purpose in one
rank's results is caught and that rank alone is named; a clean run finds nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.helpers import cpu_run

from clusterbench.benchmarks.sdc import SdcMetrics

pytestmark = pytest.mark.dist

SMALL = ["sdc.shapes=64x48x32", "sdc.dtypes=fp32,bf16", "sdc.repeats=3"]


def test_a_planted_flip_on_rank_1_of_3_names_rank_1_alone(tmp_path: Path) -> None:
    results = cpu_run(tmp_path / "run", "sdc", [*SMALL, "sdc.plant_flip_rank=1"], nproc=3)
    found = [f for f in results.findings if f.id.startswith("sdc.")]
    assert [f.id for f in found] == ["sdc.mismatch"]
    f = found[0]
    assert f.evidence["rank"] == 1 and f.scope.endswith("/cpu:1")
    assert re.findall(r"\brank \d+", f.message) == ["rank 1"]  # no other rank named
    assert "fp32 64x48x32: all 3 repeats differ: 1 of 2,048 elements differs" in f.message
    assert "bf16 64x48x32: all 3 repeats differ: 1 of 2,048 elements differs" in f.message
    assert "2 other devices" in f.message
    mismatches = {
        (m.rank, m.params["dtype"]): m.value for m in SdcMetrics.mismatches.select(results)
    }
    assert mismatches == {
        (r, d): 3.0 if r == 1 else 0.0 for r in range(3) for d in ("fp32", "bf16")
    }
    # only the odd rank counted its differences, against the reference rank 0 sent
    assert {m.rank for m in SdcMetrics.diff_elements.select(results)} == {1}


def test_a_clean_two_rank_run_finds_no_mismatch(tmp_path: Path) -> None:
    results = cpu_run(tmp_path / "run", "sdc", SMALL, nproc=2)
    found = {f.id: f for f in results.findings if f.id.startswith("sdc.")}
    assert list(found) == ["sdc.ok"]
    assert "2 device(s)" in found["sdc.ok"].message and "2 case(s)" in found["sdc.ok"].message
    hashes = {
        (m.rank, m.params["dtype"]): m.params["hash"] for m in SdcMetrics.mismatches.select(results)
    }
    assert len(hashes) == 4
    assert hashes[(0, "fp32")] == hashes[(1, "fp32")] != hashes[(0, "bf16")] == hashes[(1, "bf16")]
    assert all(m.value == 0 for m in SdcMetrics.unstable_repeats.select(results))
    assert not SdcMetrics.diff_elements.select(results)
    (checked, _) = SdcMetrics.checked.select(results)
    assert checked.value == 6

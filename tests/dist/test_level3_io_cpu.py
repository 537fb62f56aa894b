"""dataloader and checkpoint through the real launcher: 2 CPU workers under gloo."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import cpu_run

pytestmark = pytest.mark.dist


def test_dataloader_and_checkpoint_on_two_workers(tmp_path: Path) -> None:
    out = tmp_path / "run"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    results = cpu_run(
        out, "dataloader,checkpoint", [f"checkpoint.directory={ckpt}"], timeout=120,
        returncodes=(0, 1),
    )  # fmt: skip
    got = {(m.benchmark, m.metric, m.rank) for m in results.measurements}
    for rank in (0, 1):  # per device: every rank measures its own loader
        for metric in ("loader_samples_per_s", "step_samples_per_s", "gpu_busy"):
            assert ("dataloader", metric, rank) in got
    for metric in ("save_gbps", "load_gbps", "async_block_s", "async_total_s", "async_stall_pct",
                   "free_space_gb", "fit_gbps", "fit_latency_s", "predicted_s"):  # fmt: skip
        assert ("checkpoint", metric, 0) in got
    assert not any(m.benchmark == "checkpoint" and m.rank == 1 for m in results.measurements)
    dcp = [m for m in results.measurements if m.params.get("format") == "dcp"]
    assert dcp and all(m.params["num_ranks"] == 2 for m in dcp)
    # DCP's rounds are collective: both ranks stopped at the same round of each size
    sizes = {m.params["size_bytes"] for m in dcp if m.metric == "save_s"}
    assert len(sizes) == 3
    assert any(f.id == "checkpoint.predicted" for f in results.findings)
    assert list(ckpt.iterdir()) == []

"""The dataloader's adaptive sweep through the real launcher: 2 CPU workers under gloo."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import cpu_run

pytestmark = [pytest.mark.dist, pytest.mark.timing]

FEW = ["dataloader.datasets=tokens", "dataloader.measure_batches=3", "dataloader.train_steps=3"]


def test_planted_slow_step_stops_the_sweep_on_every_rank(tmp_path: Path) -> None:
    # The planted step takes 0.3 s for 4 token windows (13 samples/s); the memmapped shard
    # gives thousands without workers, beyond 20x the step's demand: every rank stops at 0
    # workers and never starts one (2 ranks on the node: worker counts 0 and 1).
    results = cpu_run(tmp_path / "run", "dataloader", [*FEW, "dataloader.step_s=0.3"],
                      returncodes=(0, 1))  # fmt: skip
    loaders = [m for m in results.measurements if m.metric == "loader_samples_per_s"]
    assert {m.rank for m in loaders} == {0, 1}
    assert {m.params["num_workers"] for m in loaders} == {0}
    steps = [m for m in results.measurements if m.metric == "step_samples_per_s"]
    assert len(steps) == 2 and all(m.value <= 4 / 0.3 * 1.0001 for m in steps)
    stopped = [f for f in results.findings if f.id == "dataloader.sweep_stopped"]
    assert sorted(f.scope for f in stopped) == ["host:" + results.measurements[0].host + d
                                                for d in ("/cpu:0", "/cpu:1")]  # fmt: skip
    for f in stopped:
        assert "tokens at 0 workers" in f.message and "not run: 1 worker" in f.message
        (stop,) = f.evidence["stops"]
        assert stop["reason"] == "sufficient" and stop["skipped"] == ["1 worker"]


def test_whole_sweep_without_the_rule(tmp_path: Path) -> None:
    results = cpu_run(tmp_path / "run", "dataloader",
                      [*FEW, "dataloader.step_s=0.3", "dataloader.sweep_stop=false"],
                      returncodes=(0, 1))  # fmt: skip
    loaders = [m for m in results.measurements if m.metric == "loader_samples_per_s"]
    assert {(m.rank, m.params["num_workers"]) for m in loaders} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert not [f for f in results.findings if f.id == "dataloader.sweep_stopped"]

"""The checkpoint benchmark's duration model and its time budget: the estimate follows the
bytes the settings write, cuts bring it under a budget, and a spent budget stops it between
sizes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from clusterbench.benchmarks.checkpoint import duration
from clusterbench.benchmarks.checkpoint import measure as ck
from clusterbench.durations import NodeFacts, fit
from clusterbench.runtime.budget import TimeBudget
from tests.helpers import one_rank_ctx

MEASURED = {"checkpoint_fit_save_gbps": 0.74, "checkpoint_fit_load_gbps": 1.3}  # issue 20's disk
H200 = NodeFacts(device_type="cuda", world_size=1, local_world_size=1, gpu="NVIDIA H200",
                 spec_tflops={"bf16": 989.0}, measured=MEASURED)  # fmt: skip


def _io_seconds(cfg: ck.CheckpointConfig) -> float:
    return duration.estimate(dataclasses.replace(cfg, formats=["torch"]), H200).seconds


def test_estimate_follows_the_bytes_written() -> None:
    standard = ck.CheckpointConfig.preset(suite="standard", device_type="cuda")
    assert standard.max_bytes == 2 * 2**30 and standard.num_sizes == 3
    # torch: (2 + 1 + 0.5 GiB) x 3 rounds + a 0.5 GiB warm-up, saved at 0.74 and loaded at 1.3
    written = 2 * 2**30 * (3 * 1.75 + 0.25)
    assert _io_seconds(standard) == pytest.approx(written / 0.74e9 + written / 1.3e9)
    twice = dataclasses.replace(standard, max_bytes=4 * 2**30)
    assert _io_seconds(twice) == pytest.approx(2 * _io_seconds(standard))
    # the whole 1.3b state (1.42 B parameters x 12 B) bounds it from above
    whole = dataclasses.replace(standard, max_bytes=0)
    assert _io_seconds(whole) == pytest.approx(
        _io_seconds(standard) * 12 * 1_420_396_544 / (2 * 2**30), rel=0.01
    )
    # the real full-size save of the 1.3b was 395 s with 3 rounds of every format (issue 20);
    # the bounded standard suite is a quarter of that
    old = dataclasses.replace(whole, num_sizes=1, repeats=3, min_repeats=3, warmup=0)
    assert duration.estimate(standard, H200).seconds < duration.estimate(old, H200).seconds / 3


def test_cuts_keep_the_measurement_before_they_shrink_it() -> None:
    standard = ck.CheckpointConfig.preset(suite="standard", device_type="cuda")
    tight = fit(duration.MODEL, standard, H200, budget_s=30.0)
    assert tight.after.seconds <= 30.0
    keys = [c.split()[0] for c in tight.cuts]
    assert keys[0] in ("repeats", "min_repeats")  # repeats go first, the state's size last
    assert tight.settings.formats == standard.formats  # formats go only when nothing else does
    floor = fit(duration.MODEL, standard, H200, budget_s=0.0).settings
    assert floor.max_bytes == duration.MIN_BYTES and floor.formats == ["torch"]
    assert floor.min_repeats == 1 and floor.warmup == 0 and floor.stall_steps == 2
    assert floor.num_sizes == 2  # still a fit of two sizes


def test_a_spent_budget_stops_between_sizes(world: None, tmp_path: Path) -> None:
    budget = TimeBudget(seconds=0.0)  # spent at once: one size of the first format, then stop
    ctx = one_rank_ctx("checkpoint", budget=budget)
    cfg = ck.CheckpointConfig(model="tiny", directory=str(tmp_path), repeats=1, stall_steps=2)
    ms = list(ck.checkpoint(ctx, cfg))
    saves = [m for m in ms if m.metric == "save_s"]
    assert [m.params["format"] for m in saves] == ["torch"]  # one size of one format
    fit_one = [m for m in ms if m.metric == "fit_gbps"]
    assert fit_one and all(m.params["num_sizes"] == 1 for m in fit_one)  # still a rate, a fit
    assert budget.stop is not None and budget.stop.done == 1 and budget.stop.total == 12
    assert list(p for p in tmp_path.iterdir() if p.name != "store") == []

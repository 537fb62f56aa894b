"""The dataloader's duration estimate, its cuts to a time budget, and its deadline between
points."""

from __future__ import annotations

import pytest
import torch

from clusterbench.benchmarks.dataloader import duration as dataloader_duration
from clusterbench.benchmarks.dataloader import measure as dl
from clusterbench.durations import NodeFacts, fit
from clusterbench.runtime.budget import TimeBudget
from tests.helpers import one_rank_ctx
from tests.unit.test_dataloader_sweep import _decoder, _SleepyTokens

GPU_NODE = NodeFacts(device_type="cuda", world_size=8, local_world_size=8, gpu="NVIDIA H200",
                     spec_tflops={"bf16": 989.0, "fp32": 67.0})  # fmt: skip


@pytest.fixture(autouse=True)
def _sixteen_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker counts 0, 1, 2, 4, 8, 16 whatever this machine has."""
    monkeypatch.setattr(dataloader_duration, "cores_per_rank", lambda local_world_size: 16)


def _standard(**changes: object) -> dl.DataloaderConfig:
    cfg = dl.DataloaderConfig.preset(suite="standard", device_type="cuda")
    for key, value in changes.items():
        setattr(cfg, key, value)
    return cfg


def test_the_rule_shortens_the_estimated_sweep() -> None:
    stopped = dataloader_duration.estimate(_standard(), GPU_NODE)
    whole = dataloader_duration.estimate(_standard(sweep_stop=False), GPU_NODE)
    assert stopped.points < whole.points and stopped.seconds < whole.seconds
    # the memmapped tokens outrun any step without workers: one count, two pin settings
    assert dataloader_duration.sweep_counts(_standard(), GPU_NODE, "tokens") == [0]
    assert dataloader_duration.sweep_counts(_standard(sweep_stop=False), GPU_NODE,
                                          "tokens") == [0, 1, 2, 4, 8, 16]  # fmt: skip
    # a slower step needs fewer image workers
    fast = dataloader_duration.sweep_counts(_standard(step_s=0.01), GPU_NODE, "images")
    slow = dataloader_duration.sweep_counts(_standard(step_s=1.0), GPU_NODE, "images")
    assert len(slow) < len(fast)


def test_estimate_grows_with_every_part_of_the_work() -> None:
    base = dataloader_duration.estimate(_standard(sweep_stop=False), GPU_NODE).seconds
    for more in (
        {"measure_batches": 48}, {"train_steps": 40}, {"num_samples": 8192},
        {"prefetch_factor": [2, 4, 8]}, {"step_s": 0.5}, {"image_size": 512},
    ):  # fmt: skip
        bigger = dataloader_duration.estimate(_standard(sweep_stop=False, **more), GPU_NODE)
        assert bigger.seconds > base, more


def test_cut_to_a_budget() -> None:
    cfg = _standard(sweep_stop=False)
    before = dataloader_duration.estimate(cfg, GPU_NODE).seconds
    fitted = fit(dataloader_duration.MODEL, cfg, GPU_NODE, before / 4)
    assert fitted.after.seconds < before
    assert any(c.startswith("measure_batches 24 -> ") for c in fitted.cuts)
    tiny = fit(dataloader_duration.MODEL, cfg, GPU_NODE, 0.0)
    assert tiny.settings.num_workers == [0, 1]  # the ladder cut from the top, two counts kept
    assert tiny.settings.pin_memory == [False] and len(tiny.settings.prefetch_factor) == 1


def test_deadline_stops_between_loader_settings() -> None:
    now = [0.0]
    ctx = one_rank_ctx("dataloader")
    ctx.budget = TimeBudget(seconds=10.0, clock=lambda: now[0])
    cfg = dl.DataloaderConfig(pin_memory=[False], prefetch_factor=[2], warmup_batches=1,
                              measure_batches=2, train_steps=2, precision="fp32",
                              sweep_stop=False)  # fmt: skip
    settings = dl.sweep_settings(cfg, device=torch.device("cpu"), cores=4)
    out = []
    for m in dl.measure_input(ctx, cfg, dataset_name="tokens", dataset=_SleepyTokens(),
                              workload=_decoder(), settings=settings, batch_size=2):  # fmt: skip
        out.append(m)
        if m.metric == "loader_samples_per_s":
            now[0] = 11.0  # the budget is spent once the first setting is timed
    assert [m.metric for m in out] == ["step_samples_per_s", "loader_samples_per_s"]

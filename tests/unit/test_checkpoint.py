"""checkpoint benchmark on CPU under a one-process gloo group: every format, checks, cleanup."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from clusterbench.benchmarks.checkpoint import findings as checkpoint_analysis
from clusterbench.benchmarks.checkpoint import io as io
from clusterbench.benchmarks.checkpoint import measure as ck
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.config import ConfigError, Thresholds, build_run_config
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement, Results, RunInfo, ToolInfo
from tests.helpers import one_rank_ctx

CPU = torch.device("cpu")


def _ctx() -> DistContext:
    return one_rank_ctx("checkpoint")


def _workload(name: str, *, device: torch.device, seq_len: int | None = None) -> Workload:
    emb = nn.Embedding(50, 32)
    head = nn.Linear(32, 50, bias=False)
    head.weight = emb.weight  # tied, as decoders often are: safetensors must store it once
    model = nn.Sequential(emb, nn.Linear(32, 32), head)

    def make_batch(n: int) -> Batch:
        return torch.randint(0, 50, (n, 8)), torch.randint(0, 50, (n, 8))

    def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())

    return Workload(name="toy", kind="decoder", model=model, make_batch=make_batch,
                    loss_fn=loss_fn, flops_per_sample=1.0, tokens_per_sample=8)  # fmt: skip


def test_checkpoint_all_formats(
    world: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ck, "load_workload", _workload)
    out = tmp_path / "ckpt"
    out.mkdir()
    cfg = ck.CheckpointConfig(model="toy", directory=str(out), repeats=2, stall_steps=2)
    seen: set[Path] = set()
    ms = []
    for m in ck.checkpoint(_ctx(), cfg):
        seen.update(out.rglob("*"))
        ms.append(m)
    assert list(out.iterdir()) == []  # everything removed
    assert seen  # the folder existed while it ran
    got = {(m.metric, m.params.get("format")) for m in ms}
    for fmt in ("torch", "safetensors", "dcp"):
        for metric in ("save_gbps", "load_gbps", "save_s", "load_s"):
            assert (metric, fmt) in got
    for metric in ("async_block_s", "async_total_s", "async_stall_pct"):
        assert (metric, "dcp_async") in got
    rates = [m for m in ms if m.metric in ("save_gbps", "load_gbps")]
    assert all(m.value > 0 and m.stats is not None and m.stats.samples == 2 for m in rates)
    # three sizes per format, each half the next
    torch_sizes = sorted(m.params["size_bytes"] for m in ms  # type: ignore[type-var]
                         if m.metric == "save_s" and m.params["format"] == "torch")  # fmt: skip
    assert len(torch_sizes) == 3 and torch_sizes[0] < torch_sizes[1] < torch_sizes[2]
    fits = {(m.params["format"], m.params["op"]): m for m in ms if m.metric == "fit_gbps"}
    sync = {(f, op) for f in ("torch", "safetensors", "dcp") for op in ("save", "load")}
    assert set(fits) == sync | {("dcp_async", "async_block"), ("dcp_async", "async_total")}
    assert all(m.value > 0 and m.params["num_sizes"] == 3 for m in fits.values())
    # predictions: each model (the workload's and 7B, 70B) x state x operation
    pred = {(m.params["format"], m.params["model"], m.params["state"], m.params["op"]): m
            for m in ms if m.metric == "predicted_s"}  # fmt: skip
    assert ("safetensors", "70B", "weights+optimizer", "save") not in pred  # weights only
    big = pred[("torch", "70B", "weights+optimizer", "save")]
    assert big.params["num_params"] == 70_000_000_000
    per_param = big.params["bytes_per_param"]
    assert isinstance(per_param, float) and 12 <= per_param < 12.1  # fp32 weights, m, v
    assert big.params["checkpoint_bytes"] == pytest.approx(70e9 * per_param, rel=1e-5)
    # t = α + N·B/β from the fit this run recorded
    alpha = next(m.value for m in ms if m.metric == "fit_latency_s"
                 and m.params["format"] == "torch" and m.params["op"] == "save")  # fmt: skip
    want = alpha + big.params["checkpoint_bytes"] / (fits[("torch", "save")].value * 1e9)  # type: ignore[operator]
    assert big.value == pytest.approx(want, rel=1e-6)
    hidden = pred[("dcp_async", "7B", "weights", "async_hidden")]
    assert hidden.value >= 0 and ("dcp_async", "7B", "weights", "async_block") in pred
    free = next(m for m in ms if m.metric == "free_space_gb")
    assert free.value > 0 and free.params["filesystem"] != ""
    safetensors = next(
        m for m in ms if m.metric == "save_gbps" and m.params["format"] == "safetensors"
    )
    torch_save = next(m for m in ms if m.metric == "save_gbps" and m.params["format"] == "torch")
    assert safetensors.params["size_bytes"] < torch_save.params["size_bytes"]  # weights only


def test_cleanup_on_error(world: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ck, "load_workload", _workload)

    def corrupt(*args: object, **kwargs: object) -> dict[str, object]:
        return {}

    monkeypatch.setattr(torch, "load", corrupt)  # a load that returns nothing must fail
    cfg = ck.CheckpointConfig(model="toy", directory=str(tmp_path), formats=["torch"], repeats=1)
    with pytest.raises(RuntimeError, match="differs from the saved one"):
        list(ck.checkpoint(_ctx(), cfg))
    assert list(tmp_path.iterdir()) == [tmp_path / "store"]


def test_check_detects_a_changed_tensor() -> None:
    state = {"model": {"w": torch.ones(3)}, "optim": {"state": {"w": {"exp_avg": torch.zeros(2)}}}}
    expected = io.sample(state, 8)
    assert set(expected) == {"model/w", "optim/state/w/exp_avg"}
    io.check(expected, state, fmt="x")
    state["model"]["w"][0] = 2.0
    with pytest.raises(RuntimeError, match="model/w"):
        io.check(expected, state, fmt="x")


def _m(metric: str, value: float, **params: object) -> Measurement:
    return Measurement(benchmark="checkpoint", metric=metric, value=value, unit="",
                       params=params, rank=0, host="h", device="cpu:0")  # type: ignore[arg-type]  # fmt: skip


def test_findings() -> None:
    run = RunInfo(id="r", started="t", suite="quick", world_size=1, num_nodes=1,
                  backend="nccl", command="c")  # fmt: skip
    ms = [
        _m("save_gbps", 0.2, format="torch", size_bytes=5e9),
        _m("save_gbps", 0.1, format="dcp", size_bytes=1e6),  # tiny: latency, no verdict
        _m("async_stall_pct", 25.0, format="dcp_async"),
        _m("free_space_gb", 6.0, directory="/d", filesystem="ext4", checkpoint_bytes=5e9),
    ]
    results = Results(tool=ToolInfo(version="0"), run=run, measurements=ms)
    findings = checkpoint_analysis.findings(results, Thresholds())
    by_id = {f.id: f for f in findings}
    assert set(by_id) == {"checkpoint.slow_save", "checkpoint.async_stall",
                          "checkpoint.low_free_space"}  # fmt: skip
    assert by_id["checkpoint.slow_save"].severity == "info"
    assert "dcp" not in by_id["checkpoint.slow_save"].evidence["save_gbps"]
    assert by_id["checkpoint.async_stall"].severity == "warn"
    cpu_run = run.model_copy(update={"backend": "gloo"})  # CPU ranks share the cores: info
    on_cpu = checkpoint_analysis.findings(results.model_copy(update={"run": cpu_run}), Thresholds())
    assert {f.id: f.severity for f in on_cpu}["checkpoint.async_stall"] == "info"
    assert io.filesystem_of(Path("/")) != ""


def test_config_rejects_an_unknown_format() -> None:
    with pytest.raises(ConfigError, match="input should be 'torch', 'safetensors', 'dcp' or"):
        build_run_config(device_type="cpu", suite="standard", sets=["checkpoint.formats=zip"])
    with pytest.raises(ConfigError, match="repeats must be >= 1"):
        build_run_config(device_type="cpu", suite="standard", sets=["checkpoint.repeats=0"])

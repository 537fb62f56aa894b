"""dataloader benchmark on CPU: files written and removed, rates, the planted slow loader."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from clusterbench.benchmarks.dataloader import findings as dataloader_analysis
from clusterbench.benchmarks.dataloader import measure as dl
from clusterbench.benchmarks.dataloader.datasets import write_tokens
from clusterbench.benchmarks.training.workload import Batch, Workload
from clusterbench.config import ConfigError, Thresholds, build_run_config
from clusterbench.runtime.dist import DistContext
from clusterbench.schema import Measurement, Results, RunInfo, ToolInfo
from tests.helpers import one_rank_ctx

CPU = torch.device("cpu")


def _ctx() -> DistContext:
    return one_rank_ctx("dataloader")


def _decoder(seq_len: int = 16, vocab: int = 100) -> Workload:
    model = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab))

    def make_batch(n: int) -> Batch:
        x = torch.randint(0, vocab, (n, seq_len))
        return x, torch.randint(0, vocab, (n, seq_len))

    def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), y.flatten())

    return Workload(name="toy", kind="decoder", model=model, make_batch=make_batch,
                    loss_fn=loss_fn, flops_per_sample=1.0, tokens_per_sample=seq_len)  # fmt: skip


def _results(ms: list[Measurement], backend: str = "nccl") -> Results:
    """Results of a GPU run (the backend decides whether input-bound warns or only informs)."""
    run = RunInfo(id="r", started="t", suite="quick", world_size=1, num_nodes=1,
                  backend=backend, command="c")  # fmt: skip
    return Results(tool=ToolInfo(version="0"), run=run, measurements=ms)


def test_cleanup_on_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(name: str, *, device: torch.device, seq_len: int | None = None) -> Workload:
        raise RuntimeError("boom")

    monkeypatch.setattr(dl, "load_workload", broken)
    cfg = dl.DataloaderConfig.preset(suite="quick", device_type="cpu")
    cfg.data_dir = str(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        list(dl.dataloader(_ctx(), cfg))
    assert list(tmp_path.iterdir()) == []


class _SlowTokens(torch.utils.data.Dataset[Batch]):
    """Every sample takes 20 ms: far slower than the toy step consumes."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> Batch:
        time.sleep(0.02)
        x = torch.randint(0, 100, (16,))
        return x, x


def test_slow_loader_is_input_bound() -> None:
    cfg = dl.DataloaderConfig(num_workers=[0], pin_memory=[False], warmup_batches=1,
                              measure_batches=3, train_steps=3, precision="fp32")  # fmt: skip
    settings = dl.sweep_settings(cfg, device=CPU, cores=1)
    ms = list(dl.measure_input(_ctx(), cfg, dataset_name="tokens", dataset=_SlowTokens(),
                               workload=_decoder(), settings=settings, batch_size=4))  # fmt: skip
    busy = [m for m in ms if m.metric == "gpu_busy"]
    assert busy and all(m.value < 90 for m in busy)
    findings = dataloader_analysis.findings(_results(ms), Thresholds())
    # only the defaults were swept (one core): the sweep's best is them, so no advice to add
    # workers beside the input-bound verdict
    assert {f.id for f in findings} == {"dataloader.input_bound"}
    bound = next(f for f in findings if f.id == "dataloader.input_bound")
    assert bound.severity == "warn" and "num_workers=0" in bound.fix
    # CPU workers are their own input pipeline: there the finding only informs
    on_cpu = dataloader_analysis.findings(_results(ms, backend="gloo"), Thresholds())
    assert next(f for f in on_cpu if f.id == "dataloader.input_bound").severity == "info"


def test_sweep_caps_workers_and_pins_only_on_cuda() -> None:
    cfg = dl.DataloaderConfig(num_workers=[0, 2, 8], pin_memory=[False, True],
                              prefetch_factor=[2, 4])  # fmt: skip
    cpu = dl.sweep_settings(cfg, device=CPU, cores=4)
    assert {s.num_workers for s in cpu} == {0, 2, 4}
    assert not any(s.pin_memory for s in cpu)
    assert all(s.prefetch_factor is None for s in cpu if s.num_workers == 0)
    gpu = dl.sweep_settings(cfg, device=torch.device("cuda", 0), cores=4)
    assert len(gpu) == 2 * (1 + 2 * 2)


_RANK_STATE = {"set": False}
"""Set in a spawned rank before its loader starts: a forked loader worker sees it, a spawned
one re-imports this module and does not."""


def test_token_shard_windows() -> None:
    with tempfile.TemporaryDirectory() as root:
        shard = write_tokens(Path(root) / "t.bin", num=5, workload=_decoder(seq_len=8))
        x, y = shard[2]
        assert len(shard) == 5 and x.shape == (8,) and torch.equal(x[1:], y[:-1])
        assert int(x.max()) < 100


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("dataloader.datasets=video", "input should be 'images' or 'tokens'"),
        ("dataloader.image_format=gif", "input should be 'jpeg' or 'png'"),
        ("dataloader.precision=fp16", "input should be 'fp32' or 'bf16'"),
        ("dataloader.model=bert_large", "input should be 'tiny', '125m'"),
        ("dataloader.num_workers=-1", "num_workers must be >= 0"),
    ],
)
def test_config_rejects_bad_values(setting: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_run_config(device_type="cpu", suite="standard", sets=[setting])


def test_defaults_below_but_best_settings_fine_is_not_input_bound() -> None:
    def busy(value: float, choice: str, workers: int) -> Measurement:
        return Measurement(
            benchmark="dataloader", metric="gpu_busy", value=value, unit="%", rank=0, host="h",
            device="cuda:0", params={"dataset": "tokens", "num_workers": workers,
                                     "pin_memory": False, "prefetch_factor": None,
                                     "choice": choice},
        )  # fmt: skip

    run = RunInfo(id="r", started="t", suite="quick", world_size=1, num_nodes=1,
                  backend="nccl", command="c")  # fmt: skip
    fixed = Results(tool=ToolInfo(version="0"), run=run,
                    measurements=[busy(93.0, "best", 4), busy(85.0, "default", 0)])  # fmt: skip
    assert [f.id for f in dataloader_analysis.findings(fixed, Thresholds())] == []
    still = Results(tool=ToolInfo(version="0"), run=run,
                    measurements=[busy(60.0, "best", 4), busy(40.0, "default", 0)])  # fmt: skip
    found = dataloader_analysis.findings(still, Thresholds())
    assert [f.id for f in found] == ["dataloader.input_bound"]

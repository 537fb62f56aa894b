"""The training benchmark on cuda:0: the 125m decoder in bf16 must train at a sane MFU."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.distributed as dist

from clusterbench.benchmarks.training.bench import training
from clusterbench.benchmarks.training.settings import TrainingConfig
from tests.helpers import gpu_ctx

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture
def one_rank_world() -> object:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.usefixtures("one_rank_world")
def test_125m_bf16_mfu() -> None:
    ctx = gpu_ctx("training")
    if ctx.gpu is None or ctx.gpu.spec is None:
        pytest.skip("unknown GPU: no spec peak for MFU")
    cfg = TrainingConfig(model="125m", precision="bf16", batch_size=8, warmup_steps=5, steps=10)
    ms = list(training(ctx, cfg))
    by_metric = {m.metric: m for m in ms}
    assert by_metric["mfu"].value > 10, by_metric["mfu"]
    assert math.isfinite(by_metric["loss"].value)
    assert by_metric["tokens_per_s"].value > 0 and by_metric["peak_memory_gb"].value > 0
    assert "mfu_vs_gemm" in by_metric


@pytest.mark.usefixtures("one_rank_world")
def test_bert_trains_on_the_gpu() -> None:
    # the model is built on the GPU: its fixed masked positions must be made there too
    cfg = TrainingConfig(model="bert_tiny", precision="bf16", batch_size=8, warmup_steps=2, steps=3)
    by_metric = {m.metric: m for m in training(gpu_ctx("training"), cfg)}
    assert math.isfinite(by_metric["loss"].value)
    assert by_metric["samples_per_s"].value > 0

"""training.compile on a one-rank gloo world, with Dynamo's aot_eager backend (no C++
compiler needed): every block and the loss compiled, DDP's graph splitting off, steps train."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from clusterbench.benchmarks.training.blocks import iter_blocks
from clusterbench.benchmarks.training.models import build_workload
from clusterbench.benchmarks.training.settings import Case
from clusterbench.benchmarks.training.strategies import build_trainer, case_scope, check_applicable

CPU = torch.device("cpu")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    dynamo = torch._dynamo.config
    # the settings the benchmark changes, restored afterwards (Dynamo's own patch: monkeypatch
    # would delete and re-add them, which Dynamo's config module takes as hiding them)
    names = ("optimize_ddp", "automatic_dynamic_shapes", "recompile_limit")
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        with dynamo.patch({name: getattr(dynamo, name) for name in names}):
            yield
    finally:
        dist.destroy_process_group()
        torch._dynamo.reset()


@pytest.mark.usefixtures("world")
def test_compiled_blocks_under_ddp_train() -> None:
    torch.manual_seed(0)
    workload = build_workload("tiny", device=CPU)
    case = Case(strategy="ddp", precision="fp32", compile=True)
    assert dist.group.WORLD is not None
    trainer = build_trainer(workload, case=case, group=dist.group.WORLD, device=CPU)
    assert torch._dynamo.config.optimize_ddp is False  # blocks are not split at DDP's buckets
    blocks = [block for _, block, _ in iter_blocks(workload.model, workload.block_paths)]
    assert blocks and all(b._compiled_call_impl is not None for b in blocks)
    assert trainer.loss_fn is not workload.loss_fn  # the loss is compiled too
    before = [p.detach().clone() for p in workload.model.parameters()]
    batch = workload.make_batch(2)
    for _ in range(2):
        trainer.step([batch])
    assert math.isfinite(trainer.last_loss())
    after = list(workload.model.parameters())
    assert all(not torch.equal(a, b) for a, b in zip(after, before, strict=True))


@pytest.mark.usefixtures("world")
def test_cuda_graphs_compile_blocks_in_reduce_overhead_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    modes: list[object] = []
    compile_fn = torch.compile

    def recording(fn: object, **kwargs: object) -> object:
        modes.append(kwargs.get("mode"))
        return compile_fn(fn, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(torch, "compile", recording)
    marks: list[int] = []
    real_mark = torch.compiler.cudagraph_mark_step_begin
    monkeypatch.setattr(
        torch.compiler, "cudagraph_mark_step_begin", lambda: (marks.append(1), real_mark())
    )
    torch.manual_seed(0)
    workload = build_workload("tiny", device=CPU)
    case = Case(strategy="ddp", precision="fp32", compile=True, cuda_graphs=True)
    assert dist.group.WORLD is not None
    trainer = build_trainer(workload, case=case, group=dist.group.WORLD, device=CPU)
    blocks = [b for _, b, _ in iter_blocks(workload.model, workload.block_paths)]
    # every block in CUDA-graph mode, the loss (last) in the default mode
    assert modes == ["reduce-overhead"] * len(blocks) + [None]
    batch = workload.make_batch(2)
    trainer.step([batch, batch])  # two micro-steps: a graph step begins with each
    assert len(marks) == 2 and math.isfinite(trainer.last_loss())


def test_cuda_graphs_only_for_compiled_data_parallel() -> None:
    workload = build_workload("tiny", device=CPU)
    for case in (
        Case(strategy="ddp", precision="fp32", cuda_graphs=True),
        Case(strategy="fsdp2", precision="fp32", compile=True, cuda_graphs=True),
    ):
        assert "cuda_graphs" in (check_applicable(workload, case=case, group_size=1) or "")
    ok = Case(strategy="zero1", precision="fp32", compile=True, cuda_graphs=True)
    assert check_applicable(workload, case=ok, group_size=1) is None


@pytest.mark.usefixtures("world")
def test_case_scope_restores_what_the_strategies_change() -> None:
    dynamo = torch._dynamo.config
    before = (dynamo.optimize_ddp, dynamo.automatic_dynamic_shapes, torch.backends.cudnn.allow_tf32)
    workload = build_workload("tiny", device=CPU)
    assert dist.group.WORLD is not None
    with case_scope("tf32"):
        build_trainer(
            workload, case=Case(strategy="ddp", precision="tf32", compile=True),
            group=dist.group.WORLD, device=CPU,
        )  # fmt: skip
        assert dynamo.optimize_ddp is False and dynamo.automatic_dynamic_shapes is False
        assert torch.get_float32_matmul_precision() == "high"
    after = (dynamo.optimize_ddp, dynamo.automatic_dynamic_shapes, torch.backends.cudnn.allow_tf32)
    assert after == before and dynamo.optimize_ddp is not False

"""The training benchmark through the real launcher: 2 gloo workers, the tiny decoder, every
strategy in one sweep run (ddp, fsdp2, zero2, zero1, tp, pp) plus the scaling series."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from clusterbench.benchmarks.training.decoder import Decoder
from clusterbench.benchmarks.training.section import section as training_section
from clusterbench.model_shapes import DECODER_PRESETS
from clusterbench.schema import Results
from tests.helpers import cpu_run

pytestmark = pytest.mark.dist

STRATEGIES = ("ddp", "fsdp2", "zero2", "zero1", "tp", "pp")


def run_training(out: Path, *sets: str) -> Results:
    # scaling on CPU workers sharing the host's cores is stated (info), never judged: exit 0
    results = cpu_run(out, "training", ("training.model=tiny", *sets))
    assert not [f for f in results.findings if f.severity == "fail"]
    scaling = [f for f in results.findings if f.id == "training.scaling_efficiency"]
    assert all(f.severity == "info" for f in scaling)
    return results


def test_every_strategy_trains_on_two_ranks(tmp_path: Path) -> None:
    results = run_training(
        tmp_path / "run",
        "training.strategy=fsdp2",
        "training.sweep=true",
        f"training.sweep_strategies={','.join(STRATEGIES)}",
        "training.sweep_precisions=fp32",
        "training.sweep_activation_checkpointing=false",
        "training.grad_accum_sweep=1,2",
    )
    ms = [m for m in results.measurements if m.benchmark == "training"]
    assert {m.rank for m in ms} == {0}
    scaling = [m for m in ms if m.params.get("series") == "scaling"]
    tokens = {m.params["world_size"]: m.value for m in scaling if m.metric == "tokens_per_s"}
    assert set(tokens) == {1, 2} and all(v > 0 for v in tokens.values())
    eff = [m for m in scaling if m.metric == "scaling_efficiency"]
    assert len(eff) == 1 and eff[0].params["world_size"] == 2 and eff[0].unit == "%"
    # fsdp2 shards the parameters over 2 ranks; the gradient bytes count them whole (fp32)
    numel = sum(p.numel() for p in Decoder(DECODER_PRESETS["tiny"]).parameters())
    grads = {m.params["world_size"]: m for m in scaling if m.metric == "gradient_bytes"}
    assert {w: m.value for w, m in grads.items()} == {1: 4 * numel, 2: 4 * numel}
    step_params = {m.params["world_size"]: m.params for m in scaling if m.metric == "step_time_ms"}
    assert {w: m.params for w, m in grads.items()} == step_params
    assert all(math.isfinite(m.value) for m in scaling if m.metric == "loss")
    assert not any(m.metric == "mfu" for m in ms)  # no peak on CPU
    fits = {m.params["strategy"]: m for m in ms if m.metric == "fits"}
    assert set(fits) == set(STRATEGIES)
    assert all(m.value == 1 for m in fits.values()), {s: m.params for s, m in fits.items()}
    sweep_tokens = {
        m.params["strategy"]
        for m in ms
        if m.metric == "tokens_per_s" and m.params.get("series") == "sweep" and m.value > 0
    }
    assert sweep_tokens == set(STRATEGIES)
    # the summary's sweep table: one row per combination, its figures and "fits" together
    [sweep_grid] = [g for g in training_section(ms, False).grids if "sweep" in g.title]
    assert sorted(row[0] for row in sweep_grid.rows) == sorted(STRATEGIES)
    assert all(row[-1] == "yes" and row[4] != "-" for row in sweep_grid.rows), sweep_grid.rows
    idle = [m for m in ms if m.metric == "sync_idle_fraction"]
    assert sorted(m.params["grad_accum"] for m in idle) == [1, 2]


def _replica_worker(rank: int, store_path: str, perturb: bool, results: object) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn

    from clusterbench.benchmarks.training.strategies import replicas_agree

    dist.init_process_group("gloo", store=dist.FileStore(store_path, 2), rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
        if perturb and rank == 1:
            with torch.no_grad():
                model[1].bias[0] += 1e-6  # one weight off by a hair on one rank
        results[rank] = replicas_agree(model, dist.group.WORLD)  # type: ignore[index]
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("perturb", [False, True])
def test_replica_check_spots_one_differing_weight(tmp_path: Path, perturb: bool) -> None:
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(
            _replica_worker, args=(str(tmp_path / "store"), perturb, results), nprocs=2, join=True
        )
        got = dict(results)
    assert got == {0: not perturb, 1: not perturb}


@pytest.mark.skipif(shutil.which("g++") is None, reason="torch.compile on CPU needs a C++ compiler")
def test_compiled_blocks_under_ddp_keep_replicas_in_sync(tmp_path: Path) -> None:
    # Compiled blocks with Dynamo's DDP graph splitting off: DDP's gradient hooks must still
    # fire, or the run fails in the replica check after the timed steps.
    results = run_training(tmp_path / "run", "training.compile=true", "training.world_sizes=1,2")
    tokens = [m for m in results.measurements if m.metric == "tokens_per_s"]
    assert sorted(m.params["world_size"] for m in tokens) == [1, 2]
    assert all(m.params["compile"] is True for m in tokens)


def test_bert_pretraining_trains_under_data_parallel_strategies(tmp_path: Path) -> None:
    dp = ("ddp", "fsdp2", "zero2", "zero1")
    results = run_training(
        tmp_path / "run",
        "training.model=bert_tiny",
        "training.sweep=true",
        f"training.sweep_strategies={','.join(dp)}",
        "training.sweep_precisions=fp32",
        "training.sweep_activation_checkpointing=false,true",
    )
    ms = [m for m in results.measurements if m.benchmark == "training"]
    rates = [m for m in ms if m.metric == "samples_per_s" and m.params.get("series") == "sweep"]
    combos = {(m.params["strategy"], m.params["activation_checkpointing"]) for m in rates}
    assert combos == {(s, a) for s in dp for a in (False, True)}
    assert all(m.value > 0 and m.params["model"] == "bert_tiny" for m in rates)
    assert not [m for m in ms if m.metric == "tokens_per_s"]  # sequences/s, as MLPerf reports
    assert all(math.isfinite(m.value) for m in ms if m.metric == "loss")

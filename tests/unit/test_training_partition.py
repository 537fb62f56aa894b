"""The partition search's plan (benchmarks/training/partition.py): the candidates of one global
batch, which are tried and in what order, and the memory rule that skips what cannot fit,
against hand-computed values."""

from __future__ import annotations

import pytest

from clusterbench.benchmarks.training import partition_plan as pt
from clusterbench.benchmarks.training.partition_plan import Candidate, MemoryPoint
from clusterbench.benchmarks.training.settings import TrainingConfig

GB = 10**9


def cand(d: int, m: int, k: int, ckpt: bool = False) -> Candidate:
    return Candidate(d=d, micro_batch=m, accum=k, activation_checkpointing=ckpt)


def test_every_candidate_partitions_the_global_batch_exactly() -> None:
    # B = 12 over world sizes 1, 2, 4, 8: 8 does not divide 12; d=1: m in 1,2,3,4,6,12;
    # d=2: m in 1,2,3,6; d=4: m in 1,3
    got = pt.candidates(batch=12, sizes=[8, 1, 2, 4], checkpointing=[False])
    assert all(c.d * c.micro_batch * c.accum == 12 for c in got)
    assert [(c.d, c.micro_batch, c.accum) for c in got] == [
        (1, 1, 12), (1, 2, 6), (1, 3, 4), (1, 4, 3), (1, 6, 2), (1, 12, 1),
        (2, 1, 6), (2, 2, 3), (2, 3, 2), (2, 6, 1),
        (4, 1, 3), (4, 3, 1),
    ]  # fmt: skip
    both = pt.candidates(batch=12, sizes=[1, 2, 4, 8], checkpointing=[False, True, True])
    assert len(both) == 24 and {c.activation_checkpointing for c in both} == {False, True}


def test_the_global_batch_defaults_to_the_workloads_and_must_hold_the_default() -> None:
    cfg = TrainingConfig(batch_size=4, grad_accum=2)
    assert pt.global_batch(cfg, largest=8) == 64
    assert pt.default_candidate(cfg, largest=8, batch=64) == cand(8, 4, 2)
    bigger = TrainingConfig(batch_size=4, partition_global_batch=128)
    assert pt.global_batch(bigger, largest=8) == 128
    assert pt.default_candidate(bigger, largest=8, batch=128) == cand(8, 4, 4)
    with pytest.raises(ValueError, match="not a multiple of batch_size x the largest world size"):
        pt.global_batch(TrainingConfig(batch_size=4, partition_global_batch=48), largest=8)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"partition": True, "strategy": "tp"}, "partition needs a data-parallel strategy"),
        ({"partition_global_batch": 0}, "partition_global_batch must be >= 1"),
        ({"partition_steps": 0}, "partition_steps must be >= 1"),
        ({"partition": True, "partition_activation_checkpointing": []}, "at least one setting"),
    ],
)
def test_bad_partition_settings_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainingConfig(model="tiny", **fields)


def test_the_default_is_always_tried_then_the_largest_d_with_its_one_rank_twins() -> None:
    cands = pt.candidates(batch=16, sizes=[1, 2, 4], checkpointing=[False, True])
    default = cand(4, 4, 1)
    chosen = pt.select(cands, default=default, limit=6)
    assert chosen == [
        default,
        cand(1, 4, 4),  # the default's twin on one rank
        cand(4, 4, 1, True), cand(1, 4, 4, True),
        cand(4, 2, 2), cand(1, 2, 8),
    ]  # fmt: skip
    assert len(pt.select(cands, default=default, limit=1000)) == len(cands)
    # a default outside the searched settings is still tried
    off = cand(4, 4, 1, True)
    only_off = pt.candidates(batch=16, sizes=[1, 2, 4], checkpointing=[False])
    assert pt.select(only_off, default=off, limit=2)[0] == off


def test_candidates_run_by_ascending_micro_batch_within_each_setting() -> None:
    order = pt.run_order([cand(4, 4, 1), cand(1, 4, 4), cand(4, 1, 4, True), cand(2, 1, 8)])
    assert order == [cand(2, 1, 8), cand(1, 4, 4), cand(4, 4, 1), cand(4, 1, 4, True)]


def test_the_memory_rule_scales_the_activations_of_the_nearest_smaller_micro_batch() -> None:
    # measured at m0 = 2: peak 10 GB, resident 4 GB -> 6 GB of activations for 2 samples
    at_2 = MemoryPoint(candidate=cand(1, 2, 8), peak_bytes=10 * GB, resident_bytes=4 * GB)
    at_1 = MemoryPoint(candidate=cand(1, 1, 16), peak_bytes=7 * GB, resident_bytes=4 * GB)
    est = pt.estimate_bytes(cand(4, 8, 2), [at_1, at_2])
    assert est is not None and est == (4 * GB + 6 * GB * 8 / 2, at_2)  # 28 GB, from m0 = 2
    assert pt.estimate_bytes(cand(1, 4, 4), [at_1, at_2])[0] == 16 * GB  # type: ignore[index]
    # another checkpointing setting, or only larger d or micro-batches measured: no estimate
    assert pt.estimate_bytes(cand(1, 8, 2, True), [at_2]) is None
    larger_d = MemoryPoint(candidate=cand(4, 1, 4), peak_bytes=5 * GB, resident_bytes=1 * GB)
    assert pt.estimate_bytes(cand(2, 4, 2), [larger_d]) is None
    assert pt.estimate_bytes(cand(1, 1, 16), [at_2]) is None

    # pruned over the limit (20 GB), run under it, run without any limit (CPU workers)
    reason = pt.prune_reason(cand(4, 8, 2), points=[at_2], out_of_memory=[], limit_bytes=20 * GB)
    assert reason is not None and reason[1] == 28 * GB
    assert reason[0].startswith("not run: estimated 28 GB > 20 GB free (from micro-batch 2: ")
    assert pt.prune_reason(cand(1, 4, 4), points=[at_2], out_of_memory=[],
                           limit_bytes=20 * GB) is None  # fmt: skip
    assert pt.prune_reason(cand(4, 8, 2), points=[at_2], out_of_memory=[], limit_bytes=None) is None


def test_what_needs_no_less_than_an_out_of_memory_candidate_is_not_run() -> None:
    oom = [cand(2, 4, 2)]
    kw = {"points": [], "limit_bytes": None}
    for needs_more in (cand(2, 4, 2), cand(1, 8, 2), cand(2, 8, 1)):
        got = pt.prune_reason(needs_more, out_of_memory=oom, **kw)  # type: ignore[arg-type]
        assert got is not None and "2 x 4 x 2" in got[0] and "ran out of memory" in got[0]
    for may_fit in (cand(4, 4, 1), cand(2, 2, 4), cand(1, 8, 2, True)):
        assert pt.prune_reason(may_fit, out_of_memory=oom, **kw) is None  # type: ignore[arg-type]


def test_params_name_the_partition_not_the_scaling_case() -> None:
    cfg = TrainingConfig(model="tiny", batch_size=4, precision="fp32")
    default = pt.default_candidate(cfg, largest=2, batch=8)
    p = pt.params(cfg, cand(1, 2, 4), default=default)
    assert p == {
        "model": "tiny", "strategy": "ddp", "precision": "fp32", "compile": False,
        "cuda_graphs": False, "seq_len": 64, "d": 1, "micro_batch": 2, "accum": 4,
        "activation_checkpointing": False, "global_batch": 8, "default": False,
        "series": "partition",
    }  # fmt: skip
    assert pt.params(cfg, default, default=default)["default"] is True
    assert pt.params(TrainingConfig(model="resnet50"), default, default=default)["seq_len"] is None
    assert pt.num_candidates(TrainingConfig(batch_size=4, partition=True), [1, 2]) == 14


def test_the_search_is_on_in_full_and_small_in_the_cpu_standard_suite() -> None:
    gpu = TrainingConfig.preset(suite="full", device_type="cuda")
    assert gpu.partition and gpu.partition_max_candidates == 16
    assert gpu.partition_activation_checkpointing == [False, True]
    assert not TrainingConfig.preset(suite="standard", device_type="cuda").partition
    cpu = TrainingConfig.preset(suite="standard", device_type="cpu")
    assert cpu.partition and cpu.partition_max_candidates == 4 and cpu.partition_steps == 5
    assert not TrainingConfig.preset(suite="quick", device_type="cpu").partition
    # 4 of the 7 candidates of B = 4 x 2: the default, its twin, then the next micro-batch
    default, chosen = pt.planned(cpu, [1, 2])
    assert default == cand(2, 4, 1)
    assert set(chosen) == {cand(2, 4, 1), cand(1, 4, 2), cand(2, 2, 2), cand(1, 2, 4)}

"""The NCCL tuning sweep on gloo workers: through the real launcher it is skipped with its reason
and leaves the size sweep as it was; and, as a mechanics test on two gloo processes, one setting's
communicator is created under the setting, timed, destroyed, and the environment put back (the
NCCL log lines here are written by the test, standing in for NCCL)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from tests.dist.test_collectives_cpu import check_results, run_collectives

pytestmark = pytest.mark.dist

_NCCL_LINES = """\
h:1:2 [0] NCCL INFO NCCL_PROTO set by environment to allreduce:LL
h:1:2 [0] NCCL INFO NCCL_ALGO set by environment to allreduce:Tree
h:1:2 [0] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer
"""


def test_on_gloo_the_sweep_is_skipped_with_its_reason_and_the_size_sweep_is_unchanged(
    tmp_path: Path,
) -> None:
    results = run_collectives(
        tmp_path / "run", 2, "collectives.tune=true", "collectives.max_bytes=65536",
        "collectives.iters=3",
    )  # fmt: skip
    check_results(results, n=2, modes={"back_to_back", "blocking"})
    (skipped,) = [f for f in results.findings if f.id.startswith("collectives.tune")]
    assert skipped.id == "collectives.tune_skipped" and skipped.severity == "info"
    assert skipped.message == (
        "NCCL tuning sweep skipped: gloo has no NCCL algorithms or protocols to choose."
    )
    assert not [m for m in results.measurements if m.metric.startswith("tune_")]
    assert results.run.config["benchmarks"]["collectives"]["tune"] is True


def _state(before: int) -> dict[str, Any]:
    import torch.distributed as dist

    return {
        "env": {v: os.environ.get(v) for v in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE")},
        "groups_left": len(dist.distributed_c10d._world.pg_map) - before,
    }


def _mechanics_worker(rank: int, store: str, folder: str, out: Any) -> None:
    import torch
    import torch.distributed as dist

    from clusterbench.benchmarks.collectives import tune_setting as tune
    from clusterbench.runtime.dist import DistContext
    from clusterbench.runtime.nccl_debug import parse_comm_log

    os.environ.pop("NCCL_ALGO", None)
    os.environ.update(NCCL_PROTO="^LL128", NCCL_NVLS_ENABLE="0")  # the run's own: kept
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    try:
        ctx = DistContext(
            rank=rank, world_size=2, local_rank=rank, local_world_size=2, node_rank=0,
            num_nodes=1, host="h", device=torch.device("cpu"), backend="gloo",
            benchmark="collectives",
        )  # fmt: skip
        log = Path(folder) / f"rank{rank}.log"
        log.write_text("h:1:2 [0] NCCL INFO an earlier communicator's line\n")
        real_new_group, seen = dist.new_group, {}

        def new_group(*args: Any, **kwargs: Any) -> Any:  # NCCL would log as it starts
            seen["env"] = {v: os.environ.get(v) for v in ("NCCL_ALGO", "NCCL_PROTO")}
            with open(log, "a") as f:
                f.write(_NCCL_LINES)
            return real_new_group(*args, **kwargs)

        tune.dist.new_group = new_group  # type: ignore[assignment]
        setting = tune.TuneSetting(("all_reduce",), algo="Tree", proto="LL")
        kw: dict[str, Any] = dict(sizes={"all_reduce": [4096, 65536]}, dtype="fp32", warmup=1,
                                  iters=3, repeats=5, log_path=log)  # fmt: skip
        groups = len(dist.distributed_c10d._world.pg_map)
        run = tune.measure_setting(ctx, setting, **kw)
        proof = tune.prove(setting, parse_comm_log(run.log), inherited={"NCCL_PROTO": "^LL128"})
        out[f"ok{rank}"] = {
            "during": seen["env"], **_state(groups), "log": run.log, "proof": proof,
            "samples": {k: v for k, v in run.samples.items()}, "wrong": dict(run.wrong),
            "refused": run.refused,
        }  # fmt: skip

        def refusing(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(
                "NCCL error in: ProcessGroupNCCL.cpp, invalid usage\nLast error:\nNo algorithm/"
                "protocol available for function AllReduce with datatype ncclFloat32."
            )

        tune.dist.new_group = refusing  # type: ignore[assignment]
        refused = tune.measure_setting(ctx, setting, **kw)
        out[f"refused{rank}"] = {**_state(groups), "refused": refused.refused}

        tune.dist.new_group = real_new_group

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom: not a refusal")

        tune.make_op = broken  # type: ignore[assignment]
        try:
            tune.measure_setting(ctx, setting, **kw)
            raised = ""
        except RuntimeError as exc:
            raised = str(exc)
        out[f"raised{rank}"] = {**_state(groups), "raised": raised}
    finally:
        dist.destroy_process_group()


def test_mechanics_one_setting_in_a_group_of_its_own_then_everything_put_back(
    tmp_path: Path,
) -> None:
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_mechanics_worker, args=(str(tmp_path / "store"), str(tmp_path), out), nprocs=2)
        got = dict(out)
    kept = {"NCCL_ALGO": None, "NCCL_PROTO": "^LL128", "NCCL_NVLS_ENABLE": "0"}
    for rank in (0, 1):
        ok = got[f"ok{rank}"]
        assert ok["during"] == {"NCCL_ALGO": "allreduce:Tree", "NCCL_PROTO": "allreduce:LL"}
        assert ok["env"] == kept and ok["groups_left"] == 0
        assert ok["log"] == _NCCL_LINES  # only what was logged while its group lived
        assert ok["proof"] == (
            True, "NCCL_ALGO allreduce:Tree; NCCL_PROTO allreduce:LL; 2 coll channels"
        )  # fmt: skip
        assert sorted(ok["samples"]) == [("all_reduce", 4096), ("all_reduce", 65536)]
        assert all(len(v) == 5 and min(v) > 0 for v in ok["samples"].values())
        assert ok["wrong"] == {("all_reduce", 4096): 0, ("all_reduce", 65536): 0}
        assert ok["refused"] is None
        refused = got[f"refused{rank}"]
        assert refused["refused"] == (
            "No algorithm/protocol available for function AllReduce with datatype ncclFloat32."
        )
        assert refused["env"] == kept and refused["groups_left"] == 0
        raised = got[f"raised{rank}"]
        assert raised["raised"] == "boom: not a refusal"
        assert raised["env"] == kept and raised["groups_left"] == 0


def _sweep_worker(rank: int, store: str, folder: str, out: Any) -> None:
    """The whole sweep on gloo, NCCL's start-up lines written by a stand-in for it."""
    import torch
    import torch.distributed as dist

    from clusterbench.benchmarks.collectives import tune as sweep
    from clusterbench.benchmarks.collectives import tune_setting as tune
    from clusterbench.benchmarks.collectives import CollectivesConfig
    from clusterbench.runtime.dist import DistContext

    log = Path(folder) / f"nccl-rank{rank}.log"
    log.write_text("")
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,ENV", NCCL_DEBUG_FILE=str(log))
    for var in ("NCCL_ALGO", "NCCL_PROTO"):
        os.environ.pop(var, None)
    dist.init_process_group("gloo", store=dist.FileStore(store, 2), rank=rank, world_size=2)
    real_new_group = dist.new_group

    def new_group(ranks: list[int], pg_options: Any = None) -> Any:
        algo, proto = os.environ.get("NCCL_ALGO"), os.environ.get("NCCL_PROTO")
        if (algo, proto) == ("allreduce:Tree", "allreduce:LL128"):
            raise RuntimeError("invalid usage\nNo algorithm/protocol available for AllReduce.")
        lines = []
        if algo is not None:
            lines.append(f"NCCL_ALGO set by environment to {algo}")
        if proto is not None and proto != "allreduce:LL128":  # a setting the log does not show
            lines.append(f"NCCL_PROTO set by environment to {proto}")
        lines.append(f"{pg_options or 8} coll channels, 0 nvls channels, 8 p2p channels, x")
        with open(log, "a") as f:
            f.writelines(f"h:1:2 [0] NCCL INFO {line}\n" for line in lines)
        return real_new_group(ranks)

    try:
        sweep.skip_reason = lambda ctx: None  # type: ignore[assignment]  # gloo stands in
        tune._pg_options = lambda ctx, channels: channels  # type: ignore[assignment]
        tune.dist.new_group = new_group  # type: ignore[assignment]
        ctx = DistContext(
            rank=rank, world_size=2, local_rank=rank, local_world_size=2, node_rank=0,
            num_nodes=1, host="h", device=torch.device("cpu"), backend="gloo",
            benchmark="collectives", run_dir=Path(folder) / "run",
        )  # fmt: skip
        cfg = CollectivesConfig(
            tune=True, tune_ops=["all_reduce", "all_to_all"], tune_sizes=[4096, 65536],
            tune_algos=["ring", "tree"], tune_protos=["LL", "LL128"], tune_channels=[2],
            tune_repeats=4, iters=2, warmup=1,
        )  # fmt: skip
        items = list(sweep.tune_sweep(ctx, cfg, memory_limit_bytes=1e9))
        out[rank] = {
            "items": [item.model_dump(mode="json") for item in items],
            "env": {v: os.environ.get(v) for v in ("NCCL_ALGO", "NCCL_PROTO")},
        }
    finally:
        dist.destroy_process_group()


def test_mechanics_the_whole_sweep_records_each_setting_against_the_pooled_default(
    tmp_path: Path,
) -> None:
    import torch.multiprocessing as mp

    from clusterbench import catalog
    from clusterbench.benchmarks.collectives.tune_findings import tune_findings
    from clusterbench.benchmarks.collectives.section import tune_grids
    from clusterbench.schema import Finding, Measurement, Results, RunInfo, ToolInfo

    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_sweep_worker, args=(str(tmp_path / "store"), str(tmp_path), out), nprocs=2)
        got = dict(out)
    assert got[1]["items"] == []  # rank 0 records
    assert got[0]["env"] == got[1]["env"] == {"NCCL_ALGO": None, "NCCL_PROTO": None}
    items = got[0]["items"]
    findings = [Finding.model_validate(i) for i in items if "severity" in i]
    ms = [Measurement.model_validate(i) for i in items if "metric" in i]
    (refused,) = findings
    assert refused.id == "collectives.tune.not_supported"
    assert refused.message == (
        "NCCL cannot run NCCL_ALGO=allreduce:Tree NCCL_PROTO=allreduce:LL128 for all_reduce "
        "here: No algorithm/protocol available for AllReduce."
    )
    rows = {(m.params["setting"], m.params["op"], m.params["size_bytes"], m.metric): m for m in ms}
    ar = ["NCCL_ALGO=allreduce:Ring NCCL_PROTO=allreduce:LL",
          "NCCL_ALGO=allreduce:Ring NCCL_PROTO=allreduce:LL128",
          "NCCL_ALGO=allreduce:Tree NCCL_PROTO=allreduce:LL"]  # fmt: skip
    expected = {(s, "all_reduce") for s in ar}
    expected |= {(s, op) for s in ("default", "channels=2") for op in ("all_reduce", "all_to_all")}
    assert {(s, op) for s, op, _, _ in rows} == expected
    assert len(rows) == len(expected) * 2 * 2  # two sizes, latency and busbw
    for (setting, _, _, metric), m in rows.items():
        assert m.rank == 0 and m.value > 0 and m.params["num_wrong"] == 0
        assert m.stats is not None
        if metric == "tune_latency_us":
            assert m.stats.samples == (8 if setting == "default" else 4)  # before + after
            assert m.value == pytest.approx(m.stats.median)
        assert m.params["confirmed"] is (setting != ar[1]), setting
    default = rows[("default", "all_reduce", 4096, "tune_latency_us")]
    assert default.params["log"] == "8 coll channels"
    assert default.stats is not None and len(default.stats.values or []) == 8  # before, after
    assert rows[("channels=2", "all_to_all", 65536, "tune_busbw")].params["log_channels"] == 2
    assert rows[(ar[0], "all_reduce", 4096, "tune_busbw")].params["log"] == (
        "NCCL_ALGO allreduce:Ring; NCCL_PROTO allreduce:LL; 8 coll channels"
    )
    kept = (tmp_path / "run" / "nccl" / "tune-rank-00001.log").read_text()
    assert kept.count("# NCCL tuning: ") == 7  # default, 4 algo x proto, channels, default
    # what analysis and the summary make of them
    catalog.register_builtin()
    run = RunInfo(id="r", started="2026-11-01T00:00:00Z", suite="full", world_size=2,
                  num_nodes=1, backend="nccl", command="clusterbench run")  # fmt: skip
    judged = tune_findings(Results(tool=ToolInfo(version="0"), run=run, measurements=ms))
    unconfirmed = [f for f in judged if f.id == "collectives.tune.unconfirmed"]
    assert len(unconfirmed) == 1 and f"{ar[1]} (all_reduce)" in unconfirmed[0].message
    assert {f.id for f in judged} - {"collectives.tune.unconfirmed"} <= {
        "collectives.tune.recommend", "collectives.tune.keep_defaults",
    }  # fmt: skip
    assert [g.title for g in tune_grids(ms)] == [
        f"NCCL settings against the default, {op} (world, 2 ranks, fp32)"
        for op in ("all_reduce", "all_to_all")
    ]

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clusterbench.pipeline.assemble import RunMeta, assemble_results
from clusterbench.runtime.cores import cores_per_rank
from clusterbench.runtime.dist import set_rank_threads
from clusterbench.runtime.launch import WorkerFailure, detect_launcher, export_dist_env
from clusterbench.runtime.records import (
    End,
    Error,
    Hello,
    Interrupted,
    MeasurementRecord,
    RankLog,
    Start,
    parse_record,
    read_records,
)
from clusterbench.runtime.timing import Stats, rate_stats


def test_stats_from_samples() -> None:
    s = Stats.from_samples([1.0, 2.0, 3.0, 4.0])
    assert (s.samples, s.median, s.min, s.max, s.mean) == (4, 2.5, 1.0, 4.0, 2.5)
    assert s.cv == pytest.approx(1.2909944 / 2.5)
    assert Stats.from_samples([5.0]).cv == 0.0
    with pytest.raises(ValueError):
        Stats.from_samples([])


def test_rate_stats_is_work_over_time() -> None:
    s = rate_stats([0.5, 1.0, 2.0], work=4e9, scale=1e9)
    assert (s.max, s.median, s.min) == (8.0, 4.0, 2.0)


def test_detect_launchers() -> None:
    assert detect_launcher({}) is None
    t = detect_launcher(
        {
            "RANK": "3",
            "WORLD_SIZE": "8",
            "LOCAL_RANK": "3",
            "LOCAL_WORLD_SIZE": "4",
            "MASTER_ADDR": "n0",
            "MASTER_PORT": "1234",
        }
    )
    assert t is not None and (
        t.kind,
        t.rank,
        t.world_size,
        t.local_rank,
        t.local_world_size,
        t.master_addr,
        t.master_port,
    ) == ("torchrun", 3, 8, 3, 4, "n0", 1234)
    m = detect_launcher(
        {
            "OMPI_COMM_WORLD_RANK": "5",
            "OMPI_COMM_WORLD_SIZE": "16",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "8",
        }
    )
    assert m is not None and (m.kind, m.rank, m.world_size, m.local_rank, m.local_world_size) == (
        "mpi",
        5,
        16,
        1,
        8,
    )
    s = detect_launcher(
        {
            "SLURM_PROCID": "9",
            "SLURM_STEP_NUM_TASKS": "16",
            "SLURM_LOCALID": "1",
            "SLURM_STEP_TASKS_PER_NODE": "8(x2)",
            "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.1",
            "SLURM_JOB_ID": "4242",
        }
    )
    assert s is not None and (
        s.kind,
        s.rank,
        s.world_size,
        s.local_world_size,
        s.master_addr,
        s.master_port,
    ) == ("slurm", 9, 16, 8, "10.0.0.1", 29500 + 242)
    # a batch script without srun is not a worker
    assert detect_launcher({"SLURM_PROCID": "0", "SLURM_NTASKS": "16"}) is None


def test_export_dist_env_requires_master_addr_for_many(monkeypatch: pytest.MonkeyPatch) -> None:
    m = detect_launcher({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"})
    assert m is not None
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        export_dist_env(m)


def _meta(**kw: object) -> RunMeta:
    base = dict(
        id="r",
        started="t0",
        finished="t1",
        suite="quick",
        world_size=2,
        backend="gloo",
        command="clusterbench run",
        config={},
        benchmarks=["a", "b"],
        version="0",
        fallback_host="here",
    )
    base.update(kw)
    return RunMeta(**base)  # type: ignore[arg-type]


def _measurement(rank: int, bench: str) -> dict[str, object]:
    return {
        "benchmark": bench,
        "metric": "x",
        "value": 1.0,
        "unit": "GB/s",
        "params": {},
        "rank": rank,
        "host": f"h{rank}",
        "device": f"cpu:{rank}",
    }


def test_assemble_names_the_culprit_not_the_waiter(tmp_path: Path) -> None:
    logs = [RankLog(tmp_path, r) for r in (0, 1)]
    for r, log in enumerate(logs):
        log.write(Hello(host=f"h{r}", local_rank=r, device=f"cpu:{r}"))
        log.write(Start(benchmark="a"))
        log.write(MeasurementRecord.model_validate({"data": _measurement(r, "a")}))
        log.write(End(benchmark="a"))
        log.write(Start(benchmark="b"))
    logs[0].write(Error(benchmark="b", message="timeout", while_waiting=True))
    records = read_records(tmp_path)
    failures = [WorkerFailure(rank=1, exitcode=-9, message="")]
    res = assemble_results(records=records, meta=_meta(), failures=failures)
    assert res.run.status == "failed"
    assert res.run.unfinished == ["b"]
    assert res.run.num_nodes == 2
    assert res.errors[0].rank == 1 and res.errors[0].host == "h1"
    assert "was killed by SIGKILL during b" in res.errors[0].message
    assert res.errors[1].rank == 0 and "was waiting for rank 1 in b" in res.errors[1].message
    assert res.errors[0].message.endswith("; waiting for it: rank 0 (host h0)")
    assert {m.rank for m in res.measurements} == {0, 1}


def test_assemble_complete_run_and_torn_line(tmp_path: Path) -> None:
    for r in (0, 1):
        log = RankLog(tmp_path, r)
        log.write(Hello(host="h", local_rank=r, device=f"cpu:{r}"))
        for b in ("a", "b"):
            log.write(Start(benchmark=b))
            log.write(End(benchmark=b))
        log.close()
    with open(tmp_path / "ranks" / "rank-00001.jsonl", "a") as fh:
        fh.write('{"kind": "measu')  # a rank killed mid-write
    res = assemble_results(records=read_records(tmp_path), meta=_meta(), failures=[])
    assert res.run.status == "completed" and res.errors == [] and res.run.unfinished == []


def test_a_benchmark_with_no_form_for_the_device_is_skipped_not_unfinished(tmp_path: Path) -> None:
    """Interrupted in a before any rank came to b, which the device has no form of."""
    log = RankLog(tmp_path, 0)
    log.write(Hello(host="h", local_rank=0, device="cpu:0"))
    log.write(Start(benchmark="a"))
    log.write(Interrupted(benchmark="a"))
    meta = _meta(world_size=1, not_applicable={"b": "no cpu form"})
    res = assemble_results(records=read_records(tmp_path), meta=meta, failures=[])
    assert res.run.status == "interrupted"
    assert res.run.unfinished == ["a"]
    assert res.run.skipped == {"b": "no cpu form"}


def test_records_are_numbered_and_read_back_as_written(tmp_path: Path) -> None:
    log = RankLog(tmp_path, 3, keep_unsent=True)
    log.write(Hello(host="h", local_rank=3, device="cpu:3"))
    log.write(Error(benchmark="b", message="boom", timeout=True))
    log.close()
    back = read_records(tmp_path)
    assert [(r.kind, r.rank, r.seq) for r in back] == [("hello", 3, 0), ("error", 3, 1)]
    assert back == log.take_unsent()
    assert isinstance(back[1], Error) and back[1].timeout and not back[1].while_waiting
    line = (tmp_path / "ranks" / "rank-00003.jsonl").read_text().splitlines()[1]
    assert parse_record(line) == back[1]
    with pytest.raises(ValueError):  # a kind nobody writes is refused, not guessed
        parse_record({"kind": "nonsense", "rank": 0, "seq": 0})


def test_assemble_keeps_a_running_status_only_while_nothing_failed(tmp_path: Path) -> None:
    log = RankLog(tmp_path, 0)
    log.write(Hello(host="h", local_rank=0, device="cpu:0"))
    log.write(Start(benchmark="a"))
    log.write(End(benchmark="a"))
    meta = _meta()
    running = assemble_results(records=read_records(tmp_path), meta=meta, failures=[], running=True)
    assert running.run.status == "running" and running.run.finished is None
    log.write(Start(benchmark="b"))
    log.write(Error(benchmark="b", message="boom"))
    failed = assemble_results(records=read_records(tmp_path), meta=meta, failures=[], running=True)
    assert failed.run.status == "failed" and failed.run.finished == meta.finished


def test_time_op_counts_warmup_and_repeats() -> None:
    import time

    import torch

    from clusterbench.runtime.timing import time_op

    calls: list[float] = []
    samples = time_op(lambda: calls.append(1.0), device=torch.device("cpu"), warmup=3, repeats=4)
    assert len(samples) == 4 and len(calls) == 7
    calls.clear()
    t0 = time.perf_counter()
    time_op(lambda: calls.append(1.0), device=torch.device("cpu"), warmup=1, repeats=2,
            warmup_min_s=0.2)  # fmt: skip
    assert time.perf_counter() - t0 >= 0.2
    assert len(calls) > 3  # warm-up went on past its count until the time had passed


def test_time_op_samples_are_the_calls_durations() -> None:
    import time

    import torch

    from clusterbench.runtime.timing import time_op

    durations = iter([0.0, 0.02, 0.04])  # warm-up call, then two timed calls
    samples = time_op(lambda: time.sleep(next(durations)), device=torch.device("cpu"),
                      warmup=1, repeats=2)  # fmt: skip
    assert samples[0] >= 0.02 and samples[1] >= 0.04  # in order, each its own call


def test_rank_threads_take_a_share_unless_omp_num_threads_is_set() -> None:
    before = torch.get_num_threads()
    share = cores_per_rank(2)
    assert share >= 1 and share == max(1, cores_per_rank(1) // 2)
    try:
        torch.set_num_threads(share + 1)
        assert set_rank_threads(2, env={}) == share
        torch.set_num_threads(share + 1)
        assert set_rank_threads(2, env={"OMP_NUM_THREADS": "4"}) == share + 1  # it stands
    finally:
        torch.set_num_threads(before)


def test_phases_of_the_ranks_and_the_starting_process_in_the_order_they_happen(
    tmp_path: Path,
) -> None:
    from clusterbench.runtime.phases import ordered_phases, process_age_s
    from clusterbench.runtime.records import Phase

    for r, (start, init) in enumerate([(0.5, 0.2), (0.9, 0.1)]):
        log = RankLog(tmp_path, r)
        log.write(Hello(host="h", local_rank=r, device=f"cpu:{r}"))
        log.write(Phase(name="device init", seconds=init))
        log.write(Phase(name="worker start", seconds=start))
    meta = _meta(phases={"plan": 0.0123456, "start": 1.5, "imports": 2.0})
    res = assemble_results(records=read_records(tmp_path), meta=meta, failures=[])
    # the slowest rank's, in the order of PHASES, to the millisecond
    assert res.run.phase_seconds == {
        "start": 1.5, "imports": 2.0, "plan": 0.012, "worker start": 0.9, "device init": 0.2,
    }  # fmt: skip
    assert list(ordered_phases({"page": 1.0, "zz": 2.0}, [("finish", 3.0)])) == [
        "finish", "page", "zz",
    ]  # fmt: skip
    age = process_age_s()
    assert age is not None and 0 < age < 24 * 3600


def test_a_world_of_one_waits_for_no_one(world: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A barrier in a world of one rank calls no collective (under NCCL it would make a
    communicator that no peer uses); two ranks do call one."""
    import torch.distributed as dist

    from tests.helpers import one_rank_ctx

    calls: list[object] = []
    monkeypatch.setattr(dist, "barrier", lambda *a, **k: calls.append((a, k)))
    one_rank_ctx("gemm").barrier()
    assert calls == []
    two = one_rank_ctx("gemm")
    two.world_size = 2
    two.barrier()
    assert len(calls) == 1

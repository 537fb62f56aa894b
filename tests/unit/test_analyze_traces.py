"""``clusterbench analyze``: real torch.profiler traces (tests/data/traces, recorded with
scripts/record_traces.py: two gloo ranks with a planted straggler, the same job without a
schedule, one H100 rank) streamed, attributed as the attribution benchmark attributes its own,
and written as a run folder; a truncated rank costs one line, the others are analysed."""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clusterbench.analyses.trace import file as trace_file
from clusterbench.analyses.trace.attribution import attribute
from clusterbench.cli import app
from clusterbench.history_db import open_history
from clusterbench.schema import Results, load_results
from clusterbench.traces import trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
SLOW = DATA / "cpu-gloo-slow-rank"
runner = CliRunner()


def _analyze(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, ["analyze", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def _classes(results: Results) -> dict[tuple[int, str], dict[str, float]]:
    out: dict[tuple[int, str], dict[str, float]] = {}
    for m in results.measurements:
        if m.metric in trace.CLASSES:
            out.setdefault((m.rank, str(m.params["rank_step"])), {})[m.metric] = m.value
    return out


FOLDERS = ["cpu-gloo-slow-rank", "cpu-gloo-plain", "h100", "h100-plain", "lightning",
           "lightning-cycles", "lightning-1proc", "hf-trainer"]  # fmt: skip


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_streamed_reduction_equals_the_benchmark_s_own_reading(folder: str) -> None:
    """Each recorded trace, streamed in bounded memory, splits every step exactly as the
    attribution benchmark's functions split it from the whole event list in memory."""
    for path in sorted((DATA / folder).iterdir()):
        streamed = trace_file.read_trace(path, default_rank=0)
        if streamed.windowed and not streamed.device:
            continue  # the benchmark reads a CPU trace by its steps' thread: it has none
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        whole = trace.activities(events)
        for n, start, end in streamed.steps:
            ours = streamed.activities(start, end)
            theirs = [a for a in whole if a.end_us > start and a.start_us < end]
            assert sorted(ours, key=repr) == sorted(theirs, key=repr), (path.name, n)
        if not streamed.windowed:
            assert [n for n, _, _ in streamed.steps] == [n for n, _, _ in trace.step_spans(events)]


def test_a_planted_straggler_is_found_in_real_cpu_traces(tmp_path: Path) -> None:
    code, out, err = _analyze(SLOW, "-o", tmp_path / "run")
    assert code == 0, out + err
    results = load_results(tmp_path / "run")
    assert results.run.suite == "analyze" and results.run.world_size == 2
    assert results.run.backend == "gloo" and [h.hostname for h in results.hosts] == ["vm"]
    classes = _classes(results)
    assert {step for _, step in classes} == {"mean", "2", "3", "4", "5"}
    for shares in classes.values():  # the four classes of every rank and step sum to 100
        assert sum(shares.values()) == pytest.approx(100.0, abs=1e-6)
    late = {
        m.rank: m.value for m in results.measurements if m.metric == "collective_start_lateness_ms"
    }
    # rank 1 sleeps 100 ms at the start of each step: it starts the all-reduces ~100 ms late
    assert late[1] > 50.0 > late[0]
    (last,) = [f for f in results.findings if f.id == "attribution.trace.last_arrivals"]
    assert "rank 1 (vm) arrived last" in last.message
    assert last.evidence["last_arrivals"]["1"] == last.evidence["matched"] > 0
    # on the ranks' common clock rank 1 enters every collective last; had it entered them with
    # rank 0, each step would be ~100 ms shorter (the sleep); two CPU ranks of one host share
    # its cores, said in the message, and still a warn: the user asked which rank is late
    (straggler,) = [f for f in results.findings if f.id == "attribution.straggler"]
    assert straggler.evidence["rank"] == 1 and straggler.severity == "warn"
    assert "common clock" in straggler.message and "would save" in straggler.message
    assert 85.0 < straggler.evidence["saving_ms"] < 115.0
    assert "Rank 1" in out and "would save" in out  # shown by default, not under --verbose
    waits = {m.rank: m.value for m in results.measurements
             if m.metric == "wait_pct" and "accum_steps" not in m.params}  # fmt: skip
    assert waits[1] < 5.0 < 50.0 < waits[0]
    kernels = [m for m in results.measurements if m.metric == "kernel_time_ms"]
    assert {m.params["class"] for m in kernels} <= {"compute", "memory", "comm"}
    assert any(m.params["kernel"] == "gloo:all_reduce" for m in kernels)
    assert (
        "top kernels by device time" in out
        and "rank 1 (vm) arrived last" in (tmp_path / "run" / "summary.md").read_text()
    )
    assert (tmp_path / "run" / "report.html").is_file()


def test_a_gpu_trace_names_its_gpu_and_kernels(tmp_path: Path) -> None:
    code, _, err = _analyze(DATA / "h100", "-o", tmp_path / "run", "--top", "5")
    assert code in (0, 1), err
    results = load_results(tmp_path / "run")
    assert results.run.backend == "nccl"
    (host,) = results.hosts
    (gpu,) = host.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.spec is not None
    kernels = [m for m in results.measurements if m.metric == "kernel_time_ms"]
    assert len(kernels) == 5 and {m.device for m in kernels} == {"cuda:0"}
    top = max(kernels, key=lambda m: m.value)
    assert top.params["class"] == "compute" and "gemm" in str(top.params["kernel"]).lower()


def test_traces_without_profiler_steps_are_one_window(tmp_path: Path) -> None:
    """export_chrome_trace of an unscheduled profiler: one window, said in a note; without
    distributedInfo the rank comes from the file's name."""
    for path in (DATA / "cpu-gloo-plain").iterdir():
        data = json.loads(gzip.decompress(path.read_bytes()))
        del data["distributedInfo"]
        (tmp_path / path.name.removesuffix(".gz")).write_text(json.dumps(data))
    code, _, err = _analyze(tmp_path / "rank-0.json", tmp_path / "rank-1.json",
                            "-o", tmp_path / "run")  # fmt: skip
    assert code == 0, err
    results = load_results(tmp_path / "run")
    assert {step for _, step in _classes(results)} == {"mean", "0"}
    assert {m.rank for m in results.measurements} == {0, 1}
    (note,) = [f for f in results.findings if f.id == "attribution.trace.window"]
    assert "2 trace(s) without ProfilerStep#N spans" in note.message
    # windows start apart, but the ranks' clocks are aligned on their collectives' ends (the
    # first collective, which waits for the profilers to start, left out): timed
    assert "timed against each other on their aligned clocks" in note.message
    (clock,) = [f for f in results.findings if f.id == "attribution.trace.clock"]
    assert "ends then agree within" in clock.message
    late = [m for m in results.measurements if m.metric == "collective_start_lateness_ms"]
    assert {m.rank for m in late} == {0, 1}
    # rank 1 entered most collectives last (its first collective, which waits for the profilers
    # to start, unmatched in its place): rank 0 waits inside them, rank 1 hardly
    waits = {m.rank: m.value for m in results.measurements if m.metric == "wait_pct"}
    assert waits[0] > 10 * waits[1] > 0
    for shares in _classes(results).values():
        assert sum(shares.values()) == pytest.approx(100.0, abs=1e-6)


def test_a_truncated_rank_is_one_line_and_the_others_are_analysed(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(SLOW, traces)
    first, second = sorted(traces.iterdir())
    text = gzip.decompress(second.read_bytes())
    cut = traces / second.name.removesuffix(".gz")
    cut.write_bytes(text[: len(text) // 2])
    second.unlink()
    code, _, err = _analyze(traces, "-o", tmp_path / "run")
    assert code == 0
    assert err.strip().splitlines() == [
        f"clusterbench: warning: {cut}: cannot read it as a trace (truncated: the file ends "
        "inside its JSON)",
        "clusterbench: warning: rank 0 of 2: cross-rank findings need the other ranks' files",
    ]
    results = load_results(tmp_path / "run")
    assert {m.rank for m in results.measurements} == {0}
    (unread,) = [f for f in results.findings if f.id == "attribution.trace.unread"]
    assert unread.severity == "warn" and str(cut) in unread.message
    # nothing readable: one line, nothing written
    (traces / first.name).unlink()
    code, _, err = _analyze(traces, "-o", tmp_path / "none")
    assert code == 2 and len(err.strip().splitlines()) == 1 and not (tmp_path / "none").exists()
    assert err.startswith("clusterbench: error: no trace could be read:")


def test_before_and_after_compare_by_history_id(tmp_path: Path) -> None:
    assert _analyze(SLOW, "-o", tmp_path / "before")[0] == 0
    assert _analyze(SLOW, "-o", tmp_path / "after", "--baseline", tmp_path / "before")[0] == 0
    assert (tmp_path / "after" / "comparison.json").is_file()
    with open_history(None) as store:
        ids = [r.id for r in store.runs()]
    result = runner.invoke(app, ["compare", ids[1], ids[0], "--json"])
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert {r["verdict"] for r in rows} == {"unchanged"}  # the same traces twice
    assert any(r["metric"] == "coordination" for r in rows)


@pytest.mark.parametrize(
    ("name", "collective"),
    [
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", True),  # NCCL < 2.19
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", True),
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", True),
        ("ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)", True),  # RCCL on ROCm
        ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", False),  # hipBLASLt's GEMM: compute
        ("void at::native::vectorized_elementwise_kernel<4, ...>", False),
    ],
)
def test_collective_kernels_of_every_naming(name: str, collective: bool) -> None:
    assert trace.is_collective_kernel(name) is collective
    if name.startswith("Cijk_"):
        assert trace.device_kind(name, "kernel") == "compute"


def test_many_streams_and_ranks_matched_in_memory() -> None:
    """attribute() over the two real CPU ranks, with the reduction done once."""
    traces = [trace_file.read_trace(p) for p in sorted(SLOW.iterdir())]
    result = attribute(traces, top=3)
    assert [r.trace.rank for r in result.ranks] == [0, 1]
    assert result.matched == len(result.spreads_ms) > 0
    assert all(len(r.kernels) == 3 for r in result.ranks)
    assert result.ranks[1].last_arrivals == result.matched


@pytest.mark.parametrize("folder", ["lightning", "hf-trainer"])
def test_traces_written_by_lightning_and_the_hf_trainer(folder: str, tmp_path: Path) -> None:
    """Lightning's own profiler (its file names, its step spans) and a Trainer callback's:
    both ranks from distributedInfo, three steps each, the gloo collectives matched, the four
    classes summing to 100, and the two CPU ranks sharing one host's cores named apart (a
    straggler among them is stated, not judged)."""
    code, _, err = _analyze(DATA / folder, "-o", tmp_path / "run")
    assert code == 0, err
    results = load_results(tmp_path / "run")
    classes = _classes(results)
    assert {rank for rank, _ in classes} == {0, 1}
    assert len({step for _, step in classes}) == 4  # three steps and their mean
    for shares in classes.values():
        assert sum(shares.values()) == pytest.approx(100.0, abs=1e-6)
    assert {m.device for m in results.measurements} == {"cpu:0", "cpu:1"}
    (last,) = [f for f in results.findings if f.id == "attribution.trace.last_arrivals"]
    assert last.evidence["matched"] >= 9
    assert not [f for f in results.findings if f.severity == "fail"]
    # host ops nest: the top list counts each op's own time, so it adds up to at most the step
    for rank in (0, 1):
        shares = [float(str(m.params["share_pct"])) for m in results.measurements
                  if m.metric == "kernel_time_ms" and m.rank == rank
                  and m.params["class"] != "comm"]  # fmt: skip
        assert 0 < sum(shares) <= 100.0


def test_a_repeating_schedule_s_files_and_a_one_process_trace(tmp_path: Path) -> None:
    """Lightning's schedule repeats: two files per rank, the first analysed and the other
    named in a note, the ranks' cycles told in one line; a lone trace of one process (no
    process group, no rank in its name) is rank 0; a folder's other JSON is passed over, and
    counted."""
    code, _, err = _analyze(DATA / "lightning-cycles", "-o", tmp_path / "cycles")
    assert code == 0 and err.splitlines() == [
        "clusterbench: warning: ranks 0-1: 2 files each (a profiler schedule that repeats "
        "writes one per cycle); the first of each analysed, the others named in the notes"
    ]
    results = load_results(tmp_path / "cycles")
    extra = [f for f in results.findings if f.id == "attribution.trace.extra"]
    assert [f.severity for f in extra] == ["info", "info"]
    assert all("2 files" in f.message for f in extra)
    lone = tmp_path / "lone"
    shutil.copytree(DATA / "lightning-1proc", lone)
    (lone / "config.json").write_text(json.dumps({"hidden_size": 64}))
    code, _, err = _analyze(lone, "-o", tmp_path / "one")
    assert code == 0 and err.splitlines() == [
        "clusterbench: warning: 1 file(s) passed over: JSON without traceEvents, not "
        "torch.profiler traces (config.json)"
    ]
    results = load_results(tmp_path / "one")
    assert {m.rank for m in results.measurements} == {0}
    (passed,) = [f for f in results.findings if f.id == "attribution.trace.passed_over"]
    assert passed.severity == "info"
    assert results.run.config["imported"]["passed_over"] == [str(lone / "config.json")]
    code, _, err = _analyze(lone / "config.json", "-o", tmp_path / "none")
    assert code == 2 and "not a torch.profiler trace (no traceEvents)" in err


def test_collectives_that_differ_across_ranks_are_not_matched() -> None:
    """A sampled trace (or process groups whose collectives interleave differently): the k-th
    collectives of a step run different kernels on the two ranks: no wait, no lateness from
    them, and the count is told; alike ones are still matched."""
    from clusterbench.traces import ranks

    ar, a2a = "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclDevKernel_SendRecv"
    rank0 = {1: [trace.Collective(ar, 1.0, 5.0), trace.Collective(a2a, 9.0, 2.0),
                 trace.Collective(ar, 20.0, 4.0)]}  # fmt: skip
    rank1 = {1: [trace.Collective(a2a, 3.0, 1.0), trace.Collective(ar, 9.5, 6.0),
                 trace.Collective(ar, 22.0, 1.0)]}  # fmt: skip
    per_rank = [rank0, rank1]
    assert ranks.mismatched(per_rank) == 2
    assert [k for _, k, _ in ranks.matched_collectives(per_rank)] == [2]
    assert ranks.collective_waits(per_rank) == [{1: [0.0, 0.0, 3.0]}, {1: [0.0, 0.0, 0.0]}]
    assert ranks.start_waits(per_rank) == [{1: [0.0, 0.0, 2.0]}, {1: [0.0, 0.0, 0.0]}]
    spreads, late = ranks.start_lateness(per_rank)
    assert spreads == [2.0] and late == [[0.0], [2.0]]


def _trace(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return data


def _lines(err: str) -> list[str]:
    return [line.removeprefix("clusterbench: warning: ") for line in err.splitlines()]


def test_a_file_that_is_not_a_trace_is_named_with_why(tmp_path: Path) -> None:
    """A gzip of text is read and named, not passed over; a folder of nothing but it, or of
    JSON without traceEvents, names its files; beside real traces, the bad file is one
    warning and the config JSON a count."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "rank-0.json.gz").write_bytes(gzip.compress(b"step 1 loss 2.3\n"))
    code, _, err = _analyze(bad, "-o", tmp_path / "none")
    assert code == 2 and not (tmp_path / "none").exists()
    assert err.strip() == (
        f"clusterbench: error: no trace could be read: {bad / 'rank-0.json.gz'}: a gzip whose "
        "content is not JSON (it starts b'step 1 loss 2.3\\n'): not a trace"
    )
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.json").write_text(json.dumps({"hidden_size": 64}))
    code, _, err = _analyze(conf, "-o", tmp_path / "none")
    assert code == 2 and err.strip() == (
        f"clusterbench: error: {conf}: no trace in it: its 1 JSON file(s) (config.json) have no "
        "traceEvents (not torch.profiler traces)"
    )
    mixed = tmp_path / "mixed"
    shutil.copytree(SLOW, mixed)
    (mixed / "notes.json.gz").write_bytes(gzip.compress(b""))
    (mixed / "config.json").write_text(json.dumps({"hidden_size": 64}))
    code, _, err = _analyze(mixed, "-o", tmp_path / "run")
    assert code == 0 and _lines(err) == [
        f"{mixed / 'notes.json.gz'}: a gzip whose content is empty: not a trace",
        "1 file(s) passed over: JSON without traceEvents, not torch.profiler traces (config.json)",
    ]
    results = load_results(tmp_path / "run")
    assert {m.rank for m in results.measurements} == {0, 1}
    assert [(f.id, f.severity) for f in results.findings if f.id.startswith("attribution.trace.")
            and f.id.endswith(("unread", "passed_over"))] == [
        ("attribution.trace.unread", "warn"), ("attribution.trace.passed_over", "info")
    ]  # fmt: skip


def _job(folder: Path, ranks: list[int], world_size: int) -> None:
    """Files of one job of ``world_size`` ranks, ``ranks`` of them: the two recorded gloo
    ranks in turn, each with its rank and the world size in its distributedInfo."""
    folder.mkdir()
    recorded = sorted(SLOW.iterdir())
    for rank in ranks:
        data = _trace(recorded[rank % 2])
        data["distributedInfo"].update(rank=rank, world_size=world_size)
        (folder / f"rank-{rank}.json").write_text(json.dumps(data))


def test_ranks_missing_from_the_world_and_one_rank_of_many(tmp_path: Path) -> None:
    _job(tmp_path / "three", [0, 1, 3], 4)
    code, _, err = _analyze(tmp_path / "three", "-o", tmp_path / "run")
    assert code == 0 and _lines(err) == [
        "rank 2 of world size 4 has no trace: cross-rank findings cover the 3 present"
    ]
    results = load_results(tmp_path / "run")
    (missing,) = [f for f in results.findings if f.id == "attribution.trace.missing_ranks"]
    assert missing.severity == "warn" and missing.evidence["missing"] == [2]
    assert {m.rank for m in results.measurements} == {0, 1, 3}
    _job(tmp_path / "one", [0], 64)
    code, _, err = _analyze(tmp_path / "one" / "rank-0.json", "-o", tmp_path / "run1")
    assert code == 0 and _lines(err) == [
        "rank 0 of 64: cross-rank findings need the other ranks' files"
    ]


def test_a_rank_without_profiler_steps_among_ranks_with_them(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(SLOW, traces)
    second = sorted(traces.iterdir())[1]
    data = _trace(second)
    data["traceEvents"] = [e for e in data["traceEvents"]
                           if not str(e.get("name", "")).startswith("ProfilerStep#")]  # fmt: skip
    second.unlink()
    (traces / second.name.removesuffix(".gz")).write_text(json.dumps(data))
    code, _, err = _analyze(traces, "-o", tmp_path / "run")
    assert code == 0 and _lines(err) == [
        "rank 1 read as one window (no ProfilerStep spans); the others' steps are timed among "
        "themselves"
    ]
    results = load_results(tmp_path / "run")
    (mixed,) = [f for f in results.findings if f.id == "attribution.trace.mixed_steps"]
    assert mixed.severity == "warn" and mixed.evidence["windowed"] == [1]
    assert {str(m.params["rank_step"]) for m in results.measurements
            if m.metric in trace.CLASSES and m.rank == 1} == {"0", "mean"}  # fmt: skip


def test_hosts_from_file_names_only_where_the_pid_is_the_process_s(tmp_path: Path) -> None:
    """tensorboard_trace_handler's default name, HOST_PID, gives the host where PID is the pid
    the trace recorded; a worker name of the job's own (worker0_step_12) is no host: the
    ranks' host is unknown, one node, and said."""
    recorded = sorted(SLOW.iterdir())
    for folder, name in [("default", "node-a_{pid}"), ("other-pid", "node-a_{wrong}"),
                         ("workers", "worker{rank}_step_12")]:  # fmt: skip
        (tmp_path / folder).mkdir()
        for rank, path in enumerate(recorded):
            data = _trace(path)
            del data["host_name"]
            pid = trace_file.read_trace(path).pid
            worker = name.format(pid=pid, wrong=99, rank=rank)
            (tmp_path / folder / f"{worker}.17965525421225057{rank}.pt.trace.json").write_text(
                json.dumps(data)
            )
    hosts: dict[str, tuple[list[str], int, list[str]]] = {}
    for folder in ("default", "other-pid", "workers"):
        code, _, err = _analyze(tmp_path / folder, "-o", tmp_path / f"run-{folder}")
        assert code == 0, err
        results = load_results(tmp_path / f"run-{folder}")
        hosts[folder] = ([h.hostname for h in results.hosts], results.run.num_nodes, _lines(err))
    assert hosts["default"] == (["node-a"], 1, [])
    pids = [trace_file.read_trace(p).pid for p in recorded]
    assert hosts["other-pid"] == (["unknown"], 1, [
        "ranks 0-1: host unknown (no host_name in the traces; the file names' worker name "
        f"(node-a_99, ...) is not tensorboard_trace_handler's HOST_PID: 99 is not the process's "
        f"pid {pids[0]}): counted as one node"
    ])  # fmt: skip
    assert hosts["workers"][:2] == (["unknown"], 1)
    assert (
        "(worker0_step_12, ...) is not tensorboard_trace_handler's HOST_PID"
        in (hosts["workers"][2][0])
    )


# An excerpt of a public trace of the PyTorch 1.8/1.9 era: pytorch/kineto,
# tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz (commit
# 041e7ce99f1562dd81232ee58b7c454ef16bfae2, BSD licence): its first profiled step's span, its
# first DataLoader span, ops, a copy, kernels (a cuDNN and an implicit-GEMM convolution among
# them), a memset and the trace span, as written (old categories, tids as strings, integer
# ts/dur); their args cut to device and stream.
KINETO_2021 = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34084028416,
                          "computeMajor": 7, "computeMinor": 0, "numSms": 80}],
    "traceEvents": [
        {"ph": "X", "cat": "Operator", "name": "aten::empty", "pid": 25738, "tid": "25738",
         "ts": 1623142623460180, "dur": 11},
        {"ph": "X", "cat": "Operator", "name": "aten::empty", "pid": 25738, "tid": "25738",
         "ts": 1623142623460217, "dur": 9},
        {"ph": "X", "cat": "Operator",
         "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 25738,
         "tid": "25738", "ts": 1623142623460245, "dur": 68694},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 25738, "tid": "25738",
         "ts": 1623142623460172, "dur": 176078},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
         "tid": "stream 7", "ts": 1623142623529248, "dur": 1940,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 25738, "tid": "25738",
         "ts": 1623142623529088, "dur": 2022},
        {"ph": "X", "cat": "Kernel",
         "name": "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", "pid": 0,
         "tid": "stream 7", "ts": 1623142623531625, "dur": 2, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "Kernel", "name": "volta_scudnn_128x64_relu_medium_nn_v1", "pid": 0,
         "tid": "stream 7", "ts": 1623142623531639, "dur": 605,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "Kernel",
         "name": "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, "
         "true, true>(int, int, int, float const*, int, float*, float const*, "
         "kernel_conv_params, unsigned long long, int, float, float, int, float const*, "
         "float const*, bool, int, int)", "pid": 0, "tid": "stream 7",
         "ts": 1623142623541433, "dur": 650, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7",
         "ts": 1623142623579729, "dur": 1, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "Trace", "ts": 1623142623460016, "dur": 1065723, "pid": "Traces",
         "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
    ],
}  # fmt: skip


def test_a_pytorch_1_8_era_trace_is_read_as_a_current_one(tmp_path: Path) -> None:
    """Kineto's old categories (Kernel, Memcpy, Memset, Operator, Runtime) are today's: the
    device timeline, its step, its classes and its input wait; ts/dur as strings alike."""
    path = tmp_path / "worker0.1623143089861.pt.trace.json"
    path.write_text(json.dumps(KINETO_2021))
    t = trace_file.read_trace(path, default_rank=0)
    assert t.device and not t.windowed and t.gpu_names == ["Tesla V100-DGXS-32GB"]
    assert t.steps == [(5, 1623142623460172.0, 1623142623460172.0 + 176078)]
    acts = t.activities(*t.steps[0][1:])
    assert [(a.name[:22], a.kind) for a in acts] == [
        ("Memcpy HtoD (Pageable ", "memory"), ("cask_cudnn::computeOff", "memory"),
        ("volta_scudnn_128x64_re", trace.device_kind("volta_scudnn_128x64_relu_medium_nn_v1",
                                                     "kernel")),
        ("void implicit_convolve", "compute"), ("Memset (Device)", "memory"),
    ]  # fmt: skip
    assert t.input_spans == [(1623142623460245.0, 1623142623460245.0 + 68694)]
    # no host_name, and the name's worker (worker0) is no HOST_PID: the host is unknown
    assert (t.pid, t.host, t.worker_name) == (25738, "unknown", None)
    as_text = json.loads(json.dumps(KINETO_2021))
    for e in as_text["traceEvents"]:
        e["ts"], e["dur"] = str(e["ts"]), str(e["dur"])
    strings = tmp_path / "strings" / path.name
    strings.parent.mkdir()
    strings.write_text(json.dumps(as_text))
    again = trace_file.read_trace(strings, default_rank=0)
    assert again.steps == t.steps and again.input_spans == t.input_spans
    assert again.activities(*t.steps[0][1:]) == acts
    code, _, err = _analyze(path, "-o", tmp_path / "run")
    assert code in (0, 1) and err == "", err
    results = load_results(tmp_path / "run")
    assert [g.name for h in results.hosts for g in h.gpus] == ["Tesla V100-DGXS-32GB"]
    assert {str(m.params["rank_step"]) for m in results.measurements
            if m.metric in trace.CLASSES} == {"5", "mean"}  # fmt: skip


def test_the_input_wait_is_kept_with_or_without_a_device_timeline() -> None:
    """The DataLoader's next() spans (the Trainer's three steps, host-only) are kept, one per
    step, inside it."""
    for path in sorted((DATA / "hf-trainer").iterdir()):
        t = trace_file.read_trace(path)
        assert len(t.input_spans) == len(t.steps) == 3
        for (start, end), (_, step_start, step_end) in zip(t.input_spans, t.steps, strict=True):
            assert step_start <= start < end <= step_end
    assert trace_file.read_trace(sorted((DATA / "h100").iterdir())[0]).input_spans == []


def test_a_large_job_s_header_past_the_first_64_kib(tmp_path: Path) -> None:
    """distributedInfo lists every process group with its ranks: a large job's runs past the
    first 64 KiB, and the trace is still found, its rank and world size read."""
    data = _trace(sorted(SLOW.iterdir())[1])
    groups = [{"pg_name": str(i), "pg_desc": "tp", "backend_config": "cuda:nccl",
               "pg_size": 4096, "ranks": list(range(4096))} for i in range(8)]  # fmt: skip
    data["distributedInfo"].update(world_size=4096, pg_config=groups)
    path = tmp_path / "big" / "trace.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    assert path.read_text().index('"traceEvents"') > 1 << 16
    assert trace_file.find_traces([path.parent]) == [path]
    t = trace_file.read_trace(path)
    assert (t.rank, t.world_size, t.host) == (1, 4096, "vm")


def test_a_one_process_job_s_cycles_that_name_no_rank(tmp_path: Path) -> None:
    """Files of one process without distributedInfo or a rank in their names (a job of one
    process, its schedule repeating): rank 0, its first cycle analysed, the other named.  Each
    trace comes back with its error, pickled as a pool's worker sends it."""
    traces = tmp_path / "traces"
    traces.mkdir()
    recorded = sorted((DATA / "lightning-cycles").iterdir())[:2]  # rank 0's two cycles
    for path in recorded:
        data = _trace(path)
        del data["distributedInfo"]
        (traces / path.name.removesuffix(".gz")).write_text(json.dumps(data))
    first, second = sorted(p.name for p in traces.iterdir())
    with pytest.raises(trace_file.NoRankError) as raised:
        trace_file.read_trace(traces / first)
    sent = pickle.loads(pickle.dumps(raised.value))
    assert str(sent) == str(raised.value) and sent.trace.pid == raised.value.trace.pid
    assert len(sent.trace.starts) == len(raised.value.trace.starts) > 0
    code, _, err = _analyze(traces, "-o", tmp_path / "run", "--jobs", "1")
    assert code == 0 and _lines(err) == [
        f"rank 0: 2 files (a profiler schedule that repeats writes one per cycle); {first} "
        f"analysed, not {second}"
    ]
    results = load_results(tmp_path / "run")
    assert {m.rank for m in results.measurements} == {0}
    assert results.run.config["imported"]["files"] == [str(traces / first)]

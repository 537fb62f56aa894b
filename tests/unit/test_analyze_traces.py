"""``clusterbench analyze``: real torch.profiler traces (tests/data/traces, recorded with
scripts/record_traces.py: two gloo ranks with a planted straggler, the same job without a
schedule, one H100 rank) streamed, attributed as the attribution benchmark attributes its own,
and written as a run folder; a truncated rank costs one line, the others are analysed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.analysis import trace_file
from clusterbench.analysis.trace_attribution import attribute
from clusterbench.benchmarks.attribution import trace
from clusterbench.cli import app
from clusterbench.history_db import open_history
from clusterbench.schema import Results, load_results

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
    assert code == 0, err
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
    # late for a host-side reason, rank 1 is idle itself: the straggler is told by the waits
    # inside collectives (rank 0's), not by the coordination both have; two CPU ranks of one
    # host: stated, not judged
    (straggler,) = [f for f in results.findings if f.id == "attribution.straggler"]
    assert straggler.evidence["rank"] == 1 and straggler.severity == "info"
    assert "waiting in collectives" in straggler.message
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
    # windows start apart: no lateness, no straggler from them
    assert not [m for m in results.measurements if m.metric == "collective_start_lateness_ms"]
    assert not [f for f in results.findings if f.id == "attribution.straggler"]
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
    (line,) = err.strip().splitlines()
    assert line == (
        f"clusterbench: warning: {cut}: cannot read it as a trace (truncated: the file ends "
        "inside its JSON)"
    )
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
        ("rcclKernel_AllReduce", True),
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
    named in a note (not a warning); a lone trace of one process (no process group, no rank
    in its name) is rank 0; a folder's other JSON is passed over."""
    code, _, err = _analyze(DATA / "lightning-cycles", "-o", tmp_path / "cycles")
    assert code == 0 and err == "", err
    results = load_results(tmp_path / "cycles")
    extra = [f for f in results.findings if f.id == "attribution.trace.extra"]
    assert [f.severity for f in extra] == ["info", "info"]
    assert all("2 files" in f.message for f in extra)
    lone = tmp_path / "lone"
    shutil.copytree(DATA / "lightning-1proc", lone)
    (lone / "config.json").write_text(json.dumps({"hidden_size": 64}))
    code, _, err = _analyze(lone, "-o", tmp_path / "one")
    assert code == 0 and err == "", err
    assert {m.rank for m in load_results(tmp_path / "one").measurements} == {0}
    code, _, err = _analyze(lone / "config.json", "-o", tmp_path / "none")
    assert code == 2 and "not a torch.profiler trace (no traceEvents)" in err


def test_collectives_that_differ_across_ranks_are_not_matched() -> None:
    """A sampled trace (or process groups whose collectives interleave differently): the k-th
    collectives of a step run different kernels on the two ranks: no wait, no lateness from
    them, and the count is told; alike ones are still matched."""
    from clusterbench.benchmarks.attribution import ranks

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

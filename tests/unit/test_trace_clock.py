"""The ranks' clocks aligned on the ends of their collectives, the straggler named on that
common clock, and the what-if of fixing it: on synthetic jobs whose truth is known (ranks with
their host clocks offset by up to +-50 ms, ranks that begin their steps apart, a planted
straggler or none), ten seeds each."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from clusterbench.analyses.trace import attribution as trace_attribution
from clusterbench.analyses.trace.file import RankTrace
from clusterbench.benchmarks.attribution.stragglers import find_straggler, straggler_findings
from clusterbench.schema import Results, RunInfo, ToolInfo
from clusterbench.traces import ranks, whatif
from clusterbench.traces.trace import Collective

NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"


class _Job:
    """A synchronous job simulated on one true clock, then written per rank on its own."""

    def __init__(self, *, seed: int, num_ranks: int = 8, num_steps: int = 5,
                 collectives: int = 4, straggler: int | None = None,
                 delay_ms: float = 0.0, skew_ms: float = 7.5,
                 jitter_ms: float = 0.0) -> None:  # fmt: skip
        rng = random.Random(seed)
        self.offsets_ms = [0.0] + [rng.uniform(-50, 50) for _ in range(num_ranks - 1)]
        self.traces = [self._empty(r) for r in range(num_ranks)]
        # the ranks leave the previous step apart: up to skew_ms between them
        now = [rng.uniform(0, skew_ms) for _ in range(num_ranks)]
        self.step_ms: list[float] = []
        for n in range(num_steps):
            begin = list(now)
            for k in range(collectives):
                entries = []
                for r in range(num_ranks):
                    work = rng.uniform(1.0, 3.0 + jitter_ms)
                    if r == straggler and k == 1:
                        work += delay_ms  # e.g. its input, or a slower kernel
                    self._kernel(r, now[r], now[r] + work, GEMM)
                    entries.append(now[r] + work)
                done = max(entries) + rng.uniform(0.4, 0.6)
                for r in range(num_ranks):
                    self._kernel(r, entries[r], done + rng.uniform(0, 0.005), NCCL, True)
                    now[r] = done
            for r in range(num_ranks):
                now[r] += rng.uniform(0.2, 0.2 + skew_ms)  # the optimizer, the host's loop
                self._step(r, n, begin[r], now[r])
            self.step_ms.append(max(now) - min(begin))

    def _empty(self, rank: int) -> RankTrace:
        return RankTrace(path=Path(f"rank-{rank}.json"), rank=rank, host=f"node{rank // 4}",
                         device=True, name_table=[GEMM, NCCL])  # fmt: skip

    def _kernel(self, rank: int, start: float, end: float, name: str, coll: bool = False) -> None:
        t, shift = self.traces[rank], self.offsets_ms[rank]
        t.starts.append((start + shift) * 1e3)
        t.ends.append((end + shift) * 1e3)
        t.kinds.append(2 if coll else 0)
        t.collective.append(1 if coll else 0)
        t.names.append(1 if coll else 0)

    def _step(self, rank: int, n: int, start: float, end: float) -> None:
        shift = self.offsets_ms[rank]
        self.traces[rank].steps.append((n, (start + shift) * 1e3, (end + shift) * 1e3))


def _results(result: trace_attribution.TraceAttribution) -> Results:
    return Results(
        tool=ToolInfo(version="0"),
        run=RunInfo(
            id="t",
            started="2026-12-06T00:00:00+00:00",
            suite="analyze",
            world_size=len(result.ranks),
            num_nodes=2,
            backend="nccl",
            command="clusterbench analyze",
        ),
        measurements=trace_attribution.measurements(result),
    )


@pytest.mark.parametrize("seed", range(10))
def test_a_planted_straggler_is_named_whatever_the_host_clocks(seed: int) -> None:
    straggler = seed % 8
    job = _Job(seed=seed, straggler=straggler, delay_ms=4.0)
    result = trace_attribution.attribute(job.traces)
    assert result.clock is not None
    # the clocks come back to within the ends' jitter (5 us) of the truth
    for got, true in zip(result.clock.offsets_ms, job.offsets_ms, strict=True):
        assert got == pytest.approx(true, abs=0.01)
    assert result.clock.residual_ms < 0.01
    found = find_straggler(_results(result), min_spread_pct=5.0)
    assert found is not None and found.rank == straggler
    # late at the second collective of each of the 5 steps, and at others by chance
    assert found.num_collectives == 20 and found.last_arrivals is not None
    assert found.last_arrivals >= 5


@pytest.mark.parametrize("seed", range(10))
def test_no_straggler_is_named_where_none_was_planted(seed: int) -> None:
    job = _Job(seed=seed)  # ranks begin their steps up to 7.5 ms apart, all on time
    results = _results(trace_attribution.attribute(job.traces))
    assert straggler_findings(results, min_spread_pct=5.0) == []


@pytest.mark.parametrize("num_ranks", [2, 8])
@pytest.mark.parametrize("seed", range(10))
def test_ranks_that_only_jitter_name_no_straggler(seed: int, num_ranks: int) -> None:
    """Every rank's work between collectives jitters by up to 10 ms (each of 4 a step): each
    rank is now and then the latest, so the what-if gives every one a saving, none a straggler."""
    job = _Job(seed=seed, num_ranks=num_ranks, jitter_ms=10.0)
    results = _results(trace_attribution.attribute(job.traces))
    assert straggler_findings(results, min_spread_pct=5.0) == []


def test_lateness_from_each_rank_s_own_step_start_would_blame_a_waiting_rank() -> None:
    """Why the common clock: the rank that begins its step first waits longest, and from its
    own step start it looks the latest."""
    r0 = {1: [Collective(NCCL, offset_ms=9.0, duration_ms=3.0, at_ms=100.0)]}  # began early
    r1 = {1: [Collective(NCCL, offset_ms=2.0, duration_ms=0.5, at_ms=5002.5)]}  # +4900 clock
    aligned, fit = ranks.on_common_clock([r0, r1])
    assert fit is not None and fit.offsets_ms == pytest.approx([0.0, 4900.0])
    _, late = ranks.start_lateness([r0, r1])
    assert late[0] == [7.0]  # from its own step start rank 0 looks 7 ms late
    _, late = ranks.start_lateness(aligned)
    assert late == [[0.0], [2.5]]  # it entered 2.5 ms before rank 1


@pytest.mark.parametrize("seed", range(5))
def test_the_what_if_equals_the_saving_of_the_job_without_the_delay(seed: int) -> None:
    """The chain replayed without the straggler's lateness against the same job simulated
    without it (same seed, same random draws): the saving predicted is the saving measured."""
    delayed = _Job(seed=seed, straggler=3, delay_ms=6.0)
    on_time = _Job(seed=seed, straggler=3, delay_ms=0.0)
    result = trace_attribution.attribute(delayed.traces)
    predicted = result.ranks[3].straggler_saving_ms
    measured = (sum(delayed.step_ms) - sum(on_time.step_ms)) / len(delayed.step_ms)
    assert predicted is not None and measured > 3.0
    assert predicted == pytest.approx(measured, rel=0.15)
    # and the ranks that waited would save nothing by being earlier
    assert max(r.straggler_saving_ms or 0.0 for r in result.ranks if r.trace.rank != 3) < 1.0


def test_clocks_whose_collectives_do_not_end_together_are_not_aligned() -> None:
    """The k-th collectives matched wrongly (ends 10 ms apart once aligned): no alignment."""
    r0 = {1: [Collective(NCCL, 0.0, 1.0, at_ms=0.0), Collective(NCCL, 10.0, 1.0, at_ms=10.0)]}
    r1 = {1: [Collective(NCCL, 0.0, 1.0, at_ms=0.0), Collective(NCCL, 30.0, 1.0, at_ms=30.0)]}
    aligned, fit = ranks.on_common_clock([r0, r1])
    assert fit is not None and fit.residual_ms > 0.5
    assert aligned == [{1: list(r0[1])}, {1: list(r1[1])}]  # unchanged


def test_the_idle_split_into_input_wait_and_launch_gaps() -> None:
    split = whatif.idle_split([(10.0, 20.0), (40.0, 100.0)], step=(0.0, 100.0),
                              input_spans=[(0.0, 15.0)])  # fmt: skip
    assert split.input_ms == pytest.approx(0.010)  # 0-10 us idle under the DataLoader
    assert split.gaps_ms == pytest.approx(0.020)  # 20-40 us


def test_median_of_the_others() -> None:
    import numpy as np

    values = np.array([[1.0, 5.0], [2.0, 6.0], [9.0, 7.0], [4.0, 100.0]])
    got = whatif._median_of_others(values)
    for r in range(4):
        for j in range(2):
            others = [values[i, j] for i in range(4) if i != r]
            assert got[r, j] == pytest.approx(float(np.median(others)))
    # of two ranks, the other one's
    pair = np.array([[1.0], [3.0]])
    assert whatif._median_of_others(pair).tolist() == [[3.0], [1.0]]


@pytest.mark.parametrize("other_steps", [True, False])
def test_a_rank_without_the_shared_collectives_is_left_out_and_said(other_steps: bool) -> None:
    """One rank's steps are other steps, or its trace lost its collectives: the other ranks are
    still timed among themselves (the planted straggler named) and a note names that rank."""
    job = _Job(seed=3, num_ranks=4, straggler=2, delay_ms=4.0)
    t = job.traces[3]
    if other_steps:
        t.steps = [(n + 100, start, end) for n, start, end in t.steps]
    else:
        keep = [i for i in range(len(t.starts)) if not t.collective[i]]
        for name in ("starts", "ends", "kinds", "collective", "names"):
            old = getattr(t, name)
            setattr(t, name, type(old)(old.typecode, [old[i] for i in keep]))
    result = trace_attribution.attribute(job.traces)
    found = find_straggler(_results(result), min_spread_pct=5.0)
    assert found is not None and found.rank == 2
    (note,) = [n for n in result.notes if n[0] == "attribution.trace.not_timed"]
    assert note[1].startswith("rank(s) 3:")

"""Each rank's second pass of the attribution in a pool of processes gives what it gives in
one process: the same measurements, on real recorded traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyses.trace import attribution as trace_attribution
from clusterbench.analyses.trace.file import find_traces, read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


@pytest.mark.parametrize("folder", ["cpu-gloo-slow-rank", "lightning", "hf-trainer"])
def test_the_pool_splits_every_rank_as_one_process_does(folder: str) -> None:
    traces = [read_trace(p) for p in find_traces([DATA / folder])]
    alone = trace_attribution.attribute(traces, jobs=1)
    pooled = trace_attribution.attribute(traces, jobs=2)
    assert [r.trace for r in pooled.ranks] == [r.trace for r in alone.ranks]
    assert trace_attribution.measurements(pooled) == trace_attribution.measurements(alone)
    assert pooled.notes == alone.notes


def test_a_bad_jobs_is_a_value_error() -> None:
    traces = [read_trace(p) for p in find_traces([DATA / "cpu-gloo-slow-rank"])]
    with pytest.raises(ValueError, match="jobs must be 1 or more"):
        trace_attribution.attribute(traces, jobs=0)

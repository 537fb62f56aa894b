"""The collectives size sweep stopping at the busbw plateau, on real gloo ranks."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers import cpu_run

pytestmark = [pytest.mark.dist, pytest.mark.timing]

KIB = 2**10


def test_every_rank_stops_at_the_same_size(tmp_path: Path) -> None:
    # The sweep doubles the size from 1 KiB to 16 MiB (as the standard CPU suite does).  A
    # tolerance of 95% with a patience of 1 stops at the first size from 256 KiB on that does
    # not nearly double the busbw: once the time grows with the size at all, well before
    # 16 MiB.  The ranks decide from the times gathered over the group: were one to go on
    # alone, the next collective would pair different ops and sizes and the run would not
    # complete.
    sets = [
        "collectives.sweep_stop=true", "collectives.plateau_tolerance=0.95",
        "collectives.plateau_patience=1", f"collectives.plateau_min_bytes={256 * KIB}",
        "collectives.ops=all_reduce,all_gather", "collectives.modes=back_to_back",
        "collectives.iters=5", "collectives.warmup=1", "collectives.factor=2",
        f"collectives.min_bytes={KIB}", f"collectives.max_bytes={16 * 2**20}",
    ]  # fmt: skip
    results = cpu_run(tmp_path / "run", "collectives", sets, nproc=3)
    (finding,) = [f for f in results.findings if f.id == "collectives.sweep_stopped"]
    assert finding.scope.endswith("/cpu:0")  # group rank 0 of the world records
    stops = {s["sweep"]: s for s in finding.evidence["stops"]}
    assert set(stops) == {"all_reduce on world", "all_gather on world"}
    for op in ("all_reduce", "all_gather"):
        sizes = sorted(
            int(str(m.params["size_bytes"]))
            for m in results.measurements
            if m.metric == "busbw" and m.params["op"] == op
        )
        # the latency-bound sizes all ran: 1 KiB .. 128 KiB (all_gather's rounded to 3 ranks)
        assert sum(size < 256 * KIB for size in sizes) >= 8, sizes
        assert sizes[-1] < 16 * 2**20 and stops[f"{op} on world"]["skipped"]
        busbw = {int(str(m.params["size_bytes"])): m.value for m in results.measurements
                 if m.metric == "busbw" and m.params["op"] == op}  # fmt: skip
        # the figures the rule saw are the ones recorded: the best before the stop is theirs
        assert stops[f"{op} on world"]["best"] == pytest.approx(max(busbw.values()))
    wrong = [m for m in results.measurements if m.metric == "num_wrong"]
    assert len(wrong) == 2 and all(m.value == 0 for m in wrong)

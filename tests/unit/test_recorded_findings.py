"""Benchmarks may yield findings of their own; they reach results.json next to the analysis."""

from __future__ import annotations

from pathlib import Path

from clusterbench.pipeline.assemble import RunMeta, assemble_results
from clusterbench.runtime.records import End, FindingRecord, Hello, RankLog, Start, read_records
from clusterbench.schema import Finding


def test_recorded_findings_are_assembled(tmp_path: Path) -> None:
    log = RankLog(tmp_path, 0)
    log.write(Hello(host="h", local_rank=0, device="cpu:0"))
    log.write(Start(benchmark="doctor"))
    finding = Finding(id="doctor.x", severity="warn", scope="host:h", message="m", fix="f")
    log.write(FindingRecord(data=finding))
    log.write(End(benchmark="doctor"))
    meta = RunMeta(id="r", started="t", finished="t", suite="quick", world_size=1,
                   backend="gloo", command="c", config={}, benchmarks=["doctor"], version="0",
                   fallback_host="h")  # fmt: skip
    results = assemble_results(records=read_records(tmp_path), meta=meta, failures=[])
    assert results.findings == [finding]

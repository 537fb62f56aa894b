from __future__ import annotations

import json
from pathlib import Path

import clusterbench
from clusterbench.schema import (
    Measurement,
    Reference,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
    load_results,
    results_json_schema,
)

ROOT = Path(__file__).resolve().parents[2]


def test_public_names_are_pinned() -> None:
    assert sorted(clusterbench.__all__) == [
        "ConfigError",
        "Results",
        "RunOptions",
        "RunOutcome",
        "__version__",
        "load_results",
        "run",
    ]
    for name in clusterbench.__all__:
        assert hasattr(clusterbench, name)


def test_schema_doc_is_current() -> None:
    """docs/results.schema.json must be regenerated (clusterbench schema) when models change."""
    on_disk = json.loads((ROOT / "docs" / "results.schema.json").read_text())
    assert on_disk == results_json_schema()


def test_results_round_trip(tmp_path: Path) -> None:
    results = Results(
        tool=ToolInfo(version="1"),
        run=RunInfo(id="r", started="t", suite="quick", world_size=2, num_nodes=1,
                    backend="gloo", command="clusterbench run"),
        measurements=[
            Measurement(benchmark="memory", metric="bandwidth", value=4200.0, unit="GB/s",
                        params={"op": "copy", "size_bytes": 2**31}, rank=1, host="h",
                        device="cuda:1", stats=Stats.from_samples([4100.0, 4200.0, 4300.0]),
                        reference=Reference(value=4800.0, kind="spec_peak", source="datasheet"))
        ],
    )  # fmt: skip
    path = tmp_path / "results.json"
    path.write_text(results.model_dump_json())
    back = load_results(tmp_path)
    assert back == results
    assert back.measurements[0].stats is not None and back.measurements[0].stats.median == 4200.0
    assert json.loads(path.read_text())["schema_version"] == 1

"""``clusterbench history``: list, trend, import and their errors, on real database files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.history_db import HISTORY_ENV, open_history
from tests.unit.test_history import make_results

runner = CliRunner()


def _history(db: Path, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["history", *args, "--history", str(db)])


def _fill(db: Path, tmp_path: Path, values: list[float]) -> None:
    with open_history(db) as history:
        for day, value in enumerate(values, start=1):
            results = make_results(
                f"run{day:02d}", f"2026-12-{day:02d}T10:00:00+00:00", tflops=value
            )
            history.record(results, tmp_path / f"run{day:02d}")


def test_list_newest_first_limit_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "h.sqlite"
    _fill(db, tmp_path, [100.0, 101.0, 99.0])
    monkeypatch.chdir(tmp_path)  # folders inside the working folder are shown relative to it
    result = _history(db)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if "run0" in line]
    assert rows == [
        ["2026-12-03", "10:00", "run03", "quick", "completed", "a", "NVIDIA", "H200", "2", "0",
         "run03"],
        ["2026-12-02", "10:00", "run02", "quick", "completed", "a", "NVIDIA", "H200", "2", "0",
         "run02"],
        ["2026-12-01", "10:00", "run01", "quick", "completed", "a", "NVIDIA", "H200", "2", "0",
         "run01"],
    ]  # fmt: skip
    result = _history(db, "--limit", "1", "--json")
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == ["run03"] and rows[0]["num_measurements"] == 2
    assert rows[0]["run_dir"] == str(tmp_path / "run03")
    assert "1 of 3 runs shown" in _history(db, "--limit", "1").stdout


def test_trend_shows_a_change_point_per_device(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _fill(db, tmp_path, [100.0, 100.5, 99.5, 100.2, 99.8, 80.0, 80.4, 79.6])
    result = _history(db, "gemm.tflops_best[dtype=bf16]@a")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count("gemm.tflops_best [dtype=bf16 m=8192]  a cuda:") == 2
    assert "▼ -20.0% worse: 100.0 -> 80.0" in out and "▼ -19.8% worse: 101.0 -> 81.0" in out
    change_rows = [line for line in out.splitlines() if "worse" in line]
    assert all("run06" in line for line in change_rows)
    assert "2 series; 2 change point(s)" in out
    data = json.loads(_history(db, "gemm.tflops_best@a/cuda:0", "--json").stdout)
    assert len(data) == 1 and data[0]["direction"] == "higher"
    assert [(c["index"], c["run_id"]) for c in data[0]["change_points"]] == [(5, "run06")]
    assert [p["value"] for p in data[0]["points"]][:2] == [100.0, 100.5]


def test_thresholds_of_the_trend_can_be_set(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _fill(db, tmp_path, [100.0, 100.5, 99.5, 100.2, 99.8, 80.0, 80.4, 79.6])
    result = _history(db, "gemm.tflops_best@a/cuda:0", "--set", "thresholds.regression_min_rel=0.3")
    assert result.exit_code == 0, result.output
    assert "no change point" in result.stdout and "beyond both 30%" in result.stdout
    result = _history(db, "gemm.tflops_best", "--set", "gemm.repeats=3")
    assert result.exit_code == 2 and "only thresholds.KEY=VALUE" in result.stderr


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ("gemm.tflops", "no measurements of 'gemm.tflops' in"),
        ("gemm.tflop_best", "close matches: gemm.tflops_best"),
        ("gemm", "bad selector 'gemm': expected BENCHMARK.METRIC"),
        ("gemm.tflops_best[dtype=fp8]", "dtype is one of: bf16"),
        ("gemm.tflops_best@zz", "no gemm.tflops_best on host 'zz' (hosts: a)"),
    ],
)
def test_an_unknown_selector_is_one_line_exit_2(tmp_path: Path, selector: str, text: str) -> None:
    db = tmp_path / "h.sqlite"
    _fill(db, tmp_path, [100.0])
    result = _history(db, selector)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterbench: error:") and text in lines[0]
    assert result.stdout == ""


def test_empty_history_and_garbage_history(tmp_path: Path) -> None:
    db = tmp_path / "none.sqlite"
    result = _history(db)
    assert result.exit_code == 0 and "No runs recorded" in result.stdout
    result = _history(db, "gemm.tflops")
    assert result.exit_code == 2 and "no runs recorded in" in result.stderr
    assert not db.exists()
    db.write_text("garbage")
    result = _history(db)
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a usable SQLite database" in lines[0]


def test_the_environment_names_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "env.sqlite"
    _fill(db, tmp_path, [100.0])
    monkeypatch.setenv(HISTORY_ENV, str(db))
    result = runner.invoke(app, ["history", "--json"])
    assert [r["id"] for r in json.loads(result.stdout)] == ["run01"]


def test_import_rebuilds_and_lists_bad_folders(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for day in (1, 2, 3):
        folder = runs / f"r{day}"
        folder.mkdir(parents=True)
        results = make_results(f"r{day}", f"2026-12-0{day}T10:00:00+00:00")
        (folder / "results.json").write_text(results.model_dump_json(indent=2))
    (runs / "broken").mkdir()
    (runs / "broken" / "results.json").write_text('{"schema_version": 1}')
    (runs / "notjson").mkdir()
    (runs / "notjson" / "results.json").write_text("garbage")
    db = tmp_path / "rebuilt.sqlite"
    result = runner.invoke(
        app, ["history", "import", str(runs), str(tmp_path / "nosuch"), "--history", str(db)]
    )
    assert result.exit_code == 1, result.output
    skipped = result.stderr.strip().splitlines()
    assert len(skipped) == 3 and all(s.startswith("clusterbench: skipped: ") for s in skipped)
    # one line each, in words, not the schema library's report
    broken = f"{runs / 'broken'}: not a clusterbench results.json (written by another program"
    assert any(broken in s for s in skipped), skipped
    notjson = f"{runs / 'notjson' / 'results.json'}: not a clusterbench results.json (malformed"
    assert any(notjson in s for s in skipped), skipped
    assert not any("validation error" in s or "input_value" in s for s in skipped)
    assert any("nosuch: no such file or folder" in s for s in skipped)
    assert "imported 3 run(s)" in result.stdout and "3 skipped" in result.stdout
    with open_history(db) as history:
        assert [r.id for r in history.runs()] == ["r3", "r2", "r1"]
        assert history.runs()[0].run_dir == str(runs / "r3")
    # importing again replaces, it does not duplicate
    result = runner.invoke(app, ["history", "import", str(runs / "r1"), "--history", str(db)])
    assert result.exit_code == 0 and "imported 1 run(s)" in result.stdout
    with open_history(db) as history:
        assert history.num_runs() == 3


def test_help_explains_the_selector_and_the_rule() -> None:
    text = runner.invoke(app, ["history", "--help"]).stdout
    for part in ("BENCHMARK.METRIC[KEY=VALUE,...]@HOST/DEVICE", "history import DIR",
                 "CLUSTERBENCH_HISTORY", "regression_noise_sigmas", "--no-history"):  # fmt: skip
        assert part in text
    text = runner.invoke(app, ["history", "show", "--help"]).stdout
    assert "--limit" in text and "--json" in text and "--history" in text

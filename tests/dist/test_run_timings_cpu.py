"""Two short CPU runs into one history: the first run's expected time comes from the shipped
table (and says '?' for a benchmark whose settings were changed), the second's from the first;
both record how long each benchmark took, in results.json, the summary and summary.md."""

from __future__ import annotations

import re
from pathlib import Path

from clusterbench import load_results
from clusterbench.units import format_seconds
from tests.helpers import cli

SMALL_GEMM = ["--set", "gemm.shapes=64x64x64", "--set", "gemm.dtypes=fp32"]


def _run(out: Path, *more: str) -> str:
    proc = cli(
        "run",
        *more,
        "--device",
        "cpu",
        "--nproc",
        "2",
        "--only",
        "gemm,memory",
        *SMALL_GEMM,
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_expected_time_then_time_taken(tmp_path: Path) -> None:
    first = _run(tmp_path / "a")
    head, gemm_line, memory_line = first.splitlines()[:3]
    # the plan: gemm runs with changed settings: the table's figure scaled by its duration model;
    # memory at its preset: the CPU table's own
    assert re.fullmatch(r"plan: expected ~[\d.]+ s for 2 benchmarks", head), head
    assert re.fullmatch(
        r"  gemm +~[\d.]+ s  table: 2 CPU ranks, scaled to these settings", gemm_line
    ), gemm_line
    assert re.fullmatch(r"  memory +~[\d.]+ s  table: 2 CPU ranks", memory_line), memory_line
    results = load_results(tmp_path / "a")
    seconds = results.run.benchmark_seconds
    assert list(seconds) == ["gemm", "memory"] and all(s > 0 for s in seconds.values())
    assert first.index("clusterbench run") < first.index("time: gemm ") < first.index("results:")
    summary = (tmp_path / "a" / "summary.md").read_text()
    assert "## Time" in summary and "| memory |" in summary
    # every phase that no benchmark accounts for, timed, in the order they happen
    phases = results.run.phase_seconds
    assert list(phases) == ["start", "imports", "plan", "worker imports", "worker start",
                            "device init", "probe", "telemetry start", "finish",
                            "page"], phases  # fmt: skip
    assert all(s >= 0 for s in phases.values()) and phases["imports"] > 0
    assert "\nphases: start " in summary and "phases:" not in first  # the console: --verbose

    verbose = _run(tmp_path / "b", "--verbose")
    assert re.search(r"^phases: start [\d.]+ m?s, imports ", verbose, re.M), verbose
    second = verbose.splitlines()[:3]
    gemm = seconds["gemm"]
    assert re.fullmatch(r"plan: expected ~[\d.]+ s for 2 benchmarks", second[0]), second
    # the one earlier run with these settings: its time itself, not scaled
    assert second[1].split() == [
        "gemm",
        *f"~{format_seconds(gemm)}".split(),
        "history,",
        "1",
        "run",
    ]
    assert second[2].startswith("  memory") and second[2].endswith("history, 1 run")

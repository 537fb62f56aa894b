"""Files of comparisons: results and baseline files read back, baselines and comparisons
written, and the built-in baseline (package data, ``clusterbench/data/builtin_baseline.json``).

Every reading error is a :class:`ValueError` whose text is one line naming the file, for the
CLI to print as it is (exit code 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clusterbench.analyses.baseline import Baseline, builtin_baseline, compare_baseline
from clusterbench.analyses.compare.comparison import Comparison, Match, compare
from clusterbench.history_db import HistoryError, open_history
from clusterbench.runtime.atomic import write_text_atomic
from clusterbench.schema import Results, invalid_results_reason
from clusterbench.thresholds import Thresholds, run_thresholds

__all__ = [
    "BUILTIN",
    "COMPARISON_FILE",
    "builtin_baseline",
    "compare_with",
    "load_baseline",
    "load_compared",
    "load_recorded",
    "load_run",
    "previous_runs",
    "run_thresholds",
    "write_baseline",
    "write_comparison",
]

BUILTIN = "builtin"
"""The name that selects the built-in baseline (``--baseline builtin``)."""
COMPARISON_FILE = "comparison.json"
"""What ``run --baseline`` writes into the run folder."""


def _read_json(path: Path, *, what: str) -> Any:
    if path.is_dir():
        path = path / "results.json"
        if not path.exists():
            raise ValueError(f"{path.parent}: no results.json in this folder")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file or folder") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a {what} (not UTF-8 text)") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a {what} (malformed JSON: {exc.msg})") from None


def _invalid(path: Path, what: str, exc: ValidationError, data: Any = None) -> ValueError:
    if what.startswith("clusterbench results.json"):
        return ValueError(f"{path}: not a {what} ({invalid_results_reason(data, exc)})")
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "top level"
    return ValueError(f"{path}: not a {what} ({where}: {err['msg'].lower()})")


def load_run(path: str | Path) -> Results:
    """A run's results: a run folder or its results.json."""
    p = Path(path)
    data = _read_json(p, what="clusterbench results.json")
    try:
        return Results.model_validate(data)
    except ValidationError as exc:
        raise _invalid(p, "clusterbench results.json", exc, data) from None


def load_baseline(source: str | Path) -> Baseline:
    """``builtin``, or a baseline file written by ``clusterbench baseline build``."""
    if str(source) == BUILTIN:
        return builtin_baseline()
    p = Path(source)
    if p.is_dir():
        raise ValueError(f"{p}: a folder, not a baseline file (clusterbench baseline build)")
    data = _read_json(p, what="clusterbench baseline file")
    try:
        return Baseline.model_validate(data)
    except ValidationError as exc:
        raise _invalid(p, "clusterbench baseline file", exc) from None


def load_recorded(source: str | Path, *, history: Path | None) -> Results:
    """A run folder or results.json; else a run id the history prints (``clusterbench
    history``): the newest run of that id it holds."""
    p = Path(source)
    if p.exists():
        return load_run(p)
    try:
        with open_history(history) as store:
            runs, where = store.load(str(source)), store.path
    except HistoryError as exc:
        raise ValueError(f"{source}: no such file or folder ({exc})") from None
    if not runs:
        raise ValueError(f"{source}: no such file or folder, nor a run of that id in {where}")
    return runs[-1]


def load_compared(source: str | Path, *, history: Path | None = None) -> Results | Baseline:
    """What ``compare`` takes as its base: a run (folder, results.json, or a run id of the
    history), a baseline file, or ``builtin``."""
    if str(source) == BUILTIN:
        return builtin_baseline()
    p = Path(source)
    if not p.exists():
        return load_recorded(source, history=history)
    data = _read_json(p, what="results.json or baseline file")
    if isinstance(data, dict) and data.get("format") == "clusterbench-baseline":
        return load_baseline(p)
    try:
        return Results.model_validate(data)
    except ValidationError as exc:
        raise _invalid(p, "clusterbench results.json or baseline file", exc, data) from None


def write_baseline(baseline: Baseline, path: Path) -> None:
    write_text_atomic(path, baseline.model_dump_json(indent=2) + "\n")


def write_comparison(run_dir: Path, comparison: Comparison) -> Path:
    path = run_dir / COMPARISON_FILE
    write_text_atomic(path, comparison.model_dump_json(indent=2) + "\n")
    return path


def previous_runs(
    results: Results, *, path: Path | None, enabled: bool = True
) -> tuple[list[Results], str | None]:
    """The earlier comparable runs the history holds (for the run-to-run noise), and a warning
    line when the history could not be read (then no runs: the comparison goes on without)."""
    if not enabled:
        return [], None
    try:
        with open_history(path) as store:
            return store.comparable_runs(results), None
    except HistoryError as exc:
        return [], f"history not used: {exc}"


def compare_with(
    base: Results | Baseline,
    new: Results,
    thresholds: Thresholds,
    *,
    match: Match = "host",
    previous: list[Results] | tuple[Results, ...] = (),
) -> Comparison:
    """``new`` against a run or a baseline."""
    if isinstance(base, Baseline):
        return compare_baseline(base, new, thresholds, previous=previous)
    return compare(base, new, thresholds, match=match, previous=previous)

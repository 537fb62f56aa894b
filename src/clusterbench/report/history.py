"""``clusterbench history``: the recorded runs as a table, a metric's trend per device, JSON."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from clusterbench.analyses.trend import ChangePoint, Trend, param_text
from clusterbench.history_db import RunRow
from clusterbench.metrics import Direction, better_direction, declared
from clusterbench.views.cells import format_value

__all__ = ["import_progress", "render_runs", "render_trends", "runs_json", "trends_json"]

_SPARK = "▁▂▃▄▅▆▇█"
_MAX_HOSTS_SHOWN = 3
_PROGRESS_FROM = 10
"""An import of this many run folders or more shows a progress bar (on stderr)."""


@contextlib.contextmanager
def import_progress(total: int) -> Iterator[Callable[[], None]]:
    """``advance()`` after each of ``total`` run folders; a bar on stderr when there are many."""
    if total < _PROGRESS_FROM:
        yield lambda: None
        return
    columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("import", total=total)
        yield lambda: progress.advance(task)


def render_runs(
    rows: Sequence[RunRow], console: Console, *, where: str, cwd: Path | None = None
) -> None:
    """Newest first: when, id, suite, status, hosts, GPU models, measurements, fail findings,
    folder (relative to ``cwd`` when inside it).  A folder is what one copies: never broken
    mid-name; when the folders do not fit the table, they follow it, one line per run."""
    if not rows:
        console.print(f"No runs recorded in {where} yet.", soft_wrap=True)
        return
    folders = [_folder(row.run_dir, cwd) for row in rows]
    table = _runs_table(rows, where=where, folders=folders)
    unbounded = console.options.update_width(sys.maxsize)  # its width if nothing were squeezed
    if console.measure(table, options=unbounded).maximum <= console.width:
        console.print(table)
        return
    console.print(_runs_table(rows, where=where, folders=None))
    console.print("folders:")
    width = max(len(row.id) for row in rows)
    for row, folder in zip(rows, folders, strict=True):
        console.print(Text(f"  {row.id:<{width}}  {folder}"), soft_wrap=True)


def _runs_table(rows: Sequence[RunRow], *, where: str, folders: Sequence[str] | None) -> Table:
    table = Table(
        title=f"runs in {where}", title_justify="left", header_style="bold",
        box=None, padding=(0, 1), pad_edge=False,
    )  # fmt: skip
    table.add_column("when (UTC)", no_wrap=True)
    table.add_column("run", no_wrap=True)
    for name in ("suite", "status", "hosts", "GPUs"):
        table.add_column(name)
    table.add_column("meas.", justify="right")
    table.add_column("fail", justify="right")
    if folders is not None:
        table.add_column("folder", no_wrap=True)
    for i, row in enumerate(rows):
        cells: list[str | Text] = [
            _when(row.started),
            row.id,
            row.suite,
            Text(row.status, style="" if row.status == "completed" else "bold red"),
            _hosts(row.hosts),
            ", ".join(row.gpu_models) or ("CPU" if row.backend == "gloo" else "-"),
            str(row.num_measurements),
            Text(str(row.num_fail), style="bold red" if row.num_fail else ""),
        ]
        table.add_row(*cells, *([folders[i]] if folders is not None else []))
    return table


def _folder(run_dir: str, cwd: Path | None) -> str:
    if cwd is not None:
        with contextlib.suppress(ValueError):
            return str(Path(run_dir).relative_to(cwd))
    return run_dir


def render_trends(trends: Sequence[Trend], console: Console, *, noise_sigmas: float) -> None:
    """Each series oldest to newest, its change points marked, then one line of totals."""
    for trend in trends:
        console.print(_title(trend), soft_wrap=True)
        console.print(Text("  " + sparkline([p.value for p in trend.points]), style="cyan"))
        table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 2))
        for name in ("when (UTC)", "run", trend.unit, "cv", "change"):
            table.add_column(name, justify="right" if name in (trend.unit, "cv") else "left")
        changes = {c.index: c for c in trend.change_points}
        for i, point in enumerate(trend.points):
            change = changes.get(i)
            table.add_row(
                _when(point.started),
                point.run_id,
                format_value(point.value, trend.unit),
                "" if point.cv is None else f"{point.cv:.1%}",
                "" if change is None else _change_text(change, trend),
            )
        console.print(table)
        console.print()
    num_changes = sum(len(t.change_points) for t in trends)
    limit = _limit_text(trends[0]) if trends else ""
    verdict = (
        f"{num_changes} change point(s)"
        if num_changes
        else "no change point: nothing moved beyond the noise"
    )
    console.print(
        f"{len(trends)} series; {verdict} (a move counts beyond both {limit} and "
        f"{noise_sigmas:g} x the run-to-run noise, with 3 runs before it and 2 from it on)",
        soft_wrap=True,
    )


def sparkline(values: Sequence[float]) -> str:
    """One block character a value, from the lowest (▁) to the highest (█)."""
    if not values:
        return ""
    low, high = min(values), max(values)
    span = high - low
    if span <= 0:
        return _SPARK[3] * len(values)
    return "".join(_SPARK[round((v - low) / span * (len(_SPARK) - 1))] for v in values)


def runs_json(rows: Sequence[RunRow]) -> str:
    return json.dumps([dataclasses.asdict(r) for r in rows], indent=2)


def trends_json(trends: Sequence[Trend]) -> str:
    out: list[dict[str, Any]] = []
    for t in trends:
        item = dataclasses.asdict(t)
        item["direction"] = _direction(t)
        item["change_points"] = [
            {
                **dataclasses.asdict(c),
                "rel_change": c.rel_change,
                "run_id": t.points[c.index].run_id,
            }
            for c in t.change_points
        ]
        out.append(item)
    return json.dumps(out, indent=2)


def _title(trend: Trend) -> Text:
    params = " ".join(f"{k}={param_text(v)}" for k, v in trend.params.items())
    direction = _direction(trend)
    better = f", {direction} is better" if direction else ""
    text = Text()
    text.append(f"{trend.benchmark}.{trend.metric}", style="bold")
    if params:
        text.append(f" [{params}]")
    text.append(
        f"  {trend.host} {trend.device}  ({trend.unit}{better}; {len(trend.points)} run(s))"
    )
    return text


def _change_text(change: ChangePoint, trend: Trend) -> Text:
    direction = _direction(trend)
    up = change.after > change.before
    if direction is None:
        word, style = "moved", "bold yellow"
    elif up == (direction == "higher"):
        word, style = "better", "bold green"
    else:
        word, style = "worse", "bold red"
    arrow = "▲" if up else "▼"
    unit = trend.unit
    return Text(
        f"{arrow} {change.rel_change:+.1%} {word}: {format_value(change.before, unit)} -> "
        f"{format_value(change.after, unit)} (noise {format_value(change.noise, unit)})",
        style=style,
    )


def _direction(trend: Trend) -> Direction | None:
    metric = declared(trend.benchmark, trend.metric)
    if metric is None or metric.unit != trend.unit:
        return better_direction(trend.unit)
    return None if metric.better == "none" else metric.better


def _limit_text(trend: Trend) -> str:
    rel = f"{trend.rel_floor:.0%}"
    if trend.abs_floor:
        return f"{rel} and {format_value(trend.abs_floor, trend.unit)} {trend.unit}"
    return rel


def _hosts(hosts: Sequence[str]) -> str:
    if len(hosts) <= _MAX_HOSTS_SHOWN:
        return ", ".join(hosts)
    return f"{hosts[0]} ... {hosts[-1]} ({len(hosts)})"


def _when(stamp: str) -> str:
    # ISO 8601: '2026-12-01T12:53:14+00:00' -> '2026-12-01 12:53' (the id says the second)
    return stamp[:16].replace("T", " ")

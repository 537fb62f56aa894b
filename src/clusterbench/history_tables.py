"""The history database's tables and the rows a recorded run becomes.

The layout (:data:`SCHEMA`, version :data:`SCHEMA_VERSION` in the ``meta`` table), the column a
newer clusterbench adds to a file an older one made (``runs.timings``), the write transaction,
and the values of a run's ``runs`` row and ``measurements`` rows.  :mod:`clusterbench.history_db`
opens the file, checks it and reads and writes through these.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from clusterbench.schema import Measurement, Results

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "add_timings_column",
    "canonical_params",
    "hostnames",
    "measurement_values",
    "now_utc",
    "run_values",
    "table_columns",
    "transaction",
    "utc",
]

SCHEMA_VERSION: Final = 1
"""The database layout this clusterbench reads and writes (``meta.schema_version``)."""

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    started TEXT NOT NULL,
    started_utc TEXT NOT NULL,
    finished TEXT,
    suite TEXT NOT NULL,
    status TEXT NOT NULL,
    hosts TEXT NOT NULL,
    gpu_models TEXT NOT NULL,
    versions TEXT NOT NULL,
    world_size INTEGER NOT NULL,
    num_nodes INTEGER NOT NULL,
    backend TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    num_measurements INTEGER NOT NULL,
    num_fail INTEGER NOT NULL,
    num_warn INTEGER NOT NULL,
    recorded TEXT NOT NULL,
    results_json_zlib BLOB NOT NULL,
    timings TEXT,
    UNIQUE (id, started)
);
CREATE INDEX IF NOT EXISTS runs_by_suite_hosts ON runs (suite, hosts, started_utc);
CREATE TABLE IF NOT EXISTS measurements (
    run_pk INTEGER NOT NULL REFERENCES runs (pk) ON DELETE CASCADE,
    benchmark TEXT NOT NULL,
    metric TEXT NOT NULL,
    params TEXT NOT NULL,
    host TEXT NOT NULL,
    device TEXT NOT NULL,
    rank INTEGER NOT NULL,
    value REAL,
    unit TEXT NOT NULL,
    median REAL,
    cv REAL,
    samples INTEGER
);
CREATE INDEX IF NOT EXISTS measurements_by_metric ON measurements (benchmark, metric);
CREATE INDEX IF NOT EXISTS measurements_by_run ON measurements (run_pk);
"""
"""The tables of a new history file, one statement after each ``;``."""


def table_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def add_timings_column(conn: sqlite3.Connection) -> None:
    """A database made before ``runs.timings`` existed gets it (NULL for its runs)."""
    if "timings" not in table_columns(conn, "runs"):
        conn.execute("ALTER TABLE runs ADD COLUMN timings TEXT")


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock at the start, so a busy database waits (busy timeout)
    # before anything is done rather than failing halfway.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def canonical_params(params: Mapping[str, Any]) -> str:
    """A measurement's params as JSON with sorted keys: the same params, the same text."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))


def run_values(results: Results, run_dir: Path) -> dict[str, Any]:
    """The ``runs`` row of ``results`` (run folder ``run_dir``), by column name."""
    run = results.run
    return {
        "id": run.id,
        "started": run.started,
        "started_utc": utc(run.started),
        "finished": run.finished,
        "suite": run.suite,
        "status": run.status,
        "hosts": json.dumps(hostnames(results)),
        "gpu_models": json.dumps(sorted({g.name for h in results.hosts for g in h.gpus})),
        "versions": json.dumps(_versions(results), sort_keys=True),
        "world_size": run.world_size,
        "num_nodes": run.num_nodes,
        "backend": run.backend,
        "run_dir": str(Path(run_dir).absolute()),
        "tool_version": results.tool.version,
        "num_measurements": len(results.measurements),
        "num_fail": sum(f.severity == "fail" for f in results.findings),
        "num_warn": sum(f.severity == "warn" for f in results.findings),
        "recorded": now_utc(),
        "results_json_zlib": zlib.compress(results.model_dump_json().encode("utf-8")),
        "timings": json.dumps(
            {
                "benchmark_seconds": run.benchmark_seconds,
                "settings": run.config.get("benchmarks", {}),
            },
            sort_keys=True,
        ),
    }


def measurement_values(m: Measurement) -> tuple[Any, ...]:
    """The ``measurements`` row of ``m``, all but ``run_pk``, in column order."""
    stats = m.stats
    return (
        m.benchmark, m.metric, canonical_params(m.params), m.host, m.device, m.rank,
        _finite(m.value), m.unit,
        None if stats is None else _finite(stats.median),
        None if stats is None else _finite(stats.cv),
        None if stats is None else stats.samples,
    )  # fmt: skip


def hostnames(results: Results) -> list[str]:
    """The run's hosts (its inventory, else the hosts its measurements name), sorted."""
    names = {h.hostname for h in results.hosts} or {m.host for m in results.measurements}
    return sorted(names)


def _versions(results: Results) -> dict[str, str]:
    """Each software version over the run's hosts: one value, or the distinct ones joined."""
    seen: dict[str, set[str]] = {}
    for host in results.hosts:
        for key, value in host.versions.items():
            seen.setdefault(key, set()).add(value)
    return {key: ", ".join(sorted(values)) for key, values in seen.items()}


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


def utc(stamp: str) -> str:
    """An ISO 8601 time as UTC, seconds, ``+00:00`` (sortable as text); naive times are UTC."""
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds")


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

"""The run history: every run's metadata and measurements in a local SQLite database.

A store beside the results contract: it reads and writes runs and knows nothing of benchmarks.
The run folder stays the source of truth; the database is an index over run folders that
``clusterbench history import`` can rebuild at any time.

One file, created on first use, schema version in its ``meta`` table.  Each run is written in
one transaction; WAL mode and a busy timeout (with one more try) let runs finishing at once on
one machine all land.  A run is identified by its id and start time: recording it again
replaces it.  Every failure (a garbage or foreign file, a database locked past the timeout, a
path that cannot be written) is a :class:`HistoryError` with a one-line message.

Columns added later are optional: ``runs.timings`` (each benchmark's wall seconds and
settings, for the expected time of the next run) is added by the first write of a clusterbench
that knows it and is NULL for runs recorded before; older clusterbench versions read and write
such a database as before.

The tables and the rows a run becomes are :mod:`clusterbench.history_tables`; the run folders
``history import`` records are found by :mod:`clusterbench.history_import`.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from clusterbench.history_tables import (
    SCHEMA,
    SCHEMA_VERSION,
    add_timings_column,
    hostnames,
    measurement_values,
    now_utc,
    run_values,
    table_columns,
    transaction,
    utc,
)
from clusterbench.schema import Results, one_round

__all__ = [
    "HISTORY_ENV",
    "History",
    "HistoryError",
    "MetricPoint",
    "RunRow",
    "RunTimings",
    "default_history_path",
    "open_history",
]

HISTORY_ENV: Final = "CLUSTERBENCH_HISTORY"
"""Environment variable naming the database file (``--history`` wins over it)."""
DEFAULT_TIMEOUT_S: Final = 10.0
"""How long one attempt waits for another process's write lock."""
_ATTEMPTS: Final = 2

_T = TypeVar("_T")


class HistoryError(Exception):
    """The history could not be read or written; ``str()`` is one line saying why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRow:
    """One recorded run as ``clusterbench history`` lists it."""

    id: str
    started: str
    """UTC, ISO 8601."""
    finished: str | None
    suite: str
    status: str
    hosts: list[str]
    gpu_models: list[str]
    versions: dict[str, str]
    world_size: int
    num_nodes: int
    backend: str
    run_dir: str
    tool_version: str
    num_measurements: int
    num_fail: int
    num_warn: int


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricPoint:
    """One measurement of one metric in one recorded run."""

    run_id: str
    started: str
    """The run's start, UTC, ISO 8601 (sortable)."""
    benchmark: str
    metric: str
    params: dict[str, Any]
    host: str
    device: str
    rank: int
    value: float
    unit: str
    cv: float | None
    samples: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunTimings:
    """How long each benchmark of one recorded run took, and the settings it ran with."""

    run_id: str
    started: str
    """UTC, ISO 8601."""
    benchmark_seconds: dict[str, float]
    """Benchmark -> wall seconds (results.json's ``run.benchmark_seconds``)."""
    settings: dict[str, Any]
    """Benchmark -> its settings (results.json's ``run.config["benchmarks"]``)."""


def default_history_path(env: Mapping[str, str] | None = None) -> Path:
    """``$CLUSTERBENCH_HISTORY``, else ``$XDG_DATA_HOME/clusterbench/history.sqlite``, else
    ``~/.local/share/clusterbench/history.sqlite`` (the XDG base directory default)."""
    env = os.environ if env is None else env
    if env.get(HISTORY_ENV):
        return Path(env[HISTORY_ENV]).expanduser()
    data_home = env.get("XDG_DATA_HOME") or ""
    # XDG: a relative XDG_DATA_HOME is invalid and must be ignored
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "clusterbench" / "history.sqlite"


def open_history(path: Path | None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> History:
    """The history at ``path`` (None: :func:`default_history_path`).  A file that exists is
    checked now; a missing one is created by the first :meth:`History.record`."""
    history = History(default_history_path() if path is None else path, timeout_s=timeout_s)
    if history.path.exists():
        history._retrying(history._connection, doing="open")
    return history


class History:
    """A history database file; use :func:`open_history`.  Close it (or use ``with``)."""

    def __init__(self, path: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._conn: sqlite3.Connection | None = None

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------------- writing

    def record(self, results: Results, run_dir: Path) -> None:
        """Store ``results`` (run folder ``run_dir``) in one transaction, replacing an earlier
        record of the same run (same id and start)."""
        values = run_values(results, run_dir)
        # a soak: the round its summary shows, one point a run in the trends
        rows = [measurement_values(m) for m in one_round(results).measurements]

        def write() -> None:
            conn = self._connection(create=True)
            with transaction(conn):
                add_timings_column(conn)
                conn.execute(
                    "DELETE FROM runs WHERE id = ? AND started = ?",
                    (results.run.id, results.run.started),
                )
                names = ", ".join(values)
                marks = ", ".join("?" for _ in values)
                cur = conn.execute(
                    f"INSERT INTO runs ({names}) VALUES ({marks})", tuple(values.values())
                )
                conn.executemany(
                    "INSERT INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(cur.lastrowid, *row) for row in rows],
                )

        self._retrying(write, doing="record the run")

    # ------------------------------------------------------------------------- reading

    def runs(self, *, limit: int | None = None) -> list[RunRow]:
        """Recorded runs, newest first."""
        # the start as UTC, like every time this module returns
        columns = ", ".join("started_utc" if c == "started" else c for c in _RUN_COLUMNS)
        sql = f"SELECT {columns} FROM runs ORDER BY started_utc DESC, pk DESC"
        params: tuple[Any, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        return [_run_row(row) for row in self._query(sql, params)]

    def num_runs(self) -> int:
        rows = self._query("SELECT count(*) FROM runs", ())
        return int(rows[0][0]) if rows else 0

    def metric_names(self) -> list[str]:
        """Every recorded ``benchmark.metric``, sorted."""
        rows = self._query("SELECT DISTINCT benchmark, metric FROM measurements", ())
        return sorted(f"{b}.{m}" for b, m in rows)

    def points(self, benchmark: str, metric: str) -> list[MetricPoint]:
        """Every recorded measurement of ``benchmark.metric``, oldest run first."""
        sql = (
            "SELECT r.id, r.started_utc, m.params, m.host, m.device, m.rank, m.value, m.unit,"
            " m.cv, m.samples FROM measurements m JOIN runs r ON r.pk = m.run_pk"
            " WHERE m.benchmark = ? AND m.metric = ? AND m.value IS NOT NULL"
            " ORDER BY r.started_utc, r.pk, m.rowid"
        )
        return [
            MetricPoint(
                run_id=run_id,
                started=started,
                benchmark=benchmark,
                metric=metric,
                params=json.loads(params),
                host=host,
                device=device,
                rank=rank,
                value=value,
                unit=unit,
                cv=cv,
                samples=samples,
            )
            for run_id, started, params, host, device, rank, value, unit, cv, samples in (
                self._query(sql, (benchmark, metric))
            )
        ]

    def comparable_runs(self, results: Results, limit: int = 20) -> list[Results]:
        """Earlier runs like ``results``: the same suite on the same set of hostnames, started
        before it, newest first, rebuilt from their results.json.  Earlier runs written to a
        folder of the same name (``--out /scratch/cb/run`` every week) count: a run is its
        id and its start."""
        sql = (
            "SELECT id, results_json_zlib FROM runs WHERE suite = ? AND hosts = ?"
            " AND started_utc < ? ORDER BY started_utc DESC, pk DESC LIMIT ?"
        )
        key = (results.run.suite, json.dumps(hostnames(results)), utc(results.run.started), limit)
        return [_decode(blob, run_id=run_id) for run_id, blob in self._query(sql, key)]

    def timings(
        self, *, suite: str, backend: str, world_size: int, host: str, limit: int = 20
    ) -> list[RunTimings]:
        """The timings of the ``limit`` latest recorded runs like the one about to start: the
        same suite, backend and world size, with ``host`` among its hosts; newest first.  Runs
        recorded without timings (before they were kept) are left out."""
        sql = (
            "SELECT id, started_utc, hosts, timings FROM runs WHERE suite = ? AND backend = ?"
            " AND world_size = ? AND timings IS NOT NULL ORDER BY started_utc DESC, pk DESC"
        )
        if self._conn is None and not self.path.exists():
            return []

        def read() -> list[RunTimings]:
            conn = self._connection()
            if "timings" not in table_columns(conn, "runs"):
                return []  # no clusterbench that keeps timings has written here yet
            out = []
            for run_id, started, hosts, text in conn.execute(sql, (suite, backend, world_size)):
                if host not in json.loads(hosts):
                    continue
                kept = json.loads(text)
                if not kept.get("benchmark_seconds"):
                    continue  # a run folder from before timings were kept, imported
                out.append(RunTimings(run_id=run_id, started=started,
                                      benchmark_seconds=kept.get("benchmark_seconds", {}),
                                      settings=kept.get("settings", {})))  # fmt: skip
                if len(out) >= limit:
                    break
            return out

        return self._retrying(read, doing="read")

    def load(self, run_id: str) -> list[Results]:
        """The recorded runs with id ``run_id`` (usually one), oldest first."""
        sql = "SELECT id, results_json_zlib FROM runs WHERE id = ? ORDER BY started_utc"
        return [_decode(blob, run_id=rid) for rid, blob in self._query(sql, (run_id,))]

    # ------------------------------------------------------------------------- plumbing

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if self._conn is None and not self.path.exists():
            return []  # nothing recorded yet: reading does not create the file

        def read() -> list[tuple[Any, ...]]:
            return list(self._connection().execute(sql, params))

        return self._retrying(read, doing="read")

    def _retrying(self, fn: Any, *, doing: str) -> Any:
        """``fn()``, tried once more after a random pause when the database stayed locked
        through the busy timeout; every failure becomes a :class:`HistoryError`."""
        for attempt in range(_ATTEMPTS):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if _is_busy(exc) and attempt + 1 < _ATTEMPTS:
                    time.sleep(random.uniform(0.05, 0.5))
                    continue
                raise self._error(exc, doing=doing) from None
            except (sqlite3.Error, OSError) as exc:
                raise self._error(exc, doing=doing) from None
        raise AssertionError("unreachable")

    def _error(self, exc: BaseException, *, doing: str) -> HistoryError:
        if isinstance(exc, HistoryError):
            return exc
        if isinstance(exc, OSError):
            where = exc.filename or self.path
            return HistoryError(f"cannot {doing}: {where}: {exc.strerror or exc}")
        text = str(exc)
        if _is_busy(exc):
            text = f"database is locked (another process held it for over {self.timeout_s:g} s)"
        elif "not a database" in text or "malformed" in text:
            text = f"not a usable SQLite database ({text}); move it away or use another --history"
        elif "unable to open" in text:
            text = f"cannot open it ({text}); is {self.path.parent} a writable folder?"
        return HistoryError(f"{self.path}: {text}")

    def _connection(self, *, create: bool = False) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self.path.is_dir():
            raise HistoryError(f"{self.path}: is a folder; give --history a file name")
        if create:
            self._make_parent()
        conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        try:
            _prepare(conn, path=self.path)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _make_parent(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(
                f"cannot create folder {exc.filename or self.path.parent}: {exc.strerror}"
            ) from None


# ----------------------------------------------------------------------------- the database


def _prepare(conn: sqlite3.Connection, *, path: Path) -> None:
    """Check the file is a history of ours (creating the tables in an empty one)."""
    conn.execute("PRAGMA foreign_keys = ON")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        # WAL: readers do not block the writer and one writer does not block readers; it
        # persists in the file, so it is set once, on creation.
        conn.execute("PRAGMA journal_mode = WAL")
        with transaction(conn):
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?), ('created', ?)",
                (str(SCHEMA_VERSION), now_utc()),
            )
        return
    if "meta" not in tables:
        raise HistoryError(
            f"{path}: an SQLite database but not a clusterbench history (no meta table)"
        )
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row and str(row[0]).isdigit() else None
    if version is None:
        raise HistoryError(f"{path}: a history without a schema version; move it away")
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"{path}: history schema version {version} is newer than this clusterbench's "
            f"({SCHEMA_VERSION}); upgrade clusterbench or use another --history"
        )


def _is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


_RUN_COLUMNS: Final = (
    "id", "started", "finished", "suite", "status", "hosts", "gpu_models", "versions",
    "world_size", "num_nodes", "backend", "run_dir", "tool_version", "num_measurements",
    "num_fail", "num_warn",
)  # fmt: skip


def _run_row(row: tuple[Any, ...]) -> RunRow:
    values = dict(zip(_RUN_COLUMNS, row, strict=True))
    for key in ("hosts", "gpu_models", "versions"):
        values[key] = json.loads(values[key])
    return RunRow(**values)


def _decode(blob: bytes, *, run_id: str) -> Results:
    try:
        return Results.model_validate_json(zlib.decompress(blob))
    except (zlib.error, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise HistoryError(f"the recorded results of run {run_id} do not load: {first}") from None

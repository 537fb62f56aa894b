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
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import sqlite3
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from clusterbench.schema import Measurement, Results, one_round

__all__ = [
    "HISTORY_ENV",
    "SCHEMA_VERSION",
    "History",
    "HistoryError",
    "MetricPoint",
    "RunRow",
    "RunTimings",
    "canonical_params",
    "default_history_path",
    "find_run_folders",
    "open_history",
]

SCHEMA_VERSION: Final = 1
"""The database layout this module reads and writes (``meta.schema_version``)."""
HISTORY_ENV: Final = "CLUSTERBENCH_HISTORY"
"""Environment variable naming the database file (``--history`` wins over it)."""
DEFAULT_TIMEOUT_S: Final = 10.0
"""How long one attempt waits for another process's write lock."""
_ATTEMPTS: Final = 2

_T = TypeVar("_T")

_SCHEMA = """
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


def canonical_params(params: Mapping[str, Any]) -> str:
    """A measurement's params as JSON with sorted keys: the same params, the same text."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))


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
        run_values = _run_values(results, run_dir)
        # a soak: the round its summary shows, one point a run in the trends
        rows = [_measurement_values(m) for m in one_round(results).measurements]

        def write() -> None:
            conn = self._connection(create=True)
            with _transaction(conn):
                _add_timings_column(conn)
                conn.execute(
                    "DELETE FROM runs WHERE id = ? AND started = ?",
                    (results.run.id, results.run.started),
                )
                names = ", ".join(run_values)
                marks = ", ".join("?" for _ in run_values)
                cur = conn.execute(
                    f"INSERT INTO runs ({names}) VALUES ({marks})", tuple(run_values.values())
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
        key = (results.run.suite, json.dumps(_hostnames(results)), _utc(results.run.started), limit)
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
            if "timings" not in _columns(conn, "runs"):
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


def find_run_folders(paths: Sequence[Path], *, max_depth: int = 3) -> tuple[list[Path], list[str]]:
    """Run folders (each holding a results.json) at or under ``paths``, and one line for each
    path that is none and holds none (within ``max_depth`` folders) or is a run folder without
    its results.json.  A run folder's own subfolders are not searched."""
    found: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if (path / "results.json").is_file() or path.name == "results.json":
            found.append(path.parent if path.name == "results.json" else path)
        elif not path.exists():
            problems.append(f"{path}: no such file or folder")
        elif not path.is_dir():
            problems.append(f"{path}: not a run folder or results.json")
        else:
            before = len(found)
            _walk(path, max_depth, found, problems)
            if len(found) == before and not any(p.startswith(f"{path}") for p in problems):
                problems.append(f"{path}: no run folders (with a results.json) in it")
    unique: dict[Path, Path] = {}
    for folder in found:  # a folder given twice (itself and in its parent) is one run
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values()), problems


def _walk(folder: Path, depth: int, found: list[Path], problems: list[str]) -> None:
    if (folder / "results.json").is_file():
        found.append(folder)
        return
    if (folder / "ranks").is_dir():
        problems.append(f"{folder}: a run folder without results.json (its run did not finish "
                        "writing it)")  # fmt: skip
        return
    if depth == 0:
        return
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError as exc:
        problems.append(f"{folder}: cannot read it ({exc.strerror})")
        return
    for child in children:
        _walk(child, depth - 1, found, problems)


# ----------------------------------------------------------------------------- the database


def _prepare(conn: sqlite3.Connection, *, path: Path) -> None:
    """Check the file is a history of ours (creating the tables in an empty one)."""
    conn.execute("PRAGMA foreign_keys = ON")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        # WAL: readers do not block the writer and one writer does not block readers; it
        # persists in the file, so it is set once, on creation.
        conn.execute("PRAGMA journal_mode = WAL")
        with _transaction(conn):
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?), ('created', ?)",
                (str(SCHEMA_VERSION), _now()),
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


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _add_timings_column(conn: sqlite3.Connection) -> None:
    """A database made before ``runs.timings`` existed gets it (NULL for its runs)."""
    if "timings" not in _columns(conn, "runs"):
        conn.execute("ALTER TABLE runs ADD COLUMN timings TEXT")


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock at the start, so a busy database waits (busy timeout)
    # before anything is done rather than failing halfway.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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


def _run_values(results: Results, run_dir: Path) -> dict[str, Any]:
    run = results.run
    return {
        "id": run.id,
        "started": run.started,
        "started_utc": _utc(run.started),
        "finished": run.finished,
        "suite": run.suite,
        "status": run.status,
        "hosts": json.dumps(_hostnames(results)),
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
        "recorded": _now(),
        "results_json_zlib": zlib.compress(results.model_dump_json().encode("utf-8")),
        "timings": json.dumps(
            {
                "benchmark_seconds": run.benchmark_seconds,
                "settings": run.config.get("benchmarks", {}),
            },
            sort_keys=True,
        ),
    }


def _measurement_values(m: Measurement) -> tuple[Any, ...]:
    stats = m.stats
    return (
        m.benchmark, m.metric, canonical_params(m.params), m.host, m.device, m.rank,
        _finite(m.value), m.unit,
        None if stats is None else _finite(stats.median),
        None if stats is None else _finite(stats.cv),
        None if stats is None else stats.samples,
    )  # fmt: skip


def _hostnames(results: Results) -> list[str]:
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


def _decode(blob: bytes, *, run_id: str) -> Results:
    try:
        return Results.model_validate_json(zlib.decompress(blob))
    except (zlib.error, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise HistoryError(f"the recorded results of run {run_id} do not load: {first}") from None


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


def _utc(stamp: str) -> str:
    """An ISO 8601 time as UTC, seconds, ``+00:00`` (sortable as text); naive times are UTC."""
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc).isoformat(timespec="seconds")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

"""The history store on real SQLite files: record, list, points, comparable runs, and every way
a database can be unusable (one HistoryError with a one-line message)."""

from __future__ import annotations

import sqlite3
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from clusterbench.history_db import (
    HISTORY_ENV,
    HistoryError,
    default_history_path,
    open_history,
)
from clusterbench.history_import import find_run_folders
from clusterbench.history_tables import SCHEMA_VERSION
from clusterbench.schema import (
    Finding,
    GpuInfo,
    HostInfo,
    Measurement,
    Results,
    RunInfo,
    Stats,
    ToolInfo,
)


def make_results(
    run_id: str,
    started: str,
    *,
    suite: str = "quick",
    hosts: Sequence[str] = ("a",),
    tflops: float = 100.0,
    status: str = "completed",
    fails: int = 0,
) -> Results:
    """A run of two GPUs a host with one GEMM figure each."""
    measurements = [
        Measurement(
            benchmark="gemm",
            metric="tflops_best",
            value=tflops + gpu,
            unit="TFLOP/s",
            params={"m": 8192, "dtype": "bf16"},
            rank=2 * i + gpu,
            host=host,
            device=f"cuda:{gpu}",
            stats=Stats.from_samples([tflops + gpu, tflops + gpu + 1, 99]),
        )
        for i, host in enumerate(hosts)
        for gpu in range(2)
    ]
    return Results(
        tool=ToolInfo(version="0.1.0"),
        run=RunInfo(
            id=run_id,
            started=started,
            finished=started,
            suite=suite,
            world_size=2 * len(hosts),
            num_nodes=len(hosts),
            backend="nccl",
            command="clusterbench run",
            status=status,  # type: ignore[arg-type]
        ),
        hosts=[
            HostInfo(
                hostname=h,
                gpus=[GpuInfo(index=g, name="NVIDIA H200") for g in range(2)],
                versions={"driver": "570.1", "torch": "2.13.0"},
            )
            for h in hosts
        ],
        measurements=measurements,
        findings=[
            Finding(id=f"f{i}", severity="fail", scope="run", message="slow") for i in range(fails)
        ],
    )


def test_record_list_points_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "er" / "history.sqlite"
    first = make_results("run1", "2026-12-01T10:00:00+00:00", hosts=["b", "a"], fails=1)
    second = make_results("run2", "2026-12-02T10:00:00+00:00", status="failed", tflops=80)
    with open_history(db) as history:
        history.record(first, tmp_path / "run1")
        history.record(second, tmp_path / "run2")
        rows = history.runs()
        assert [r.id for r in rows] == ["run2", "run1"]  # newest first
        assert rows[0].status == "failed" and rows[1].status == "completed"
        assert rows[1].hosts == ["a", "b"] and rows[1].gpu_models == ["NVIDIA H200"]
        assert rows[1].num_measurements == 4 and rows[1].num_fail == 1
        assert rows[1].world_size == 4 and rows[1].num_nodes == 2
        assert rows[1].run_dir == str((tmp_path / "run1").absolute())
        assert rows[1].versions == {"driver": "570.1", "torch": "2.13.0"}
        assert [r.id for r in history.runs(limit=1)] == ["run2"]
        assert history.metric_names() == ["gemm.tflops_best"]
        points = history.points("gemm", "tflops_best")
        assert [(p.run_id, p.host, p.device, p.value) for p in points if p.host == "a"] == [
            ("run1", "a", "cuda:0", 100.0),
            ("run1", "a", "cuda:1", 101.0),
            ("run2", "a", "cuda:0", 80.0),
            ("run2", "a", "cuda:1", 81.0),
        ]
        assert points[0].params == {"dtype": "bf16", "m": 8192} and points[0].samples == 3
        assert history.load("run1") == [first]  # the whole results.json comes back
    # the params are stored as canonical JSON with sorted keys; the schema version in meta
    conn = sqlite3.connect(db)
    assert {p for (p,) in conn.execute("SELECT DISTINCT params FROM measurements")} == {
        '{"dtype":"bf16","m":8192}'
    }
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def test_recording_a_run_again_replaces_it(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with open_history(db) as history:
        history.record(make_results("r", "2026-12-01T10:00:00+00:00"), tmp_path / "r")
        history.record(make_results("r", "2026-12-01T10:00:00+00:00", tflops=50), tmp_path / "r")
        assert [r.id for r in history.runs()] == ["r"]
        assert sorted(p.value for p in history.points("gemm", "tflops_best")) == [50.0, 51.0]
        # another run that happens to have the same folder name is another run
        history.record(make_results("r", "2026-12-05T10:00:00+00:00"), tmp_path / "x" / "r")
        assert history.num_runs() == 2


def test_comparable_runs_same_suite_and_hosts_earlier_newest_first(tmp_path: Path) -> None:
    now = make_results("now", "2026-12-10T10:00:00+00:00", hosts=["a", "b"])
    others = [
        make_results("old", "2026-12-01T10:00:00+00:00", hosts=["b", "a"]),
        make_results("newer", "2026-12-05T10:00:00+00:00", hosts=["a", "b"]),
        make_results("std", "2026-12-06T10:00:00+00:00", hosts=["a", "b"], suite="standard"),
        make_results("onehost", "2026-12-07T10:00:00+00:00", hosts=["a"]),
        make_results("threehosts", "2026-12-07T11:00:00+00:00", hosts=["a", "b", "c"]),
        make_results("later", "2026-12-11T10:00:00+00:00", hosts=["a", "b"]),
        # another time zone: 2026-12-09T23:00Z, earlier than "now"
        make_results("tz", "2026-12-10T01:00:00+02:00", hosts=["a", "b"]),
    ]
    with open_history(tmp_path / "h.sqlite") as history:
        for r in [*others, now]:
            history.record(r, tmp_path / r.run.id)
        found = history.comparable_runs(now)
        assert [r.run.id for r in found] == ["tz", "newer", "old"]
        assert found[1] == others[1]
        assert [r.run.id for r in history.comparable_runs(now, limit=1)] == ["tz"]


def test_earlier_runs_in_a_folder_of_the_same_name_are_comparable(tmp_path: Path) -> None:
    """--out /scratch/cb/run every week: each week's run is an earlier run of the next."""
    weeks = [make_results("run", f"2026-12-0{d}T10:00:00+00:00") for d in (1, 2, 3, 4)]
    with open_history(tmp_path / "h.sqlite") as history:
        for r in weeks:
            history.record(r, tmp_path / "run")
        found = history.comparable_runs(weeks[-1])
    assert [r.run.started for r in found] == [r.run.started for r in weeks[2::-1]]


def test_reading_a_missing_history_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none" / "h.sqlite"
    with open_history(db) as history:
        assert history.runs() == [] and history.metric_names() == []
        assert history.comparable_runs(make_results("x", "2026-12-01T00:00:00+00:00")) == []
    assert not db.parent.exists()


def _sqlite_file_of_another_program(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.commit()
    conn.close()


def _newer_history(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda p: p.write_bytes(b"garbage, not a database" * 100), "not a usable SQLite"),
        (lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000), "SQLite"),
        (_sqlite_file_of_another_program, "not a clusterbench history"),
        (_newer_history, "schema version 99 is newer"),
        (lambda p: p.mkdir(), "is a folder"),
    ],
)
def test_an_unusable_file_is_one_history_error(tmp_path: Path, make, text: str) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "h.sqlite"
    make(db)
    results = make_results("r", "2026-12-01T10:00:00+00:00")
    with pytest.raises(HistoryError) as info, open_history(db) as history:
        history.record(results, tmp_path)
    message = str(info.value)
    assert text in message and "\n" not in message


def test_an_unwritable_place_is_one_history_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(HistoryError, match="cannot create folder") as info:
        open_history(blocker / "sub" / "h.sqlite").record(
            make_results("r", "2026-12-01T10:00:00+00:00"), tmp_path
        )
    assert "\n" not in str(info.value)


_HOLD_LOCK = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    """
)


def test_default_path_env_then_xdg_then_home(tmp_path: Path) -> None:
    home = Path.home()
    assert default_history_path({HISTORY_ENV: str(tmp_path / "x.db")}) == tmp_path / "x.db"
    assert default_history_path({HISTORY_ENV: "~/h.db"}) == home / "h.db"
    xdg = {"XDG_DATA_HOME": str(tmp_path)}
    assert default_history_path(xdg) == tmp_path / "clusterbench" / "history.sqlite"
    # a relative XDG_DATA_HOME is invalid (XDG base directory spec) and ignored
    expected = home / ".local" / "share" / "clusterbench" / "history.sqlite"
    assert default_history_path({"XDG_DATA_HOME": "rel/dir"}) == expected
    assert default_history_path({}) == expected


def test_open_history_none_honours_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "env.sqlite"))
    with open_history(None) as history:
        history.record(make_results("r", "2026-12-01T10:00:00+00:00"), tmp_path)
    assert (tmp_path / "env.sqlite").is_file()


def test_find_run_folders(tmp_path: Path) -> None:
    for name in ("runs/a", "runs/b", "runs/deep/c"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "results.json").write_text("{}")
    (tmp_path / "runs" / "unfinished" / "ranks").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    paths = [
        tmp_path / "runs", tmp_path / "runs" / "a", tmp_path / "nosuch", tmp_path / "empty",
        tmp_path / "runs" / "b" / "results.json",
    ]  # fmt: skip
    found, problems = find_run_folders(paths)
    assert found == [tmp_path / "runs" / n for n in ("a", "b", "deep/c")]
    assert problems == [
        f"{tmp_path / 'runs' / 'unfinished'}: a run folder without results.json (its run did "
        "not finish writing it)",
        f"{tmp_path / 'nosuch'}: no such file or folder",
        f"{tmp_path / 'empty'}: no run folders (with a results.json) in it",
    ]

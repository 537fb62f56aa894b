"""Real runs record themselves in the history: at the same time, into a garbage file, with
--no-history, and when they fail; and real processes writing one database at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tests.helpers import cli
from tests.unit.test_history import make_results

from clusterbench import load_results
from clusterbench.history_db import HISTORY_ENV, open_history

pytestmark = pytest.mark.dist

SMALL_GEMM = ["--set", "gemm.shapes=128x128x128", "--set", "gemm.repeats=3",
              "--set", "gemm.dtypes=fp32"]  # fmt: skip


def _run_args(out: Path, *extra: str) -> list[str]:
    return ["run", "--device", "cpu", "--only", "gemm", *SMALL_GEMM, "--out", str(out), *extra]


def test_two_runs_finishing_at_once_are_both_recorded(tmp_path: Path) -> None:
    db = tmp_path / "shared" / "history.sqlite"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "clusterbench"]
    procs = [
        # one names the database with --history, the other through the environment
        subprocess.Popen(
            [*cmd, *_run_args(tmp_path / "a"), "--history", str(db)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ),
        subprocess.Popen(
            [*cmd, *_run_args(tmp_path / "b")],
            env={**env, HISTORY_ENV: str(db)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        ),
    ]  # fmt: skip
    outputs = [p.communicate(timeout=240) for p in procs]
    for proc, (stdout, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr[-2000:]
        assert "warning" not in stderr and f"history: {db}" in stdout
    with open_history(db) as history:
        rows = {r.id: r for r in history.runs()}
        assert len(rows) == 2
        for name in ("a", "b"):
            results = load_results(tmp_path / name)
            run_id = results.run.id  # the folder's name and the run's start
            assert run_id.startswith(f"{name}-") and run_id in rows
            assert rows[run_id].num_measurements == len(results.measurements) > 0
            assert rows[run_id].run_dir == str((tmp_path / name).absolute())
            assert history.load(run_id) == [results]


_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from clusterbench.history_db import open_history
    from clusterbench.schema import load_results
    db, template, start_at, who = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
    results = load_results(template)
    time.sleep(max(0.0, start_at - time.time()))
    for i in range(15):
        run = results.model_copy(deep=True)
        run.run.id = f"{who}-{i}"
        with open_history(db) as history:
            history.record(run, Path(template))
    print("done")
    """
)


def test_processes_writing_one_new_database_at_once_all_land(tmp_path: Path) -> None:
    template = tmp_path / "template"
    template.mkdir()
    results = make_results("template", "2026-12-01T10:00:00+00:00", hosts=["a", "b"])
    (template / "results.json").write_text(results.model_dump_json())
    db = tmp_path / "h.sqlite"  # does not exist yet: the writers race to create it too
    start_at = time.time() + 3.0
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(db), str(template), str(start_at), f"w{k}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for k in range(4)
    ]  # fmt: skip
    for w in writers:
        stdout, stderr = w.communicate(timeout=120)
        assert w.returncode == 0 and stdout.strip() == "done", stderr[-2000:]
    with open_history(db) as history:
        ids = sorted(r.id for r in history.runs())
    assert ids == sorted(f"w{k}-{i}" for k in range(4) for i in range(15))


def test_a_garbage_history_costs_one_warning_not_the_run(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    garbage = b"this is not a database\n" * 50
    db.write_bytes(garbage)
    out = tmp_path / "run"
    proc = cli(*_run_args(out, "--history", str(db)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"clusterbench: warning: history not recorded: {db}: not a usable SQLite database (file "
        "is not a database); move it away or use another --history; the run folder "
        f"{out} is the record; rebuild with 'clusterbench history import DIR...'"
    ]
    assert db.read_bytes() == garbage  # left as it was
    results = load_results(out)  # the run folder is intact
    assert results.run.status == "completed" and results.measurements
    fresh = tmp_path / "fresh.sqlite"
    imported = cli("history", "import", str(tmp_path), "--history", str(fresh))
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 run(s)" in imported.stdout
    listed = json.loads(cli("history", "--json", "--history", str(fresh)).stdout)
    assert [(r["id"], r["num_measurements"]) for r in listed] == [
        (results.run.id, len(results.measurements))
    ]


def test_no_history_writes_nothing_and_a_failed_run_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "env" / "history.sqlite"
    env = {HISTORY_ENV: str(db)}
    proc = cli(*_run_args(tmp_path / "quiet", "--no-history"), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not db.parent.exists() and "history:" not in proc.stdout
    failing = tmp_path / "failing"
    proc = cli(
        "run", "--device", "cpu", "--only", "selftest", "--set", "selftest.fail_rank=1",
        "--out", str(failing), env=env,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-2000:]
    with open_history(db) as history:
        (row,) = history.runs()
    assert (row.id, row.status) == (load_results(failing).run.id, "failed")
    assert row.id.startswith("failing-")
    assert row.run_dir == str(failing.absolute())

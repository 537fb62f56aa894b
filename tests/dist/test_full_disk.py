"""A full disk under --out: one clear line, exit 3, the summary from memory, nothing half-written.

Each test mounts a real tmpfs of a few pages (CI runs as root) and lets the run fill it: the
workers' rank files, then results.json.  A tmpfs of 1.25 MiB passes the start-up check (1 MiB
+ 64 KiB per worker) and holds the rank files of 1000 tiny GEMM shapes but not their
results.json; with 2000 shapes the rank files themselves fill it while gemm runs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.helpers import cli

import clusterbench
from clusterbench.pipeline.finish import ResultsWriteError, write_results
from clusterbench.runtime.nccl_debug import debug_log_path
from clusterbench.runtime.records import (
    End,
    Error,
    RankLog,
    RankLogWriteError,
    Skip,
    Start,
    parse_record,
)
from clusterbench.schema import Results
from clusterbench.pipeline.rank import _keep_nccl_log
from tests.helpers import one_rank_ctx
from tests.pages import analysis

pytestmark = pytest.mark.dist

TMPFS_KIB = 1280  # between the start-up floor for 2 workers (1152 KiB) and what the runs write


def _sets(shapes: int) -> list[str]:
    """Tiny GEMMs (one timed product each, every shape: no stop on a plateau) and a 1 MiB
    memory test: the records, not the compute, are what is large."""
    return [
        f"gemm.shapes={','.join(f'8x8x{k}' for k in range(1, shapes + 1))}",
        "gemm.dtypes=fp32", "gemm.warmup=0", "gemm.repeats=1", "gemm.sweep_stop=false",
        "memory.size_bytes=1048576",
    ]  # fmt: skip


def _run_args(out: Path, shapes: int) -> list[str]:
    args = ["run", "--device", "cpu", "--nproc", "2", "--only", "gemm,memory", "--out", str(out)]
    for item in _sets(shapes):
        args += ["--set", item]
    return args


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``tmpfs(KIB, inodes=N)``: a fresh tmpfs of that size (and at most N files and folders,
    itself included), unmounted after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def mount(size_kib: int, *, inodes: int | None = None) -> Path:
        where = tmp_path / f"tmpfs-{len(mounted)}"
        where.mkdir()
        options = f"size={size_kib}k" + (f",nr_inodes={inodes}" if inodes else "")
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(where)], check=False)  # a file still open


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("clusterbench:")]


def _assert_nothing_half_written(mount: Path) -> dict[int, list[object]]:
    """No temporary file anywhere; every rank file is whole JSON lines, numbered without a
    gap (a torn line cut back, nothing written after it).  Returns each rank's records."""
    assert not [p for p in mount.rglob("*") if p.name.endswith(".tmp")]
    by_rank: dict[int, list[object]] = {}
    files = sorted(mount.rglob("rank-*.jsonl"))
    assert len(files) == 2
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n"), f"{path} ends in a torn line"
        records = [parse_record(line) for line in text.splitlines()]  # raises on a bad line
        for line in text.splitlines():
            json.loads(line)
        assert [r.seq for r in records] == list(range(len(records)))
        by_rank[records[0].rank] = records
    return by_rank


def _benchmarks(records: list[object], kind: type) -> set[str]:
    return {r.benchmark for r in records if isinstance(r, kind)}  # type: ignore[attr-defined]


def test_results_that_do_not_fit_one_line_summary_and_exit_3(tmpfs: Callable[[int], Path]) -> None:
    mount = tmpfs(TMPFS_KIB)
    out = mount / "run"
    proc = cli(*_run_args(out, 1000))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert _error_lines(proc.stderr) == [
        f"clusterbench: error: cannot write results: no space left on {out / 'results.json'}"
    ]
    # the console summary, from memory: both benchmarks' tables
    assert "gemm · 2 devices" in proc.stdout and "memory · 2 devices" in proc.stdout
    assert f"results: not written; the ranks' records are in {out}" in proc.stdout
    assert not (out / "results.json").exists() and not (out / "summary.md").exists()
    by_rank = _assert_nothing_half_written(mount)
    for records in by_rank.values():  # the ranks' files are complete
        assert _benchmarks(records, End) == {"gemm", "memory"}


def test_a_report_that_does_not_fit_costs_neither_the_results_nor_the_exit_code(
    tmpfs: Callable[[int], Path],
) -> None:
    # room for the rank files, results.json and summary.md of 250 tiny shapes (some 650 KiB),
    # not for the page besides them (plotly's partial bundle and the figures: some 760 KiB)
    mount = tmpfs(TMPFS_KIB)
    out = mount / "run"
    proc = cli(*_run_args(out, 250))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    warning = [line for line in proc.stderr.splitlines() if "report.html" in line]
    assert warning == [
        f"clusterbench: warning: cannot write report.html: no space left on "
        f"{out / 'report.html'}; results.json is complete (clusterbench report {out} builds "
        "the page)"
    ]
    results = Results.model_validate_json((out / "results.json").read_text())
    assert {m.benchmark for m in results.measurements} == {"gemm", "memory"}
    assert (out / "summary.md").read_text().strip()
    assert not (out / "report.html").exists()
    _assert_nothing_half_written(mount)


def test_rank_files_that_fill_the_disk_mid_run(tmpfs: Callable[[int], Path]) -> None:
    mount = tmpfs(TMPFS_KIB)
    out = mount / "run"
    proc = cli(*_run_args(out, 2000))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert _error_lines(proc.stderr) == [
        f"clusterbench: error: cannot write results: no space left on {out / 'results.json'}"
    ]
    assert "status failed" in proc.stdout  # the summary header, from memory
    assert "Did not finish: gemm, memory" in proc.stdout
    by_rank = _assert_nothing_half_written(mount)
    # gemm started everywhere; the disk filled up before it ended on at least one rank
    assert all("gemm" in _benchmarks(records, Start) for records in by_rank.values())
    assert any("gemm" not in _benchmarks(records, End) for records in by_rank.values())
    # where the rank's last line still fitted, it says why in one line (no traceback)
    for records in by_rank.values():
        errors = [r for r in records if isinstance(r, Error)]
        for err in errors:
            assert err.message.startswith("cannot write rank file: no space left on ")
            assert err.traceback is None
    if any(isinstance(r, Error) for records in by_rank.values() for r in records):
        assert "cannot write rank file: no space left on" in " ".join(proc.stdout.split())


def test_the_library_returns_the_results_it_could_not_write(
    tmpfs: Callable[[int], Path],
) -> None:
    out = tmpfs(TMPFS_KIB) / "run"
    options = clusterbench.RunOptions(
        only=["gemm", "memory"], sets=_sets(1000), device="cpu", out=out
    )
    outcome = clusterbench.run(options)
    assert outcome.exit_code == 3
    assert outcome.error == f"cannot write results: no space left on {out / 'results.json'}"
    assert outcome.results is not None and outcome.results.run.status == "completed"
    gemm_ranks = {m.rank for m in outcome.results.measurements if m.benchmark == "gemm"}
    assert gemm_ranks == {0, 1}


def test_a_failed_rewrite_keeps_the_previous_results(
    tmpfs: Callable[[int], Path], tmp_path: Path
) -> None:
    """results.json and summary.md stay as they were, and no temporary file is left."""
    source = tmp_path / "source"
    cli_proc = cli(*_run_args(source, 20))
    assert cli_proc.returncode in (0, 1), cli_proc.stderr[-3000:]
    small = Results.model_validate_json((source / "results.json").read_text())
    big = small.model_copy(deep=True)
    big.measurements = big.measurements * 20  # some 500 KiB of results.json
    run_dir = tmpfs(256)
    write_results(analysis(small, run_dir=run_dir))
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    assert set(before) == {"results.json", "summary.md"}
    with pytest.raises(ResultsWriteError) as caught:
        write_results(analysis(big, run_dir=run_dir))
    assert str(caught.value) == (
        f"cannot write results: no space left on {run_dir / 'results.json'}"
    )
    assert caught.value.results is big
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_a_rank_file_is_cut_back_to_its_last_whole_line(tmpfs: Callable[[int], Path]) -> None:
    """In-process, on a 16 KiB tmpfs: the write that does not fit raises and leaves no torn
    line; once there is room again the next record follows the last whole one."""
    run_dir = tmpfs(16)
    filler = run_dir / "filler"
    filler.write_bytes(b"x" * 4096)
    log = RankLog(run_dir, 0)
    message = "y" * 3000  # a line of ~3 KiB: the disk fills up part-way through one
    with pytest.raises(RankLogWriteError) as caught:
        for _ in range(100):
            log.write(Skip(benchmark="gemm", reason=message))
    assert str(caught.value) == f"cannot write rank file: no space left on {log.path}"
    whole = [parse_record(line) for line in log.path.read_text().splitlines()]
    assert whole and log.path.read_text().endswith("\n")
    filler.unlink()
    log.write(End(benchmark="gemm"))
    log.close()
    records = [parse_record(line) for line in log.path.read_text().splitlines()]
    assert records[:-1] == whole and isinstance(records[-1], End)
    assert [r.seq for r in records] == list(range(len(records)))


def test_a_far_too_small_out_is_refused_before_anything_is_written(
    tmpfs: Callable[[int], Path],
) -> None:
    mount = tmpfs(16)
    out = mount / "run"
    proc = cli("run", "--device", "cpu", "--nproc", "2", "--only", "gemm", "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"clusterbench: error: --out {out}: only 16 KiB free on {mount}; a run of 2 worker(s) "
        "needs at least 1.12 MiB (1 MiB + 64 KiB a worker)"
    ]
    assert list(mount.iterdir()) == []
    assert shutil.disk_usage(mount).used == 0


def _srun_tasks(out: Path, *, port: int) -> list[subprocess.Popen[str]]:
    """Two ranks with the variables srun sets (a launcher's run: no clusterbench parent)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE"))}
    procs = []
    for rank in range(2):
        env = {**base, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
               "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2",
               "SLURM_JOB_ID": str(port), "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1"}  # fmt: skip
        argv = [sys.executable, "-m", "clusterbench", "run", "--device", "cpu", "--only", "gemm",
                "--set", "gemm.shapes=64x64x64", "--out", str(out)]  # fmt: skip
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))  # fmt: skip
    return procs


def test_a_rank_file_that_cannot_be_opened_stops_every_rank(
    tmpfs: Callable[..., Path],
) -> None:
    """A tmpfs with room for only one rank file (4 inodes: itself, the run folder, ranks/ and
    one file): the other rank cannot open its own.  Every rank stops at once, rank 0 saying
    in one line which rank and why; exit 3; nothing half-written."""
    mount = tmpfs(TMPFS_KIB, inodes=4)
    out = mount / "run"
    procs = _srun_tasks(out, port=29571)
    done = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [3, 3], done
    assert "Traceback" not in done[0][1] + done[1][1]
    (line,) = _error_lines(done[0][1])
    assert line.startswith("clusterbench: error: rank ")
    rank = int(line.split()[3])
    assert line == (
        f"clusterbench: error: rank {rank} on host {socket.gethostname()}: cannot write rank "
        f"file: no space left on {out / 'ranks' / f'rank-{rank:05d}.jsonl'}"
    )
    assert _error_lines(done[1][1]) == []
    assert not [p for p in mount.rglob("*") if p.name.endswith(".tmp")]
    for path in mount.rglob("rank-*.jsonl"):  # the file that opened has nothing torn in it
        assert path.read_text() == "" or path.read_text().endswith("\n")


def test_an_nccl_log_that_does_not_fit_stays_where_nccl_wrote_it(
    tmpfs: Callable[..., Path],
) -> None:
    """--nccl-debug moves each rank's NCCL log into the run folder after the run: on a full
    disk that is one line (the rank then stops, exit 3, as for its rank file), no partial copy,
    and the log is kept where NCCL wrote it; with room it is moved whole and recorded."""
    ctx = one_rank_ctx("collectives")
    ctx.rank = 4242  # a log name no real run uses
    source = debug_log_path(ctx.rank)
    text = "".join(f"vm:1:2 [0] NCCL INFO Channel {i:02d} : 0[0] -> 1[1] via P2P/CUMEM\n"
                   for i in range(4000))  # fmt: skip
    source.write_text(text)
    try:
        full = tmpfs(64)
        log = RankLog(full, ctx.rank)
        with pytest.raises(RankLogWriteError) as caught:
            _keep_nccl_log(ctx, run_dir=full, log=log)
        log.close()  # else the tmpfs is busy and cannot be unmounted
        target = full / "nccl" / "rank-04242.log"
        assert str(caught.value) == (
            f"cannot keep the NCCL log: no space left on {target} (it stays in {source})"
        )
        assert sorted(p.name for p in (full / "nccl").iterdir()) == []
        assert source.read_text() == text
        roomy = tmpfs(4096)
        log = RankLog(roomy, ctx.rank)
        _keep_nccl_log(ctx, run_dir=roomy, log=log)
        log.close()
        assert (roomy / "nccl" / "rank-04242.log").read_text() == text and not source.exists()
        (record,) = [parse_record(x) for x in log.path.read_text().splitlines()]
        assert record.kind == "nccl" and record.data.transports == {"P2P": 4000}
    finally:
        source.unlink(missing_ok=True)


def test_workers_that_cannot_get_their_log_folders_are_one_line_and_exit_3(
    tmpfs: Callable[..., Path],
) -> None:
    """Room for the run folder and its logs/ folder only (3 inodes, the tmpfs itself
    included): the launcher cannot make the workers' log folders, so nothing runs; one line,
    exit 3, no traceback."""
    mount = tmpfs(TMPFS_KIB, inodes=3)
    out = mount / "run"
    proc = cli("run", "--device", "cpu", "--only", "gemm", "--no-history", "--out", str(out))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert _error_lines(proc.stderr) == [
        f"clusterbench: error: cannot start the workers: no space left on {out / 'logs'}"
    ]
    assert not (out / "results.json").exists()

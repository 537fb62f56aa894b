"""The CLI as a real process: every bad input is one line, exit 2 and no run folder; --version;
run --plan."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import cli
from tests.unit.test_cli import _FILES

_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
_QUICK = "doctor,gemm,sdc,memory,transfer,collectives"

# name -> (arguments after `clusterbench run --device cpu --out OUT`, the one line's text)
_BAD_RUNS: dict[str, tuple[list[str], str]] = {
    "nproc-over-cores": (
        ["--nproc", "100000"],
        f"--nproc 100000: more CPU workers than the {_CORES} CPU core(s) this process may use; "
        "--oversubscribe allows up to",
    ),
    "nproc-over-cap": (
        ["--nproc", "100000", "--oversubscribe"],
        "--nproc 100000: --oversubscribe allows at most",
    ),
    "timeout-nan": (
        ["--timeout", "nan"],
        "--timeout must be a positive number of seconds, got nan",
    ),
    "file-timeout-nan": (["--config", "timeout-nan.toml"], "timeout_s: must be a finite number"),
    "set-nan": (["--set", "gemm.warmup_min_s=nan"], "gemm.warmup_min_s: must be a finite number"),
    "file-threshold-inf": (
        ["--config", "threshold-inf.toml"],
        "thresholds.gemm_min_efficiency: must be a finite number",
    ),
    "random-bytes": (["--config", "noise.toml"], "noise.toml: not a UTF-8 TOML file"),
    # training is not in the quick suite: its settings are checked all the same
    "unselected-model": (["--set", "training.model=nope"], "training.model: input should be"),
    "unselected-value": (
        ["--set", "training.batch_size=0"],
        "training.batch_size: batch_size must be >= 1",
    ),
    "unselected-key": (["--config", "nosuchkey.toml"], "training.nosuchkey: unknown key"),
    "only-and-skip": (["--only", "gemm", "--skip", "gemm"], "--only and --skip both name gemm"),
    "nothing-left": (["--skip", _QUICK], "nothing to run: --skip leaves no benchmark"),
}


@pytest.fixture(scope="module")
def bad_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    """Every case of ``_BAD_RUNS`` as a real ``clusterbench run`` (a few at a time: each one
    spends its time importing torch)."""
    root = tmp_path_factory.mktemp("bad-input")
    for name, data in _FILES.items():
        (root / name).write_bytes(data)

    def one(name: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        args, _ = _BAD_RUNS[name]
        out = root / name / "run"
        files = [str(root / a) if a in _FILES else a for a in args]
        return cli("run", "--device", "cpu", "--out", str(out), *files, timeout=120), out

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(_BAD_RUNS, pool.map(one, _BAD_RUNS), strict=True))


@pytest.mark.parametrize("case", list(_BAD_RUNS))
def test_every_bad_input_is_one_line_exit_2_and_no_run_folder(
    bad_runs: dict[str, tuple[subprocess.CompletedProcess[str], Path]], case: str
) -> None:
    proc, out = bad_runs[case]
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("clusterbench: error: ") and _BAD_RUNS[case][1] in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not out.exists() and not out.parent.exists()  # no run folder, no log folders


def test_version_prints_the_installed_version() -> None:
    from clusterbench._version import __version__

    proc = cli("--version", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"clusterbench {__version__}\n" and __version__
    # eager: it answers before a command's own options are parsed
    proc = cli("--version", "run", "--nproc", "not-a-number", timeout=60)
    assert (proc.returncode, proc.stdout) == (0, f"clusterbench {__version__}\n")


def test_plan_prints_every_benchmark_and_the_cuts_then_stops_writing_nothing(
    tmp_path: Path,
) -> None:
    """``run --plan``: the plan of the suite on this machine, with --budget what it would cut,
    then exit 0 without starting a worker or making the run folder."""
    out = tmp_path / "run"
    full = cli("run", "--device", "cpu", "--suite", "full", "--plan", "--out", str(out))
    assert full.returncode == 0, full.stderr[-2000:]
    lines = full.stdout.splitlines()
    assert lines[0].startswith("plan: expected ~") and "for 11 benchmarks" in lines[0]
    for name in ("gemm", "collectives", "training", "checkpoint", "attribution"):
        assert any(line.split()[:1] == [name] for line in lines[1:]), name
    assert lines[-1].startswith("plan only: nothing was run")
    cut = cli("run", "--device", "cpu", "--suite", "standard", "--plan", "--budget", "40s",
              "--out", str(out))  # fmt: skip
    assert cut.returncode == 0, cut.stderr[-2000:]
    assert "budget 40.0 s" in cut.stdout and "cut from ~" in cut.stdout
    assert not out.exists() and "plan:" not in cut.stderr

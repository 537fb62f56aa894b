from __future__ import annotations

import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.helpers import cli
from typer.testing import CliRunner

from clusterbench.cli import app

runner = CliRunner()


def _run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--only", "nosuch"], "unknown benchmark 'nosuch'"),
        (["--set", "gemm.sizes=1"], "gemm.sizes: unknown key"),
        (["--set", "gemm.repeats=0"], "gemm.repeats"),
        (["--suite", "huge"], "unknown suite 'huge'"),
        (["--nproc", "0"], "--nproc must be at least 1"),
        (["--device", "tpu"], "--device must be auto, cuda or cpu"),
        # variants of cases run as real processes in test_every_bad_input_is_one_line_...
        (["--timeout", "inf"], "--timeout must be a positive number of seconds, got inf"),
        (["--timeout", "-1"], "--timeout must be a positive number of seconds, got -1"),
        (["--timeout", "0"], "--timeout must be a positive number of seconds, got 0"),
        (["--set", "thresholds.outlier_mads=nan"], "thresholds.outlier_mads: must be a finite"),
        (["--nproc", "5000", "--oversubscribe"], "at most"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(
    tmp_path: Path, args: list[str], text: str
) -> None:
    out = tmp_path / "run"
    # a repeated option takes its last value, so args may override --device
    result = _run("run", "--device", "cpu", "--out", str(out), *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clusterbench: error:") and text in lines[0]
    assert not out.exists()


def test_malformed_toml_and_unwritable_out(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[gemm\n")
    result = _run("run", "--device", "cpu", "--config", str(bad), "--out", str(tmp_path / "r"))
    assert result.exit_code == 2 and "malformed TOML" in result.stderr
    assert not (tmp_path / "r").exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = _run("run", "--device", "cpu", "--out", str(blocker / "run"))
    assert result.exit_code == 2
    assert "cannot write there" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_out_that_holds_a_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{}")
    result = _run("run", "--device", "cpu", "--out", str(tmp_path))
    assert result.exit_code == 2 and "already holds a run" in result.stderr
    assert (tmp_path / "results.json").read_text() == "{}"


_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
_QUICK = "doctor,gemm,sdc,memory,transfer,collectives"
_FILES = {
    "noise.toml": random.Random(0).randbytes(4096),  # not UTF-8 (checked below)
    "nosuchkey.toml": b"[training]\nnosuchkey = 1\n",
    "timeout-nan.toml": b"timeout_s = nan\n",
    "threshold-inf.toml": b"[thresholds]\ngemm_min_efficiency = inf\n",
}
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


def test_random_bytes_are_not_utf8() -> None:
    with pytest.raises(UnicodeDecodeError):
        _FILES["noise.toml"].decode("utf-8")


def test_help_explains_options() -> None:
    result = _run("run", "--help")
    assert result.exit_code == 0
    for option in (
        "--suite",
        "--only",
        "--skip",
        "--config",
        "--set",
        "--out",
        "--nproc",
        "--oversubscribe",
        "--device",
        "--timeout",
    ):
        assert option in result.output
    from clusterbench.runner import OVERSUBSCRIBE_FACTOR, OVERSUBSCRIBE_MAX

    cap = f"up to {OVERSUBSCRIBE_FACTOR}x the cores, at most {OVERSUBSCRIBE_MAX}"
    assert cap in " ".join(result.output.split())  # the help says the cap the runner applies


def test_version_prints_the_installed_version() -> None:
    from clusterbench._version import __version__

    proc = cli("--version", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"clusterbench {__version__}\n" and __version__
    # eager: it answers before a command's own options are parsed
    proc = cli("--version", "run", "--nproc", "not-a-number", timeout=60)
    assert (proc.returncode, proc.stdout) == (0, f"clusterbench {__version__}\n")


def test_list_names_every_benchmark() -> None:
    result = _run("list")
    assert result.exit_code == 0
    for name in ("gemm", "memory", "transfer", "selftest"):
        assert name in result.output


def test_info_json_is_host_info() -> None:
    from clusterbench.schema import HostInfo

    result = _run("info", "--json")
    assert result.exit_code == 0
    host = HostInfo.model_validate_json(result.stdout)
    assert host.hostname and (host.cpu.threads or 0) > 0


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

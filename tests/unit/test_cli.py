from __future__ import annotations

import random
from pathlib import Path

import pytest
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


_FILES = {
    "noise.toml": random.Random(0).randbytes(4096),  # not UTF-8 (checked below)
    "nosuchkey.toml": b"[training]\nnosuchkey = 1\n",
    "timeout-nan.toml": b"timeout_s = nan\n",
    "threshold-inf.toml": b"[thresholds]\ngemm_min_efficiency = inf\n",
}


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
    from clusterbench.pipeline.workers import OVERSUBSCRIBE_FACTOR, OVERSUBSCRIBE_MAX

    cap = f"up to {OVERSUBSCRIBE_FACTOR}x the cores, at most {OVERSUBSCRIBE_MAX}"
    assert cap in " ".join(result.output.split())  # the help says the cap the runner applies


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

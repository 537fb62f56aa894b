"""The Slurm scripts under examples/: ``bash -n``, and with stand-ins for clusterbench, logger and
scontrol, the prolog's and health check's exit codes and lines."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_FAIL_LINE = "FAIL doctor.gpu.ecc host:n0/cuda:3: uncorrected ECC errors since the driver loaded"


@pytest.mark.parametrize("script", sorted((EXAMPLES / "slurm").glob("*.sh")), ids=lambda p: p.name)
def test_slurm_scripts_parse(script: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert os.access(script, os.X_OK)


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(script: str, tmp_path: Path, doctor: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The script with a stand-in clusterbench (``doctor``: its shell body) and logger and
    scontrol that write their arguments and input to files in ``tmp_path``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    _stub(bin_dir, "fake-clusterbench", doctor)
    _stub(bin_dir, "logger", f'echo "$@" >> {tmp_path}/logger.args; cat >> {tmp_path}/logger.in')
    _stub(bin_dir, "scontrol", f'echo "$@" >> {tmp_path}/scontrol.args')
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CLUSTERBENCH": str(bin_dir / "fake-clusterbench"),
        "SLURMD_NODENAME": "n0",
    }
    proc = subprocess.run(
        ["bash", str(EXAMPLES / "slurm" / script)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    return proc, tmp_path


def test_prolog_exits_1_on_a_fail_and_logs_the_lines(tmp_path: Path) -> None:
    doctor = f'echo "{_FAIL_LINE}"; echo "clusterbench doctor --fast n0: FAIL (1 fail)"; exit 1'
    proc, logs = _run("prolog-clusterbench.sh", tmp_path, doctor)
    assert proc.returncode == 1, proc.stderr  # Slurm drains the node and requeues the job
    assert _FAIL_LINE in (logs / "logger.in").read_text()
    assert "-t clusterbench-prolog" in (logs / "logger.args").read_text()
    assert not (logs / "scontrol.args").exists()  # a Prolog calls no Slurm command


def test_prolog_passes_a_healthy_node_and_a_broken_install(tmp_path: Path) -> None:
    healthy, _ = _run("prolog-clusterbench.sh", tmp_path / "a", 'echo "...: OK (2 info)"; exit 0')
    assert healthy.returncode == 0
    broken, logs = _run("prolog-clusterbench.sh", tmp_path / "b", "exit 127")
    assert broken.returncode == 0  # not installed: say so, do not drain every node
    assert "could not run (exit 127)" in (logs / "logger.args").read_text()


def test_prolog_fails_a_node_where_the_check_never_ends(tmp_path: Path) -> None:
    start = time.monotonic()
    proc, logs = _run("prolog-clusterbench.sh", tmp_path, "exec sleep 60")
    assert proc.returncode == 1
    assert time.monotonic() - start < 20  # timeout 9 s (+1 s to kill), not the 60 s sleep
    assert "did not finish in 10 s (exit 124)" in (logs / "logger.args").read_text()


def test_healthcheck_drains_with_the_first_fail_as_reason(tmp_path: Path) -> None:
    doctor = f'echo "WARN doctor.x host:n0: w"; echo "{_FAIL_LINE}"; echo "...: FAIL"; exit 1'
    proc, logs = _run("healthcheck-clusterbench.sh", tmp_path / "a", doctor)
    assert proc.returncode == 0, proc.stderr
    assert (logs / "scontrol.args").read_text() == (
        f"update nodename=n0 state=drain reason=clusterbench: {_FAIL_LINE}\n"
    )
    healthy, logs = _run("healthcheck-clusterbench.sh", tmp_path / "b", "exit 0")
    assert healthy.returncode == 0 and not (logs / "scontrol.args").exists()

"""``clusterbench doctor --dcgm LEVEL``: run ``dcgmi diag -r LEVEL -j`` and fold it in.

dcgmi runs through its own runner, not :data:`~clusterbench.doctor._sources.Runner`: a Runner
gives up after 5 s and drops the output of a command that exits non-zero, while a diagnostic
runs for seconds to hours and exits non-zero exactly when it has results to tell (a failed test).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence

from clusterbench.doctor.dcgm import LEVELS, diag_findings, parse_diag, unavailable
from clusterbench.schema import Finding

__all__ = ["DIAG_TIMEOUT_S", "dcgm_findings"]

DIAG_TIMEOUT_S: dict[int, float] = {1: 120.0, 2: 900.0, 3: 3600.0, 4: 4 * 3600.0}
"""Seconds ``dcgmi diag -r LEVEL`` may run.  dcgmi's help gives level 1 "~ seconds", 2 "~ 2
minutes", 3 "~ 15 minutes", 4 longer still; these leave room for slow starts and many GPUs."""
_STOP_GRACE_S = 30.0  # after SIGTERM, dcgmi stops the running diagnostic before it exits
_START_HOST_ENGINE = "systemctl enable --now nvidia-dcgm (it runs nv-hostengine)"


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to dcgmi's process group (dcgmi then stops the diagnostic it runs in the host
    engine, dcgmi/main_dcgmi.cpp), SIGKILL if it has not exited after a grace period."""
    for sig, wait_s in ((signal.SIGTERM, _STOP_GRACE_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.communicate(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _run(cmd: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``cmd``'s output; past ``timeout_s`` (or on Ctrl-C) its process group is stopped and the
    exception re-raised.  A group of its own: a child that holds the pipes is stopped too."""
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        _stop(proc)
        raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)


def _first_line(*texts: str) -> str:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip()[:200]
    return "no output"


def _not_installed(level: int, host: str) -> Finding:
    return unavailable(
        f"dcgmi is not installed: DCGM diag -r {level} skipped",
        host=host,
        evidence={"level": level},
        fix="install DCGM from NVIDIA's CUDA repository (package datacenter-gpu-manager-4-cuda12 "
        f"or -cuda13; datacenter-gpu-manager for DCGM 3) and start its host engine: "
        f"{_START_HOST_ENGINE}",
    )


def _timed_out(level: int, host: str, timeout_s: float) -> Finding:
    return Finding(
        id="doctor.dcgm.timeout",
        severity="warn",
        scope=f"host:{host}",
        message=f"dcgmi diag -r {level} did not finish within {timeout_s:g} s and was stopped",
        evidence={"level": level, "timeout_s": timeout_s},
        fix=f"run 'dcgmi diag -r {level}' by hand on the idle node; a diagnostic that hangs "
        "points at a GPU that stopped answering: dmesg | grep -i xid",
    )


def _no_results(level: int, host: str, done: subprocess.CompletedProcess[str], why: str) -> Finding:
    said = _first_line(done.stderr, done.stdout)
    return unavailable(
        f"dcgmi diag -r {level} printed no DCGM results ({why}; exit status {done.returncode}): "
        f"{said}",
        host=host,
        evidence={"level": level, "returncode": done.returncode, "output": said},
        fix=f"run 'dcgmi diag -r {level} -j' by hand; if it cannot reach the host engine: "
        f"{_START_HOST_ENGINE}",
    )


def dcgm_findings(
    level: int,
    *,
    host: str,
    timeout_s: float | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> list[Finding]:
    """Run ``dcgmi diag -r LEVEL -j`` (1-4) and turn its results into findings; without dcgmi,
    or when it cannot run or prints no DCGM JSON, one info finding saying so."""
    if level not in LEVELS:
        raise ValueError(f"the DCGM diagnostic level is 1, 2, 3 or 4, not {level}")
    exe = which("dcgmi")
    if exe is None:
        return [_not_installed(level, host)]
    timeout = DIAG_TIMEOUT_S[level] if timeout_s is None else timeout_s
    try:
        done = _run([exe, "diag", "-r", str(level), "-j"], timeout)
    except subprocess.TimeoutExpired:
        return [_timed_out(level, host, timeout)]
    except OSError as exc:
        fix = "check the DCGM installation (dcgmi --version)"
        return [unavailable(f"dcgmi could not start: {exc}", host=host, evidence={}, fix=fix)]
    try:
        report = parse_diag(done.stdout)
    except ValueError as exc:
        return [_no_results(level, host, done, str(exc))]
    return diag_findings(report, level=level, host=host)

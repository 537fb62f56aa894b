"""``clusterbench doctor --fast``: every check of this node under one deadline, for schedulers.

A Slurm prolog is expected to finish within MessageTimeout (10 s by default, slurm.conf(5),
"Prolog"), a Kubernetes probe within its timeoutSeconds; a node check that hangs there holds
every job that lands on the node.  So the whole check runs against one clock: starting NVML and
probing the GPUs (a GPU that stopped answering hangs ``nvmlInit`` already), then every check at
once, each in its own thread (:func:`clusterbench.doctor.deadline.run_within`), and every
command killed after a few seconds (:class:`~clusterbench.doctor.deadline.BoundedRunner`).
The checks share one NVML session across their threads: NVML is thread-safe ("it is safe to
make simultaneous NVML calls from multiple threads", NVML API Reference).

What did not finish by the deadline is a ``fail`` finding: on a scheduler's node check, a check
that hangs is the clearest sign of a sick node (the job would hang in the same call), and
passing a node that was not checked would hide it.  A killed command is a ``warn``: programs
such as ``lspci -vvv`` can be slow on a large healthy machine, and a hang of the GPU itself
shows in the NVML checks, which are in-process and do fail.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench.doctor import run_checks
from clusterbench.doctor._sources import Check
from clusterbench.doctor.deadline import LATE_ID, BoundedRunner, late_finding, start_call
from clusterbench.hardware.probe import AUTO, nvml_session, probe_host
from clusterbench.schema import Finding, HostInfo

__all__ = [
    "FAST_BUDGET_S",
    "FAST_COMMAND_TIMEOUT_S",
    "FAST_MIN_WINDOW_S",
    "PROBE_FAILED_ID",
    "FastCheck",
    "check_node_fast",
    "check_window_s",
    "process_age_s",
]

FAST_BUDGET_S = 8.5
"""Seconds from the process's start by which the checks must be done: under the 10 s target,
with room to print and exit.  Starting Python and importing clusterbench (torch among it) take
part of it, 3 s on a 2-core machine and more on a loaded one, so the checks get what is left
(:func:`check_window_s`); scripts/doctor_fast_time.py measures the whole command."""
FAST_MIN_WINDOW_S = 2.0
"""The checks' window when the start alone ate the budget: a slow import (a virtual
environment on a network file system) must not fail a healthy node, so the checks still get
this long and the command runs late instead."""
FAST_COMMAND_TIMEOUT_S = 3.0
"""Seconds one external command (``lspci -vvv``, ``journalctl``) may run before it is killed."""
PROBE_FAILED_ID = "doctor.probe_failed"
_SLACK_S = 0.5  # past the deadline: the checks' own deadline returns first, this only waits it


@dataclass(frozen=True, kw_only=True, slots=True)
class FastCheck:
    """What ``doctor --fast`` found, and whether it left a hung thread behind."""

    hostname: str
    findings: list[Finding]
    elapsed_s: float
    abandoned: bool
    """Some check (or the probe) is still running: exit without waiting for it (``os._exit``)."""


@dataclass(slots=True)
class _Box:
    ready: threading.Event = field(default_factory=threading.Event)
    host: HostInfo | None = None
    findings: list[Finding] | None = None
    error: Exception | None = None


def _unfinished(box: _Box, *, scope: str, deadline_s: float) -> Finding:
    error = box.error
    if error is not None:
        return Finding(
            id=PROBE_FAILED_ID,
            severity="fail",
            scope=scope,
            message=f"doctor could not check this node ({type(error).__name__}: {error}), so "
            "it is not known to be healthy",
            evidence={"error": f"{type(error).__name__}: {error}"},
            fix="run 'clusterbench info' on the node to see what fails; report it with that output",
        )
    stage = "hardware.probe_host (NVML start, GPU inventory)" if box.host is None else "checks"
    return late_finding(stage, scope=scope, deadline_s=deadline_s)


def process_age_s() -> float:
    """Seconds since this process started: its start in clock ticks since boot
    (``/proc/self/stat`` field 22, proc(5)) against CLOCK_BOOTTIME, to 10 ms; elsewhere psutil's
    start time, which rests on the boot time in whole seconds."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22; the list starts at 3
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started_s)
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())


def check_window_s(
    *, age_s: float, budget_s: float = FAST_BUDGET_S, min_window_s: float = FAST_MIN_WINDOW_S
) -> float:
    """Seconds the checks may take in a process ``age_s`` old: what the budget leaves, but at
    least ``min_window_s``."""
    return max(min_window_s, budget_s - age_s)


def check_node_fast(
    *,
    env: Mapping[str, str],
    checkpoint_dir: str | Path | None = None,
    deadline_s: float | None = None,
    command_timeout_s: float = FAST_COMMAND_TIMEOUT_S,
    checks: Sequence[Check] | None = None,
    probe: Callable[..., HostInfo] | None = None,
    nvml: Any = AUTO,
) -> FastCheck:
    """Probe this node and run every check (or ``checks``) within ``deadline_s`` in all
    (default: :func:`check_window_s` of this process's age).  ``probe(nvml=...)`` and ``nvml``
    are replaceable for tests (``nvml=None``: no NVML); the probe reads torch's version from
    its files, not by importing it (seconds)."""
    start = time.monotonic()
    if probe is None:
        probe = functools.partial(probe_host, import_torch=False)
    if deadline_s is None:
        deadline_s = check_window_s(age_s=process_age_s())
    runner = BoundedRunner(timeout_s=command_timeout_s, deadline=start + deadline_s)
    box = _Box()

    def work() -> None:
        try:
            with nvml_session(nvml) as lib:
                box.host = probe(nvml=lib)
                box.findings = run_checks(
                    host=box.host,
                    env=env,
                    nvml=lib,
                    checkpoint_dir=checkpoint_dir,
                    run=runner,
                    checks=checks,
                    deadline_s=max(0.0, deadline_s - (time.monotonic() - start)),
                )
                box.ready.set()  # before nvmlShutdown, which waits for a check hung in NVML
        except Exception as exc:  # a probe that raises: reported as the node's finding
            box.error = exc
        finally:
            box.ready.set()

    call = start_call(work, name="doctor --fast")
    box.ready.wait(deadline_s + _SLACK_S)
    hostname = box.host.hostname if box.host is not None else socket.gethostname()
    scope = f"host:{hostname}"
    if box.findings is None:
        findings = [_unfinished(box, scope=scope, deadline_s=deadline_s)]
    else:
        findings = [*box.findings, *runner.findings(scope=scope)]
    return FastCheck(
        hostname=hostname,
        findings=findings,
        elapsed_s=time.monotonic() - start,
        abandoned=not call.done.is_set() or any(f.id == LATE_ID for f in findings),
    )

"""Checks under a deadline: each check in a thread of its own, a late one reported as a finding.

What makes a node check hang is the node itself: an NVML call to a GPU that fell off the bus, a
``statvfs`` or a read of a file system stuck in D state, a ``nvidia-smi`` that never returns.
Python cannot interrupt a thread blocked in such a call, so a late check is left behind and its
thread is a daemon: it does not hold the process at exit (``concurrent.futures`` workers would,
they are joined at interpreter exit).  Commands are different: :class:`BoundedRunner` kills a
program that runs past its time, and says so.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from clusterbench.doctor._sources import Check, Sources
from clusterbench.schema import Finding, Severity

__all__ = [
    "COMMAND_TIMEOUT_ID",
    "LATE_ID",
    "BoundedRunner",
    "Call",
    "check_name",
    "late_finding",
    "run_within",
    "start_call",
]

log = logging.getLogger(__name__)

LATE_ID = "doctor.check_timeout"
COMMAND_TIMEOUT_ID = "doctor.command_timeout"

T = TypeVar("T")
_HANDOFF_S = 0.2  # a killed command's check still has to return before the deadline


@dataclass(slots=True)
class Call(Generic[T]):
    """One function running in a daemon thread: its value, or the exception it raised."""

    name: str
    done: threading.Event = field(default_factory=threading.Event)
    value: T | None = None
    error: BaseException | None = None

    def wait(self, timeout_s: float) -> bool:
        """Whether the call finished within ``timeout_s`` (0 or less: only if it already has)."""
        return self.done.wait(max(0.0, timeout_s))


def start_call(fn: Callable[[], T], *, name: str) -> Call[T]:
    """Run ``fn()`` in a daemon thread and return at once; ``Call.wait`` for its result."""
    call: Call[T] = Call(name=name)

    def target() -> None:
        try:
            call.value = fn()
        except Exception as exc:  # handed to the caller, which decides what it means
            call.error = exc
        finally:
            call.done.set()

    threading.Thread(target=target, name=f"doctor:{name}", daemon=True).start()
    return call


def check_name(check: Check) -> str:
    """``nvlink_p2p.check_p2p``: the check's module (its family) and function."""
    return f"{check.__module__.rsplit('.', 1)[-1]}.{check.__name__}"


def late_finding(
    name: str, *, scope: str, deadline_s: float, severity: Severity = "fail"
) -> Finding:
    """A check (or the probe) that did not finish in time; the hang is itself the symptom."""
    return Finding(
        id=LATE_ID,
        severity=severity,
        scope=scope,
        message=f"check {name} did not finish within {deadline_s:.1f} s: something on this "
        "node hangs (a GPU that stopped answering NVML, a file system in D state)",
        evidence={"check": name, "deadline_s": round(deadline_s, 3)},
        fix="drain the node and look: dmesg | grep -iE 'xid|nvrm|hung'; nvidia-smi; "
        "ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/' (processes stuck in D state); "
        "mount (a dead network file system)",
    )


def run_within(
    checks: Sequence[Check],
    src: Sources,
    *,
    deadline_s: float,
    guard: Callable[[Check, Sources], list[Finding]],
    late_severity: Severity = "fail",
) -> list[Finding]:
    """Every check at once, each in its own thread, for at most ``deadline_s`` in all; the
    findings in check order, a check still running at the deadline as a late finding.
    ``guard`` runs one check and turns an exception into a finding (``run_guarded``)."""
    end = time.monotonic() + deadline_s
    calls = [
        (check, start_call(functools.partial(guard, check, src), name=check_name(check)))
        for check in checks
    ]
    findings: list[Finding] = []
    for check, call in calls:
        if call.wait(end - time.monotonic()) and call.value is not None:
            findings.extend(call.value)
        elif call.done.is_set():  # guard itself raised: a bug, not the node
            log.debug("doctor guard for %s raised", call.name, exc_info=call.error)
        else:
            log.debug("doctor check %s still running at the deadline", check_name(check))
            late = late_finding(
                call.name, scope=src.scope, deadline_s=deadline_s, severity=late_severity
            )
            findings.append(late)
    return findings


@dataclass(kw_only=True, slots=True)
class BoundedRunner:
    """A :data:`Runner` that kills a command after ``timeout_s`` and remembers which it killed
    (a check that read nothing because its program hung must not pass in silence)."""

    timeout_s: float
    deadline: float | None = None
    """``time.monotonic()`` by which every command must be done: each gets at most what is left,
    so that a killed command, not the check that waits for it, is what the deadline catches."""
    timed_out: list[tuple[str, ...]] = field(default_factory=list)

    def _time_left(self) -> float:
        if self.deadline is None:
            return self.timeout_s
        return min(self.timeout_s, self.deadline - time.monotonic() - _HANDOFF_S)

    def __call__(self, cmd: Sequence[str]) -> str | None:
        timeout_s = self._time_left()
        try:
            if timeout_s <= 0:
                raise subprocess.TimeoutExpired(list(cmd), 0)  # no time left to start it
            proc = subprocess.run(
                list(cmd), capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            self.timed_out.append(tuple(cmd))  # list.append is atomic: checks share a runner
            return None
        except OSError as exc:
            log.debug("%s: %s", cmd[0], exc)
            return None
        return proc.stdout if proc.returncode == 0 else None

    def findings(self, *, scope: str) -> list[Finding]:
        """A warning per command that ran past ``timeout_s`` and was killed."""
        return [
            Finding(
                id=COMMAND_TIMEOUT_ID,
                severity="warn",
                scope=scope,
                message=f"'{' '.join(cmd)}' did not finish in time (at most {self.timeout_s:g} s) "
                "and was killed: the check that runs it saw nothing",
                evidence={"command": list(cmd), "timeout_s": self.timeout_s},
                fix=f"run '{' '.join(cmd)}' by hand; a program that hangs on this node (nvidia-smi "
                "above all) points at the GPU or the driver: dmesg | grep -i xid",
            )
            for cmd in dict.fromkeys(self.timed_out)
        ]

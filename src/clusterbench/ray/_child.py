"""Run a command that is told (SIGTERM) when the Ray worker that started it ends.

    python .../clusterbench/ray/_child.py PARENT_PID COMMAND...

Ray ends a training worker with a kill: its own process, and the processes it started
directly, get no chance to say anything.  ``clusterbench run``, ended that way, would leave its
run without results.json.  So the Ray worker starts this small process (run by its path, so
that it imports neither clusterbench nor torch), which starts the command in a session of its
own and waits: when the Ray worker goes (killed, or its node preempted) this process goes too
(Linux's parent-death signal, SIGKILL), and the command gets SIGTERM (the same signal, set
for it) -- what torchrun sends the survivors of a rank that died, and what ``clusterbench
run`` answers by writing who stopped first.  The exit code is the command's (128 + N for a
signal N).  Elsewhere than Linux there is no parent-death signal and the command runs plain.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1
"""prctl option: the signal this process gets when its parent thread ends (linux/prctl.h)."""


def die_with_parent(sig: int, *, parent: int) -> None:
    """Have this process get ``sig`` when ``parent`` (the process that started it) ends."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return
    prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:  # it ended before the call above
        os.kill(os.getpid(), sig)


def main(argv: list[str]) -> int:
    parent, command = int(argv[0]), argv[1:]
    die_with_parent(signal.SIGKILL, parent=parent)
    me = os.getpid()
    # preexec_fn is safe here: this process has one thread
    proc = subprocess.Popen(
        command,
        start_new_session=True,  # out of the Ray worker's process group, which Ray kills
        preexec_fn=lambda: die_with_parent(signal.SIGTERM, parent=me),
    )
    code = proc.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

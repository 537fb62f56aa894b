"""Whose a trace is, for ``clusterbench analyze``: its rank and its host.

The rank is the trace's ``distributedInfo.rank``, else a number in the file's name
(``rank-3``, ``rank_3``, ``rank3``), else, for the one file given, 0, else, the last resort,
the N of a worker name ``workerN`` (:func:`worker_rank`).  The host is the trace's
``host_name`` (Kineto writes ``gethostname()`` there since pytorch/kineto#1323, March 2026),
else the file's name where it is ``tensorboard_trace_handler``'s default: the handler names a
file ``{worker_name}.{time}.pt.trace.json[.gz]`` with ``worker_name`` ``{hostname}_{pid}``
unless given one (torch/profiler/profiler.py), so ``HOST_PID`` is read as a host only where PID is
the pid of the process the trace recorded (its host events' ``pid``); a worker name of the
job's own (``worker0_step_12``) is not a host, and the host is unknown.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["host_of", "rank_of", "worker_rank"]

_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_WORKER_IN_NAME = re.compile(r"(?<![a-z])worker(\d+)", re.IGNORECASE)
_HANDLER_NAME = re.compile(
    r"^(?P<worker>(?P<host>.+)_(?P<pid>\d+))\.\d+\.pt\.trace\.json(?:\.gz)?$"
)


def rank_of(path: Path, info: dict[str, Any]) -> tuple[int, str] | None:
    """The rank and where it was read: ``distributedInfo.rank``, else ``rank-N`` in the
    file's name."""
    rank = info.get("rank")
    if isinstance(rank, int) or (isinstance(rank, str) and rank.isdigit()):
        return int(rank), "distributedInfo"
    m = _RANK_IN_NAME.search(path.name)
    return (int(m.group(1)), "file name") if m else None


def worker_rank(path: Path, pid: int | None) -> int | None:
    """The N of ``workerN`` in the file's name: the TensorBoard profiler plugin calls each
    process of a job a worker and its tests name a DDP job's two ranks' traces ``worker0``
    and ``worker1`` (pytorch/kineto, tb_plugin/test/test_profiler.py,
    ``test_distributed_nccl``, commit 041e7ce99f1562dd81232ee58b7c454ef16bfae2), as
    ``tensorboard_trace_handler(dir, worker_name=f"worker{rank}")`` does.  The last resort:
    the plugin's own tests also name one process's cycles ``worker{step_num}``
    (tb_plugin/test/test_compare_with_autograd.py), and a Kubernetes pod's host name
    (``job-worker3``) is not a rank, so none is read from ``tensorboard_trace_handler``'s
    default ``HOST_PID`` name where PID is this process's."""
    m = _HANDLER_NAME.match(path.name)
    if m is not None and pid is not None and int(m.group("pid")) == pid:
        return None
    w = _WORKER_IN_NAME.search(path.name)
    return int(w.group(1)) if w else None


def host_of(path: Path, pid: int | None) -> tuple[str, str | None]:
    """The host in ``tensorboard_trace_handler``'s default file name (``HOST_PID.TIME...``)
    where PID is the trace's process, else unknown; and the name's worker part where it looks
    like the default but its PID is not the process's (a worker name of the job's own)."""
    m = _HANDLER_NAME.match(path.name)
    if m is None:
        return "unknown", None
    if pid is not None and int(m.group("pid")) == pid:
        return m.group("host"), None
    return "unknown", m.group("worker")

"""NCCL's own view of a run: its INFO log, and the transport, algorithm and protocol it chose.

With ``--nccl-debug`` every rank runs with NCCL_DEBUG=INFO writing to a file of its own; after
the run the log is kept in the run folder and read for the lines that say how data moved
("via P2P/CUMEM", "via SHM", "via NET/IB", "via NET/Socket") and, from the TUNING subsystem,
which algorithm and protocol each collective size used.

The NCCL tuning sweep (``collectives.tune``) needs the log too, as proof that each setting took
effect: at every communicator's start NCCL logs, in its ENV subsystem, ``NCCL_ALGO set by
environment to <value>`` (and the same of NCCL_PROTO; src/graph/tuning.cc ncclTopoTuneModel)
and, in INIT, ``<n> coll channels, ... <m> p2p channels, ...`` (src/init.cc).  NCCL writes its
log line-buffered (src/debug.cc), so the bytes appended after an offset taken just before a
communicator starts are that communicator's lines (:func:`log_offset`, :func:`read_log_from`,
:func:`parse_comm_log`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CommLog",
    "OpChoice",
    "debug_env",
    "debug_log_path",
    "keep_log",
    "log_offset",
    "parse_comm_log",
    "parse_nccl_log",
    "read_log_from",
    "tune_log_problem",
]

# NCCL's enums (src/include/devcomm.h): NCCL_ALGO_* and NCCL_PROTO_* in declaration order.
_ALGOS = ["TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"]
_PROTOS = ["LL", "LL128", "SIMPLE"]

# The network's name runs to the "/" before the device number and may hold a space or an
# underscore: "via NET/AWS Libfabric/0/GDRDMA" (aws-ofi-nccl), "via NET/IBext_v8/2" (the
# HPC-X IB plugin); "Using network AWS Libfabric" likewise ends only with its line.
_VIA = re.compile(r"\bvia (P2P|SHM|NET/[^/\n]+(?=/)|COLLNET|NVLS)[^\s]*")
_NETWORK = re.compile(r"Using network ([^\r\n]*\S)")
_TUNING = re.compile(r"(?:(\w+): )?(\d+) Bytes -> Algo (\w+) proto (\w+)")
# The key of TUNING lines that name no collective ("NCCL INFO 256 Bytes -> Algo 0 proto 0 time
# 25.229528", as some releases log them).
_UNNAMED_OP = "(op not named)"
_CHOICE = re.compile(
    r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)"
    r"(?: channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\})?"
)  # "channel{Lo..Hi}" since NCCL 2.24.3 (src/enqueue.cc); names since then, numbers before
_ENV_SET = re.compile(r"NCCL INFO (NCCL_ALGO|NCCL_PROTO) set by environment to (\S+)")
_CHANNELS = re.compile(r"NCCL INFO (\d+) coll channels, .*?(\d+) p2p channels,")


def debug_log_path(rank: int) -> Path:
    return Path(tempfile.gettempdir()) / f"clusterbench-nccl-rank{rank}.log"


def debug_env(rank: int, *, per_op: bool = True) -> dict[str, str]:
    """Variables that make NCCL log INFO (init, graph, network, tuning) to this rank's file.

    ``per_op`` False: INIT and ENV only, what the tuning sweep's proof needs, without TUNING's
    line per collective (a log write on the host path of every collective of the run)."""
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,GRAPH,NET,TUNING,ENV" if per_op else "INIT,ENV",
        "NCCL_DEBUG_FILE": str(debug_log_path(rank)),
    }


def keep_log(source: Path, target: Path) -> None:
    """Move NCCL's log into the run folder, whole or not at all.

    Copied to a temporary file beside ``target`` (flushed to the disk) and renamed over it;
    only then is ``source`` removed.  An OSError (a full or failing disk) leaves no temporary
    file and ``source`` where it was.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        with open(source, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):
        source.unlink()


def _name(value: str, names: list[str]) -> str:
    return names[int(value)] if value.isdigit() and int(value) < len(names) else value.upper()


def parse_nccl_log(text: str) -> dict[str, Any]:
    """Transports, network, and algorithm/protocol choices found in an NCCL INFO log."""
    transports = Counter(m.group(1) for m in _VIA.finditer(text))
    networks = sorted(set(_NETWORK.findall(text)))
    choices: dict[str, set[str]] = {}
    for op, _size, algo, proto in _TUNING.findall(text):
        key = f"{_name(algo, _ALGOS)}/{_name(proto, _PROTOS)}"
        choices.setdefault(op or _UNNAMED_OP, set()).add(key)
    return {
        "transports": dict(transports),
        "networks": networks,
        "algorithms": {op: sorted(v) for op, v in sorted(choices.items())},
    }


# --- one communicator's lines (the tuning sweep's proof) -----------------------------------


@dataclass(frozen=True, slots=True)
class OpChoice:
    """One ``AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..7}`` line
    (TUNING subsystem, communicator rank 0 only)."""

    func: str
    """NCCL's name of the collective: AllReduce, AllGather, ReduceScatter, ..."""
    nbytes: int
    """NCCL's count x element size: the buffer of all_reduce, one rank's chunk of all_gather
    and reduce_scatter."""
    algo: str
    """RING, TREE, PAT, ... (NCCL's ncclAlgoToString)."""
    proto: str
    """LL, LL128, SIMPLE."""
    channels: int | None
    """Channels the op ran on (Hi - Lo + 1); None in logs of NCCL before 2.24.3."""


@dataclass(frozen=True, slots=True)
class CommLog:
    """What a stretch of one rank's NCCL log says about the communicator(s) started in it."""

    env: dict[str, list[str]]
    """NCCL_ALGO / NCCL_PROTO -> the values NCCL says it read, one per communicator start."""
    coll_channels: list[int]
    """The collective channel count of each communicator started (its INIT line)."""
    p2p_channels: list[int]
    """Its send/recv channel count (all_to_all runs on these)."""
    choices: list[OpChoice]


def parse_comm_log(text: str) -> CommLog:
    """The ENV, INIT channel and per-op TUNING lines of ``text``, in their order."""
    env: dict[str, list[str]] = {}
    for var, value in _ENV_SET.findall(text):
        env.setdefault(var, []).append(value)
    channels = [(int(c), int(p)) for c, p in _CHANNELS.findall(text)]
    choices = [
        OpChoice(
            func=func,
            nbytes=int(nbytes),
            algo=_name(algo, _ALGOS),
            proto=_name(proto, _PROTOS),
            channels=int(hi) - int(lo) + 1 if lo else None,
        )
        for func, nbytes, algo, proto, lo, hi in _CHOICE.findall(text)
    ]
    return CommLog(
        env=env,
        coll_channels=[c for c, _ in channels],
        p2p_channels=[p for _, p in channels],
        choices=choices,
    )


def log_offset(path: Path) -> int:
    """The size of NCCL's log now (0 before NCCL opened it)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_log_from(path: Path, offset: int) -> str:
    """What NCCL appended to its log after ``offset``."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def tune_log_problem(env: Mapping[str, str]) -> str | None:
    """Why NCCL's log, as ``env`` configures it, cannot prove a setting took effect; None when
    it can (INFO level, the ENV and INIT subsystems on, one plain file)."""
    subsystems = {s.strip().upper() for s in env.get("NCCL_DEBUG_SUBSYS", "INIT,ENV").split(",")}
    path = env.get("NCCL_DEBUG_FILE", "")
    if env.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        return "NCCL_DEBUG is not INFO"
    if any(s.startswith("^") for s in subsystems) or not (
        "ALL" in subsystems or {"ENV", "INIT"} <= subsystems
    ):
        return f"NCCL_DEBUG_SUBSYS={env.get('NCCL_DEBUG_SUBSYS')} leaves out ENV or INIT"
    if not path or "%" in path:
        return "NCCL_DEBUG_FILE does not name one file"
    if not Path(path).is_file():
        return f"NCCL's log {path} does not exist"
    return None

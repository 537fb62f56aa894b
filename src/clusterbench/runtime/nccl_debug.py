"""NCCL's own view of a run: its INFO log, and the transport, algorithm and protocol it chose.

With ``--nccl-debug`` every rank runs with NCCL_DEBUG=INFO writing to a file of its own; after
the run the log is kept in the run folder and read for the lines that say how data moved
("via P2P/CUMEM", "via SHM", "via NET/IB", "via NET/Socket") and, from the TUNING subsystem,
which algorithm and protocol each collective size used.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["debug_env", "keep_log", "parse_nccl_log"]

# NCCL's enums (src/include/devcomm.h): NCCL_ALGO_* and NCCL_PROTO_* in declaration order.
_ALGOS = ["TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"]
_PROTOS = ["LL", "LL128", "SIMPLE"]

_VIA = re.compile(r"\bvia (P2P|SHM|NET/[A-Za-z]+|COLLNET|NVLS)[^\s]*")
_NETWORK = re.compile(r"Using network (\w+)")
_TUNING = re.compile(r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)")


def debug_log_path(rank: int) -> Path:
    return Path(tempfile.gettempdir()) / f"clusterbench-nccl-rank{rank}.log"


def debug_env(rank: int) -> dict[str, str]:
    """Variables that make NCCL log INFO (init, graph, network, tuning) to this rank's file."""
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,GRAPH,NET,TUNING,ENV",
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
        choices.setdefault(op, set()).add(key)
    return {
        "transports": dict(transports),
        "networks": networks,
        "algorithms": {op: sorted(v) for op, v in sorted(choices.items())},
    }

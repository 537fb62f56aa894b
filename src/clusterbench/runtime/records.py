"""Per-rank partial files: each rank appends what it did, one JSON line at a time.

A crash, hang or Ctrl-C loses nothing already written: the run is assembled from these files.
Record kinds: ``hello`` (rank, host, device), ``host`` (inventory, local rank 0 only), ``start``,
``measurement``, ``end``, ``skip``, ``error`` (with ``while_waiting`` when the rank was only
waiting for others), ``interrupted``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

__all__ = ["RankLog", "read_rank_file", "read_records"]

RANKS_DIR = "ranks"


class RankLog:
    """One rank's records, appended to its file as they come.  ``keep_unsent``: also hold
    them until :meth:`take_unsent` (joined runs, where rank 0 gathers them over the network;
    a self-launched run reads the files instead)."""

    def __init__(self, run_dir: Path, rank: int, *, keep_unsent: bool = False) -> None:
        path = Path(run_dir) / RANKS_DIR / f"rank-{rank:05d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.rank = rank
        self._seq = 0
        self._keep_unsent = keep_unsent
        self._unsent: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # the watchdog thread writes too
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the run's life

    def write(self, kind: str, **payload: Any) -> dict[str, Any]:
        with self._lock:
            record = {"kind": kind, "rank": self.rank, "seq": self._seq, **payload}
            self._seq += 1
            self._fh.write(json.dumps(record, default=str) + "\n")
            self._fh.flush()
            if self._keep_unsent:
                self._unsent.append(record)
            return record

    def take_unsent(self) -> list[dict[str, Any]]:
        """The records written since the last call (what rank 0 has not gathered yet)."""
        with self._lock:
            out, self._unsent = self._unsent, []
            return out

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def read_rank_file(path: Path) -> list[dict[str, Any]]:
    """The records of one partial file; a torn last line (a killed rank) is dropped."""
    records: list[dict[str, Any]] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    """Every record of every rank's partial file in ``run_dir``."""
    records: list[dict[str, Any]] = []
    for path in sorted((Path(run_dir) / RANKS_DIR).glob("rank-*.jsonl")):
        records.extend(read_rank_file(path))
    return records

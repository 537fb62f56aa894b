"""Per-rank partial files: each rank appends what it did, one JSON line at a time.

A crash, hang or Ctrl-C loses nothing already written: the run is assembled from these files.
Each line is one :data:`Record`, told apart by its ``kind``: ``hello`` (rank, host, device),
``host`` (inventory, local rank 0 only), ``start``, ``measurement``, ``finding``, ``end``,
``skip``, ``error`` (with ``while_waiting`` when the rank was only waiting for others),
``interrupted`` and ``nccl``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from clusterbench.schema import Finding, HostInfo, Measurement, NcclRankInfo

__all__ = [
    "End",
    "Error",
    "FindingRecord",
    "Hello",
    "HostRecord",
    "Interrupted",
    "MeasurementRecord",
    "NcclRecord",
    "RankLog",
    "Record",
    "Skip",
    "Start",
    "parse_record",
    "read_rank_file",
    "read_records",
]

RANKS_DIR = "ranks"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rank: int = -1
    """Filled in by :class:`RankLog` when written."""
    seq: int = -1
    """This rank's record number: (rank, seq) names a record, so copies can be dropped."""


class Hello(_Record):
    kind: Literal["hello"] = "hello"
    host: str
    local_rank: int
    device: str


class HostRecord(_Record):
    kind: Literal["host"] = "host"
    data: HostInfo


class Start(_Record):
    kind: Literal["start"] = "start"
    benchmark: str


class End(_Record):
    kind: Literal["end"] = "end"
    benchmark: str


class Skip(_Record):
    kind: Literal["skip"] = "skip"
    benchmark: str
    reason: str


class MeasurementRecord(_Record):
    kind: Literal["measurement"] = "measurement"
    data: Measurement


class FindingRecord(_Record):
    kind: Literal["finding"] = "finding"
    data: Finding


class Error(_Record):
    kind: Literal["error"] = "error"
    benchmark: str | None = None
    message: str
    while_waiting: bool = False
    """The rank failed only because it waited for another (a peer died or hung)."""
    timeout: bool = False
    traceback: str | None = None


class Interrupted(_Record):
    kind: Literal["interrupted"] = "interrupted"
    benchmark: str | None = None


class NcclRecord(_Record):
    kind: Literal["nccl"] = "nccl"
    data: NcclRankInfo


Record = Annotated[
    Hello
    | HostRecord
    | Start
    | End
    | Skip
    | MeasurementRecord
    | FindingRecord
    | Error
    | Interrupted
    | NcclRecord,
    Field(discriminator="kind"),
]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


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
        self._unsent: list[Record] = []
        self._lock = threading.Lock()  # the watchdog thread writes too
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the run's life

    def write(self, record: Record) -> Record:
        """Number ``record`` as this rank's next and append it."""
        with self._lock:
            record = record.model_copy(update={"rank": self.rank, "seq": self._seq})
            self._seq += 1
            fields = record.model_dump(mode="json")
            head = {key: fields.pop(key) for key in ("kind", "rank", "seq")}  # read first
            self._fh.write(json.dumps({**head, **fields}) + "\n")
            self._fh.flush()
            if self._keep_unsent:
                self._unsent.append(record)
            return record

    def take_unsent(self) -> list[Record]:
        """The records written since the last call (what rank 0 has not gathered yet)."""
        with self._lock:
            out, self._unsent = self._unsent, []
            return out

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def parse_record(line: str | dict[str, Any]) -> Record:
    """One record from its JSON line (or the dict of one)."""
    if isinstance(line, str):
        return _RECORD.validate_json(line)
    return _RECORD.validate_python(line)


def read_rank_file(path: Path) -> list[Record]:
    """The records of one partial file; a torn last line (a killed rank) is dropped."""
    records: list[Record] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(_RECORD.validate_json(line))
        except (ValidationError, json.JSONDecodeError):
            continue
    return records


def read_records(run_dir: Path) -> list[Record]:
    """Every record of every rank's partial file in ``run_dir``."""
    records: list[Record] = []
    for path in sorted((Path(run_dir) / RANKS_DIR).glob("rank-*.jsonl")):
        records.extend(read_rank_file(path))
    return records

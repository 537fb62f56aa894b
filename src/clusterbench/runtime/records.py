"""Per-rank partial files: each rank appends what it did, one JSON line at a time.

A crash, hang or Ctrl-C loses nothing already written: the run is assembled from these files.
Each line is one :data:`Record`, told apart by its ``kind``: ``hello`` (rank, host, device),
``host`` (inventory, local rank 0 only), ``start``, ``measurement``, ``finding``, ``end``,
``skip``, ``error`` (with ``while_waiting`` when the rank was only waiting for others),
``interrupted``, ``nccl`` and ``telemetry`` (a benchmark's telemetry window on a GPU rank).
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from clusterbench.schema import (
    BudgetStop,
    Finding,
    HostInfo,
    Measurement,
    NcclRankInfo,
    TelemetryWindow,
)

__all__ = [
    "End",
    "Error",
    "FindingRecord",
    "Hello",
    "HostRecord",
    "Interrupted",
    "MeasurementRecord",
    "NcclRecord",
    "Phase",
    "RankLog",
    "RankLogWriteError",
    "Record",
    "Skip",
    "Start",
    "TelemetryRecord",
    "describe_write_error",
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


class Phase(_Record):
    """How long one phase of this rank's start took (worker start, device init, ...)."""

    kind: Literal["phase"] = "phase"
    name: str
    seconds: float


class HostRecord(_Record):
    kind: Literal["host"] = "host"
    data: HostInfo


class Start(_Record):
    kind: Literal["start"] = "start"
    benchmark: str
    round: int | None = None
    """The soak round (0-based); None outside a soak."""
    at: float | None = None
    """Wall time it started (s since the epoch); None in rank files written before it was
    kept."""


class End(_Record):
    kind: Literal["end"] = "end"
    benchmark: str
    seconds: float | None = None
    """Wall seconds from this rank's ``start`` to its ``end`` (its monotonic clock); None in
    rank files written before it was kept."""
    round: int | None = None
    """The soak round (0-based); None outside a soak."""
    budget_stop: BudgetStop | None = None
    """Where it stopped at its time budget (``ctx.budget.stopped``); None: it ran to the end."""


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
    in_collective: bool = False
    """The error left a collective: it may be a peer's fault (a reset connection)."""
    traceback: str | None = None
    at: float = Field(default_factory=time.time)
    """Wall time the error was recorded (s since the epoch): heartbeats that stopped before it
    tell a dead peer from a waiting one."""


class Interrupted(_Record):
    kind: Literal["interrupted"] = "interrupted"
    benchmark: str | None = None


class NcclRecord(_Record):
    kind: Literal["nccl"] = "nccl"
    data: NcclRankInfo


class TelemetryRecord(_Record):
    kind: Literal["telemetry"] = "telemetry"
    data: TelemetryWindow


Record = Annotated[
    Hello
    | Phase
    | HostRecord
    | Start
    | End
    | Skip
    | MeasurementRecord
    | FindingRecord
    | Error
    | Interrupted
    | NcclRecord
    | TelemetryRecord,
    Field(discriminator="kind"),
]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


class RankLogWriteError(OSError):
    """A record could not be appended to its rank file (its message says why, in one line)."""


def describe_write_error(exc: OSError, path: Path) -> str:
    """``no space left on <path>``, or the system's wording of the error, e.g. ``disk quota
    exceeded on <path>``, ``read-only file system on <path>``."""
    if exc.errno == errno.ENOSPC:
        return f"no space left on {path}"
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{reason[:1].lower()}{reason[1:]} on {path}"


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
        # Unbuffered: a failed write leaves nothing queued that a later write or close would
        # flush after the lines that follow it.
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._good = os.fstat(self._fd).st_size
        """End of the last complete line: where a failed write is cut back to."""
        self._broken: str | None = None

    def write(self, record: Record) -> Record:
        """Number ``record`` as this rank's next and append it.

        Raises :class:`RankLogWriteError` when the line cannot be written (a full or failing
        disk); the file is first cut back to its last complete line, so it stays valid JSON
        lines and the next record may still be written after it.
        """
        with self._lock:
            if self._broken is not None:
                raise RankLogWriteError(self._broken)
            record = record.model_copy(update={"rank": self.rank, "seq": self._seq})
            fields = record.model_dump(mode="json")
            head = {key: fields.pop(key) for key in ("kind", "rank", "seq")}  # read first
            data = (json.dumps({**head, **fields}) + "\n").encode("utf-8")
            try:
                view = memoryview(data)
                while view:  # os.write may write part of it (e.g. the disk fills up)
                    view = view[os.write(self._fd, view) :]
            except OSError as exc:
                message = f"cannot write rank file: {describe_write_error(exc, self.path)}"
                try:
                    os.ftruncate(self._fd, self._good)
                except OSError:  # a torn line stays: write nothing after it
                    self._broken = message
                raise RankLogWriteError(message) from None
            self._good += len(data)
            self._seq += 1
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
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


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

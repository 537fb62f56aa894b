"""Each rank's flight record: where it is now, kept current, and left behind when it dies.

In the spirit of PyTorch's Flight Recorder, but small: one JSON file per rank
(``ranks/rank-NNNNN.flight.json``) holding the benchmark, what the rank is doing in it (the
collective and size it is in, or the peers it waits for) and a heartbeat time.  A background
thread renews the heartbeat every ``interval_s``; every change of activity is written at once.
The file is replaced atomically, so it is always a whole record.

When a run fails the records tell who is who: a rank killed by a signal is dead; a rank whose
heartbeat stopped long before the others' (SIGSTOP, a wedged driver call holding the GIL) hung;
the others were waiting for them, and the record says in what.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "FlightRecorder",
    "FlightState",
    "flight_path",
    "parse_flight",
    "read_flights",
    "store_key",
]

RANKS_DIR = "ranks"


def flight_path(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / RANKS_DIR / f"rank-{rank:05d}.flight.json"


@dataclass(kw_only=True, slots=True)
class FlightState:
    rank: int
    host: str
    pid: int
    benchmark: str = ""
    activity: str = "starting"
    """What the rank is doing: 'running', 'waiting for peers (barrier)', 'in all_reduce of
    16 MiB on group world', ..."""
    since: float = 0.0
    """Wall time (s since the epoch) the activity began."""
    heartbeat: float = 0.0
    """Wall time of the last sign of life."""
    interval_s: float = 1.0
    """How often the heartbeat is renewed."""


class FlightRecorder:
    """Keeps one rank's :class:`FlightState` on disk, current to ``interval_s``."""

    def __init__(
        self,
        path: Path,
        *,
        rank: int,
        host: str,
        interval_s: float = 1.0,
        publish: Callable[[str], None] | None = None,
    ) -> None:
        """``publish``: also hand each record (JSON) to this, e.g. a key of the run's store, so
        that rank 0 can read the records of ranks on other nodes."""
        self.path = Path(path)
        self._publish = publish
        self.path.parent.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self.state = FlightState(
            rank=rank, host=host, pid=os.getpid(), since=now, heartbeat=now, interval_s=interval_s
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="clusterbench-heartbeat",
                                        daemon=True)  # fmt: skip
        self._write()
        self._thread.start()

    def set(self, *, activity: str, benchmark: str | None = None) -> None:
        with self._lock:
            if benchmark is not None:
                self.state.benchmark = benchmark
            self.state.activity = activity
            self.state.since = self.state.heartbeat = time.time()
            self._write_locked()

    @contextlib.contextmanager
    def doing(self, activity: str) -> Iterator[None]:
        """``activity`` for the duration of the block, then what it was before."""
        previous = self.state.activity
        self.set(activity=activity)
        try:
            yield
        finally:
            self.set(activity=previous)

    def close(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        while not self._stop.wait(self.state.interval_s):
            with self._lock:
                self.state.heartbeat = time.time()
                self._write_locked()

    def _write(self) -> None:
        with self._lock:
            self._write_locked()

    def _write_locked(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        try:
            text = json.dumps(asdict(self.state))
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self.path)
            if self._publish is not None:
                self._publish(text)
        except (OSError, RuntimeError):
            # A full disk must not kill the rank from its heartbeat thread; the record on disk
            # stays the last whole one.
            with contextlib.suppress(OSError):
                tmp.unlink()


def store_key(rank: int) -> str:
    return f"clusterbench/flight/{rank}"


def parse_flight(text: str | bytes) -> FlightState | None:
    try:
        return FlightState(**json.loads(text))
    except (ValueError, TypeError):
        return None


def read_flights(run_dir: Path) -> dict[int, FlightState]:
    """Every rank's last flight record in ``run_dir`` (unreadable ones are left out)."""
    out: dict[int, FlightState] = {}
    for path in sorted((Path(run_dir) / RANKS_DIR).glob("rank-*.flight.json")):
        try:
            state = parse_flight(path.read_text(encoding="utf-8"))
        except OSError:
            continue
        if state is not None:
            out[state.rank] = state
    return out

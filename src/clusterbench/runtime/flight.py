"""Each rank's flight record: where it is now, kept current, and left behind when it dies.

In the spirit of PyTorch's Flight Recorder, but small: one JSON file per rank
(``ranks/rank-NNNNN.flight.json``) holding the benchmark, what the rank is doing in it (the
collective and size it is in, or the peers it waits for) and a heartbeat time.  A background
thread renews the heartbeat every ``interval_s``; every change of activity is written at once.
The file is replaced atomically, so it is always a whole record.

When a run fails the records tell who is who: a rank killed by a signal is dead; a rank whose
heartbeat stopped long before the others' (SIGSTOP, a wedged driver call holding the GIL) hung;
the others were waiting for them, and the record says in what.

Where py-spy is installed, a rank that times out saves the Python stack of every rank of its
node whose heartbeat stopped (or, with none, its own) as ``ranks/rank-NNNNN.stack.txt``;
when py-spy cannot read it, ``ranks/rank-NNNNN.stack-failed.txt`` says why in one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "FlightRecorder",
    "FlightState",
    "end_stalled_ranks",
    "flight_path",
    "heartbeat_stopped",
    "parse_flight",
    "read_flights",
    "read_stacks",
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
    ended: str = ""
    """How the rank ended when something ended it, e.g. 'terminated by the launcher (SIGTERM)'."""


STALE_HEARTBEATS = 5
"""Heartbeats a rank may miss, against the latest of any rank, before it counts as hung."""
STALE_MIN_S = 3.0


def heartbeat_stopped(state: FlightState, *, silent_s: float) -> bool:
    """True when ``silent_s`` without a heartbeat means the rank stopped (not a late beat)."""
    return silent_s > max(STALE_MIN_S, STALE_HEARTBEATS * state.interval_s)


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

    def end(self, how: str) -> None:
        """Say how the rank ended (the activity it was in stays), with a last heartbeat."""
        with self._lock:
            self.state.ended = how
            self.state.heartbeat = time.time()
            self._write_locked()

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


# ----------------------------------------------------------------------------- stacks

PY_SPY_TIMEOUT_S = 20.0


def _stack_path(run_dir: Path, rank: int, *, failed: bool = False) -> Path:
    suffix = "stack-failed.txt" if failed else "stack.txt"
    return Path(run_dir) / RANKS_DIR / f"rank-{rank:05d}.{suffix}"


def _py_spy() -> str | None:
    """py-spy beside this Python (a virtual environment's bin), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def _py_spy_error(stderr: str) -> str:
    """py-spy's error and its causes in one line (its Rust backtrace left out)."""
    parts = []
    for line in stderr.split("Stack backtrace:")[0].splitlines():
        text = line.strip().removeprefix("Error:").strip()
        if text and text != "Caused by:":
            parts.append(text.split(": ", 1)[1] if text[:1].isdigit() and ": " in text else text)
    return ": ".join(parts) or "py-spy failed without saying why"


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def save_stack(run_dir: Path, state: FlightState, *, why: str) -> bool:
    """``py-spy dump`` of the rank's process into its stack file; False when py-spy is not
    installed.  ``--nonblocking``: py-spy reads the memory without pausing the process, the
    only way it can read one that is stopped (SIGSTOP)."""
    py_spy = _py_spy()
    if py_spy is None:
        return False
    argv = [py_spy, "dump", "--pid", str(state.pid), "--nonblocking"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PY_SPY_TIMEOUT_S,
                              check=False)  # fmt: skip
        error = None if proc.returncode == 0 else _py_spy_error(proc.stderr)
        output = proc.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        error, output = f"{type(exc).__name__}: {exc}", ""
    head = f"# rank {state.rank} on host {state.host}, {why}: py-spy {' '.join(argv[1:])}\n"
    with contextlib.suppress(OSError):  # a full disk: nothing to keep, the run goes on
        if error is None:
            _write_whole(_stack_path(run_dir, state.rank), head + output)
        else:
            _write_whole(_stack_path(run_dir, state.rank, failed=True), error + "\n")
    return True


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed rank not yet reaped has no stack)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except (OSError, ValueError):
            return False
        return True
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def end_stalled_ranks(run_dir: Path, *, rank: int, host: str, include_self: bool) -> list[int]:
    """This rank's deadline passed: keep the stacks (py-spy, where installed) of this host's
    ranks whose heartbeat stopped, then end them with SIGKILL; with none and ``include_self``,
    keep this rank's own stack (it is the one that hangs).  Returns the ranks whose stack was
    tried.

    A stalled rank is ended here because nothing else ends it soon: SIGSTOP or a wedge holding
    the GIL leaves it deaf to the launcher's SIGTERM, and torch's elastic agent (and torchrun)
    then waits 30 s before its SIGKILL.  This rank ends the run anyway when its grace runs out,
    so the stalled one is ended only sooner; the run still names it as the rank that stopped
    responding (its heartbeat says so)."""
    now = time.time()
    stalled = [
        s for s in read_flights(run_dir).values()
        if s.rank != rank and s.host == host and _alive(s.pid)
        and heartbeat_stopped(s, silent_s=now - s.heartbeat)
    ]  # fmt: skip
    tried = []
    for state in stalled:
        if save_stack(run_dir, state, why=f"no heartbeat for {now - state.heartbeat:.0f} s"):
            tried.append(state.rank)
        with contextlib.suppress(OSError):
            os.kill(state.pid, signal.SIGKILL)
    if stalled or not include_self:
        return tried
    me = FlightState(rank=rank, host=host, pid=os.getpid())
    return [rank] if save_stack(run_dir, me, why="its own deadline passed") else []


def read_stacks(run_dir: Path) -> dict[int, str]:
    """rank -> one line on its saved stack: where it is, or why py-spy could not read it."""
    out: dict[int, str] = {}
    folder = Path(run_dir) / RANKS_DIR
    for path in sorted(folder.glob("rank-*.stack-failed.txt")):
        with contextlib.suppress(OSError, ValueError):
            reason = path.read_text(encoding="utf-8").strip().splitlines()[0]
            out[int(path.name[5:10])] = f"py-spy could not read its Python stack: {reason}"
    for path in sorted(folder.glob("rank-*.stack.txt")):
        with contextlib.suppress(ValueError):
            out[int(path.name[5:10])] = f"its Python stack: {path}"
    return out

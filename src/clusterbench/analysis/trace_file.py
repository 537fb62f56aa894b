"""A team's own profiler traces, read for ``clusterbench analyze``: one file per rank as
torch.profiler writes them (``tensorboard_trace_handler`` or ``export_chrome_trace``; JSON,
or gzip-compressed JSON), streamed, so that a trace of a gigabyte is read in bounded memory.

Each event is reduced as it is read to what the attribution needs: the ``ProfilerStep#N``
spans, and every device activity (kernel, copy, memset; on a trace without a device timeline,
the host ops, as :mod:`clusterbench.benchmarks.attribution.trace` reads CPU runs) as a start,
an end, a class and a name, kept in flat arrays.  The classes and the split of each step are
those of the attribution benchmark (``trace.step_breakdowns``), so a team's job and
clusterbench's own workloads are judged alike.

The rank is the trace's ``distributedInfo.rank``, else a number in the file's name
(``rank-3``, ``rank_3``, ``rank3``); the host is the trace's ``host_name`` (recent Kineto),
else the name torch.profiler's ``tensorboard_trace_handler`` puts first
(``HOST_PID.TIME.pt.trace.json``), else unknown.
"""

from __future__ import annotations

import gzip
import json
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from clusterbench.analysis import trace_events
from clusterbench.benchmarks.attribution import trace

__all__ = [
    "RankTrace",
    "TraceError",
    "find_traces",
    "is_trace",
    "read_trace",
]

_KINDS: tuple[trace.Kind, ...] = ("compute", "memory", "comm")
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_HOST_CATS = frozenset({"cpu_op", "user_annotation"})
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_HANDLER_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")
_CHUNK = 1 << 20


class TraceError(ValueError):
    """A trace that cannot be read: one line naming the file and why."""


@dataclass(kw_only=True)
class RankTrace:
    """One rank's trace, reduced."""

    path: Path
    rank: int
    host: str
    world_size: int | None = None
    backend: str | None = None
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    """(N, start, end) of each ``ProfilerStep#N`` span, µs; one (0, first, last) window over
    every activity where the trace has none (:attr:`windowed`)."""
    windowed: bool = False
    device: bool = False
    """The trace has a device timeline (kernels); False: its host ops stand in."""
    starts: array = field(default_factory=lambda: array("d"))
    ends: array = field(default_factory=lambda: array("d"))
    kinds: array = field(default_factory=lambda: array("b"))
    """Index into ("compute", "memory", "comm")."""
    collective: array = field(default_factory=lambda: array("b"))
    names: array = field(default_factory=lambda: array("i"))
    """Index into :attr:`name_table`."""
    name_table: list[str] = field(default_factory=list)
    num_events: int = 0
    num_bytes: int = 0
    """The file's size (compressed, for .gz)."""
    streams: int = 0
    """The device streams the activities ran on."""
    device_index: int = 0
    """The GPU the kernels ran on (their ``args.device``)."""
    gpu_names: list[str] = field(default_factory=list)
    """``deviceProperties``' GPU names, where the trace has them before its events."""

    def activities(self, start: float, end: float) -> list[trace.Activity]:
        """The activities that overlap [start, end), as the attribution's Activity."""
        import numpy as np

        starts = np.frombuffer(self.starts, dtype=np.float64)
        ends = np.frombuffer(self.ends, dtype=np.float64)
        return [
            trace.Activity(
                self.starts[i],
                self.ends[i],
                _KINDS[self.kinds[i]],
                collective=bool(self.collective[i]),
                name=self.name_table[self.names[i]],
            )
            for i in np.flatnonzero((ends > start) & (starts < end)).tolist()
        ]


def find_traces(paths: Iterable[Path | str]) -> list[Path]:
    """The trace files among ``paths``: files as given, folders searched (recursively) for
    ``*.json`` and ``*.json.gz``.  TraceError for a path that does not exist or a folder
    without traces."""
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and p.name.endswith((".json", ".json.gz")) and is_trace(p)
            )
            if not found:
                raise TraceError(f"{path}: no .json or .json.gz trace in it")
            out += found
        else:
            raise TraceError(f"{path}: no such file or folder")
    return list(dict.fromkeys(out))


def _open(path: Path) -> IO[bytes]:
    raw = path.open("rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    raw.seek(0)
    return raw


def _chunks(stream: IO[bytes]) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        yield chunk


_HEAD = 1 << 16
_KEY = re.compile(r'"(distributedInfo|deviceProperties|host_name)"\s*:\s*')


def _head_fields(head: bytes) -> dict[str, Any]:
    """``distributedInfo``, ``deviceProperties`` and ``host_name`` where they come before the
    events (Kineto writes them first), each decoded whole from where its value starts."""
    text = head.decode("utf-8", errors="replace")
    events_at = text.find('"traceEvents"')
    decoder = json.JSONDecoder()
    out: dict[str, Any] = {}
    for m in _KEY.finditer(text, 0, events_at if events_at >= 0 else len(text)):
        try:
            out[m.group(1)], _ = decoder.raw_decode(text, m.end())
        except ValueError:
            continue
    return out


def _gpu_names(fields: dict[str, Any]) -> list[str]:
    props = fields.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return [str(p["name"]) for p in props if isinstance(p, dict) and p.get("name")]


def _rank_of(path: Path, info: dict[str, Any]) -> int | None:
    rank = info.get("rank")
    if isinstance(rank, int) or (isinstance(rank, str) and rank.isdigit()):
        return int(rank)
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def _host_of(path: Path) -> str:
    m = _HANDLER_NAME.match(path.name)
    return m.group("host") if m else "unknown"


class _Reducer:
    """Takes a trace's events one at a time and keeps what the attribution needs."""

    def __init__(self, out: RankTrace) -> None:
        self.out = out
        self.names: dict[str, int] = {}
        self.step_threads: list[tuple[object, object]] = []
        # host ops, kept apart until the trace shows whether it has a device timeline
        self.host_starts = array("d")
        self.host_ends = array("d")
        self.host_kinds = array("b")
        self.host_coll = array("b")
        self.host_names = array("i")
        self.host_threads = array("i")
        self.threads: dict[tuple[object, object], int] = {}
        self.streams: set[object] = set()

    def _name(self, name: str) -> int:
        index = self.names.get(name)
        if index is None:
            index = self.names[name] = len(self.out.name_table)
            self.out.name_table.append(name)
        return index

    def take(self, e: dict[str, Any]) -> None:
        self.out.num_events += 1
        if e.get("ph") != "X":
            return
        cat = str(e.get("cat", ""))
        name = str(e.get("name", ""))
        try:
            start = float(e.get("ts", 0.0))
            end = start + float(e.get("dur", 0.0))
        except (TypeError, ValueError):
            return
        if cat in _GPU_CATS:
            args = e.get("args") or {}
            if not self.out.device and isinstance(args.get("device"), int):
                self.out.device_index = args["device"]
            self.out.device = True
            self.streams.add(args.get("stream", e.get("tid")))
            collective = trace.is_collective_kernel(name)
            kind = "comm" if collective else trace.device_kind(name, cat)
            self._keep(self.out, start, end, kind, collective, name)
            return
        if cat == "gpu_user_annotation":
            return
        if m := _STEP.match(name):
            self.out.steps.append((int(m.group(1)), start, end))
            self.step_threads.append((e.get("pid"), e.get("tid")))
            return
        if self.out.device or cat not in _HOST_CATS:
            return  # a device timeline was seen: the host ops are not needed
        thread = self.threads.setdefault((e.get("pid"), e.get("tid")), len(self.threads))
        if name.startswith("gloo:"):
            kind, collective = "comm", True
        elif cat != "cpu_op":
            return  # annotations (DDP forward, Optimizer.step) also span waits and Python
        else:
            kind, collective = trace.cpu_kind(name), False
        self.host_starts.append(start)
        self.host_ends.append(end)
        self.host_kinds.append(_KINDS.index(kind))
        self.host_coll.append(1 if collective else 0)
        self.host_names.append(self._name(name))
        self.host_threads.append(thread)

    def _keep(
        self, out: RankTrace, start: float, end: float, kind: str, collective: bool, name: str
    ) -> None:
        out.starts.append(start)
        out.ends.append(end)
        out.kinds.append(_KINDS.index(kind))
        out.collective.append(1 if collective else 0)
        out.names.append(self._name(name))

    def finish(self) -> None:
        out = self.out
        out.steps.sort()
        out.streams = len(self.streams)
        if not out.device:
            self._host_activities()
        if not out.steps and len(out.starts):
            out.steps = [(0, min(out.starts), max(out.ends))]
            out.windowed = True

    def _host_activities(self) -> None:
        """The host ops of the thread that ran the steps (gloo's collectives from any thread),
        as :func:`~clusterbench.benchmarks.attribution.trace.activities` reads a CPU trace."""
        out = self.out
        main = self.threads.get(self.step_threads[0]) if self.step_threads else None
        if main is None and len(self.host_threads):
            # no ProfilerStep span to say which thread trains: the one with the most op time
            busy: dict[int, float] = {}
            for i in range(len(self.host_threads)):
                if not self.host_coll[i]:
                    thread = self.host_threads[i]
                    busy[thread] = busy.get(thread, 0.0) + self.host_ends[i] - self.host_starts[i]
            main = max(busy, key=lambda t: busy[t]) if busy else None
        has_gloo = any(self.host_coll)
        for i in range(len(self.host_starts)):
            collective = bool(self.host_coll[i])
            if not collective and main is not None and self.host_threads[i] != main:
                continue
            kind = _KINDS[self.host_kinds[i]]
            out.starts.append(self.host_starts[i])
            out.ends.append(self.host_ends[i])
            out.kinds.append(self.host_kinds[i])
            # no gloo spans: the host-side c10d ops stand in for the collectives
            out.collective.append(1 if collective or (not has_gloo and kind == "comm") else 0)
            out.names.append(self.host_names[i])


def is_trace(path: Path) -> bool:
    """Whether the file starts as a torch.profiler trace does (``traceEvents`` in its first
    64 KiB), so that a folder's other JSON (a config, a trainer's state) is passed over."""
    try:
        with _open(path) as stream:
            return b'"traceEvents"' in stream.read(_HEAD)
    except (OSError, EOFError, gzip.BadGzipFile):
        return True  # let read_trace say what is wrong with it


def read_trace(path: Path | str, *, default_rank: int | None = None) -> RankTrace:
    """One rank's trace, streamed.  TraceError (one line naming the file) for a file that is
    not a trace, is truncated or corrupt, or names no rank; ``default_rank``: the rank of a
    trace that names none (the one trace of a job of one process)."""
    import ijson

    path = Path(path)
    try:
        size = path.stat().st_size
        with _open(path) as stream:
            head = stream.read(_HEAD)
            fields = _head_fields(head)
            info = fields.get("distributedInfo")
            info = info if isinstance(info, dict) else {}
            if b'"traceEvents"' not in head:
                raise TraceError(f"{path}: not a torch.profiler trace (no traceEvents)")
            rank = _rank_of(path, info)
            rank = default_rank if rank is None else rank
            if rank is None:
                raise TraceError(
                    f"{path}: no rank (no distributedInfo.rank, no rank-N in the file's name)"
                )
            backend = str(info["backend"]) if info.get("backend") else None
            host = str(fields.get("host_name") or _host_of(path))
            out = RankTrace(path=path, rank=rank, host=host, num_bytes=size,
                            world_size=_int(info.get("world_size")), backend=backend,
                            gpu_names=_gpu_names(fields))  # fmt: skip
            reducer = _Reducer(out)
            for batch in trace_events.event_batches(head, stream):
                for e in batch:
                    if isinstance(e, dict):
                        reducer.take(e)
    except TraceError:
        raise
    except (OSError, EOFError, gzip.BadGzipFile, ijson.JSONError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read it as a trace ({_why(exc)})") from None
    if out.num_events == 0:
        raise TraceError(f"{path}: no traceEvents (not a torch.profiler trace)")
    reducer.finish()
    if not len(out.starts):
        raise TraceError(f"{path}: no kernels and no host ops in its {out.num_events} events")
    return out


def _prepend(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from rest


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "Incomplete JSON" in text or "premature EOF" in text or isinstance(exc, EOFError):
        return "truncated: the file ends inside its JSON"
    return text[:120]

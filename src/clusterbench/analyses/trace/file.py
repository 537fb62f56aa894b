"""A team's own profiler traces, read for ``clusterbench analyze``: one file per rank as
torch.profiler writes them (``tensorboard_trace_handler`` or ``export_chrome_trace``; JSON,
or gzip-compressed JSON), streamed, so that a trace of a gigabyte is read in bounded memory.

Each event is reduced as it is read to what the attribution needs: the ``ProfilerStep#N``
spans, and every device activity (kernel, copy, memset; on a trace without a device timeline,
the host ops, as :mod:`clusterbench.traces.trace` reads CPU runs) as a start,
an end, a class and a name, kept in flat arrays.  The classes and the split of each step are
those of the attribution benchmark (``trace.step_breakdowns``), so a team's job and
clusterbench's own workloads are judged alike.  ``ts``/``dur`` are read as numbers or strings.

Which files are traces and the formats read: :mod:`clusterbench.analyses.trace.formats`; the
rank and host of a trace: :mod:`clusterbench.analyses.trace.identity`.
"""

from __future__ import annotations

import gzip
import re
import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench.analyses.trace import events as trace_events
from clusterbench.analyses.trace.formats import (
    LEGACY_CATS,
    events_array,
    gpu_names,
    head_fields,
    is_trace,
    modern_cat,
    open_trace,
    read_head,
)
from clusterbench.analyses.trace.identity import host_of, rank_of, worker_rank
from clusterbench.traces import trace

__all__ = [
    "NoRankError",
    "RankTrace",
    "TraceError",
    "TraceScan",
    "find_traces",
    "read_trace",
    "scan_traces",
]

_KINDS: tuple[trace.Kind, ...] = ("compute", "memory", "comm", "unclassified")
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_HOST_CATS = frozenset({"cpu_op", "user_annotation"})
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_INPUT_PREFIX = "enumerate(DataLoader)#"
"""With ``.__next__`` at its end, the span torch's DataLoader iterator records around each
``next()``: ``"enumerate(DataLoader)#{}.__next__".format(self.__class__.__name__)``
(torch/utils/data/dataloader.py, ``_BaseDataLoaderIter``), e.g.
``_SingleProcessDataLoaderIter``, ``_MultiProcessingDataLoaderIter``."""


class TraceError(ValueError):
    """A trace that cannot be read: one line naming the file and why."""


class NoRankError(TraceError):
    """A trace read whole that names no rank (no ``distributedInfo.rank``, no rank in its
    file's name), among several files: :attr:`trace` holds it as rank 0, for the caller to
    take where every such file is of one process (a repeating schedule's cycles)."""

    def __init__(self, message: str, *, trace: RankTrace) -> None:
        super().__init__(message)
        self.trace = trace

    def __reduce__(self) -> tuple[object, ...]:
        return (_no_rank_error, (str(self), self.trace))


def _no_rank_error(message: str, trace: RankTrace) -> NoRankError:
    return NoRankError(message, trace=trace)


@dataclass(kw_only=True)
class RankTrace:
    """One rank's trace, reduced."""

    path: Path
    rank: int
    host: str
    """The trace's ``host_name``, else the host of a ``tensorboard_trace_handler`` file name
    of this process; else ``unknown``."""
    rank_from: str = "distributedInfo"
    """Where :attr:`rank` comes from: ``distributedInfo``, ``file name`` (``rank-N``),
    ``lone trace`` (the one file given, rank 0), ``worker name`` (``workerN``), or ``none``
    (a :class:`NoRankError`'s trace, rank 0 until the caller places it)."""
    world_size: int | None = None
    backend: str | None = None
    pid: int | None = None
    """The process the trace recorded: the ``pid`` of its steps' spans, else of its first
    host op."""
    worker_name: str | None = None
    """The file's name read as ``tensorboard_trace_handler``'s ``HOST_PID`` where PID is not
    :attr:`pid`: a worker name of the job's own, not a host."""
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    """(N, start, end) of each ``ProfilerStep#N`` span, µs; one (0, first, last) window over
    every activity where the trace has none (:attr:`windowed`)."""
    windowed: bool = False
    device: bool = False
    """The trace has a device timeline (kernels); False: its host ops stand in."""
    starts: array = field(default_factory=lambda: array("d"))
    ends: array = field(default_factory=lambda: array("d"))
    kinds: array = field(default_factory=lambda: array("b"))
    """Index into ("compute", "memory", "comm", "unclassified")."""
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
    input_spans: list[tuple[float, float]] = field(default_factory=list)
    """(start, end) µs, the trace's clock, of each DataLoader ``next()`` on the host
    (:data:`_INPUT_PREFIX`), in order, device timeline or not."""

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


@dataclass(kw_only=True)
class TraceScan:
    """The files that TRACES name."""

    files: list[Path] = field(default_factory=list)
    """The files to read: those given, and a folder's files that may be traces."""
    passed_over: list[Path] = field(default_factory=list)
    """A folder's JSON that is not a trace (:func:`is_trace`): a config, a trainer's state."""


def scan_traces(paths: Iterable[Path | str]) -> TraceScan:
    """The trace files among ``paths``: files as given, folders searched (recursively) for
    ``*.json`` and ``*.json.gz``, their other JSON passed over.  TraceError for a path that
    does not exist, or a folder without a file that may be a trace (naming what it holds)."""
    scan = TraceScan()
    for given in paths:
        path = Path(given)
        if path.is_file():
            scan.files.append(path)
        elif path.is_dir():
            found = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))
            )
            traces = [p for p in found if is_trace(p)]
            passed = [p for p in found if p not in traces]
            if not traces:
                raise TraceError(_no_trace_in(path, passed))
            scan.files += traces
            scan.passed_over += passed
        else:
            raise TraceError(f"{path}: no such file or folder")
    scan.files = list(dict.fromkeys(scan.files))
    scan.passed_over = list(dict.fromkeys(scan.passed_over))
    return scan


def find_traces(paths: Iterable[Path | str]) -> list[Path]:
    """The files :func:`scan_traces` finds to read."""
    return scan_traces(paths).files


def _no_trace_in(folder: Path, passed: list[Path]) -> str:
    if not passed:
        return f"{folder}: no .json or .json.gz file in it"
    names = ", ".join(str(p.relative_to(folder)) for p in passed[:3])
    more = f" and {len(passed) - 3} more" if len(passed) > 3 else ""
    return (
        f"{folder}: no trace in it: its {len(passed)} JSON file(s) ({names}{more}) have no "
        "traceEvents (not torch.profiler traces)"
    )


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
        self.first_pid: object = None

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
        name = str(e.get("name", ""))
        cat = str(e.get("cat", ""))
        if cat in LEGACY_CATS or cat == "Operator":
            cat = modern_cat(cat, name)
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
        if cat not in _HOST_CATS:
            return
        if self.first_pid is None:
            self.first_pid = e.get("pid")
        if name.startswith(_INPUT_PREFIX) and name.endswith(".__next__"):
            self.out.input_spans.append((start, end))
            return
        if self.out.device:
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
        out.input_spans.sort()
        out.streams = len(self.streams)
        out.pid = _int(self.step_threads[0][0] if self.step_threads else self.first_pid)
        if not out.device:
            self._host_activities()
        if not out.steps and len(out.starts):
            out.steps = [(0, min(out.starts), max(out.ends))]
            out.windowed = True

    def _host_activities(self) -> None:
        """The host ops of the thread that ran the steps (gloo's collectives from any thread),
        as :func:`~clusterbench.traces.trace.activities` reads a CPU trace."""
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


def read_trace(path: Path | str, *, default_rank: int | None = None) -> RankTrace:
    """One rank's trace, streamed.  TraceError (one line naming the file) for a file that is
    not a trace, is truncated or corrupt, or names no rank; ``default_rank``: the rank of a
    trace that names none (the one trace of a job of one process)."""
    import ijson

    path = Path(path)
    try:
        size = path.stat().st_size
        with open_trace(path) as stream:
            head = read_head(stream)
            _check_head(path, head, gzipped=isinstance(stream, gzip.GzipFile))
            fields = head_fields(head)
            info = fields.get("distributedInfo")
            info = info if isinstance(info, dict) else {}
            named = rank_of(path, info)
            if named is None and default_rank is not None:
                named = (default_rank, "lone trace")
            backend = str(info["backend"]) if info.get("backend") else None
            host = str(fields.get("host_name") or "unknown")
            out = RankTrace(path=path, rank=named[0] if named else 0, host=host, num_bytes=size,
                            world_size=_int(info.get("world_size")), backend=backend,
                            gpu_names=gpu_names(fields))  # fmt: skip
            reducer = _Reducer(out)
            for batch in trace_events.event_batches(head, stream):
                for e in batch:
                    if isinstance(e, dict):
                        reducer.take(e)
    except TraceError:
        raise
    except (OSError, EOFError, zlib.error, ijson.JSONError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read it as a trace ({_why(exc)})") from None
    if out.num_events == 0:
        raise TraceError(f"{path}: no traceEvents (not a torch.profiler trace)")
    reducer.finish()
    if not len(out.starts):
        raise TraceError(f"{path}: no kernels and no host ops in its {out.num_events} events")
    if not fields.get("host_name"):
        out.host, out.worker_name = host_of(path, out.pid)
    if named is None and (worker := worker_rank(path, out.pid)) is not None:
        named = (worker, "worker name")
    if named is None:
        out.rank_from = "none"
        raise NoRankError(
            f"{path}: no rank (no distributedInfo.rank, no rank-N or workerN in the file's name)",
            trace=out,
        )
    out.rank, out.rank_from = named
    return out


def _check_head(path: Path, head: bytes, *, gzipped: bool) -> None:
    """TraceError, naming the file and why, for one that is empty, not JSON, a JSON object
    without ``traceEvents`` or a JSON array whose first items are not trace events."""
    start = head.lstrip()
    inside = "a gzip whose content is " if gzipped else ""
    if not start:
        raise TraceError(f"{path}: {inside}empty: not a trace")
    if start[:1] not in (b"{", b"["):
        raise TraceError(f"{path}: {inside}not JSON (it starts {start[:16]!r}): not a trace")
    if start[:1] == b"[":
        if not events_array(head):
            raise TraceError(
                f"{path}: a JSON array, not of trace events (objects with ph and ts): not a trace"
            )
        return
    if b'"traceEvents"' not in head:
        raise TraceError(f"{path}: not a torch.profiler trace (no traceEvents)")


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

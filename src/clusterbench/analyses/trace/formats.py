"""The formats torch.profiler has written since PyTorch 1.8, as ``clusterbench analyze`` reads
them: the file (JSON, or gzip-compressed JSON whatever its name; a JSON object with Kineto's
metadata before its ``traceEvents``, or the Chrome Trace Event Format's array of events), whether
a file is a trace at all (:func:`is_trace`), and the event categories of every Kineto version:
its categories before its June 2021 rename (``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``,
``Operator``, ``User``; ``Kernel``, ``Memcpy`` and ``Memset`` lasted to April 2022) are taken as
today's (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``cuda_runtime``, ``cpu_op`` or
``user_annotation``, ``gpu_user_annotation``) (:func:`modern_cat`).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import IO, Any

__all__ = [
    "LEGACY_CATS",
    "events_array",
    "gpu_names",
    "head_fields",
    "is_trace",
    "modern_cat",
    "open_trace",
    "read_head",
]

LEGACY_CATS = {
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "Runtime": "cuda_runtime",
    "User": "gpu_user_annotation",
    "gpu_user_Annotation": "gpu_user_annotation",
}
"""Kineto's category names before today's (libkineto/src/output_json.cpp to June 2021;
ActivityType.cpp's ``gpu_user_Annotation`` after it), by today's name."""


def modern_cat(cat: str, name: str) -> str:
    """Today's category of an event of any Kineto version (:data:`LEGACY_CATS`); before
    June 2021 ops and ``record_function`` spans were both ``Operator``: torch's own spans
    (``ProfilerStep#N``, ``enumerate(DataLoader)#...``, ``Optimizer.step#SGD.step``,
    ``DistributedDataParallel.forward``) are annotations, the rest ops."""
    if cat == "Operator":
        annotation = "#" in name or name.startswith("DistributedDataParallel.")
        return "user_annotation" if annotation else "cpu_op"
    return LEGACY_CATS.get(cat, cat)


def open_trace(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped where it starts as a gzip does (whatever its name)."""
    raw = path.open("rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    raw.seek(0)
    return raw


_HEAD = 1 << 16
_HEAD_MAX = 1 << 24
"""Kineto writes its metadata before ``traceEvents``; a large job's ``distributedInfo``
(every process group with its ranks) can take more than the first 64 KiB."""


def read_head(stream: IO[bytes]) -> bytes:
    """The file's start, up to its ``"traceEvents"`` key (at most 16 MiB) where it is JSON."""
    head = stream.read(_HEAD)
    while (
        b'"traceEvents"' not in head
        and head.lstrip()[:1] == b"{"
        and len(head) < _HEAD_MAX
        and (more := stream.read(len(head)))
    ):
        head += more
    return head


_KEY = re.compile(r'"(distributedInfo|deviceProperties|host_name)"\s*:\s*')


def head_fields(head: bytes) -> dict[str, Any]:
    """``distributedInfo``, ``deviceProperties`` and ``host_name`` where they come before the
    events (Kineto writes them first), each decoded whole from where its value starts."""
    if head.lstrip()[:1] == b"[":
        return {}  # the array form has events only
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


def gpu_names(fields: dict[str, Any]) -> list[str]:
    """``deviceProperties``' GPU names, of :func:`head_fields`."""
    props = fields.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return [str(p["name"]) for p in props if isinstance(p, dict) and p.get("name")]


def is_trace(path: Path) -> bool:
    """Whether the file may be a torch.profiler trace: False only for a JSON object without
    ``traceEvents`` before its events would start (a config, a trainer's state) and a JSON
    array whose first items are not trace events (:func:`events_array`), which a folder's
    search passes over; for anything else (a gzip of text, a truncated file),
    :func:`~clusterbench.analyses.trace.file.read_trace` says what is wrong with it."""
    try:
        with open_trace(path) as stream:
            head = read_head(stream)
    except (OSError, EOFError, zlib.error):
        return True
    first = head.lstrip()[:1]
    if first == b"[":
        return events_array(head)
    return not (first == b"{" and b'"traceEvents"' not in head)


_FIRST_ITEMS = 3
"""The items of an array checked to be trace events, where the head holds them whole."""


def events_array(head: bytes) -> bool:
    """Whether a JSON array's first items (those whole in ``head``, up to
    :data:`_FIRST_ITEMS`) are trace events: objects with ``ph`` and ``ts``, as the Chrome
    Trace Event Format's array form holds (torch.profiler's before PyTorch 1.8.0).  Where
    not one item is whole in the head, whether the head names both keys."""
    text = head.decode("utf-8", errors="replace").lstrip()[1:]
    decoder = json.JSONDecoder()
    items: list[object] = []
    at = 0
    while len(items) < _FIRST_ITEMS:
        at = len(text) - len(text[at:].lstrip(" \t\r\n,"))
        try:
            item, at = decoder.raw_decode(text, at)
        except ValueError:
            break
        items.append(item)
    if not items:
        return b'"ph"' in head and b'"ts"' in head
    return all(isinstance(e, dict) and "ph" in e and "ts" in e for e in items)

"""A trace's ``traceEvents``, streamed in batches: the bytes are cut between two events and
each batch parsed whole by orjson, three times faster than ijson's event-by-event parse
(``docs/commands/analyze.md``, "What it reads, and how"), in memory bounded by the batch.

A document whose first byte (past white space) is ``[`` is the array of events itself: the
Chrome Trace Event Format's "JSON Array Format", which its specification allows beside the
object format with ``traceEvents`` ("Trace Event Format", Google, section "JSON Array
Format"), and which torch.profiler wrote before PyTorch 1.8.0.

A cut is a ``}`` followed by ``,`` and ``{`` (whitespace between), as between two events;
the same bytes inside an event (a list of objects in its ``args``, or a string) do not parse
as a list of whole events, so such a cut is refused and an earlier one taken.  Whatever this
reader does not take as it expects (``traceEvents`` not a key of the top-level object, a
single event larger than its buffer, a file that is corrupt or truncated, JSON orjson refuses
and yajl accepts) is handed, from the last whole event read, to ijson, which reads it as
:func:`clusterbench.analyses.trace.file.read_trace` always has, errors included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import IO, Any

__all__ = ["event_batches"]

_CHUNK = 1 << 18
"""Bytes read at a time: 256 KiB, about 1,300 events of a Kineto trace."""
_MAX_BUFFER = 1 << 26
"""Bytes held without a cut before ijson takes over (an event of 64 MB is not a trace's)."""
_TRIES = 4
"""Cuts tried, from the buffer's end back, before more is read."""
_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_NEXT = re.compile(rb"\}\s*,\s*\{")
_END = re.compile(rb"\}\s*\]")


class _Unparsed(Exception):
    """The rest is for ijson."""


def event_batches(head: bytes, stream: IO[bytes]) -> Iterator[Iterable[Any]]:
    """The items of the top-level ``traceEvents`` array of the JSON document that starts with
    ``head`` and goes on in ``stream`` (of the document itself where it is an array), in order,
    in batches.  ijson's errors (``ijson.JSONError``) for a document that is not whole."""
    import orjson

    while not head.strip() and (more := stream.read(_CHUNK)):
        head += more
    bare = head.lstrip()[:1] == b"["
    if bare:
        buf = head.lstrip()[1:]
    else:
        start = _START.search(head)
        if start is None and (more := stream.read(_CHUNK)):  # the head ended inside the key
            head += more
            start = _START.search(head)
        if start is None or not _top_level(head[: start.start()]):
            yield _ijson_items(b"", head, stream, bare=False)
            return
        buf = head[start.end() :]
    try:
        while more := stream.read(_CHUNK):
            buf += more
            cut = _cut(buf, orjson)
            if cut is not None:
                events, rest = cut
                yield events
                buf = buf[rest:]
            elif len(buf) > _MAX_BUFFER:
                raise _Unparsed
        yield _tail(buf, orjson, bare=bare)
    except _Unparsed:
        yield _ijson_items(b"[" if bare else b'{"traceEvents": [', buf, stream, bare=bare)


def _top_level(before: bytes) -> bool:
    """Whether ``before`` (the document up to the ``"traceEvents"`` key) opens the top-level
    object and holds only whole members: the key is then that object's own."""
    import orjson

    try:
        return isinstance(orjson.loads(before + b'"":0}'), dict)
    except orjson.JSONDecodeError:
        return False


def _cut(buf: bytes, orjson: Any) -> tuple[list[Any], int] | None:
    """The whole events at the start of ``buf``, and where the next one starts; None where no
    cut among the last few parses."""
    end = len(buf)
    for _ in range(_TRIES):
        at = buf.rfind(b"}", 0, end)
        while at >= 0 and (gap := _NEXT.match(buf, at)) is None:
            at = buf.rfind(b"}", 0, at)
        if at < 0 or gap is None:
            return None
        try:
            return orjson.loads(b"[" + buf[: at + 1] + b"]"), gap.end() - 1
        except orjson.JSONDecodeError:
            end = at
    return None


def _tail(buf: bytes, orjson: Any, *, bare: bool) -> list[Any]:
    """The last events, once the array and the document are seen to end whole (``bare``: the
    array is the document)."""
    if buf.lstrip().startswith(b"]"):
        events: list[Any] = []
        rest = buf.lstrip()[1:]
    else:
        for end in _END.finditer(buf):
            try:
                events = orjson.loads(b"[" + buf[: end.start() + 1] + b"]")
            except orjson.JSONDecodeError:
                continue
            rest = buf[end.end() :]
            break
        else:
            raise _Unparsed
    if bare:
        if rest.strip():
            raise _Unparsed  # more after the array: ijson says what
        return events
    if b'"traceEvents"' in rest:
        raise _Unparsed  # a second array of that name: ijson reads both
    try:
        orjson.loads(b'{"":0' + rest)  # the top-level object's other members and its end
    except orjson.JSONDecodeError:
        raise _Unparsed from None
    return events


def _ijson_items(prefix: bytes, buf: bytes, stream: IO[bytes], *, bare: bool) -> Iterator[Any]:
    import ijson

    # ijson.items over a file, not items_coro fed chunks: 1.2 s against 3.2 s for 100 MB
    # (yajl2_c backend, measured on this project's CI machine)
    path = "item" if bare else "traceEvents.item"
    return ijson.items(_Joined(prefix + buf, stream), path, use_float=True)


class _Joined:
    """``first``, then ``rest``, as one file to read."""

    def __init__(self, first: bytes, rest: IO[bytes]) -> None:
        self._first = first
        self._rest = rest

    def read(self, size: int = -1) -> bytes:
        if not self._first:
            return self._rest.read(size)
        if size < 0 or size >= len(self._first):
            out, self._first = self._first, b""
            return out
        out, self._first = self._first[:size], self._first[size:]
        return out

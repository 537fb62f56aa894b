"""The batched reader of a trace's events gives exactly what ijson gives, event for event: on
every recorded trace, with cuts at every place a small buffer puts them, and where the bytes
between two events also occur inside one; a truncated or corrupt file raises ijson's error."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import ijson
import pytest

from clusterbench.analyses.trace import events as trace_events

TRACES = sorted((Path(__file__).parents[1] / "data" / "traces").rglob("*.json.gz"))


def _batched(data: bytes, head_size: int = 1 << 16) -> list[Any]:
    stream = io.BytesIO(data)
    head = stream.read(head_size)
    return [e for batch in trace_events.event_batches(head, stream) for e in batch]


def _ijson(data: bytes) -> list[Any]:
    return list(ijson.items(io.BytesIO(data), "traceEvents.item", use_float=True))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: f"{p.parent.name}/{p.name[:24]}")
def test_every_recorded_trace_reads_as_ijson_reads_it(path: Path) -> None:
    data = gzip.decompress(path.read_bytes())
    expected = _ijson(data)
    assert len(expected) > 100
    assert _batched(data) == expected


def test_cuts_anywhere_give_the_same_events(monkeypatch: pytest.MonkeyPatch) -> None:
    data = gzip.decompress(TRACES[0].read_bytes())
    expected = _ijson(data)
    for chunk in (7, 61, 1000):
        monkeypatch.setattr(trace_events, "_CHUNK", chunk)
        assert _batched(data, head_size=chunk) == expected


def _doc(events: list[dict[str, Any]], *, after: str = "") -> bytes:
    body = ",\n".join(json.dumps(e) for e in events)
    return ('{"schemaVersion": 1, "traceEvents": [\n' + body + "\n]" + after + "}").encode()


AWKWARD = [
    {"ph": "X", "name": 'a "},{" b', "ts": 1.5, "dur": 2},
    {"ph": "X", "name": "n", "args": {"list": [{"a": 1}, {"b": [{"c": 2}]}]}, "ts": 3},
    {"ph": "i", "name": "}]", "s": "t", "ts": 4.25},
    {"ph": "X", "name": "end", "args": {"x": [{"y": 1}]}},
]


@pytest.mark.parametrize("chunk", [5, 33, 1 << 18])
def test_the_bytes_between_events_inside_one(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(trace_events, "_CHUNK", chunk)
    for after in ("", ', "traceName": "x.json"', ', "deviceProperties": [{"id": 0}, {"id": 1}]'):
        data = _doc(AWKWARD * 3, after=after)
        assert _batched(data, head_size=chunk) == _ijson(data) == AWKWARD * 3


@pytest.mark.parametrize(
    "data",
    [
        b'{"traceEvents": []}',
        b'{"traceEvents": [ ] , "x": [{"traceEvents": [1]}]}',
        b'{"a": {"traceEvents": [{"ph": "X"}]}, "traceEvents": [{"ph": "B"}]}',
        b'{"traceEvents": [{"ph": "X"}], "traceEvents": [{"ph": "Y"}]}',
    ],
)
def test_layouts_read_as_ijson_reads_them(data: bytes) -> None:
    assert _batched(data, head_size=8) == _ijson(data)


def test_a_truncated_file_raises_ijsons_error() -> None:
    data = _doc(AWKWARD * 50)
    for cut in (len(data) - 1, len(data) - 3, len(data) // 2):
        with pytest.raises(ijson.IncompleteJSONError):
            _batched(data[:cut], head_size=64)


def test_a_corrupt_file_raises_ijsons_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_events, "_CHUNK", 64)
    data = _doc(AWKWARD * 50)
    bad = data[:300] + b"\x01garbage" + data[300:]
    with pytest.raises(ijson.JSONError):
        _batched(bad, head_size=64)


def test_a_recorded_trace_is_read_without_ijson(monkeypatch: pytest.MonkeyPatch) -> None:
    data = gzip.decompress(TRACES[0].read_bytes())
    expected = _ijson(data)

    def refused(*args: object) -> None:
        raise AssertionError("ijson was asked")

    monkeypatch.setattr(trace_events, "_ijson_items", refused)
    assert _batched(data) == expected


def test_a_buffer_without_a_cut_goes_to_ijson(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_events, "_MAX_BUFFER", 40)
    monkeypatch.setattr(trace_events, "_CHUNK", 16)
    data = _doc(AWKWARD * 5, after=', "traceName": "x"')
    assert _batched(data, head_size=16) == _ijson(data) == AWKWARD * 5


def _array(events: list[dict[str, Any]], *, before: str = "") -> bytes:
    """The Chrome trace format's array form, as torch.profiler wrote it before PyTorch 1.8.0:
    a newline after the bracket, one event after another, no object around them."""
    body = ",\n".join(json.dumps(e, indent=2) for e in events)
    return (before + "[\n\n" + body + "\n]\n").encode()


def _ijson_array(data: bytes) -> list[Any]:
    return list(ijson.items(io.BytesIO(data), "item", use_float=True))


@pytest.mark.parametrize("chunk", [5, 33, 1 << 18])
def test_a_bare_array_is_the_events(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(trace_events, "_CHUNK", chunk)
    for before in ("", "\n  "):
        data = _array(AWKWARD * 3, before=before)
        assert _batched(data, head_size=chunk) == _ijson_array(data) == AWKWARD * 3
    assert _batched(b" \n[ ]\n", head_size=1) == []


def test_a_recorded_trace_as_an_array_is_read_without_ijson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = json.loads(gzip.decompress(TRACES[0].read_bytes()))["traceEvents"]
    data = _array(events)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("ijson was asked")

    monkeypatch.setattr(trace_events, "_ijson_items", refused)
    assert _batched(data) == events and len(events) > 100


def test_a_truncated_or_trailed_array_raises_ijsons_error() -> None:
    data = _array(AWKWARD * 50)
    for cut in (len(data) - 2, len(data) - 4, len(data) // 2):
        with pytest.raises(ijson.IncompleteJSONError):
            _batched(data[:cut], head_size=64)
    with pytest.raises(ijson.JSONError):
        _batched(data + b'{"ph": "X"}', head_size=64)

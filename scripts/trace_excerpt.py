"""Cut an excerpt of a torch.profiler (Kineto JSON) trace: its first steps or a time window.

    python scripts/trace_excerpt.py IN OUT --steps N
    python scripts/trace_excerpt.py IN OUT --window START_US END_US

Everything but ``traceEvents`` is kept as it is (schemaVersion, distributedInfo,
deviceProperties, ...), and so is every event kept: none is changed, only events are left out.
Kept: the metadata events (``ph: M``: process and thread names), the events that start in the
window, the device activities launched in it (matched by ``args.correlation`` to a kept
launch, so a step's last kernels stay even where they end after its host-side span), and the
launch-to-kernel flows (``ac2g``) of those. ``--steps N``: the window from the start of the
first host-side ``ProfilerStep#k`` span to the end of the N-th. ``--window``: microseconds
after the trace's first timestamp. IN and OUT may be plain or ``.gz``; a ``.gz`` OUT is
written with gzip -9 and no name or time in its header, as ``gzip -9n`` does.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Event = dict[str, Any]


def read_trace(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as stream:
        trace = json.load(stream)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError(f"{path}: not a Kineto trace (no traceEvents list)")
    return trace


def write_trace(trace: dict[str, Any], path: Path) -> None:
    data = json.dumps(trace).encode()
    if path.name.endswith(".gz"):
        with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                  compresslevel=9, mtime=0) as out:  # fmt: skip
            out.write(data)
    else:
        path.write_bytes(data)


def _step_number(e: Event) -> int | None:
    name = e.get("name")
    if e.get("ph") != "X" or not isinstance(name, str) or not name.startswith("ProfilerStep#"):
        return None
    if e.get("cat") == "gpu_user_annotation":  # the device-side copy of the span
        return None
    number = name.removeprefix("ProfilerStep#")
    return int(number) if number.isdigit() else None


def step_window(events: Sequence[Event], steps: int) -> tuple[float, float]:
    """From the start of the first host-side ProfilerStep span to the end of the ``steps``-th
    (by step number); ValueError when the trace has none."""
    if steps < 1:
        raise ValueError("--steps takes a whole number of 1 or more")
    spans: dict[int, tuple[float, float]] = {}
    for e in events:
        number = _step_number(e)
        if number is not None:
            start = float(e["ts"])
            spans.setdefault(number, (start, start + float(e.get("dur", 0.0))))
    if not spans:
        raise ValueError("the trace has no ProfilerStep#N spans: give --window instead")
    chosen = [spans[n] for n in sorted(spans)[:steps]]
    return chosen[0][0], max(end for _, end in chosen)


def first_timestamp(events: Sequence[Event]) -> float:
    stamps = [float(e["ts"]) for e in events if e.get("ph") != "M" and "ts" in e]
    if not stamps:
        raise ValueError("the trace has no timed events")
    return min(stamps)


def _correlation(e: Event) -> object:
    args = e.get("args")
    return args.get("correlation") if isinstance(args, dict) else None


def excerpt_events(events: Sequence[Event], *, start: float, end: float) -> list[Event]:
    """The events an excerpt of [start, end) keeps, in their order (the module's docstring)."""

    def starts_inside(e: Event) -> bool:
        return "ts" in e and start <= float(e["ts"]) < end

    launched = {c for e in events if starts_inside(e) for c in [_correlation(e)] if c is not None}
    kept: list[Event] = []
    for e in events:
        flow = e.get("cat") == "ac2g" and e.get("id") in launched
        if e.get("ph") == "M" or starts_inside(e) or flow or _correlation(e) in launched:
            kept.append(e)
    return kept


def excerpt(trace: dict[str, Any], *, start: float, end: float) -> dict[str, Any]:
    """The trace with its header as it is and only the events of [start, end)."""
    cut = dict(trace)
    cut["traceEvents"] = excerpt_events(trace["traceEvents"], start=start, end=end)
    return cut


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, metavar="IN")
    parser.add_argument("target", type=Path, metavar="OUT")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--steps", type=int, help="keep the first N profiled steps")
    which.add_argument("--window", type=float, nargs=2, metavar=("START_US", "END_US"),
                       help="keep [START, END) µs after the trace's first timestamp")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        trace = read_trace(args.source)
        events = trace["traceEvents"]
        if args.steps is not None:
            start, end = step_window(events, args.steps)
        else:
            origin = first_timestamp(events)
            start, end = origin + args.window[0], origin + args.window[1]
        cut = excerpt(trace, start=start, end=end)
        write_trace(cut, args.target)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.target}: {len(cut['traceEvents']):,} of {len(events):,} events, "
          f"[{start:.3f}, {end:.3f}) µs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

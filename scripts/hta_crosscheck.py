"""Cross-check clusterbench's split of real GPU traces against HolisticTraceAnalysis (HTA).

Each TRACE_DIR holds one Kineto trace per rank (``*.json`` or ``*.json.gz``, the rank from the
trace's ``distributedInfo``), as HTA reads a folder.  Per rank, over the profiled steps HTA
keeps (every ``ProfilerStep#N`` but the last), it prints:

- ours (``attribution.trace`` over the host's step spans, no collective waits): coordination,
  compute + memory, exposed communication, and the share of communication under other work,
  against HTA's temporal breakdown (idle, compute, non-compute) and its communication /
  computation overlap, with the differences (ours minus HTA, in points);
- why they differ: ours again, one change at a time, on HTA's basis: the steps as one span;
  only the device events HTA keeps (those whose launch is in the trace, before the last
  step); HTA's window (from the first of them to the end of the last); copies and memsets as
  non-compute; HTA's rounding of fractional-µs timestamps; then the residual against HTA;
- with several ranks: ours with the collective waits taken out (``attribution.ranks``), our
  straggler (the latest median start of the matched collectives; the rank that waits least,
  for which the others wait) and HTA's (``get_potential_stragglers``);
- HTA's idle-time breakdown of each rank's busiest stream (the most device events).

    pip install --no-deps "traceinsight==0.6.1"   # HTA without jupyterlab (needs pandas, networkx)
    PYTHONPATH=src python scripts/hta_crosscheck.py TRACE_DIR [TRACE_DIR ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import logging
import math
import re
import statistics
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench.benchmarks.attribution import ranks, trace

Event = dict[str, Any]
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# ours and HTA's temporal breakdown, class by class
CLASSES = (
    ("coordination", "idle"),
    ("compute + memory", "compute"),
    ("communication", "non-compute"),
)
# HTA's memory kernels, by name (hta/common/types.py, MemoryKernelGroupingPattern)
HTA_MEMORY = re.compile(r"^(hip)?Memcpy|^(hip)?Memset|^dma")
BASES = (  # (column, copies and memsets non-compute, HTA's µs rounding), all on HTA's window
    ("HTA's window", False, False),
    ("+ memcpy/memset non-compute", True, False),
    ("+ HTA's µs rounding", True, True),
)


@dataclass
class Split:
    """Shares of the time in %, ours named: coordination, compute + memory, communication."""

    coordination: float
    busy: float
    communication: float
    overlap: float | None = None
    """Communication under other work, in % of the communication time."""

    def of(self, cls: str) -> float:
        return {"coordination": self.coordination, "compute + memory": self.busy,
                "communication": self.communication}[cls]  # fmt: skip


@dataclass
class Window:
    host_ms: float
    """From the first compared step's host start to the last one's host end."""
    hta_ms: float
    """HTA's: from its first kernel's start to its last kernel's end."""
    head_ms: float
    """How much later HTA's window starts."""
    tail_ms: float
    """How much earlier HTA's window ends (negative: later)."""


@dataclass
class RankCheck:
    rank: int
    steps: list[int]
    ours: Split
    hta: Split
    basis: dict[str, Split] = field(default_factory=dict)
    """Ours on HTA's basis, one change at a time (see the module docstring)."""
    window: Window | None = None
    waited: Split | None = None
    """Ours with the collective waits taken out (coordination includes them)."""
    lateness_ms: float | None = None
    wait_ms: float | None = None
    idle_breakdown: str = ""
    not_ours: dict[str, int] = field(default_factory=dict)
    """Device events HTA counts that our device timeline leaves out (category: count)."""


# --- ours ------------------------------------------------------------------------------------


def load_events(path: Path) -> tuple[int | None, list[Event]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    if isinstance(data, list):
        return None, data
    rank = (data.get("distributedInfo") or {}).get("rank")
    return (int(rank) if rank is not None else None), data.get("traceEvents", [])


def trace_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))


def compared_steps(events: Sequence[Event]) -> list[int]:
    """The steps HTA keeps: all but the last where there are several (its default,
    include_last_profiler_step=False)."""
    steps = [n for n, _, _ in trace.step_spans(events)]
    return steps[:-1] if len(steps) > 1 else steps


def ours_split(breakdowns: Sequence[trace.StepBreakdown]) -> Split:
    """The mean of the steps' shares, as the attribution benchmark reports them."""
    mean = trace.mean_percentages(breakdowns)
    comm = sum(s.communication_ms + s.overlapped_ms for s in breakdowns)
    overlap = 100.0 * sum(s.overlapped_ms for s in breakdowns) / comm if comm > 0 else None
    return Split(mean["coordination"], mean["compute"] + mean["memory"], mean["communication"],
                 overlap)  # fmt: skip


def weighted_split(breakdowns: Sequence[trace.StepBreakdown]) -> Split:
    """The steps as one span: each class's time over the steps' time (HTA's ratio)."""
    total = sum(s.step_ms for s in breakdowns)
    return Split(
        100.0 * sum(s.coordination_ms for s in breakdowns) / total,
        100.0 * sum(s.compute_ms + s.memory_ms for s in breakdowns) / total,
        100.0 * sum(s.communication_ms for s in breakdowns) / total,
    )


def on_window(
    device: Sequence[Event], *, memcpy_non_compute: bool, rounded: bool
) -> tuple[Split, float, float]:
    """Our split of ``device`` events (those HTA keeps) over one span from the first one's
    start to the last one's end, as HTA measures; and that span's start and end in µs.

    ``memcpy_non_compute``: copies and memsets count as non-compute (communication here), as
    HTA's names put them; ``rounded``: starts rounded up and ends down to the µs, as HTA's
    parser does with fractional timestamps (hta/common/trace_parser.py, round_down_time_stamps).
    """
    events = [_rounded(e) for e in device] if rounded else list(device)
    lo = min(float(e["ts"]) for e in events)
    hi = max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in events)
    acts = trace.activities(events)
    if memcpy_non_compute:
        acts = [dataclasses.replace(a, kind="comm") if HTA_MEMORY.match(a.name) else a
                for a in acts]  # fmt: skip
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "ts": lo,
            "dur": hi - lo, "pid": 0, "tid": 0}  # fmt: skip
    (b,) = trace.step_breakdowns([*events, step], acts=acts)
    p = b.percentages()
    return Split(p["coordination"], p["compute"] + p["memory"], p["communication"]), lo, hi


def _rounded(e: Event) -> Event:
    ts, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))
    return {**e, "ts": math.ceil(ts), "dur": math.floor(end) - math.ceil(ts)}


def _device_events(events: Iterable[Event]) -> list[Event]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]


def _correlation(e: Event) -> Any:
    return (e.get("args") or {}).get("correlation")


# --- HTA -------------------------------------------------------------------------------------


@dataclass
class HtaFolder:
    temporal: dict[int, Split]
    kernel_time_us: dict[int, float]
    kept: dict[int, set[tuple[str, Any]]]
    """(category, correlation) of each device event HTA's temporal breakdown counts."""
    stragglers: str
    idle_breakdown: dict[int, str]
    version: str


def run_hta(folder: Path, num_ranks: int) -> HtaFolder:
    from importlib.metadata import version

    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' deprecations, 0/0 without collectives
        ta = TraceAnalysis(trace_dir=str(folder))
        tb = ta.get_temporal_breakdown(visualize=False).set_index("rank")
        overlap = ta.get_comm_comp_overlap(visualize=False).set_index("rank")
        stragglers = "n/a (one rank)"
        if num_ranks > 1:
            try:
                found = ta.get_potential_stragglers(num_candidates=1)
                stragglers = ", ".join(f"rank {r}" for r in found)
            except (ValueError, KeyError, IndexError) as e:  # no long ncclKernel* to rank
                stragglers = f"none found ({type(e).__name__}: {e})"
        idle, _ = ta.get_idle_time_breakdown(ranks=[int(r) for r in tb.index], visualize=False)
    temporal, kernel_time, kept = {}, {}, {}
    sym = ta.t.symbol_table.get_sym_table()
    for r in tb.index:
        row = tb.loc[r]
        temporal[int(r)] = Split(
            float(row["idle_time_pctg"]), float(row["compute_time_pctg"]),
            float(row["non_compute_time_pctg"]),
            _number(overlap.loc[r, "comp_comm_overlap_pctg"]),
        )  # fmt: skip
        kernel_time[int(r)] = float(row["kernel_time(us)"])
        gpu = _device_rows(ta, int(r))
        pairs = zip(gpu["cat"], gpu["correlation"], strict=True)
        kept[int(r)] = {(sym[int(c)], _plain(k)) for c, k in pairs}
    return HtaFolder(
        temporal=temporal, kernel_time_us=kernel_time, kept=kept, stragglers=stragglers,
        idle_breakdown=_idle_lines(idle, ta), version=version("traceinsight"),
    )  # fmt: skip


def _device_rows(ta: Any, rank: int) -> Any:
    """The rows HTA's temporal breakdown counts: those with a stream."""
    df = ta.t.get_trace(rank)
    return df[df["stream"].ne(-1)]


def _number(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _plain(v: Any) -> Any:
    try:
        return int(v)
    except (TypeError, ValueError):
        return v


def _idle_lines(idle: Any, ta: Any) -> dict[int, str]:
    """Per rank: HTA's idle categories on its stream with the most device events."""
    out = {}
    for r, per_rank in idle.groupby("rank"):
        busiest = int(_device_rows(ta, int(r)).groupby("stream").size().idxmax())
        rows = per_rank[per_rank["stream"].eq(busiest)]
        total = float(rows["idle_time"].sum())
        pairs = zip(rows["idle_category"], rows["idle_time"], strict=True)
        parts = ", ".join(f"{c} {100 * float(t) / total:.1f}%" for c, t in pairs) if total else ""
        out[int(r)] = f"stream {busiest}: idle {total / 1e3:.1f} ms ({parts or 'none'})"
    return out


# --- one folder ------------------------------------------------------------------------------


def check_folder(folder: Path) -> tuple[list[RankCheck], HtaFolder] | None:
    loaded: dict[int, list[Event]] = {}
    for i, path in enumerate(trace_files(folder)):
        rank, events = load_events(path)
        loaded[i if rank is None else rank] = events
    usable = [r for r in sorted(loaded) if trace.step_spans(loaded[r]) and
              _device_events(loaded[r])]  # fmt: skip
    if not usable:
        print(f"{folder}: no rank with ProfilerStep#N spans and device events; skipped\n")
        return None
    hta = run_hta(folder, len(loaded))
    acts = {r: trace.activities(loaded[r]) for r in usable}
    steps = {r: compared_steps(loaded[r]) for r in usable}
    per_rank = [
        {n: c for n, c in trace.step_collectives(loaded[r], acts=acts[r]).items() if n in steps[r]}
        for r in usable
    ]
    several = len(usable) > 1
    waits = ranks.collective_waits(per_rank) if several else [{}]
    late = ranks.start_lateness(per_rank)[1] if several else [[]]
    out = []
    for i, r in enumerate(usable):
        events = loaded[r]
        plain = [s for s in trace.step_breakdowns(events, acts=acts[r]) if s.step in steps[r]]
        check = RankCheck(rank=r, steps=steps[r], ours=ours_split(plain), hta=hta.temporal[r])
        check.basis["time-weighted"] = weighted_split(plain)
        device = [e for e in _device_events(events) if (e["cat"], _correlation(e)) in hta.kept[r]]
        kept = trace.step_breakdowns(events, acts=trace.activities(device))
        check.basis["HTA's events"] = weighted_split([s for s in kept if s.step in steps[r]])
        for name, memcpy, rounded in BASES:
            check.basis[name], lo, hi = on_window(device, memcpy_non_compute=memcpy,
                                                  rounded=rounded)  # fmt: skip
            if not rounded:
                host = {n: (start, end) for n, start, end in trace.step_spans(events)}
                first, last = host[steps[r][0]][0], host[steps[r][-1]][1]
                check.window = Window((last - first) / 1e3, (hi - lo) / 1e3, (lo - first) / 1e3,
                                      (last - hi) / 1e3)  # fmt: skip
            elif abs(hi - lo - hta.kernel_time_us[r]) > 1.0:
                print(f"note: rank {r}: our window {hi - lo:.0f} µs, "
                      f"HTA's {hta.kernel_time_us[r]:.0f} µs")  # fmt: skip
        check.not_ours = {c: sum(1 for k, _ in hta.kept[r] if k == c)
                          for c in {c for c, _ in hta.kept[r]} if c not in GPU_CATS}  # fmt: skip
        if several:
            waited = trace.step_breakdowns(events, acts=acts[r], waits_ms=waits[i])
            check.waited = ours_split([s for s in waited if s.step in steps[r]])
            check.lateness_ms = statistics.median(late[i]) if late[i] else None
            check.wait_ms = sum(sum(w) for w in waits[i].values())
        check.idle_breakdown = hta.idle_breakdown.get(r, "")
        out.append(check)
    return out, hta


# --- printing --------------------------------------------------------------------------------


def _f(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _d(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a - b:+.2f}"


def _cells(ours: float | None, hta: float | None) -> str:
    return f"{_f(ours)} | {_f(hta)} | {_d(ours, hta)}"


def print_folder(folder: Path, checks: Sequence[RankCheck], hta: HtaFolder) -> None:
    print(f"### {folder.name}: {len(checks)} rank(s), HTA {hta.version}\n")
    print("Ours over the steps HTA keeps (the mean of the steps' shares, no collective waits) "
          "against HTA's temporal breakdown and overlap; Δ = ours − HTA, in points.\n")  # fmt: skip
    print(
        "| rank | steps | coordination % | HTA idle % | Δ | compute+memory % | HTA compute % | Δ "
        "| exposed comm % | HTA non-compute % | Δ | comm overlapped % | HTA overlap % | Δ |"
    )
    print("|---|---|" + "---|" * 12)
    for c in checks:
        o, h = c.ours, c.hta
        steps = ",".join(map(str, c.steps))
        print(f"| {c.rank} | {steps} | {_cells(o.coordination, h.coordination)} "
              f"| {_cells(o.busy, h.busy)} | {_cells(o.communication, h.communication)} "
              f"| {_cells(o.overlap, h.overlap)} |")  # fmt: skip
    print("\nWhy: ours on HTA's basis, one change at a time (each column adds one).\n")
    names = list(checks[0].basis)
    print("| rank | class | ours | " + " | ".join(names) + " | HTA | residual: HTA − last |")
    print("|---|---|---|" + "---|" * (len(names) + 2))
    for c in checks:
        for ours_name, hta_name in CLASSES:
            row = [c.ours.of(ours_name), *(c.basis[n].of(ours_name) for n in names)]
            cells = " | ".join(_f(v) for v in row)
            h = c.hta.of(ours_name)
            print(f"| {c.rank} | {ours_name} (HTA {hta_name}) | {cells} | {_f(h)} "
                  f"| {_d(h, row[-1])} |")  # fmt: skip
    print()
    for c in checks:
        w = c.window
        if w is not None:
            where = "before" if w.tail_ms >= 0 else "after"
            print(f"- rank {c.rank}: the host's steps span {w.host_ms:.2f} ms, HTA's window "
                  f"{w.hta_ms:.2f} ms; it starts {w.head_ms:.2f} ms after the first step's "
                  f"host start and ends {abs(w.tail_ms):.2f} ms {where} the last step's "
                  "host end")  # fmt: skip
        if c.not_ours:
            print(f"- rank {c.rank}: HTA also counts device events ours leaves out: {c.not_ours}")
        print(f"- rank {c.rank}: HTA's idle-time breakdown, {c.idle_breakdown}")
    if len(checks) > 1:
        print("\nWith the collective waits taken out (the time a collective waited for the last "
              "rank is coordination), and the straggler.\n")  # fmt: skip
        print(
            "| rank | coordination % | exposed comm % | median start lateness ms "
            "| collective wait ms |"
        )
        print("|---|---|---|---|---|")
        for c in checks:
            w = c.waited or c.ours
            print(f"| {c.rank} | {_f(w.coordination)} | {_f(w.communication)} "
                  f"| {_f(c.lateness_ms, 3)} | {_f(c.wait_ms, 1)} |")  # fmt: skip
        latest = max(checks, key=lambda c: c.lateness_ms or 0.0)
        waited_for = min(checks, key=lambda c: c.wait_ms or 0.0)
        print(f"\nOur straggler: rank {latest.rank} (the latest median start of the matched "
              f"collectives), rank {waited_for.rank} (waits least: the others wait for it). "
              f"HTA's potential straggler: {hta.stragglers}.")  # fmt: skip
    print()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dirs", nargs="+", type=Path, metavar="TRACE_DIR",
                        help="a folder of Kineto traces, one per rank")  # fmt: skip
    args = parser.parse_args(argv)
    for folder in args.trace_dirs:
        result = check_folder(folder)
        if result is not None:
            print_folder(folder, *result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

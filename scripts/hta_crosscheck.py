"""Cross-check clusterbench's split of real GPU traces against HolisticTraceAnalysis (HTA).

Each TRACE_DIR holds one Kineto trace per rank (``*.json`` or ``*.json.gz``), as HTA reads a
folder; where HTA would read two files as one rank (no ``distributedInfo.rank``: rank 0; a
profiler schedule that repeats writes one file per cycle), each file is checked alone. Per
rank, over the profiled steps HTA keeps (every ``ProfilerStep#N`` but the last where there are
several; the whole trace where it has none), it prints:

- ours, read as ``clusterbench analyze`` reads a trace (``analysis.trace_file.read_trace``:
  the steps, or one window from the first activity to the last), without the collective
  waits: coordination (idle), compute + memory (+ unclassified), exposed communication and
  the share of communication under other work, against HTA's temporal breakdown (idle,
  compute, non-compute) and its communication/computation overlap, with the differences
  (ours minus HTA, in points);
- why they differ: ours again, one of HTA's definitions adopted at a time (``BASES``), and
  the residual against HTA;
- with several ranks: our coordination with the collective waits (what analyze reports), each
  rank's lateness, the straggler ``clusterbench analyze`` names (its ``attribution.straggler``
  finding) and HTA's (``get_potential_stragglers``, with its per-rank start of the kernel it
  ranks by);
- HTA's idle-time breakdown of each rank's busiest stream (the most device events).

    pip install --no-deps "traceinsight==0.6.1"   # HTA without jupyterlab (needs pandas, networkx)
    PYTHONPATH=src python scripts/hta_crosscheck.py TRACE_DIR [TRACE_DIR ...]
    PYTHONPATH=src python scripts/hta_crosscheck.py --corpus tests/data/traces-public  # every job
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import json
import logging
import math
import re
import statistics
import sys
import tempfile
import warnings
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterbench.analyses.trace import attribution as trace_attribution
from clusterbench.analyses.trace.file import RankTrace, TraceError, read_trace
from clusterbench.analyses.trace.formats import modern_cat
from clusterbench.traces import trace

Event = dict[str, Any]
Act = trace.Activity
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# ours and HTA's temporal breakdown, class by class, and the overlap
CLASSES = (
    ("coordination", "idle"),
    ("compute + memory", "compute"),
    ("communication", "non-compute"),
    ("overlapped", "overlap"),
)
# HTA's memory kernels, by name (hta/common/types.py, MemoryKernelGroupingPattern)
HTA_MEMORY = re.compile(r"^(hip)?Memcpy|^(hip)?Memset|^dma")


@dataclass(frozen=True)
class Basis:
    """Ours on HTA's basis: which of its definitions are adopted (each column adds one)."""

    name: str
    window: bool = False
    """HTA's span: from the first kept device event's start to the last one's end."""
    copies: bool = False
    """Copies and memsets (HTA's memory kernels, by name) non-compute, not work under which
    communication overlaps."""
    names: bool = False
    """Every kernel classed by HTA's names (hta/utils/utils.py, get_kernel_type): computation
    is compute, the rest non-compute; communication is what HTA names so."""
    others: bool = False
    """With the other events HTA gives a stream (host ops that carry a ``stream`` argument,
    CUDA synchronisation), classed by HTA's names: HTA counts every event with a stream."""
    rounded: bool = False
    """Starts rounded up and ends down to the µs, as HTA's parser does with fractional
    timestamps (hta/common/trace_parser.py, round_down_time_stamps)."""


BASES = (
    Basis("HTA's window", window=True),
    Basis("+ copies non-compute", window=True, copies=True),
    Basis("+ HTA's kernel names", window=True, copies=True, names=True),
    Basis("+ HTA's other stream events", window=True, copies=True, names=True, others=True),
    Basis("+ HTA's µs rounding", window=True, copies=True, names=True, others=True, rounded=True),
)
STEPS = ("averaging", "events", "span", "copies", "names", "others", "rounding")
"""The definitions the basis columns adopt, in order: each moves ours by the difference of two
neighbouring columns (ours, time-weighted, HTA's events, then ``BASES``)."""


@dataclass
class Split:
    """Shares of the time in %, ours named: coordination, compute + memory, communication."""

    coordination: float
    busy: float
    communication: float
    overlap: float | None = None
    """Communication under other work, in % of the communication time."""

    def of(self, cls: str) -> float | None:
        return {"coordination": self.coordination, "compute + memory": self.busy,
                "communication": self.communication, "overlapped": self.overlap}[cls]  # fmt: skip


@dataclass
class Window:
    host_ms: float
    """From the first compared step's host start to the last one's host end."""
    hta_ms: float
    """HTA's: from its first kept device event's start to its last one's end."""
    head_ms: float
    """How much later HTA's window starts."""
    tail_ms: float
    """How much earlier HTA's window ends (negative: later)."""


@dataclass
class RankCheck:
    rank: int
    file: str
    steps: list[int]
    ours: Split
    hta: Split
    basis: dict[str, Split] = field(default_factory=dict)
    """Ours with HTA's definitions adopted one at a time (see ``STEPS``)."""
    window: Window | None = None
    unclassified_pct: float = 0.0
    """Of ours' compute + memory: kernels the table of families does not know."""
    waited: Split | None = None
    """Ours with the collective waits (coordination includes them), as analyze reports it."""
    lateness_ms: float | None = None
    last_arrivals: int = 0
    saving_ms: float | None = None
    idle_breakdown: str = ""
    not_ours: dict[str, int] = field(default_factory=dict)
    """Device events HTA counts that our device timeline leaves out (category: count)."""

    def moves(self, cls: str) -> dict[str, float]:
        """Per definition of ``STEPS``, the points it moves ours of ``cls`` towards HTA's; and
        ``residual``: HTA minus ours with all of them adopted."""
        chain = [self.ours.of(cls), *(b.of(cls) for b in self.basis.values())]
        out = {s: _minus(b, a) for s, a, b in zip(STEPS, chain[:-1], chain[1:], strict=True)}
        out["residual"] = _minus(self.hta.of(cls), chain[-1])
        return out

    def delta(self, cls: str) -> float | None:
        ours, hta = self.ours.of(cls), self.hta.of(cls)
        return None if ours is None or hta is None else ours - hta


def _minus(a: float | None, b: float | None) -> float:
    return 0.0 if a is None or b is None else a - b


@dataclass
class HtaRun:
    temporal: dict[int, Split]
    kernel_time_us: dict[int, float]
    kept: dict[int, set[tuple[str, Any]]]
    """(category, correlation) of each device event HTA's temporal breakdown counts."""
    others: dict[int, list[Event]] = field(default_factory=dict)
    """The other events it counts (those with a stream, not kernels, copies or memsets), as
    HTA holds them (its timestamps)."""
    note: str = ""
    """How HTA's figures were had where its temporal breakdown fails."""
    stragglers: str = ""
    late_starts: dict[int, list[float]] = field(default_factory=dict)
    """Per rank, the start (ms after the earliest rank, per step) of the kernel HTA's
    straggler analysis ranks by."""
    idle_breakdown: dict[int, str] = field(default_factory=dict)
    version: str = ""


@dataclass
class UnitCheck:
    """One folder (or one file of it) as HTA reads it."""

    name: str
    files: list[Path]
    ranks: list[RankCheck] = field(default_factory=list)
    hta: HtaRun | None = None
    error: str = ""
    """Why HTA could not give its temporal breakdown, or our reader could not read a file
    HTA reads (empty: both did)."""
    our_straggler: str = ""


# --- what HTA reads as one job ---------------------------------------------------------------


def trace_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))


def is_array(path: Path) -> bool:
    """A trace that is a JSON array of events (torch.profiler before PyTorch 1.8.0)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read(256).lstrip()[:1] == b"["


def hta_rank(path: Path, *, wrap: bool = False) -> int:
    """The rank HTA gives the file: its first ``"rank": N``, else 0 (hta/common/trace_file.py,
    create_rank_to_trace_dict); ``wrap``: an array's, the rank our reader gives it (what
    :func:`hta_analysis` writes into its wrapped copy)."""
    from hta.common.trace_file import create_rank_to_trace_dict

    if wrap and is_array(path):
        return read_trace(path).rank

    logging.getLogger("hta").setLevel(logging.CRITICAL)  # its advice on files without a rank
    _, found = create_rank_to_trace_dict([str(path)])
    return int(next(iter(found)))


def units(folder: Path, *, wrap: bool = False) -> list[tuple[str, list[Path]]]:
    """(name, files) HTA reads as one job: the folder, or each file where two share a rank."""
    files = trace_files(folder)
    by_rank: dict[int, list[Path]] = defaultdict(list)
    for path in files:
        by_rank[hta_rank(path, wrap=wrap)].append(path)
    if all(len(paths) == 1 for paths in by_rank.values()):
        return [(folder.name, files)]
    return [(f"{folder.name}/{p.name}", [p]) for p in files]


# --- HTA -------------------------------------------------------------------------------------


class HtaError(Exception):
    """HTA cannot read the traces or give their temporal breakdown: its error, one line."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}".splitlines()[0][:300])


@contextlib.contextmanager
def hta_analysis(files: Sequence[Path], *, wrap: bool = False) -> Iterator[Any]:
    """HTA's TraceAnalysis of ``files`` (a folder of links to them), parsed in this process
    (its constructor parses several ranks in forked workers; the result is the same);
    ``wrap``: a JSON array of events given to HTA as ``{"distributedInfo": {"rank": N},
    "traceEvents": [...]}``, the events unchanged (HTA 0.6.1 reads only that form)."""
    from hta.common.trace import Trace
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' deprecations, 0/0 without collectives
        for path in files:
            if wrap and is_array(path):
                _write_wrapped(path, Path(tmp) / f"rank-{hta_rank(path, wrap=True)}.json")
            else:
                (Path(tmp) / path.name).symlink_to(path.resolve())
        ta = TraceAnalysis.__new__(TraceAnalysis)
        try:
            ta.t = Trace(trace_dir=tmp)
            ta.t.load_traces(use_multiprocessing=False)  # drops the last step, as it does
        except Exception as e:  # whatever HTA raises: the cross-check's finding
            raise HtaError(e) from e
        yield ta


def _write_wrapped(path: Path, to: Path) -> None:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)
    document = {"distributedInfo": {"rank": hta_rank(path, wrap=True)}, "traceEvents": events}
    to.write_text(json.dumps(document))


def run_hta(ta: Any, *, several: bool) -> HtaRun:
    from importlib.metadata import version

    tb, note = _temporal(ta)
    overlap = ta.get_comm_comp_overlap(visualize=False).set_index("rank")
    temporal, kernel_time, kept, others = {}, {}, {}, {}
    sym = ta.t.symbol_table.get_sym_table()
    for r, row in tb.items():
        idle, compute, non_compute, total = row
        temporal[r] = Split(100 * idle / total, 100 * compute / total, 100 * non_compute / total,
                            _number(overlap.loc[r, "comp_comm_overlap_pctg"]))  # fmt: skip
        kernel_time[r] = float(total)
        gpu = _device_rows(ta, r)
        cats = [modern_cat(sym[int(c)], "") for c in gpu["cat"]]
        kept[r] = {(c, _plain(k)) for c, k in zip(cats, gpu["correlation"], strict=True)}
        rows = zip(cats, gpu["name"], gpu["ts"], gpu["dur"], strict=True)
        shift = float(getattr(ta.t, "min_ts", 0.0))  # HTA starts its clock at the first event
        others[r] = [{"ph": "X", "cat": c, "name": sym[int(n)], "ts": float(ts) + shift,
                      "dur": float(d)} for c, n, ts, d in rows if c not in GPU_CATS]  # fmt: skip
    out = HtaRun(temporal=temporal, kernel_time_us=kernel_time, kept=kept, others=others, note=note,
                 version=version("traceinsight"))  # fmt: skip
    if several:
        out.stragglers, out.late_starts = _hta_stragglers(ta)
    try:
        idle, _ = ta.get_idle_time_breakdown(ranks=sorted(tb), visualize=False)
        out.idle_breakdown = _idle_lines(idle, ta)
    except (ValueError, KeyError, IndexError) as e:
        out.idle_breakdown = {r: f"fails ({type(e).__name__}: {e})" for r in tb}
    return out


def _temporal(ta: Any) -> tuple[dict[int, tuple[float, float, float, float]], str]:
    """Per rank (idle, compute, non-compute, window) µs of HTA's temporal breakdown; where one
    of its assertions fails, the same figures from its own functions, the failure named."""
    try:
        tb = ta.get_temporal_breakdown(visualize=False).set_index("rank")
    except (IndexError, KeyError, ValueError) as e:
        raise HtaError(e) from e
    except AssertionError:
        out = {r: _temporal_unchecked(ta, r) for r in ta.t.get_ranks()}
        worst = ", ".join(f"rank {r}: {v[2]:.0f} µs" for r, v in out.items() if v[2] < 0)
        return out, (
            "HTA's get_temporal_breakdown fails its assertion non_compute_time >= 0 "
            f"(non-compute {worst}); its figures here are its own functions' without it"
        )
    cols = ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)")
    return {int(r): tuple(float(tb.loc[r, c]) for c in cols) for r in tb.index}, ""  # type: ignore[misc]


def _temporal_unchecked(ta: Any, rank: int) -> tuple[float, float, float, float]:
    """HTA's per-rank temporal breakdown (hta/analyzers/breakdown_analysis.py,
    get_temporal_breakdown) from its own functions, without its assertions."""
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.utils.utils import KernelType, get_kernel_type, merge_kernel_intervals

    sym = ta.t.symbol_table.get_sym_table()
    gpu = _device_rows(ta, rank).copy()
    idle, total = BreakdownAnalysis._get_idle_time_for_kernels(gpu)
    comp = gpu[gpu["name"].map(lambda n: get_kernel_type(sym[n]) == KernelType.COMPUTATION.name)]
    merged = merge_kernel_intervals(comp.copy())
    compute = float(merged.end.sum() - merged.ts.sum())
    return float(idle), compute, float(total - compute - idle), float(total)


def _hta_stragglers(ta: Any) -> tuple[str, dict[int, list[float]]]:
    """HTA's potential straggler and, per rank, the start of the kernel it ranks by (ms after
    the earliest rank's, each step), on HTA's common clock (hta/analyzers/straggler.py)."""
    from hta.analyzers import straggler

    seen: dict[str, Any] = {}

    def impl(df: Any, symbols: Any, num: int, visualize: bool) -> Any:
        metric, _ = straggler._compute_normalized_start_time_of_significant_comm_kernels(
            df, symbols
        )
        seen["metric"] = metric
        return straggler.find_stragglers_with_late_start_comm_kernels(df, symbols, num, visualize)

    try:
        found = ta.get_potential_stragglers(num_candidates=1, straggler_identification_impl=impl)
    except (ValueError, KeyError, IndexError) as e:  # no long ncclKernel* to rank
        return f"none ({type(e).__name__}: {e})", {}
    late: dict[int, list[float]] = defaultdict(list)
    for _, rows in seen["metric"].groupby("iteration"):
        first = float(rows["ts"].min())
        for r, ts in zip(rows["rank"], rows["ts"], strict=True):
            late[int(r)].append((float(ts) - first) / 1e3)
    return ", ".join(f"rank {r}" for r in found), dict(late)


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


def hta_kind(name: str) -> str:
    from hta.utils.utils import get_kernel_type

    return str(get_kernel_type(name))


# --- ours ------------------------------------------------------------------------------------


def load_events(path: Path) -> list[Event]:
    """The file's events, their categories today's (as analyze's reader reads PyTorch 1.8's)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    events = data if isinstance(data, list) else data.get("traceEvents", [])
    return [{**e, "cat": modern_cat(str(e.get("cat", "")), str(e.get("name", "")))}
            for e in events if isinstance(e, dict)]  # fmt: skip


def compared(t: RankTrace) -> list[tuple[int, float, float]]:
    """The steps HTA keeps: all but the last where there are several (its default,
    include_last_profiler_step=False); one step or a window whole."""
    return t.steps[:-1] if len(t.steps) > 1 else t.steps


def _step(n: int, start: float, end: float) -> Event:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": start,
            "dur": end - start}  # fmt: skip


def breakdowns(
    acts: Sequence[Act],
    spans: Sequence[tuple[int, float, float]],
    waits: dict[int, list[float]] | None = None,
) -> list[trace.StepBreakdown]:
    out = []
    for n, start, end in spans:
        mine = [a for a in acts if a.end_us > start and a.start_us < end]
        out += trace.step_breakdowns([_step(n, start, end)], acts=mine, waits_ms=waits)
    return out


def mean_split(steps: Sequence[trace.StepBreakdown]) -> Split:
    """The mean of the steps' shares, as analyze reports them."""
    m = trace.mean_percentages(steps)
    comm = sum(s.communication_ms + s.overlapped_ms for s in steps)
    overlap = 100.0 * sum(s.overlapped_ms for s in steps) / comm if comm > 0 else None
    return Split(m["coordination"], m["compute"] + m["memory"] + m["unclassified"],
                 m["communication"], overlap)  # fmt: skip


def weighted_split(steps: Sequence[trace.StepBreakdown]) -> Split:
    """The steps as one span: each class's time over the steps' time (HTA's ratio)."""
    total = sum(s.step_ms for s in steps)
    comm = sum(s.communication_ms + s.overlapped_ms for s in steps)
    return Split(
        100.0 * sum(s.coordination_ms for s in steps) / total,
        100.0 * sum(s.compute_ms + s.memory_ms + s.unclassified_ms for s in steps) / total,
        100.0 * sum(s.communication_ms for s in steps) / total,
        100.0 * sum(s.overlapped_ms for s in steps) / comm if comm > 0 else None,
    )


def on_basis(
    device: Sequence[Event],
    spans: Sequence[tuple[int, float, float]],
    basis: Basis,
    *,
    others: Sequence[Event] = (),
) -> tuple[Split, float, float]:
    """Our split of the ``device`` events (those HTA keeps) on ``basis``, and HTA's window
    (µs): over ``spans``, or that window where ``basis.window``; ``others``: HTA's other
    events with a stream."""
    events = [*device, *(others if basis.others else ())]
    events = [_rounded(e) for e in events] if basis.rounded else events
    lo = min(float(e["ts"]) for e in events)
    hi = max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in events)
    acts = trace.activities([{**e, "cat": "kernel"} if e["cat"] not in GPU_CATS else e
                             for e in events])  # fmt: skip
    spans = [(0, lo, hi)] if basis.window else spans
    work, comm = _overlap_sides(acts, basis)
    if basis.names:
        acts = [dataclasses.replace(a, kind=_hta_class(a.name)) for a in acts]
    elif basis.copies:
        acts = [dataclasses.replace(a, kind="comm") if HTA_MEMORY.match(a.name) else a
                for a in acts]  # fmt: skip
    split = weighted_split(breakdowns(acts, spans))
    split.overlap = _overlap_pct(work, comm, spans)
    return split, lo, hi


def _hta_class(name: str) -> trace.Kind:
    """compute for HTA's computation kernels; the rest non-compute (our timeline's comm)."""
    return "compute" if hta_kind(name) == "COMPUTATION" else "comm"


def _overlap_sides(acts: Sequence[Act], basis: Basis) -> tuple[list[Act], list[Act]]:
    """(work, communication): the overlap is the communication time under work, of the
    communication time."""
    if basis.names:
        kinds = [hta_kind(a.name) for a in acts]
        return ([a for a, k in zip(acts, kinds, strict=True) if k == "COMPUTATION"],
                [a for a, k in zip(acts, kinds, strict=True) if k == "COMMUNICATION"])  # fmt: skip
    work = [a for a in acts if a.kind != "comm"]
    if basis.copies:
        work = [a for a in work if not HTA_MEMORY.match(a.name)]
    return work, [a for a in acts if a.kind == "comm"]


def _merged(acts: Sequence[Act], spans: Sequence[tuple[int, float, float]]) -> list[list[float]]:
    out: list[list[float]] = []
    clipped = sorted((max(a.start_us, s), min(a.end_us, e)) for a in acts for _, s, e in spans)
    for lo, hi in clipped:
        if hi <= lo:
            continue
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def _overlap_pct(
    work: Sequence[Act], comm: Sequence[Act], spans: Sequence[tuple[int, float, float]]
) -> float | None:
    under, over = _merged(work, spans), _merged(comm, spans)
    total = sum(hi - lo for lo, hi in over)
    if total <= 0:
        return None
    both, i = 0.0, 0
    for lo, hi in over:
        while i < len(under) and under[i][1] <= lo:
            i += 1
        j = i
        while j < len(under) and under[j][0] < hi:
            both += min(hi, under[j][1]) - max(lo, under[j][0])
            j += 1
    return 100.0 * both / total


def _rounded(e: Event) -> Event:
    ts, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))
    return {**e, "ts": math.ceil(ts), "dur": math.floor(end) - math.ceil(ts)}


def _device_events(events: Sequence[Event]) -> list[Event]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]


def _correlation(e: Event) -> Any:
    return (e.get("args") or {}).get("correlation")


# --- one unit --------------------------------------------------------------------------------


def check_unit(
    name: str, files: Sequence[Path], *, straggler: bool = True, wrap: bool = False
) -> UnitCheck:
    """Ours and HTA's on the ``files`` HTA reads as one job; ``straggler``: with several
    ranks, run ``clusterbench analyze`` on them for the straggler it names; ``wrap``: see
    :func:`hta_analysis`."""
    unit = UnitCheck(name=name, files=list(files))
    try:
        with hta_analysis(files, wrap=wrap) as ta:
            unit.hta = run_hta(ta, several=len(files) > 1)
    except HtaError as e:
        unit.error = str(e)
        return unit
    traces = {}
    for path in files:
        try:
            traces[hta_rank(path, wrap=wrap)] = read_trace(path, default_rank=0)
        except TraceError as e:
            unit.error = f"clusterbench cannot read it: {e}"
            return unit
    attributed = {}
    if len(traces) > 1:
        attributed = {
            a.trace.path: a for a in trace_attribution.attribute(list(traces.values())).ranks
        }
    for r, t in sorted(traces.items()):
        unit.ranks.append(_check_rank(r, t, unit.hta))
        if t.path in attributed:
            _add_waits(unit.ranks[-1], attributed[t.path])
    if straggler and len(traces) > 1:
        unit.our_straggler = analyze_straggler(files)
    return unit


def _check_rank(r: int, t: RankTrace, hta: HtaRun) -> RankCheck:
    spans = compared(t)
    every = t.activities(t.steps[0][1], t.steps[-1][2])
    plain = breakdowns(every, spans)
    check = RankCheck(rank=r, file=t.path.name, steps=[n for n, _, _ in spans],
                      ours=mean_split(plain), hta=hta.temporal[r])  # fmt: skip
    check.unclassified_pct = trace.mean_percentages(plain)["unclassified"]
    check.basis["time-weighted"] = weighted_split(plain)
    events = load_events(t.path)
    device = [e for e in _device_events(events) if (e["cat"], _correlation(e)) in hta.kept[r]]
    check.basis["HTA's events"] = weighted_split(breakdowns(trace.activities(device), spans))
    everything = weighted_split(breakdowns(trace.activities(_device_events(events)), spans))
    if abs(everything.coordination - check.basis["time-weighted"].coordination) > 0.01:
        print(f"note: {t.path.name}: the events read here and analyze's reader differ by "
              f"{everything.coordination - check.basis['time-weighted'].coordination:+.2f} "
              "points of coordination")  # fmt: skip
    for basis in BASES:
        check.basis[basis.name], lo, hi = on_basis(device, spans, basis, others=hta.others[r])
        if not basis.rounded and not basis.copies:
            first, last = spans[0][1], spans[-1][2]
            check.window = Window((last - first) / 1e3, (hi - lo) / 1e3, (lo - first) / 1e3,
                                  (last - hi) / 1e3)  # fmt: skip
    for e in hta.others[r]:
        check.not_ours[e["cat"]] = check.not_ours.get(e["cat"], 0) + 1
    check.idle_breakdown = hta.idle_breakdown.get(r, "")
    return check


def _add_waits(check: RankCheck, attributed: trace_attribution.RankAttribution) -> None:
    steps = set(check.steps)
    check.waited = mean_split([s for s in attributed.steps if s.step in steps])
    late = attributed.lateness_ms
    check.lateness_ms = statistics.median(late) if late else None
    check.last_arrivals = attributed.last_arrivals
    check.saving_ms = attributed.straggler_saving_ms


def analyze_straggler(files: Sequence[Path]) -> str:
    """The rank ``clusterbench analyze`` names the straggler (its attribution.straggler
    finding, with its severity), or none; run on ``files`` as the CLI runs."""
    from clusterbench.pipeline.imported import analyze_traces

    with tempfile.TemporaryDirectory() as tmp:
        finished = analyze_traces(list(files), out=Path(tmp) / "run", use_history=False,
                                  jobs=1, warn=lambda _: None)  # fmt: skip
    found = [f for f in finished.results.findings if f.id == "attribution.straggler"]
    return ", ".join(f"rank {f.evidence['rank']} ({f.severity})" for f in found) or "none"


def check_folder(folder: Path, *, straggler: bool = True, wrap: bool = False) -> list[UnitCheck]:
    return [check_unit(name, files, straggler=straggler, wrap=wrap)
            for name, files in units(folder, wrap=wrap)]  # fmt: skip


# --- printing --------------------------------------------------------------------------------


def _f(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _d(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a - b:+.2f}"


def _row(*cells: object) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def _cells(ours: float | None, hta: float | None) -> str:
    return f"{_f(ours)} | {_f(hta)} | {_d(ours, hta)}"


def print_unit(unit: UnitCheck) -> None:
    if unit.hta is None or not unit.ranks:
        who = "" if unit.error.startswith("clusterbench") else "HTA cannot read it: "
        print(f"### {unit.name}: {who}{unit.error}\n")
        return
    hta = unit.hta
    print(f"### {unit.name}: {len(unit.ranks)} rank(s), HTA {hta.version}\n")
    if hta.note:
        print(f"{hta.note}.\n")
    print("Ours over the steps HTA keeps (the mean of the steps' shares, no collective waits) "
          "against HTA's temporal breakdown and overlap; Δ = ours − HTA, in points.\n")  # fmt: skip
    print(
        "| rank | steps | coordination % | HTA idle % | Δ | compute+memory % | HTA compute % | Δ "
        "| exposed comm % | HTA non-compute % | Δ | comm overlapped % | HTA overlap % | Δ |"
    )
    print("|---|---|" + "---|" * 12)
    for c in unit.ranks:
        print(
            _row(c.rank, _steps(c.steps), *(_cells(c.ours.of(o), c.hta.of(o)) for o, _ in CLASSES))
        )
    print("\nWhy: ours on HTA's basis, one change at a time (each column adds one).\n")
    names = list(unit.ranks[0].basis)
    print("| rank | class | ours | " + " | ".join(names) + " | HTA | residual: HTA − last |")
    print("|---|---|---|" + "---|" * (len(names) + 2))
    for c in unit.ranks:
        for ours_name, hta_name in CLASSES:
            row = [c.ours.of(ours_name), *(c.basis[n].of(ours_name) for n in names)]
            h = c.hta.of(ours_name)
            cells = (_f(v) for v in row)
            print(_row(c.rank, f"{ours_name} (HTA {hta_name})", *cells, _f(h), _d(h, row[-1])))
    print()
    for c in unit.ranks:
        _print_rank_notes(c, hta)
    if len(unit.ranks) > 1:
        _print_stragglers(unit)
    print()


def _steps(steps: Sequence[int]) -> str:
    if steps == [0]:
        return "window"
    return ",".join(map(str, steps)) if len(steps) < 4 else f"{steps[0]}–{steps[-1]}"


def _print_rank_notes(c: RankCheck, hta: HtaRun) -> None:
    w = c.window
    if w is not None:
        where = "before" if w.tail_ms >= 0 else "after"
        print(f"- rank {c.rank} ({c.file}): the host's steps span {w.host_ms:.2f} ms, HTA's "
              f"window {w.hta_ms:.2f} ms; it starts {w.head_ms:.2f} ms after the first step's "
              f"host start and ends {abs(w.tail_ms):.2f} ms {where} the last step's "
              "host end")  # fmt: skip
    if c.unclassified_pct >= 0.005:
        print(f"- rank {c.rank}: {c.unclassified_pct:.2f}% of ours is unclassified kernels "
              "(in compute + memory here)")  # fmt: skip
    if c.not_ours:
        print(f"- rank {c.rank}: HTA also counts device events ours leaves out: {c.not_ours}")
    print(f"- rank {c.rank}: HTA's idle-time breakdown, {c.idle_breakdown}")


def _print_stragglers(unit: UnitCheck) -> None:
    assert unit.hta is not None
    print("\nWith the collective waits (what analyze reports: the time a collective waited for "
          "the last rank is coordination), and the straggler.\n")  # fmt: skip
    print("| rank | coordination % | exposed comm % | median start lateness ms | last arrivals "
          "| straggler saving ms | HTA's kernel start ms (per step) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for c in unit.ranks:
        w = c.waited or c.ours
        late = ", ".join(f"{v:.2f}" for v in unit.hta.late_starts.get(c.rank, [])) or "–"
        print(_row(c.rank, _f(w.coordination), _f(w.communication), _f(c.lateness_ms, 3),
                   c.last_arrivals, _f(c.saving_ms), late))  # fmt: skip
    print(f"\nclusterbench analyze's straggler: {unit.our_straggler or 'not run'}. "
          f"HTA's potential straggler: {unit.hta.stragglers}.")  # fmt: skip


def print_summary(checked: Sequence[UnitCheck]) -> None:
    """One table of every rank, then what HTA cannot read, then every difference over
    ``OVER`` points with the definitions that move it."""
    print("## Summary\n")
    print("| trace | rank | steps | idle | HTA | Δ | compute | HTA | Δ | comm. | HTA | Δ "
          "| overlap | HTA | Δ |")  # fmt: skip
    print("|---|---|---|" + "---|" * 12)
    for unit in checked:
        for c in unit.ranks:
            cells = (_cells(c.ours.of(o), c.hta.of(o)) for o, _ in CLASSES)
            print(_row(unit.name, c.rank, _steps(c.steps), *cells))
    failed = [u for u in checked if u.error]
    if failed:
        print("\nNot compared:\n")
        for u in failed:
            print(f"- {u.name}: {u.error}")
    print(f"\nDifferences over {OVER} points, the points each definition moves ours towards "
          "HTA's:\n")  # fmt: skip
    print("| trace | rank | class | Δ | " + " | ".join(STEPS) + " | residual |")
    print("|---|---|---|---|" + "---|" * (len(STEPS) + 1))
    for unit, c, cls in large_differences(checked):
        moves = c.moves(cls)
        print(f"| {unit.name} | {c.rank} | {cls} | {_d(c.ours.of(cls), c.hta.of(cls))} | "
              + " | ".join(f"{moves[s]:+.2f}" for s in (*STEPS, "residual")) + " |")  # fmt: skip


OVER = 2.0
"""The differences (points) the summary explains definition by definition."""


def large_differences(checked: Sequence[UnitCheck]) -> Iterator[tuple[UnitCheck, RankCheck, str]]:
    for unit in checked:
        for c in unit.ranks:
            for cls, _ in CLASSES:
                d = c.delta(cls)
                if d is not None and abs(d) > OVER:
                    yield unit, c, cls


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("trace_dirs", nargs="*", type=Path, metavar="TRACE_DIR",
                        help="a folder of Kineto traces, one per rank")  # fmt: skip
    parser.add_argument("--corpus", type=Path, metavar="ROOT",
                        help="every job folder under ROOT (the public traces' layout), "
                        "then a summary of all")  # fmt: skip
    parser.add_argument("--wrap-arrays", action="store_true",
                        help="give HTA a trace that is a JSON array of events wrapped in the "
                        "object form it reads, with the rank our reader gives it")  # fmt: skip
    args = parser.parse_args(argv)
    folders = list(args.trace_dirs)
    if args.corpus:
        folders += sorted(p for p in args.corpus.iterdir() if p.is_dir())
    if not folders:
        parser.error("give TRACE_DIR or --corpus ROOT")
    checked: list[UnitCheck] = []
    for folder in folders:
        for unit in check_folder(folder, wrap=args.wrap_arrays):
            print_unit(unit)
            checked.append(unit)
    if args.corpus or len(checked) > 1:
        print_summary(checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())

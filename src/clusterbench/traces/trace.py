"""Where every microsecond of a profiled training step goes: pure functions over the events of
a Kineto (torch.profiler) trace, one rank's, as a list of dicts (the trace's ``traceEvents``).

Each ``ProfilerStep#N`` span is split into four classes that sum to the step time, with the
precedence compute > memory > (unclassified) > communication > idle at every instant
(HolisticTraceAnalysis's temporal breakdown gives computation the same precedence):

- **compute**: compute-bound kernels (GEMM, convolution, attention), by name, or by the roofline
  when the kernel's FLOPs and bytes are known: intensity (FLOP/byte) at or above the ridge point
  (peak FLOP/s / memory bandwidth) is compute-bound, below it memory-bound;
- **memory**: the memory-bound device work (elementwise, norms, reductions, copies, optimizer);
  each kernel's class comes from the table of kernel families (:mod:`.attribution_kernels`),
  and a kernel the table does not know is **unclassified**, its share shown apart (with the
  four classes it sums to the step);
- **communication** (exposed): collectives running while nothing else runs; the part of a
  collective that runs under compute or memory work is ``overlapped`` (reported apart, already
  counted in those classes).  The first ``wait`` microseconds of a collective, the time it spent
  waiting for the last rank to arrive (:func:`.attribution_ranks.collective_waits`), are not
  communication;
- **coordination**: the rest, when the device is idle: launch gaps, waiting for input, waiting
  at synchronisation or inside collectives for other ranks.

GPU traces use the device timeline (kernels, memcpy, memset on every stream).  CPU runs have
no device timeline: the ops (``cpu_op``) of the thread that runs the steps stand in for it, plus
the gloo worker threads' ``gloo:*`` spans for the collectives (an approximation: host time
inside an op counts as device work, time outside any op, Python included, as idle, as launch
gaps are on a GPU).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from clusterbench.traces import kernels

__all__ = [
    "CLASSES",
    "Activity",
    "Collective",
    "Peaks",
    "StepBreakdown",
    "activities",
    "collective_spans",
    "cpu_kind",
    "device_kind",
    "is_collective_kernel",
    "mean_percentages",
    "op_flops_bytes",
    "profiler_steps",
    "step_breakdowns",
    "step_collectives",
    "step_spans",
]

Event = Mapping[str, Any]
Kind = Literal["compute", "memory", "comm", "unclassified"]
CLASSES = ("compute", "memory", "communication", "coordination")

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_CPU_COMPUTE = frozenset(
    f"aten::{op}"
    for op in (
        "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "convolution",
        "_convolution", "conv1d", "conv2d", "conv3d", "mkldnn_convolution",
        "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    )
)  # fmt: skip
_CPU_CATS = frozenset({"cpu_op", "user_annotation"})
_ELEMENT_BYTES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8}


@dataclass(frozen=True, slots=True)
class Peaks:
    """The device's roofline: peak FLOP/s of the precision and memory bandwidth in bytes/s."""

    flops_per_s: float
    bytes_per_s: float

    @property
    def ridge_flops_per_byte(self) -> float:
        # ridge point = peak FLOP/s / bandwidth (Williams et al. 2009, the roofline model)
        return self.flops_per_s / self.bytes_per_s


@dataclass(frozen=True, slots=True)
class Activity:
    start_us: float
    end_us: float
    kind: Kind
    collective: bool = False
    """A whole collective (an NCCL kernel, a gloo span): matched across ranks."""
    name: str = ""


@dataclass(frozen=True, slots=True)
class Collective:
    name: str
    offset_ms: float
    """Start relative to the step's start."""
    duration_ms: float
    at_ms: float | None = None
    """Start on the rank's own clock (the trace's timestamps), where known: the ranks' clocks
    are aligned on these (:func:`.attribution_ranks.on_common_clock`)."""
    doubtful: bool = False
    """Its ends disagree across the ranks once their clocks are aligned: not one operation on
    every rank, so not matched (:func:`.attribution_ranks.on_common_clock`)."""


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    step: int
    """N of ProfilerStep#N."""
    step_ms: float
    compute_ms: float
    memory_ms: float
    communication_ms: float
    """Exposed communication."""
    overlapped_ms: float
    """Communication under compute or memory work (counted there)."""
    coordination_ms: float
    collectives: tuple[Collective, ...] = ()
    unclassified_ms: float = 0.0
    """Device work the table of kernel families does not know (:mod:`.attribution_kernels`):
    not counted in any class, shown apart."""

    def percentages(self) -> dict[str, float]:
        """The four classes and the unclassified part (summing to 100), and
        communication_overlapped, in % of the step."""
        parts = {
            "unclassified": self.unclassified_ms,
            "compute": self.compute_ms,
            "memory": self.memory_ms,
            "communication": self.communication_ms,
            "coordination": self.coordination_ms,
            "communication_overlapped": self.overlapped_ms,
        }
        return {k: 100.0 * v / self.step_ms if self.step_ms > 0 else 0.0 for k, v in parts.items()}


def profiler_steps(events: Iterable[Event]) -> list[Event]:
    """The host's ``ProfilerStep#N`` spans, in order of N."""
    spans = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation" and _STEP.match(_name(e))
    ]
    return sorted(spans, key=_step_number)


def step_spans(events: Iterable[Event]) -> list[tuple[int, float, float]]:
    """(N, start, end in µs) of every ``ProfilerStep#N`` span, in order of N."""
    return [(_step_number(e), *_span(e)) for e in profiler_steps(events)]


def _step_number(e: Event) -> int:
    m = _STEP.match(_name(e))
    assert m is not None
    return int(m.group(1))


def _name(e: Event) -> str:
    return str(e.get("name", ""))


def _span(e: Event) -> tuple[float, float]:
    start = float(e.get("ts", 0.0))
    return start, start + float(e.get("dur", 0.0))


def op_flops_bytes(e: Event) -> tuple[float, float] | None:
    """FLOPs and bytes moved of a matmul-like op from its recorded shapes (record_shapes), or
    the profiler's ``flops`` (with_flops) with the bytes of its inputs and output.

    mm/addmm/bmm/linear: FLOPs = 2 M N K; bytes = (inputs + output) x element size, the
    compulsory traffic (a lower bound, so the intensity is an upper bound).
    """
    args = e.get("args") or {}
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    shapes = [(d, _ELEMENT_BYTES.get(t, 0)) for d, t in zip(dims, types, strict=False)]
    tensors = [(d, size) for d, size in shapes if isinstance(d, list) and d and size]
    mnk = _matmul_mnk(_name(e), [d for d, _ in tensors])
    flops = float(args.get("flops") or 0.0) or (2.0 * math.prod(mnk) if mnk else 0.0)
    if flops <= 0 or not tensors:
        return None
    in_bytes = sum(math.prod(d) * size for d, size in tensors)
    out_elems = (flops / (2 * mnk[2])) if mnk else max(math.prod(d) for d, _ in tensors)
    return flops, in_bytes + out_elems * tensors[0][1]


def _matmul_mnk(name: str, dims: list[list[int]]) -> tuple[int, int, int] | None:
    """(batch x M, N, K) of a matmul-like op's operands, or None."""
    op = name.removeprefix("aten::")
    if op in ("addmm", "baddbmm") and len(dims) >= 3:
        dims = dims[1:]  # the bias / accumulator comes first
    if len(dims) < 2 or op not in ("mm", "addmm", "bmm", "baddbmm", "linear", "matmul"):
        return None
    a, b = dims[0], dims[1]
    if op == "linear":  # weight is [N, K]
        return math.prod(a[:-1]), b[0], a[-1]
    if len(a) < 2 or len(b) < 2:
        return None
    return math.prod(a[:-1]), b[-1], a[-1]


def _kind_by_roofline(flops_bytes: tuple[float, float] | None, peaks: Peaks | None) -> Kind | None:
    if flops_bytes is None or peaks is None or flops_bytes[1] <= 0:
        return None
    flops, num_bytes = flops_bytes
    return "compute" if flops / num_bytes >= peaks.ridge_flops_per_byte else "memory"


def _is_gpu_trace(events: Sequence[Event]) -> bool:
    return any(e.get("cat") in _GPU_CATS for e in events)


def activities(events: Sequence[Event], *, peaks: Peaks | None = None) -> list[Activity]:
    """The device's busy spans, each classified (see the module docstring)."""
    if _is_gpu_trace(events):
        return _gpu_activities(events, peaks=peaks)
    return _cpu_activities(events, peaks=peaks)


def _gpu_activities(events: Sequence[Event], *, peaks: Peaks | None) -> list[Activity]:
    ops = {_external_id(e): e for e in events if e.get("cat") == "cpu_op" and _external_id(e)}
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in _GPU_CATS]
    launches: dict[object, int] = {}
    for k in kernels:
        launches[_external_id(k)] = launches.get(_external_id(k), 0) + 1
    out = []
    for k in kernels:
        start, end = _span(k)
        name = _name(k)
        if is_collective_kernel(name):
            out.append(Activity(start, end, "comm", collective=True, name=name))
            continue
        kind: Kind | None = None
        op = ops.get(_external_id(k))
        if k.get("cat") == "kernel" and op is not None and launches[_external_id(k)] == 1:
            kind = _kind_by_roofline(op_flops_bytes(op), peaks)  # one kernel: all the op's work
        out.append(Activity(start, end, kind or device_kind(name, str(k.get("cat"))), name=name))
    return out


def is_collective_kernel(name: str) -> bool:
    """A kernel that is a whole collective (NCCL/RCCL, DeepEP dispatch/combine, a symmetric-memory
    all-reduce: :data:`~.attribution_kernels.FAMILIES`), matched across ranks."""
    family = kernels.classify(name, "kernel")
    return family is not None and family.collective


def device_kind(name: str, cat: str) -> Kind:
    """A device activity's class, from the table of kernel families
    (:func:`~.attribution_kernels.classify`): a kernel the table does not know is
    ``unclassified``, shown as such, never put into memory."""
    family = kernels.classify(name, cat)
    return family.kind if family is not None else "unclassified"


def cpu_kind(name: str) -> Kind:
    """A host op's class by its name, where the trace has no device timeline."""
    if _is_comm_name(name):
        return "comm"
    return "compute" if name in _CPU_COMPUTE else "memory"


def _external_id(e: Event) -> object:
    return (e.get("args") or {}).get("External id")


def _is_comm_name(name: str) -> bool:
    return name.startswith(("gloo:", "c10d::", "nccl:")) or name == "record_param_comms"


def _cpu_activities(events: Sequence[Event], *, peaks: Peaks | None) -> list[Activity]:
    steps = profiler_steps(events)
    if not steps:
        return []
    main = (steps[0].get("pid"), steps[0].get("tid"))
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in _CPU_CATS or _STEP.match(_name(e)):
            continue
        start, end = _span(e)
        name = _name(e)
        if name.startswith("gloo:"):
            out.append(Activity(start, end, "comm", collective=True, name=name))
        elif (e.get("pid"), e.get("tid")) != main or e.get("cat") != "cpu_op":
            continue  # annotations (DDP forward, Optimizer.step) also span waits and Python
        elif _is_comm_name(name):
            out.append(Activity(start, end, "comm", name=name))
        else:
            kind = _kind_by_roofline(op_flops_bytes(e), peaks) or cpu_kind(name)
            out.append(Activity(start, end, kind, name=name))
    if not any(a.collective for a in out):  # no gloo spans: the host-side c10d ops stand in
        out = [Activity(a.start_us, a.end_us, a.kind, a.kind == "comm", a.name) for a in out]
    return out


def collective_spans(acts: Sequence[Activity], *, start: float, end: float) -> list[Activity]:
    """The step's whole collectives, in order of start (the k-th is matched across ranks)."""
    return sorted(
        (a for a in acts if a.collective and start <= a.start_us < end), key=lambda a: a.start_us
    )


def _timeline_us(
    acts: Iterable[Activity], *, start: float, end: float
) -> tuple[float, float, float, float, float]:
    """(compute, memory, exposed comm, overlapped comm, unclassified) microseconds inside
    [start, end]: compute > memory > unclassified > comm at every instant."""
    edges: list[tuple[float, int, Kind]] = []
    for a in acts:
        lo, hi = max(a.start_us, start), min(a.end_us, end)
        if hi > lo:
            edges += [(lo, 1, a.kind), (hi, -1, a.kind)]
    edges.sort(key=lambda x: (x[0], x[1]))
    active: dict[Kind, int] = {"compute": 0, "memory": 0, "comm": 0, "unclassified": 0}
    totals = [0.0, 0.0, 0.0, 0.0, 0.0]
    last = start
    for t, delta, kind in edges:
        width = t - last
        if width > 0:
            if active["compute"]:
                totals[0] += width
            elif active["memory"]:
                totals[1] += width
            elif active["unclassified"]:
                totals[4] += width
            elif active["comm"]:
                totals[2] += width
            if active["comm"] and (active["compute"] or active["memory"] or active["unclassified"]):
                totals[3] += width
        active[kind] += delta
        last = t
    return totals[0], totals[1], totals[2], totals[3], totals[4]


def step_breakdowns(
    events: Sequence[Event],
    *,
    peaks: Peaks | None = None,
    waits_ms: Mapping[int, Sequence[float]] | None = None,
    acts: Sequence[Activity] | None = None,
) -> list[StepBreakdown]:
    """Every profiled step of one rank's trace, split into the four classes.

    ``waits_ms[N][k]``: how long the k-th collective of step N waited for the other ranks
    (:func:`.attribution_ranks.collective_waits`); that part of it is coordination, not
    communication.
    ``acts``: :func:`activities` of the same trace, when the caller has them already.
    """
    acts = activities(events, peaks=peaks) if acts is None else acts
    out = []
    for span in profiler_steps(events):
        start, end = _span(span)
        n = _step_number(span)
        in_step = [a for a in acts if a.end_us > start and a.start_us < end]
        colls = collective_spans(in_step, start=start, end=end)
        waits = list((waits_ms or {}).get(n, ()))
        trimmed = {id(c): c.start_us + 1e3 * w for c, w in zip(colls, waits, strict=False)}
        kept = [
            dataclasses.replace(a, start_us=trimmed[id(a)]) if id(a) in trimmed else a
            for a in in_step
        ]
        compute, memory, comm, overlapped, unknown = _timeline_us(kept, start=start, end=end)
        step_us = end - start
        coordination = max(0.0, step_us - compute - memory - comm - unknown)
        out.append(
            StepBreakdown(
                step=n, step_ms=step_us / 1e3, compute_ms=compute / 1e3, memory_ms=memory / 1e3,
                communication_ms=comm / 1e3, overlapped_ms=overlapped / 1e3,
                coordination_ms=coordination / 1e3,
                collectives=_collectives_ms(colls, start=start),
                unclassified_ms=unknown / 1e3,
            )
        )  # fmt: skip
    return out


def step_collectives(
    events: Sequence[Event], *, acts: Sequence[Activity]
) -> dict[int, tuple[Collective, ...]]:
    """Per profiled step N, its collectives (what the ranks exchange to match them up, before
    :func:`step_breakdowns` can take the waits out)."""
    out = {}
    for span in profiler_steps(events):
        start, end = _span(span)
        out[_step_number(span)] = _collectives_ms(
            collective_spans(acts, start=start, end=end), start=start
        )
    return out


def _collectives_ms(colls: Iterable[Activity], *, start: float) -> tuple[Collective, ...]:
    """Collectives in ms from the step's ``start``."""
    return tuple(
        Collective(c.name, (c.start_us - start) / 1e3, (c.end_us - c.start_us) / 1e3,
                   c.start_us / 1e3)
        for c in colls
    )  # fmt: skip


def mean_percentages(steps: Sequence[StepBreakdown]) -> dict[str, float]:
    """The mean over steps of each class's share of its step, in %."""
    if not steps:
        raise ValueError("no profiled steps (no ProfilerStep#N spans in the trace)")
    shares = [s.percentages() for s in steps]
    return {k: sum(p[k] for p in shares) / len(shares) for k in shares[0]}

"""Bounded checkpoint figures against full-size ones, side by side.

    python3 scripts/checkpoint_compare.py BOUNDED_RUN FULL_RUN [--markdown]

BOUNDED_RUN measured the default bounded state (rates over a few sizes, the whole state
predicted from them); FULL_RUN saved and loaded the whole state (``--set
checkpoint.max_bytes=0``).  Per format and operation: the bounded run's GB/s at its largest
size and its fitted β, its predicted seconds for the whole state, and the full-size run's
measured seconds and GB/s, with the differences in %.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass

from clusterbench import load_results
from clusterbench.benchmarks.checkpoint import STATES, CheckpointMetrics
from clusterbench.schema import Measurement, Results

_C = CheckpointMetrics
_MEASURED = {"save": _C.save_s, "load": _C.load_s, "async_block": _C.async_block_s,
             "async_total": _C.async_total_s}  # fmt: skip
_OPS = {"torch": ("save", "load"), "safetensors": ("save", "load"), "dcp": ("save", "load"),
        "dcp_async": ("async_block", "async_total")}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Row:
    fmt: str
    op: str
    bounded_gbps: float | None
    """GB/s at the bounded run's largest size (size / median seconds)."""
    fit_gbps: float | None
    predicted_s: float | None
    full_s: float | None
    full_gbps: float | None
    full_bytes: float | None


def _largest(ms: list[Measurement], fmt: str) -> list[Measurement]:
    sized = [m for m in ms if m.params.get("format") == fmt and "size_bytes" in m.params]
    top = max((float(m.params["size_bytes"]) for m in sized), default=None)  # type: ignore[arg-type]
    return [m for m in sized if float(m.params["size_bytes"]) == top]  # type: ignore[arg-type]


def _seconds(results: Results, fmt: str, op: str) -> tuple[float | None, float | None]:
    """Median seconds of ``op`` at the run's largest size of ``fmt``, and that size."""
    at = _largest(_MEASURED[op].select(results), fmt)
    if not at:
        return None, None
    return statistics.median(m.value for m in at), float(at[0].params["size_bytes"])  # type: ignore[arg-type]


def _predicted(bounded: Results, fmt: str, op: str) -> float | None:
    """The bounded run's prediction for its workload's whole state (the first model)."""
    ms = [m for m in _C.predicted_s.select(bounded) if m.params.get("format") == fmt]
    if not ms:
        return None
    workload = ms[0].params.get("model")
    state = STATES[1] if fmt == "safetensors" else STATES[0]
    by_op = {str(m.params.get("op")): m.value for m in ms
             if m.params.get("model") == workload and m.params.get("state") == state}  # fmt: skip
    if op == "async_total" and "async_block" in by_op:  # predicted as block + hidden
        return by_op["async_block"] + by_op.get("async_hidden", 0.0)
    return by_op.get(op)


def rows(bounded: Results, full: Results) -> list[Row]:
    out = []
    for fmt, ops in _OPS.items():
        for op in ops:
            b_s, b_size = _seconds(bounded, fmt, op)
            f_s, f_size = _seconds(full, fmt, op)
            if b_s is None and f_s is None:
                continue
            fits = [m.value for m in _C.fit_gbps.select(bounded)
                    if (m.params.get("format"), m.params.get("op")) == (fmt, op)]  # fmt: skip
            fit = fits[0] if fits else None
            out.append(Row(
                fmt=fmt, op=op, fit_gbps=fit, predicted_s=_predicted(bounded, fmt, op),
                bounded_gbps=b_size / b_s / 1e9 if b_s and b_size else None,
                full_s=f_s, full_gbps=f_size / f_s / 1e9 if f_s and f_size else None,
                full_bytes=f_size,
            ))  # fmt: skip
    return out


def _num(value: float | None, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def _pct(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{100 * (a / b - 1):+.1f}%"


def main(argv: list[str]) -> None:
    markdown = "--markdown" in argv
    paths = [a for a in argv if a != "--markdown"]
    if len(paths) != 2:
        sys.exit(__doc__)
    bounded, full = (load_results(p) for p in paths)
    header = ("format", "op", "bounded GB/s", "fit β GB/s", "predicted s", "full s",
              "full GB/s", "predicted vs full", "bounded GB/s vs full")  # fmt: skip
    table = [
        (r.fmt, r.op, _num(r.bounded_gbps), _num(r.fit_gbps), _num(r.predicted_s),
         _num(r.full_s), _num(r.full_gbps), _pct(r.predicted_s, r.full_s),
         _pct(r.bounded_gbps, r.full_gbps))
        for r in rows(bounded, full)
    ]  # fmt: skip
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in table:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(header)]
        for line in (header, *table):
            print("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)))
    stall = {run: [m.value for m in _C.async_stall_pct.select(res)]
             for run, res in (("bounded", bounded), ("full", full))}  # fmt: skip
    print("async stall %: " + ", ".join(f"{k} {v[0]:.1f}" for k, v in stall.items() if v))
    wall = {run: res.run.benchmark_seconds.get("checkpoint")
            for run, res in (("bounded", bounded), ("full", full))}  # fmt: skip
    print("checkpoint wall s: " + ", ".join(f"{k} {_num(v, '.1f')}" for k, v in wall.items()))


if __name__ == "__main__":
    main(sys.argv[1:])

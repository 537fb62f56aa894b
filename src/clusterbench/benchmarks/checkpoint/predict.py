"""The answer to "how long does a checkpoint of my model take here?": the ``checkpoint``
benchmark's predicted seconds (t = α + N·B/β from the rates of a bounded state) per model,
with the optimizer state, by the fastest format; what ``dcp.async_save`` blocks of it; and how
well the fit predicted its own largest size.

Pure: measurements in, one info finding per host out.
"""

from __future__ import annotations

from collections import defaultdict

from clusterbench.benchmarks.checkpoint import STATES, CheckpointMetrics
from clusterbench.judging.measurements import as_number, scope_label
from clusterbench.schema import Finding, Measurement, Results

__all__ = ["duration_text", "prediction_findings"]

_C = CheckpointMetrics
_SYNC = ("torch", "dcp")
"""Formats that save the optimizer state synchronously (safetensors holds weights only)."""
_FIX = (
    "Faster storage, or DCP sharded over more ranks, shortens these; dcp.async_save keeps "
    "training going for all but the blocking part.  `--set checkpoint.max_bytes=0` writes the "
    "whole state instead of extrapolating from a bounded one."
)


def duration_text(seconds: float) -> str:
    """12 s · 4.2 min · 1.3 h."""
    if seconds < 90:
        return f"{seconds:.3g} s"
    if seconds < 5400:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def prediction_findings(results: Results) -> list[Finding]:
    """One info per host: per model, the fastest save and load of the whole checkpoint with its
    optimizer state, and what an async save blocks; the fits' worst held-out error."""
    by_host: dict[str, list[Measurement]] = defaultdict(list)
    for m in _C.predicted_s.select(results):
        if m.params.get("state") == STATES[0]:
            by_host[m.host].append(m)
    errors: dict[str, list[float]] = defaultdict(list)
    for m in _C.fit_error_pct.select(results):
        errors[m.host].append(m.value)
    out = []
    for host, ms in by_host.items():
        table = _table(ms)
        if not table:
            continue
        worst = max(errors.get(host, []), key=abs, default=None)
        out.append(
            Finding(
                id="checkpoint.predicted",
                severity="info",
                scope=scope_label(host),
                message=_message(table, worst),
                evidence={"models": table, "fit_worst_held_out_error_pct": worst},
                fix=_FIX,
            )
        )
    return out


def _table(ms: list[Measurement]) -> dict[str, dict[str, object]]:
    """Model label -> its bytes, the fastest save and load (seconds, format), async block."""
    table: dict[str, dict[str, object]] = {}
    for m in ms:
        model = str(m.params.get("model"))
        row = table.setdefault(
            model, {"checkpoint_bytes": as_number(m.params.get("checkpoint_bytes"))}
        )
        fmt, op = str(m.params.get("format")), str(m.params.get("op"))
        if fmt in _SYNC and op in ("save", "load"):
            best = row.get(f"{op}_s")
            if not isinstance(best, float) or m.value < best:
                row[f"{op}_s"], row[f"{op}_format"] = m.value, fmt
        elif fmt == "dcp_async" and op in ("async_block", "async_hidden"):
            row[f"{op}_s"] = m.value
    return {k: v for k, v in table.items() if "save_s" in v}


def _message(table: dict[str, dict[str, object]], worst: float | None) -> str:
    parts = []
    for model, row in table.items():
        size = row["checkpoint_bytes"]
        text = f"{model} ({size / 1e9:.3g} GB)" if isinstance(size, float) else model
        text += f" save {duration_text(float(row['save_s']))} ({row['save_format']})"  # type: ignore[arg-type]
        if "load_s" in row:
            text += f", load {duration_text(float(row['load_s']))} ({row['load_format']})"  # type: ignore[arg-type]
        block, hidden = row.get("async_block_s"), row.get("async_hidden_s")
        if isinstance(block, float) and isinstance(hidden, float):
            text += f", async_save blocks {duration_text(block)} and hides {duration_text(hidden)}"
        parts.append(text)
    fit = (
        f" The fits predicted their own largest size within {abs(worst):.0f}%."
        if worst is not None
        else ""
    )
    return "Checkpoint with optimizer state, predicted here: " + "; ".join(parts) + "." + fit

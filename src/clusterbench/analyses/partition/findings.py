"""The verdict on the run's batch-size partition search (:mod:`.partition`):
``training.partition``, info, with the recommended partition and its measured gain (as
advice, :func:`clusterbench.judging.advice.advice_evidence`), or "keep the default
partition"; the runner-ups with their measured or predicted throughput, predicted ones with
the model's error this run measured."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from clusterbench.analyses.partition.search import Partition, Row, analyse
from clusterbench.judging.advice import advice_evidence
from clusterbench.schema import Finding, Results
from clusterbench.thresholds import Thresholds

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = ["findings", "partition_finding", "row_dict", "run_findings", "setting_change"]

_KEEP = "keep the default partition: no measured partition beat it beyond the noise"


def findings(results: Results, thresholds: Thresholds) -> list[Finding]:
    """``training.partition`` when the run searched the partition."""
    got = analyse(results, thresholds)
    return [] if got is None else [partition_finding(got)]


def run_findings(results: Results, run: RunView) -> list[Finding]:
    """The run part's findings: :func:`findings` at the run's thresholds."""
    return findings(results, run.thresholds)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def setting_change(r: Row, *, default: Row) -> str:
    """The settings that train partition ``r`` (and its GPU count where it is not the
    default's)."""
    parts = [f"--set training.batch_size={r.micro_batch}", f"--set training.grad_accum={r.accum}"]
    if r.activation_checkpointing != default.activation_checkpointing:
        parts.append(
            f"--set training.activation_checkpointing={str(r.activation_checkpointing).lower()}"
        )
    change = " ".join(parts)
    return change if r.d == default.d else f"{change} on {r.d} GPUs"


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def _error_text(p: Partition) -> str:
    if p.checks:
        sizes = sorted({c.row.d for c in p.checks})
        return (
            f"its error measured here ±{p.model_error:.0%} (largest of {len(p.checks)} measured "
            f"candidates at d = {', '.join(map(str, sizes))} predicted from their 1-rank twins)"
        )
    if p.validation is not None:
        return f"its error measured here ±{p.model_error:.0%} (the scaling validation)"
    return "its error not measured in this run"


def _runner(r: Row, unit: str) -> str:
    rate = f", {_rate(r.throughput)} {unit}" if r.throughput is not None else ""
    if r.basis == "predicted":
        low = "-" if r.low_ms is None else f"{r.low_ms:.4g}"
        band = f" (band {low}–{_ms(r.high_ms)})"
        assumed = f", assumes {', '.join(r.assumed)}" if r.assumed else ""
        return f"{r.label} predicted {_ms(r.time_ms)}{band}{rate}{assumed}"
    return f"{r.label} measured {_ms(r.time_ms)}{rate}"


def _verdict(p: Partition) -> tuple[str, str]:
    """(the head of the message, the fix)."""
    default, rec = p.default, p.recommended
    if default is None or default.time_ms is None:
        ran = [r for r in p.rows if r.basis == "measured" and r.time_ms is not None]
        reason = next((r.reason for r in p.rows if r.default), "") or "not among the candidates"
        head = f"the default partition did not run ({reason}), so nothing is recommended"
        if ran:
            head += f"; the fastest measured was {ran[0].label} at {_ms(ran[0].time_ms)}"
        return head, (
            "Choose a partition that ran (the training partition table) and search again with it "
            "as the default (training.batch_size, training.grad_accum)."
        )
    if rec is not None and rec.gain is not None:
        head = (
            f"{rec.label} trains it in {_ms(rec.time_ms)}, {rec.gain:.1%} less time than the "
            f"default {default.label} ({_ms(default.time_ms)}; {rec.reason})"
        )
        return head, setting_change(rec, default=default)
    head = f"{_KEEP} ({default.label}, {_ms(default.time_ms)})"
    best = next((r for r in p.rows if r.basis == "measured" and r.time_ms is not None
                 and not r.default), None)  # fmt: skip
    if best is not None and best.time_ms is not None and default.time_ms is not None:
        head += (
            f"; the fastest other measured, {best.label} at {_ms(best.time_ms)}: {best.reason} "
            f"(better needs p < {p.alpha:g}, the interval above 1 and {p.min_gain:.0%} less time)"
        )
    return head, ""


def partition_finding(p: Partition) -> Finding:
    head, fix = _verdict(p)
    message = (
        f"Partition of the global batch {p.global_batch} ({p.model} {p.strategy}; "
        f"d×micro-batch×accum): {head}."
    )
    runners = p.runner_ups()
    if runners:
        message += f" Runner-ups: {'; '.join(_runner(r, p.unit) for r in runners)}."
    if any(r.basis == "predicted" for r in p.rows):
        message += f" Predicted rows: the scaling model on this run's links, {_error_text(p)}."
    elif p.prediction_note:
        message += f" Nothing predicted past the world: {p.prediction_note}."
    if p.on_cpu:
        message += " On CPU workers sharing one host's cores this describes the machine."
    evidence: dict[str, Any] = {
        "global_batch": p.global_batch,
        "default": p.default.label if p.default else None,
        "recommended": p.recommended.label if p.recommended else None,
        "alpha": p.alpha,
        "min_gain": p.min_gain,
        "model_error": p.model_error,
        "rows": [row_dict(r) for r in p.rows],
    }
    rec, default = p.recommended, p.default
    if rec is not None and default is not None and rec.gain is not None:
        evidence |= advice_evidence(
            change=fix, gain=rec.gain, better="lower", basis="measured", noise=rec.noise,
            gain_of=f"time to batch {p.global_batch} ({p.model} {p.strategy})",
            evidence=rec.reason,
        )  # fmt: skip
    return Finding(
        id="training.partition",
        severity="info",
        scope="run",
        message=message,
        evidence=evidence,
        fix=fix,
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def row_dict(r: Row) -> dict[str, Any]:
    """One row in plain JSON types."""
    ms = [_finite(v) for v in (r.time_ms, r.low_ms, r.high_ms)]
    return {
        "label": r.label, "d": r.d, "micro_batch": r.micro_batch, "accum": r.accum,
        "activation_checkpointing": r.activation_checkpointing, "basis": r.basis,
        "time_to_batch_ms": ms[0], "low_ms": ms[1], "high_ms": ms[2],
        "throughput": _finite(r.throughput), "default": r.default, "verdict": r.verdict,
        "reason": r.reason, "gain": _finite(r.gain), "p_value": _finite(r.p_value),
        "assumed": list(r.assumed),
    }  # fmt: skip

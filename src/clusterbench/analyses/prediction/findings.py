"""The run's verdicts on its own scaling prediction (:mod:`.prediction`), when training and
collectives both ran: ``prediction.scaling`` (the communication share and the inter-node
bandwidth per node a target efficiency needs at the default GPU counts; warn when the
efficiency at the largest count falls below the target at the run's NIC speed) and
``prediction.validation`` (the model's own error on the larger world sizes the run measured).
The limit is :attr:`clusterbench.thresholds.Thresholds.prediction_target_efficiency`.

The bandwidth to provision is advice (:mod:`.advice`, basis ``predicted``) only where the model's
own error was measured in this run (``prediction.validation``), the largest count's row rests on
no assumed input, and the predicted gain exceeds that error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clusterbench.analyses.prediction.predict import (
    NIC_CEILING_GBPS,
    Prediction,
    Row,
    run_prediction,
)
from clusterbench.judging.advice import advice_evidence
from clusterbench.judging.measurements import gpu_severity
from clusterbench.schema import Finding, Results

if TYPE_CHECKING:
    from clusterbench.analyses.view import RunView

__all__ = [
    "findings",
    "prediction_of",
    "scaling_finding",
    "signed_pct",
    "sizes_text",
    "validation_finding",
]

_HEADLINE_GPUS = 256
_PREDICT_HINT = "clusterbench predict RUN --gpus N,M --nic-gbps G: other GPU counts and NIC speeds"


def prediction_of(results: Results, run: RunView) -> Prediction | str | None:
    """The prediction run part's analysis: the run's one prediction at its target efficiency
    (:func:`~clusterbench.analyses.prediction.predict.run_prediction`), read as
    ``run.prediction``."""
    return run_prediction(results, target=run.thresholds.prediction_target_efficiency)


def findings(results: Results, run: RunView) -> list[Finding]:
    """``prediction.scaling`` and ``prediction.validation`` of the run's one prediction (none
    unless :func:`applies`)."""
    p = run.prediction
    if p is None:
        return []
    if isinstance(p, str):  # NoPrediction, or inputs the model refuses
        return [
            Finding(
                id="prediction.scaling",
                severity="info",
                scope="run",
                message=f"No scaling prediction: {p}.",
                fix=_PREDICT_HINT,
            )
        ]
    return [scaling_finding(p, results), validation_finding(p)]


def signed_pct(fraction: float) -> str:
    """+3.2% / −35.1% (a true minus sign)."""
    return f"{100 * fraction:+.1f}%".replace("-", "−")


def sizes_text(sizes: tuple[int, ...] | list[int]) -> str:
    """1–2 for consecutive fit sizes written as a range, else 4 and 8 / 2, 4 and 8."""
    if len(sizes) == 2 and sizes[1] - sizes[0] <= sizes[0]:
        return f"{sizes[0]}–{sizes[1]}"
    words = [str(s) for s in sizes]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _needs(row: Row, target_pct: str) -> str:
    if row.needed_gbps is not None and row.beyond_nics:
        return (
            f"it would need {row.needed_gbps:,.0f} Gb/s per node to stay above {target_pct}, "
            f"beyond any NIC today (8 x 800 Gb/s = {NIC_CEILING_GBPS:,.0f})"
        )
    if row.needed_gbps is not None:
        return f"with {row.needed_gbps:,.0f} Gb/s per node it stays above {target_pct}"
    if row.needed_note == "within one node":
        return "within one node"
    return f"no inter-node bandwidth keeps it above {target_pct} (latency and intra-node alone)"


def scaling_finding(p: Prediction, results: Results) -> Finding:
    """The training strategy's rows: the headline count (256 GPUs, else the middle one) and
    the largest; warn when the largest falls below the target."""
    rows = [r for r in p.rows if r.strategy == p.strategies[0]]
    head = next((r for r in rows if r.world_size == _HEADLINE_GPUS), rows[len(rows) // 2])
    last = rows[-1]
    target = f"{p.target_efficiency:.0%}"
    s = p.series
    case = f"{s.model} {s.strategy}" + (f", modelled as {s.modelled}" if s.modelled != s.strategy
                                         else "")  # fmt: skip
    unit = s.unit
    message = (
        f"At {head.world_size} {unit}s this job ({case}) would spend ~{head.step.comm_share:.0%} "
        f"of its step in communication (efficiency {head.step.efficiency:.0%}); "
        f"{_needs(head, target)}."
    )
    if last is not head:
        message += (
            f" At {last.world_size}: ~{last.step.comm_share:.0%} (efficiency "
            f"{last.step.efficiency:.0%}); {_needs(last, target)}."
        )
    message += (
        f" Predicted at {p.gpus_per_node} {unit}s per node and {p.inter_node_gbps:,.0f} Gb/s per "
        f"node ({p.inter.kind})."
    )
    assumed = p.assumptions()
    if assumed:
        message += f" Rests on assumptions: {'; '.join(assumed)}."
    below = last.step.efficiency < p.target_efficiency
    if below and last.needed_gbps is not None and not last.beyond_nics:
        fix = (
            f"For {target} at {last.world_size} {unit}s provision at least "
            f"{last.needed_gbps:,.0f} Gb/s of inter-node bandwidth per node, hide more of the "
            f"communication under compute (overlap {p.overlap.value:.0%} now), or raise the "
            "per-GPU batch or gradient accumulation; " + _PREDICT_HINT
        )
    elif below:
        fix = (
            "No NIC speed reaches it: raise the per-GPU batch or gradient accumulation so that "
            "compute amortises the latency, or overlap more communication; " + _PREDICT_HINT
        )
    else:
        fix = _PREDICT_HINT
    links = [what for what, link in (("intra-node", p.intra), ("inter-node", p.inter))
             if link is not None and link.kind == "assumed"]  # fmt: skip
    if links:  # a warning about communication needs its links measured: until then a note
        fix = (
            f"Measure first: the {' and '.join(links)} "
            f"{'links this rests on were' if len(links) > 1 else 'link this rests on was'} "
            "assumed; run the collectives and network benchmarks across 2 or more nodes "
            "('clusterbench launch') and the prediction uses them. " + fix
        )
    return Finding(
        id="prediction.scaling",
        severity=gpu_severity(results, "warn") if below and not links else "info",
        scope="run",
        message=message,
        evidence={
            "gpus_per_node": p.gpus_per_node,
            "inter_node_gbps_per_node": p.inter_node_gbps,
            "target_efficiency": p.target_efficiency,
            "rows": p.to_dict()["predictions"],
            "assumptions": assumed,
            **_advice(p, last),
        },
        fix=fix,
    )


def _advice(p: Prediction, last: Row) -> dict[str, Any]:
    """The bandwidth that lifts the largest count to the target, as predicted advice: the
    throughput gain target / efficiency - 1 (weak scaling: throughput is proportional to the
    efficiency), against the largest error the validation measured ({} where not advice; on
    CPU workers, which describe the machine, not a cluster, never)."""
    v, needed = p.validation, last.needed_gbps
    if v is None or needed is None or last.beyond_nics or last.assumed or p.series.on_cpu:
        return {}
    if not last.step.efficiency > 0:
        return {}
    gain = p.target_efficiency / last.step.efficiency - 1
    if gain <= v.max_abs_rel_error:
        return {}
    unit = p.series.unit
    errors = ", ".join(signed_pct(pt.rel_error) for pt in v.points)
    checked = sizes_text([pt.world_size for pt in v.points])
    fitted = sizes_text(list(v.fit_sizes))
    return advice_evidence(
        change=(
            f"provision at least {needed:,.0f} Gb/s of inter-node bandwidth per node (now "
            f"{p.inter_node_gbps:,.0f} Gb/s)"
        ),
        gain=gain,
        better="higher",
        gain_of=(
            f"throughput at {last.world_size:,} {unit}s (efficiency "
            f"{last.step.efficiency:.0%} → {p.target_efficiency:.0%})"
        ),
        basis="predicted",
        noise=v.max_abs_rel_error,
        evidence=(
            f"the step-time model, fitted on {fitted} {unit}{'' if fitted == '1' else 's'}, "
            f"predicted the measured {checked} with error {errors} in this run"
        ),
    )


def validation_finding(p: Prediction) -> Finding:
    """What the model's error was on the larger measured world sizes (or why not checked)."""
    unit = p.series.unit
    v = p.validation
    if v is None:
        return Finding(
            id="prediction.validation", severity="info", scope="run",
            message=f"The scaling model is not checked on this run: {p.validation_reason}.",
            fix="Run training on 2 or more GPUs (training.world_sizes) to measure the model's "
            "own error.",
        )  # fmt: skip
    fitted = sizes_text(list(v.fit_sizes))
    checked = sizes_text([pt.world_size for pt in v.points])
    errors = ", ".join(signed_pct(pt.rel_error) for pt in v.points)
    detail = "; ".join(
        f"{pt.world_size}: {1e3 * pt.predicted_s:.4g} ms predicted, {1e3 * pt.measured_s:.4g} "
        "ms measured"
        for pt in v.points
    )
    plural = "" if fitted == "1" else "s"
    return Finding(
        id="prediction.validation",
        severity="info",
        scope="run",
        message=(
            f"Scaling model fitted on {fitted} {unit}{plural}, predicted {checked}: error "
            f"{errors} ({detail})."
        ),
        evidence=p.to_dict()["validation"] or {},
        fix="Weigh the predictions by this error; on CPU workers sharing one host's cores it "
        "describes the machine, not a cluster."
        if p.series.on_cpu
        else "Weigh the predictions by this error.",
    )

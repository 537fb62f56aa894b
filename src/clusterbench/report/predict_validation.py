"""The validation table of ``predict --workload`` against published scaling results, as
Markdown (docs/results/predict-validation.md holds it; tests/unit/test_predict_validation.py
recomputes it from tests/data/published-scaling/)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterbench.analyses.prediction.published_validation import Validation
from clusterbench.analyses.prediction.stated_workload import PointPrediction

__all__ = ["validation_markdown"]

_UNIT = {
    "tokens_per_s_per_gpu": "tok/s/GPU", "samples_per_s_per_gpu": "samples/s/GPU",
    "samples_per_s": "img/s", "tflops_per_gpu": "TFLOP/s/GPU", "mfu": "MFU", "step_s": "s",
}  # fmt: skip


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.1f}"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:+.1f}%".replace("-", "−")


def _row(name: str, doc: Mapping[str, Any], p: PointPrediction, base: int, skipped: bool) -> str:
    src = doc.get("source", {})
    mark = " (not represented)" if skipped else ""
    held = "yes" if p.holds else "no"
    return (
        f"| {name}{mark} | {src.get('where', '')} | {src.get('strategy', '')} | "
        f"{src.get('scaling', '')} | {base} → {p.gpus} | {p.scale:g}× | {p.layout} | "
        f"{_num(p.predicted)} | {_num(p.published or 0.0)} {_UNIT.get(p.unit, p.unit)} | "
        f"{_pct(p.error or 0.0)} | {_num(p.low)}–{_num(p.high)} | {held} |"
    )


def validation_markdown(validation: Validation, docs: Mapping[str, Mapping[str, Any]]) -> str:
    """The table (every published point past the base), the summary at 4x and beyond, the
    errors at the ends of each assumption, and the cases off for a named missing effect."""
    head = (
        "| case | published in | strategy | scaling | GPUs | × | layout at the larger size | "
        "predicted | published | error | 95% band | in band |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = []
    for case in validation.cases:
        base = next(p.gpus for p in case.points if p.base)
        skipped = case.name in validation.not_represented
        rows += [_row(case.name, docs[case.name], p, base, skipped)
                 for p in case.points if p.error is not None]  # fmt: skip
    s = validation.summary()
    summary = (
        f"At 4× the base and beyond, over {s['cases']:.0f} cases ({s['points']:.0f} points) the "
        f"model represents: median |error| {100 * s['median_abs_error']:.1f}%, largest "
        f"{100 * s['max_abs_error']:.1f}%; the 95% band holds the published figure at "
        f"{100 * s['band_holds_points']:.0f}% of the points and at every point of "
        f"{100 * s['band_holds_cases']:.0f}% of the cases."
    )
    ends = ["| case | assumption | error at one end | at the other |", "|---|---|---|---|"]
    for case in validation.cases:
        top = case.points[-1]
        if top.published is None:
            continue
        for what, (low, high) in case.ends.items():
            a, b = low / top.published - 1, high / top.published - 1
            ends.append(f"| {case.name} ({top.gpus} GPUs) | {what} | {_pct(a)} | {_pct(b)} |")
    named = []
    for case in validation.cases:
        src = docs[case.name].get("source", {})
        if case.name in validation.not_represented:
            named.append(f"- **{case.name}**, not represented: {src.get('not_represented')}.")
        elif src.get("missing_effect"):
            named.append(f"- **{case.name}**, missing effect: {src.get('missing_effect')}.")
    sigmas = ", ".join(f"{name} {sigma:.3f}" for name, sigma in validation.sigma.items())
    return "\n\n".join([
        head + "\n" + "\n".join(rows),
        summary,
        "Model-error sigma each case's band was widened by (from the other publications' "
        f"cases): {sigmas}.",
        "Each assumption at its two ends (the largest published size):\n\n" + "\n".join(ends),
        "Cases past 10%, and the case the model does not represent:\n\n" + "\n".join(named),
    ]) + "\n"  # fmt: skip

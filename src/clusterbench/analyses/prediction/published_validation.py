"""The validation of ``predict --workload`` against published scaling results: every case (a
stated workload with its source) predicted from its smallest published size, its band widened
by the error spread of the other publications' cases. docs/results/predict-validation.md holds
the table (:mod:`clusterbench.report.predict_validation` renders it). No I/O here."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusterbench.analyses.prediction.stated_workload import (
    PointPrediction,
    WorkloadPrediction,
    predict_workload,
)
from clusterbench.analyses.prediction.workload_file import table

__all__ = ["Validation", "robust_sigma", "validate_cases"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """Every published case predicted from its smallest published size, its band widened by
    the error spread of the other publications' cases (:func:`validate_cases`)."""

    cases: tuple[WorkloadPrediction, ...]
    not_represented: dict[str, str]
    """Case -> why the model does not represent it (listed, left out of the summary)."""
    sigma: dict[str, float]
    """Case -> the model-error sigma its band was widened by."""

    def checked(
        self, *, min_scale: float = 4.0
    ) -> list[tuple[WorkloadPrediction, PointPrediction]]:
        """(case, point) of every published point at ``min_scale`` x its base or more, of the
        cases the model represents."""
        return [
            (c, p)
            for c in self.cases
            if c.name not in self.not_represented
            for p in c.points
            if p.error is not None and p.scale >= min_scale
        ]

    def summary(self) -> dict[str, float]:
        """Median and largest |error|, and the share of points and of cases whose band holds
        the published figure, at 4x the base and beyond."""
        rows = self.checked()
        errors = [abs(p.error) for _, p in rows if p.error is not None]
        cases = {c.name for c, _ in rows}
        held_cases = [all(p.holds for c2, p in rows if c2.name == name) for name in cases]
        return {
            "cases": float(len(cases)),
            "points": float(len(rows)),
            "median_abs_error": statistics.median(errors) if errors else math.nan,
            "max_abs_error": max(errors) if errors else math.nan,
            "band_holds_points": sum(bool(p.holds) for _, p in rows) / len(rows)
            if rows
            else math.nan,
            "band_holds_cases": sum(held_cases) / len(held_cases) if held_cases else math.nan,
        }


_MAD_TO_SIGMA = 1.482602218505602  # 1 / Phi^-1(3/4): a normal's sigma from its median |deviation|


def robust_sigma(errors: Sequence[float]) -> float:
    """The spread of log(1 + error) as a normal's sigma, from the median absolute value
    (1.4826 x MAD about 0), so that a few cases far off for a named missing effect do not
    widen every band."""
    if not errors:
        return 0.0
    return _MAD_TO_SIGMA * statistics.median(abs(math.log1p(e)) for e in errors)


def validate_cases(docs: Mapping[str, Mapping[str, Any]]) -> Validation:
    """Each case (name -> document) predicted from its smallest published size; its band
    widened by :func:`robust_sigma` of the errors of the cases of the other publications
    (``source.publication``; leave one source out), so no case is judged by a band it shaped.
    A case whose ``source.not_represented`` says why is listed and left out of both."""
    central = {name: predict_workload(doc, name=name, model_sigma=0.0)
               for name, doc in docs.items()}  # fmt: skip
    sources = {name: str(table(doc, "source").get("publication", name))
               for name, doc in docs.items()}  # fmt: skip
    skipped = {name: str(table(doc, "source")["not_represented"]) for name, doc in docs.items()
               if table(doc, "source").get("not_represented")}  # fmt: skip
    out, sigmas = [], {}
    for name, doc in docs.items():
        others = [p.error for other, c in central.items()
                  if sources[other] != sources[name] and other not in skipped
                  for p in c.points if p.error is not None]  # fmt: skip
        sigmas[name] = robust_sigma(others)
        out.append(predict_workload(doc, name=name, model_sigma=sigmas[name]))
    return Validation(cases=tuple(out), not_represented=skipped, sigma=sigmas)

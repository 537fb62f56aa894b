"""docs/results/predict-validation.md is what the model computes today from the published cases
in tests/data/published-scaling/, and the cases are what the page says they are."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import tomllib

from clusterbench.analyses.prediction.published_validation import robust_sigma, validate_cases
from clusterbench.analyses.prediction.stated_workload import MODEL_ERROR_SIGMA, predict_workload
from clusterbench.report.predict_validation import validation_markdown

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "data" / "published-scaling"
PAGE = ROOT / "docs" / "results" / "predict-validation.md"


def _docs() -> dict[str, dict[str, object]]:
    return {f.stem: tomllib.loads(f.read_text(encoding="utf-8"))
            for f in sorted(CASES.glob("*.toml"))}  # fmt: skip


def test_the_page_holds_the_table_the_model_computes() -> None:
    docs = _docs()
    table = validation_markdown(validate_cases(docs), docs)
    page = PAGE.read_text(encoding="utf-8")
    assert table in page, "run: python scripts/predict_validation.py --write"


def test_every_case_names_its_source_and_reaches_4x() -> None:
    docs = _docs()
    publications = set()
    for name, doc in docs.items():
        src = doc["source"]
        assert isinstance(src, dict)
        for key in ("publication", "where", "date", "url", "scaling", "strategy", "details"):
            assert src.get(key), f"{name}: source.{key}"
        publications.add(src["publication"].split(",")[0])  # type: ignore[union-attr]
        prediction = predict_workload(doc, name=name)
        base = next(p for p in prediction.points if p.base)
        assert max(p.gpus for p in prediction.points) >= 4 * base.gpus, name
    assert len(docs) >= 8
    assert len(publications) >= 4
    assert {d["source"]["scaling"] for d in docs.values()} >= {"weak", "strong"}  # type: ignore[index]
    assert len({d["source"]["strategy"] for d in docs.values()}) >= 3  # type: ignore[index]


def test_the_summary_and_every_case_past_10_percent_is_explained() -> None:
    docs = _docs()
    v = validate_cases(docs)
    s = v.summary()
    assert s["median_abs_error"] <= 0.05
    assert s["band_holds_cases"] >= 0.8
    for case, point in v.checked():
        if abs(point.error or 0.0) > 0.10:
            assert docs[case.name]["source"].get("missing_effect"), case.name  # type: ignore[union-attr]


def test_the_default_model_error_is_the_tables() -> None:
    docs = _docs()
    errors = [p.error for name, doc in docs.items()
              if not doc["source"].get("not_represented")  # type: ignore[union-attr]
              for p in predict_workload(doc, name=name, model_sigma=0.0).points
              if p.error is not None]  # fmt: skip
    assert pytest.approx(robust_sigma(errors), abs=5e-4) == MODEL_ERROR_SIGMA


def test_robust_sigma_of_a_normal_sample() -> None:
    # the median |x| of a normal is 0.6745 sigma
    assert robust_sigma([math.expm1(0.6745 * 0.05 * s) for s in (-1, 1, -1, 1)]) == pytest.approx(
        0.05, rel=1e-3
    )
    assert robust_sigma([]) == 0.0

"""Recompute docs/results/predict-validation.md's table from tests/data/published-scaling/.

python scripts/predict_validation.py          # print the table
python scripts/predict_validation.py --write  # and write it between the markers of the page
"""

from __future__ import annotations

import sys
from pathlib import Path

import tomllib

from clusterbench.analyses.prediction.published_validation import validate_cases
from clusterbench.report.predict_validation import validation_markdown

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "published-scaling"
PAGE = ROOT / "docs" / "results" / "predict-validation.md"
BEGIN, END = "<!-- validation-table: begin -->", "<!-- validation-table: end -->"


def table() -> str:
    docs = {
        f.stem: tomllib.loads(f.read_text(encoding="utf-8")) for f in sorted(CASES.glob("*.toml"))
    }
    return validation_markdown(validate_cases(docs), docs)


def main() -> None:
    text = table()
    print(text)
    if "--write" in sys.argv[1:]:
        page = PAGE.read_text(encoding="utf-8")
        head, rest = page.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        PAGE.write_text(f"{head}{BEGIN}\n{text}{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()

"""What compare still finds: a planted slow-down in recorded healthy runs.

Reads the run folders ``scripts/false_alarms.sh`` left (``DIR/run-NN``), scales the last run's
GEMM TFLOP/s and memory bandwidth (value and repeats) by each FACTOR, and compares it with the
run before it, the K runs before that as the history.  Prints, per K and factor, how many of
the scaled rows came out as regressions and how many fail findings the comparison raised.

    python scripts/compare_power.py DIR [--history 3,5,10,19] [--factors 0.5,0.2,0.1]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clusterbench import catalog, load_results
from clusterbench.analyses.compare.comparison import compare
from clusterbench.schema import Results
from clusterbench.thresholds import Thresholds

SCALED = {("gemm", "tflops"), ("gemm", "tflops_best"), ("gemm", "tflops_geomean"),
          ("memory", "bandwidth")}  # fmt: skip


def scaled(results: Results, factor: float) -> Results:
    data = results.model_dump(mode="json")
    for m in data["measurements"]:
        if (m["benchmark"], m["metric"]) in SCALED:
            m["value"] *= factor
            stats = m.get("stats") or {}
            if stats.get("values"):
                stats["values"] = [v * factor for v in stats["values"]]
    return Results.model_validate(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--history", default="3,5,10,19")
    parser.add_argument("--factors", default="0.5,0.2,0.1")
    args = parser.parse_args()
    catalog.register_builtin()
    runs = [
        load_results(p) for p in sorted(args.folder.glob("run-*")) if (p / "results.json").is_file()
    ]
    base, last = runs[-2], runs[-1]
    planted = sum((m.benchmark, m.metric) in SCALED for m in last.measurements)
    print(f"{len(runs)} runs; {planted} rows scaled in the last; rows found (fail findings)")
    print("history  " + "  ".join(f"x{f:<12}" for f in args.factors.split(",")))
    for k in (int(x) for x in args.history.split(",")):
        previous = runs[-1 - k : -1][::-1]  # the k runs before the last, newest first
        cells = []
        for factor in (float(x) for x in args.factors.split(",")):
            c = compare(base, scaled(last, factor), Thresholds(), previous=previous)
            found = sum(r.verdict == "regression" and (r.benchmark, r.metric) in SCALED
                        for r in c.rows)  # fmt: skip
            fails = sum(f.severity == "fail" for f in c.findings)
            cells.append(f"{found:>2} rows ({fails})")
        print(f"{k:>7}  " + "  ".join(f"{cell:<13}" for cell in cells))


if __name__ == "__main__":
    main()

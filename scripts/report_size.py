"""How large and how fast is report.html for a large cluster?  Builds the synthetic run of
``tests/synthetic_cluster.py`` (64 nodes x 8 H200 by default: tens of thousands of
measurements), renders its page as ``write_results`` does, and prints the size and the
time of each step (median of ``--repeats`` renders).

    python scripts/report_size.py                 # 64 x 8
    python scripts/report_size.py --hosts 128 --out /tmp/report.html
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.synthetic_cluster

from tests.synthetic_cluster import cluster_results

from clusterbench import catalog
from clusterbench.analyses.run import RunAnalysis, report_plots, summary_sections
from clusterbench.report.html import render_html
from clusterbench.report.html_assets import plotly_js, plotly_packed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per host")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the page here")
    args = parser.parse_args()
    catalog.register_builtin()
    results = cluster_results(num_hosts=args.hosts, gpus_per_host=args.gpus)
    plotly_packed()  # packed once per machine (then cached), as a run does; not part of a render
    steps: dict[str, list[float]] = {"sections": [], "figures": [], "html": [], "total": []}
    page = ""
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        run = RunAnalysis(results)
        sections = summary_sections(run)
        t1 = time.perf_counter()
        plots = report_plots(run)
        t2 = time.perf_counter()
        run.sections, run.plots = sections, plots
        page = render_html(run)
        t3 = time.perf_counter()
        for name, seconds in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
            steps[name].append(seconds)
    size = len(page.encode("utf-8"))
    js = len(plotly_packed().encode("utf-8"))
    num_figures = sum(1 for ps in plots.values() for p in ps if p.figure.get("data"))
    print(
        f"run: {args.hosts} hosts x {args.gpus} GPUs, {len(results.measurements):,} "
        f"measurements, {num_figures} figures"
    )
    print(
        f"report.html: {size / 1e6:.2f} MB ({js / 1e6:.2f} MB plotly.js packed, "
        f"{len(plotly_js().encode('utf-8')) / 1e6:.2f} MB unpacked; "
        f"{(size - js) / 1e6:.2f} MB page and data)"
    )
    print(
        f"render (median of {args.repeats}): "
        + ", ".join(f"{name} {statistics.median(values):.2f} s" for name, values in steps.items())
    )
    if args.out is not None:
        args.out.write_text(page, encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

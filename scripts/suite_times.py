"""Print a run's time table: per benchmark its planned and measured wall seconds, what a budget
cut and where it stopped; the run's wall time last.

    python scripts/suite_times.py RUN_DIR [WALL_SECONDS]
"""

from __future__ import annotations

import sys

from clusterbench import load_results


def main(path: str, wall: str | None) -> None:
    results = load_results(path)
    run = results.run
    plans = {p.benchmark: p for p in run.plan.benchmarks} if run.plan else {}
    print(f"suite {run.suite}, {run.world_size} ranks, budget "
          f"{run.plan.budget_s if run.plan and run.plan.budget_s else 'none'}")  # fmt: skip
    print(f"{'benchmark':<14}{'planned s':>10}{'took s':>9}  cuts / stop")
    for name, took in run.benchmark_seconds.items():
        plan = plans.get(name)
        expected = f"{plan.expected_s:.1f}" if plan and plan.expected_s is not None else "-"
        notes = list(plan.cuts) if plan else []
        if plan and plan.stopped:
            s = plan.stopped
            notes.append(f"stopped after {s.after_s:.1f} s: {s.done} of {s.total} {s.unit}")
        print(f"{name:<14}{expected:>10}{took:>9.1f}  {'; '.join(notes)[:150]}")
    total = sum(run.benchmark_seconds.values())
    print(f"{'benchmarks':<14}{'':>10}{total:>9.1f}")
    if wall is not None:
        print(f"{'command wall':<14}{'':>10}{float(wall):>9.1f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)

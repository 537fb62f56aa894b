"""Hold `clusterbench analyze`'s what-ifs to a measurement: record a small DDP job
(scripts/record_traces.py) over ACTIVE profiled steps with a delay of D ms planted in every
second one, analyze its traces, and compare what the trace predicts removing the delay saves
with what the job's own steps without the delay measure (the same job, so that a machine busy
with other work slows both alike).

    python scripts/whatif_check.py --case straggler            # 2 gloo ranks, rank 1 sleeps
    python scripts/whatif_check.py --case input --device cuda  # every rank's DataLoader sleeps

Prints one JSON object: case, device, delay_ms, predicted_ms and measured_ms (over the delayed
steps), measured_noise_ms (the measured saving's own standard error), error_pct, and the
straggler named (rank or null).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from clusterbench.analyses.trace.file import find_traces, read_trace
from clusterbench.benchmarks.attribution import AttributionMetrics
from clusterbench.pipeline.imported import analyze_traces

ROOT = Path(__file__).resolve().parents[1]


def measured_saving_ms(folder: Path) -> tuple[float, int, float]:
    """(the median step with the delay less the median step without it, times the steps with
    it; how many steps had it; that saving's own noise).  ProfilerStep#N is the loop's step N
    (from 0): the delay falls in the odd ones; a step's time is the ranks' mean.

    The noise is the standard error of the difference of the two medians (1.2533 sigma
    sqrt(1/n1 + 1/n2), sigma the steps' spread about their group's median, 1.4826 MAD), times
    the delayed steps: how far the measured saving itself strays on a machine busy with other
    work."""
    steps: dict[int, list[float]] = {}
    for path in find_traces([folder]):
        for n, start, end in read_trace(path).steps:
            steps.setdefault(n, []).append((end - start) / 1e3)
    job_ms = {n: statistics.fmean(ms) for n, ms in steps.items()}
    delayed = [ms for n, ms in job_ms.items() if n % 2]
    on_time = [ms for n, ms in job_ms.items() if not n % 2]
    saving = (statistics.median(delayed) - statistics.median(on_time)) * len(delayed)
    spread = [abs(x - statistics.median(g)) for g in (delayed, on_time) for x in g]
    sigma = 1.4826 * statistics.median(spread)
    noise = 1.2533 * sigma * (1 / len(delayed) + 1 / len(on_time)) ** 0.5 * len(delayed)
    return saving, len(delayed), noise


def check(*, case: str, device: str, delay_ms: float, active: int, out: Path) -> dict[str, object]:
    planted = (["--slow-rank", "1", "--slow-ms", str(delay_ms)] if case == "straggler"
               else ["--input-ms", str(delay_ms)])  # fmt: skip
    cmd = [sys.executable, str(ROOT / "scripts" / "record_traces.py"), "--out",
           str(out / "traces"), "--gzip", "--active", str(active), "--slow-every", "2",
           "--device", device, *planted]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    done = analyze_traces([out / "traces"], out=out / "run", use_history=False)
    measured, num_delayed, noise = measured_saving_ms(out / "traces")
    found = [f for f in done.results.findings if f.id == "attribution.straggler"]
    whatif = "straggler" if case == "straggler" else "input_wait"
    savings = {
        m.rank: m.value
        for m in AttributionMetrics.whatif_saving_ms.select(done.results)
        if m.params.get("whatif") == whatif and m.params.get("rank_step") == "mean"
    }
    if case == "straggler":  # the named straggler's saving, else the most any rank would save
        rank = found[0].evidence["rank"] if found else max(savings, key=lambda r: savings[r])
        per_step = savings.get(int(str(rank)), 0.0)
    else:
        per_step = statistics.median(savings.values()) if savings else 0.0
    predicted = per_step * active  # per step, over the profiled steps
    return {
        "case": case,
        "device": device,
        "delay_ms": delay_ms,
        "delayed_steps": num_delayed,
        "predicted_ms": round(predicted, 2),
        "measured_ms": round(measured, 2),
        "measured_noise_ms": round(noise, 2),
        "error_pct": round(100 * (predicted - measured) / measured, 2) if measured else None,
        "straggler": found[0].evidence["rank"] if found else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("straggler", "input"), default="straggler")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--delay-ms", type=float, default=300.0)
    parser.add_argument("--active", type=int, default=8, help="profiled steps (even)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the traces and run here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        result = check(case=args.case, device=args.device, delay_ms=args.delay_ms,
                       active=args.active, out=out)  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()

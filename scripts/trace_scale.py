"""How fast, and in how much memory, does `clusterbench analyze` read a large trace?

Builds a trace of about --mb megabytes from a recorded one (tests/data/traces/h100 by default):
its events repeated, each copy shifted past the one before, its ProfilerStep spans renumbered,
written as plain JSON as torch.profiler writes it.  Then, in a fresh process each, reads it
with clusterbench.analyses.trace.file.read_trace and prints the wall time and the peak
resident memory, against the same process's peak before reading, per 100 MB of trace.

    python scripts/trace_scale.py --mb 1000
    python scripts/trace_scale.py --mb 100 --mb 300 --keep DIR
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_READ = """
import resource, sys, time
sys.path.insert(0, {src!r})
from clusterbench.analyses.trace import file as trace_file
from clusterbench.analyses.trace.attribution import attribute
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
t = trace_file.read_trace({path!r})
t1 = time.perf_counter()
result = attribute([t])
t2 = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(t.num_events, len(t.starts), len(t.steps), round(t1 - t0, 2), round(t2 - t1, 2),
      before // 1024, peak // 1024)
"""


def build(source: Path, target: Path, mb: float) -> int:
    data = json.loads(gzip.decompress(source.read_bytes()))
    events = data.pop("traceEvents")
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(
        e.get("ts", 0) for e in events if "ts" in e
    )
    head = json.dumps(data)[:-1] + ', "traceEvents": [\n'
    written, copies = 0, 0
    with target.open("w") as f:
        f.write(head)
        first = True
        while written < mb * 1e6:
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e2["ts"] + copies * (span + 1000)
                name = str(e2.get("name", ""))
                if name.startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{copies * 100 + int(name.split('#')[1])}"
                line = ("" if first else ",\n") + json.dumps(e2)
                first = False
                f.write(line)
                written += len(line)
            copies += 1
        f.write("\n]}\n")
    return copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, action="append")
    parser.add_argument(
        "--source", type=Path, default=next((ROOT / "tests/data/traces/h100").glob("*.gz"))
    )
    parser.add_argument("--keep", type=Path, help="write the traces here, not to a temp folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print("MB  events  activities  steps  read_s  attribute_s  rss_before_MB  rss_peak_MB  "
              "s_per_100MB  MB_rss_per_100MB")  # fmt: skip
        for mb in args.mb or [100.0]:
            path = folder / f"rank-0.scale-{int(mb)}MB.json"
            build(args.source, path, mb)
            size = path.stat().st_size / 1e6
            code = _READ.format(src=str(ROOT / "src"), path=str(path))
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout.split()  # fmt: skip
            events, acts, steps, read_s, attr_s, before, peak = out
            per = 100 / size
            print(f"{size:.0f}  {events}  {acts}  {steps}  {read_s}  {attr_s}  {before}  {peak}  "
                  f"{(float(read_s) + float(attr_s)) * per:.2f}  "
                  f"{(int(peak) - int(before)) * per:.1f}")  # fmt: skip
            if args.keep is None:
                path.unlink()


if __name__ == "__main__":
    main()

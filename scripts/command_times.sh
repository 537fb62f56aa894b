#!/usr/bin/env bash
# The start-up time of the commands a user types most, on this machine: each a fresh process,
# REPEATS times (default 5), the median printed first.  Two short runs give compare, report and
# export a run folder to read.  The package is byte-compiled first, as `pip install` does.
# Beside each median, its target where issue 41 set one: a usage error 0.4 s, info and
# doctor --fast 1 s (on a machine without GPU), a command that reads a run 0.6 s; "!" after
# a target the median missed.
#
#   scripts/command_times.sh            # prints "median  min  max  target  command" rows
#
# Needs python3 with torch; wheels for anything else (pydantic, plotly) may be placed in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
REPEATS="${REPEATS:-5}"
if compgen -G ".whl/*.whl" >/dev/null && ! python3 -c "import pydantic, plotly" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade \
    --target /tmp/cb-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/cb-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}"
python3 -m compileall -q src >/dev/null
export CLUSTERBENCH_HISTORY="$OUT/history.sqlite"
A="$OUT/run-a" B="$OUT/run-b"
python3 -m clusterbench run --only memory,transfer --out "$A" >"$OUT/run-a.log" 2>&1
python3 -m clusterbench run --only memory,transfer --out "$B" >"$OUT/run-b.log" 2>&1
echo "runs: exit $? ($A, $B)"
python3 - "$REPEATS" "$A" "$B" "$OUT" <<'PY' | tee "$OUT/command-times.txt"
import statistics, subprocess, sys, time
repeats, a, b, out = int(sys.argv[1]), *sys.argv[2:]
USAGE, PROBE, READ = 0.4, 1.0, 0.6  # targets, s: a usage error; info, doctor --fast; a run read
commands = [
    (["--help"], None), (["list"], None), (["schema"], None), (["history"], None),
    (["compare", a, b], READ), (["report", b, "-o", f"{out}/r.html"], READ),
    (["export", b, "--format", "csv", "-o", f"{out}/b.csv"], READ),
    (["launch", "--torchrun", "--nodes", "2", "--gpus-per-node", "8"], None),
    (["info"], PROBE), (["doctor", "--fast"], PROBE),
    (["run", "--only", "gemmm"], USAGE), (["run", "--set", "gemm.bogus=1"], USAGE),
    (["run", "--out", f"{out}/run-a/results.json"], USAGE),
]
print(f"{'median':>7} {'min':>6} {'max':>6} {'target':>6}  command ({repeats} runs each, wall s)")
for args, target in commands:
    times, codes = [], set()
    for _ in range(repeats):
        t0 = time.perf_counter()
        codes.add(subprocess.run([sys.executable, "-m", "clusterbench", *args],
                                 capture_output=True).returncode)
        times.append(time.perf_counter() - t0)
    shown = " ".join(x if "/" not in x else x.rsplit("/", 1)[-1] for x in args)
    median = statistics.median(times)
    aim = "-" if target is None else f"{target:.1f}" + ("" if median <= target else "!")
    print(f"{median:7.2f} {min(times):6.2f} {max(times):6.2f} {aim:>6}  "
          f"clusterbench {shown} (exit {sorted(codes)})")
PY

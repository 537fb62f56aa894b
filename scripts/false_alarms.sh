#!/usr/bin/env bash
# False alarms of `clusterbench compare` on healthy reruns: RUNS back-to-back runs of the default
# suite on this machine (CPU workers where there is no GPU), one history, then each run compared
# with the one before it, as a user would after every run.  Nothing changes between the runs,
# so every regression it reports is a false alarm.
#
#   scripts/false_alarms.sh                  # 20 runs, then 19 compares; a table last
#   RUNS=5 scripts/false_alarms.sh           # fewer runs
#   scripts/false_alarms.sh --compare DIR    # only the compares, on the run folders in DIR
#
# Prints, per compare: exit code, fail and warn findings, regression rows, output lines; and
# the totals.  Logs and run folders stay under $OUT (default: a new temporary folder).
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-20}"
if [[ "${1:-}" == "--compare" ]]; then
  OUT="$2"
else
  OUT="${OUT:-$(mktemp -d)}"
  mkdir -p "$OUT"
  export CLUSTERBENCH_HISTORY="$OUT/history.sqlite"
  rm -f "$CLUSTERBENCH_HISTORY"
  for i in $(seq 1 "$RUNS"); do
    run="$OUT/run-$(printf %02d "$i")"
    rm -rf "$run"
    start=$(date +%s)
    python3 -m clusterbench run --out "$run" >"$run.log" 2>&1
    echo "run $i: exit $? in $(( $(date +%s) - start )) s -> $run" >&2
  done
fi
export CLUSTERBENCH_HISTORY="$OUT/history.sqlite"
python3 - "$OUT" <<'PY' | tee "$OUT/false-alarms.txt"
import json, pathlib, subprocess, sys
out = pathlib.Path(sys.argv[1])
runs = sorted(p for p in out.glob("run-*") if (p / "results.json").is_file())
cb = [sys.executable, "-m", "clusterbench", "compare"]
total = {"fail": 0, "warn": 0, "rows": 0, "exit1": 0}
longest = 0
print(f"{'compare':<16} {'exit':>4} {'fail':>4} {'warn':>4} {'rows':>4} {'lines':>5}")
for a, b in zip(runs, runs[1:]):
    text = subprocess.run([*cb, str(a), str(b)], capture_output=True, text=True)
    data = json.loads(subprocess.run([*cb, str(a), str(b), "--json"], capture_output=True,
                                     text=True).stdout)
    fail = sum(f["severity"] == "fail" for f in data["findings"])
    warn = sum(f["severity"] == "warn" for f in data["findings"])
    rows = sum(r["verdict"] == "regression" for r in data["rows"])
    lines = len(text.stdout.splitlines())
    longest = max(longest, lines)
    total["fail"] += fail
    total["warn"] += warn
    total["rows"] += rows
    total["exit1"] += text.returncode == 1
    print(f"{a.name + '>' + b.name:<16} {text.returncode:>4} {fail:>4} {warn:>4} {rows:>4} "
          f"{lines:>5}")
    for f in data["findings"]:
        print(f"    {f['severity']}: {f['message']}")
print(f"{len(runs) - 1} compares of {len(runs)} healthy runs: {total['fail']} fail and "
      f"{total['warn']} warn findings ({total['rows']} regression rows), exit 1 in "
      f"{total['exit1']}, at most {longest} lines of output")
PY

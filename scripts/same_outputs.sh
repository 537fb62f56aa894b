#!/usr/bin/env bash
# Every output a reading command makes of recorded runs, for a before/after comparison of a
# change that must not change them (a reshaping of the code):
#
#   scripts/same_outputs.sh RUNS DEST [HISTORY]   # RUNS: a folder of run folders
#   (run it with the old code into A and with the new into B, then `diff -r A B`)
#
# For each run folder: report (HTML), export csv/json-lines/prometheus, cost and cost --json
# (--gpu-hour 2), predict and predict --json, and in-process the findings analyze() makes anew,
# the sections, plots, node verdicts, drain list, advice and cost; across the first two runs:
# compare (default, --all, --json) and its HTML; analyze of each trace folder under
# tests/data/traces; import of each nccl-tests file under tests/data/nccl-tests.  HISTORY: a
# history database to copy for compare's earlier runs (default: none).  Times and DEST's own
# path are masked, so that two calls on the same code give the same bytes.
set -uo pipefail
RUNS=$(cd "$1" && pwd); D=$2; HISTORY=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$D"; mkdir -p "$D"; D=$(cd "$D" && pwd)
export CLUSTERBENCH_HISTORY="$D/.history.sqlite"
[ -n "$HISTORY" ] && cp "$HISTORY" "$CLUSTERBENCH_HISTORY"
runs=$(ls "$RUNS")
for r in $runs; do
  o=$D/$r; mkdir -p "$o"
  clusterbench report "$RUNS/$r" -o "$o/report.html" >"$o/report.out" 2>&1
  for f in csv json-lines prometheus; do
    clusterbench export "$RUNS/$r" -f $f -o "$o/export.$f" >/dev/null 2>"$o/export.$f.err"
  done
  clusterbench cost "$RUNS/$r" --no-write --gpu-hour 2 >"$o/cost.out" 2>&1; echo "rc $?" >>"$o/cost.out"
  clusterbench cost "$RUNS/$r" --no-write --gpu-hour 2 --json >"$o/cost.json" 2>&1
  clusterbench predict "$RUNS/$r" >"$o/predict.out" 2>&1; echo "rc $?" >>"$o/predict.out"
  clusterbench predict "$RUNS/$r" --json >"$o/predict.json" 2>&1
  python3 - "$RUNS/$r" "$o" <<'PY'
import json
import sys
from pathlib import Path

from clusterbench import catalog
from clusterbench.analyses.run import RunAnalysis, analyze
from clusterbench.schema import Results

catalog.register_builtin()
src, out = Path(sys.argv[1]), Path(sys.argv[2])
results = Results.model_validate_json((src / "results.json").read_text())
results.findings = []
findings = analyze(RunAnalysis(results, run_dir=src))
(out / "findings.json").write_text(
    json.dumps([f.model_dump(mode="json") for f in findings], indent=1, sort_keys=True)
)
results.findings = findings
run = RunAnalysis(results, run_dir=src)
(out / "sections.txt").write_text("\n".join(repr(s) for s in run.sections))
(out / "plots.txt").write_text("\n".join(f"{k}: {v!r}" for k, v in run.plots.items()))
(out / "verdicts.txt").write_text(
    "\n".join(repr(x) for x in (run.node_verdicts, run.other_findings, run.drain, run.advice, run.cost))
)
PY
done
set -- $runs
if [ $# -ge 2 ]; then
  a=$RUNS/$1; b=$RUNS/$2
  clusterbench compare "$a" "$b" >"$D/compare.out" 2>&1; echo "rc $?" >>"$D/compare.out"
  clusterbench compare "$a" "$b" --json >"$D/compare.json" 2>&1
  clusterbench compare "$a" "$b" --all >"$D/compare-all.out" 2>&1
  clusterbench report "$a" "$b" -o "$D/compare.html" >/dev/null 2>&1
fi
for t in "$ROOT"/tests/data/traces/*/; do
  n=$(basename "$t")
  clusterbench analyze "$t" -o "$D/analyze-$n" --no-history >"$D/analyze-$n.out" 2>&1
  echo "rc $?" >>"$D/analyze-$n.out"
done
for t in "$ROOT"/tests/data/nccl-tests/*_perf.txt "$ROOT"/tests/data/nccl-tests/*.json; do
  n=$(basename "$t")
  clusterbench import nccl-tests "$t" -o "$D/import-$n" --no-history >"$D/import-$n.out" 2>&1
  echo "rc $?" >>"$D/import-$n.out"
done
rm -f "$CLUSTERBENCH_HISTORY"
# mask what changes from call to call: the time of day, the folders' paths, the start and finish phases
find "$D" -type f \( -name "*.out" -o -name "*.html" -o -name "*.md" -o -name "*.json" \) -print0 \
  | xargs -0 sed -i -E "s#$D#DEST#g; s#$RUNS#RUNS#g; s/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z?//g"
find "$D" -type f \( -name "*.html" -o -name "results.json" \) -print0 \
  | xargs -0 sed -i -E 's/"(finish|page|import|start|imports)": [0-9.]+/"\1": T/g; s#dd>[0-9,.]+ s<#dd>T s<#g'
echo "outputs of $(echo $runs | wc -w) run folders in $D"

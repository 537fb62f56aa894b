#!/usr/bin/env bash
# compare on a GPU: false alarms of healthy reruns and a co-tenant GEMM hog, in one call.
#
#   scripts/gpu_compare_check.sh            # RUNS (default 5) healthy quick runs, one history,
#                                           # each compared with the one before; then one run
#                                           # beside a process multiplying bf16 matrices on the
#                                           # same GPU, compared with the last healthy run
#
# Full outputs under $OUT (default: a new temporary folder); a short table last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
RUNS="${RUNS:-5}"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
export TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}"
if compgen -G ".whl/*.whl" >/dev/null && ! python3 -c "import pydantic, plotly" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/cb-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/cb-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}"
python3 -m compileall -q src >/dev/null
export CLUSTERBENCH_HISTORY="$OUT/compare-check.sqlite"
rm -f "$CLUSTERBENCH_HISTORY"
mkdir -p "$OUT/compare-check"
D="$OUT/compare-check"
rows=()
for i in $(seq 1 "$RUNS"); do
  t0=$(date +%s.%N)
  python3 -m clusterbench run --out "$D/run-$i" >"$D/run-$i.log" 2>&1
  rc=$?
  rows+=("healthy run $i: exit $rc, $(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')") s")
  if (( i > 1 )); then
    python3 -m clusterbench compare "$D/run-$((i - 1))" "$D/run-$i" >"$D/compare-$i.txt" 2>&1
    crc=$?
    rows+=("  compare run-$((i - 1)) -> run-$i: exit $crc, $(wc -l <"$D/compare-$i.txt") lines, $(grep -m1 '^Verdict' "$D/compare-$i.txt")")
  fi
done
# the co-tenant: bf16 products of 8192^2 matrices on the same GPU for the whole run
python3 - >"$D/hog.log" 2>&1 <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
open("/tmp/cb-hog-ready", "w").close()
end = time.time() + 240
while time.time() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
PY
HOG=$!
rm -f /tmp/cb-hog-ready
for _ in $(seq 1 120); do [[ -e /tmp/cb-hog-ready ]] && break; sleep 0.5; done
python3 -m clusterbench run --out "$D/hogged" >"$D/hogged.log" 2>&1
rows+=("run beside a GEMM hog: exit $?")
kill "$HOG" 2>/dev/null; wait "$HOG" 2>/dev/null
python3 -m clusterbench compare "$D/run-$RUNS" "$D/hogged" >"$D/compare-hogged.txt" 2>&1
crc=$?
rows+=("  compare run-$RUNS -> hogged: exit $crc, $(wc -l <"$D/compare-hogged.txt") lines, $(grep -m1 '^Verdict' "$D/compare-hogged.txt")")
python3 -m clusterbench compare "$D/run-$RUNS" "$D/hogged" --no-history >"$D/compare-hogged-nohist.txt" 2>&1
crc=$?
rows+=("  compare run-$RUNS -> hogged, no history: exit $crc, $(grep -m1 '^Verdict' "$D/compare-hogged-nohist.txt")")
echo "== compare check ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)) =="
printf '%s\n' "${rows[@]}" | tee "$D/table.txt"

#!/usr/bin/env bash
# One command for the GPU machine: GPU tests + a suite, full logs under $OUT, a short table last.
#
#   scripts/gpu_validate.sh [SUITE] [extra `clusterbench run` args...]
#   scripts/gpu_validate.sh level3      # the Level 3 validation (training, dataloader, checkpoint)
#   L3='gpt13b resnet50c vit' scripts/gpu_validate.sh level3   # only those Level 3 steps
#     (steps: gpt13b resnet50 resnet50c resnet50g vit bert std sweep io attr; default gpt13b resnet50c sweep io;
#      std: the standard suite's training preset, 1.3b with the gradient-accumulation sweep)
#   ADVICE='wupdate tune' scripts/gpu_validate.sh advice   # measured advice: weight update,
#     NCCL tuning sweep, prediction (steps: tests wupdate predict tune; default all of them)
#   HEALTH='quick cap' scripts/gpu_validate.sh health   # telemetry, SDC, doctor --fast, soak
#     (steps: tests quick cap doctor soak; default all of them)
#   SUITES='quick standard budget' BUDGET=2m scripts/gpu_validate.sh suites   # the suites'
#     wall times against their targets, with their plans, and the standard suite under --budget
#   ANALYZE='whatif scale' SCALE='--ranks 1024 --mb 10 --gzip' scripts/gpu_validate.sh analyze
#     # clusterbench analyze: the input-wait what-if on the GPU, many ranks' traces over the cores
#   scripts/gpu_validate.sh checkpoint   # bounded checkpoint (standard suite) against the real
#     full-size save of the 1.3b state, side by side (CKPT='bounded full': the steps; default both;
#     FULL_REPEATS=2: timed rounds of the whole state per format, default 1, each ~140 s on one
#     H200 for the four formats; FULL_WARMUP=1: untimed rounds before them, default 0)
#   scripts/gpu_validate.sh startup   # first on a fresh machine: a bare torch import and CUDA
#     start, then STARTUP_RUNS=3 quick runs, a row each: wall s and the run's phases, and under
#     it what the phases leave out (scripts/run_marks.py: the workers' wind-down, the end)
#     (BYTECOMPILE=1: first byte-compile the Python packages, torch's among them, as
#     `pip install` leaves them, where this machine ships them without bytecode)
#
# Needs python3 with torch (CUDA), rich, typer, psutil, nvidia-ml-py; wheels for anything else
# (pydantic) may be placed in .whl/ and are installed to a private folder first.
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL_OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$FINAL_OUT"
OUT="$(mktemp -d)"  # everything goes here; FINAL_OUT gets the table, results and a tarball
SUITE="${1:-quick}"
shift || true

# Never enable NVLink SHARP / multicast here; keep what the machine sets.
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
export TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null && ! python3 -c "import pydantic, plotly" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/cb-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/cb-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}"
# byte-compiled as `pip install` leaves a package (this machine may set PYTHONDONTWRITEBYTECODE,
# and every command would compile clusterbench's sources again)
python3 -m compileall -q src >/dev/null

if [ "$SUITE" = startup ]; then
  # Issue 41: what a quick run pays before its first benchmark, first thing on a fresh machine:
  # STARTUP_RUNS (default 3) default quick runs, each one row: its wall time, its phases
  # (run.phase_seconds) and benchmarks' seconds; after the first (the one that meets the fresh
  # machine) a bare `import torch; torch.cuda.init()`. Target: the quick run <= 12 s on every fresh
  # machine. DROP_CACHES=1: drop the page cache before each step (root only).
  cold() {
    [ "${DROP_CACHES:-0}" = 1 ] || return 0
    { sync; echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null \
      || echo "DROP_CACHES=1 but the page cache could not be dropped (not root?)" | tee -a "$OUT/startup.txt"
  }
  secs() { python3 -c "print(f'{$(date +%s.%N) - $1:.2f}')"; }
  nvidia-smi --query-gpu=index,name,persistence_mode,driver_version --format=csv,noheader \
    >"$OUT/machine.txt" 2>&1
  cat "$OUT/machine.txt"
  bare() {
    cold; t0=$(date +%s.%N)
    parts=$(python3 -c 'import time; t = time.monotonic(); import torch; a = time.monotonic(); torch.cuda.init(); print(f"import {a - t:.2f}  cuda.init {time.monotonic() - a:.2f}")' \
      2>"$OUT/bare.log")
    rc=$?; wall=$(secs "$t0")
    [ "$rc" = 0 ] || parts=$(tail -n 1 "$OUT/bare.log")
    printf '%-9s %7s  exit %s  %s\n' bare "$wall" "$rc" "$parts" | tee -a "$OUT/startup.txt"
  }
  : >"$OUT/startup.txt"
  if [ "${BYTECOMPILE:-0}" = 1 ]; then
    # `pip install` byte-compiles what it installs; a machine image built with
    # PYTHONDONTWRITEBYTECODE=1 and `pip install --no-compile` leaves every import of torch
    # to compile its ~2,100 modules again. Compiled here into a cache folder of our own (the
    # machine's files untouched), which every command below reads.
    t0=$(date +%s.%N)
    export PYTHONPYCACHEPREFIX=/tmp/cb-pycache
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    python3 -m compileall -q -j 0 "$site" src ${PYTHONPATH:+/tmp/cb-site} >/dev/null 2>&1
    echo "byte-compiled $site and src into $PYTHONPYCACHEPREFIX in $(secs "$t0") s" \
      | tee -a "$OUT/startup.txt"
  fi
  for i in $(seq 1 "${STARTUP_RUNS:-3}"); do
    cold; t0=$(date +%s.%N)
    # scripts/run_marks.py: the command itself, with the steps its phases leave out timed
    timeout 300 python3 scripts/run_marks.py run --no-history --out "$OUT/quick-$i" "$@" \
      >"$OUT/run-quick-$i.log" 2>&1
    rc=$?; wall=$(secs "$t0")
    marks=$(grep -m1 '^marks: ' "$OUT/run-quick-$i.log")
    python3 - "$OUT/quick-$i/results.json" "quick-$i" "$wall" "$rc" "$marks" <<'EOF' | tee -a "$OUT/startup.txt"
import json, re, sys
path, name, wall, rc, marks = sys.argv[1:]
try:
    with open(path, encoding="utf-8") as f:
        run = json.load(f)["run"]
except (OSError, ValueError, KeyError) as exc:
    sys.exit(print(f"{name:<9} {wall:>7}  exit {rc}  no results.json ({type(exc).__name__})"))
phase = run.get("phase_seconds") or {}
phases = "  ".join(f"{k} {v:.2f}" for k, v in phase.items())
each = run.get("benchmark_seconds") or {}
benchmarks = sum(each.values())
parts = ", ".join(f"{k} {v:.2f}" for k, v in each.items())
print(f"{name:<9} {wall:>7}  exit {rc}  {phases}  benchmarks {benchmarks:.2f} ({parts})")
# the workers' wind-down (after the last benchmark to their word 'done'), the wait for
# their processes' end after the print, and the command's end
at = {k: float(v) for k, v in re.findall(r"([a-z][a-z ]*?) (\d+\.\d+)", marks.removeprefix("marks: "))}
if "launch" in at and "workers ended" in at:
    worked = sum(phase.get(k, 0.0) for k in ("worker imports", "worker start", "device init",
                                             "probe", "telemetry start")) + benchmarks
    wind = at["workers ended"] - at["launch"] - worked
    exits = at.get("exits to", 0.0) - at.get("exits from", 0.0)
    print(f"{'':<9} {marks}  ->  workers' wind-down {wind:.2f} (to their word 'done'), "
          f"their exits waited for {exits:.2f} after the print, after the marks "
          f"{float(wall) - at.get('exit', 0.0):.2f} (wall - exit mark)")
EOF
    [ "$i" = 1 ] && bare  # the first quick run meets the fresh machine; the bare import next
  done
  # what the start-up is made of on this machine: its CPU, whether torch's modules are
  # byte-compiled (a pip install leaves them so), and the slowest imports of a worker
  {
    echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-} PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-}"
    python3 -c '
import importlib.util, pathlib
root = pathlib.Path(importlib.util.find_spec("torch").origin).parent
sources = list(root.rglob("*.py"))
done = sum(pathlib.Path(importlib.util.cache_from_source(str(s))).exists() for s in sources)
print(f"torch at {root.parent}: {done} of {len(sources)} modules byte-compiled")'
    cold  # the workers' import as the fork server meets it: from disk where DROP_CACHES=1
    python3 -X importtime -c 'import clusterbench.pipeline.rank' 2>"$OUT/importtime.txt" >/dev/null
    echo "slowest imports of a worker, cumulative (us), torch's own inner modules left out:"
    grep -v '|  *torch\.' "$OUT/importtime.txt" | sort -t'|' -k2 -n | tail -n 25
  } >"$OUT/startup-detail.txt" 2>&1
  cat "$OUT/startup-detail.txt"
  tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
  cp "$OUT"/startup.txt "$FINAL_OUT"/ 2>/dev/null
  exit 0
fi

{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=index,name,pcie.link.gen.max,pcie.link.width.max,clocks.sm,power.draw \
    --format=csv 2>&1
  nvidia-smi topo -m 2>&1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  env | grep -E '^(NCCL|TORCH_SYMM)' | sort
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# runstep NAME SECONDS ARGS...: one bounded `clusterbench run`, its files kept under $OUT
runstep() {
  local name=$1 secs=$2; shift 2
  local t0; t0=$(date +%s)
  timeout "$secs" python3 -m clusterbench run --out "/tmp/cb-$name-$$" --no-history "$@" \
    >"$OUT/run-$name.log" 2>&1
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s ($*)"
  cp "/tmp/cb-$name-$$/results.json" "$OUT/results-$name.json" 2>/dev/null
  cp "/tmp/cb-$name-$$/summary.md" "$OUT/summary-$name.md" 2>/dev/null
  cp "/tmp/cb-$name-$$/report.html" "$OUT/report-$name.html" 2>/dev/null
  cp -r "/tmp/cb-$name-$$/telemetry" "$OUT/telemetry-$name" 2>/dev/null
  grep -E "^\[(warn|fail|info)\] (telemetry|sdc|soak|gpu|health)\." "$OUT/run-$name.log" \
    | cut -c1-400
}

if [ "$SUITE" = level3 ]; then
  # Level 3 on the GPUs: 1.3b MFU and DDP weak scaling, ResNet-50, a strategy sweep, then the
  # dataloader and checkpoint benchmarks; each step bounded so one slow part cannot eat the rest.
  python3 -m pytest tests/gpu/test_training_gpu.py -q -m gpu -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest-gpu.log" | tail -2
  # training steps run world sizes 1, 2, 4 ... up to every GPU: their limits grow with the count
  NGPU=$(nvidia-smi -L | wc -l)
  NWS=$(python3 -c "import sys; sys.path.insert(0, 'src')
from clusterbench.benchmarks.training.bench import default_world_sizes
print(len(default_world_sizes(max(1, $NGPU))))" 2>/dev/null || echo 2)
  step() {  # step NAME SECONDS-PER-WORLD-SIZE-PAIR ARGS...
    local name=$1 secs=$(( $2 * (NWS > 2 ? NWS : 2) / 2 )); shift 2
    timeout "$secs" python3 -m clusterbench run --out "/tmp/cb-$name-$$" "$@" \
      >"$OUT/run-$name.log" 2>&1
    echo "$name: exit $? ($*)"
    cp "/tmp/cb-$name-$$/results.json" "$OUT/results-$name.json" 2>/dev/null
    python3 scripts/validate_table.py "/tmp/cb-$name-$$/results.json" >>"$OUT/table.txt" 2>&1
  }
  want() { [[ " ${L3:-gpt13b resnet50c sweep io} " == *" $1 "* ]]; }
  want gpt13b && step gpt13b 230 --only training --set training.model=1.3b \
    --set training.compile=true --set training.grad_accum_sweep= "$@"
  want resnet50 && step resnet50 80 --only training --set training.model=resnet50 \
    --set training.batch_size=256 --set training.steps=20 "$@"
  want resnet50c && step resnet50c 150 --only training --set training.model=resnet50 \
    --set training.batch_size=256 --set training.steps=20 \
    --set training.compile=true "$@"
  want resnet50g && step resnet50g 150 --only training --set training.model=resnet50 \
    --set training.batch_size=256 --set training.steps=20 \
    --set training.compile=true --set training.cuda_graphs=true "$@"
  want vit && step vit 150 --only training --set training.model=vit_b_16 \
    --set training.batch_size=128 --set training.steps=20 \
    --set training.compile=true "$@"
  want bert && step bert 150 --only training --set training.model=bert_large \
    --set training.batch_size=32 --set training.steps=20 --set training.compile=true "$@"
  want std && step std 300 --only training --suite standard "$@"
  want sweep && step sweep 120 --only training --set training.model=125m \
    --set training.sweep=true --set training.world_sizes=2 --set training.sweep_precisions=bf16 \
    --set training.sweep_compile=false --set training.sweep_steps=12 "$@"
  want io && step io 120 --only dataloader,checkpoint --suite quick "$@"
  want attr && step attr 200 --only attribution --set training.model=1.3b \
    --set training.compile=true "$@"
  tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
  cp "$OUT"/table.txt "$OUT"/results-*.json "$FINAL_OUT"/ 2>/dev/null
  cat "$OUT/table.txt"
  exit 0
fi

if [ "$SUITE" = advice ]; then
  # Measured advice (issues 16, 17): the weight-update bandwidth of the 1.3b against this run's
  # HBM copy, training + attribution (with the accumulation idle curve) + collectives and the
  # scaling prediction made from them, and the NCCL tuning sweep (needs >= 2 GPUs: on one it
  # must say why it skipped). Each step bounded; a short table last.
  awant() { [[ " ${ADVICE:-tests wupdate predict tune} " == *" $1 "* ]]; }
  awant tests && python3 -m pytest tests/gpu/test_weight_update_gpu.py \
    tests/gpu/test_collectives_tune_gpu.py -q -m gpu -p no:cacheprovider 2>&1 \
    | tee "$OUT/pytest-gpu.log" | tail -3
  if awant wupdate; then
    runstep wupdate 150 --suite standard --only memory,weight_update "$@"
    grep -E "weight update reaches|weight_update" "$OUT/run-wupdate.log" | head -8
  fi
  if awant predict; then
    runstep predict 330 --suite standard --only collectives,training,attribution \
      --set training.grad_accum_sweep= "$@"
    python3 -m clusterbench predict "/tmp/cb-predict-$$" --gpus 2,8,64,256,1024 \
      --gpus-per-node 8 --nic-gbps 400 >"$OUT/predict.txt" 2>&1
    echo "predict: exit $?"
    python3 -m clusterbench predict "/tmp/cb-predict-$$" --gpus 2,8,64,256,1024 \
      --gpus-per-node 8 --nic-gbps 400 --json >"$OUT/predict.json" 2>/dev/null
    cat "$OUT/predict.txt"
    grep -E "accumulation steps|Coordination idle" "$OUT/run-predict.log" | head -3
  fi
  if awant tune; then
    runstep tune 200 --suite quick --only collectives --set collectives.tune=true "$@"
    grep -iE "tune" "$OUT/run-tune.log" | head -8
  fi
  tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
  cp "$OUT"/results-*.json "$OUT"/predict.* "$OUT"/summary-*.md "$FINAL_OUT"/ 2>/dev/null
  for f in "$OUT"/results-*.json; do python3 scripts/validate_table.py "$f"; done 2>&1 | tail -40
  exit 0
fi

if [ "$SUITE" = suites ]; then
  # Issue 20's targets: each suite's wall time on this machine (quick under 1 min, standard
  # under 5 min) with the plan it printed, then the standard suite under --budget; per
  # benchmark its planned and measured seconds (scripts/suite_times.py), the table last.
  # SUITES='quick standard budget': the steps (default all); BUDGET=2m: the budget; ONLY: the
  # benchmarks to run (default the suite's).
  swant() { [[ " ${SUITES:-quick standard budget} " == *" $1 "* ]]; }
  for s in quick standard budget; do
    swant "$s" || continue
    args=(--suite "$s"); [ "$s" = budget ] && args=(--suite standard --budget "${BUDGET:-2m}")
    [ -n "${ONLY:-}" ] && args+=(--only "$ONLY")  # ONLY=dataloader,attribution: those alone
    t0=$(date +%s.%N)
    timeout 560 python3 -m clusterbench run "${args[@]}" --out "/tmp/cb-suite-$s-$$" \
      --no-history "$@" >"$OUT/run-suite-$s.log" 2>&1
    rc=$?
    wall=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
    echo "== ${args[*]}: exit $rc, wall $wall s" | tee -a "$OUT/times.txt"
    python3 scripts/suite_times.py "/tmp/cb-suite-$s-$$" "$wall" >>"$OUT/times.txt" 2>&1
    cp "/tmp/cb-suite-$s-$$/results.json" "$OUT/results-suite-$s.json" 2>/dev/null
    cp "/tmp/cb-suite-$s-$$/summary.md" "$OUT/summary-suite-$s.md" 2>/dev/null
  done
  tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
  cp "$OUT"/results-suite-*.json "$OUT"/summary-suite-*.md "$OUT"/times.txt "$FINAL_OUT"/ \
    2>/dev/null
  cat "$OUT/times.txt"
  exit 0
fi

if [ "$SUITE" = checkpoint ]; then
  # Issue 20: the standard suite's bounded checkpoint (rates of at most 2 GiB of the 1.3b state
  # at 3 sizes, repeated until stable; the whole state's times predicted) against the real
  # full-size save and load of that state (15.9 GiB, once per format); a table of both last.
  cwant() { [[ " ${CKPT:-bounded full} " == *" $1 "* ]]; }
  cwant bounded && runstep ckpt-bounded 420 --suite standard --only checkpoint "$@"
  fr=${FULL_REPEATS:-1} fw=${FULL_WARMUP:-0}  # timed and untimed rounds of the whole state
  cwant full && runstep ckpt-full $(( 60 + 170 * (fr + fw) )) --suite standard --only checkpoint \
    --set checkpoint.max_bytes=0 --set checkpoint.num_sizes=1 --set checkpoint.repeats="$fr" \
    --set checkpoint.min_repeats="$fr" --set checkpoint.warmup="$fw" "$@"
  for f in "$OUT"/summary-ckpt-*.md; do [ -f "$f" ] && grep -A40 -i "^#* *checkpoint" "$f" \
    | head -60 >"${f%.md}.checkpoint.txt"; done
  if [ -f "$OUT/results-ckpt-bounded.json" ] && [ -f "$OUT/results-ckpt-full.json" ]; then
    python3 scripts/checkpoint_compare.py "$OUT/results-ckpt-bounded.json" \
      "$OUT/results-ckpt-full.json" --markdown >"$OUT/checkpoint-compare.md" 2>&1
    python3 scripts/checkpoint_compare.py "$OUT/results-ckpt-bounded.json" \
      "$OUT/results-ckpt-full.json" 2>&1 | tee "$OUT/checkpoint-compare.txt"
  fi
  grep -hE -A4 "Checkpoint with optimizer state|slower while dcp.async_save|Checkpoint saves are" \
    "$OUT"/run-ckpt-*.log | cut -c1-600
  tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
  cp "$OUT"/results-*.json "$OUT"/summary-*.md "$OUT"/checkpoint-compare.* "$FINAL_OUT"/ 2>/dev/null
  exit 0
fi

if [ "$SUITE" = analyze ]; then
  # clusterbench analyze on this machine (issue 40): the input-wait what-if held to a
  # measurement on the GPU (one rank a GPU: the straggler's needs two GPUs), then the reading,
  # attribution and writing of many ranks' traces over this machine's cores.
  # Steps: ANALYZE='whatif scale' (default both); SCALE: trace_scale_ranks.py's arguments.
  awant() { [[ " ${ANALYZE:-whatif scale} " == *" $1 "* ]]; }
  if awant whatif; then
    for d in ${WHATIF_MS:-50 200}; do
      timeout 300 python3 scripts/whatif_check.py --case input --device cuda --delay-ms "$d" \
        --active 12 2>"$OUT/whatif-$d.log" | tee -a "$OUT/whatif.jsonl"
    done
  fi
  if awant scale; then
    # shellcheck disable=SC2086  # SCALE is a list of arguments
    timeout 540 python3 scripts/trace_scale_ranks.py ${SCALE:---ranks 1024 --mb 10 --gzip} \
      --jobs "$(nproc)" 2>&1 | tee "$OUT/scale.txt" | tail -20
  fi
  tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
  cp "$OUT"/whatif.jsonl "$OUT"/scale.txt "$FINAL_OUT"/ 2>/dev/null
  exit 0
fi

if [ "$SUITE" = health ]; then
  # Telemetry, active health and soak (issue 18): the GPU tests of the SDC check and the
  # sampler, the quick suite with telemetry on (its series and summaries), the bf16 GEMM with
  # a sustained warm-up (the software power cap must be named), doctor --fast timed, doctor
  # (Xid, NVLink/PCIe counters), a short soak. Steps: tests quick cap doctor soak.
  hwant() { [[ " ${HEALTH:-tests quick cap doctor soak} " == *" $1 "* ]]; }
  hwant tests && python3 -m pytest tests/gpu -q -m gpu -p no:cacheprovider \
    -k "telemetry or sdc" 2>&1 | tee "$OUT/pytest-gpu.log" | tail -3
  hwant tests && python3 scripts/telemetry_cost.py --nvml --gpu 0 2>&1 | tail -3
  hwant quick && runstep quick 240 --suite quick "$@"
  hwant cap && runstep cap 120 --only gemm --set gemm.dtypes=bf16 --set gemm.warmup_min_s=0.25 "$@"
  if hwant doctor; then
    for i in 1 2 3 4 5; do
      t0=$(date +%s.%N); python3 -m clusterbench doctor --fast >"$OUT/doctor-fast-$i.txt" 2>&1
      rc=$?; echo "doctor --fast $i: exit $rc in $(python3 -c "print(f'{$(date +%s.%N)-$t0:.2f}')") s"
    done
    tail -3 "$OUT/doctor-fast-1.txt"
    timeout 120 python3 -m clusterbench doctor >"$OUT/doctor.txt" 2>&1
    echo "doctor: exit $?"; grep -iE "xid|nvlink|replay|link_errors" "$OUT/doctor.txt" | head -8
  fi
  hwant soak && runstep soak 200 --only gemm,memory --set gemm.dtypes=bf16 --soak 2m "$@"
  tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
  cp "$OUT"/results-*.json "$OUT"/summary-*.md "$FINAL_OUT"/ 2>/dev/null
  for f in "$OUT"/results-*.json; do python3 scripts/validate_table.py "$f"; done 2>&1 | tail -40
  exit 0
fi

python3 -m pytest tests/gpu -q -m gpu -p no:cacheprovider 2>&1 | tee "$OUT/pytest-gpu.log" | tail -5
python3 -m clusterbench info >"$OUT/info.txt" 2>&1

RUN_DIR="/tmp/cb-run-$SUITE-$$"
HIST="$OUT/history.sqlite"
start=$(date +%s.%N)
python3 -m clusterbench run --suite "$SUITE" --out "$RUN_DIR" --baseline builtin \
  --history "$HIST" "$@" >"$OUT/run-$SUITE.log" 2>&1
rc=$?
end=$(date +%s.%N)
cp "$RUN_DIR/results.json" "$OUT/results-$SUITE.json" 2>/dev/null
cp "$RUN_DIR/comparison.json" "$OUT/comparison-builtin.json" 2>/dev/null
cp "$RUN_DIR/summary.md" "$OUT/summary-$SUITE.md" 2>/dev/null
tail -n 70 "$OUT/run-$SUITE.log"
# The run's HTML report and its exports (inside logs.tgz: report-SUITE.html, export-SUITE/)
cp "$RUN_DIR/report.html" "$OUT/report-$SUITE.html" 2>/dev/null
echo "report.html: $(stat -c %s "$RUN_DIR/report.html" 2>/dev/null || echo missing) bytes"
mkdir -p "$OUT/export-$SUITE"
python3 -m clusterbench export "$RUN_DIR" --format csv,prometheus,json-lines \
  -o "$OUT/export-$SUITE" >"$OUT/export.log" 2>&1
echo "export csv,prometheus,json-lines: exit $? ($(ls "$OUT/export-$SUITE" | tr '\n' ' '))"

# Results over time: the Level 1 benchmarks again, compared with the run above (run-to-run
# noise of an honest rerun on this GPU: nothing should come out as a regression).
# RERUNS more runs go into the history; the last is compared with the first without the
# history (the repeats alone) and with it (the run-to-run noise of the runs between).
for i in $(seq 1 "${RERUNS:-4}"); do
  RERUN_DIR="/tmp/cb-rerun-$$-$i"
  python3 -m clusterbench run --suite "$SUITE" --only gemm,memory,transfer --out "$RERUN_DIR" \
    --history "$HIST" "$@" >"$OUT/run-rerun-$i.log" 2>&1
  echo "rerun $i (gemm,memory,transfer): exit $?"
done
python3 -m clusterbench compare "$RUN_DIR" "$RERUN_DIR" --no-history >"$OUT/compare.txt" 2>&1
echo "compare first run -> last rerun, no history: exit $?"
python3 -m clusterbench compare "$RUN_DIR" "$RERUN_DIR" --no-history --json \
  >"$OUT/compare.json" 2>/dev/null
python3 -m clusterbench compare "/tmp/cb-rerun-$$-1" "$RERUN_DIR" --history "$HIST" \
  >"$OUT/compare-history.txt" 2>&1
echo "compare rerun 1 -> last rerun, with the history: exit $?"
python3 -m clusterbench history --history "$HIST" >"$OUT/history.txt" 2>&1
python3 -m clusterbench history --history "$HIST" "gemm.tflops_best[dtype=bf16]" \
  >>"$OUT/history.txt" 2>&1

# Command times on this machine (wall s, three runs each): the commands that read a run and
# doctor --fast (target: 2 s), each a fresh process as a user starts it.
for cmd in "--help" "list" "compare $RUN_DIR $RERUN_DIR --no-history" \
  "report $RUN_DIR -o $OUT/report-again.html" "export $RUN_DIR --format csv -o $OUT/again.csv" \
  "doctor --fast"; do
  times=""
  for i in 1 2 3; do
    t0=$(date +%s.%N); python3 -m clusterbench $cmd >/dev/null 2>&1; rc=$?
    times="$times $(python3 -c "print(f'{$(date +%s.%N)-$t0:.2f}')")"
  done
  echo "command time: clusterbench ${cmd%% /*}:$times s (exit $rc)" | tee -a "$OUT/command-times.txt"
done

# Failure handling over NCCL: rank 1 raises; the run must end with exit 3 naming it.
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  python3 -m clusterbench run --only memory,selftest --set selftest.fail_rank=1 --timeout 60 \
    --set memory.ops=copy --out "/tmp/cb-fail-$$" >"$OUT/run-fail.log" 2>&1
  fail_rc=$?
  echo "planted failure (rank 1 raises): exit $fail_rc -- $(grep 'run failed' "$OUT/run-fail.log")"
fi
echo "clusterbench run --suite $SUITE $*: exit $rc, wall $(python3 -c "print(f'{$end-$start:.1f}')") s"
python3 scripts/validate_table.py "$RUN_DIR/results.json" >"$OUT/table.txt"

# Level 2 at full size (8 GiB), with NCCL's own log; then the same with P2P and SHM disabled,
# which forces traffic onto sockets and must come out far lower and be flagged.
if [ "${LEVEL2:-1}" = 1 ] && [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  python3 -m clusterbench run --only collectives --suite standard --nccl-debug \
    --out /tmp/cb-coll-$$ >"$OUT/run-collectives.log" 2>&1
  echo "collectives (standard, 8 GiB): exit $?"
  python3 scripts/validate_table.py /tmp/cb-coll-$$/results.json >>"$OUT/table.txt"
  cp /tmp/cb-coll-$$/results.json "$OUT/results-collectives.json"
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 python3 -m clusterbench run --only collectives \
    --suite standard --nccl-debug --set collectives.max_bytes=268435456 \
    --set collectives.modes=back_to_back --set collectives.iters=5 \
    --out /tmp/cb-sock-$$ >"$OUT/run-sockets.log" 2>&1
  echo "collectives over sockets (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): exit $?"
  python3 scripts/validate_table.py /tmp/cb-sock-$$/results.json >>"$OUT/table.txt"
  cp /tmp/cb-sock-$$/results.json "$OUT/results-sockets.json"
fi
tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" .
cp "$OUT"/table.txt "$OUT"/results-*.json "$OUT"/compar*.json "$OUT"/compare*.txt \
  "$OUT"/history.txt "$OUT"/command-times.txt "$FINAL_OUT"/ 2>/dev/null
grep -E "^rows:|^compare" "$OUT/run-$SUITE.log" "$OUT"/compare*.txt
cat "$OUT/command-times.txt" 2>/dev/null
cat "$OUT/table.txt"

#!/usr/bin/env bash
# One prepared run on a GPU machine: environment, the GPU tests, roofs (quick and default), then the
# offline proof, the ncu self-check, peers, two profiled applications drawn against the measured roofs,
# and a BENCHMARKS.md fragment. Every step runs under `timeout`, logs to OUTDIR/logs/STEP.log and never
# stops the others; OUTDIR/summary.txt lists step, status, seconds. See docs/device-check.md.
#
#   scripts/device_check.sh OUTDIR             # on the GPU machine, from anywhere (about 8 minutes)
#   scripts/device_check.sh --dry-run OUTDIR   # no GPU: simulator, offline proof, plans and commands only
#
# Environment: PYTHON (default python3), DEVICE_CHECK_BUDGET_S (default 450: the whole run, seconds).
set -u
export LC_NUMERIC=C  # seconds printed with a decimal point

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
if [ $# -ne 1 ] || [ "${1:0:1}" = "-" ]; then
    echo "usage: $0 [--dry-run] OUTDIR" >&2
    exit 2
fi
mkdir -p "$1/logs" || exit 2
OUT=$(cd "$1" && pwd)
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
BUDGET=${DEVICE_CHECK_BUDGET_S:-450}
RESERVE_S=10      # kept back for the fragment at the end
MIN_STEP_S=5      # a step that would get less than this is skipped, not started
KILL_AFTER_S=10   # after SIGTERM at its limit, a step gets this long before SIGKILL
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
FAILED=0

{
    echo "# command: scripts/device_check.sh $([ $DRY = 1 ] && echo '--dry-run ')$OUT"
    echo "# started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), git $(git rev-parse --short HEAD 2>/dev/null || echo unknown), budget ${BUDGET} s"
    printf '# step\tstatus\tseconds\tlimit_s\tcommand\n'
} > "$SUMMARY"

# step NAME LIMIT_S CMD...: run CMD with at most LIMIT_S seconds (less when the budget is short).
step() {
    local name=$1 limit=$2; shift 2
    local left=$(( BUDGET - ($(date +%s) - START) - RESERVE_S ))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt "$MIN_STEP_S" ]; then
        printf '%s\tskipped: budget spent\t0.0\t0\t%s\n' "$name" "$*" >> "$SUMMARY"
        echo "== $name: skipped (budget spent)" >&2
        return 0
    fi
    echo "== $name (limit ${limit} s): $*" >&2
    local t0 t1 rc status
    t0=$(date +%s.%N)
    timeout --kill-after="$KILL_AFTER_S" "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    case $rc in
        0) status=ok ;;
        124|137) status="timeout"; FAILED=1 ;;
        *) status="failed (exit $rc)"; FAILED=1 ;;
    esac
    printf '%s\t%s\t%.1f\t%s\t%s\n' "$name" "$status" "$(awk "BEGIN { print $t1 - $t0 }")" "$limit" "$*" >> "$SUMMARY"
    echo "   $status; log: $OUT/logs/$name.log" >&2
}

# skip NAME WHY: record a step that does not apply here.
skip() {
    printf '%s\tskipped: %s\t0.0\t0\t-\n' "$1" "$2" >> "$SUMMARY"
    echo "== $1: skipped ($2)" >&2
}

has_torch() { "$PY" -c 'import torch, torchvision' > /dev/null 2>&1; }

versions() {
    "$PY" - "$OUT/versions.json" <<'EOF'
import importlib.metadata as md, json, platform, sys
out = {"python": platform.python_version(), "platform": platform.platform()}
for dist in ("cupy-cuda13x", "cupy-cuda12x", "numba", "numba-cuda", "nvidia-ml-py", "torch", "torchvision",
             "numpy", "pandas", "matplotlib", "pytest"):
    try:
        out[dist] = md.version(dist)
    except md.PackageNotFoundError:
        out[dist] = None
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out))
EOF
}

environment() {
    versions || return 1
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi -q > "$OUT/nvidia-smi.txt" || return 1
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,ecc.mode.current,power.limit,temperature.gpu --format=csv
    else
        echo "nvidia-smi: not found"
        [ $DRY = 1 ]
    fi
}

after() {
    nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE,POWER > "$OUT/nvidia-smi-after.txt"
}

# app NAME LAUNCHES APP-ARGS...: profile one application's measured step, then draw it against the roofs.
app() {
    local name=$1 launches=$2; shift 2
    step "$name" 110 "$PY" -m analysis.profile --range --force --out "$OUT/$name" --launch-count "$launches" \
        -- "$PY" "$@"
    if [ -s "$OUT/$name.csv" ] && [ -n "$ROOFS" ]; then
        step "$name-roofline" 40 "$PY" -m analysis.roofline --roofs "$ROOFS" "$OUT/$name.csv" \
            -o "$OUT/$name-roofline.png" --report "$OUT/$name-report.md" --csv "$OUT/$name-kernels.csv" --force
    else
        skip "$name-roofline" "no profile or no roofs file"
    fi
}

# Steps given as shell functions run through `bash -c` (timeout runs programs, not functions).
export OUT PY DRY
export -f versions environment after

# The .ncu-rep reader (NVIDIA's ncu_report module, found through the ncu install) on a real report of a
# small CuPy kernel: until now it was tested only against a stand-in module.
ncu_rep() {
    ncu --clock-control none --launch-count 2 -f -o "$OUT/ncu-rep-check" \
        --metrics dram__bytes_read.sum,gpu__time_duration.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum \
        "$PY" -c 'import cupy; x = cupy.ones(1 << 24, cupy.float32); float((x * 2 + 1).sum())' \
    && "$PY" -m analysis.ncu "$OUT/ncu-rep-check.ncu-rep" --csv "$OUT/ncu-rep-check.csv"
}
export -f ncu_rep

# The FMA peaks with 2 and 4 chains per thread beside the default 8 (roofs.json): the data to choose K.
fma_chains() {
    local k
    for k in 2 4; do
        "$PY" -m ceilings.measure --quick --force --no-plots --only 'fp32.fma:cuda-c,fp64.fma:cuda-c' \
            --fma-chains "$k" --out "$OUT/roofs-chains-$k.json" || return
    done
}
export -f fma_chains

roofs_file() {
    local f
    for f in "$@"; do [ -s "$f" ] && { echo "$f"; return; }; done
    echo ""
}

if [ $DRY = 0 ]; then
    step env 20 bash -c environment
    # The GPU tests and both measurements first: the steps' limits add up to about twice the budget, so
    # the steps at the end are the ones skipped when the earlier ones run long.
    step pytest-gpu 90 "$PY" -m pytest -m gpu -q -p no:cacheprovider
    step measure-quick 60 "$PY" -m ceilings.measure --quick --force --out "$OUT/roofs-quick.json"
    step measure 150 "$PY" -m ceilings.measure --force --out "$OUT/roofs.json"
    ROOFS=$(roofs_file "$OUT/roofs.json" "$OUT/roofs-quick.json")
    step fma-chains 40 bash -c fma_chains
    step inspect 60 "$PY" -m kernels.inspect --arch sm_90 --jobs 8 --json "$OUT/inspect.json"
    step selfcheck 120 "$PY" scripts/ncu_selfcheck.py "$OUT"
    step peers 60 "$PY" scripts/peers.py ${ROOFS:+--roofs "$ROOFS"} "$OUT"
    step ncu-rep 40 bash -c ncu_rep
    # A ResNet-50 training step at batch 64 (bf16 autocast: casts, BN, ReLU and convolutions each launch
    # their own kernels) launches several hundred kernels. 150 replayed launches (cuDNN/CUTLASS kernels, each
    # new one instrumented for the SASS counters: ~0.3-0.5 s apiece) and the torch start-up under ncu keep
    # the step inside its 110 s; they cover most of the forward pass.
    app resnet50 150 scripts/apps/resnet50_step.py --batch 64 --bf16 --channels-last
    # 4 of the 32 layers (eager PyTorch: ~45 kernels each, RMSNorm and rotary are several elementwise
    # kernels apiece) and the LM head fit in 200 launches; every layer launches the same kernels.
    app decode 200 scripts/apps/decode_step.py --layers 4 --batch 4 --context 4096
    step env-after 10 bash -c after
else
    step env 20 bash -c environment
    step measure-simulate 120 "$PY" -m ceilings.measure --simulate --quick --force --no-plots \
        --out "$OUT/roofs-simulated.json"
    ROOFS=$(roofs_file "$OUT/roofs-simulated.json")
    step inspect 240 "$PY" -m kernels.inspect --arch sm_90 --json "$OUT/inspect.json"
    step selfcheck 60 "$PY" scripts/ncu_selfcheck.py --dry-run "$OUT"
    step peers 60 "$PY" scripts/peers.py --dry-run ${ROOFS:+--roofs "$ROOFS"} "$OUT"
    step resnet50-ncu 30 "$PY" -m analysis.profile --dry-run --range --out "$OUT/resnet50" --launch-count 150 \
        -- "$PY" scripts/apps/resnet50_step.py --batch 64 --bf16 --channels-last
    step decode-ncu 30 "$PY" -m analysis.profile --dry-run --range --out "$OUT/decode" --launch-count 200 \
        -- "$PY" scripts/apps/decode_step.py --layers 4 --batch 4 --context 4096
    if has_torch; then
        step resnet50-cpu 120 "$PY" scripts/apps/resnet50_step.py --device cpu --dry-run --bf16 --channels-last
        step decode-cpu 60 "$PY" scripts/apps/decode_step.py --device cpu --dry-run
    else
        skip resnet50-cpu "torch/torchvision not importable"
        skip decode-cpu "torch/torchvision not importable"
    fi
    # the drawing path, on the roofline tests' hand-made profile (no measurement)
    step roofline-fixture 60 "$PY" -m analysis.roofline --roofs tests/data/roofline/roofs.json \
        tests/data/roofline/kernels.csv -o "$OUT/fixture-roofline.png" --report "$OUT/fixture-report.md" --force
fi

printf '# total\t%s s\n' "$(( $(date +%s) - START ))" >> "$SUMMARY"
# The fragment reads summary.txt, so it runs last, on the reserve.
if timeout "$RESERVE_S" "$PY" scripts/benchmarks_md.py "$OUT" > "$OUT/logs/benchmarks-md.log" 2>&1; then
    echo "== wrote $OUT/BENCHMARKS.fragment.md" >&2
else
    echo "== benchmarks_md failed: see $OUT/logs/benchmarks-md.log" >&2
    FAILED=1
fi
cat "$SUMMARY" >&2
exit $FAILED

#!/usr/bin/env bash
# One prepared run on a GPU machine, in priority order: env, the default roofs (tensor, wgmma and cuBLAS
# first), peers, the GPU tests measure does not cover, the ncu probe and a self-check of the kernels that prove
# the roofs, one small application drawn against the measured roofs; then, only if the budget has time left,
# --quick, fma-chains, ResNet-50, the .ncu-rep and .nsys-rep readers. Every step runs under `timeout`, logs
# to OUTDIR/logs/STEP.log and never stops the others; OUTDIR/summary.txt lists step, status, seconds. A step
# whose tool or Python module is missing is skipped with the reason, and when ncu cannot read the GPU's
# counters (probed first, on a tiny kernel) the ncu steps are skipped with ncu's own error and the application
# is profiled with torch.profiler (kernel times) instead. SIGTERM stops the step running (measure then saves
# what it measured) and skips the rest. On the device machine run it through scripts/device_run.sh, which packs
# OUTDIR into the few files that come back. See docs/device-check.md.
#
#   scripts/device_check.sh OUTDIR             # on the GPU machine, from anywhere (about 7 minutes)
#   scripts/device_check.sh --dry-run OUTDIR   # no GPU: simulator, offline proof, plans and commands only
#   scripts/device_check.sh --plan             # the GPU run's steps in order, with their expected H200 seconds
#
# Environment: PYTHON (default python3), DEVICE_CHECK_BUDGET_S (default 450: the whole run, seconds),
# DEVICE_CHECK_TOOL_DIRS (colon-separated folder globs searched for ncu and nsys when PATH has none).
set -u
export LC_NUMERIC=C  # seconds printed with a decimal point

# The GPU run's plan: each step's expected seconds on an H200 (estimates until a run's summary.txt says
# otherwise). PLAN is the priority part, which must fit 420 s (tests/test_device_check_order.py); IF_TIME_LEFT
# runs only on what the budget has left.
declare -A EXPECTED_S=(
    [env]=5 [measure]=160 [peers]=30 [pytest-gpu]=60 [ncu-probe]=10 [selfcheck]=90 [decode]=50
    [decode-roofline]=5 [env-after]=1
    [measure-quick]=45 [fma-chains]=20 [resnet50]=90 [resnet50-roofline]=5 [ncu-rep]=10 [nsys-decode]=30)
PLAN=(env measure peers pytest-gpu ncu-probe selfcheck decode decode-roofline env-after)
IF_TIME_LEFT=(measure-quick fma-chains resnet50 resnet50-roofline ncu-rep nsys-decode)
if [ "${1:-}" = "--plan" ]; then
    for name in "${PLAN[@]}"; do printf '%s\t%s\tplan\n' "$name" "${EXPECTED_S[$name]}"; done
    for name in "${IF_TIME_LEFT[@]}"; do printf '%s\t%s\tif time is left\n' "$name" "${EXPECTED_S[$name]}"; done
    exit 0
fi

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
# nsys ships inside Nsight Compute's install too (host/target-linux-x64), where the device image has it
TOOL_DIRS=${DEVICE_CHECK_TOOL_DIRS-/usr/local/cuda/bin:/opt/nvidia/nsight-compute/*:/opt/nvidia/nsight-compute/*/host/target-linux-x64:/opt/nvidia/nsight-systems/*/bin}
export PYTHONUNBUFFERED=1  # each step's log holds what it printed before a kill
# numba-cuda finds NVVM and libdevice through CUDA_HOME (the device image has the toolkit, no NVVM wheel)
if [ -z "${CUDA_HOME:-}" ] && [ -d /usr/local/cuda ]; then export CUDA_HOME=/usr/local/cuda; fi
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/ceilings-cupy-cache}  # not $HOME, which may be read-only
RESERVE_S=10      # kept back for the fragment at the end
MIN_STEP_S=5      # a step that would get less than this is skipped, not started
KILL_AFTER_S=10   # after SIGTERM at its limit, a step gets this long before SIGKILL
NCU_PROBE_S=30    # the ncu probe: python, CuPy and ncu's start, one kernel replayed
# `python -m ceilings.measure` exits with this when it ran to the end and wrote its roofs file but some
# ceiling is invalid: a result to file an issue about, not a failed step (1 is a crash, 2 a usage error or a
# missing package or GPU, 130 an interrupt).
MEASURE_INVALID_RC=3
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
FAILED=0

{
    echo "# command: scripts/device_check.sh $([ $DRY = 1 ] && echo '--dry-run ')$OUT"
    echo "# started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), git $(git rev-parse --short HEAD 2>/dev/null || echo unknown), budget ${BUDGET} s"
    printf '# step\tstatus\tseconds\tlimit_s\tcommand\n'
} > "$SUMMARY"

# SIGTERM (the device call at its limit, Ctrl-C of a wrapper): pass it to the step running, whose program
# saves what it finished (measure does), and skip the rest; the fragment is still written.
STOPPED=""
STEP_PID=""
on_term() {
    STOPPED=1
    [ -n "$STEP_PID" ] && kill -TERM "$STEP_PID" 2> /dev/null
}
trap on_term TERM

# limited LIMIT_S LOG CMD...: CMD under `timeout`, output to LOG; its exit status. In the background, so
# that the SIGTERM trap runs at once (bash runs a trap only once the foreground command is done).
limited() {
    local limit=$1 log=$2 rc; shift 2
    timeout --kill-after="$KILL_AFTER_S" "$limit" "$@" > "$log" 2>&1 &
    STEP_PID=$!
    wait "$STEP_PID"
    rc=$?
    if [ -n "$STOPPED" ]; then wait "$STEP_PID"; rc=$?; fi  # the trap cut the first wait short
    STEP_PID=""
    return $rc
}

# stopped NAME CMD...: after SIGTERM, record NAME as skipped and succeed; else fail.
stopped() {
    [ -n "$STOPPED" ] || return 1
    local name=$1; shift
    printf '%s\tskipped: stopped by SIGTERM\t0.0\t0\t%s\n' "$name" "$*" >> "$SUMMARY"
    echo "== $name: skipped (stopped by SIGTERM)" >&2
}

# step NAME LIMIT_S CMD...: run CMD with at most LIMIT_S seconds (less when the budget is short).
# RAN_RC=N step ...: exit status N means "ran, some results invalid" (measure's), not a failure.
step() {
    local name=$1 limit=$2; shift 2
    stopped "$name" "$@" && return 0
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
    limited "$limit" "$OUT/logs/$name.log" "$@"
    rc=$?
    t1=$(date +%s.%N)
    if [ -n "$STOPPED" ] && [ $rc -ne 0 ]; then
        status="stopped by SIGTERM (exit $rc)"; FAILED=1
    else
        case $rc in
            0) status=ok ;;
            124|137) status="timeout"; FAILED=1 ;;
            "${RAN_RC:-0}") status="ran: some ceilings invalid (exit $rc)" ;;
            *) status="failed (exit $rc)"; FAILED=1 ;;
        esac
    fi
    printf '%s\t%s\t%.1f\t%s\t%s\n' "$name" "$status" "$(awk "BEGIN { print $t1 - $t0 }")" "$limit" "$*" >> "$SUMMARY"
    echo "   $status; log: $OUT/logs/$name.log" >&2
}

# skip NAME WHY [CMD...]: record a step that does not apply here, and the command it would have run.
skip() {
    local name=$1 why=$2; shift 2
    stopped "$name" "$@" && return 0
    printf '%s\tskipped: %s\t0.0\t0\t%s\n' "$name" "$why" "${*:--}" >> "$SUMMARY"
    echo "== $name: skipped ($why)" >&2
}

# missing_modules MODULE...: the first of these Python modules $PY cannot find, or nothing.
missing_modules() {
    "$PY" -c 'import importlib.util, sys
print(next((m for m in sys.argv[1:] if importlib.util.find_spec(m) is None), ""))' "$@" 2> /dev/null
}

# py_step NAME LIMIT_S "MODULE..." CMD...: step, or skipped naming the Python module that is missing.
py_step() {
    local name=$1 limit=$2 modules=$3 missing; shift 3
    # shellcheck disable=SC2086  # the module list is split on purpose
    missing=$(missing_modules $modules)
    if [ -n "$missing" ]; then
        skip "$name" "Python module $missing is not importable by $PY" "$@"
    else
        step "$name" "$limit" "$@"
    fi
}

# find_tool NAME: on PATH, else in TOOL_DIRS (whose folder then goes on PATH, for the Python steps too).
find_tool() {
    command -v "$1" > /dev/null && return 0
    local globs glob dir
    IFS=: read -r -a globs <<< "$TOOL_DIRS"
    for glob in "${globs[@]}"; do
        for dir in $glob; do  # one folder per installed version
            if [ -x "$dir/$1" ]; then
                export PATH="$dir:$PATH"
                echo "== $1: not on PATH, found in $dir (added to PATH)" >&2
                return 0
            fi
        done
    done
    return 1
}

# Why kernels.inspect cannot run here (cuobjdump, ptxas, NVRTC, found as it finds them), or nothing.
inspect_tools_missing() {
    "$PY" -c 'from common.errors import MissingDependency
from kernels import inspect as insp
try:
    insp.find_tool("cuobjdump"), insp.find_tool("ptxas"), insp._nvrtc()
except MissingDependency as exc:
    print(exc)' 2> /dev/null
}

# ncu_probe: can ncu read this GPU's counters? One counter of one tiny CuPy kernel. Sets NCU_CAUSE to why not
# (ncu's own error line: "Failed to initialize the profiler: LibraryNotLoaded", ERR_NVGPUCTRPERM, ...).
NCU_CAUSE=""
ncu_probe() {
    local log="$OUT/logs/ncu-probe.log" t0=$SECONDS rc status limit=$NCU_PROBE_S
    local cmd=(ncu --clock-control none --launch-count 1 --metrics sm__cycles_elapsed.sum
               "$PY" -c 'import cupy; float(cupy.arange(256, dtype=cupy.float32).sum())')
    stopped ncu-probe "${cmd[*]}" && return 0
    local left=$(( BUDGET - ($(date +%s) - START) - RESERVE_S ))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt "$MIN_STEP_S" ]; then  # the ncu steps after it find the budget spent too
        printf 'ncu-probe\tskipped: budget spent\t0.0\t0\t%s\n' "${cmd[*]}" >> "$SUMMARY"
        echo "== ncu-probe: skipped (budget spent)" >&2
        return 0
    fi
    if ! command -v ncu > /dev/null; then
        NCU_CAUSE="ncu not found on PATH or in ${TOOL_DIRS:-DEVICE_CHECK_TOOL_DIRS}"
    elif [ -n "$(missing_modules cupy)" ]; then  # the probe's kernel; the apps' torch path needs no CuPy
        NCU_CAUSE="not probed: Python module cupy is not importable by $PY"
    else
        echo "== ncu-probe (limit ${limit} s): ${cmd[*]}" >&2
        limited "$limit" "$log" "${cmd[@]}"
        rc=$?
        if [ $rc -ne 0 ] || grep -q '==ERROR==' "$log" || ! grep -Eq 'sm__cycles_elapsed\.sum[^0-9]*[0-9]' "$log"; then
            NCU_CAUSE=$(grep -m1 -E '==ERROR==|ERR_NVGPUCTRPERM|LibraryNotLoaded' "$log" | sed 's/^ *==ERROR== *//')
            [ -n "$NCU_CAUSE" ] || NCU_CAUSE="no counter value in its output (exit $rc; see logs/ncu-probe.log)"
            NCU_CAUSE=$(printf '%s' "$NCU_CAUSE" | tr '\t\r\n' '   ' | cut -c1-200)
        fi
    fi
    if [ -z "$NCU_CAUSE" ]; then
        status=ok
        echo "   ok: ncu reads the counters" >&2
    else
        status="unavailable: $NCU_CAUSE"
        echo "== ncu-probe: ncu cannot read the counters: $NCU_CAUSE" >&2
    fi
    printf '%s\t%s\t%s.0\t%s\t%s\n' ncu-probe "$status" "$((SECONDS - t0))" "$limit" "${cmd[*]}" >> "$SUMMARY"
}

# ncu_step NAME LIMIT_S "MODULE..." CMD...: py_step for a step that needs the counters, else skipped with why.
ncu_step() {
    if [ -n "$NCU_CAUSE" ]; then
        local name=$1; shift 3
        skip "$name" "ncu cannot read the GPU's counters: $NCU_CAUSE" "$@"
    else
        py_step "$@"
    fi
}

# versions.json: the packages, and what the driver, the CUDA runtime, NVRTC, NVVM, cuBLAS and the tools
# report (null where one cannot be asked here; the log says why).
versions() {
    "$PY" - "$OUT/versions.json" <<'EOF'
import importlib.metadata as md, json, platform, re, shutil, subprocess, sys
out = {"python": platform.python_version(), "platform": platform.platform()}
for dist in ("cupy-cuda13x", "cupy-cuda12x", "numba", "numba-cuda", "nvidia-ml-py", "torch", "torchvision",
             "numpy", "pandas", "matplotlib", "pytest", "nvidia-cuda-nvrtc", "nvidia-nvvm", "nvidia-cublas"):
    try:
        out[dist] = md.version(dist)
    except md.PackageNotFoundError:
        out[dist] = None


def ask(key, how):
    try:
        out[key] = str(how())
    except Exception as exc:  # each on its own: no driver must not hide the tools' versions
        out[key] = None
        print(f"{key}: not known here ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})", file=sys.stderr)


def cuda(version):  # 13000 -> "13.0"; 0: no driver
    if not version:
        raise RuntimeError("no CUDA driver (version 0)")
    return f"{version // 1000}.{version % 1000 // 10}"


def driver():
    import pynvml
    pynvml.nvmlInit()
    return pynvml.nvmlSystemGetDriverVersion()


def cupy_runtime():
    from cupy.cuda import runtime
    return cuda(runtime.runtimeGetVersion())


def cupy_driver_api():
    from cupy.cuda import runtime
    return cuda(runtime.driverGetVersion())


def nvrtc():
    from cupy.cuda import nvrtc
    return ".".join(map(str, nvrtc.getVersion()))


def nvvm():
    from numba.cuda.cudadrv.nvvm import NVVM
    return ".".join(map(str, NVVM().get_version()))


def cublas():
    from cupy_backends.cuda.libs import cublas as lib
    return lib.getVersion(lib.create())


def tool(name):
    def version():
        path = shutil.which(name)
        if path is None and name in ("cuobjdump", "ptxas"):
            from kernels.inspect import find_tool  # where kernels.inspect finds them: the wheels too
            path = str(find_tool(name))
        if path is None:
            raise FileNotFoundError(f"{name} not on PATH")
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
        found = re.findall(r"(?i)(?:version |release |\bV)(\d[\w.-]*)", text)  # "V13.0.88", "Version 2025.3.1.0"
        return found[-1] if found else (text.strip().splitlines() or ["?"])[-1]
    return version


for key, how in (("driver (NVML)", driver), ("CUDA driver API", cupy_driver_api), ("CUDA runtime", cupy_runtime),
                 ("NVRTC", nvrtc), ("NVVM (Numba)", nvvm), ("cuBLAS", cublas)):
    ask(key, how)
for name in ("ncu", "nsys", "nvcc", "ptxas", "cuobjdump"):
    ask(name, tool(name))
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
        echo "nvidia-smi: not found (the driver's version is in versions.json, from NVML and CuPy)"
    fi
}

after() {
    nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE,POWER > "$OUT/nvidia-smi-after.txt"
}

# app NAME LAUNCHES "MODULE..." APP-ARGS...: profile one application's measured step, then draw it against the
# roofs. With the counters: ncu on LAUNCHES launches. Without: torch.profiler's kernel times (FLOPs and bytes
# estimated from the operators' shapes), the measured step alone where the app steps an optimizer (steps 0 and 1
# are its two warm-up steps).
app() {
    local name=$1 launches=$2 modules=$3 profile; shift 3
    if [ -z "$NCU_CAUSE" ]; then
        py_step "$name" 110 "$modules" "$PY" -m analysis.profile --range --force --out "$OUT/$name" \
            --launch-count "$launches" -- "$PY" "$@"
        profile="$OUT/$name.csv"
        [ -s "$profile" ] || profile=""
    else
        py_step "$name-torch" 110 "$modules" "$PY" -m analysis.profile --torch --force --out "$OUT/$name-torch" \
            --wait 1 --warmup 1 --active 1 -- "$@" --warmup 2 --no-profiler-range
        profile="$OUT/$name-torch"
        compgen -G "$profile/*.pt.trace.json*" > /dev/null || profile=""
    fi
    if [ -n "$profile" ] && [ -n "$ROOFS" ]; then
        step "$name-roofline" 40 "$PY" -m analysis.roofline --roofs "$ROOFS" "$profile" \
            -o "$OUT/$name-roofline.png" --report "$OUT/$name-report.md" --csv "$OUT/$name-kernels.csv" --force
    else
        skip "$name-roofline" "no profile or no roofs file"
    fi
}

# Steps given as shell functions run through `bash -c` (timeout runs programs, not functions).
export OUT PY DRY MEASURE_INVALID_RC
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

# The decode step's kernels under Nsight Systems (the measured step: its cudaProfilerStart/Stop range), read
# back through `nsys export` by analysis.ncu: the .nsys-rep path, so far tested on hand-made exports only.
nsys_decode() {
    nsys profile --force-overwrite=true --trace=cuda,nvtx --capture-range=cudaProfilerApi \
        --capture-range-end=stop --output="$OUT/decode-nsys" \
        "$PY" scripts/apps/decode_step.py --layers 1 --batch 4 --context 4096 \
    && "$PY" -m analysis.ncu "$OUT/decode-nsys.nsys-rep" --csv "$OUT/decode-nsys.csv"
}
export -f nsys_decode

# The FMA peaks with 2 and 4 chains per thread beside the default 8 (roofs.json): the data to choose K.
fma_chains() {
    local k rc worst=0
    for k in 2 4; do
        "$PY" -m ceilings.measure --quick --force --no-plots --only 'fp32.fma:cuda-c,fp64.fma:cuda-c' \
            --fma-chains "$k" --out "$OUT/roofs-chains-$k.json"
        rc=$?
        [ $rc = 0 ] || [ $rc = "$MEASURE_INVALID_RC" ] || return $rc
        [ $rc = 0 ] || worst=$rc
    done
    return $worst
}
export -f fma_chains

roofs_file() {
    local f
    for f in "$@"; do [ -s "$f" ] && { echo "$f"; return; }; done
    echo ""
}

# kernels.inspect, or skipped with the tool it lacks (cuobjdump, ptxas, NVRTC).
inspect_step() {
    local limit=$1 missing; shift
    missing=$(inspect_tools_missing)
    if [ -n "$missing" ]; then
        skip inspect "$missing" "$@"
    else
        py_step inspect "$limit" "cupy numba" "$@"
    fi
}

# Nsight tools installed off PATH are put on it first: versions.json and every step see the same ones.
find_tool ncu || true
find_tool nsys || true

if [ $DRY = 0 ]; then
    # The plan (PLAN, EXPECTED_S at the top): what proves the roofs comes first, in the order of its worth.
    step env 20 bash -c environment
    RAN_RC=$MEASURE_INVALID_RC py_step measure 180 cupy "$PY" -m ceilings.measure --force --out "$OUT/roofs.json"
    ROOFS=$(roofs_file "$OUT/roofs.json")
    py_step peers 60 cupy "$PY" scripts/peers.py ${ROOFS:+--roofs "$ROOFS"} "$OUT"
    # the GPU tests that measure does not already cover, each under its own limit, named as they run
    py_step pytest-gpu 90 "pytest pytest_timeout cupy" "$PY" -m pytest -m gpu -v --timeout 60 -p no:cacheprovider \
        tests/test_wgmma.py tests/test_clock.py tests/test_library.py tests/test_tensor.py \
        tests/test_stream.py::test_oversubscribed_grid_runs_its_declared_waves_on_gpu
    ncu_probe
    # the kernels whose declared work turns times into the roofs: DRAM (CUDA C), FP32/FP64 FMA, mma.sync, wgmma
    ncu_step selfcheck 120 cupy "$PY" scripts/ncu_selfcheck.py \
        --only 'dram.*:cuda-c,fp32.fma:cuda-c,fp64.fma:cuda-c,tensor.*:cuda-c,wgmma.*' "$OUT"
    # one layer (eager PyTorch: ~45 kernels, RMSNorm and rotary several elementwise kernels apiece) and the
    # LM head fit in 100 launches
    app decode 100 torch scripts/apps/decode_step.py --layers 1 --batch 4 --context 4096
    step env-after 10 bash -c after
    # Only if the budget has time left (IF_TIME_LEFT).
    RAN_RC=$MEASURE_INVALID_RC py_step measure-quick 60 cupy \
        "$PY" -m ceilings.measure --quick --force --out "$OUT/roofs-quick.json"
    RAN_RC=$MEASURE_INVALID_RC py_step fma-chains 40 cupy bash -c fma_chains
    # A ResNet-50 training step at batch 64 (bf16 autocast: casts, BN, ReLU and convolutions each launch
    # their own kernels) launches several hundred kernels. 150 replayed launches (cuDNN/CUTLASS kernels, each
    # new one instrumented for the SASS counters: ~0.3-0.5 s apiece) and the torch start-up under ncu keep
    # the step inside its 110 s; they cover most of the forward pass.
    ROOFS=$(roofs_file "$OUT/roofs.json" "$OUT/roofs-quick.json")
    app resnet50 150 "torch torchvision" scripts/apps/resnet50_step.py --batch 64 --bf16 --channels-last
    ncu_step ncu-rep 40 cupy bash -c ncu_rep
    if command -v nsys > /dev/null; then
        py_step nsys-decode 60 torch bash -c nsys_decode
    else
        skip nsys-decode "nsys not found on PATH or in ${TOOL_DIRS:-DEVICE_CHECK_TOOL_DIRS}" bash -c nsys_decode
    fi
else
    step env 20 bash -c environment
    RAN_RC=$MEASURE_INVALID_RC py_step measure-simulate 120 numba "$PY" -m ceilings.measure --simulate --quick \
        --force --no-plots --out "$OUT/roofs-simulated.json"
    ROOFS=$(roofs_file "$OUT/roofs-simulated.json")
    inspect_step 240 "$PY" -m kernels.inspect --arch sm_90 --json "$OUT/inspect.json"
    step selfcheck 60 "$PY" scripts/ncu_selfcheck.py --dry-run "$OUT"
    step peers 60 "$PY" scripts/peers.py --dry-run ${ROOFS:+--roofs "$ROOFS"} "$OUT"
    step resnet50-ncu 30 "$PY" -m analysis.profile --dry-run --range --out "$OUT/resnet50" --launch-count 150 \
        -- "$PY" scripts/apps/resnet50_step.py --batch 64 --bf16 --channels-last
    step decode-ncu 30 "$PY" -m analysis.profile --dry-run --range --out "$OUT/decode" --launch-count 100 \
        -- "$PY" scripts/apps/decode_step.py --layers 1 --batch 4 --context 4096
    py_step resnet50-cpu 120 "torch torchvision" "$PY" scripts/apps/resnet50_step.py --device cpu --dry-run --bf16 \
        --channels-last
    py_step decode-cpu 60 torch "$PY" scripts/apps/decode_step.py --device cpu --dry-run
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

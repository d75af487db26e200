"""Special-function unit ceilings: sfu.ex2, sfu.rsqrt, sfu.sin, in MUFU results per second (CUDA C).

The ceiling softmax (exp = ex2 of x log2 e) and activations (tanh, sigmoid, GELU) hit before FP32 does: the
SFU returns 16 results per clock per SM (`kernels.arch`, 4 per sub-partition) against 128 FP32 FMAs. Each
thread runs CHAINS independent chains x <- f(x) (kernels/cuda/sfu.cu), every step one MUFU instruction that
`kernels.inspect` counts (MUFU.EX2, MUFU.RSQ, MUFU.SIN); the chains contract to a fixed point the check
knows. Importing this module imports no CUDA package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .arch import arch_units
from .base import Benchmark, CudaSource, DeviceLimits, Plan, Prepared, Runtime, Work, launch_dims
from .fma import NOMINAL_CLOCK_HZ, SIZING_ARCH, TARGET_LAUNCH_S
from .stream import resident_blocks

BLOCK = 256
BLOCKS_PER_SM = 8  # the SM's 2048 threads: 16 warps per scheduler keep its MUFU busy (<= 32 registers each)
CHAINS = 4  # independent chains per thread: more results in flight than the MUFU's latency needs
UNROLL = 8  # steps per chain per trip of the rolled loop
# Start values: chain c of thread t starts at START + (t mod START_SPREAD + c) x START_STEP, all in (0, pi)
# (2 sin x has a repelling fixed point at 0 and the attracting one at 1.8955; 1/sqrt x needs x > 0) and all
# more than CHECK_TOLERANCE away from every fixed point after a single step, so a chain that did not run fails.
START, START_STEP, START_SPREAD = 2.25, 0.0625, 8
# A chain within this relative distance of its fixed point has converged: the MUFU's approximation error
# (2^-22 relative for ex2 and rsqrt, 2^-20.9 absolute for sin: PTX ISA, ex2/rsqrt/sin.approx) moves the fixed
# point of the approximate f by that error / (1 - |f'|), well inside it.
CHECK_TOLERANCE = 1e-4
# Each function contracts by |f'| <= 0.65 near its fixed point: 0.65^MIN_STEPS is far below CHECK_TOLERANCE.
MIN_STEPS = 64


@dataclass(frozen=True)
class Function:
    name: str  # ex2 | rsqrt | sin: the Work.special key (kernels.sass.SPECIAL_FUNCTIONS)
    index: int  # FN of sfu.cu's step<FN>
    fixed_point: float  # of f, in exact arithmetic
    fp32_flops: int  # FP32 FLOPs per step besides the MUFU: sin's FMUL.RZ by 1/(2 pi) and its doubling FADD
    what: str


def _fixed_point(f, x: float) -> float:
    for _ in range(200):  # float64 iteration of a contraction: converged to the last bit
        x = f(x)
    return x


FUNCTIONS = {fn.name: fn for fn in (
    # ex2's negation is an FADD from -RZ: a move, no FLOP (kernels.sass)
    Function("ex2", 0, _fixed_point(lambda x: 2.0**-x, 1.0), 0,
             "x <- 2^-x (ex2.approx.ftz: MUFU.EX2; __expf and softmax's exp are an FMUL and this)"),
    Function("rsqrt", 1, 1.0, 0, "x <- 1/sqrt(x) (rsqrt.approx.ftz: MUFU.RSQ; rsqrtf, RMSNorm and LayerNorm)"),
    Function("sin", 2, _fixed_point(lambda x: 2.0 * math.sin(x), 1.0), 2,
             "x <- 2 sin x (sin.approx.ftz: FMUL.RZ by 1/(2 pi) then MUFU.SIN; __sinf)"),
)}


def plan(fn: Function, limits: DeviceLimits, quick: bool) -> Plan:
    """One grid that fills every SM, sized to run ~TARGET_LAUNCH_S at NOMINAL_CLOCK_HZ (the same in quick)."""
    del quick
    if limits.simulate:
        raise ValueError("the SFU kernels are CUDA C: no simulator plan")
    blocks_per_sm = resident_blocks(limits, BLOCK, BLOCKS_PER_SM)
    grid = launch_dims(limits, BLOCK, blocks_per_sm)
    threads = grid * BLOCK
    major, minor = limits.compute_capability
    lanes = (arch_units(f"{major}.{minor}") or arch_units(SIZING_ARCH)).sfu_lanes
    per_thread = TARGET_LAUNCH_S * NOMINAL_CLOCK_HZ * lanes * limits.sm_count / threads
    trips = max(math.ceil(MIN_STEPS / UNROLL), round(per_thread / (CHAINS * UNROLL)))
    steps = threads * CHAINS * UNROLL * trips
    work = Work(bytes_read=threads * CHAINS * 4, bytes_written=threads * CHAINS * 4,
                flops={"fp32": steps * fn.fp32_flops} if fn.fp32_flops else {}, special={fn.name: steps})
    return Plan(grid=grid, block=BLOCK, work=work, loop_trips=trips,
                params={"function": fn.name, "chains": CHAINS, "unroll": UNROLL, "trips": trips,
                        "blocks_per_sm": blocks_per_sm})


def source(fn: Function, plan: Plan) -> CudaSource:
    return CudaSource("sfu.cu", f"sfu<{fn.index}, {CHAINS}, {UNROLL}, {plan.params['blocks_per_sm']}>")


def start_values(threads: int) -> np.ndarray:
    """(CHAINS, threads) float32 start values (START ...), chain c of thread t at [c, t]."""
    t = np.arange(threads) % START_SPREAD
    return (START + (t[None, :] + np.arange(CHAINS)[:, None]) * START_STEP).astype(np.float32)


def converged(fn: Function, got: np.ndarray) -> str | None:
    """None when every chain sits at f's fixed point (NaN never does), else how many do not and the first."""
    off = ~(np.abs(got.astype(np.float64) / fn.fixed_point - 1) <= CHECK_TOLERANCE)
    if not off.any():
        return None
    i = int(np.argmax(off.reshape(-1)))
    return (f"sfu.{fn.name}: {int(off.sum())} of {got.size} chains not at the fixed point {fn.fixed_point:.6g} of "
            f"{fn.what.split(' (')[0]} (first: value {i} is {got.reshape(-1)[i]!r})")


def prepare(fn: Function, plan: Plan, runtime: Runtime) -> Prepared:
    import cupy

    kernel = runtime.cuda_function(source(fn, plan))
    stream = runtime.cupy_stream
    with stream:
        x = cupy.asarray(start_values(plan.threads))

    def launch() -> None:
        with stream:
            kernel((plan.grid,), (plan.block,), (x, np.int32(plan.params["trips"])))

    def poison() -> None:  # the start values: no fixed point, so a launch that did not run is seen
        with stream:
            x.set(start_values(plan.threads), stream=stream)

    def check() -> str | None:
        got = x.get(stream=stream)
        stream.synchronize()
        return converged(fn, got)

    return Prepared(launch=launch, poison=poison, check=check)


BENCHMARKS = [
    Benchmark(name=f"sfu.{fn.name}", backend="cuda-c", kind="special", kernel=f"sfu<{fn.name}>",
              description=f"{fn.what}: {CHAINS} chains x {UNROLL} steps per trip per thread, {BLOCK}-thread "
                          f"blocks x {BLOCKS_PER_SM} per SM; MUFU results per second",
              plans=lambda limits, quick, fn=fn: [plan(fn, limits, quick)],
              prepare=lambda p, runtime, fn=fn: prepare(fn, p, runtime),
              source=lambda p, fn=fn: source(fn, p),
              precision="fp32", pipe="sfu", peak_key="sfu", group="special")
    for fn in FUNCTIONS.values()
]

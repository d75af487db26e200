"""Peak multiply-add throughput of the CUDA cores: fp64, fp32, packed fp16x2 / bf16x2 and int32, in CUDA C and
Numba (docs/compute.md explains the design and what the SASS shows).

Each thread runs K independent chains x <- x * a + c, N FMAs per chain written out at compile time, inside
one runtime loop of `trips` iterations; a, c and `trips` are kernel arguments. The timed launches use
a = -1, c = 3 (the value alternates between its start and 3 - start: bounded for any trip count) and store
nothing (a run-time flag guards the store). `check()` runs the same binary once more with a = 1, c = 1/64
(int32: 1), CHECK_TRIPS trips and the store on: every chain must end at start + steps x c, bit for bit (exact
in every precision), so a dropped loop, a shortened chain or a wrong trip count is caught, not only a wrong
FMA.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from .arch import arch_units
from .base import Benchmark, CudaSource, DeviceLimits, NumbaSource, Plan, Prepared, Runtime, Work, launch_dims

BLOCK = 256  # 8 blocks of 256 fill the 2048 threads of an Ampere/Hopper SM; a power of two (shift indexing)
SIM_BLOCK = 32
MAX_CHAINS = 16  # the start values vary in 6 mantissa bits: (4k + lane) < 64
# K that `with_chains` offers: every plan proven by kernels.inspect at sm_80/89/90 for all five lanes and both
# backends (at most 36 registers: 8 blocks of 256 per SM fit). From K = 10-11 fp64 needs 40-58 registers (a
# second, partial wave); at K = 1 NVVM unrolls the Numba trip loop by 2.
MIN_TUNED_CHAINS, MAX_TUNED_CHAINS = 2, 8
TARGET_LAUNCH_S = 2e-3  # long enough to time with CUDA events, short enough to repeat
NOMINAL_CLOCK_HZ = 1.7e9  # only sizes the launch; the harness measures the real time
SIM_TRIPS = 3
SIM_UNROLL = 3
CHECK_TRIPS = 2  # the check launch: 2 x N FMAs per chain (N <= 64: start + 128/64 stays exact in bf16)
SIM_CHAINS = 4

# Chains per thread (K) and FMAs per chain per loop trip (N), per architecture. K: an SM sub-partition
# issues one warp instruction per clock and FFMA/HFMA2 latency is ~4 clocks (DFMA ~8 on Hopper), so a
# scheduler needs >= 4 independent instructions in flight; 16 resident warps per scheduler give that from
# threads alone at full occupancy, and K = 8 independent chains per warp make it hold at any occupancy and
# let ptxas interleave the chains (microbenchmark studies of Ampere/Hopper reach peak FFMA with ILP >= 4).
# 8 chains x 2 registers of fp64 still fit the 32 registers/thread of full occupancy. N: K x N = 512 FMAs
# per trip against 3-5 loop instructions (counter, compare, branch): < 1% of the issue slots.
CHAINS = {"sm_80": 8, "sm_90": 8}
UNROLL = {"sm_80": 64, "sm_90": 64}
DEFAULT_ARCH = "sm_90"

SIZING_ARCH = "9.0"  # whose unit table sizes launches on an architecture ceilings.peaks does not know


@dataclass(frozen=True)
class Lane:
    """One precision: the instruction under test and how its raw bits encode values."""

    lane: str  # kernel lane name: fp64 | fp32 | fp16x2 | bf16x2 | int32
    ceiling: str
    precision: str  # Work.flops key and the roofs file's precision
    cuda_type: str  # fma.cu Lane<T>
    flops_per_instr: int  # per thread-instruction: FMA 2, packed pair 4, IMAD 2
    bits: type  # numpy raw-bits dtype
    a: int  # bits of the multiplier of the timed launches (-1)
    c: int  # bits of their addend (x -> c - x alternates)
    one: int  # bits of 1: the check launch's multiplier
    delta: int  # bits of the check launch's addend: start + steps x delta is exact
    seed: int  # bits of the first start value
    shift: int  # where the 6 varying bits go: just below the top of the (low lane's) mantissa
    sass: str  # the SASS opcode family counted by the tests

    def decode(self, raw: np.ndarray) -> np.ndarray:
        """Values of raw bits (packed pairs: one value per lane, low lane first)."""
        raw = np.ascontiguousarray(raw, dtype=self.bits)
        if self.lane == "fp16x2":
            return raw.view(np.float16)
        if self.lane == "bf16x2":  # bf16 is the high half of a float32
            return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return raw.view({"fp64": np.float64, "fp32": np.float32, "int32": np.int32}[self.lane])

    def encode(self, values: np.ndarray) -> np.ndarray:
        if self.lane == "bf16x2":
            return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(self.bits)
        return np.ascontiguousarray(values).view(self.bits)

    def value(self, raw: int) -> np.ndarray:
        """The lane values of one raw word (one element; two for packed pairs)."""
        return self.decode(np.array([raw], self.bits))


LANES = {  # check addend: 2^-6 (int32: 1)
    "fp64": Lane("fp64", "fp64.fma", "fp64", "double", 2, np.uint64, 0xBFF0000000000000, 0x4008000000000000,
                 0x3FF0000000000000, 0x3F90000000000000, 0x3FF0000000000000, 52 - 6, "DFMA"),
    "fp32": Lane("fp32", "fp32.fma", "fp32", "float", 2, np.uint32,
                 0xBF800000, 0x40400000, 0x3F800000, 0x3C800000, 0x3F800000, 23 - 6, "FFMA"),
    # fp16x2: lanes (1.0, 1.5); a = (-1, -1), c = (3, 3)
    "fp16x2": Lane("fp16x2", "fp16x2.fma", "fp16", "F16x2", 4, np.uint32,
                   0xBC00BC00, 0x42004200, 0x3C003C00, 0x24002400, 0x3E003C00, 10 - 6, "HFMA2"),
    "bf16x2": Lane("bf16x2", "bf16x2.fma", "bf16", "BF16x2", 4, np.uint32,
                   0xBF80BF80, 0x40404040, 0x3F803F80, 0x3C803C80, 0x3FC03F80, 7 - 6, "HFMA2"),
    # int32: c = 1000 keeps 1000 - x positive (start values 1..64)
    "int32": Lane("int32", "int32.mad", "int32", "int", 2, np.uint32, 0xFFFFFFFF, 1000, 1, 1, 1, 0, "IMAD"),
}


def start_bits(lane: Lane, chains: int, threads: int) -> np.ndarray:
    """Raw start value of chain k of global thread g, shape (K, threads): seed + ((4k + (g & 3)) << shift)."""
    vary = (np.arange(chains)[:, None] << 2) | (np.arange(threads)[None, :] & 3)
    return (lane.seed + (vary.astype(np.uint64) << np.uint64(lane.shift))).astype(lane.bits)


def reference(lane: Lane, chains: int, threads: int, steps: int) -> np.ndarray:
    """Every chain after `steps` FMAs of the check launch (x -> x * 1 + delta): start + steps x delta.
    Exact: starts are 1 + k/64 (k < 64) or 1.5, deltas 2^-6, so every partial sum below 4 is a multiple of
    2^-6 that bf16 (spacing 2^-6 in [2, 4)) and wider types hold; the tests check this against stepping."""
    values = lane.decode(start_bits(lane, chains, threads))
    delta = lane.value(lane.delta)[0]  # the same in both halves of a packed pair
    total = (values + delta * values.dtype.type(steps)).astype(values.dtype)
    return lane.encode(total).reshape(chains, threads)


def _arch(limits: DeviceLimits) -> str:
    return limits.arch if limits.arch in CHAINS else DEFAULT_ARCH


def instructions_per_clock(lane: Lane, limits: DeviceLimits) -> float:
    """Multiply-add thread-instructions per clock per SM, from the per-architecture unit table (only sizes
    the launch; the harness measures the real time)."""
    major, minor = limits.compute_capability
    units = arch_units(f"{major}.{minor}") or arch_units(SIZING_ARCH)
    packed = units.bf16_flop_per_clk if lane.lane == "bf16x2" else units.fp16_flop_per_clk
    return {"fp64": units.fp64_lanes, "fp32": units.fp32_lanes, "int32": units.int32_mad_lanes,
            "fp16x2": units.fp16_flop_per_clk / 4, "bf16x2": (packed or units.fp16_flop_per_clk) / 4}[lane.lane]


def _trips(lane: Lane, limits: DeviceLimits, threads: int, chains: int, unroll: int) -> int:
    rate = instructions_per_clock(lane, limits)
    instructions = TARGET_LAUNCH_S * NOMINAL_CLOCK_HZ * rate * limits.sm_count
    return max(1, round(instructions / (threads * chains * unroll)))


def plans(lane: Lane, limits: DeviceLimits, quick: bool, chains: int | None = None) -> list[Plan]:
    """One plan: a grid that fills every SM; the same in quick mode (one launch is ~2 ms). `chains`: K, else
    the architecture's default."""
    del quick
    block = SIM_BLOCK if limits.simulate else BLOCK
    grid = launch_dims(limits, block)
    threads = grid * block
    if limits.simulate:
        chains, unroll, trips = SIM_CHAINS, SIM_UNROLL, SIM_TRIPS
    else:
        chains, unroll = chains or CHAINS[_arch(limits)], UNROLL[_arch(limits)]
        trips = _trips(lane, limits, threads, chains, unroll)
    flops = threads * trips * chains * unroll * lane.flops_per_instr  # no work outside the loop
    return [Plan(grid=grid, block=block, loop_trips=trips,
                 work=Work(flops={lane.precision: flops}),
                 params={"chains": chains, "unroll": unroll, "trips": trips, "grid": grid, "block": block,
                         "lane": lane.lane})]


def _log2_block(plan: Plan) -> int:
    log2 = plan.block.bit_length() - 1
    if plan.block != 1 << log2:
        raise ValueError(f"block {plan.block} is not a power of two (the kernels index with shifts)")
    return log2


def cuda_source(lane: Lane, plan: Plan) -> CudaSource:
    p = plan.params
    return CudaSource("fma.cu", f"fma_peak<{lane.cuda_type}, {p['chains']}, {p['unroll']}, {_log2_block(plan)}>")


def numba_source(lane: Lane, plan: Plan) -> NumbaSource:
    from . import numba_fma

    p = plan.params
    return NumbaSource(numba_fma.fma_kernel(lane.lane, p["chains"], p["unroll"], _log2_block(plan)),
                       numba_fma.signature(lane.lane))


def _poison_value(lane: Lane):
    return lane.bits(np.iinfo(lane.bits).max)  # NaN in every float lane; -1 for int32 (values are > 0)


def _compare(lane: Lane, plan: Plan, got: np.ndarray) -> str | None:
    p = plan.params
    want = reference(lane, p["chains"], plan.threads, CHECK_TRIPS * p["unroll"])
    got = got.reshape(want.shape)
    bad = np.argwhere(got != want)
    if bad.size == 0:
        return None
    k, g = bad[0]
    return (f"{lane.ceiling}: {len(bad)} of {want.size} chain results wrong; chain {k} of thread {g} is "
            f"0x{int(got[k, g]):x}, expected 0x{int(want[k, g]):x}")


def _scalar_args(lane: Lane, plan: Plan, value_type, check: bool) -> tuple:
    """Kernel arguments after `out`: a, c (as `value_type`), seed, shift, trips, store flag."""
    a, c, trips = (lane.one, lane.delta, CHECK_TRIPS) if check else (lane.a, lane.c, plan.params["trips"])
    return (value_type(a), value_type(c), lane.bits(lane.seed), np.int32(lane.shift), np.int32(trips),
            np.int32(check))


def prepare_cuda(lane: Lane, plan: Plan, runtime: Runtime) -> Prepared:
    import cupy

    source = cuda_source(lane, plan)
    kernel = runtime.cuda_function(source)
    out = cupy.empty(plan.params["chains"] * plan.threads, dtype=lane.bits)

    def run(check: bool) -> None:
        with runtime.cupy_stream:
            kernel((plan.grid,), (plan.block,), (out, *_scalar_args(lane, plan, lane.bits, check)))

    def poison() -> None:
        with runtime.cupy_stream:
            out.fill(_poison_value(lane))

    def check() -> str | None:
        poison()
        run(True)
        runtime.cupy_stream.synchronize()
        return _compare(lane, plan, cupy.asnumpy(out))

    def release() -> None:
        nonlocal out
        del out

    return Prepared(launch=partial(run, False), poison=poison, check=check, release=release)


def _numba_value_type(lane: Lane):
    """How a and c are passed to the Numba kernel: as values for fp64/fp32/int32, as raw bits when packed."""
    views = {"fp64": np.float64, "fp32": np.float32, "int32": np.int32}
    if lane.lane not in views:
        return lane.bits
    return lambda raw: np.array([raw], lane.bits).view(views[lane.lane])[0]


def prepare_numba(lane: Lane, plan: Plan, runtime: Runtime) -> Prepared:
    from numba import cuda

    source = numba_source(lane, plan)
    kernel = runtime.numba_kernel(source)
    stream = runtime.numba_stream()
    size = plan.params["chains"] * plan.threads
    out = cuda.device_array(size, dtype=lane.bits, stream=stream)
    value_type = _numba_value_type(lane)

    def run(check: bool) -> None:
        kernel[plan.grid, plan.block, stream](out, *_scalar_args(lane, plan, value_type, check))

    def poison() -> None:
        out.copy_to_device(np.full(size, _poison_value(lane), dtype=lane.bits), stream=stream)

    def check() -> str | None:
        poison()
        run(True)
        got = out.copy_to_host(stream=stream)
        stream.synchronize()
        return _compare(lane, plan, got)

    return Prepared(launch=partial(run, False), poison=poison, check=check)


def _benchmark(lane: Lane, backend: str, chains: int | None = None) -> Benchmark:
    packed = lane.flops_per_instr == 4
    notes = ("packed pair: 4 FLOPs per HFMA2 (2 lanes x FMA)",) if packed else ()
    if backend == "numba" and packed:
        notes += (("numba-cuda has no half2/bfloat162 type and its scalar fp16/bf16 FMAs are non-inlined shim "
                   "calls; this kernel keeps the pair in a uint32 and issues fma.rn.f16x2/bf16x2 through an "
                   "inline-PTX Numba intrinsic (the same HFMA2 as CUDA C)"),)
    if lane.lane == "int32":
        notes += ("int32 multiply-add counted as 2 ops (IMAD), reported in FLOP/s for uniformity",)
    cuda_c = backend == "cuda-c"
    return Benchmark(
        name=lane.ceiling, backend=backend, kind="compute",
        kernel=f"fma_peak<{lane.cuda_type}>" if cuda_c else f"numba_fma_peak_{lane.lane}",
        description=(f"{lane.ceiling}: K independent chains of {lane.sass} per thread in registers, one "
                     f"runtime loop with K x N unrolled FMAs, no memory traffic while timed"),
        plans=partial(plans, lane, chains=chains),
        prepare=partial(prepare_cuda if cuda_c else prepare_numba, lane),
        source=partial(cuda_source if cuda_c else numba_source, lane),
        precision=lane.precision, pipe="cuda-core", peak_key=lane.precision, group="compute",
        simulable=not cuda_c, notes=notes)


BENCHMARKS = [_benchmark(lane, backend) for backend in ("cuda-c", "numba") for lane in LANES.values()]


def with_chains(bench: Benchmark, chains: int) -> Benchmark:
    """`bench` with K = `chains` independent chains per thread if it is one of these FMA benchmarks (to find
    the K that reaches the peak on a new architecture); any other benchmark unchanged."""
    if not MIN_TUNED_CHAINS <= chains <= MAX_TUNED_CHAINS:
        raise ValueError(f"{chains} chains per thread: choose {MIN_TUNED_CHAINS} to {MAX_TUNED_CHAINS} (more "
                         "need more registers than 8 blocks of 256 per SM leave; 1 lets NVVM unroll the Numba loop)")
    lane = next((lane for lane in LANES.values() if lane.ceiling == bench.name), None)
    if bench not in BENCHMARKS or lane is None:
        return bench
    return _benchmark(lane, bench.backend, chains)

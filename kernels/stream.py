"""DRAM bandwidth ceilings: dram.read, dram.write, dram.copy, dram.triad, dram.dot, in CUDA C and in Numba.

Every kernel streams float32 arrays sized to exactly `trips` chunks of grid x block x unroll accesses
(no tail, no bounds test): each thread runs one trip loop of `trips` iterations holding `unroll` loads
and/or stores per array, so the declared bytes are elements x 4 B x arrays and `Plan.loop_trips` is the
trip count. Arrays are >= 8x L2 and >= 1 GiB each when free memory allows (docs/bandwidth.md), in --quick
too. Each operation comes in launch variants (`Variant`): one wave of blocks, an oversubscribed grid of
several waves, and more bytes in flight per SM; every variant is its own ceiling, and the best valid one
is the DRAM roof (`ceilings.roofs.RoofsRecord.best`).
Importing this module imports no CUDA package: cupy and numba are imported when a benchmark is prepared.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .base import (
    REGISTERS_PER_SM,
    Benchmark,
    CudaSource,
    DeviceLimits,
    NumbaSource,
    Plan,
    Prepared,
    Runtime,
    Work,
    format_bytes,
    launch_dims,
)
from .stream_shape import BLOCK, NUMBA_UNROLL

ELEMENT_BYTES = 4  # float32
VECTOR_ELEMENTS = 4  # CUDA C accesses are float4: 16 bytes (LDG.E.128 / STG.E.128)
# Sizes. Each array is at least DRAM_L2_MULTIPLE x L2 (so L2 hits are a few percent at most, also between
# back-to-back launches) and DRAM_MIN_ARRAY_BYTES, in --quick as in a full run; all arrays of one benchmark
# together use at most FREE_FRACTION of free memory (a plan that had to shrink says so in its notes).
DRAM_L2_MULTIPLE = 8
DRAM_MIN_ARRAY_BYTES = 2**30
FREE_FRACTION = 0.5
SIM_BLOCK = 64  # on the simulator: 4 blocks of 64 threads (SIM_MAX_THREADS), 2 trips
SIM_TRIPS = 2

# An oversubscribed grid runs this many waves of resident blocks: a block streams an eighth of what a block
# of one wave would, and each new block starts on whichever SM has just freed a slot, so an SM that runs
# slow takes fewer blocks instead of setting the end alone (the hardware scheduler balances the load).
OVERSUBSCRIBED_WAVES = 8


@dataclass(frozen=True)
class Variant:
    """How a DRAM kernel is launched: blocks of BLOCK threads per SM, waves of them, and how many accesses
    per array each thread makes per trip (the bytes in flight per SM: blocks x BLOCK x loads x access size)."""

    name: str  # wave | waves | deep
    waves: int  # grid = waves x SMs x blocks per SM
    blocks_per_sm: Mapping[str, int]  # by op; fewer where the SM holds fewer threads (resident_blocks)
    unroll: Mapping[str, int]  # accesses per array per thread per trip, by op
    what: str  # for the description
    by_arch: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # blocks_per_sm exceptions

    def blocks(self, op: str, arch: str) -> int:
        return self.by_arch.get(arch, {}).get(op, self.blocks_per_sm[op])


def _each(value: int) -> dict[str, int]:
    return {op: value for op in ("read", "write", "copy", "triad", "dot")}


# CUDA C. Little's law for H200's HBM3e (docs/bandwidth.md): ~4.8 TB/s / 132 SMs / 1.98 GHz ~ 18 B per
# clock per SM, times ~650 cycles of DRAM latency ~ 12 KiB in flight per SM; every variant keeps 10-16x
# that at its peak, because a thread's loads are in flight only until the last of its trip returns and
# latency grows under load. __launch_bounds__(256, blocks) caps registers so the planned blocks fit:
#   wave   4 blocks x 8 loads (triad, dot: 4 per array): 128 KiB per SM, the grid one wave (each SM a fixed
#          share);
#   waves  8 blocks x 4 loads, the full 2048 threads, so exactly 8 fit (<= 32 registers) and the grid is
#          exactly OVERSUBSCRIBED_WAVES waves: 128 KiB per SM, balanced by the block scheduler;
#   deep   3 blocks x 16 loads (<= 85 registers; ptxas gives 78-80): 192 KiB per SM, one wave.
CUDA_VARIANTS = (
    Variant("wave", 1, _each(4), {"read": 8, "write": 8, "copy": 8, "triad": 4, "dot": 4},
            "one wave of 4 blocks per SM, 8 float4 in flight per thread"),
    Variant("waves", OVERSUBSCRIBED_WAVES, _each(8), {"read": 4, "write": 4, "copy": 4, "triad": 2, "dot": 2},
            f"{OVERSUBSCRIBED_WAVES} waves of 8 blocks per SM (grid-stride), 4 float4 in flight per thread"),
    Variant("deep", 1, _each(3), {"read": 16, "write": 16, "copy": 16, "triad": 8, "dot": 8},
            "one wave of 3 blocks per SM, 16 float4 in flight per thread"),
)

NUMBA_VARIANTS = (
    # ptxas gives the Numba triad 94 registers on sm_80 (40 on sm_89/sm_90): capped at 64 for 4 blocks it
    # spills inside the loop, so it runs 2 blocks per SM there
    Variant("wave", 1, {"read": 8, "write": 8, "copy": 4, "triad": 4, "dot": 4}, NUMBA_UNROLL,
            "one wave", by_arch={"sm_80": {"triad": 2}}),
    # Several waves need exactly the planned blocks resident (kernels.inspect proves ceil(grid / (SMs x
    # blocks that fit)) = waves), so each kernel gets the blocks its registers under the cap allow and no more:
    # read, write, dot fit in 32 (8 blocks, the SM's 2048 threads); copy spills at 32 and takes 39 of 40
    # (6 blocks); triad spills at 40 and takes 54-56 of 64 (4 blocks), 109 of 128 on sm_80 (2 blocks).
    Variant("waves", OVERSUBSCRIBED_WAVES, {"read": 8, "write": 8, "copy": 6, "triad": 4, "dot": 8}, NUMBA_UNROLL,
            f"{OVERSUBSCRIBED_WAVES} waves (grid-stride)", by_arch={"sm_80": {"triad": 2}}),
)
VARIANTS = {"cuda-c": CUDA_VARIANTS, "numba": NUMBA_VARIANTS}

# Input values are small integers (0..15): sums, copies and b + 3 c are exact in float32, so every check
# is an exact comparison with the host reference.
PATTERN_BITS = 4
PATTERN_PERIOD = 65521  # prime
WRITE_VALUE = 1.5
TRIAD_SCALAR = 3.0
# The dram.read check launch stores one float32 per thread; timed launches store nothing.
GUARDED_STORE_BYTES = 4
# dram.dot inputs are 0..3, so a block's sum of products (<= 9 per element) stays below 2^24 up to 1.86 M
# elements per block (every reference plan: at most ~0.8 M): every partial sum is then an integer float32
# holds exactly, and the check is exact. Past that, `dot_tolerance` bounds the rounding instead.
DOT_PATTERN_BITS = 2
# Each dot block stores one float32 partial sum (thread 0): grid x 4 B per launch, not counted (a millionth
# of the bytes read; kernels.inspect lists it as conditional).
DOT_BLOCK_SUM_BYTES = 4
# The CUDA C dot folds each thread's float4 accumulator into one float (3 FADDs, once per thread) before the
# block's shared-memory sum, whose FADDs run only on the lower half of each step (conditional, not counted).
DOT_FOLD_FADDS = {"cuda-c": 3, "numba": 0}


@dataclass(frozen=True)
class StreamOp:
    name: str  # read | write | copy | triad | dot
    reads: int  # arrays read per element
    writes: int  # arrays written per element
    flops: int  # fp32 FLOPs per element: read sums (1 FADD), triad b + s c and dot a b (1 FFMA = 2)

    @property
    def arrays(self) -> int:
        return self.reads + self.writes


OPS = {op.name: op for op in (StreamOp("read", 1, 0, 1), StreamOp("write", 0, 1, 0), StreamOp("copy", 1, 1, 0),
                               StreamOp("triad", 2, 1, 2), StreamOp("dot", 2, 0, 2))}


# ---------------------------------------------------------------------------------------------- planning

def resident_blocks(limits: DeviceLimits, block: int, wanted: int) -> int:
    """`wanted` blocks per SM, fewer where the SM holds fewer threads (e.g. 1536 on sm_86/sm_89)."""
    return max(1, min(wanted, limits.max_threads_per_sm // block))


def dram_plan(op: StreamOp, backend: str, limits: DeviceLimits, quick: bool, variant: Variant | None = None) -> Plan:
    """The one plan of a DRAM benchmark variant (default: the first, one wave): grid, unroll, trips, waves
    and the declared bytes. `quick` changes nothing: arrays must outgrow L2 in a quick run too."""
    variant = variant or VARIANTS[backend][0]
    cuda_c = backend == "cuda-c"
    unroll = variant.unroll[op.name]
    vector = VECTOR_ELEMENTS if cuda_c else 1
    if limits.simulate:
        # the oversubscribed variant runs twice the blocks of half the threads: another grid shape, same size
        block = SIM_BLOCK // 2 if variant.waves > 1 else SIM_BLOCK
        blocks_per_sm, grid = None, launch_dims(limits, block)
    else:
        block = BLOCK
        blocks_per_sm = resident_blocks(limits, block, variant.blocks(op.name, limits.arch))
        grid = variant.waves * limits.sm_count * blocks_per_sm
    block_bytes = block * unroll * vector * ELEMENT_BYTES  # one block, one trip, one array
    notes: tuple[str, ...] = ()
    if limits.simulate:
        trips = SIM_TRIPS
    else:
        target = max(DRAM_L2_MULTIPLE * limits.l2_bytes, DRAM_MIN_ARRAY_BYTES)
        budget = int(FREE_FRACTION * limits.free_bytes) // op.arrays
        trips = min(math.ceil(target / (grid * block_bytes)), budget // (grid * block_bytes))
        if trips < 1:  # a small GPU: one trip of as many blocks as the budget holds
            grid, trips = max(1, budget // block_bytes), 1
        if trips * grid * block_bytes < target:
            notes = (small_arrays_note(trips * grid * block_bytes, op, limits),)
    elements = trips * grid * block * unroll * vector
    array_bytes = elements * ELEMENT_BYTES
    waves = 1 if blocks_per_sm is None else math.ceil(grid / (limits.sm_count * blocks_per_sm))
    params = {"variant": variant.name, "elements": elements, "array_bytes": array_bytes, "arrays": op.arrays,
              "l2_multiple": round(array_bytes / limits.l2_bytes, 2), "trips": trips, "unroll": unroll,
              "access_bytes": vector * ELEMENT_BYTES, "grid": grid, "block": block,
              "blocks_per_sm": blocks_per_sm, "waves": waves,
              "bytes_in_flight_per_sm": None if blocks_per_sm is None else
              blocks_per_sm * block * unroll * max(1, op.reads) * vector * ELEMENT_BYTES}
    flops = elements * op.flops
    if op.name == "read":
        params["guarded_store_bytes_per_thread"] = GUARDED_STORE_BYTES
    if op.name == "dot":
        params["block_sum_bytes_per_block"] = DOT_BLOCK_SUM_BYTES
        flops += DOT_FOLD_FADDS[backend] * grid * block
    # The FLOPs are declared so that kernels.inspect can prove them too; a bandwidth rate uses bytes only.
    work = Work(bytes_read=array_bytes * op.reads, bytes_written=array_bytes * op.writes,
                flops={"fp32": flops} if flops else {})
    return Plan(grid=grid, block=block, work=work, params=params, loop_trips=trips, waves=waves, notes=notes)


def small_arrays_note(array_bytes: int, op: StreamOp, limits: DeviceLimits) -> str:
    return (f"arrays of {format_bytes(array_bytes)} ({array_bytes / limits.l2_bytes:.1f}x L2), not >= "
            f"{DRAM_L2_MULTIPLE}x L2 and >= {format_bytes(DRAM_MIN_ARRAY_BYTES)}: {op.arrays} "
            f"array{'s' if op.arrays > 1 else ''} in {FREE_FRACTION:.0%} of the {format_bytes(limits.free_bytes)} "
            f"free; L2 hits may raise this rate")


def cuda_source(op: StreamOp, plan: Plan) -> CudaSource:
    min_blocks = plan.params["blocks_per_sm"] or 1  # None on the simulator
    return CudaSource("stream.cu", f"dram_{op.name}<{plan.block}, {min_blocks}, {plan.params['unroll']}>")


def numba_source(op: StreamOp, plan: Plan) -> NumbaSource:
    from . import numba_stream

    # registers capped so that the planned blocks fit on an SM at once (kernels.inspect proves they do);
    # whole allocation units of 8 per thread
    per_sm = plan.params.get("blocks_per_sm")
    cap = REGISTERS_PER_SM // (plan.block * per_sm) // 8 * 8 if per_sm else None
    return NumbaSource(numba_stream.KERNELS[op.name], numba_stream.SIGNATURES[op.name], max_registers=cap)


# ------------------------------------------------------------------------------------ device operations

# The longest pattern built so far per (seed, bits); shorter ones are its prefixes.
_PATTERNS: dict[tuple[int, int], np.ndarray] = {}
HASH_MULTIPLIER = 2654435761  # Knuth's multiplicative hash, 2^32 / golden ratio
DEVICE_PATTERN_CHUNK = 2**24  # elements the device writes per step: small index temporaries


def array_module(array):
    """cupy for a CuPy array, else numpy: a check runs where its data is (on the GPU for the CUDA C kernels)."""
    return sys.modules["cupy"] if type(array).__module__.split(".")[0] == "cupy" else np


def hashed(xp, start: int, stop: int, seed: int, bits: int):
    """Elements start..stop of the pattern, computed by `xp` (numpy, or cupy on the GPU): the index modulo the
    period, offset by the seed's period, times HASH_MULTIPLIER modulo 2^32, its top `bits` bits."""
    x = (xp.arange(start, stop, dtype=xp.int64) % PATTERN_PERIOD + seed * PATTERN_PERIOD).astype(xp.uint32)
    x *= xp.uint32(HASH_MULTIPLIER)
    x >>= xp.uint32(32 - bits)
    return x.astype(xp.float32)


def pattern(n: int, seed: int = 0, bits: int = PATTERN_BITS) -> np.ndarray:
    """n float32 small integers (0 .. 2^bits - 1) on the host: `hashed` over a prime period, repeated (the
    period shares no factor with the power-of-two layouts, so neighbouring threads and trips see different
    values). Read-only and kept: every host-built DRAM input of a run (the Numba benchmarks, every variant,
    each with its own whole-chunk size) takes a prefix of the same GiB-sized input, and building one costs
    seconds of host page faults."""
    built = _PATTERNS.get((seed, bits))
    if built is None or built.size < n:
        built = np.resize(hashed(np, 0, PATTERN_PERIOD, seed, bits), n)
        built.flags.writeable = False
        _PATTERNS[(seed, bits)] = built
    return built[:n]


# Checks compare in chunks of this many elements: no GiB-sized boolean or reference temporary (each fresh
# GiB the host allocates costs page faults, seconds per check at DRAM sizes), and still every element.
CHECK_CHUNK = 2**20


def differences(what: str, bad: int, size: int, at: str, got, expected) -> str:
    """Every check's words for elements that differ: how many of how many, and the first (where, got, expected)."""
    return f"{what}: {bad} of {size} values differ (first at {at}: got {got}, expected {expected})"


def mismatch(what: str, got, expected) -> str | None:
    """None when equal everywhere (NaN never equals), else how many differ and the first one. `got` is a host
    or a CuPy array (compared where it is, chunk by chunk); `expected` a scalar, an array like `got`, or a
    function (start, stop) -> the expected values got[start:stop], where `got` is."""
    xp = array_module(got)
    if callable(expected):
        want_at = expected
    elif np.isscalar(expected):
        want_at = lambda start, stop: expected  # noqa: E731
    else:
        want_at = lambda start, stop: expected[start:stop]  # noqa: E731
    bad, first = 0, None
    for start in range(0, got.size, CHECK_CHUNK):
        stop = min(start + CHECK_CHUNK, got.size)
        want = want_at(start, stop)
        differs = got[start:stop] != want
        if differs.any():
            n = int(xp.count_nonzero(differs))
            if first is None:
                j = int(xp.argmax(differs))
                first = (start + j, got[start + j], want if np.isscalar(want) else want[j])
            bad += n
    if bad == 0:
        return None
    i, value, wanted = first
    if xp is not np:  # 0-d device arrays
        value, wanted = value.item(), wanted if np.isscalar(wanted) else wanted.item()
    return differences(what, bad, got.size, f"index {i}", value, wanted)


class CupyDevice:
    """Arrays, launches and copies through CuPy on the runtime's stream (CUDA C kernels)."""

    def __init__(self, runtime: Runtime, source: CudaSource):
        import cupy

        self.cupy = cupy
        self.stream = runtime.cupy_stream if runtime.cupy_stream is not None else cupy.cuda.Stream.null
        self.kernel = runtime.cuda_function(source)

    def to_device(self, host: np.ndarray):
        with self.stream:
            return self.cupy.asarray(host)

    def empty(self, n: int):
        with self.stream:
            return self.cupy.empty(n, dtype=np.float32)

    def pattern(self, n: int, seed: int = 0, bits: int = PATTERN_BITS) -> tuple:
        """(the input on the device, what the checks compute from): written by the GPU, chunk by chunk, on the
        kernels' stream: GPU milliseconds per GiB, no host array and no PCIe copy."""
        array = self.empty(n)
        with self.stream:
            for start in range(0, n, DEVICE_PATTERN_CHUNK):
                stop = min(start + DEVICE_PATTERN_CHUNK, n)
                array[start:stop] = hashed(self.cupy, start, stop, seed, bits)
        return array, array

    def result(self, array):
        """The output to check, left on the device once the kernels' stream is done with it."""
        self.stream.synchronize()
        return array

    def fill(self, array, value: float) -> None:
        with self.stream:
            array.fill(value)

    def launch(self, plan: Plan, args: tuple) -> None:
        with self.stream:
            self.kernel((plan.grid,), (plan.block,), args)

    def to_host(self, array) -> np.ndarray:
        with self.stream:
            host = array.get()
        self.stream.synchronize()
        return host

    def release(self) -> None:
        self.stream.synchronize()
        self.cupy.get_default_memory_pool().free_all_blocks()


class NumbaDevice:
    """Arrays, launches and copies through Numba (a real device or the simulator)."""

    def __init__(self, runtime: Runtime, source: NumbaSource, fill_source: NumbaSource, plan: Plan):
        from numba import cuda

        self.cuda = cuda
        self.stream = runtime.numba_stream()
        self.kernel = runtime.numba_kernel(source)
        self.fill_kernel = runtime.numba_kernel(fill_source)
        self.plan = plan

    def to_device(self, host: np.ndarray):
        return self.cuda.to_device(host, stream=self.stream)

    def pattern(self, n: int, seed: int = 0, bits: int = PATTERN_BITS) -> tuple:
        """(the input on the device, what the checks compute from): built on the host and copied."""
        host = pattern(n, seed, bits)
        return self.to_device(host), host

    def result(self, array) -> np.ndarray:
        return self.to_host(array)

    def empty(self, n: int):
        return self.cuda.device_array(n, dtype=np.float32, stream=self.stream)

    def fill(self, array, value: float) -> None:
        self.fill_kernel[self.plan.grid, self.plan.block, self.stream](array, np.float32(value))

    def launch(self, plan: Plan, args: tuple) -> None:
        self.kernel[plan.grid, plan.block, self.stream](*args)

    def to_host(self, array) -> np.ndarray:
        host = array.copy_to_host(stream=self.stream)
        self.stream.synchronize()
        return host

    def release(self) -> None:
        self.stream.synchronize()


def device_for(backend: str, op: StreamOp, plan: Plan, runtime: Runtime):
    if backend == "cuda-c":
        return CupyDevice(runtime, cuda_source(op, plan))
    from . import numba_stream

    return NumbaDevice(runtime, numba_source(op, plan),
                       NumbaSource(numba_stream.KERNELS["fill"], numba_stream.SIGNATURES["fill"]), plan)


# -------------------------------------------------------------------------------------------- preparing

def dram_prepare(op: StreamOp, backend: str, plan: Plan, runtime: Runtime) -> Prepared:
    dev = device_for(backend, op, plan, runtime)
    n, trips = plan.params["elements"], np.int32(plan.params["trips"])
    state: dict = {}
    # every check compares with the reference dev.pattern gives (the input as the checks compute from it)
    vector = VECTOR_ELEMENTS if backend == "cuda-c" else 1
    if op.name == "read":
        state["in"], ref_in = dev.pattern(n)
        state["out"] = dev.empty(plan.threads)
        launch = lambda store=0: dev.launch(plan, (state["in"], state["out"], trips, np.int32(store)))

        def check():
            launch(store=1)
            return mismatch("dram.read per-thread sums", dev.result(state["out"]), read_partials(ref_in, plan, vector))
    elif op.name == "write":
        state["out"] = dev.empty(n)
        launch = lambda: dev.launch(plan, (state["out"], np.float32(WRITE_VALUE), trips))

        def check():
            return mismatch("dram.write output", dev.result(state["out"]), np.float32(WRITE_VALUE))
    elif op.name == "copy":
        state["in"], ref_in = dev.pattern(n)
        state["out"] = dev.empty(n)
        launch = lambda: dev.launch(plan, (state["in"], state["out"], trips))

        def check():
            return mismatch("dram.copy output", dev.result(state["out"]), ref_in)
    elif op.name == "triad":
        (state["b"], ref_b), (state["c"], ref_c) = dev.pattern(n, seed=1), dev.pattern(n, seed=2)
        state["a"] = dev.empty(n)
        launch = lambda: dev.launch(
            plan, (state["a"], state["b"], state["c"], np.float32(TRIAD_SCALAR), trips))

        def check():
            return mismatch("dram.triad output a", dev.result(state["a"]),
                            lambda start, stop: ref_b[start:stop] + np.float32(TRIAD_SCALAR) * ref_c[start:stop])
    else:  # dot
        (state["a"], ref_a), (state["b"], ref_b) = (dev.pattern(n, seed=3, bits=DOT_PATTERN_BITS),
                                                    dev.pattern(n, seed=4, bits=DOT_PATTERN_BITS))
        state["out"] = dev.empty(plan.grid)
        launch = lambda: dev.launch(plan, (state["a"], state["b"], state["out"], trips))

        def check():
            got = dev.to_host(state["out"])  # one float per block
            want, magnitude = (host_array(x) for x in block_dots(ref_a, ref_b, plan, vector))
            return dot_mismatch(got, want, dot_tolerance(magnitude, dot_roundings(plan, vector), integral=True))

    output = "a" if op.name == "triad" else "out"

    def release():
        state.clear()  # drop the arrays first, so that the pool can free them
        dev.release()

    return Prepared(launch=launch, poison=lambda: dev.fill(state[output], np.nan), check=check,
                    release=release)


def host_array(array) -> np.ndarray:
    return array if array_module(array) is np else array.get()


def read_partials(values, plan: Plan, vector: int):
    """What each thread of dram_read sums: float4 (or float) u of thread t of block b on trip k is
    element ((k * grid + b) * unroll + u) * block + t of the vector array. Computed where `values` is
    (the host, or the GPU)."""
    xp = array_module(values)
    shape = (plan.params["trips"], plan.grid, plan.params["unroll"], plan.block, vector)
    sums = xp.zeros((plan.grid, plan.block))
    for trip in values.reshape(shape):  # one trip at a time keeps the temporaries small
        sums += trip.sum(axis=(1, 3), dtype=np.float64)
    return sums.reshape(-1)


def block_dots(values_a, values_b, plan: Plan, vector: int) -> tuple:
    """(sum of a b, sum of |a b|) over the elements each dram_dot block reads, in float64 (exact for the
    small-integer inputs): on trip k block b reads the contiguous unroll x block float4 (or floats) from
    (k * grid + b) x unroll x block. Computed where the values are (the host, or the GPU)."""
    xp = array_module(values_a)
    shape = (plan.params["trips"], plan.grid, plan.params["unroll"] * plan.block * vector)
    sums, magnitudes = xp.zeros(plan.grid), xp.zeros(plan.grid)
    for a, b in zip(values_a.reshape(shape), values_b.reshape(shape)):  # one trip at a time: small temporaries
        products = a.astype(xp.float64) * b  # exact: a float32 product fits a float64
        sums += products.sum(axis=1)
        magnitudes += xp.abs(products).sum(axis=1)
    return sums, magnitudes


FLOAT32_UNIT_ROUNDOFF = 2.0**-24
FLOAT32_EXACT_INTEGERS = 2**24  # every integer of at most this magnitude is a float32


def dot_roundings(plan: Plan, vector: int) -> int:
    """Roundings on the longest path from one product to a block's sum in dram_dot: the thread's FMA chain
    (one per accumulator: trips x unroll), the fold of a float4 accumulator (two levels of a pairwise sum),
    then one per halving step of the block's shared-memory sum (log2 block)."""
    fold = 2 if vector == VECTOR_ELEMENTS else 0
    return plan.params["trips"] * plan.params["unroll"] + fold + int(math.log2(plan.block))


def dot_tolerance(magnitudes: np.ndarray, roundings: int, *, integral: bool) -> np.ndarray:
    """How far each block's float32 sum may lie from the exact one: gamma_n x sum |a_i b_i|, gamma_n =
    n u / (1 - n u), n the roundings on the longest path, u the float32 unit roundoff (the bound for a
    summation of that order: Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 4.2). Zero
    where the inputs are integers and sum |a_i b_i| <= 2^24: every partial sum is then an integer float32
    holds, so nothing rounds."""
    nu = roundings * FLOAT32_UNIT_ROUNDOFF
    bound = nu / (1 - nu) * magnitudes
    return np.where(magnitudes <= FLOAT32_EXACT_INTEGERS, 0.0, bound) if integral else bound


def dot_mismatch(got: np.ndarray, want: np.ndarray, tolerance: np.ndarray) -> str | None:
    """None when every block sum is within its tolerance (NaN never is), else how many are not and the first."""
    off = ~(np.abs(got.astype(np.float64) - want) <= tolerance)
    if not off.any():
        return None
    i = int(np.argmax(off))
    return (f"dram.dot block sums: {int(off.sum())} of {got.size} off by more than the summation-order bound "
            f"(first: block {i} got {got[i]}, expected {want[i]:.17g} +- {tolerance[i]:.3g})")


# ------------------------------------------------------------------------------------------ benchmarks

_WHAT = {
    "read": "reads one array once per launch and sums it per thread; the sums are stored only in the "
            "check launch (a run-time flag), so no load can be removed and nothing is written",
    "write": "fills one array once per launch",
    "copy": "copies one array to another once per launch",
    "triad": "a = b + 3 c over three arrays once per launch",
    "dot": "sums a x b over two arrays once per launch (BabelStream's Dot): each block adds its threads' sums "
           "in shared memory and stores one partial sum, the host adds the blocks",
}


def _benchmark(op: StreamOp, backend: str, variant: Variant) -> Benchmark:
    cuda_c = backend == "cuda-c"
    unroll = variant.unroll[op.name]
    how = (f"float4 (16-byte LDG.E.128/STG.E.128) accesses, {unroll} per array per thread per trip, "
           f"{BLOCK}-thread blocks, {variant.what}" if cuda_c else
           f"scalar float32 (4-byte) accesses, {unroll} per array per thread per trip (Numba has no "
           f"float4), {BLOCK}-thread blocks x {variant.blocks_per_sm[op.name]} per SM, {variant.what}")
    function = f"dram_{op.name}" if cuda_c else f"numba_stream.dram_{op.name}"
    return Benchmark(
        name=f"dram.{op.name}", backend=backend, kind="bandwidth", kernel=f"{function}[{variant.name}]",
        description=f"{_WHAT[op.name]}: {how}; arrays >= {DRAM_L2_MULTIPLE}x L2 and >= 1 GiB",
        plans=lambda limits, quick: [dram_plan(op, backend, limits, quick, variant)],
        prepare=lambda plan, runtime: dram_prepare(op, backend, plan, runtime),
        source=(lambda plan: cuda_source(op, plan)) if cuda_c else (lambda plan: numba_source(op, plan)),
        level="dram", pipe="memory", peak_key="dram", group="bandwidth", simulable=not cuda_c,
    )


BENCHMARKS = [_benchmark(OPS[name], backend, variant) for backend in ("cuda-c", "numba")
              for variant in VARIANTS[backend] for name in OPS]

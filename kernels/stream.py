"""DRAM bandwidth ceilings: dram.read, dram.write, dram.copy, dram.triad, in CUDA C and in Numba.

Every kernel streams float32 arrays sized to exactly `trips` chunks of grid x block x unroll accesses
(no tail, no bounds test): each thread runs one trip loop of `trips` iterations holding `unroll` loads
and/or stores per array, so the declared bytes are elements x 4 B x arrays and `Plan.loop_trips` is the
trip count. Arrays are >= 8x L2 and >= 1 GiB each when free memory allows (docs/bandwidth.md).
Importing this module imports no CUDA package: cupy and numba are imported when a benchmark is prepared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

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
    launch_dims,
)

ELEMENT_BYTES = 4  # float32
VECTOR_ELEMENTS = 4  # CUDA C accesses are float4: 16 bytes (LDG.E.128 / STG.E.128)

# CUDA C: 256-thread blocks, 4 resident per SM (`__launch_bounds__(256, 4)` caps registers at 64, so the
# planned grid is one wave) and 8 independent 16-byte loads in flight per thread: 128 KiB in flight per
# SM, several times what Little's law asks of HBM3 (~3.35 TB/s x ~0.6 us / 132 SMs ~ 15 KiB).
CUDA_BLOCK = 256
CUDA_BLOCKS_PER_SM = 4
CUDA_UNROLL = {"read": 8, "write": 8, "copy": 8, "triad": 4}  # triad: 4 x 2 arrays = 8 loads in flight

# Numba: scalar float32 accesses. ptxas (sm_90) gives read 32, write 30, copy 39, triad 40 registers:
# 8 blocks of 256 fit per SM for read/write, 4 for copy/triad (<= 64 registers). Read and write unroll 16
# because NVVM unrolls a trip loop of only 8 accesses twice and adds a remainder loop.
NUMBA_BLOCK = 256
NUMBA_BLOCKS_PER_SM = {"read": 8, "write": 8, "copy": 4, "triad": 4}
# ptxas gives the Numba triad 94 registers on sm_80 (40 on sm_89/sm_90): capped at 64 for 4 blocks it
# spills inside the loop, so it runs 2 blocks per SM there
NUMBA_BLOCKS_PER_SM_BY_ARCH = {"sm_80": {"triad": 2}}
NUMBA_UNROLL = {"read": 16, "write": 16, "copy": 8, "triad": 8}

# Sizes. Each array is at least DRAM_L2_MULTIPLE x L2 (so L2 hits are a few percent at most) and
# DRAM_MIN_ARRAY_BYTES; all arrays of one benchmark together use at most FREE_FRACTION of free memory.
DRAM_L2_MULTIPLE = 8
QUICK_L2_MULTIPLE = 4
DRAM_MIN_ARRAY_BYTES = 2**30
FREE_FRACTION = 0.5
SIM_BLOCK = 64  # on the simulator: 4 blocks of 64 threads (SIM_MAX_THREADS), 2 trips
SIM_TRIPS = 2

# Input values are small integers (0..15): sums, copies and b + 3 c are exact in float32, so every check
# is an exact comparison with the host reference.
PATTERN_BITS = 4
PATTERN_PERIOD = 65521  # prime
WRITE_VALUE = 1.5
TRIAD_SCALAR = 3.0
# The dram.read check launch stores one float32 per thread; timed launches store nothing.
GUARDED_STORE_BYTES = 4


@dataclass(frozen=True)
class Op:
    name: str  # read | write | copy | triad
    reads: int  # arrays read per element
    writes: int  # arrays written per element
    flops: int  # fp32 FLOPs per element: read sums (1 FADD), triad b + s c (1 FFMA = 2)

    @property
    def arrays(self) -> int:
        return self.reads + self.writes


OPS = {op.name: op for op in (Op("read", 1, 0, 1), Op("write", 0, 1, 0), Op("copy", 1, 1, 0),
                               Op("triad", 2, 1, 2))}


# ---------------------------------------------------------------------------------------------- planning

def resident_blocks(limits: DeviceLimits, block: int, wanted: int) -> int:
    """`wanted` blocks per SM, fewer where the SM holds fewer threads (e.g. 1536 on sm_86/sm_89)."""
    return max(1, min(wanted, limits.max_threads_per_sm // block))


def dram_plan(op: Op, backend: str, limits: DeviceLimits, quick: bool) -> Plan:
    """The one plan of a DRAM benchmark: grid, unroll, trips and the declared bytes."""
    cuda_c = backend == "cuda-c"
    unroll = (CUDA_UNROLL if cuda_c else NUMBA_UNROLL)[op.name]
    vector = VECTOR_ELEMENTS if cuda_c else 1
    if limits.simulate:
        block, blocks_per_sm = SIM_BLOCK, None
    else:
        block = CUDA_BLOCK if cuda_c else NUMBA_BLOCK
        numba_blocks = NUMBA_BLOCKS_PER_SM_BY_ARCH.get(limits.arch, {}).get(op.name, NUMBA_BLOCKS_PER_SM[op.name])
        blocks_per_sm = resident_blocks(limits, block, CUDA_BLOCKS_PER_SM if cuda_c else numba_blocks)
    grid = launch_dims(limits, block, blocks_per_sm)
    block_bytes = block * unroll * vector * ELEMENT_BYTES  # one block, one trip, one array
    if limits.simulate:
        trips = SIM_TRIPS
    else:
        target = max((QUICK_L2_MULTIPLE if quick else DRAM_L2_MULTIPLE) * limits.l2_bytes,
                     0 if quick else DRAM_MIN_ARRAY_BYTES)
        budget = int(FREE_FRACTION * limits.free_bytes) // op.arrays
        trips = min(math.ceil(target / (grid * block_bytes)), budget // (grid * block_bytes))
        if trips < 1:  # a small GPU: one trip of as many blocks as the budget holds
            grid, trips = max(1, budget // block_bytes), 1
    elements = trips * grid * block * unroll * vector
    array_bytes = elements * ELEMENT_BYTES
    params = {"elements": elements, "array_bytes": array_bytes, "arrays": op.arrays,
              "l2_multiple": round(array_bytes / limits.l2_bytes, 2), "trips": trips, "unroll": unroll,
              "access_bytes": vector * ELEMENT_BYTES, "grid": grid, "block": block,
              "blocks_per_sm": blocks_per_sm}
    if op.name == "read":
        params["guarded_store_bytes_per_thread"] = GUARDED_STORE_BYTES
    # The FLOPs are declared so that kernels.inspect can prove them too; a bandwidth rate uses bytes only.
    work = Work(bytes_read=array_bytes * op.reads, bytes_written=array_bytes * op.writes,
                flops={"fp32": elements * op.flops} if op.flops else {})
    return Plan(grid=grid, block=block, work=work, params=params, loop_trips=trips)


def cuda_source(op: Op, plan: Plan) -> CudaSource:
    min_blocks = plan.params["blocks_per_sm"] or 1  # None on the simulator
    return CudaSource("stream.cu", f"dram_{op.name}<{plan.block}, {min_blocks}, {plan.params['unroll']}>")


def numba_source(op: Op, plan: Plan) -> NumbaSource:
    from . import numba_stream

    # registers capped so that the planned blocks fit on an SM at once (kernels.inspect proves they do);
    # whole allocation units of 8 per thread
    per_sm = plan.params.get("blocks_per_sm")
    cap = REGISTERS_PER_SM // (plan.block * per_sm) // 8 * 8 if per_sm else None
    return NumbaSource(numba_stream.KERNELS[op.name], numba_stream.SIGNATURES[op.name], max_registers=cap)


# ------------------------------------------------------------------------------------ device operations

@lru_cache(maxsize=4)
def pattern(n: int, seed: int = 0) -> np.ndarray:
    """n float32 small integers (0..15): a multiplicative hash of the index over a prime period, repeated
    (the period shares no factor with the power-of-two layouts, so neighbouring threads and trips see
    different values). Read-only and kept: the CUDA C and Numba DRAM benchmarks of a run use the same
    GiB-sized inputs, and building one costs seconds of host page faults."""
    x = np.arange(seed * PATTERN_PERIOD, (seed + 1) * PATTERN_PERIOD, dtype=np.uint32)
    x *= np.uint32(2654435761)
    x >>= np.uint32(32 - PATTERN_BITS)
    out = np.resize(x.astype(np.float32), n)
    out.flags.writeable = False
    return out


# Checks compare in chunks of this many elements: no GiB-sized boolean or reference temporary (each fresh
# GiB the host allocates costs page faults, seconds per check at DRAM sizes), and still every element.
CHECK_CHUNK = 2**20


def mismatch(what: str, got: np.ndarray, expected) -> str | None:
    """None when equal everywhere (NaN never equals), else how many differ and the first one. `expected` is
    a scalar, an array like `got`, or a function (start, stop) -> the expected values got[start:stop]."""
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
            n = int(np.count_nonzero(differs))
            if first is None:
                j = int(np.argmax(differs))
                first = (start + j, got[start + j], want if np.isscalar(want) else want[j])
            bad += n
    if bad == 0:
        return None
    i, value, wanted = first
    return f"{what}: {bad} of {got.size} values differ (first at index {i}: got {value}, expected {wanted})"


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


def device_for(backend: str, op: Op, plan: Plan, runtime: Runtime):
    if backend == "cuda-c":
        return CupyDevice(runtime, cuda_source(op, plan))
    from . import numba_stream

    return NumbaDevice(runtime, numba_source(op, plan),
                       NumbaSource(numba_stream.KERNELS["fill"], numba_stream.SIGNATURES["fill"]), plan)


# -------------------------------------------------------------------------------------------- preparing

def dram_prepare(op: Op, backend: str, plan: Plan, runtime: Runtime) -> Prepared:
    dev = device_for(backend, op, plan, runtime)
    n, trips = plan.params["elements"], np.int32(plan.params["trips"])
    state: dict = {}

    if op.name == "read":
        host_in = pattern(n)
        state["in"], state["out"] = dev.to_device(host_in), dev.empty(plan.threads)
        launch = lambda store=0: dev.launch(plan, (state["in"], state["out"], trips, np.int32(store)))

        def check():
            launch(store=1)
            return mismatch("dram.read per-thread sums", dev.to_host(state["out"]),
                            read_partials(host_in, plan, VECTOR_ELEMENTS if backend == "cuda-c" else 1))
    elif op.name == "write":
        state["out"] = dev.empty(n)
        launch = lambda: dev.launch(plan, (state["out"], np.float32(WRITE_VALUE), trips))

        def check():
            return mismatch("dram.write output", dev.to_host(state["out"]), np.float32(WRITE_VALUE))
    elif op.name == "copy":
        host_in = pattern(n)
        state["in"], state["out"] = dev.to_device(host_in), dev.empty(n)
        launch = lambda: dev.launch(plan, (state["in"], state["out"], trips))

        def check():
            return mismatch("dram.copy output", dev.to_host(state["out"]), host_in)
    else:  # triad
        host_b, host_c = pattern(n, seed=1), pattern(n, seed=2)
        state["a"], state["b"], state["c"] = dev.empty(n), dev.to_device(host_b), dev.to_device(host_c)
        launch = lambda: dev.launch(
            plan, (state["a"], state["b"], state["c"], np.float32(TRIAD_SCALAR), trips))

        def check():
            return mismatch("dram.triad output a", dev.to_host(state["a"]),
                            lambda start, stop: host_b[start:stop] + np.float32(TRIAD_SCALAR) * host_c[start:stop])

    output = "a" if op.name == "triad" else "out"

    def release():
        state.clear()  # drop the arrays first, so that the pool can free them
        dev.release()

    return Prepared(launch=launch, poison=lambda: dev.fill(state[output], np.nan), check=check,
                    release=release)


def read_partials(host_in: np.ndarray, plan: Plan, vector: int) -> np.ndarray:
    """What each thread of dram_read sums: float4 (or float) u of thread t of block b on trip k is
    element ((k * grid + b) * unroll + u) * block + t of the vector array."""
    shape = (plan.params["trips"], plan.grid, plan.params["unroll"], plan.block, vector)
    sums = np.zeros((plan.grid, plan.block))
    for trip in host_in.reshape(shape):  # one trip at a time keeps the temporaries small
        sums += trip.sum(axis=(1, 3), dtype=np.float64)
    return sums.reshape(-1)


# ------------------------------------------------------------------------------------------ benchmarks

_WHAT = {
    "read": "reads one array once per launch and sums it per thread; the sums are stored only in the "
            "check launch (a run-time flag), so no load can be removed and nothing is written",
    "write": "fills one array once per launch",
    "copy": "copies one array to another once per launch",
    "triad": "a = b + 3 c over three arrays once per launch",
}


def _benchmark(op: Op, backend: str) -> Benchmark:
    cuda_c = backend == "cuda-c"
    unroll = (CUDA_UNROLL if cuda_c else NUMBA_UNROLL)[op.name]
    how = (f"float4 (16-byte LDG.E.128/STG.E.128) accesses, {unroll} per array per thread per trip, "
           f"{CUDA_BLOCK}-thread blocks x {CUDA_BLOCKS_PER_SM} per SM" if cuda_c else
           f"scalar float32 (4-byte) accesses, {unroll} per array per thread per trip (Numba has no "
           f"float4), {NUMBA_BLOCK}-thread blocks x {NUMBA_BLOCKS_PER_SM[op.name]} per SM")
    return Benchmark(
        name=f"dram.{op.name}", backend=backend, kind="bandwidth",
        kernel=f"dram_{op.name}" if cuda_c else f"numba_stream.dram_{op.name}",
        description=f"{_WHAT[op.name]}: {how}; arrays >= {DRAM_L2_MULTIPLE}x L2 and >= 1 GiB",
        plans=lambda limits, quick: [dram_plan(op, backend, limits, quick)],
        prepare=lambda plan, runtime: dram_prepare(op, backend, plan, runtime),
        source=(lambda plan: cuda_source(op, plan)) if cuda_c else (lambda plan: numba_source(op, plan)),
        level="dram", pipe="memory", peak_key="dram", group="bandwidth", simulable=not cuda_c,
    )


BENCHMARKS = [_benchmark(OPS[name], backend) for backend in ("cuda-c", "numba") for name in OPS]

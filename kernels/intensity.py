"""Arithmetic-intensity sweeps `intensity.fp32` / `intensity.fp64` (ERT / mixbench style), CUDA C.

Every element of a DRAM-sized array is read (16-byte vectors), given N dependent FMAs (N a template
constant, 0..1024) and written back: intensity = 2N FLOP / (2 x element size) B. `ceilings.sweeps` finds the
knee. a and c are kernel arguments: the timed launches use a = -1, c = 3 (x alternates with 3 - x, bounded);
`check()` launches once more with a = 1, c = 1/64, so every element must end at x + N/64, exact and checked
bit for bit: an element that skipped any FMA is caught.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np

from .base import Axis, Benchmark, CudaSource, DeviceLimits, Plan, Prepared, Runtime, Work, launch_dims
from .stream import CHECK_CHUNK

BLOCK = 256
VECTOR_BYTES = 16
FMAS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
QUICK_FMAS = (0, 4, 16, 64, 256, 1024)
L2_MULTIPLE = 16  # each array 16x L2 (two arrays: 32x): no reuse from L2 between trips
QUICK_L2_MULTIPLE = 4  # --quick: still 8x L2 moved per launch, a quarter of the host-side check cost
FREE_FRACTION = 0.25  # each array at most a quarter of free memory
SIM_ELEMENTS_PER_THREAD = 2
INPUT_PERIOD = 64  # inputs repeat 1 + k / 64, k = 0..63
CHECK_ADDEND = 2.0**-6  # x + 1024/64 < 18 in steps of 1/64: exact in fp32 and fp64


@dataclass(frozen=True)
class Precision:
    name: str  # fp32 | fp64
    vector: str  # CUDA vector type of 16 bytes
    dtype: type


PRECISIONS = {"fp32": Precision("fp32", "float4", np.float32), "fp64": Precision("fp64", "double2", np.float64)}


def _elements_per_vector(p: Precision) -> int:
    return VECTOR_BYTES // np.dtype(p.dtype).itemsize


def plans(p: Precision, limits: DeviceLimits, quick: bool) -> list[Plan]:
    grid = launch_dims(limits, BLOCK)
    threads = grid * BLOCK
    if limits.simulate:
        trips = SIM_ELEMENTS_PER_THREAD
    else:
        multiple = QUICK_L2_MULTIPLE if quick else L2_MULTIPLE
        array_bytes = min(multiple * limits.l2_bytes, int(limits.free_bytes * FREE_FRACTION))
        trips = max(1, array_bytes // (threads * VECTOR_BYTES))
    n_vec = threads * trips  # every thread runs exactly `trips` iterations of the grid-stride loop
    elements = n_vec * _elements_per_vector(p)
    array_bytes = n_vec * VECTOR_BYTES
    return [Plan(grid=grid, block=BLOCK, loop_trips=trips,
                 work=Work(bytes_read=array_bytes, bytes_written=array_bytes, flops={p.name: elements * n * 2}),
                 params={"fmas": n, "vectors": n_vec, "array_bytes": array_bytes, "grid": grid, "block": BLOCK})
            for n in (QUICK_FMAS if quick else FMAS)]


def intensity_of(plan: Plan) -> float:
    """Declared FLOPs per declared DRAM byte."""
    return plan.work.total_flops / plan.work.bytes


def source(p: Precision, plan: Plan) -> CudaSource:
    return CudaSource("intensity.cu", f"intensity<{p.vector}, {plan.params['fmas']}>")


@lru_cache(maxsize=1)
def inputs(p: Precision, n_elements: int) -> np.ndarray:
    """1 + (i mod 64) / 64: exact, and so are 3 - x and x + N/64. One period repeated: the arrays are ~0.8 GiB, and
    building them from a 64-bit arange took ~8 s per plan (a timeout risk for the quick run). Every plan
    of a sweep has the same size: the last array is kept (read-only), not rebuilt for each of 6-12 plans
    (~1 s each at H200 sizes)."""
    x = np.resize((1 + np.arange(INPUT_PERIOD) / INPUT_PERIOD).astype(p.dtype), n_elements)
    x.flags.writeable = False
    return x


def expected(p: Precision, fmas: int, x: np.ndarray) -> np.ndarray:
    """The check launch's output: N steps of x * 1 + 1/64."""
    return (x + p.dtype(fmas * CHECK_ADDEND)).astype(p.dtype)


def prepare(p: Precision, plan: Plan, runtime: Runtime) -> Prepared:
    import cupy

    src = source(p, plan)
    kernel = runtime.cuda_function(src)
    n_elements = plan.params["vectors"] * _elements_per_vector(p)
    host_in = inputs(p, n_elements)
    with runtime.cupy_stream:
        x = cupy.asarray(host_in)
        y = cupy.empty_like(x)
    n_vec = np.uint64(plan.params["vectors"])

    def run(check: bool) -> None:
        a, c = (1, CHECK_ADDEND) if check else (-1, 3)
        with runtime.cupy_stream:
            kernel((plan.grid,), (plan.block,), (x, y, n_vec, p.dtype(a), p.dtype(c)))

    def poison() -> None:
        with runtime.cupy_stream:
            y.fill(np.nan)

    def check() -> str | None:
        poison()
        run(True)
        got = cupy.asnumpy(y, stream=runtime.cupy_stream)
        runtime.cupy_stream.synchronize()
        raw = f"u{np.dtype(p.dtype).itemsize}"  # bit for bit: a NaN poison never compares equal
        got_bits, bad, first = got.view(raw), 0, None
        for start in range(0, n_elements, CHECK_CHUNK):  # chunks: no GiB-sized temporaries
            want = expected(p, plan.params["fmas"], host_in[start:start + CHECK_CHUNK])
            wrong = np.flatnonzero(got_bits[start:start + CHECK_CHUNK] != want.view(raw))
            if wrong.size and first is None:
                first = (start + int(wrong[0]), want[wrong[0]])
            bad += wrong.size
        if bad == 0:
            return None
        i, wanted = first
        return (f"intensity.{p.name} N={plan.params['fmas']}: {bad} of {n_elements} elements wrong; "
                f"element {i} is {got[i]!r}, expected {wanted!r}")

    def release() -> None:
        nonlocal x, y
        del x, y

    return Prepared(launch=partial(run, False), poison=poison, check=check, release=release)


def _benchmark(p: Precision) -> Benchmark:
    return Benchmark(
        name=f"intensity.{p.name}", backend="cuda-c", kind="compute", kernel=f"intensity<{p.vector}, N>",
        description=(f"{p.name} arithmetic-intensity sweep: 16-byte loads and stores over arrays of 16x L2 "
                     f"(4x with --quick), N = 0..1024 dependent FMAs per element"),
        plans=partial(plans, p), prepare=partial(prepare, p), source=partial(source, p),
        precision=p.name, pipe="cuda-core", peak_key=p.name, group="sweep",
        sweep_x=Axis("arithmetic intensity", "FLOP/B"), sweep_x_of=intensity_of)


BENCHMARKS = [_benchmark(p) for p in PRECISIONS.values()]

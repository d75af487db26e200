"""Hopper's tensor-core peak through hand-written warpgroup MMA (wgmma.mma_async, sm_90a; see cuda/wgmma.cu).

mma.sync reaches only part of Hopper's dense tensor rate; wgmma is the instruction that reaches it. Each
block is one warpgroup: it copies A (64xK) and B (256xK) into shared memory once, then runs one runtime loop
of `trips` x UNROLL wgmma m64n256k<K> into 128 fp32 accumulator registers per thread, BLOCKS_PER_SM
warpgroups per SM. Declared work: 2*64*256*K FLOPs per wgmma per warpgroup, by precision (bf16, fp16, fp8 =
e4m3 with K = 32). Ceilings `wgmma.<type>` with peak key and roof `tensor.<type>`, beside the mma.sync
`tensor.<type>` and cuBLAS `cublas.<type>` ceilings.

Correctness: A and B hold small integers (exact in every input format; every partial sum an integer below
2^13, exact in fp32 and under fp8's narrow accumulation), so a verification launch that stores the
accumulators is compared for equality with numpy's C = VERIFY_TRIPS x UNROLL x (A @ B), through the
accumulator layout of the PTX ISA. The timed launches store nothing (a run-time flag).

Compiled by NVRTC for sm_90a (kernels.inspect.nvrtc_cubin) and loaded from the cubin: CuPy's RawModule adds
its own -arch=sm_90 to NVRTC, and wgmma exists only in the arch-specific sm_90a target.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import tensor
from .base import Benchmark, CudaSource, DeviceLimits, Plan, Prepared, Runtime, Work, launch_dims
from .stream import differences

CUDA_FILE = "wgmma.cu"
KERNEL = "tensor_wgmma"
ARCH = "sm_90a"  # wgmma is in the arch-specific Hopper target only (not sm_90, not sm_100)

M, N = 64, 256  # every wgmma here is m64n256k<K>: the largest N, the most work per shared-memory byte read
THREADS = 128  # one warpgroup per block (4 consecutive warps, the unit a wgmma runs on)
ACC = M * N // THREADS  # fp32 accumulators per thread
ROW_BYTES = 32  # K elements of one operand row: 16 x 16-bit or 32 x 8-bit
IMAGE_BYTES = (M + N) * ROW_BYTES  # A then B, in shared memory and in the global image copied there
LBO, SBO = 128, 256  # descriptor strides (bytes): the two K chunks of 8 rows side by side, then the next 8 rows
# 154 registers per thread (sass: 128 accumulators + descriptors, index): 3 warpgroups per SM fit (168 at
# most), and while one drains its queue at the end of a trip the others keep the tensor cores fed.
BLOCKS_PER_SM = 3
UNROLL = 16  # wgmma per trip, all into the same accumulators (the hardware chains them)
TRIPS = 1024  # 3.4e12 bf16 FLOPs per launch on 132 SMs: ~3.5 ms at the dense peak
TRIPS_QUICK = 128
VERIFY_TRIPS = 2  # every wgmma of the body, twice, through the loop back-edge
SEED = 0x90A

NOT_HOPPER_NOTE = ("wgmma is Hopper's own instruction (sm_90a code runs on CC 9.0 only; Blackwell data-center "
                   "parts use tcgen05.mma instead): no wgmma ceiling on other GPUs")


@dataclass(frozen=True)
class WgmmaOp:
    """One wgmma flavour: its declared precision, the Op struct in cuda/wgmma.cu, K and the mma.sync op whose
    element encoding it shares."""

    precision: str  # bf16 | fp16 | fp8
    struct: str
    k: int

    @property
    def flops_per_wgmma(self) -> int:
        return 2 * M * N * self.k

    @property
    def element(self) -> tensor.TensorOp:
        return next(op for op in tensor.OPS if op.precision == self.precision)

    @property
    def element_bytes(self) -> int:
        return self.element.bits // 8


OPS = (WgmmaOp("bf16", "Bf16", 16), WgmmaOp("fp16", "Fp16", 16), WgmmaOp("fp8", "Fp8", 32))


def _hopper(cc: tuple[int, int]) -> bool:
    return cc == (9, 0)


# ---- operands, their shared-memory image and the expected accumulators ------------------------------------

def matrix_a(op: WgmmaOp) -> np.ndarray:
    """64xK integers in -2..2, no short period along either axis (a misplaced row or column shows)."""
    return np.random.default_rng(SEED).integers(-2, 3, (M, op.k)).astype(np.float64)


def matrix_b(op: WgmmaOp) -> np.ndarray:
    """Kx256 integers in -2..2."""
    return np.random.default_rng(SEED + 1).integers(-2, 3, (op.k, N)).astype(np.float64)


def k_major_offsets(rows: int, op: WgmmaOp) -> np.ndarray:
    """[rows, K] byte offsets of a K-major operand without swizzle (PTX ISA canonical layout
    ((8,m),(T,2)):((1T,SBO),(1,LBO)), T = 16 bytes of elements): 8x16-byte core matrices, rows 16 bytes apart."""
    r, k = np.indices((rows, op.k))
    per_chunk = 16 // op.element_bytes
    return (r // 8) * SBO + (k // per_chunk) * LBO + (r % 8) * 16 + (k % per_chunk) * op.element_bytes


def operand_image(op: WgmmaOp, a: np.ndarray | None = None, b: np.ndarray | None = None) -> np.ndarray:
    """The kernel's `image` input: IMAGE_BYTES bytes, A (64xK, K-major) then B stored as its transpose
    (256xK, K-major: wgmma's non-transposed B), every element at its descriptor offset, little-endian; of A and
    B (default: the check's integer matrices)."""
    image = np.zeros(IMAGE_BYTES, dtype=np.uint8)
    base = 0
    for matrix in (matrix_a(op) if a is None else a, (matrix_b(op) if b is None else b).T):
        codes = np.ascontiguousarray(tensor.encode(op.element, matrix))
        element_bytes = codes.view(np.uint8).reshape(*matrix.shape, op.element_bytes)
        offsets = base + k_major_offsets(matrix.shape[0], op)
        image[offsets[..., None] + np.arange(op.element_bytes)] = element_bytes
        base += matrix.shape[0] * ROW_BYTES
    return image


def layout_d() -> tuple[np.ndarray, np.ndarray]:
    """(row, col) in the 64x256 accumulator of register i of thread t, as [128, 128] arrays (PTX ISA "Matrix
    fragments for wgmma .m64nNk16/k32", accumulator D; CUTLASS CLayout_64xN): warp w owns rows 16w..16w+15,
    and within it the mma.sync m16n8 pattern repeats every 8 columns."""
    t, i = np.indices((THREADS, ACC))
    lane, warp = t % 32, t // 32
    row = 16 * warp + lane // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (lane % 4) + i % 2
    return row, col


def expected_accumulators(op: WgmmaOp, wgmmas: int) -> np.ndarray:
    """[128 threads, 128 registers] after `wgmmas` wgmma from zero: wgmmas x (A @ B), exact in fp32."""
    row, col = layout_d()
    return (wgmmas * (matrix_a(op) @ matrix_b(op)))[row, col].astype(np.float32)


def mismatch(got: np.ndarray, want: np.ndarray, launch: str) -> str | None:
    """None when every block's [128, 128] accumulators equal `want`; else one line on what is wrong."""
    bad = np.argwhere(got != want[None])
    if not len(bad):
        return None
    block, thread, reg = bad[0]
    text = differences(f"accumulators after {launch}", len(bad), got.size, f"block {block} thread {thread} d{reg}",
                       got[block, thread, reg], want[thread, reg])
    if np.array_equal(np.sort(got[block], axis=None), np.sort(want, axis=None)):
        text += ("; that block holds the right values in other places: the shared-memory or accumulator layout "
                 "assumed in kernels/wgmma.py is wrong")
    return text


# ---- the benchmark ------------------------------------------------------------------------------------------

def _plans(op: WgmmaOp) -> Callable[[DeviceLimits, bool], list[Plan]]:
    def plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
        if not _hopper(limits.compute_capability):
            return []
        grid = launch_dims(limits, THREADS, BLOCKS_PER_SM)
        trips = TRIPS_QUICK if quick else TRIPS
        flops = grid * trips * UNROLL * op.flops_per_wgmma  # one warpgroup per block
        # Each block copies the operand image once; the timed launches store nothing.
        work = Work(bytes_read=grid * IMAGE_BYTES, flops={op.precision: flops})
        # "instruction": the self-check judges a wgmma by the tensor FLOP counters, not by instruction counts
        params = {"shape": f"m{M}n{N}k{op.k}", "instruction": "wgmma", "operands": "shared memory (SS)",
                  "unroll": UNROLL, "trips": trips, "blocks_per_sm": BLOCKS_PER_SM}
        return [Plan(grid=grid, block=THREADS, work=work, params=params, loop_trips=trips)]

    return plans


def _source(op: WgmmaOp) -> Callable[[Plan], CudaSource]:
    def source(plan: Plan) -> CudaSource:
        return CudaSource(CUDA_FILE, f"{KERNEL}<{op.struct}, {plan.params['unroll']}, {plan.params['blocks_per_sm']}>",
                          options=("-std=c++17", f"-arch={ARCH}"))

    return source


@functools.lru_cache(maxsize=None)
def _cubin(code: str, file: str, options: tuple[str, ...], name_expression: str) -> tuple[bytes, str]:
    """NVRTC's cubin of one source and its kernel's lowered name, once per source (plans share sources)."""
    from .inspect import nvrtc_cubin

    cubin, names = nvrtc_cubin(code, file, options, (name_expression,),
                               ARCH.removesuffix("a"))  # the device's arch; the source's options name sm_90a
    return cubin, names[name_expression]


def load_kernel(source: CudaSource):
    """The kernel compiled by NVRTC for sm_90a and loaded from its cubin through CuPy."""
    import cupy

    cubin, name = _cubin(source.code, source.file, tuple(source.options), source.name_expression)
    with tempfile.TemporaryDirectory(prefix="ceilings-wgmma-") as folder:
        path = Path(folder) / "wgmma.cubin"
        path.write_bytes(cubin)
        return cupy.RawModule(path=str(path)).get_function(name)


def _prepare(op: WgmmaOp) -> Callable[[Plan, Runtime], Prepared]:
    def prepare(plan: Plan, runtime: Runtime) -> Prepared:
        import cupy

        kernel = load_kernel(_source(op)(plan))
        with runtime.cupy_stream:
            # timed on random full-mantissa operands (tensor.RANDOM_SEED); checked on the integer ones
            bufs = {"image": cupy.asarray(operand_image(op, *tensor.random_matrices(op.element, (M, op.k),
                                                                                    (op.k, N)))),
                    "exact": cupy.asarray(operand_image(op)),
                    "out": cupy.empty(plan.grid * THREADS * ACC, dtype=np.float32)}

        def run(trips: int, store: int, image: str) -> None:
            with runtime.cupy_stream:
                kernel((plan.grid,), (plan.block,), (bufs[image], bufs["out"], np.int32(trips), np.int32(store)))

        def compare(got: np.ndarray) -> str | None:
            want = expected_accumulators(op, VERIFY_TRIPS * plan.params["unroll"])
            return mismatch(got, want, f"a {VERIFY_TRIPS}-trip verification launch")

        return tensor.verified_launches(runtime, plan, bufs, run, "image", VERIFY_TRIPS, (plan.grid, THREADS, ACC),
                                        compare)

    return prepare


def _benchmark(op: WgmmaOp) -> Benchmark:
    return tensor.tensor_benchmark(
        f"wgmma.{op.precision}", KERNEL, op.precision,
        f"warpgroup wgmma.mma_async m{M}n{N}k{op.k} {op.precision}->fp32 (sm_90a), A and B in shared memory, "
        f"{BLOCKS_PER_SM} warpgroups per SM", _plans(op), _prepare(op), _source(op), (NOT_HOPPER_NOTE,))


BENCHMARKS = [_benchmark(op) for op in OPS]

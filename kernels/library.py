"""Library ceilings: what cuBLAS GEMM achieves, as a reference next to the hand-written kernels.

Square C = A @ B at n = 8192 (4096 when quick; halved until three matrices fit in half the free memory),
on hashed uniform [-1, 1) data, declared as 2*n^3 FLOPs. fp64/fp32/tf32/fp16 go through `cupy.matmul`;
CuPy's per-dtype compute type (global state; float32's is read from CUPY_TF32 on first use) is pinned
around each call: COMPUTE_TYPE_TF32 (CUBLAS_COMPUTE_32F_FAST_TF32) for `cublas.tf32`, COMPUTE_TYPE_DEFAULT
(CUBLAS_COMPUTE_32F / 64F, no TF32) for the others. bf16 calls cublasGemmEx directly (CUDA_R_16BF, fp32
compute): CuPy's own bfloat16 needs the optional ml_dtypes package. See docs/tensor.md.

Check: entries at a few sampled rows x columns against a float64 host product of the same rows and
columns, with a tolerance relative to sum_k |a_ik||b_kj| (the scale of the GEMM rounding error bound).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from common.errors import MissingDependency

from .base import Benchmark, DeviceLimits, Plan, Prepared, Runtime, Work

GEMM_N = 8192
GEMM_N_QUICK = 4096
MIN_N = 512  # below this a GEMM is launch-bound: no ceiling
MEMORY_FRACTION = 0.5  # of free memory for A, B, C: room left for the data-generation temporary and cuBLAS
SAMPLES = 8  # sampled rows and columns of C checked against the host product (SAMPLES^2 entries)
SEED = 0x5EED

# |C - reference| / sum_k |a_ik||b_kj| allowed, per precision. Errors seen in a float64 emulation at
# K=8192, relative to that scale: fp32 sequential accumulation <= 1.2e-7; tf32 input rounding 3e-6 (median)
# to 3.3e-5 (max, truncation); fp16 / bf16 outputs rounded to 11 / 8 bits ~ 1.5e-5 / 1.2e-4. A wrong entry is
# off by ~|C| / scale ~ 1e-2. The fp32 bound is below the tf32 error, so an fp32 GEMM silently run on
# TF32 (NVIDIA_TF32_OVERRIDE, CUPY_TF32) fails its check.
TOLERANCE = {"fp64": 1e-12, "fp32": 1e-6, "tf32": 2e-4, "fp16": 1e-4, "bf16": 5e-4}

BF16_NAN = 0x7FC0

_UNIFORM = r"""
unsigned long long z = (unsigned long long)i + seed * 0x9E3779B97F4A7C15ull;  // splitmix64
z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
z ^= z >> 31;
x = (T)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);  // 53 random bits -> [-1, 1)
"""

FP64_NOTE = ("FP64 tensor cores (DMMA) on CC 8.0, 9.0 and 10.0 only; elsewhere cuBLAS runs fp64 on the FP64 "
             "units, and the roofs file compares it with their peak")


@dataclass(frozen=True)
class LibraryGemm:
    precision: str  # fp64 | fp32 | tf32 | fp16 | bf16
    storage: str  # numpy dtype of A, B, C ("uint16": bf16 bit patterns)
    kernel: str  # "cupy.matmul" | "cublasGemmEx"
    pipe: str
    peak_key: str
    min_cc: tuple[int, int]
    compute_type: str  # what cuBLAS is asked for (recorded in params)
    notes: tuple[str, ...] = ()

    @property
    def itemsize(self) -> int:
        return np.dtype(self.storage).itemsize


GEMMS = (
    LibraryGemm("fp64", "float64", "cupy.matmul", "tensor", "tensor.fp64", (0, 0), "CUBLAS_COMPUTE_64F",
         notes=(FP64_NOTE,)),
    LibraryGemm("fp32", "float32", "cupy.matmul", "cuda-core", "fp32", (0, 0), "CUBLAS_COMPUTE_32F"),
    LibraryGemm("tf32", "float32", "cupy.matmul", "tensor", "tensor.tf32", (8, 0), "CUBLAS_COMPUTE_32F_FAST_TF32",
         notes=("NVIDIA_TF32_OVERRIDE=0 in the environment turns TF32 off inside cuBLAS",)),
    LibraryGemm("fp16", "float16", "cupy.matmul", "tensor", "tensor.fp16", (7, 0), "CUBLAS_COMPUTE_32F",
         notes=("fp16 inputs and output, fp32 accumulation (half the fp16-accumulate rate on GeForce parts)",)),
    LibraryGemm("bf16", "uint16", "cublasGemmEx", "tensor", "tensor.bf16", (8, 0), "CUBLAS_COMPUTE_32F"),
)

LIBRARY_NOTE = "library ceiling: what cuBLAS achieves, not a hand-written microbenchmark"


def gemm_size(gemm: LibraryGemm, free_bytes: int, quick: bool) -> int | None:
    """The largest power-of-two n <= GEMM_N (GEMM_N_QUICK) whose A, B, C fit; None below MIN_N."""
    n = GEMM_N_QUICK if quick else GEMM_N
    while n >= MIN_N and 3 * n * n * gemm.itemsize > MEMORY_FRACTION * free_bytes:
        n //= 2
    return n if n >= MIN_N else None


def _plans(gemm: LibraryGemm) -> Callable[[DeviceLimits, bool], list[Plan]]:
    def plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
        n = gemm_size(gemm, limits.free_bytes, quick)
        if limits.compute_capability < gemm.min_cc or n is None:
            return []
        matrix = n * n * gemm.itemsize
        work = Work(bytes_read=2 * matrix, bytes_written=matrix, flops={gemm.precision: 2 * n**3})
        params = {"m": n, "n": n, "k": n, "storage": gemm.storage, "compute_type": gemm.compute_type}
        # One library call per launch: grid/block do not apply (1, 1); no offline proof (loop_trips None).
        return [Plan(grid=1, block=1, work=work, params=params)]

    return plans


def _cublas():
    try:
        from cupy_backends.cuda.libs import cublas
    except ImportError as exc:
        raise MissingDependency(f"cuBLAS library not found ({str(exc).splitlines()[0]}): "
                                "pip install 'nvidia-cublas==13.*' (CUDA 13 CuPy)") from exc
    return cublas


@contextlib.contextmanager
def _pinned_compute_type(gemm: LibraryGemm):
    """Pin CuPy's GEMM compute type for this dtype during one call (process-global state), then restore it."""
    from cupy._core import _routines_linalg as linalg

    wanted = linalg.COMPUTE_TYPE_TF32 if gemm.precision == "tf32" else linalg.COMPUTE_TYPE_DEFAULT
    previous = linalg.get_compute_type(gemm.storage)  # resolves CUPY_TF32 on first use
    linalg.set_compute_type(gemm.storage, wanted)
    try:
        yield
    finally:
        linalg.set_compute_type(gemm.storage, previous)


def _random_matrix(n: int, gemm: LibraryGemm, seed: int):
    import cupy

    uniform = cupy.ElementwiseKernel("uint64 seed", "T x", _UNIFORM, "ceilings_uniform")
    values = uniform(np.uint64(seed), cupy.empty((n, n), dtype=np.float64 if gemm.precision == "fp64"
                                                    else np.float32))
    if gemm.precision == "bf16":  # bf16 = the top half of the fp32 pattern (truncation; exact reference)
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(gemm.storage, copy=False)


def _as_float64(gemm: LibraryGemm, host: np.ndarray) -> np.ndarray:
    if gemm.precision == "bf16":
        return (host.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return host.astype(np.float64)


def _gemm_call(gemm: LibraryGemm, a, b, c, n: int) -> Callable[[], None]:
    """One C = A @ B, enqueued on the current stream."""
    import cupy

    if gemm.kernel == "cupy.matmul":
        def matmul() -> None:
            with _pinned_compute_type(gemm):
                cupy.matmul(a, b, out=c)

        return matmul

    cublas = _cublas()
    from cupy_backends.cuda.api import runtime

    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)  # host scalars, alive with the closure

    def gemm_ex() -> None:
        # Row-major C = A @ B is column-major C^T = B^T @ A^T: cuBLAS gets B first, no transposes.
        cublas.gemmEx(cupy.cuda.device.get_cublas_handle(), cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, n, n,
                      one.ctypes.data, b.data.ptr, runtime.CUDA_R_16BF, n, a.data.ptr, runtime.CUDA_R_16BF, n,
                      zero.ctypes.data, c.data.ptr, runtime.CUDA_R_16BF, n, cublas.CUBLAS_COMPUTE_32F,
                      cublas.CUBLAS_GEMM_DEFAULT)

    return gemm_ex


def _prepare(gemm: LibraryGemm) -> Callable[[Plan, Runtime], Prepared]:
    def prepare(plan: Plan, runtime: Runtime) -> Prepared:
        import cupy

        _cublas()  # a missing library is a one-line MissingDependency here, not a failed launch later
        n = plan.params["n"]
        with runtime.cupy_stream:
            bufs = {"a": _random_matrix(n, gemm, SEED), "b": _random_matrix(n, gemm, SEED + 1),
                    "c": cupy.empty((n, n), dtype=gemm.storage)}
        call = _gemm_call(gemm, bufs["a"], bufs["b"], bufs["c"], n)
        rows = np.linspace(0, n - 1, SAMPLES).astype(np.int64)  # first and last rows/columns included

        def launch() -> None:
            with runtime.cupy_stream:
                call()

        def poison() -> None:
            with runtime.cupy_stream:
                bufs["c"].fill(BF16_NAN if gemm.precision == "bf16" else np.nan)

        def check() -> str | None:
            with runtime.cupy_stream:
                idx = cupy.asarray(rows)
                a_rows = _as_float64(gemm, bufs["a"][idx].get())
                b_cols = _as_float64(gemm, bufs["b"][:, idx].get())
                got = _as_float64(gemm, bufs["c"][idx][:, idx].get())
            return compare(gemm.precision, got, a_rows, b_cols)

        return Prepared(launch=launch, poison=poison, check=check, release=bufs.clear)

    return prepare


def compare(precision: str, got: np.ndarray, a_rows: np.ndarray, b_cols: np.ndarray) -> str | None:
    """None when every sampled entry is within TOLERANCE of the float64 product, else what is off."""
    want = a_rows @ b_cols
    scale = np.abs(a_rows) @ np.abs(b_cols)
    err = np.abs(got - want) / scale
    bad = ~(err <= TOLERANCE[precision])  # NaN (poison left in place) is bad too
    if not bad.any():
        return None
    i, j = np.unravel_index(np.argmax(np.where(np.isnan(err), np.inf, err)), err.shape)
    return (f"{int(bad.sum())} of {bad.size} sampled entries off; worst: {got[i, j]!r} vs float64 "
            f"{want[i, j]!r} (error {err[i, j]:.2e} of sum|a||b|, tolerance {TOLERANCE[precision]:.0e})")


def _benchmark(gemm: LibraryGemm) -> Benchmark:
    return Benchmark(
        name=f"cublas.{gemm.precision}",
        backend="library",
        kind="compute",
        kernel=gemm.kernel,
        description=(f"library ceiling: cuBLAS {gemm.precision} GEMM (square, {gemm.compute_type}) "
                     f"through {gemm.kernel}"),
        plans=_plans(gemm),
        prepare=_prepare(gemm),
        source=lambda plan: None,  # a library call: nothing to inspect
        precision=gemm.precision,
        pipe=gemm.pipe,
        peak_key=gemm.peak_key,
        group="library",
        notes=(LIBRARY_NOTE, *gemm.notes),
    )


BENCHMARKS = [_benchmark(g) for g in GEMMS]

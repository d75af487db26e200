"""Tensor-core ceilings through hand-written warp-level `mma.sync` (CUDA C, inline PTX; see cuda/tensor.cu).

Each warp keeps one A and one B fragment and NACC accumulator sets in registers and runs one runtime loop
of `trips` iterations over a fully unrolled body of UNROLL x NACC independent mma. Declared work: 2*M*N*K
FLOPs per warp-level mma, by precision (fp16, bf16, tf32, fp8 = e4m3).

Correctness: the fragments hold small integers (exact in every input format, and every product and sum
is exact in fp32), so a verification launch that stores the accumulators is compared for equality with
a numpy reference built from the PTX fragment layouts. The timed launches store nothing (run-time flag).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .base import Benchmark, CudaSource, DeviceLimits, Plan, Prepared, Runtime, Work, launch_dims

CUDA_FILE = "tensor.cu"
KERNEL = "tensor_mma"

M, N = 16, 8  # every mma here is m16n8k<K>
WARP = 32
A_REGS, B_REGS, C_REGS = 4, 2, 4  # 32-bit registers per lane, the same for all four shapes

BLOCK = 128  # 4 warps: one per SM sub-partition
BLOCKS_PER_SM = 4  # 16 warps per SM; the register need (~40 per thread) allows it on every CC >= 8.0
NACC = 4  # independent accumulator sets per warp: with 4 warps per sub-partition, 16 mma in flight
UNROLL = 8  # rounds of NACC mma in the unrolled loop body
TRIPS = 4096  # ~2-3 ms per launch on an A100/H100 at mma.sync rates
TRIPS_QUICK = 512
VERIFY_TRIPS = 2  # the verification launch: every mma of the body, twice, through the loop back-edge

FP8_NOTE = ("mma.sync e4m3 runs natively only on CC 8.9 and 12.x; on Hopper (9.0) and CC 10.x/11.x ptxas "
            "emulates it with fp16 HMMA, so it is not measured there (Hopper fp8 is wgmma only)")


@dataclass(frozen=True)
class TensorOp:
    """One mma.sync flavour: the precision it is declared as and the PTX shape m16n8k<k>."""

    precision: str  # fp16 | bf16 | tf32 | fp8
    struct: str  # the Op struct in cuda/tensor.cu
    k: int
    bits: int  # bits per input element; 32 // bits elements share a 32-bit register
    supported: Callable[[tuple[int, int]], bool]
    notes: tuple[str, ...] = ()

    @property
    def flops_per_mma(self) -> int:
        return 2 * M * N * self.k

    @property
    def per_reg(self) -> int:
        return 32 // self.bits


def _ampere_or_later(cc: tuple[int, int]) -> bool:
    return cc >= (8, 0)  # m16n8k16 bf16 and m16n8k8 tf32 (and k16 fp16 at full rate) need sm_80


def _native_fp8(cc: tuple[int, int]) -> bool:
    # mma.sync e4m3 compiles to QMMA.16832 on sm_89 and sm_120/121. On sm_90/100/103/110, ptxas emulates
    # it (F2FP to fp16, 2 HMMA.16816, FADD into the accumulator; see docs/tensor.md): not an fp8 ceiling.
    return cc == (8, 9) or cc[0] == 12


OPS = (
    TensorOp("fp16", "Fp16", 16, 16, _ampere_or_later),
    TensorOp("bf16", "Bf16", 16, 16, _ampere_or_later),
    TensorOp("tf32", "Tf32", 8, 32, _ampere_or_later),
    TensorOp("fp8", "Fp8", 32, 8, _native_fp8, notes=(FP8_NOTE,)),
)


# ---- fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16 / m16n8k8 / m16n8k32") ----------------

def _lane_ids() -> tuple[np.ndarray, np.ndarray]:
    lane = np.arange(WARP)
    return lane >> 2, lane & 3  # groupID, threadID_in_group


def layout_a(op: TensorOp) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) in the 16xK matrix A of element i of lane l's A fragment, as [32, elements] arrays."""
    g, t = _lane_ids()
    i = np.arange(A_REGS * op.per_reg)
    reg, pos = i // op.per_reg, i % op.per_reg
    row = g[:, None] + 8 * (reg % 2)[None, :]
    col = op.per_reg * t[:, None] + pos[None, :] + (op.k // 2) * (reg // 2)[None, :]
    return row, col


def layout_b(op: TensorOp) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) in the Kx8 matrix B of element i of lane l's B fragment."""
    g, t = _lane_ids()
    i = np.arange(B_REGS * op.per_reg)
    reg, pos = i // op.per_reg, i % op.per_reg
    row = op.per_reg * t[:, None] + pos[None, :] + (op.k // 2) * reg[None, :]
    col = np.broadcast_to(g[:, None], row.shape)
    return row, col


def layout_c() -> tuple[np.ndarray, np.ndarray]:
    """(row, col) in the 16x8 accumulator of element i of lane l's C/D fragment."""
    g, t = _lane_ids()
    i = np.arange(C_REGS)
    return g[:, None] + 8 * (i // 2)[None, :], 2 * t[:, None] + (i % 2)[None, :]


# ---- operand values: small integers, exact in fp16/bf16/tf32/e4m3 and in every fp32 partial sum ----------

def matrix_a(op: TensorOp) -> np.ndarray:
    r, c = np.indices((M, op.k))
    return ((2 * r + 3 * c) % 5 - 2).astype(np.float64)  # -2..2


def matrix_b(op: TensorOp) -> np.ndarray:
    r, c = np.indices((op.k, N))
    return ((r + 2 * c) % 5 - 2).astype(np.float64)


def initial_accumulators(nacc: int) -> np.ndarray:
    """C of accumulator set s, as [nacc, 16, 8]."""
    s, r, c = np.indices((nacc, M, N))
    return ((r + 2 * c + 3 * s) % 7 - 3).astype(np.float64)


def _e4m3_codes() -> dict[float, int]:
    """Every finite e4m3 value -> its byte (bias 7, 3 mantissa bits, subnormals at exponent 0)."""
    codes = {}
    for code in range(256):
        sign, exp, man = code >> 7, (code >> 3) & 0xF, code & 0x7
        if exp == 0xF and man == 0x7:
            continue  # NaN
        mag = (man / 8) * 2.0**-6 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7)
        codes.setdefault(-mag if sign else mag, code)  # +0 (0x00) wins over -0
    return codes


def rounded(op: TensorOp, values: np.ndarray) -> np.ndarray:
    """`values` made exact in the op's input format (fp16 to nearest, bf16 and tf32 truncated, e4m3 to the
    nearest finite value), as float64: what `encode` takes."""
    v = np.asarray(values, dtype=np.float64)
    if op.precision == "fp16":
        return v.astype(np.float16).astype(np.float64)
    if op.precision in ("bf16", "tf32"):
        keep = np.uint32(0xFFFF0000 if op.precision == "bf16" else 0xFFFFE000)
        return (v.astype(np.float32).view(np.uint32) & keep).view(np.float32).astype(np.float64)
    table = np.array(sorted(_e4m3_codes()))
    return table[np.abs(v[..., None] - table).argmin(axis=-1)]


def encode(op: TensorOp, values: np.ndarray) -> np.ndarray:
    """Bit patterns of `values` in the op's input format; ValueError when a value is not exact there (is not
    its own `rounded`)."""
    v = np.asarray(values, dtype=np.float64)
    inexact = ~(rounded(op, v) == v)  # NaN is never exact
    if inexact.any():
        raise ValueError(f"{v[inexact].flat[0]} is not exact in {op.precision}")
    if op.precision == "fp16":
        return v.astype(np.float16).view(np.uint16)
    if op.precision in ("bf16", "tf32"):  # tf32: an fp32 pattern whose low 13 mantissa bits the mma ignores
        bits = v.astype(np.float32).view(np.uint32)
        return (bits >> 16).astype(np.uint16) if op.precision == "bf16" else bits
    return np.vectorize(_e4m3_codes().__getitem__, otypes=[np.uint8])(v)


# Timed launches run on random operands with full mantissas: small constant integers toggle few bits, so the
# tensor cores run cooler and faster on them (an 8192^3 cuBLAS matmul on an A100: 295 TFLOPS on zeros, 257 on
# torch.randn, 13 % less; https://www.thonking.ai/p/strangely-matrix-multiplications, docs/tensor.md; not yet
# measured by this project). The integer operands stay for the check launch, whose result is exact.
RANDOM_SEED = 0x5EED


def random_matrices(op: TensorOp, shape_a: tuple[int, int], shape_b: tuple[int, int]) -> tuple:
    """(A, B): standard normal values rounded to the op's format, every mantissa bit in play."""
    rng = np.random.default_rng(RANDOM_SEED)
    return rounded(op, rng.standard_normal(shape_a)), rounded(op, rng.standard_normal(shape_b))


def pack(bits: np.ndarray, op: TensorOp) -> np.ndarray:
    """[32, elements] element bit patterns -> [32, registers] uint32, element 0 in the low bits."""
    per = op.per_reg
    grouped = bits.astype(np.uint32).reshape(bits.shape[0], -1, per)
    shifts = (np.arange(per, dtype=np.uint32) * op.bits)[None, None, :]
    return np.bitwise_or.reduce(grouped << shifts, axis=2).astype(np.uint32)


def fragments(op: TensorOp, a: np.ndarray | None = None, b: np.ndarray | None = None) -> np.ndarray:
    """The kernel's `frag` input: [6 registers, 32 lanes] uint32, registers a0..a3 then b0..b1; of A and B
    (default: the check's integer matrices)."""
    ra, ca = layout_a(op)
    rb, cb = layout_b(op)
    a = pack(encode(op, (matrix_a(op) if a is None else a)[ra, ca]), op)
    b = pack(encode(op, (matrix_b(op) if b is None else b)[rb, cb]), op)
    return np.ascontiguousarray(np.concatenate([a, b], axis=1).T)


def accumulator_fragments(c: np.ndarray) -> np.ndarray:
    """[nacc, 16, 8] accumulators -> [nacc, 32 lanes, 4] as the lanes hold them."""
    rc, cc = layout_c()
    return c[:, rc, cc]


def expected_accumulators(op: TensorOp, nacc: int, mmas_per_acc: int) -> np.ndarray:
    """[nacc, 32, 4] after `mmas_per_acc` mma into each accumulator set: C + n * (A @ B), exact."""
    d = initial_accumulators(nacc) + mmas_per_acc * (matrix_a(op) @ matrix_b(op))[None]
    return accumulator_fragments(d).astype(np.float32)


# ---- the benchmark ------------------------------------------------------------------------------------------

def _plans(op: TensorOp) -> Callable[[DeviceLimits, bool], list[Plan]]:
    def plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
        if not op.supported(limits.compute_capability):
            return []
        grid = launch_dims(limits, BLOCK, BLOCKS_PER_SM)
        trips = TRIPS_QUICK if quick else TRIPS
        warps = grid * BLOCK // WARP
        flops = warps * trips * UNROLL * NACC * op.flops_per_mma
        # Each thread loads its fragments and initial accumulators once; the timed launches store nothing.
        bytes_read = grid * BLOCK * 4 * (A_REGS + B_REGS + C_REGS * NACC)
        params = {"shape": f"m{M}n{N}k{op.k}", "nacc": NACC, "unroll": UNROLL, "trips": trips,
                  "blocks_per_sm": BLOCKS_PER_SM}
        work = Work(bytes_read=bytes_read, flops={op.precision: flops})
        return [Plan(grid=grid, block=BLOCK, work=work, params=params, loop_trips=trips)]

    return plans


def _source(op: TensorOp) -> Callable[[Plan], CudaSource]:
    def source(plan: Plan) -> CudaSource:
        return CudaSource(CUDA_FILE, f"{KERNEL}<{op.struct}, {plan.params['nacc']}, {plan.params['unroll']}>")

    return source


def _prepare(op: TensorOp) -> Callable[[Plan, Runtime], Prepared]:
    def prepare(plan: Plan, runtime: Runtime) -> Prepared:
        import cupy

        src = _source(op)(plan)
        kernel = runtime.cuda_function(src)
        nacc, unroll = plan.params["nacc"], plan.params["unroll"]
        warps = plan.threads // WARP
        with runtime.cupy_stream:
            bufs = {"frag": cupy.asarray(fragments(op, *random_matrices(op, (M, op.k), (op.k, N)))),
                    "exact": cupy.asarray(fragments(op)),
                    "acc0": cupy.asarray(np.ascontiguousarray(  # the kernel indexes it row-major
                        accumulator_fragments(initial_accumulators(nacc)), dtype=np.float32)),
                    "out": cupy.empty(warps * nacc * WARP * C_REGS, dtype=np.float32)}

        def run(trips: int, store: int, frag: str) -> None:
            with runtime.cupy_stream:
                kernel((plan.grid,), (plan.block,),
                       (bufs[frag], bufs["acc0"], bufs["out"], np.int32(trips), np.int32(store)))

        def compare(got: np.ndarray) -> str | None:
            want = expected_accumulators(op, nacc, VERIFY_TRIPS * unroll)
            bad = np.argwhere(got != want[None])
            if not len(bad):
                return None
            w, s, lane, i = bad[0]
            return (f"{len(bad)} of {got.size} accumulators wrong after a {VERIFY_TRIPS}-trip verification "
                    f"launch; first: warp {w} set {s} lane {lane} c{i} = {got[w, s, lane, i]!r}, "
                    f"expected {want[s, lane, i]!r}")

        return verified_launches(runtime, plan, bufs, run, "frag", VERIFY_TRIPS, (warps, nacc, WARP, C_REGS),
                                 compare)

    return prepare


def verified_launches(runtime: Runtime, plan: Plan, bufs: dict, run: Callable[[int, int, str], None],
                      operands: str, verify_trips: int, shape: tuple[int, ...],
                      compare: Callable[[np.ndarray], str | None]) -> Prepared:
    """How a tensor-core kernel (mma.sync here, wgmma in kernels.wgmma) is launched and checked: `run(trips,
    store, key)` launches it on bufs[key]; the timed launch runs plan.loop_trips trips on bufs[operands] and
    stores nothing; the check poisons bufs["out"], runs verify_trips trips on the exact bufs["exact"] with the
    store on and returns `compare` of the accumulators, reshaped to `shape`."""

    def poison() -> None:
        with runtime.cupy_stream:
            bufs["out"].fill(np.nan)

    def check() -> str | None:
        poison()
        run(verify_trips, 1, "exact")
        with runtime.cupy_stream:
            got = bufs["out"].get().reshape(shape)
        return compare(got)

    return Prepared(launch=lambda: run(plan.loop_trips, 0, operands), poison=poison, check=check,
                    release=bufs.clear)


def tensor_benchmark(name: str, kernel: str, precision: str, description: str, plans, prepare, source,
                     notes) -> Benchmark:
    """A tensor-core ceiling of `precision`: its roof is the datasheet's tensor peak of that type."""
    return Benchmark(name=name, backend="cuda-c", kind="compute", kernel=kernel, description=description,
                     plans=plans, prepare=prepare, source=source, precision=precision, pipe="tensor",
                     peak_key=f"tensor.{precision}", group="tensor", notes=notes)


def _benchmark(op: TensorOp) -> Benchmark:
    return tensor_benchmark(
        f"tensor.{op.precision}", KERNEL, op.precision,
        f"warp-level mma.sync m{M}n{N}k{op.k} {op.precision}->fp32, register operands, {NACC} independent "
        f"accumulators per warp", _plans(op), _prepare(op), _source(op),
        op.notes)  # the Hopper/Blackwell wgmma note is added per device by ceilings.gaps


BENCHMARKS = [_benchmark(op) for op in OPS]

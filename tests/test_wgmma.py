"""Hopper wgmma benchmarks: declared work, the shared-memory image and accumulator layout re-derived from the
PTX ISA, the check, SASS of the loop body (offline), and the real runs (GPU)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from kernels import tensor, wgmma
from kernels.base import REFERENCE_LIMITS, CudaSource, DeviceLimits
from tests.gpu import run_checked
from tests.sass_tools import cuobjdump, loop_counts

H200 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=60 * 2**20, free_bytes=135 * 2**30)
BY_NAME = {b.name: b for b in wgmma.BENCHMARKS}
K_OF = {"bf16": 16, "fp16": 16, "fp8": 32}  # wgmma m64nNk16 for 16-bit inputs, m64nNk32 for e4m3 (PTX ISA)
OP_OF = {op.precision: op for op in wgmma.OPS}


def test_declared_work_on_h200_by_hand():
    (plan,) = BY_NAME["wgmma.bf16"].plans(H200, False)
    # 132 SMs x 3 warpgroups = 396 blocks of 128 threads; 1024 trips x 16 wgmma of 2*64*256*16 = 524288 FLOPs
    assert (plan.grid, plan.block, plan.loop_trips) == (396, 128, 1024)
    assert plan.work.flops == {"bf16": 396 * 1024 * 16 * 524288}
    # each block copies A (64 x 32 B) and B (256 x 32 B) once = 10240 B; nothing is stored in a timed launch
    assert plan.work.bytes_read == 396 * 10240 and plan.work.bytes_written == 0
    (fp8,) = BY_NAME["wgmma.fp8"].plans(H200, True)
    assert fp8.work.flops == {"fp8": 396 * 128 * 16 * (2 * 64 * 256 * 32)} and fp8.params["shape"] == "m64n256k32"


def test_a_launch_lasts_a_few_ms_at_the_dense_peak():
    # H100/H200 SXM dense bf16: 989.4 TFLOP/s at 1830 MHz = 4096 FLOP/clk/SM; fp8 twice that
    for name, per_clock in (("wgmma.bf16", 4096), ("wgmma.fp16", 4096), ("wgmma.fp8", 8192)):
        (plan,) = BY_NAME[name].plans(H200, False)
        seconds = plan.work.total_flops / (per_clock * 132 * 1.83e9)
        assert 2e-3 <= seconds <= 5e-3


@pytest.mark.parametrize("cc", [(8, 0), (8, 9), (10, 0), (12, 0)])
def test_not_planned_off_hopper_with_the_reason(cc):
    other = DeviceLimits(sm_count=100, compute_capability=cc, l2_bytes=2**25, free_bytes=2**34)
    for bench in wgmma.BENCHMARKS:
        assert bench.plans(other, False) == [] and bench.plans(other, True) == []
        assert "sm_90a" in bench.notes[0] and "tcgen05" in bench.notes[0]


def test_reported_on_the_tensor_roof_of_its_type():
    for bench in wgmma.BENCHMARKS:
        precision = bench.name.split(".")[1]
        assert (bench.pipe, bench.group, bench.precision, bench.peak_key) == ("tensor", "tensor", precision,
                                                                              f"tensor.{precision}")


# ---- the operand image, read back the way the PTX ISA describes the descriptor ------------------------------

def _decode(precision: str, raw: bytes) -> float:
    if precision == "fp16":
        return float(np.frombuffer(raw, dtype=np.float16)[0])
    if precision == "bf16":
        return float(np.frombuffer(b"\0\0" + raw, dtype=np.float32)[0])
    code = raw[0]
    sign = -1.0 if code & 0x80 else 1.0
    exp, man = (code >> 3) & 0xF, code & 7
    return sign * ((man / 8) * 2.0**-6 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7))


def _read_k_major(image: bytes, start: int, rows: int, precision: str) -> np.ndarray:
    """A K-major operand as the hardware walks it without swizzle: core matrices of 8 rows x 16 bytes (rows
    16 bytes apart); the core matrix of rows 8i.. and K chunk j starts at start + i * SBO + j * LBO."""
    k, element = K_OF[precision], {"bf16": 2, "fp16": 2, "fp8": 1}[precision]
    per_chunk = 16 // element
    out = np.full((rows, k), np.nan)
    for i in range(rows // 8):
        for j in range(k // per_chunk):
            core = start + i * 256 + j * 128  # SBO = 256, LBO = 128 as encoded in the descriptor
            for r in range(8):
                for e in range(per_chunk):
                    at = core + 16 * r + element * e
                    out[8 * i + r, per_chunk * j + e] = _decode(precision, image[at:at + element])
    return out


@pytest.mark.parametrize("precision", sorted(K_OF))
def test_image_holds_a_then_b_transposed_in_the_descriptor_layout(precision):
    op = OP_OF[precision]
    image = wgmma.operand_image(op).tobytes()
    assert len(image) == (64 + 256) * 32 == 10240  # K x element = 32 bytes per row for every type
    a = _read_k_major(image, 0, 64, precision)
    b_t = _read_k_major(image, 64 * 32, 256, precision)
    np.testing.assert_array_equal(a, wgmma.matrix_a(op))
    np.testing.assert_array_equal(b_t.T, wgmma.matrix_b(op))


def test_image_bytes_by_hand():
    op = OP_OF["bf16"]
    image = wgmma.operand_image(op)
    # A[9][10]: row group 1 (SBO 256), K chunk 1 (LBO 128), row 1 of the core matrix (16), element 2 (x 2 B)
    a = wgmma.matrix_a(op)[9, 10]
    raw = image[256 + 128 + 16 + 4: 256 + 128 + 16 + 6].tobytes()
    assert _decode("bf16", raw) == a
    # B[3][17] is B^T row 17: 2048 + group 2 (512) + chunk 0 + row 1 (16) + element 3 (6)
    raw = image[2048 + 512 + 16 + 6: 2048 + 512 + 16 + 8].tobytes()
    assert _decode("bf16", raw) == wgmma.matrix_b(op)[3, 17]


# ---- the accumulator layout and the expected values ----------------------------------------------------------

def test_accumulator_layout_is_cutlass_clayout_64xn():
    """CUTLASS CLayout_64xN<256> = ((4,8,4),(2,2,32)):((128,1,16),(64,8,512)) maps (thread, register) to
    m + 64 n; thread = t0 + 4 t1 + 32 t2, register = v0 + 2 v1 + 4 v2."""
    row, col = wgmma.layout_d()
    for thread in (0, 1, 5, 37, 127):
        t0, t1, t2 = thread % 4, (thread // 4) % 8, thread // 32
        for reg in (0, 1, 2, 3, 4, 77, 127):
            v0, v1, v2 = reg % 2, (reg // 2) % 2, reg // 4
            index = 128 * t0 + t1 + 16 * t2 + 64 * v0 + 8 * v1 + 512 * v2
            assert (row[thread, reg], col[thread, reg]) == (index % 64, index // 64)
    cells = row * 256 + col
    assert len(np.unique(cells)) == 64 * 256  # every element of D in exactly one register of one thread


@pytest.mark.parametrize("precision", sorted(K_OF))
def test_expected_accumulators_are_exact_and_layout_sensitive(precision):
    op = OP_OF[precision]
    a, b = wgmma.matrix_a(op), wgmma.matrix_b(op)
    assert set(np.unique(a)) == set(np.unique(b)) == {-2.0, -1.0, 0.0, 1.0, 2.0}
    want = wgmma.expected_accumulators(op, 32)
    assert want.dtype == np.float32 and want.shape == (128, 128)
    # thread 37 = warp 1, lane 5: register 6 is row 16 + 1 + 8 = 25, column 8 + 2 + 0 = 10
    assert want[37, 6] == 32 * sum(a[25, k] * b[k, 10] for k in range(op.k))
    assert np.abs(want).max() < 2**13  # every partial sum exact, even under fp8's narrow accumulation
    assert len(np.unique(want)) > 20  # a misplaced row or column changes the values


def test_mismatch_catches_a_dropped_loop_and_names_a_layout_error():
    op = OP_OF["bf16"]
    want = wgmma.expected_accumulators(op, wgmma.VERIFY_TRIPS * wgmma.UNROLL)
    right = np.broadcast_to(want, (3, 128, 128))
    assert wgmma.mismatch(right, want, "x") is None
    one_trip = np.broadcast_to(wgmma.expected_accumulators(op, wgmma.UNROLL), (3, 128, 128))
    text = wgmma.mismatch(one_trip, want, "a 2-trip verification launch")
    assert text.startswith(f"accumulators after a 2-trip verification launch: {3 * 128 * 128 - np.sum(want == 0) * 3} "
                           f"of {3 * 128 * 128} values differ (first at block 0 thread ")
    assert "other places" not in text and "\n" not in text
    poisoned = np.full((3, 128, 128), np.nan, dtype=np.float32)
    assert wgmma.mismatch(poisoned, want, "x").startswith(f"accumulators after x: {3 * 128 * 128} of")
    swapped = right.copy()
    swapped[1] = want[::-1]  # right values, wrong threads
    text = wgmma.mismatch(swapped, want, "x")
    assert "block 1" in text and "layout" in text


# ---- SASS (NVRTC for sm_90a, cuobjdump; counted by tests/sass_tools, not kernels.sass) ------------------------

def _sass(source: CudaSource) -> str:
    pytest.importorskip("cupy")
    from common.errors import MissingDependency

    tool = cuobjdump()
    try:  # the cubin the benchmark loads on a GPU (compiled once per source)
        cubin, _ = wgmma._cubin(source.code, source.file, tuple(source.options), source.name_expression)
    except MissingDependency as exc:
        pytest.skip(str(exc))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "wgmma.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout


OPCODES = {"wgmma.bf16": "HGMMA.64x256x16.F32.BF16", "wgmma.fp16": "HGMMA.64x256x16.F32",
           "wgmma.fp8": "QGMMA.64x256x32.F32.E4M3.E4M3"}


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(OPCODES))
def test_sass_loop_holds_exactly_the_declared_wgmma(name):
    bench = BY_NAME[name]
    (plan,) = bench.plans(REFERENCE_LIMITS["sm_90"], False)
    sass = _sass(bench.source(plan))
    assert "code for sm_90a" in sass
    loop, rest = loop_counts(sass)  # its opcodes end at the shape's first 'x': HGMMA.64
    assert {op: n for op, n in loop.items() if "MMA" in op} == {OPCODES[name].split("x")[0]: plan.params["unroll"]}
    assert not [op for op in rest if "MMA" in op]
    assert not [op for op in loop if op.startswith(("LD", "ST", "F", "H2", "I2F"))]  # shared operands, no copies
    (opcode,) = set(re.findall(r"\b([HQ]GMMA\.[\w.]+)", sass))  # every wgmma, in the loop (above), one shape
    assert opcode == OPCODES[name]
    m, n, k = (int(x) for x in opcode.split(".")[1].split("x"))  # N and K from the mnemonic
    assert (m, n, k) == (64, 256, K_OF[bench.precision])
    warpgroups = plan.grid  # one per block
    assert {bench.precision: plan.params["unroll"] * plan.loop_trips * warpgroups * 2 * m * n * k} == plan.work.flops


@pytest.mark.nvcc
def test_wgmma_needs_the_arch_specific_target():
    """Why the source names -arch=sm_90a: plain sm_90 (what CuPy's RawModule asks NVRTC for) rejects wgmma."""
    (plan,) = BY_NAME["wgmma.bf16"].plans(REFERENCE_LIMITS["sm_90"], False)
    source = BY_NAME["wgmma.bf16"].source(plan)
    plain = CudaSource(source.file, source.name_expression, options=("-std=c++17",))
    with pytest.raises(Exception, match="wgmma.* not supported on .target 'sm_90'"):
        _sass(plain)


@pytest.mark.nvcc
def test_inspect_proves_every_plan_at_sm90_and_plans_none_at_sm80():
    from kernels import inspect as insp

    try:
        insp.find_tool("cuobjdump")
        insp._nvrtc()
    except insp.MissingDependency as exc:
        pytest.skip(str(exc))
    results = insp.inspect_benchmarks(wgmma.BENCHMARKS, ("sm_80", "sm_90"))
    assert {r.arch for r in results} == {"sm_90"} and len(results) == 6  # 3 types x (full, quick)
    for r in results:
        assert r.verdict == "ok", r.reasons
        assert r.registers is not None and r.registers <= 168  # 3 warpgroups of 128 threads per SM
        assert r.loop_work == {OPCODES[r.benchmark]: 16}


# ---- on a GPU --------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_runs_and_checks_on_gpu(name, gpu_limits, gpu_runtime):
    plans = BY_NAME[name].plans(gpu_limits, True)
    if not plans:
        pytest.skip(f"{name}: {BY_NAME[name].notes[0]} (this GPU is CC {gpu_limits.compute_capability})")
    run_checked(BY_NAME[name], plans[0], gpu_runtime)


@pytest.mark.gpu
def test_accumulators_follow_the_trip_count_on_gpu(gpu_limits, gpu_runtime):
    """The check would catch a kernel that ignores `trips`: 1 and 3 trips give 16 and 48 x (A @ B), and the
    loaded cubin is the sm_90a one kernels.inspect proved (its register count)."""
    import cupy

    bench = BY_NAME["wgmma.bf16"]
    plans = bench.plans(gpu_limits, True)
    if not plans:
        pytest.skip(f"{bench.notes[0]} (this GPU is CC {gpu_limits.compute_capability})")
    plan, op = plans[0], OP_OF["bf16"]
    kernel = wgmma.load_kernel(bench.source(plan))
    assert kernel.binary_version == 90 and kernel.num_regs <= 168
    with gpu_runtime.cupy_stream:
        image = cupy.asarray(wgmma.operand_image(op))
        out = cupy.full(plan.grid * 128 * 128, np.nan, dtype=np.float32)
        for trips in (1, 3):
            kernel((plan.grid,), (128,), (image, out, np.int32(trips), np.int32(1)))
            got = out.get().reshape(plan.grid, 128, 128)
            assert wgmma.mismatch(got, wgmma.expected_accumulators(op, trips * wgmma.UNROLL), "x") is None
            assert wgmma.mismatch(got, wgmma.expected_accumulators(op, 2 * wgmma.UNROLL), "x") is not None


def test_the_timed_image_holds_random_operands_the_check_image_the_integers():
    for op in wgmma.OPS:
        exact = wgmma.operand_image(op)
        timed = wgmma.operand_image(op, *tensor.random_matrices(op.element, (wgmma.M, op.k), (op.k, wgmma.N)))
        assert exact.size == timed.size == wgmma.IMAGE_BYTES and not np.array_equal(exact, timed)
        # the integers -2..2 encode to a handful of byte values; full mantissas to most of the 256
        assert len(np.unique(exact)) < 16 < 100 < len(np.unique(timed))

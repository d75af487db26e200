"""Tensor-core mma.sync benchmarks: declared work, fragment layouts, SASS of the loop body, GPU runs."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from kernels import tensor
from kernels.base import REFERENCE_LIMITS, DeviceLimits
from tests.gpu import run_checked
from tests.sass_tools import loop_counts, sass_of

H100 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * 2**20, free_bytes=80 * 2**30)
L40S = DeviceLimits(sm_count=142, compute_capability=(8, 9), l2_bytes=96 * 2**20, free_bytes=46 * 2**30,
                    max_threads_per_sm=1536, shared_bytes_per_sm=100 * 1024)
BY_NAME = {b.name: b for b in tensor.BENCHMARKS}
K_OF = {"fp16": 16, "bf16": 16, "tf32": 8, "fp8": 32}  # mma.m16n8k<K>, from the PTX ISA


def test_declared_flops_h100_fp16_by_hand():
    (plan,) = BY_NAME["tensor.fp16"].plans(H100, False)
    # 132 SMs x 4 blocks x 4 warps = 2112 warps; 4096 trips x 8 rounds x 4 accumulators; 2*16*8*16 per mma
    assert plan.grid == 132 * 4 and plan.block == 128
    assert plan.work.flops == {"fp16": 2112 * 4096 * 32 * 4096}
    # per thread: 4 A + 2 B fragment registers and 4 x 4 initial accumulators, 4 bytes each; no store
    assert plan.work.bytes_read == 132 * 4 * 128 * 22 * 4 and plan.work.bytes_written == 0


@pytest.mark.parametrize("name", ["tensor.fp16", "tensor.bf16", "tensor.tf32"])
@pytest.mark.parametrize("quick", [False, True])
def test_declared_flops_is_2mnk_per_warp_mma(name, quick):
    bench = BY_NAME[name]
    (plan,) = bench.plans(H100, quick)
    precision = name.split(".")[1]
    p = plan.params
    mmas = (plan.grid * plan.block // 32) * plan.loop_trips * p["unroll"] * p["nacc"]
    assert plan.work.flops == {precision: mmas * 2 * 16 * 8 * K_OF[precision]}
    assert plan.grid % H100.sm_count == 0  # every SM gets the same number of blocks
    assert bench.pipe == "tensor" and bench.group == "tensor" and bench.peak_key == name


def test_fp8_only_where_mma_e4m3_is_native():
    fp8 = BY_NAME["tensor.fp8"]
    assert fp8.plans(REFERENCE_LIMITS["sm_80"], False) == []
    assert fp8.plans(H100, False) == []  # Hopper: emulated with fp16 HMMA (test_fp8_sm90_is_emulated)
    (plan,) = fp8.plans(L40S, False)
    assert plan.work.flops == {"fp8": (142 * 4 * 4) * 4096 * 32 * (2 * 16 * 8 * 32)}
    blackwell_client = DeviceLimits(sm_count=70, compute_capability=(12, 0), l2_bytes=2**20, free_bytes=2**34)
    assert len(fp8.plans(blackwell_client, True)) == 1


def test_nothing_before_ampere():
    turing = DeviceLimits(sm_count=40, compute_capability=(7, 5), l2_bytes=4 * 2**20, free_bytes=2**34)
    assert all(b.plans(turing, False) == [] for b in tensor.BENCHMARKS)


# ---- an emulation of one warp's mma from the PTX ISA fragment tables, written out element by element ------

def _a_pos(precision, lane, i):
    g, t = lane >> 2, lane % 4
    if precision in ("fp16", "bf16"):  # a0..a7
        return (g if (i < 2 or 4 <= i < 6) else g + 8), t * 2 + (i & 1) + (8 if i >= 4 else 0)
    if precision == "tf32":  # a0..a3
        return (g if i in (0, 2) else g + 8), t + (4 if i >= 2 else 0)
    return (g if (i < 4 or 8 <= i < 12) else g + 8), t * 4 + (i & 3) + (16 if i >= 8 else 0)  # a0..a15


def _b_pos(precision, lane, i):
    g, t = lane >> 2, lane % 4
    if precision in ("fp16", "bf16"):
        return t * 2 + (i & 1) + (8 if i >= 2 else 0), g
    if precision == "tf32":
        return t + (4 if i >= 1 else 0), g
    return t * 4 + (i & 3) + (16 if i >= 4 else 0), g


def _c_pos(lane, i):
    return (lane >> 2) + (8 if i >= 2 else 0), (lane % 4) * 2 + (i & 1)


def _decode(precision, code):
    if precision == "fp16":
        return float(np.array([code], dtype=np.uint16).view(np.float16)[0])
    if precision == "bf16":
        return float(np.array([code << 16], dtype=np.uint32).view(np.float32)[0])
    if precision == "tf32":
        return float(np.array([code & 0xFFFFE000], dtype=np.uint32).view(np.float32)[0])
    sign = -1.0 if code & 0x80 else 1.0
    exp, man = (code >> 3) & 0xF, code & 7
    return sign * ((man / 8) * 2.0**-6 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7))


def _unpack(precision, regs):
    bits = {"fp16": 16, "bf16": 16, "tf32": 32, "fp8": 8}[precision]
    mask = (1 << bits) - 1
    return [_decode(precision, (int(r) >> shift) & mask) for r in regs for shift in range(0, 32, bits)]


@pytest.mark.parametrize("op", tensor.OPS, ids=lambda op: op.precision)
def test_expected_accumulators_match_an_emulated_mma(op):
    k = K_OF[op.precision]
    frag = tensor.fragments(op)
    a, b = np.full((16, k), np.nan), np.full((k, 8), np.nan)
    for lane in range(32):
        for i, v in enumerate(_unpack(op.precision, frag[:4, lane])):
            r, c = _a_pos(op.precision, lane, i)
            assert np.isnan(a[r, c])
            a[r, c] = v
        for i, v in enumerate(_unpack(op.precision, frag[4:, lane])):
            r, c = _b_pos(op.precision, lane, i)
            assert np.isnan(b[r, c])
            b[r, c] = v
    assert not np.isnan(a).any() and not np.isnan(b).any()  # every element held by exactly one lane
    assert len(np.unique(a)) > 2 and len(np.unique(b)) > 2  # a layout mistake would change the result

    nacc, mmas = 3, 16
    acc0 = tensor.accumulator_fragments(tensor.initial_accumulators(nacc))  # what the kernel loads
    d = a @ b
    want = np.empty((nacc, 32, 4))
    for s in range(nacc):
        for lane in range(32):
            for i in range(4):
                want[s, lane, i] = acc0[s, lane, i] + mmas * d[_c_pos(lane, i)]
    got = tensor.expected_accumulators(op, nacc, mmas)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    assert np.abs(want).max() < 2**13  # exact even with a narrow fp8 accumulator alignment
    assert len(np.unique(d)) > 4  # the product depends on the layout


def test_e4m3_codes_by_hand():
    fp8 = BY_NAME["tensor.fp8"]
    op = next(o for o in tensor.OPS if o.precision == "fp8")
    assert fp8.precision == "fp8"
    got = tensor.encode(op, np.array([1.0, -2.0, 0.5, 0.0, 3.0, 448.0]))
    np.testing.assert_array_equal(got, [0x38, 0xC0, 0x30, 0x00, 0x44, 0x7E])
    with pytest.raises(ValueError, match="17.0 is not exact in fp8"):
        tensor.encode(op, np.array([16.0, 17.0]))  # between 16 and 18: not exact


def test_encode_gives_the_bits_of_exact_values_and_names_an_inexact_one():
    """Hand bits: bf16 1 + 2^-7 is 1.0's 0x3F80 with its last mantissa bit set; tf32 1 + 2^-10 is fp32 1.0
    (0x3F800000) with mantissa bit 13; fp16 -2 is 0xC000. 1 + 2^-9 needs a ninth mantissa bit."""
    by = {op.precision: op for op in tensor.OPS}
    np.testing.assert_array_equal(tensor.encode(by["bf16"], np.array([1 + 2**-7])), [0x3F81])
    np.testing.assert_array_equal(tensor.encode(by["tf32"], np.array([1 + 2**-10])), [0x3F802000])
    np.testing.assert_array_equal(tensor.encode(by["fp16"], np.array([-2.0])), [0xC000])
    with pytest.raises(ValueError, match=f"{1 + 2**-9} is not exact in bf16"):
        tensor.encode(by["bf16"], np.array([1.0, 1 + 2**-9]))
    with pytest.raises(ValueError, match="nan is not exact in fp16"):
        tensor.encode(by["fp16"], np.array([np.nan]))


def test_pack_puts_element_zero_in_the_low_bits():
    op = next(o for o in tensor.OPS if o.precision == "fp16")
    bits = np.array([[0x3C00, 0x4000, 0x0001, 0x8000]], dtype=np.uint16)  # 1.0, 2.0, ..., -0.0
    np.testing.assert_array_equal(tensor.pack(bits, op), [[0x40003C00, 0x80000001]])


# ---- SASS: the loop body holds exactly the mma the plan declares ---------------------------------------------

def _flops_per_thread(opcode: str) -> int:
    shape = re.match(r"[HQ]MMA\.16(8)(\d+)\.", opcode)
    return 2 * 16 * int(shape[1]) * int(shape[2]) // 32


CASES = [("tensor.fp16", "sm_80", REFERENCE_LIMITS["sm_80"], "HMMA.16816.F32"),
         ("tensor.fp16", "sm_90", REFERENCE_LIMITS["sm_90"], "HMMA.16816.F32"),
         ("tensor.bf16", "sm_80", REFERENCE_LIMITS["sm_80"], "HMMA.16816.F32.BF16"),
         ("tensor.bf16", "sm_90", REFERENCE_LIMITS["sm_90"], "HMMA.16816.F32.BF16"),
         ("tensor.tf32", "sm_80", REFERENCE_LIMITS["sm_80"], "HMMA.1688.F32.TF32"),
         ("tensor.tf32", "sm_90", REFERENCE_LIMITS["sm_90"], "HMMA.1688.F32.TF32"),
         ("tensor.fp8", "sm_89", L40S, "QMMA.16832.F32.E4M3.E4M3")]


@pytest.mark.nvcc
@pytest.mark.parametrize("name, arch, limits, opcode", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_sass_loop_holds_the_declared_mma(name, arch, limits, opcode):
    bench = BY_NAME[name]
    (plan,) = bench.plans(limits, False)
    loop, rest = loop_counts(sass_of(bench.source(plan), arch))
    mma = {op: n for op, n in loop.items() if "MMA" in op}
    assert set(mma) == {opcode}
    assert mma[opcode] == plan.params["unroll"] * plan.params["nacc"]
    assert not [op for op in rest if "MMA" in op]
    assert not [op for op in loop if op.startswith(("FADD", "FFMA", "FMUL", "F2FP"))]  # nothing but mma
    flops = mma[opcode] * plan.loop_trips * plan.threads * _flops_per_thread(opcode)
    assert {bench.precision: flops} == dict(plan.work.flops)


@pytest.mark.nvcc
def test_fp8_sm90_is_emulated():
    """Why tensor.fp8 has no Hopper plan: ptxas turns mma e4m3 into F2FP + fp16 HMMA + FADD there."""
    (plan,) = BY_NAME["tensor.fp8"].plans(L40S, False)
    sass = sass_of(BY_NAME["tensor.fp8"].source(plan), "sm_90")
    assert "QMMA" not in sass
    assert "F2FP.F16.E4M3.UNPACK_B" in sass and "HMMA.16816.F32" in sass


# ---- on a GPU --------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_runs_and_checks_on_gpu(name, gpu_limits, gpu_runtime):
    bench = BY_NAME[name]
    plans = bench.plans(gpu_limits, True)
    if not plans:
        pytest.skip(f"{name} has no plan on CC {gpu_limits.compute_capability}")
    run_checked(bench, plans[0], gpu_runtime)


def test_rounded_operands_are_exact_in_each_format():
    """Hand values: e4m3 near 0.3 holds 0.28125 (1.125 x 2^-2) and 0.3125 (1.25 x 2^-2), 0.3125 is nearer;
    bf16 keeps 7 mantissa bits, so 1 + 2^-7 + 2^-9 truncates to 1 + 2^-7; tf32 keeps 10."""
    by = {op.precision: op for op in tensor.OPS}
    assert tensor.rounded(by["fp8"], np.array([0.3]))[0] == 0.3125
    assert tensor.rounded(by["bf16"], np.array([1 + 2**-7 + 2**-9]))[0] == 1 + 2**-7
    assert tensor.rounded(by["tf32"], np.array([1 + 2**-10 + 2**-12]))[0] == 1 + 2**-10
    for op in tensor.OPS:
        a, b = tensor.random_matrices(op, (16, op.k), (op.k, 8))
        tensor.encode(op, a), tensor.encode(op, b)  # raises unless exact
        assert np.isfinite(a).all() and len(np.unique(a)) > 50  # the check operands: 5 integers


def test_timed_launches_use_random_operands_and_the_check_the_exact_ones(monkeypatch):
    from kernels.base import Runtime
    from tests.test_launches import SMALL, FakeArray, FakeCupy

    fake = FakeCupy()
    FakeArray.fake = fake
    monkeypatch.setitem(sys.modules, "cupy", fake)
    bench = next(b for b in tensor.BENCHMARKS if b.name == "tensor.bf16")
    op = next(o for o in tensor.OPS if o.precision == "bf16")
    plan = bench.plans(SMALL, True)[0]
    prepared = bench.prepare(plan, Runtime(simulate=False, cupy_stream=fake.runtime_stream))
    prepared.launch()
    prepared.check()
    timed, checked = (np.asarray(args[0]) for _, _, _, args in fake.launches[-2:])
    exact = tensor.fragments(op)
    assert np.array_equal(checked, exact) and not np.array_equal(timed, exact)
    mantissas = (timed & 0x7F).ravel()  # the low element's 7 bf16 mantissa bits of each register
    assert len(np.unique(mantissas)) > 32  # the integers -2..2 set none of them

"""Peak-FMA kernels: declared work, exact reference, simulator runs of the Numba kernels, SASS of CUDA C."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernels import fma
from kernels.base import REFERENCE_LIMITS, DeviceLimits, Runtime
from tests.gpu import run_checked, skip_if_numba_simulated
from tests.sass_tools import loop_counts, sass_of

H100_LIKE = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * 2**20, free_bytes=80 * 2**30)
SIM_LIMITS = DeviceLimits(sm_count=2, compute_capability=(9, 0), l2_bytes=2**20, free_bytes=2**30, simulate=True)
FLOPS_PER_INSTR = {"fp64.fma": 2, "fp32.fma": 2, "fp16x2.fma": 4, "bf16x2.fma": 4, "int32.mad": 2}


def _by_name(backend):
    return {b.name: b for b in fma.BENCHMARKS if b.backend == backend}


def test_every_ceiling_in_both_backends():
    for backend in ("cuda-c", "numba"):
        assert sorted(_by_name(backend)) == sorted(FLOPS_PER_INSTR)
    assert all(b.simulable == (b.backend == "numba") for b in fma.BENCHMARKS)


@pytest.mark.parametrize("name", sorted(FLOPS_PER_INSTR))
def test_declared_flops_on_an_h100_like_device(name):
    (plan,) = _by_name("cuda-c")[name].plans(H100_LIKE, False)
    # 132 SMs x 2048 threads; K = 8 chains x N = 64 FMAs per trip; no work outside the loop
    assert plan.threads == 132 * 2048
    trips = plan.loop_trips
    assert plan.params["trips"] == trips and trips >= 1
    (flops,) = plan.work.flops.values()
    assert flops == 132 * 2048 * trips * 8 * 64 * FLOPS_PER_INSTR[name]
    assert plan.work.bytes == 0


@pytest.mark.parametrize("name", sorted(FLOPS_PER_INSTR))
def test_launch_lasts_about_two_ms_at_the_datasheet_rate(name):
    # H100 SXM datasheet per SM per clock at 1.98 GHz: 67 TFLOP/s fp32 = 128 FFMA, 34 fp64 = 64 DFMA,
    # 134 fp16/bf16 = 128 HFMA2; IMAD 64 (CUDA C Programming Guide throughput table).
    per_clock = {"fp64.fma": 64, "fp32.fma": 128, "fp16x2.fma": 128, "bf16x2.fma": 128, "int32.mad": 64}[name]
    (plan,) = _by_name("cuda-c")[name].plans(H100_LIKE, False)
    instructions = plan.threads * plan.loop_trips * 8 * 64
    seconds = instructions / (per_clock * 132 * 1.98e9)
    assert 1e-3 <= seconds <= 5e-3


@pytest.mark.parametrize("lane", sorted(fma.LANES))
def test_the_chain_is_an_exact_involution(lane):
    spec = fma.LANES[lane]
    start = spec.decode(fma.start_bits(spec, fma.MAX_CHAINS, 64))
    def step(values):  # one x * a + c of the timed launches, in the lane's precision
        return (values * spec.value(spec.a)[0] + spec.value(spec.c)[0]).astype(values.dtype)

    once, twice = step(start), step(step(start))
    assert np.array_equal(spec.encode(twice), spec.encode(start))
    assert not np.array_equal(spec.encode(once), spec.encode(start))


def test_reference_values_by_hand():
    # the check launch adds 1/64 per FMA (int32: 1)
    # fp32, chain 1 of thread 2: 1 + (4*1 + 2)/64 = 1.09375; after 3 FMAs: 1.09375 + 3/64 = 1.140625
    got = fma.reference(fma.LANES["fp32"], 2, 4, 3).view(np.float32)
    assert got[1, 2] == np.float32(1.140625)
    # fp16x2 chain 0, thread 1: low lane 1 + 1/64, high lane 1.5; after 1 FMA: 1 + 2/64 and 1.5 + 1/64
    pair = fma.reference(fma.LANES["fp16x2"], 1, 2, 1).view(np.float16).reshape(1, 2, 2)
    assert pair[0, 1].tolist() == [1.03125, 1.515625]
    # bf16x2 chain 0 thread 3 after 128 FMAs: low 1 + 3/64 + 2 = 3.046875 (0x4043), high 1.5 + 2 = 3.5 (0x4060)
    assert int(fma.reference(fma.LANES["bf16x2"], 1, 4, 128)[0, 3]) == (0x4060 << 16) | 0x4043
    # int32 chain 2 thread 1: 1 + (4*2 + 1) = 10, after 5 FMAs: 15
    assert int(fma.reference(fma.LANES["int32"], 3, 2, 5)[2, 1]) == 15


@pytest.mark.parametrize("lane", sorted(fma.LANES))
def test_check_reference_is_exact_step_by_step(lane):
    """start + steps x delta (closed form) equals adding delta one FMA at a time in the lane's precision, for
    every count the check launch runs, and every count differs from the one before (nothing is lost)."""
    spec = fma.LANES[lane]
    values = spec.decode(fma.start_bits(spec, fma.MAX_CHAINS, 64))
    one, delta = spec.value(spec.one)[0], spec.value(spec.delta)[0]
    previous = None
    for steps in range(1, fma.CHECK_TRIPS * max(fma.UNROLL.values()) + 1):
        values = (values * one + delta).astype(values.dtype)
        if lane == "bf16x2":  # held in float32 here: round to bf16 (to nearest even) as the hardware does
            values = round_to_bf16(values)
        want = fma.reference(spec, fma.MAX_CHAINS, 64, steps).ravel()
        assert np.array_equal(spec.encode(values).ravel(), want), steps
        assert previous is None or not np.array_equal(want, previous)
        previous = want


def round_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), as float32."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


def test_bf16_rounding_helper_by_hand():
    # 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even -> 1; 1 + 3 x 2^-8 -> 1 + 2^-6
    assert round_to_bf16(np.array([1 + 2**-8, 1 + 3 * 2**-8], np.float32)).tolist() == [1.0, 1 + 2**-6]


def _sim_runtime():
    return Runtime(simulate=True)


@pytest.fixture(scope="module")
def simulator():
    # tests/conftest.py enables the simulator before numba is imported when there is no GPU. Enabling it here
    # on a GPU machine would put numba on the simulator for the whole session (and every subprocess): every
    # later Numba GPU test would be skipped.
    from numba import config

    if not config.ENABLE_CUDASIM:
        pytest.skip("Numba runs on the real GPU in this session (NUMBA_ENABLE_CUDASIM is not 1); "
                    "test_on_the_gpu covers the Numba kernels")


@pytest.mark.sim
@pytest.mark.parametrize("name", sorted(FLOPS_PER_INSTR))
def test_numba_kernel_on_the_simulator(simulator, name):
    bench = _by_name("numba")[name]
    (plan,) = bench.plans(SIM_LIMITS, True)
    assert plan.threads <= 256
    prepared = bench.prepare(plan, _sim_runtime())
    prepared.poison()
    prepared.launch()
    assert prepared.check() is None


@pytest.mark.sim
def test_check_reports_a_wrong_result(simulator, monkeypatch):
    bench = _by_name("numba")["fp32.fma"]
    (plan,) = bench.plans(SIM_LIMITS, True)
    prepared = bench.prepare(plan, _sim_runtime())
    right = fma.reference

    def one_bit_off(*args):  # the kernel's chain 1 of thread 5 now disagrees with the expectation by 1 ulp
        want = right(*args).copy()
        want[1, 5] ^= 1
        return want

    monkeypatch.setattr(fma, "reference", one_bit_off)
    message = prepared.check()
    assert message is not None and "1 of" in message and "chain 1 of thread 5" in message


@pytest.mark.sim
def test_check_catches_a_launch_one_trip_short(simulator, monkeypatch):
    """A kernel that runs fewer FMAs than declared fails the check (the alternation a = -1, c = 3 alone would
    pass any even shortfall)."""
    bench = _by_name("numba")["fp32.fma"]
    (plan,) = bench.plans(SIM_LIMITS, True)
    prepared = bench.prepare(plan, _sim_runtime())
    args = fma._scalar_args

    def one_trip_short(lane, plan, value_type, check):
        *head, trips, store = args(lane, plan, value_type, check)
        return (*head, np.int32(trips - 1), store)

    monkeypatch.setattr(fma, "_scalar_args", one_trip_short)
    message = prepared.check()
    assert message is not None and f"{plan.threads * plan.params['chains']} of" in message


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(FLOPS_PER_INSTR))
def test_cuda_c_loop_body_has_k_times_n_fmas(name):
    bench = _by_name("cuda-c")[name]
    (plan,) = bench.plans(REFERENCE_LIMITS["sm_90"], False)
    loop, _ = loop_counts(sass_of(bench.source(plan)))
    family = fma.LANES[plan.params["lane"]].sass
    counted = sum(n for op, n in loop.items() if op.split(".")[0] == family and not op.startswith("IMAD.MOV"))
    assert counted == plan.params["chains"] * plan.params["unroll"] == 512


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cuda-c", "numba"])
@pytest.mark.parametrize("name", sorted(FLOPS_PER_INSTR))
def test_on_the_gpu(name, backend, gpu_limits, gpu_runtime):
    skip_if_numba_simulated(backend)
    bench = _by_name(backend)[name]
    (plan,) = bench.plans(gpu_limits, True)
    run_checked(bench, plan, gpu_runtime)


@pytest.mark.parametrize("cc, expected", [
    # multiply-add thread-instructions per clock per SM, CUDA C Programming Guide throughput table:
    # GA10x/AD10x run FP32 at 128 lanes, half2 at the FP32 FLOP rate (64 HFMA2), fp64 at 2 lanes
    ((8, 6), {"fp64": 2, "fp32": 128, "fp16x2": 64, "bf16x2": 64, "int32": 64}),
    ((9, 0), {"fp64": 64, "fp32": 128, "fp16x2": 128, "bf16x2": 128, "int32": 64}),
])
def test_launches_are_sized_from_the_architecture_rates(cc, expected):
    limits = dataclasses.replace(H100_LIKE, compute_capability=cc)
    assert {name: fma.instructions_per_clock(lane, limits) for name, lane in fma.LANES.items()} == expected


def test_the_number_of_chains_is_tunable():
    bench = _by_name("cuda-c")["fp32.fma"]
    (plan,) = fma.with_chains(bench, 4).plans(H100_LIKE, False)
    assert plan.params["chains"] == 4
    assert plan.work.flops["fp32"] == plan.threads * plan.loop_trips * 4 * 64 * 2
    assert fma.cuda_source(fma.LANES["fp32"], plan).name_expression == "fma_peak<float, 4, 64, 8>"
    from kernels import stream

    assert fma.with_chains(stream.BENCHMARKS[0], 4) is stream.BENCHMARKS[0]  # not an FMA benchmark
    with pytest.raises(ValueError, match="9 chains per thread: choose 2 to 8"):
        fma.with_chains(bench, 9)

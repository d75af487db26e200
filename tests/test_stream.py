"""DRAM benchmarks (kernels/stream.py): plan arithmetic for H100/H200-like devices (dry runs), Numba kernels
of every variant on the simulator, the dot check's summation-order tolerance, SASS of every CUDA C variant
(NVRTC + cuobjdump, offline), and every benchmark on a real GPU when there is one."""

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kernels import stream
from kernels.base import REFERENCE_LIMITS, DeviceLimits, Plan, Runtime, Work
from tests.gpu import run_checked, skip_if_numba_simulated
from tests.sass_tools import cuobjdump, loop_counts, sass_of

GiB, MiB = 2**30, 2**20
H100 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * MiB, free_bytes=79 * GiB)
# H200 SXM: 132 SMs, 60 MiB of L2 (what the CUDA runtime reports: PyTorch prints L2_cache_size=60MB, 50MB
# for the H100 80GB HBM3), 141 GB of HBM3e (nvidia-smi: 143771 MiB) of which ~139 GiB free
H200 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=60 * MiB, free_bytes=139 * GiB)
SIM = DeviceLimits(sm_count=4, compute_capability=(9, 0), l2_bytes=MiB, free_bytes=GiB, simulate=True)
# arrays read / written per element, and element size, written out independently of the code
ARRAYS = {"dram.read": (1, 0), "dram.write": (0, 1), "dram.copy": (1, 1), "dram.triad": (2, 1),
          "dram.dot": (2, 0)}
FLOAT32 = 4
ELEMENTS_PER_ACCESS = {"cuda-c": 4, "numba": 1}  # float4 / float32
VARIANT_NAMES = {"cuda-c": ("wave", "waves", "deep"), "numba": ("wave", "waves")}
# blocks of 256 threads per SM, by backend, variant and op, written out from the register counts ptxas
# gives (kernels.inspect proves them): {read, write, copy, triad, dot}
BLOCKS_PER_SM = {
    ("cuda-c", "wave"): (4, 4, 4, 4, 4), ("cuda-c", "waves"): (8, 8, 8, 8, 8), ("cuda-c", "deep"): (3, 3, 3, 3, 3),
    ("numba", "wave"): (8, 8, 4, 4, 4), ("numba", "waves"): (8, 8, 6, 4, 8),
}
OP_ORDER = ("dram.read", "dram.write", "dram.copy", "dram.triad", "dram.dot")


def benchmarks(backend=None):
    return [b for b in stream.BENCHMARKS if backend in (None, b.backend)]


def bench_id(b):
    return f"{b.name}:{b.kernel}"


def variant_of(bench):
    return bench.kernel.rsplit("[", 1)[1].rstrip("]")


def test_every_dram_kernel_in_every_variant_of_both_backends():
    assert sorted((b.name, b.backend, variant_of(b)) for b in stream.BENCHMARKS) == sorted(
        (name, backend, v) for name in ARRAYS for backend in ("cuda-c", "numba") for v in VARIANT_NAMES[backend])
    for b in stream.BENCHMARKS:
        assert (b.group, b.level, b.pipe, b.peak_key, b.kind) == ("bandwidth", "dram", "memory", "dram",
                                                                    "bandwidth")
        assert b.simulable == (b.backend == "numba")


@pytest.mark.parametrize("device", [H100, H200], ids=["h100", "h200"])
@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
@pytest.mark.parametrize("bench", stream.BENCHMARKS, ids=bench_id)
def test_plan_declares_exact_bytes_without_tail(bench, quick, device):
    (plan,) = bench.plans(device, quick)
    p = plan.params
    reads, writes = ARRAYS[bench.name]
    per_access = ELEMENTS_PER_ACCESS[bench.backend]
    # every thread runs `trips` trips of `unroll` accesses per array: the array is exactly that, no tail
    assert p["elements"] == plan.grid * plan.block * p["unroll"] * per_access * p["trips"]
    assert plan.loop_trips == p["trips"]
    assert plan.work.bytes_read == p["elements"] * FLOAT32 * reads
    assert plan.work.bytes_written == p["elements"] * FLOAT32 * writes
    array_bytes = p["elements"] * FLOAT32
    # >= 8x L2 and >= 1 GiB, in --quick too (H200: 8 x 60 MiB = 480 MiB, so 1 GiB sets the size)
    assert array_bytes >= 8 * device.l2_bytes and array_bytes >= GiB and not plan.notes
    assert array_bytes < 1.05 * GiB  # rounded up to whole chunks only
    assert array_bytes * (reads + writes) <= 0.5 * device.free_bytes
    # the grid is waves x SMs x blocks per SM: one wave, or 8 for the oversubscribed variant
    waves = 8 if variant_of(bench) == "waves" else 1
    blocks = BLOCKS_PER_SM[bench.backend, variant_of(bench)][OP_ORDER.index(bench.name)]
    assert (plan.waves, p["blocks_per_sm"], plan.grid, plan.block) == (waves, blocks, waves * 132 * blocks, 256)


@pytest.mark.parametrize("bench", benchmarks("cuda-c"), ids=bench_id)
def test_bytes_in_flight_per_sm(bench):
    """Blocks x 256 threads x loads in flight per thread (both arrays of triad and dot) x 16 B: 128 KiB for
    one wave of 4 blocks x 8 loads and for 8 blocks x 4 loads, 192 KiB for 3 blocks x 16 loads; Little's law
    for H200's HBM asks ~12 KiB (4.8e12 / 132 / 1.98e9 ~ 18 B per clock, x ~650 cycles)."""
    (plan,) = bench.plans(H200, False)
    want = {"wave": 128, "waves": 128, "deep": 192}[variant_of(bench)] * 2**10
    assert plan.params["bytes_in_flight_per_sm"] == want
    assert want >= 10 * 4.8e12 / 132 / 1.98e9 * 650


@pytest.mark.parametrize("free", [3 * GiB, 300 * MiB, 5 * MiB])
@pytest.mark.parametrize("bench", stream.BENCHMARKS, ids=bench_id)
def test_plan_shrinks_to_free_memory_and_says_so(bench, free):
    small = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * MiB, free_bytes=free)
    (plan,) = bench.plans(small, False)
    p = plan.params
    reads, writes = ARRAYS[bench.name]
    assert p["elements"] * FLOAT32 * (reads + writes) <= 0.5 * free
    assert p["elements"] == plan.grid * plan.block * p["unroll"] * ELEMENTS_PER_ACCESS[bench.backend] * \
        p["trips"] and p["trips"] >= 1
    # a plan whose arrays came out under 1 GiB (and 8 x 50 MiB) says so: 1.5 GiB still holds one 1 GiB array
    if p["elements"] * FLOAT32 < GiB:
        (note,) = plan.notes
        assert note.startswith("arrays of ") and "free" in note and "L2 hits may raise this rate" in note
    else:
        assert free == 3 * GiB and reads + writes == 1 and plan.notes == ()
    # a grid that shrank below one wave runs in one wave; the waves the plan declares are what it runs
    assert plan.waves == math.ceil(plan.grid / (132 * p["blocks_per_sm"]))


def test_shrunk_note_by_hand():
    (plan,) = stream.BENCHMARKS[0].plans(DeviceLimits(sm_count=132, compute_capability=(9, 0),
                                                      l2_bytes=50 * MiB, free_bytes=1 * GiB), False)
    # dram.read, one wave of 528 blocks x 256 threads x 8 float4 = 16.5 MiB per trip; 512 MiB budget: 31 trips,
    # 511.5 MiB = 10.23x L2
    assert plan.params["trips"] == 31 and plan.params["array_bytes"] == 31 * 528 * 256 * 8 * 16
    assert plan.notes == ("arrays of 512 MiB (10.2x L2), not >= 8x L2 and >= 1 GiB: 1 array in 50% of "
                          "the 1 GiB free; L2 hits may raise this rate",)


# ----------------------------------------------------------------------------------------- simulator

@pytest.fixture
def sim_runtime():
    # tests/conftest.py sets NUMBA_ENABLE_CUDASIM=1 before numba is imported when there is no GPU
    from numba import config

    if not config.ENABLE_CUDASIM:
        pytest.skip("Numba runs on the real GPU in this session (NUMBA_ENABLE_CUDASIM is not 1); "
                    "test_benchmark_on_gpu covers it")
    return Runtime(simulate=True)


@pytest.mark.sim
@pytest.mark.parametrize("bench", benchmarks("numba"), ids=bench_id)
def test_numba_kernel_on_simulator(bench, sim_runtime, monkeypatch):
    (plan,) = bench.plans(SIM, False)
    assert plan.threads <= 256
    # the oversubscribed variant runs another grid shape: twice the blocks of half the threads
    assert (plan.grid, plan.block) == ((8, 32) if variant_of(bench) == "waves" else (4, 64))
    prepared = bench.prepare(plan, sim_runtime)
    prepared.poison()
    prepared.launch()
    assert prepared.check() is None

    # the same check on a corrupted output: one value off by one
    to_host = stream.NumbaDevice.to_host

    def corrupted(self, array):
        host = to_host(self, array).copy()
        host[len(host) // 3] += 1
        return host

    monkeypatch.setattr(stream.NumbaDevice, "to_host", corrupted)
    message = prepared.check()
    assert message and "1 of" in message and bench.name in message
    prepared.release()


@pytest.mark.sim
@pytest.mark.parametrize("bench", [b for b in benchmarks("numba") if b.name != "dram.read"], ids=bench_id)
def test_poison_without_launch_fails_the_check(bench, sim_runtime):
    (plan,) = bench.plans(SIM, False)
    prepared = bench.prepare(plan, sim_runtime)
    prepared.poison()
    assert "nan" in prepared.check()


def test_read_reference_sums_by_hand():
    # 1 trip, grid 2, block 2, unroll 2, scalar: thread t of block b reads (b * 2 + u) * 2 + t
    plan = Plan(grid=2, block=2, work=Work(), params={"trips": 1, "unroll": 2})
    values = np.array([1, 2, 10, 20, 100, 200, 1000, 2000], dtype=np.float32)
    assert list(stream.read_partials(values, plan, 1)) == [11, 22, 1100, 2200]


def test_dot_reference_by_hand():
    # 2 trips, grid 2, block 2, unroll 1, scalar: block b reads elements (k * 2 + b) * 2 + {0, 1} on trip k
    plan = Plan(grid=2, block=2, work=Work(), params={"trips": 2, "unroll": 1})
    a = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=np.float32)
    b = np.array([1, -1, 2, 2, 0, 1, -3, 1], dtype=np.float32)
    sums, magnitudes = stream.block_dots(a, b, plan, 1)
    # block 0: elements 0, 1, 4, 5 -> 1 - 2 + 0 + 6 = 5; block 1: elements 2, 3, 6, 7 -> 6 + 8 - 21 + 8 = 1
    assert list(sums) == [5, 1] and list(magnitudes) == [9, 43]


def test_dot_tolerance_is_zero_where_integers_stay_exact_and_gamma_n_beyond():
    u = 2.0**-24
    mags = np.array([2.0**24, 2.0**24 + 2, 1e9])
    assert list(stream.dot_tolerance(mags, 100, integral=True)) == pytest.approx(
        [0.0, 100 * u / (1 - 100 * u) * (2**24 + 2), 100 * u / (1 - 100 * u) * 1e9])
    assert stream.dot_tolerance(mags[:1], 100, integral=False)[0] == pytest.approx(100 * u / (1 - 100 * u) * 2**24)
    # roundings on the longest path: trips x unroll FMAs, 2 for the float4 fold, log2(256) = 8 halvings
    plan = Plan(grid=1, block=256, work=Work(), params={"trips": 10, "unroll": 4})
    assert stream.dot_roundings(plan, 4) == 10 * 4 + 2 + 8
    assert stream.dot_roundings(plan, 1) == 10 * 4 + 8


def kernel_order_float32_dot(a, b, plan, vector):
    """dram_dot's own summation order in float32 (FMA chains per thread and component, the float4 fold, the
    shared-memory halving), written again with numpy float32 arithmetic."""
    trips, unroll, grid, block = plan.params["trips"], plan.params["unroll"], plan.grid, plan.block
    a = a.reshape(trips, grid, unroll, block, vector).astype(np.float64)
    b = b.reshape(trips, grid, unroll, block, vector).astype(np.float64)
    acc = np.zeros((grid, block, vector), dtype=np.float32)
    for k in range(trips):
        for u in range(unroll):
            acc = (a[k, :, u] * b[k, :, u] + acc).astype(np.float32)  # one rounding per FMA
    if vector == 4:
        sums = (acc[..., 0] + acc[..., 1]) + (acc[..., 2] + acc[..., 3])
    else:
        sums = acc[..., 0]
    half = block // 2
    while half:
        sums[:, :half] = sums[:, :half] + sums[:, half:2 * half]
        half //= 2
    return sums[:, 0]


@pytest.mark.parametrize("vector", [4, 1])
def test_dot_bound_holds_for_float32_sums_of_real_numbers(vector):
    """With inputs that do round (uniform reals), the float32 sum in the kernel's order stays within the
    bound of dot_tolerance; with the benchmark's small integers it is exact and the bound is 0."""
    plan = Plan(grid=3, block=64, work=Work(), params={"trips": 50, "unroll": 4})
    n = 50 * 3 * 4 * 64 * vector
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(0, 1e3, n).astype(np.float32)
    want, magnitude = stream.block_dots(a, b, plan, vector)
    got = kernel_order_float32_dot(a, b, plan, vector)
    bound = stream.dot_tolerance(magnitude, stream.dot_roundings(plan, vector), integral=False)
    assert np.all(np.abs(got - want) <= bound) and np.all(got != want)
    ints_a = stream.pattern(n, seed=3, bits=stream.DOT_PATTERN_BITS)
    ints_b = stream.pattern(n, seed=4, bits=stream.DOT_PATTERN_BITS)
    want, magnitude = stream.block_dots(ints_a, ints_b, plan, vector)
    assert np.array_equal(kernel_order_float32_dot(ints_a, ints_b, plan, vector), want)
    assert not stream.dot_tolerance(magnitude, stream.dot_roundings(plan, vector), integral=True).any()


@pytest.mark.parametrize("device", [H100, H200, *REFERENCE_LIMITS.values()], ids=["h100", "h200", *REFERENCE_LIMITS])
@pytest.mark.parametrize("bench", [b for b in stream.BENCHMARKS if b.name == "dram.dot"], ids=bench_id)
def test_every_planned_dot_is_checked_exactly(bench, device):
    """Inputs 0..3: a block's sum is at most 9 x its elements, under 2^24 in every plan, so the check's
    tolerance is 0 and one element too many or too few is caught."""
    (plan,) = bench.plans(device, False)
    per_block = plan.params["elements"] / plan.grid
    assert (2**stream.DOT_PATTERN_BITS - 1) ** 2 * per_block < 2**24


def test_pattern_small_integers_and_mismatch_message():
    x = stream.pattern(1000, seed=3)
    assert x.dtype == np.float32 and x.min() == 0 and x.max() == 15 and len(np.unique(x)) == 16
    assert set(stream.pattern(1000, seed=3, bits=2)) == {0, 1, 2, 3}
    # shorter patterns are prefixes of the longest one built: the same values, read-only
    long, short = stream.pattern(5000, seed=5), stream.pattern(300, seed=5)
    assert np.array_equal(long[:300], short) and not short.flags.writeable
    assert stream.mismatch("w", np.array([1.0, np.nan, 1.0]), 1.0) == \
        "w: 1 of 3 values differ (first at index 1: got nan, expected 1.0)"
    assert stream.mismatch("w", np.array([1.0, 2.0]), np.array([1.0, 2.0])) is None


def test_dot_mismatch_message():
    got = np.array([5.0, np.nan, 7.0], dtype=np.float32)
    assert stream.dot_mismatch(got, np.array([5.0, 6.0, 7.0]), np.zeros(3)) == (
        "dram.dot block sums: 1 of 3 off by more than the summation-order bound (first: block 1 got nan, "
        "expected 6 +- 0)")
    assert stream.dot_mismatch(got[[0, 2]], np.array([5.5, 7.0]), np.array([0.5, 0.0])) is None


# ----------------------------------------------------------------------------------- SASS (offline)

def memory_ops(counts: Counter) -> Counter:
    return Counter({op: n for op, n in counts.items() if op.startswith(("LDG", "STG", "LDL", "STL"))})


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
@pytest.mark.parametrize("bench", benchmarks("cuda-c"), ids=bench_id)
def test_cuda_c_sass_uses_16_byte_accesses(bench, arch):
    (plan,) = bench.plans(REFERENCE_LIMITS[arch], False)
    inside, outside = loop_counts(sass_of(bench.source(plan), arch))
    reads, writes = ARRAYS[bench.name]
    unroll = plan.params["unroll"]
    expected = Counter({"LDG.E.128.CONSTANT": unroll * reads, "STG.E.128": unroll * writes})
    assert memory_ops(inside) == +expected  # and no spill (LDL/STL) anywhere
    # the only accesses outside the loop: dram.read's per-thread sum (stored when the flag is set) and
    # dram.dot's per-block sum (thread 0)
    assert memory_ops(outside) == (Counter({"STG.E": 1}) if bench.name in ("dram.read", "dram.dot") else Counter())
    if bench.name == "dram.dot":  # each thread's float4 FMA chains, then the block's shared-memory sum
        assert inside["FFMA"] == 4 * unroll and outside["BAR.SYNC.DEFER_BLOCKING"] + outside["BAR.SYNC"] == 8


NUMBA_SASS = textwrap.dedent("""
    import json, subprocess, sys, tempfile
    from numba import cuda
    from kernels import numba_stream
    out = {}
    for key in json.loads(sys.argv[2]):
        name, cap = key.split(":")
        ptx, _ = cuda.compile_ptx(numba_stream.KERNELS[name], numba_stream.SIGNATURES[name], cc=(9, 0))
        with tempfile.TemporaryDirectory() as tmp:
            open(tmp + "/k.ptx", "w").write(ptx)
            subprocess.run(["ptxas", "-arch=sm_90", "--maxrregcount", cap, "-o", tmp + "/k.cubin",
                            tmp + "/k.ptx"], check=True)
            out[key] = subprocess.run([sys.argv[1], "-sass", tmp + "/k.cubin"], check=True,
                                      capture_output=True, text=True).stdout
    print(json.dumps(out))
""")


@pytest.mark.nvcc
def test_numba_sass_has_one_trip_loop():
    """NVVM unrolls short loops itself; the unroll factors are chosen so that it does not. Each kernel is
    compiled with the register cap of each variant's plan: none spills."""
    tool = cuobjdump()
    if not shutil.which("ptxas"):
        pytest.skip("ptxas not on PATH")
    keys = {}
    for bench in benchmarks("numba"):
        (plan,) = bench.plans(REFERENCE_LIMITS["sm_90"], False)
        op = bench.name.split(".")[1]
        keys[f"{op}:{stream.numba_source(stream.OPS[op], plan).max_registers}"] = bench
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}  # this process runs the simulator
    run = subprocess.run([sys.executable, "-c", NUMBA_SASS, str(tool), json.dumps(sorted(keys))], check=False,
                         capture_output=True, text=True, env=env, cwd=Path(__file__).parents[1])
    if run.returncode and "NVVM" in run.stderr:
        pytest.skip("libNVVM not found (pip install nvidia-nvvm==13.0.*)")
    assert run.returncode == 0, run.stderr[-2000:]
    for key, bench in keys.items():
        op = key.split(":")[0]
        inside, outside = loop_counts(json.loads(run.stdout)[key])
        reads, writes = ARRAYS[bench.name]
        unroll = stream.NUMBA_UNROLL[op]
        assert memory_ops(inside) == +Counter({"LDG.E": unroll * reads, "STG.E": unroll * writes}), key
        assert memory_ops(outside) == (Counter({"STG.E": 1}) if op in ("read", "dot") else Counter()), key


# --------------------------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("bench", stream.BENCHMARKS, ids=bench_id)
def test_benchmark_on_gpu(bench, gpu_limits, gpu_runtime):
    skip_if_numba_simulated(bench.backend)
    (plan,) = bench.plans(gpu_limits, True)
    run_checked(bench, plan, gpu_runtime)


@pytest.mark.gpu
@pytest.mark.parametrize("bench", [b for b in stream.BENCHMARKS if variant_of(b) == "waves"], ids=bench_id)
def test_oversubscribed_grid_runs_its_declared_waves_on_gpu(bench, gpu_limits, gpu_runtime):
    """What kernels.inspect proves from ptxas offline, from the registers the run's own compile gave: the
    grid runs in exactly plan.waves waves of every SM's resident blocks."""
    skip_if_numba_simulated(bench.backend)
    from kernels.inspect import blocks_that_fit

    (plan,) = bench.plans(gpu_limits, True)
    if bench.backend == "cuda-c":
        kernel = gpu_runtime.cuda_function(bench.source(plan))
        registers, shared = kernel.num_regs, kernel.shared_size_bytes
    else:
        kernel = gpu_runtime.numba_kernel(bench.source(plan))
        registers, shared = kernel.get_regs_per_thread(), kernel.get_shared_mem_per_block()
        if isinstance(registers, dict):  # one entry per compiled signature: there is one
            (registers,), (shared,) = registers.values(), shared.values()
    fits = blocks_that_fit(gpu_limits, plan.block, registers, shared)
    assert fits == plan.params["blocks_per_sm"]
    assert math.ceil(plan.grid / (gpu_limits.sm_count * fits)) == plan.waves == 8


def test_runtime_compiles_numba_kernels_with_their_register_cap(monkeypatch):
    """On a GPU the cap goes to cuda.jit (max_registers); the simulator's jit has no such option."""
    from numba import cuda

    from kernels.base import NumbaSource

    calls = []
    monkeypatch.setattr(cuda, "jit", lambda signature, **options: calls.append(options) or (lambda f: f))
    source = NumbaSource(lambda: None, "void()", max_registers=64)
    Runtime(simulate=False).numba_kernel(source)
    Runtime(simulate=True).numba_kernel(source)
    assert calls == [{"max_registers": 64}, {}]


def test_numba_register_caps_follow_each_variants_blocks():
    """64 K registers / (256 threads x planned blocks per SM), in units of 8."""
    def caps(variant, arch):
        return [stream.numba_source(stream.OPS[op.split(".")[1]], stream.dram_plan(
            stream.OPS[op.split(".")[1]], "numba", REFERENCE_LIMITS[arch], False, variant)).max_registers
            for op in OP_ORDER]

    wave, waves = stream.NUMBA_VARIANTS
    assert caps(wave, "sm_90") == [32, 32, 64, 64, 64]
    assert caps(waves, "sm_90") == [32, 32, 40, 64, 32]  # 65536 / (256 x 6) = 42.7 -> 40
    assert caps(waves, "sm_80") == [32, 32, 40, 128, 32]  # the sm_80 triad: 2 blocks

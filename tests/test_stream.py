"""DRAM benchmarks (kernels/stream.py): plan arithmetic, Numba kernels on the simulator, SASS of the
CUDA C kernels (NVRTC + cuobjdump, offline), and every CUDA C benchmark on a real GPU when there is one."""

import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kernels import stream
from kernels.base import REFERENCE_LIMITS, DeviceLimits, Runtime
from tests.gpu import run_checked, skip_if_numba_simulated
from tests.sass_tools import cuobjdump, loop_counts, sass_of

GiB, MiB = 2**30, 2**20
H100 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * MiB, free_bytes=79 * GiB)
SIM = DeviceLimits(sm_count=4, compute_capability=(9, 0), l2_bytes=MiB, free_bytes=GiB, simulate=True)
# arrays read / written per element, and element size, written out independently of the code
ARRAYS = {"dram.read": (1, 0), "dram.write": (0, 1), "dram.copy": (1, 1), "dram.triad": (2, 1)}
FLOAT32 = 4
ELEMENTS_PER_ACCESS = {"cuda-c": 4, "numba": 1}  # float4 / float32


def benchmarks(backend=None):
    return [b for b in stream.BENCHMARKS if backend in (None, b.backend)]


def test_every_dram_kernel_in_both_backends():
    assert sorted((b.name, b.backend) for b in stream.BENCHMARKS) == sorted(
        (name, backend) for name in ARRAYS for backend in ("cuda-c", "numba"))
    for b in stream.BENCHMARKS:
        assert (b.group, b.level, b.pipe, b.peak_key, b.kind) == ("bandwidth", "dram", "memory", "dram",
                                                                    "bandwidth")
        assert b.simulable == (b.backend == "numba")


@pytest.mark.parametrize("bench", stream.BENCHMARKS, ids=lambda b: f"{b.name}:{b.backend}")
def test_plan_declares_exact_bytes_without_tail_for_h100(bench):
    (plan,) = bench.plans(H100, False)
    p = plan.params
    reads, writes = ARRAYS[bench.name]
    per_access = ELEMENTS_PER_ACCESS[bench.backend]
    # every thread runs `trips` trips of `unroll` accesses per array: the array is exactly that, no tail
    assert p["elements"] == plan.grid * plan.block * p["unroll"] * per_access * p["trips"]
    assert plan.loop_trips == p["trips"]
    assert plan.work.bytes_read == p["elements"] * FLOAT32 * reads
    assert plan.work.bytes_written == p["elements"] * FLOAT32 * writes
    array_bytes = p["elements"] * FLOAT32
    assert array_bytes >= 8 * 50 * MiB and array_bytes >= GiB
    assert array_bytes * (reads + writes) <= 0.5 * 79 * GiB
    assert plan.grid == 132 * p["blocks_per_sm"]


@pytest.mark.parametrize("bench", stream.BENCHMARKS, ids=lambda b: f"{b.name}:{b.backend}")
def test_quick_plan_still_four_times_l2(bench):
    (plan,) = bench.plans(H100, True)
    assert 4 * 50 * MiB <= plan.params["elements"] * FLOAT32 < GiB


@pytest.mark.parametrize("free", [3 * GiB, 300 * MiB, 5 * MiB])
@pytest.mark.parametrize("bench", stream.BENCHMARKS, ids=lambda b: f"{b.name}:{b.backend}")
def test_plan_shrinks_to_free_memory(bench, free):
    small = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * MiB, free_bytes=free)
    (plan,) = bench.plans(small, False)
    p = plan.params
    reads, writes = ARRAYS[bench.name]
    assert p["elements"] * FLOAT32 * (reads + writes) <= 0.5 * free
    assert p["elements"] == plan.grid * plan.block * p["unroll"] * ELEMENTS_PER_ACCESS[bench.backend] * \
        p["trips"] and p["trips"] >= 1


# ----------------------------------------------------------------------------------------- simulator

@pytest.fixture
def sim_runtime():
    # tests/conftest.py sets NUMBA_ENABLE_CUDASIM=1 before numba is imported when there is no GPU
    from numba import config

    if not config.ENABLE_CUDASIM:
        pytest.skip("Numba runs on the real GPU in this session (NUMBA_ENABLE_CUDASIM is not 1); "
                    "test_numba_benchmark_on_gpu covers it")
    return Runtime(simulate=True)


@pytest.mark.sim
@pytest.mark.parametrize("bench", benchmarks("numba"), ids=lambda b: b.name)
def test_numba_kernel_on_simulator(bench, sim_runtime, monkeypatch):
    (plan,) = bench.plans(SIM, False)
    assert plan.threads <= 256
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
@pytest.mark.parametrize("bench", [b for b in benchmarks("numba") if b.name != "dram.read"],
                         ids=lambda b: b.name)
def test_poison_without_launch_fails_the_check(bench, sim_runtime):
    (plan,) = bench.plans(SIM, False)
    prepared = bench.prepare(plan, sim_runtime)
    prepared.poison()
    assert "nan" in prepared.check()


def test_read_reference_sums_by_hand():
    # 1 trip, grid 2, block 2, unroll 2, scalar: thread t of block b reads (b * 2 + u) * 2 + t
    plan = stream.Plan(grid=2, block=2, work=stream.Work(), params={"trips": 1, "unroll": 2})
    values = np.array([1, 2, 10, 20, 100, 200, 1000, 2000], dtype=np.float32)
    assert list(stream.read_partials(values, plan, 1)) == [11, 22, 1100, 2200]


def test_pattern_small_integers_and_mismatch_message():
    x = stream.pattern(1000, seed=3)
    assert x.dtype == np.float32 and x.min() == 0 and x.max() == 15 and len(np.unique(x)) == 16
    assert stream.mismatch("w", np.array([1.0, np.nan, 1.0]), 1.0) == \
        "w: 1 of 3 values differ (first at index 1: got nan, expected 1.0)"
    assert stream.mismatch("w", np.array([1.0, 2.0]), np.array([1.0, 2.0])) is None


# ----------------------------------------------------------------------------------- SASS (offline)

def memory_ops(counts: Counter) -> Counter:
    return Counter({op: n for op, n in counts.items() if op.startswith(("LDG", "STG", "LDL", "STL"))})


@pytest.mark.nvcc
@pytest.mark.parametrize("bench", benchmarks("cuda-c"), ids=lambda b: b.name)
def test_cuda_c_sass_uses_16_byte_accesses(bench):
    (plan,) = bench.plans(REFERENCE_LIMITS["sm_90"], False)
    inside, outside = loop_counts(sass_of(bench.source(plan)))
    reads, writes = ARRAYS[bench.name]
    unroll = plan.params["unroll"]
    expected = Counter({"LDG.E.128.CONSTANT": unroll * reads, "STG.E.128": unroll * writes})
    assert memory_ops(inside) == +expected
    # the only access outside the loop: dram.read's per-thread sum, stored when the flag is set
    assert memory_ops(outside) == (Counter({"STG.E": 1}) if bench.name == "dram.read" else Counter())


NUMBA_SASS = textwrap.dedent("""
    import json, subprocess, sys, tempfile
    from numba import cuda
    from kernels import numba_stream
    out = {}
    for name in ("read", "write", "copy", "triad"):
        ptx, _ = cuda.compile_ptx(numba_stream.KERNELS[name], numba_stream.SIGNATURES[name], cc=(9, 0))
        with tempfile.TemporaryDirectory() as tmp:
            open(tmp + "/k.ptx", "w").write(ptx)
            subprocess.run(["ptxas", "-arch=sm_90", "-o", tmp + "/k.cubin", tmp + "/k.ptx"], check=True)
            out[name] = subprocess.run([sys.argv[1], "-sass", tmp + "/k.cubin"], check=True,
                                       capture_output=True, text=True).stdout
    print(json.dumps(out))
""")


@pytest.mark.nvcc
def test_numba_sass_has_one_trip_loop():
    """NVVM unrolls short loops itself; the unroll factors are chosen so that it does not."""
    import json
    import shutil

    tool = cuobjdump()
    if not shutil.which("ptxas"):
        pytest.skip("ptxas not on PATH")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}  # this process runs the simulator
    run = subprocess.run([sys.executable, "-c", NUMBA_SASS, str(tool)], check=False, capture_output=True,
                         text=True, env=env, cwd=Path(__file__).parents[1])
    if run.returncode and "NVVM" in run.stderr:
        pytest.skip("libNVVM not found (pip install nvidia-nvvm==13.0.*)")
    assert run.returncode == 0, run.stderr[-2000:]
    for bench in benchmarks("numba"):
        op = bench.name.split(".")[1]
        inside, outside = loop_counts(json.loads(run.stdout)[op])
        reads, writes = ARRAYS[bench.name]
        unroll = stream.NUMBA_UNROLL[op]
        assert memory_ops(inside) == +Counter({"LDG.E": unroll * reads, "STG.E": unroll * writes}), op
        assert memory_ops(outside) == (Counter({"STG.E": 1}) if op == "read" else Counter()), op


# --------------------------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("bench", stream.BENCHMARKS, ids=lambda b: f"{b.name}:{b.backend}")
def test_benchmark_on_gpu(bench, gpu_limits, gpu_runtime):
    skip_if_numba_simulated(bench.backend)
    (plan,) = bench.plans(gpu_limits, True)
    run_checked(bench, plan, gpu_runtime)


def test_runtime_compiles_numba_kernels_with_their_register_cap(monkeypatch):
    """On a GPU the cap goes to cuda.jit (max_registers); the simulator's jit has no such option."""
    from numba import cuda

    from kernels.base import NumbaSource, Runtime

    calls = []
    monkeypatch.setattr(cuda, "jit", lambda signature, **options: calls.append(options) or (lambda f: f))
    source = NumbaSource(lambda: None, "void()", max_registers=64)
    Runtime(simulate=False).numba_kernel(source)
    Runtime(simulate=True).numba_kernel(source)
    assert calls == [{"max_registers": 64}, {}]

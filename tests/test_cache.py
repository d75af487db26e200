"""Cache benchmarks (kernels/cache.py): sweep and plan arithmetic, the host reference of the check against
a direct loop over threads, SASS of cache_read (offline), and the benchmarks on a real GPU if there is one."""

import math

import numpy as np
import pytest

from kernels import cache
from kernels.base import REFERENCE_LIMITS, DeviceLimits
from tests.gpu import run_checked
from tests.sass_tools import loop_counts, sass_of
from tests.test_stream import memory_ops

KiB, MiB, GiB = 2**10, 2**20, 2**30
H100 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * MiB, free_bytes=79 * GiB)
SIM = DeviceLimits(sm_count=4, compute_capability=(9, 0), l2_bytes=MiB, free_bytes=GiB, simulate=True)
H200 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=60 * MiB, free_bytes=139 * GiB)
H100_L1_BYTES_PER_S = 33e12  # 132 SMs x 128 B/clk x 1.98 GHz
FLOAT4 = 16
BY_NAME = {b.name: b for b in cache.BENCHMARKS}
# Little's law per SM, from the published figures (docs/bandwidth.md): H200 L2 at small footprints 13.5 TB/s
# (gpu-benches gpu-l2-cache) over 132 SMs at 1.98 GHz, times a far-partition L2 hit of 475 cycles (H100,
# gpu-benches gpu-latency): ~24.5 KB; x4 for the burst of loads a thread waits on and for latency under load
L2_LITTLE_BYTES_PER_SM = 13.5e12 / 132 / 1.98e9 * 475


def test_benchmarks_registered():
    assert set(BY_NAME) == {"l1.read", "l2.read", "l2.read.near", "bandwidth.working_set"}
    assert [BY_NAME[n].level for n in ("l1.read", "l2.read", "l2.read.near")] == ["l1", "l2", "l2"]
    sweep = BY_NAME["bandwidth.working_set"]
    assert sweep.is_sweep and (sweep.sweep_x.name, sweep.sweep_x.unit) == ("working set", "B")
    assert all(b.backend == "cuda-c" and b.kind == "bandwidth" for b in cache.BENCHMARKS)


def check_declared_work(plan, unroll):
    p = plan.params
    assert p["unroll"] == unroll
    loads = plan.grid * plan.block * unroll * p["trips"]  # `unroll` float4 loads per thread per trip
    assert plan.work.bytes_read == loads * FLOAT4 and plan.work.bytes_written == 0
    assert plan.work.flops == {"fp32": loads * 4}  # one FADD per float
    assert plan.loop_trips == p["trips"]
    ring_chunks = p["chunks"] * (plan.grid if p["partitioned"] else 1)
    assert p["working_set_bytes"] == ring_chunks * 32 * unroll * FLOAT4  # whole chunks of one warp's trip


def test_sweep_spans_few_kib_to_8x_l2_log_spaced():
    sweep = BY_NAME["bandwidth.working_set"]
    plans = sweep.plans(H100, False)
    sizes = [sweep.sweep_x_of(p) for p in plans]
    assert sizes[0] <= 8 * KiB and sizes[-1] >= 8 * 50 * MiB
    assert sizes == sorted(set(sizes))
    octaves = math.log2(sizes[-1] / sizes[0])
    assert 3.5 * octaves <= len(plans) <= 4.5 * octaves
    ratios = np.diff(np.log2(sizes[8:]))  # past the smallest sizes, which round to whole chunks
    assert np.all(np.abs(ratios - 0.25) < 0.05)
    for plan in plans:
        check_declared_work(plan, 8)  # one block of 1024 threads per SM: 8 float4 each, 128 KiB per SM
        assert plan.work.bytes_read >= H100_L1_BYTES_PER_S * 1e-3  # >= ~1 ms even at L1 speed
        assert plan.grid == 132 and plan.block == 1024
        # per-block partitions only when one is >= 2x a Hopper L1 (256 KiB)
        per_block = plan.params["working_set_bytes"] / 132
        assert per_block >= 510 * KiB if plan.params["partitioned"] else per_block < 512 * KiB
    assert len(sweep.plans(H100, True)) < len(plans) * 0.6


def test_sweep_fits_small_free_memory():
    small = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * MiB, free_bytes=200 * MiB)
    plans = BY_NAME["bandwidth.working_set"].plans(small, False)
    assert plans and max(p.params["working_set_bytes"] for p in plans) <= 100 * MiB


@pytest.mark.parametrize("device", [H100, H200], ids=["h100", "h200"])
def test_l2_and_l1_sets(device):
    l2_bytes = device.l2_bytes
    (l2,) = BY_NAME["l2.read"].plans(device, False)
    check_declared_work(l2, 4)  # two blocks of 1024 threads per SM: 4 float4 each, 128 KiB per SM
    assert abs(l2.params["working_set_bytes"] - 0.4 * l2_bytes) < 2 * KiB  # whole-L2 (far) plateau
    assert l2.grid == 2 * 132 and l2.params["bypass_l1"] and not l2.params["partitioned"]
    (near,) = BY_NAME["l2.read.near"].plans(device, False)
    check_declared_work(near, 4)
    assert abs(near.params["working_set_bytes"] - l2_bytes / 32) < 2 * KiB  # H200: 1.9 MiB
    assert (near.grid, near.block, near.params["bypass_l1"]) == (l2.grid, l2.block, True)
    (l1,) = BY_NAME["l1.read"].plans(device, False)
    check_declared_work(l1, 8)
    assert l1.grid == 132 and l1.params["chunks"] * 4 * KiB == 32 * KiB and l1.params["partitioned"]
    assert not l1.params["bypass_l1"]


@pytest.mark.parametrize("name", ["l1.read", "l2.read", "l2.read.near", "bandwidth.working_set"])
def test_bytes_in_flight_follow_littles_law(name):
    """Each SM keeps >= 4x the Little's-law need in flight, and half as many loads per thread would not."""
    for plan in BY_NAME[name].plans(H200, True):
        per_sm = plan.params["blocks_per_sm"] * plan.block * plan.params["unroll"] * FLOAT4
        assert plan.params["bytes_in_flight_per_sm"] == per_sm == 128 * KiB
        assert per_sm >= 4 * L2_LITTLE_BYTES_PER_SM > per_sm / 2


def test_blocks_per_sm_capped_on_1536_thread_sms():
    ada = REFERENCE_LIMITS["sm_89"]
    (l2,) = BY_NAME["l2.read"].plans(ada, False)
    assert l2.grid == ada.sm_count and l2.params["blocks_per_sm"] == 1
    assert l2.params["unroll"] == 8  # one block of 1024 per SM: twice the loads per thread of two blocks


def brute_force_partials(host_set, plan, trips):
    """The kernel's addressing, one thread at a time, with its own wrap-around of the chunk index."""
    p = plan.params
    vec = host_set.reshape(-1, 4)
    chunks, warps, unroll = p["chunks"], plan.block // 32, p["unroll"]
    out = np.zeros(plan.grid * plan.block)
    for b in range(plan.grid):
        for t in range(plan.block):
            w, lane = divmod(t, 32)
            c = (b * chunks // plan.grid + w) % chunks
            for _ in range(trips):
                for u in range(unroll):
                    out[b * plan.block + t] += vec[b * p["region_float4"] + c * 32 * unroll + u * 32 + lane].sum()
                c += warps % chunks
                if c >= chunks:
                    c -= chunks
    return out


@pytest.mark.parametrize("size,partitioned", [(4 * KiB, False), (14 * KiB, False), (16 * KiB, True)])
def test_check_reference_matches_a_direct_loop(size, partitioned):
    plan = cache.cache_plan(SIM, set_bytes=size, blocks_per_sm=1, partitioned=partitioned, bypass_l1=False)
    assert plan.grid == 4 and plan.block == 64
    host = cache.pattern(plan.params["working_set_bytes"] // 4)
    trips = 5
    assert np.array_equal(cache.expected_partials(host, plan, trips), brute_force_partials(host, plan, trips))


@pytest.mark.parametrize("size,partitioned", [(40 * KiB, False), (96 * KiB, True)])
def test_check_reference_matches_a_direct_loop_with_eight_loads_per_thread(size, partitioned):
    """The real block of 1024 threads with 8 float4 each (4 KiB chunks), on a two-SM device."""
    two_sms = DeviceLimits(sm_count=2, compute_capability=(9, 0), l2_bytes=MiB, free_bytes=GiB)
    plan = cache.cache_plan(two_sms, set_bytes=size, blocks_per_sm=1, partitioned=partitioned, bypass_l1=False)
    assert (plan.grid, plan.block, plan.params["unroll"], plan.params["chunk_bytes"]) == (2, 1024, 8, 4 * KiB)
    host = cache.pattern(plan.params["working_set_bytes"] // 4)
    assert np.array_equal(cache.expected_partials(host, plan, 3), brute_force_partials(host, plan, 3))


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
@pytest.mark.parametrize("name,load", [("l1.read", "LDG.E.128.CONSTANT"), ("l2.read", "LDG.E.128.STRONG.GPU"),
                                       ("l2.read.near", "LDG.E.128.STRONG.GPU"),
                                       ("bandwidth.working_set", "LDG.E.128.CONSTANT")])
def test_cache_read_sass(name, load, arch):
    plan = BY_NAME[name].plans(REFERENCE_LIMITS[arch], True)[0]
    inside, outside = loop_counts(sass_of(BY_NAME[name].source(plan), arch))
    # 8 loads with one block of 1024 per SM (sm_89 also for L2: 1536 threads hold one), 4 with two
    assert memory_ops(inside) == {load: 4 if name.startswith("l2") and arch != "sm_89" else 8}  # no spills
    assert memory_ops(outside) == {"STG.E": 1}  # the per-thread sum, stored when the flag is set


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["l1.read", "l2.read", "l2.read.near", "bandwidth.working_set"])
def test_cache_benchmark_on_gpu(name, gpu_limits, gpu_runtime):
    plans = BY_NAME[name].plans(gpu_limits, True)
    for plan in {id(p): p for p in (plans[0], plans[len(plans) // 2], plans[-1])}.values():
        run_checked(BY_NAME[name], plan, gpu_runtime)

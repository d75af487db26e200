"""Cache bandwidth: the working-set sweep (bandwidth.working_set), l2.read and l1.read (CUDA C).

One kernel, `cache_read` in kernels/cuda/cache.cu, re-reads a set in 2 KiB chunks (one warp, four
16-byte loads per lane per trip) with a fixed trip count per launch, so every launch moves the same
declared bytes (threads x 4 x 16 B x trips) whatever the set size. How the set is laid out decides
which level serves it (docs/bandwidth.md):
- sweep: one block of 1024 threads per SM, default (L1-allocating) loads. Up to `grid x
  PARTITION_MIN_BYTES` all blocks share one ring, so the reuse distance seen by each SM's L1 and by L2
  is the whole set; beyond it each block re-reads its own partition, so no L2 hit comes from blocks
  that drift into step with each other.
- l2.read: two blocks of 1024 per SM share a ring of L2_SET_FRACTION x L2 read with `__ldcg` (L2 only).
- l1.read: one block per SM re-reads its own L1_SET_BYTES buffer with default loads.
Importing this module imports no CUDA package.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Axis, Benchmark, CudaSource, DeviceLimits, Plan, Prepared, Runtime, Work, launch_dims
from .stream import FREE_FRACTION, GUARDED_STORE_BYTES, CupyDevice, mismatch, pattern, resident_blocks

BLOCK = 1024
UNROLL = 4  # 16-byte loads per thread per trip: 64 KiB in flight per 1024-thread block
ACCESS_BYTES = 16
CHUNK_BYTES = 32 * UNROLL * ACCESS_BYTES  # one warp, one trip: 2 KiB; sets are whole chunks
SWEEP_BLOCKS_PER_SM = 1  # one block per SM: each SM's L1 sees exactly one block's reuse distance
L2_BLOCKS_PER_SM = 2  # `__launch_bounds__(1024, 2)`: 32 registers, full occupancy to hide L2 latency

# Every launch reads LAUNCH_BYTES (rounded up to whole trips): >= ~1 ms at the ~30 TB/s of H100 L1s.
LAUNCH_BYTES = 32 * 2**30
SWEEP_MIN_BYTES = 4 * 2**10
SWEEP_L2_MULTIPLE = 8  # the sweep ends at >= 8x L2, well into DRAM
SWEEP_POINTS_PER_OCTAVE = 4
QUICK_POINTS_PER_OCTAVE = 2
# Per-block partitions from grid x this: 2x the largest L1 (Hopper: 256 KiB), so a partition never fits
# an L1 (H100: from 66 MiB, past L2).
PARTITION_MIN_BYTES = 512 * 2**10
# l2.read: about half of L2. On A100/H100 each SM reads through its near L2 partition, which also keeps
# copies of lines homed in the far one, so only ~L2/2 is usable without misses; 40% leaves a margin.
L2_SET_FRACTION = 0.4
L1_SET_BYTES = 32 * 2**10  # per block (= per SM): fits every L1 since Volta
SIM_BLOCK = 64
SIM_TRIPS = 3
SIM_SWEEP_BYTES = (4 * 2**10, 8 * 2**10, 16 * 2**10)
# The check launch re-runs the kernel with the store flag and CHECK_TRIPS trips (fewer than timed: the
# host reference gathers every load) and compares each thread's sum with numpy.
CHECK_TRIPS = 32


def _trips(limits: DeviceLimits, grid: int, block: int) -> int:
    if limits.simulate:
        return SIM_TRIPS
    return math.ceil(LAUNCH_BYTES / (grid * block * UNROLL * ACCESS_BYTES))


def cache_plan(limits: DeviceLimits, *, set_bytes: int, blocks_per_sm: int, partitioned: bool,
               bypass_l1: bool) -> Plan:
    """One launch configuration. `set_bytes` is rounded down to whole chunks (whole chunks per block
    when partitioned); the working set recorded is what the kernel really touches."""
    block = SIM_BLOCK if limits.simulate else BLOCK
    blocks_per_sm = None if limits.simulate else resident_blocks(limits, block, blocks_per_sm)
    grid = launch_dims(limits, block, blocks_per_sm)
    if partitioned:
        chunks = max(1, set_bytes // CHUNK_BYTES // grid)  # per block
        working_set = chunks * CHUNK_BYTES * grid
        region = chunks * CHUNK_BYTES // ACCESS_BYTES  # float4 between two blocks' rings
    else:
        chunks = max(1, set_bytes // CHUNK_BYTES)
        working_set, region = chunks * CHUNK_BYTES, 0
    trips = _trips(limits, grid, block)
    params = {"working_set_bytes": working_set, "chunks": chunks, "region_float4": region,
              "partitioned": partitioned, "bypass_l1": bypass_l1, "trips": trips, "unroll": UNROLL,
              "access_bytes": ACCESS_BYTES, "grid": grid, "block": block,
              "blocks_per_sm": blocks_per_sm,
              "guarded_store_bytes_per_thread": GUARDED_STORE_BYTES}
    bytes_read = grid * block * UNROLL * ACCESS_BYTES * trips
    # one FADD per float read (the sum); declared for kernels.inspect, the rate uses bytes only
    work = Work(bytes_read=bytes_read, flops={"fp32": bytes_read // 4})
    return Plan(grid=grid, block=block, work=work, params=params, loop_trips=trips)


def sweep_sizes(limits: DeviceLimits, quick: bool) -> list[int]:
    """Log-spaced working sets from SWEEP_MIN_BYTES to >= SWEEP_L2_MULTIPLE x L2 (within free memory)."""
    if limits.simulate:
        return list(SIM_SWEEP_BYTES)
    per_octave = QUICK_POINTS_PER_OCTAVE if quick else SWEEP_POINTS_PER_OCTAVE
    points = math.ceil(math.log2(SWEEP_L2_MULTIPLE * limits.l2_bytes / SWEEP_MIN_BYTES) * per_octave) + 1
    sizes = (round(SWEEP_MIN_BYTES * 2 ** (k / per_octave)) for k in range(points))
    return [size for size in sizes if size <= FREE_FRACTION * limits.free_bytes]


def sweep_plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
    grid = launch_dims(limits, SIM_BLOCK if limits.simulate else BLOCK, SWEEP_BLOCKS_PER_SM)
    plans, seen = [], set()
    for size in sweep_sizes(limits, quick):
        plan = cache_plan(limits, set_bytes=size, blocks_per_sm=SWEEP_BLOCKS_PER_SM, bypass_l1=False,
                          partitioned=size >= grid * PARTITION_MIN_BYTES and not limits.simulate)
        if plan.params["working_set_bytes"] not in seen:  # small sizes round to the same whole chunks
            seen.add(plan.params["working_set_bytes"])
            plans.append(plan)
    return plans


def l2_plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
    size = SIM_SWEEP_BYTES[-1] if limits.simulate else int(L2_SET_FRACTION * limits.l2_bytes)
    return [cache_plan(limits, set_bytes=size, blocks_per_sm=L2_BLOCKS_PER_SM, partitioned=False,
                       bypass_l1=True)]


def l1_plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
    grid = launch_dims(limits, SIM_BLOCK if limits.simulate else BLOCK, SWEEP_BLOCKS_PER_SM)
    return [cache_plan(limits, set_bytes=grid * L1_SET_BYTES, blocks_per_sm=SWEEP_BLOCKS_PER_SM,
                       partitioned=True, bypass_l1=False)]


def cuda_source(plan: Plan) -> CudaSource:
    min_blocks = plan.params["blocks_per_sm"] or 1
    bypass = "true" if plan.params["bypass_l1"] else "false"
    return CudaSource("cache.cu", f"cache_read<{plan.block}, {min_blocks}, {UNROLL}, {bypass}>")


def expected_partials(host_set: np.ndarray, plan: Plan, trips: int) -> np.ndarray:
    """Each thread's sum over `trips` trips, from the addressing rule of cache.cu written again in numpy:
    warp w of block b reads chunk (b * chunks // grid + w + t * (warps % chunks)) % chunks of its ring
    on trip t; lane l reads float4 u * 32 + l of the chunk."""
    grid, warps, chunks = plan.grid, plan.block // 32, plan.params["chunks"]
    vec_sums = host_set.reshape(-1, 4).sum(axis=1, dtype=np.float64)
    rings = 1 if plan.params["region_float4"] == 0 else grid
    lane_sums = vec_sums[: rings * chunks * 32 * UNROLL].reshape(rings, chunks, UNROLL, 32).sum(axis=2)
    blocks = np.arange(grid)
    start = (blocks[:, None] * chunks // grid + np.arange(warps)[None, :]) % chunks
    chunk = (start[:, :, None] + (warps % chunks) * np.arange(trips)[None, None, :]) % chunks
    ring = (blocks if rings > 1 else np.zeros(grid, dtype=int))[:, None, None]
    return lane_sums[ring, chunk].sum(axis=2).reshape(-1)  # (grid, warps, trips, 32) -> per thread


def cache_prepare(plan: Plan, runtime: Runtime) -> Prepared:
    dev = CupyDevice(runtime, cuda_source(plan))
    p = plan.params
    host_set = pattern(p["working_set_bytes"] // 4)
    state = {"set": dev.to_device(host_set), "out": dev.empty(plan.threads)}
    args = (np.int32(p["chunks"]), np.int64(p["region_float4"]))
    launch = lambda trips=p["trips"], store=0: dev.launch(
        plan, (state["set"], state["out"], np.int32(trips), *args, np.int32(store)))
    check_trips = min(p["trips"], CHECK_TRIPS)

    def check():
        launch(trips=check_trips, store=1)
        return mismatch(f"cache_read per-thread sums ({check_trips} trips)", dev.to_host(state["out"]),
                        expected_partials(host_set, plan, check_trips))

    def release():
        state.clear()  # drop the arrays first, so that the pool can free them
        dev.release()

    return Prepared(launch=launch, poison=lambda: dev.fill(state["out"], np.nan), check=check,
                    release=release)


def working_set_of(plan: Plan) -> float:
    return float(plan.params["working_set_bytes"])


_HOW = (f"{BLOCK}-thread blocks, {UNROLL} 16-byte loads (LDG.E.128) per thread per trip, "
        f"{LAUNCH_BYTES // 2**30} GiB read per launch")

BENCHMARKS = [
    Benchmark(
        name="l1.read", backend="cuda-c", kind="bandwidth", kernel="cache_read",
        description=f"one block per SM re-reads its own {L1_SET_BYTES // 2**10} KiB buffer with default "
                    f"(L1-caching) loads; {_HOW}",
        plans=l1_plans, prepare=cache_prepare, source=cuda_source,
        level="l1", pipe="memory", peak_key="l1", group="bandwidth"),
    Benchmark(
        name="l2.read", backend="cuda-c", kind="bandwidth", kernel="cache_read",
        description=f"{L2_BLOCKS_PER_SM} blocks per SM re-read a shared set of {L2_SET_FRACTION:.0%} of L2 "
                    f"with __ldcg (L2 only, LDG.E.128.STRONG.GPU); {_HOW}",
        plans=l2_plans, prepare=cache_prepare, source=cuda_source,
        level="l2", pipe="memory", peak_key="l2", group="bandwidth"),
    Benchmark(
        name="bandwidth.working_set", backend="cuda-c", kind="bandwidth", kernel="cache_read",
        description=f"read bandwidth against working-set size, {SWEEP_MIN_BYTES // 2**10} KiB to "
                    f">= {SWEEP_L2_MULTIPLE}x L2, {SWEEP_POINTS_PER_OCTAVE} points per octave; one block "
                    f"per SM re-reads the set with default loads; {_HOW}",
        plans=sweep_plans, prepare=cache_prepare, source=cuda_source,
        level=None, pipe="memory", peak_key="dram", group="sweep",
        sweep_x=Axis("working set", "B"), sweep_x_of=working_set_of),
]

"""Cache bandwidth: the working-set sweep (bandwidth.working_set), l2.read, l2.read.near and l1.read (CUDA C).

One kernel, `cache_read` in kernels/cuda/cache.cu, re-reads a set in chunks (one warp, `unroll` 16-byte
loads per lane per trip) with a fixed trip count per launch, so every launch moves the same declared bytes
(threads x unroll x 16 B x trips) whatever the set size. The loads per thread follow Little's law for L2
(`loads_per_thread`). How the set is laid out decides which level serves it (docs/bandwidth.md):
- sweep: one block of 1024 threads per SM, default (L1-allocating) loads. Up to `grid x
  PARTITION_MIN_BYTES` all blocks share one ring, so the reuse distance seen by each SM's L1 and by L2
  is the whole set; beyond it each block re-reads its own partition, so no L2 hit comes from blocks
  that drift into step with each other.
- l2.read: two blocks of 1024 per SM share a ring of L2_SET_FRACTION x L2 read with `__ldcg` (L2 only): the
  whole-L2 (far) plateau.
- l2.read.near: the same with a ring of L2_NEAR_SET_FRACTION x L2: the small-footprint (near) plateau.
- l1.read: one block per SM re-reads its own L1_SET_BYTES buffer with default loads.
Importing this module imports no CUDA package.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Axis, Benchmark, CudaSource, DeviceLimits, Plan, Prepared, Runtime, Work, launch_dims
from .stream import FREE_FRACTION, GUARDED_STORE_BYTES, CupyDevice, mismatch, pattern, resident_blocks

BLOCK = 1024
ACCESS_BYTES = 16
WARP = 32
SWEEP_BLOCKS_PER_SM = 1  # one block per SM: each SM's L1 sees exactly one block's reuse distance
L2_BLOCKS_PER_SM = 2  # `__launch_bounds__(1024, 2)`: 32 registers, full occupancy to hide L2 latency

# Little's law per SM (docs/bandwidth.md): bytes in flight = the SM's share of the L2 bandwidth x the L2
# latency. H200: ~13.5 TB/s at small footprints (gpu-benches gpu-l2-cache) over 132 SMs at 1.98 GHz is
# ~52 B per clock per SM; a far-partition L2 hit takes ~475 cycles (H100, gpu-benches gpu-latency; a near
# one ~265): ~24 KiB per SM. IN_FLIGHT_MARGIN doubles it twice: a thread's loads of one trip are in flight
# only until the last returns (about half of them on average), and latency grows under load.
L2_BYTES_PER_CLOCK_PER_SM = 13.5e12 / (132 * 1.98e9)
L2_FAR_LATENCY_CYCLES = 475
IN_FLIGHT_MARGIN = 4
L2_IN_FLIGHT_PER_SM = IN_FLIGHT_MARGIN * L2_BYTES_PER_CLOCK_PER_SM * L2_FAR_LATENCY_CYCLES  # ~96 KiB
SIM_UNROLL = 4  # the simulator does not run these kernels; its plans only exercise the host reference

# Every launch reads LAUNCH_BYTES (rounded up to whole trips): >= ~1 ms at the ~30 TB/s of H100 L1s.
LAUNCH_BYTES = 32 * 2**30
SWEEP_MIN_BYTES = 4 * 2**10
SWEEP_L2_MULTIPLE = 8  # the sweep ends at >= 8x L2, well into DRAM
SWEEP_POINTS_PER_OCTAVE = 4
QUICK_POINTS_PER_OCTAVE = 2
# Per-block partitions from grid x this: 2x the largest L1 (Hopper: 256 KiB), so a partition never fits
# an L1 (H100: from 66 MiB, past L2).
PARTITION_MIN_BYTES = 512 * 2**10
# l2.read: about half of L2. On A100/H100 an SM reads through its near L2 partition, which also keeps
# copies of lines homed in the far one, so a set read from every SM is kept twice and only ~L2/2 is usable
# without misses (gpu-benches: the data is duplicated in both segments); 40% leaves a margin. Public
# H100/H200 curves are flat from ~L2/6 to ~2/3 L2 (H200: 9.7-9.9 TB/s from 10 to 40 MB): the far plateau.
L2_SET_FRACTION = 0.4
# l2.read.near: a set of L2/32 (H200: 1.9 MiB), where the public curves are at their top (H200: 11.7-13.5
# TB/s at 1.5-2 MB, ~30% above the far plateau): a copy of it fits in each partition 16 times over, so
# every line is near whichever SM reads it. (Those curves use L1-allocating loads; these use L2-only ones,
# so no L1 hit can lift this figure: a GPU run says how much of the 30% is L2's.)
L2_NEAR_SET_FRACTION = 1 / 32
L1_SET_BYTES = 32 * 2**10  # per block (= per SM): fits every L1 since Volta
SIM_BLOCK = 64
SIM_TRIPS = 3
SIM_SWEEP_BYTES = (4 * 2**10, 8 * 2**10, 16 * 2**10)
# The check launch re-runs the kernel with the store flag and CHECK_TRIPS trips (fewer than timed: the
# host reference gathers every load) and compares each thread's sum with numpy.
CHECK_TRIPS = 32


def loads_per_thread(threads_per_sm: int) -> int:
    """16-byte loads per thread per trip for an SM's threads to keep L2_IN_FLIGHT_PER_SM in flight at their
    peak, rounded up to a power of two: 8 for one block of 1024 (128 KiB), 4 for two (128 KiB)."""
    need = L2_IN_FLIGHT_PER_SM / (threads_per_sm * ACCESS_BYTES)
    return 2 ** max(0, math.ceil(math.log2(need)))


def cache_plan(limits: DeviceLimits, *, set_bytes: int, blocks_per_sm: int, partitioned: bool,
               bypass_l1: bool) -> Plan:
    """One launch configuration. `set_bytes` is rounded down to whole chunks (whole chunks per block
    when partitioned); the working set recorded is what the kernel really touches."""
    block = SIM_BLOCK if limits.simulate else BLOCK
    blocks_per_sm = None if limits.simulate else resident_blocks(limits, block, blocks_per_sm)
    grid = launch_dims(limits, block, blocks_per_sm)
    unroll = SIM_UNROLL if limits.simulate else loads_per_thread(block * blocks_per_sm)
    chunk_bytes = WARP * unroll * ACCESS_BYTES  # one warp, one trip
    if partitioned:
        chunks = max(1, set_bytes // chunk_bytes // grid)  # per block
        working_set = chunks * chunk_bytes * grid
        region = chunks * chunk_bytes // ACCESS_BYTES  # float4 between two blocks' rings
    else:
        chunks = max(1, set_bytes // chunk_bytes)
        working_set, region = chunks * chunk_bytes, 0
    trips = SIM_TRIPS if limits.simulate else math.ceil(LAUNCH_BYTES / (grid * block * unroll * ACCESS_BYTES))
    params = {"working_set_bytes": working_set, "chunks": chunks, "chunk_bytes": chunk_bytes,
              "region_float4": region, "partitioned": partitioned, "bypass_l1": bypass_l1, "trips": trips,
              "unroll": unroll, "access_bytes": ACCESS_BYTES, "grid": grid, "block": block,
              "blocks_per_sm": blocks_per_sm,
              "bytes_in_flight_per_sm": None if blocks_per_sm is None else
              blocks_per_sm * block * unroll * ACCESS_BYTES,
              "guarded_store_bytes_per_thread": GUARDED_STORE_BYTES}
    bytes_read = grid * block * unroll * ACCESS_BYTES * trips
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


def _l2_plans(fraction: float):
    def plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
        size = SIM_SWEEP_BYTES[-1] if limits.simulate else int(fraction * limits.l2_bytes)
        return [cache_plan(limits, set_bytes=size, blocks_per_sm=L2_BLOCKS_PER_SM, partitioned=False,
                           bypass_l1=True)]
    return plans


l2_plans = _l2_plans(L2_SET_FRACTION)
l2_near_plans = _l2_plans(L2_NEAR_SET_FRACTION)


def l1_plans(limits: DeviceLimits, quick: bool) -> list[Plan]:
    grid = launch_dims(limits, SIM_BLOCK if limits.simulate else BLOCK, SWEEP_BLOCKS_PER_SM)
    return [cache_plan(limits, set_bytes=grid * L1_SET_BYTES, blocks_per_sm=SWEEP_BLOCKS_PER_SM,
                       partitioned=True, bypass_l1=False)]


def cuda_source(plan: Plan) -> CudaSource:
    min_blocks = plan.params["blocks_per_sm"] or 1
    bypass = "true" if plan.params["bypass_l1"] else "false"
    return CudaSource("cache.cu", f"cache_read<{plan.block}, {min_blocks}, {plan.params['unroll']}, {bypass}>")


def expected_partials(host_set: np.ndarray, plan: Plan, trips: int) -> np.ndarray:
    """Each thread's sum over `trips` trips, from the addressing rule of cache.cu written again in numpy:
    warp w of block b reads chunk (b * chunks // grid + w + t * (warps % chunks)) % chunks of its ring
    on trip t; lane l reads float4 u * 32 + l of the chunk (unroll float4 per lane)."""
    grid, warps, chunks, unroll = plan.grid, plan.block // WARP, plan.params["chunks"], plan.params["unroll"]
    vec_sums = host_set.reshape(-1, 4).sum(axis=1, dtype=np.float64)
    rings = 1 if plan.params["region_float4"] == 0 else grid
    lane_sums = vec_sums[: rings * chunks * WARP * unroll].reshape(rings, chunks, unroll, WARP).sum(axis=2)
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


_HOW = (f"{BLOCK}-thread blocks, 16-byte loads (LDG.E.128) per thread per trip from Little's law for L2 "
        f"(8 with one block per SM, 4 with two), {LAUNCH_BYTES // 2**30} GiB read per launch")


def _l2_benchmark(name: str, fraction: float, plans, plateau: str) -> Benchmark:
    return Benchmark(
        name=name, backend="cuda-c", kind="bandwidth", kernel="cache_read",
        description=f"{L2_BLOCKS_PER_SM} blocks per SM re-read a shared set of {fraction:.3g} of L2 with __ldcg "
                    f"(L2 only, LDG.E.128.STRONG.GPU): the {plateau} plateau; {_HOW}",
        plans=plans, prepare=cache_prepare, source=cuda_source,
        level="l2", pipe="memory", peak_key="l2", group="bandwidth")


BENCHMARKS = [
    Benchmark(
        name="l1.read", backend="cuda-c", kind="bandwidth", kernel="cache_read",
        description=f"one block per SM re-reads its own {L1_SET_BYTES // 2**10} KiB buffer with default "
                    f"(L1-caching) loads; {_HOW}",
        plans=l1_plans, prepare=cache_prepare, source=cuda_source,
        level="l1", pipe="memory", peak_key="l1", group="bandwidth"),
    _l2_benchmark("l2.read", L2_SET_FRACTION, l2_plans, "whole-L2 (far)"),
    _l2_benchmark("l2.read.near", L2_NEAR_SET_FRACTION, l2_near_plans, "small-footprint (near)"),
    Benchmark(
        name="bandwidth.working_set", backend="cuda-c", kind="bandwidth", kernel="cache_read",
        description=f"read bandwidth against working-set size, {SWEEP_MIN_BYTES // 2**10} KiB to "
                    f">= {SWEEP_L2_MULTIPLE}x L2, {SWEEP_POINTS_PER_OCTAVE} points per octave; one block "
                    f"per SM re-reads the set with default loads; {_HOW}",
        plans=sweep_plans, prepare=cache_prepare, source=cuda_source,
        level=None, pipe="memory", peak_key="dram", group="sweep",
        sweep_x=Axis("working set", "B"), sweep_x_of=working_set_of),
]

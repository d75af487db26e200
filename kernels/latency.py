"""Latency floors, in seconds per dependent step: what a kernel costs before it does anything, and what one
load costs when nothing hides it (CUDA C, kernels/cuda/latency.cu).

- launch.stream: a one-thread kernel launched back to back on one stream: the host's launch throughput, the
  floor of a stream of tiny kernels (LLM decode, eager PyTorch);
- launch.sync: the same kernel, each launch waited for: launch to completion as the host sees it;
- launch.graph: GRAPH_KERNELS of them captured once in a CUDA graph, the graph launched back to back: the
  GPU's own kernel-to-kernel time when the host's launch cost is out of the way;
- launch.gap: GAP_KERNELS of them queued on one stream behind a spin kernel that holds it while the host
  queues them, timed between CUDA events around them: the dependent kernel-to-kernel time with the queue full;
- latency.l1, latency.l2, latency.dram: one thread chasing pointers through a random cycle over a working set
  that fits L1, fits L2, or is many times L2: nanoseconds per dependent load.

Every launch kernel counts its launches in a device counter the check compares with the launches made; the
chase's final position is compared with the host's walk of the same cycle. Importing this module imports no
CUDA package.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .base import Benchmark, CudaSource, DeviceLimits, Plan, Prepared, Runtime, Work, format_bytes

INDEX_BYTES = 4  # unsigned int: the counter and the chase's indices
COUNT = CudaSource("latency.cu", "launch_count")
CHASE = CudaSource("latency.cu", "pointer_chase")
SPIN = CudaSource("latency.cu", "spin")
# A graph of this many kernels: its own launch (~a few us) is spread over them, and capturing it is quick.
GRAPH_KERNELS = 64
# launch.gap: this many kernels behind a spin of SPIN_CYCLES (~2 ms at 2 GHz, at least SPIN_CYCLES / the
# fastest plausible clock), while the host queues them at ~5 us each; a launch whose kernels took the host
# longer to queue than that shortest spin may have drained the queue, and fails the check.
GAP_KERNELS = 32
SPIN_CYCLES = 1 << 22
FASTEST_PLAUSIBLE_HZ = 5e9  # kernels.clock's bound: no GPU clocks faster

# The chase. One node per 128-byte line (a cache line on every architecture since Fermi), so each load is a
# new line and no load shares a sector with the last; the cycle's order is random (a fixed seed), so no
# stride prefetcher guesses it.
LINE_BYTES = 128
STRIDE = LINE_BYTES // INDEX_BYTES  # elements from one node to the next
SEED = 23
L1_WORKING_SET = 16 * 2**10  # fits the L1 of every architecture (>= 28 KiB beside the shared-memory carve-out)
L2_FRACTION = 8  # latency.l2: an eighth of L2, far beyond any L1 (<= 256 KiB), safe from L2 set conflicts
DRAM_L2_MULTIPLE = 8  # latency.dram: 8x L2, as the DRAM bandwidth arrays (kernels.stream)
FREE_FRACTION = 0.5  # ... within half the free memory
# Loads per launch: ~1-6 ms at the latencies expected (docs/latency.md), so the launch's own few us are
# under 1 % of the time. A launch goes on where the last one stopped: latency.dram's cycle (3.3 M lines on a
# 50 MiB L2) is walked by 400 launches before a line comes round again, long after L2 has dropped it.
STEPS = {"l1": 1 << 16, "l2": 1 << 15, "dram": 1 << 13}


@dataclass(frozen=True)
class Floor:
    name: str  # launch.stream | launch.sync | launch.graph
    kernels: int  # kernels one harness launch runs
    what: str


FLOORS = (
    Floor("launch.stream", 1, "a one-thread kernel launched back to back on one stream (host launch throughput)"),
    Floor("launch.sync", 1, "a one-thread kernel launched and waited for (stream synchronize), one at a time: "
                            "launch to completion as the host sees it"),
    Floor("launch.graph", GRAPH_KERNELS, f"{GRAPH_KERNELS} one-thread kernels in one CUDA graph, launched back to "
                                         f"back: the kernel-to-kernel time without the host's launch cost"),
    Floor("launch.gap", GAP_KERNELS, f"{GAP_KERNELS} one-thread kernels queued on one stream behind a spin kernel "
                                     f"({SPIN_CYCLES} cycles), timed between events around them: the dependent "
                                     f"kernel-to-kernel time on the GPU with the queue full"),
)


def floor_plan(floor: Floor, limits: DeviceLimits, quick: bool) -> Plan:
    del limits, quick
    n = floor.kernels
    return Plan(grid=1, block=1, kernels=n, loop_trips=1, params={"kernels_per_launch": n},
                work=Work(bytes_read=n * INDEX_BYTES, bytes_written=n * INDEX_BYTES, steps=n))


def working_set(level: str, limits: DeviceLimits) -> int:
    """Bytes the chase of `level` runs through: whole lines."""
    size = {"l1": L1_WORKING_SET, "l2": limits.l2_bytes // L2_FRACTION,
            "dram": min(DRAM_L2_MULTIPLE * limits.l2_bytes, int(FREE_FRACTION * limits.free_bytes))}[level]
    return size // LINE_BYTES * LINE_BYTES


def chase_plan(level: str, limits: DeviceLimits, quick: bool) -> Plan:
    del quick
    size, steps = working_set(level, limits), STEPS[level]
    notes = ()
    if level == "dram" and size < DRAM_L2_MULTIPLE * limits.l2_bytes:
        notes = (f"working set {format_bytes(size)}, not {DRAM_L2_MULTIPLE}x L2: half the "
                 f"{format_bytes(limits.free_bytes)} free; L2 hits may lower this latency",)
    # state[0] (where the chase stands) and state[1] (the launch count) are read and written once
    return Plan(grid=1, block=1, loop_trips=steps, notes=notes,
                work=Work(bytes_read=steps * INDEX_BYTES + 2 * INDEX_BYTES, bytes_written=2 * INDEX_BYTES,
                          steps=steps),
                params={"working_set_bytes": size, "nodes": size // LINE_BYTES, "line_bytes": LINE_BYTES,
                        "steps": steps})


# ------------------------------------------------------------------------------------------- preparing

def cycle_order(nodes: int) -> np.ndarray:
    """The chase's cycle: node order[i] leads to order[i + 1], the last back to the first (a random order)."""
    return np.random.default_rng(SEED).permutation(nodes).astype(np.uint32)


def chain_of(order, xp=np):
    """The array the chase follows: at node k's element (k x STRIDE), the element of the node after k; made
    where `xp` computes (cupy on the GPU, numpy in the tests)."""
    chain = xp.zeros(order.size * STRIDE, dtype=xp.uint32)
    chain[order * STRIDE] = xp.roll(order, -1) * STRIDE
    return chain


def chase_position(order: np.ndarray, steps: int) -> int:
    """The element index the chase stands at after `steps` loads from order[0]."""
    return int(order[steps % order.size]) * STRIDE


def count_mismatch(what: str, got: int, launched: int) -> str | None:
    return None if got == launched else f"{what}: the device counted {got} launches, the host made {launched}"


def prepare_floor(floor: Floor, plan: Plan, runtime: Runtime) -> Prepared:
    import cupy

    kernel = runtime.cuda_function(COUNT)
    stream = runtime.cupy_stream
    with stream:
        counter = cupy.zeros(1, dtype=cupy.uint32)
    launched = [0]

    def one() -> None:
        kernel((1,), (1,), (counter,))

    timed: list[tuple] = []  # launch.gap: (start event, end event, host seconds to queue the kernels)
    if floor.name == "launch.graph":
        with stream:
            stream.begin_capture()
            for _ in range(floor.kernels):
                one()
            graph = stream.end_capture()
        run: Callable[[], None] = lambda: graph.launch(stream=stream)
    elif floor.name == "launch.gap":
        spin = runtime.cuda_function(SPIN)

        def run() -> None:
            with stream:
                spin((1,), (1,), (np.int64(SPIN_CYCLES),))
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(stream)  # reached when the spin ends: the kernels are queued by then
                queued = time.perf_counter()
                for _ in range(floor.kernels):
                    one()
                queued = time.perf_counter() - queued
                end.record(stream)
            timed.append((start, end, queued))
    elif floor.name == "launch.sync":
        def run() -> None:
            with stream:
                one()
            stream.synchronize()
    else:
        def run() -> None:
            with stream:
                one()

    def launch() -> None:
        run()
        launched[0] += floor.kernels

    def poison() -> None:
        with stream:
            counter.fill(0)
        launched[0] = 0

    def check() -> str | None:
        got = int(counter.get(stream=stream)[0])
        return count_mismatch(floor.name, got, launched[0] % 2**32) or queue_problem(queue_times)

    queue_times: list[float] = []  # launch.gap: every timed launch's, kept for the check

    def own_times() -> list[float]:
        """launch.gap: each launch's seconds between its events, since the last call."""
        if timed:
            timed[-1][1].synchronize()
        out = [cupy.cuda.get_elapsed_time(start, end) / 1e3 for start, end, _ in timed]
        queue_times[:] = [queued for _, _, queued in timed]
        timed.clear()
        return out

    return Prepared(launch=launch, poison=poison, check=check,
                    own_times=own_times if floor.name == "launch.gap" else None)


def queue_problem(queue_times: list[float]) -> str | None:
    """Why launch.gap's times may include the host's launch rate (None when every launch's kernels were queued
    within the shortest its spin can last)."""
    shortest = SPIN_CYCLES / FASTEST_PLAUSIBLE_HZ
    slow = [q for q in queue_times if q > shortest]
    if not slow:
        return None
    return (f"launch.gap: the host took up to {max(slow) * 1e6:.0f} us to queue {GAP_KERNELS} kernels in {len(slow)} "
            f"of {len(queue_times)} launches, longer than the spin's {shortest * 1e6:.0f} us at least: the queue may "
            f"have drained, so the gaps may include the host's launch time")


def prepare_chase(level: str, plan: Plan, runtime: Runtime) -> Prepared:
    import cupy

    kernel = runtime.cuda_function(CHASE)
    stream = runtime.cupy_stream
    nodes, steps = plan.params["nodes"], plan.params["steps"]
    order = cycle_order(nodes)
    arrays: dict = {}
    with stream:  # built on the GPU from the order (a few MB): no working-set-sized host array or copy
        arrays["chain"] = chain_of(cupy.asarray(order), cupy)
        arrays["state"] = cupy.zeros(2, dtype=cupy.uint32)
    launched = [0]

    def launch() -> None:
        with stream:
            kernel((1,), (1,), (arrays["chain"], arrays["state"], np.int32(steps)))
        launched[0] += 1

    def poison() -> None:  # back to the start of the cycle, no launch counted
        with stream:
            arrays["state"].set(np.array([chase_position(order, 0), 0], dtype=np.uint32), stream=stream)
        launched[0] = 0

    def check() -> str | None:
        got = arrays["state"].get(stream=stream)
        problem = count_mismatch(f"latency.{level}", int(got[1]), launched[0] % 2**32)
        want = chase_position(order, launched[0] * steps)
        if problem is None and int(got[0]) != want:
            problem = (f"latency.{level}: the chase stands at element {int(got[0])} after {launched[0]} launches "
                       f"of {steps} loads; the host's walk of the cycle says {want}")
        return problem

    def release() -> None:
        stream.synchronize()
        arrays.clear()  # the arrays first, so that the pool can free them
        cupy.get_default_memory_pool().free_all_blocks()

    return Prepared(launch=launch, poison=poison, check=check, release=release)


_LEVEL_WHAT = {"l1": f"{format_bytes(L1_WORKING_SET)} (fits L1)", "l2": f"L2 / {L2_FRACTION} (fits L2, not L1)",
               "dram": f"{DRAM_L2_MULTIPLE}x L2 (DRAM; TLB misses included, as any random access sees them)"}

BENCHMARKS = [
    *(Benchmark(name=f.name, backend="cuda-c", kind="latency", kernel=f"launch_count[{f.name.split('.')[1]}]",
                description=f"{f.what}; seconds per kernel",
                plans=lambda limits, quick, f=f: [floor_plan(f, limits, quick)],
                prepare=lambda p, runtime, f=f: prepare_floor(f, p, runtime), source=lambda p: COUNT,
                pipe="launch", peak_key=f.name, group="latency") for f in FLOORS),
    *(Benchmark(name=f"latency.{level}", backend="cuda-c", kind="latency", kernel="pointer_chase",
                description=f"one thread, {STEPS[level]} dependent loads per launch through a random cycle of "
                            f"{LINE_BYTES}-byte lines over {_LEVEL_WHAT[level]}; seconds per load",
                plans=lambda limits, quick, level=level: [chase_plan(level, limits, quick)],
                prepare=lambda p, runtime, level=level: prepare_chase(level, p, runtime), source=lambda p: CHASE,
                level=level, pipe="memory", peak_key=f"latency.{level}", group="latency") for level in STEPS),
]

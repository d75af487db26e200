"""The SM clock the timed kernels ran at, measured on the GPU (kernels/cuda/clock.cu): NVML samples a clock
every few tens of ms and may not answer at all (no nvidia-ml-py, a container without NVML), while
clock64 / %globaltimer in a companion kernel on the benchmark's stream see the clock the benchmark left the
SMs at. The harness launches it after each chunk of timed samples; `summarize` turns its outputs into the
`clocks.sm_hz_kernel_*` fields of a roofs file."""

from __future__ import annotations

import statistics

from .base import CudaSource, Runtime

SOURCE = CudaSource("clock.cu", "sm_clock")
# 2^20 SM cycles: ~0.5 ms at 2 GHz, so a %globaltimer that ticks only every 1 us (older GPUs) still resolves
# the clock to ~0.2 %; short beside the timed chunks it follows.
SPIN_CYCLES = 1 << 20
# An SM clock outside this range is a broken reading, not a clock (GPUs run at ~0.2-3 GHz).
MIN_PLAUSIBLE_HZ = 1e8
MAX_PLAUSIBLE_HZ = 5e9
# A block's spin ends at the first clock64 read past SPIN_CYCLES; more than twice that means the reads
# themselves stalled (the block was preempted or descheduled), so its cycles are not the spin's.
MAX_OVERSHOOT = 2.0


def clock_hz(cycles: int, ns: int) -> float:
    return cycles / ns * 1e9


def reading_problem(cycles: int, ns: int, spin_cycles: int = SPIN_CYCLES) -> str | None:
    """Why one block's (cycles, ns) is not a clock reading, or None when it is."""
    if cycles < spin_cycles or cycles > spin_cycles * MAX_OVERSHOOT:
        return f"{cycles} cycles for a spin of {spin_cycles}"
    if ns <= 0:
        return f"{ns} ns elapsed"
    hz = clock_hz(cycles, ns)
    if not MIN_PLAUSIBLE_HZ <= hz <= MAX_PLAUSIBLE_HZ:
        return f"{cycles} cycles in {ns} ns is {hz / 1e9:.3g} GHz"
    return None


def summarize(readings: list[tuple[int, int]], spin_cycles: int = SPIN_CYCLES) -> dict:
    """The clocks.sm_hz_kernel_* fields of (cycles, ns) per block, over every launch of the companion. One
    implausible block discards them all (a wrong clock is worse than none) and says why."""
    if not readings:
        return {"sm_hz_kernel_error": "the clock kernel gave no readings"}
    bad = [(i, p) for i, (c, n) in enumerate(readings) if (p := reading_problem(c, n, spin_cycles))]
    if bad:
        i, problem = bad[0]
        return {"sm_hz_kernel_error": f"{len(bad)} of {len(readings)} clock readings implausible "
                                      f"(reading {i}: {problem})"}
    hz = [clock_hz(c, n) for c, n in readings]
    return {"sm_hz_kernel_median": statistics.median(hz), "sm_hz_kernel_min": min(hz),
            "sm_hz_kernel_max": max(hz), "sm_hz_kernel_readings": len(hz)}


class ClockProbe:
    """The companion kernel on a runtime's stream: one single-thread block per SM (each reads its own SM's
    clock64), its outputs kept on the host after each launch."""

    def __init__(self, runtime: Runtime):
        import cupy

        self.runtime = runtime
        self.kernel = runtime.cuda_function(SOURCE)
        self.blocks = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["multiProcessorCount"]
        self.out = cupy.zeros(2 * self.blocks, dtype=cupy.int64)
        self.readings: list[tuple[int, int]] = []

    def launch(self) -> None:
        """Run once on the runtime's stream, behind what is already queued there, and keep its readings."""
        import cupy

        stream = self.runtime.cupy_stream
        with stream:
            self.out.fill(-1)  # a block that never wrote reads as -1 cycles: implausible, never a clock
            self.kernel((self.blocks,), (1,), (cupy.int64(SPIN_CYCLES), self.out))
        pairs = self.out.get(stream=stream).reshape(-1, 2)
        self.readings.extend((int(c), int(n)) for c, n in pairs)

    def summary(self) -> dict:
        return summarize(self.readings)

"""The one path every measurement takes: poison, warm up, time launches, sample clocks, check, record."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from common.errors import describe
from kernels.base import Benchmark, Plan, Runtime

from .nvml import ClockSampler, Nvml
from .roofs import NVML_MIN_SAMPLES
from .stats import SampleStats, summarize


@dataclass(frozen=True)
class Budget:
    """How long to warm up and to measure, and the bounds on repetitions (warm-up by time, as do_bench)."""

    warmup_s: float
    measure_s: float
    min_reps: int
    max_reps: int


DEFAULT_BUDGET = Budget(warmup_s=0.05, measure_s=0.3, min_reps=10, max_reps=2000)
QUICK_BUDGET = Budget(warmup_s=0.01, measure_s=0.05, min_reps=5, max_reps=200)
# The simulator runs ~0.2 ms per thread: one launch proves correctness, timing means nothing.
SIMULATED_BUDGET = Budget(warmup_s=0.0, measure_s=0.0, min_reps=1, max_reps=1)


PROBE_LAUNCHES = 2
# A sweep has tens of points: each gets this fraction of a ceiling's budget (and at least min_reps).
SWEEP_BUDGET_FRACTION = 0.2
# One timing sample is enough back-to-back launches between two events to last SAMPLE_S (as Triton's
# do_bench_cudagraph times a graph of many launches): an event's own cost and its ~0.5 us resolution, which
# per-launch events add to every launch of a short kernel, are spread over the sample. The gaps between
# the launches of a sample still count (a stream of launches has them); at >= 1 GiB per DRAM array a launch
# lasts >= ~0.2 ms, so they are ~1%. A sample is the mean per launch; samples repeat for the statistics.
SAMPLE_S = 2e-3
MAX_LAUNCHES_PER_SAMPLE = 100
# The timed samples run in up to this many chunks, each followed on the same stream by the clock kernel
# (kernels.clock): several readings of the SM clock spread over the measurement, a few host syncs in all.
CLOCK_CHUNKS = 4


def budget_for(bench: Benchmark, budget: Budget) -> Budget:
    if not bench.is_sweep:
        return budget
    return Budget(warmup_s=budget.warmup_s * SWEEP_BUDGET_FRACTION,
                  measure_s=budget.measure_s * SWEEP_BUDGET_FRACTION,
                  min_reps=max(3, budget.min_reps // 2), max_reps=budget.max_reps)


def launches_per_sample(per_launch_s: float) -> int:
    """Launches in one sample: enough to fill SAMPLE_S (at most MAX_LAUNCHES_PER_SAMPLE), at least 1."""
    if per_launch_s <= 0:
        return MAX_LAUNCHES_PER_SAMPLE
    return max(1, min(MAX_LAUNCHES_PER_SAMPLE, math.ceil(SAMPLE_S / per_launch_s)))


class Timer(Protocol):
    def run(self, launch: Callable[[], None], n: int, batch: int = 1) -> list[float]:
        """n samples, each `batch` launches back to back; return each sample's time per launch in seconds."""


class EventTimer:
    """CUDA events on the runtime's (non-default) CuPy stream: one event between two samples, none between
    the launches of a sample; everything is enqueued without host syncs."""

    def __init__(self, stream):
        self.stream = stream

    def run(self, launch: Callable[[], None], n: int, batch: int = 1) -> list[float]:
        import cupy

        events = [cupy.cuda.Event() for _ in range(n + 1)]
        with self.stream:
            events[0].record(self.stream)
            for i in range(n):
                for _ in range(batch):
                    launch()
                events[i + 1].record(self.stream)
        events[-1].synchronize()
        return [cupy.cuda.get_elapsed_time(events[i], events[i + 1]) / 1e3 / batch for i in range(n)]


class WallTimer:
    """Host wall clock around synchronous launches: for the simulator, where timing means nothing."""

    def run(self, launch: Callable[[], None], n: int, batch: int = 1) -> list[float]:
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            for _ in range(batch):
                launch()
            samples.append((time.perf_counter() - t0) / batch)
        return samples


@dataclass(frozen=True)
class Measurement:
    plan: Plan
    stats: SampleStats | None
    clocks: dict = field(default_factory=dict)
    problem: str | None = None  # why the result is invalid (check failed, launch failed)
    launches_per_sample: int = 1  # back-to-back launches timed together in each sample


def _reps(budget_s: float, per_launch_s: float, lo: int, hi: int) -> int:
    if per_launch_s <= 0:
        return hi
    return max(lo, min(hi, math.ceil(budget_s / per_launch_s)))


def measure_plan(bench: Benchmark, plan: Plan, runtime: Runtime, timer: Timer, budget: Budget,
                 nvml: Nvml | None = None) -> Measurement:
    """Time one plan. A failure to prepare or launch, or a wrong output, is recorded, never raised."""
    try:
        prepared = bench.prepare(plan, runtime)
    except Exception as exc:  # compile or allocation failure: this ceiling is invalid, the run goes on
        return Measurement(plan, None, problem=f"could not prepare: {describe(exc)}")
    try:
        prepared.poison()
        # the faster of two probes: a first call may include module load or library set-up (cuBLAS)
        first = min(timer.run(prepared.launch, PROBE_LAUNCHES))
        warm = _reps(budget.warmup_s, first, 0, budget.max_reps) if budget.warmup_s > 0 else 0
        if warm:
            timer.run(prepared.launch, warm)
        batch = launches_per_sample(first) if budget.measure_s > 0 else 1
        reps = _reps(budget.measure_s, first * batch, budget.min_reps, budget.max_reps)
        probe, probe_error = _clock_probe(runtime)
        if prepared.own_times:
            prepared.own_times()  # the probes' and warm-up's: not timed
        samples: list[float] = []
        with ClockSampler(nvml) as sampler:
            for chunk in _chunks(reps, CLOCK_CHUNKS if probe else 1):
                samples += timer.run(prepared.launch, chunk, batch)
                if probe:
                    probe.launch()
        if prepared.own_times:  # one sample a launch, of the part it timed itself
            samples, batch = prepared.own_times(), 1
        problem = prepared.check()
        if problem:
            problem = f"output check failed: {problem}"
        clocks = {**sampler.summary(), **(probe.summary() if probe else probe_error)}
        return Measurement(plan, summarize(samples), clocks, problem, batch)
    except Exception as exc:  # a launch error: record it, keep measuring the rest
        return Measurement(plan, None, problem=f"launch failed: {describe(exc)}")
    finally:
        prepared.release()


def _chunks(total: int, parts: int) -> list[int]:
    """`total` split into at most `parts` sizes as equal as can be, none empty."""
    parts = max(1, min(parts, total))
    return [total // parts + (i < total % parts) for i in range(parts)]


def _clock_probe(runtime: Runtime):
    """(the clock kernel on the runtime's stream, {}), or (None, why there is none, as clocks fields). The
    simulator has no SM clock: there it is None and nothing is recorded."""
    if runtime.simulate or runtime.cupy_stream is None:
        return None, {}
    from kernels.clock import ClockProbe

    try:
        return ClockProbe(runtime), {}
    except Exception as exc:  # the kernel's compile or buffer failed: the benchmark is still measured
        return None, {"sm_hz_kernel_error": f"clock kernel unavailable: {describe(exc)}"}


# NVML's power reading (nvmlDeviceGetPowerUsage) is a 1 s running average on Ampere (but GA100) and later
# (NVML API reference): a ceiling timed for less reads power from before it ran, so joules per unit of work are
# given only for ceilings timed at least this long, with at least NVML_MIN_SAMPLES samples of the power.
ENERGY_MIN_S = 1.0
# The roofs file's key of the energy per unit of work (Work.amount), by kind: joules per byte, per FLOP, per MUFU
# result, per dependent step.
ENERGY_KEY = {"bandwidth": "j_per_byte", "compute": "j_per_flop", "special": "j_per_op", "latency": "j_per_step"}


def energy_record(bench: Benchmark, m: Measurement) -> dict:
    """The `energy` object of a ceiling (schema 1.4; docs/latency.md): NVML's median power over the timed
    launches x the median time of one launch, per unit of declared work, with the samples' count and how long
    the ceiling was timed; without the joules, and why, when too short or unsampled. {} with no timing."""
    if not m.stats:
        return {}
    timed = sum(m.stats.samples_s) * m.launches_per_sample
    power, samples = m.clocks.get("power_w_median"), m.clocks.get("samples") or 0
    out = {"samples": samples, "timed_s": timed}
    if power is None or samples < NVML_MIN_SAMPLES or timed < ENERGY_MIN_S:
        why = ("no NVML power samples" if power is None else
               f"{samples} NVML power samples, under {NVML_MIN_SAMPLES}" if samples < NVML_MIN_SAMPLES else
               f"timed {timed:.2f} s, under the {ENERGY_MIN_S:g} s NVML averages its power over")
        return {**out, "why_none": why}
    joules = power * m.stats.median_s
    work = m.plan.work.amount(bench.kind)
    return {**out, "power_w": power, "joules_per_launch": joules,
            ENERGY_KEY[bench.kind]: joules / work if work else None}


def ceiling_record(bench: Benchmark, m: Measurement, *, simulated: bool) -> dict:
    """The roofs-file object of one measured ceiling (schema: docs/roofs-schema.md)."""
    value = bench.rate(m.plan.work, m.stats.median_s) if m.stats and m.stats.median_s > 0 else None
    notes = [*bench.notes, *m.plan.notes]
    if m.problem:
        notes.insert(0, m.problem)
    if m.stats and m.stats.noisy:
        notes.append(f"noisy: relative IQR {m.stats.rel_iqr:.1%}; {m.stats.noise_remedy}")
    if simulated:
        notes.insert(0, "simulated: Numba's CUDA simulator; this number means nothing")
    return {
        "name": bench.name,
        "kind": bench.kind,
        "level": bench.level,
        "precision": bench.precision,
        "pipe": bench.pipe,
        "peak_key": bench.peak_key,
        "value": value,
        "unit": bench.unit,
        "backend": bench.backend,
        "kernel": bench.kernel,
        "work": m.plan.work.as_dict(),
        "params": {"grid": m.plan.grid, "block": m.plan.block, **dict(m.plan.params)},
        "stats": {**m.stats.as_dict(), "launches_per_sample": m.launches_per_sample} if m.stats else {},
        "clocks": m.clocks,
        "peaks": {},
        "valid": m.problem is None and value is not None,
        "notes": notes,
        "energy": {} if simulated else energy_record(bench, m),
    }


def sweep_points(bench: Benchmark, measurements: Sequence[Measurement]) -> list[list[float]]:
    """[x, rate] of every valid point of a sweep."""
    return [[float(bench.sweep_x_of(m.plan)), bench.rate(m.plan.work, m.stats.median_s)]
            for m in measurements if m.problem is None and m.stats and m.stats.median_s > 0]

"""The narrow interface between kernel families and the harness.

A benchmark is planned (pure: sizes, grid, compile-time constants and the declared work, from a
`DeviceLimits`), then prepared on a `Runtime` (buffers allocated, kernel compiled), then launched by the
harness, which times, derives rates from `Plan.work` and calls `check()`. Planning needs no GPU, so
`kernels.inspect` can compile exactly what a run would launch and prove the declared work from SASS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

Backend = Literal["cuda-c", "numba", "library"]
Kind = Literal["bandwidth", "compute", "special", "latency"]
# The one vocabulary of what a ceiling's value is in, by kind (ceilings.roofs validates against it): bytes,
# FLOPs or special-function (MUFU) results per second; a latency in seconds per dependent step (a kernel
# launch, a load of a pointer chase), where lower is better.
UNITS = {"bandwidth": "B/s", "compute": "FLOP/s", "special": "op/s", "latency": "s"}
LOWER_IS_BETTER = frozenset({"latency"})


def merit(kind: str, value: float) -> float:
    """What ranks two values of one kind, higher better: the rate itself, or a latency's negation. Every
    choice of a best ceiling (roofs, reports, fleets) ranks by it."""
    return -value if kind in LOWER_IS_BETTER else value


def relative(kind: str, value: float, baseline: float) -> float:
    """How `value` performs against `baseline` (1: as well, below 1: worse): value / baseline for a rate,
    baseline / value for a latency (twice the launch time performs at 0.5)."""
    return baseline / value if kind in LOWER_IS_BETTER else value / baseline

CUDA_DIR = Path(__file__).parent / "cuda"

# Sizes for the simulator: correctness only, it runs ~0.2 ms per thread.
SIM_MAX_THREADS = 256


@dataclass(frozen=True)
class DeviceLimits:
    """What planning needs to know about the device (pure data; see `ceilings.device.limits_of`)."""

    sm_count: int
    compute_capability: tuple[int, int]
    l2_bytes: int
    free_bytes: int
    max_threads_per_sm: int = 2048
    shared_bytes_per_sm: int = 228 * 1024
    simulate: bool = False

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


# A Hopper-class reference device: what `kernels.inspect` plans for when no GPU is asked.
REFERENCE_LIMITS = {
    "sm_80": DeviceLimits(sm_count=108, compute_capability=(8, 0), l2_bytes=40 * 2**20,
                          free_bytes=70 * 2**30, shared_bytes_per_sm=164 * 1024),
    # Ada (L40S-like): the architecture where mma.sync e4m3 (fp8) is native and so can be proven.
    "sm_89": DeviceLimits(sm_count=142, compute_capability=(8, 9), l2_bytes=96 * 2**20,
                          free_bytes=44 * 2**30, max_threads_per_sm=1536, shared_bytes_per_sm=100 * 1024),
    "sm_90": DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * 2**20,
                          free_bytes=130 * 2**30),
}


REGISTERS_PER_SM = 65536  # 32-bit registers per SM on every architecture since Kepler (sm_80, 89, 90 included)


@dataclass(frozen=True)
class Work:
    """Declared work of ONE launch. FLOPs by precision (an FMA is 2, a packed half2 FMA 4; int32 MAD 2);
    special-function (MUFU) results by function (`ex2`, `rsqrt`, `sin`: kernels.sass.SPECIAL_FUNCTIONS);
    `steps`: the dependent steps a latency ceiling divides its time by (kernels launched, loads chased)."""

    bytes_read: int = 0
    bytes_written: int = 0
    flops: Mapping[str, int] = field(default_factory=dict)
    special: Mapping[str, int] = field(default_factory=dict)
    steps: int = 0

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def total_flops(self) -> int:
        return sum(self.flops.values())

    def amount(self, kind: str) -> int:
        """What a ceiling of `kind` counts of this work: bytes, FLOPs, MUFU results or dependent steps (its
        rate is per second of them, its energy per one of them)."""
        return {"bandwidth": self.bytes, "compute": self.total_flops, "special": sum(self.special.values()),
                "latency": self.steps}[kind]

    def as_dict(self) -> dict:
        """What the roofs file records; `special` and `steps` (schema 1.4) only where there are any."""
        out = {"bytes_read": self.bytes_read, "bytes_written": self.bytes_written, "flops": dict(self.flops)}
        if self.special:
            out["special"] = dict(self.special)
        if self.steps:
            out["steps"] = self.steps
        return out


@dataclass(frozen=True)
class Plan:
    """One concrete variant: what is launched, with which constants, doing how much work."""

    grid: int
    block: int
    work: Work
    params: Mapping[str, Any] = field(default_factory=dict)  # recorded in the roofs file
    # Offline proof model (kernels.inspect): every thread runs the kernel's single innermost loop
    # `loop_trips` times; instructions outside it run once. None: no offline proof for this plan.
    loop_trips: int | None = None
    # Waves of resident blocks the grid runs in: 1 (every block resident at once, a grid that fills every SM
    # once) or more (an oversubscribed grid: blocks that finish early make room for the rest, so no SM waits
    # for the slowest). kernels.inspect proves it from the compiled kernel's registers and shared memory:
    # ceil(grid / (SMs x blocks that fit on one SM)) must be exactly this.
    waves: int = 1
    # Kernels one launch runs: 1, or the kernels of a CUDA graph launched as one (kernels.latency); the work
    # is theirs together, and kernels.inspect proves one kernel's SASS times this.
    kernels: int = 1
    # What a reader of the result must know about this plan (e.g. arrays smaller than planned for lack of
    # memory); the measurement's record carries them among its notes.
    notes: tuple[str, ...] = ()

    @property
    def threads(self) -> int:
        return self.grid * self.block


@dataclass(frozen=True)
class CudaSource:
    """CUDA C compiled through NVRTC (CuPy RawModule at run time, `kernels.inspect` offline)."""

    file: str  # under kernels/cuda/
    name_expression: str  # kernel name, with template arguments when templated
    options: tuple[str, ...] = ("-std=c++17",)

    @property
    def code(self) -> str:
        return (CUDA_DIR / self.file).read_text()


@dataclass(frozen=True)
class NumbaSource:
    """A Numba CUDA kernel (python function before @cuda.jit) and the signature to compile it for.
    `max_registers`: a per-thread cap (ptxas -maxrregcount) so the planned blocks per SM really fit."""

    pyfunc: Callable
    signature: str
    max_registers: int | None = None


@dataclass
class Prepared:
    """A benchmark ready on a device. `launch` enqueues one launch on the runtime's stream (asynchronous)."""

    launch: Callable[[], None]
    poison: Callable[[], None]  # fill outputs with values no correct run produces
    check: Callable[[], str | None]  # after the timed launches: None when right, else what is wrong
    release: Callable[[], None] = lambda: None
    # A launch that times its own part between CUDA events it records (the ceiling is part of what it
    # enqueues: kernels.latency's launch.gap, behind a spin that fills the queue): seconds of each launch since
    # the last call, oldest first. The harness then takes these, not its own times of whole launches.
    own_times: Callable[[], list[float]] | None = None


@dataclass
class Runtime:
    """Where kernels run: a CuPy stream on a real device, or Numba's CUDA simulator. It owns the CUDA C
    modules compiled for its device."""

    simulate: bool
    cupy_stream: Any = None  # cupy.cuda.Stream; CuPy launches happen inside `with cupy_stream:`
    # compiled code: (file, options, name) -> cupy.RawModule; (pyfunc, signature) -> Numba dispatcher
    _modules: dict = field(default_factory=dict, repr=False)

    def precompile(self, sources: Iterable[CudaSource]) -> None:
        """One NVRTC program per (file, options) holding all its variants: a run compiles each file once
        (CuPy compiles lazily, at the first get_function, and caches on disk)."""
        import cupy

        groups: dict[tuple[str, tuple[str, ...]], set[str]] = {}
        for s in sources:
            if (s.file, s.options, s.name_expression) not in self._modules:
                groups.setdefault((s.file, s.options), set()).add(s.name_expression)
        for (file, options), names in groups.items():
            module = cupy.RawModule(code=(CUDA_DIR / file).read_text(), options=options,
                                    name_expressions=tuple(sorted(names)))
            self._modules.update({(file, options, name): module for name in names})

    def cuda_function(self, source: CudaSource):
        """The compiled kernel of a CUDA C source (compiled here unless `precompile` saw it)."""
        self.precompile([source])
        return self._modules[(source.file, source.options, source.name_expression)].get_function(
            source.name_expression)

    def numba_kernel(self, source: NumbaSource):
        """The Numba kernel compiled for its signature, once per runtime. (No on-disk cache: Numba refuses
        cache=True for the generated kernels, whose source is not a file.)"""
        key = (source.pyfunc, source.signature, source.max_registers)
        if key not in self._modules:
            from numba import cuda

            cap = {} if self.simulate or not source.max_registers else {"max_registers": source.max_registers}
            self._modules[key] = cuda.jit(source.signature, **cap)(source.pyfunc)
        return self._modules[key]

    def numba_stream(self):
        from numba import cuda

        if self.simulate or self.cupy_stream is None:
            return cuda.default_stream()
        return cuda.external_stream(self.cupy_stream.ptr)


@dataclass(frozen=True)
class Axis:
    name: str
    unit: str


@dataclass(frozen=True)
class Benchmark:
    """A ceiling (one plan) or a sweep (several plans, one point each), in one backend.

    `plans(limits, quick)` is pure. `prepare(plan, runtime)` allocates and compiles. `source(plan)` is what
    `kernels.inspect` compiles (CudaSource or NumbaSource; None for library calls).
    """

    name: str  # ceiling name ("dram.copy", "fp32.fma") or sweep name ("bandwidth.working_set")
    backend: Backend
    kind: Kind
    kernel: str
    description: str
    plans: Callable[[DeviceLimits, bool], Sequence[Plan]]
    prepare: Callable[[Plan, Runtime], Prepared]
    source: Callable[[Plan], CudaSource | NumbaSource | None]
    level: str | None = None  # bandwidth (dram | l2 | l1 | host: the host link), a memory latency (dram | l2 | l1)
    precision: str | None = None  # compute: fp64 | fp32 | fp16 | bf16 | int32 | tf32 | fp8; special: fp32
    pipe: Literal["memory", "cuda-core", "tensor", "sfu", "launch"] = "memory"
    peak_key: str = "dram"
    group: str = "bandwidth"  # for --only and progress: bandwidth | compute | tensor | library | sweep
    sweep_x: Axis | None = None  # set for sweeps: the x axis
    sweep_x_of: Callable[[Plan], float] | None = None
    simulable: bool = False  # runs on Numba's simulator (Numba kernels at tiny sizes)
    notes: tuple[str, ...] = ()

    @property
    def is_sweep(self) -> bool:
        return self.sweep_x is not None

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    def rate(self, work: Work, seconds: float) -> float:
        """The one place a ceiling's value is derived from declared work and the time of one launch: a rate
        (work per second), or for a latency the time per dependent step."""
        amount = work.amount(self.kind)
        return seconds / amount if self.kind == "latency" else amount / seconds


def format_bytes(n: float) -> str:
    """A size as plans' notes and the sweeps' axes print it: 1 GiB, 1.5 MiB, 512 B."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == round(value) else f"{value:.3g} {unit}"
    return f"{n:.0f} B"


def launch_dims(limits: DeviceLimits, block: int, blocks_per_sm: int | None = None) -> int:
    """A grid that fills every SM: resident blocks per SM x SMs (capped small on the simulator)."""
    if limits.simulate:
        return max(1, SIM_MAX_THREADS // block)
    per_sm = blocks_per_sm or max(1, limits.max_threads_per_sm // block)
    return limits.sm_count * per_sm

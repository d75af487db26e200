"""Prove every kernel's declared work from its SASS, offline: `python -m kernels.inspect`.

For each benchmark with a source and each plan it makes for a reference device (full and quick), the kernel
is compiled exactly as a run would compile it (CUDA C: NVRTC with CuPy RawModule's options; Numba:
compile_ptx then ptxas), disassembled with cuobjdump, and counted under the loop model of `Plan.loop_trips`
(kernels.sass). The SASS-derived FLOPs by precision and global bytes must equal `plan.work` exactly.
Rules and verdicts: docs/inspect.md.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from common.atomic import atomic_path, check_folder, check_target, write_text
from common.errors import CeilingsError, MissingDependency, cli_entry
from common.text import aligned

from . import sass, sass_chase
from .base import REFERENCE_LIMITS, REGISTERS_PER_SM, Benchmark, CudaSource, NumbaSource, Plan, Work

PROG = "python -m kernels.inspect"
ARCHS = ("sm_80", "sm_90")  # the default; --arch may name any REFERENCE_LIMITS arch
TOOLS_ENV = "CEILINGS_CUDA_BIN"  # colon-separated folders: the only places searched for cuobjdump/ptxas
JOBS = min(4, os.cpu_count() or 1)  # compiles and disassemblies in flight
DRAM_ACCESS_BYTES = 16  # CUDA C DRAM kernels must move global data in 128-bit accesses only
# What CuPy 14's RawModule adds to the user's options (cupy._core.core.compile_with_cache and
# cupy.cuda.compiler._compile_with_cache_cuda); the include folders are added in `_cupy_options`.
CUPY_RUNTIME_OPTIONS = ("-ftz=true",)

OK, MISMATCH, UNPROVABLE, NOT_PROVEN, ERROR = "ok", "MISMATCH", "unprovable", "not proven", "error"
FAILING = frozenset({MISMATCH, UNPROVABLE, ERROR})

_REMEDY = {
    "cuobjdump": "pip install nvidia-cuda-cuobjdump (binary under site-packages/nvidia/cu13/bin)",
    "ptxas": "install the CUDA toolkit (ptxas, /usr/local/cuda/bin) or pip install nvidia-cuda-nvcc",
}


@dataclass(frozen=True)
class InspectionResult:
    """One plan of one benchmark on one architecture, proven (or not) from SASS."""

    benchmark: str
    backend: str
    kernel: str
    arch: str
    params: dict
    modes: tuple[str, ...]  # ("full", "quick"): which plan lists produced this exact plan
    function: str | None  # the SASS function (lowered/mangled name)
    threads: int
    loop_trips: int | None
    declared: dict  # Work.as_dict()
    derived: dict | None  # the same shape, from SASS; None when it cannot be computed
    loop: str | None  # address span of the loop in the SASS
    registers: int | None = None  # per thread, from cuobjdump --dump-resource-usage
    loop_counts: dict = field(default_factory=dict)  # instruction class -> count in one loop trip
    once_counts: dict = field(default_factory=dict)  # run once per thread, outside the loop
    conditional_counts: dict = field(default_factory=dict)  # outside the loop, may be skipped: not counted
    loop_work: dict = field(default_factory=dict)  # the classes of loop_counts that carry work
    once_work: dict = field(default_factory=dict)
    verdict: str = ERROR
    reasons: tuple[str, ...] = ()  # why not ok
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING

    def as_dict(self) -> dict:
        return asdict(self)


# --- tools --------------------------------------------------------------------------------------------------


def tool_dirs() -> list[Path]:
    """Where cuobjdump and ptxas are looked for: $CEILINGS_CUDA_BIN only when set, else the pip wheels'
    nvidia/cu*/bin, the CUDA toolkit folders and PATH."""
    if TOOLS_ENV in os.environ:
        return [Path(p) for p in os.environ[TOOLS_ENV].split(os.pathsep) if p]
    dirs = []
    try:
        import nvidia  # namespace package of the NVIDIA wheels

        dirs += [Path(p) for root in nvidia.__path__ for p in sorted(glob.glob(os.path.join(root, "cu*", "bin")))]
    except ImportError:
        pass
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        dirs.append(Path(cuda_home) / "bin")
    dirs += [Path("/usr/local/cuda/bin")] + [Path(p) for p in sorted(glob.glob("/usr/local/cuda-*/bin"))]
    dirs += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    return dirs


def find_tool(name: str) -> Path:
    for d in tool_dirs():
        candidate = d / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    where = f"${TOOLS_ENV}={os.environ[TOOLS_ENV]!r}" if TOOLS_ENV in os.environ else "the wheels, CUDA and PATH"
    raise MissingDependency(f"{name} not found in {where}: {_REMEDY[name]}")


def _nvrtc():
    try:
        from cupy.cuda import nvrtc
    except ImportError as exc:
        raise MissingDependency(f"cupy is needed for NVRTC ({exc}): pip install cupy-cuda13x") from exc
    try:
        nvrtc.getVersion()
    except Exception as exc:
        raise MissingDependency(f"NVRTC is not loadable ({type(exc).__name__}: {exc}): "
                                "pip install 'nvidia-cuda-nvrtc==13.0.*'") from exc
    return nvrtc


def _cupy_options() -> tuple[str, ...]:
    """CuPy's include folders, as RawModule passes them (its own headers, then the CUDA path's)."""
    import cupy
    from cupy import _environment

    dirs = [Path(cupy.__file__).parent / "_core" / "include"]
    cuda_path = _environment.get_cuda_path()
    if cuda_path:
        dirs.append(Path(cuda_path) / "include")
    return tuple(f"-I{d}" for d in dirs if d.is_dir()) + CUPY_RUNTIME_OPTIONS


# --- compiling ----------------------------------------------------------------------------------------------

_ARCH_OPTION = re.compile(r"^(?:-arch|--gpu-architecture)=(sm_\w+)$")


def source_arch(options: Sequence[str], planned: str) -> str:
    """The architecture a CUDA C source is compiled for: the one its options name (`-arch=sm_90a`, for
    arch-specific instructions such as wgmma), else the planned device's. A source may name only the planned
    arch or its arch-specific variant: code for sm_90a runs on CC 9.0 devices alone."""
    named = [m.group(1) for o in options if (m := _ARCH_OPTION.match(o))]
    if not named:
        return planned
    if len(named) > 1 or named[0] not in (planned, f"{planned}a"):
        raise CeilingsError(f"source options {' '.join(options)!r} name {', '.join(named)}: a plan for {planned} "
                            f"compiles for {planned} or {planned}a, once")
    return named[0]


def nvrtc_cubin(code: str, file: str, options: tuple[str, ...], exprs: Sequence[str],
                arch: str) -> tuple[bytes, dict[str, str]]:
    """One NVRTC program with every name expression, compiled to a cubin with the options CuPy's RawModule
    adds; (cubin, name expression -> lowered name). The arch is `source_arch(options, arch)`, named once:
    the way `kernels.wgmma` compiles its sm_90a kernels at run time, since RawModule always adds its own."""
    nvrtc = _nvrtc()
    target = source_arch(options, arch)
    own = [o for o in options if not _ARCH_OPTION.match(o)]
    prog = nvrtc.createProgram(code, file, [], [])
    try:
        for expr in exprs:
            nvrtc.addNameExpression(prog, expr)
        try:
            nvrtc.compileProgram(prog, [f"-arch={target}", *own, *_cupy_options()])
        except nvrtc.NVRTCError:
            log = " ".join(nvrtc.getProgramLog(prog).split())[:400]
            raise CeilingsError(f"NVRTC ({file}, {target}): {log}") from None
        names = {expr: nvrtc.getLoweredName(prog, expr) for expr in exprs}
        cubin = nvrtc.getCUBIN(prog) + b"\0"  # cupy 14.2 returns the cubin one byte short
    finally:
        nvrtc.destroyProgram(prog)
    return cubin, names


@dataclass
class Compiled:
    """One cubin and the SASS functions in it."""

    label: str
    functions: dict[str, list[sass.Instruction]] = field(default_factory=dict)
    names: dict[object, str] = field(default_factory=dict)  # name expression / python function -> SASS name
    error: str | None = None
    resources: dict[str, dict[str, int]] = field(default_factory=dict)  # SASS name -> {"REG": .., "SHARED": ..}


def _stem(text: str, *parts: object) -> str:
    digest = hashlib.sha1(repr(parts).encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_]+', '_', text)[:40]}-{digest}"


class Compiler:
    """Compiles each (source, options, arch) once per run; sweeps' name expressions share one program."""

    def __init__(self, workdir: Path, keep: Path | None):
        self.workdir, self.keep = workdir, keep
        self._numba_lock = threading.Lock()  # Numba's compiler is not reentrant across threads

    def cuda(self, code: str, file: str, options: tuple[str, ...], exprs: tuple[str, ...], arch: str,
             cuobjdump: Path) -> Compiled:
        label = f"{file} [{arch}]"
        try:
            label = f"{file} [{source_arch(options, arch)}]"
            cubin, names = nvrtc_cubin(code, file, options, exprs, arch)
        except MissingDependency:
            raise
        except CeilingsError as exc:  # this program's error: its plans are reported, the rest still proven
            return Compiled(label, error=str(exc))
        stem = _stem(Path(file).stem, code, options, exprs, arch)
        return self._disassemble(label, cubin, stem, arch, names, cuobjdump)

    def numba(self, source: NumbaSource, arch: str, ptxas: Path, cuobjdump: Path) -> Compiled:
        from numba import cuda

        label = f"{source.pyfunc.__module__}.{source.pyfunc.__qualname__} [{arch}]"
        cc = (int(arch[3:-1]), int(arch[-1]))
        try:
            with self._numba_lock:
                ptx, _ = cuda.compile_ptx(source.pyfunc, source.signature, cc=cc)
        except Exception as exc:
            if "NVVM" in type(exc).__name__ or "libnvvm" in str(exc):
                raise MissingDependency(f"NVVM is not usable ({exc}): pip install 'nvidia-nvvm==13.0.*'") from exc
            return Compiled(label, error=f"Numba: {type(exc).__name__}: {' '.join(str(exc).split())[:400]}")
        entries = re.findall(r"\.entry\s+([\w$]+)", ptx)
        if len(entries) != 1:
            return Compiled(label, error=f"expected one .entry in Numba's PTX, found {entries}")
        stem = _stem(source.pyfunc.__name__, source.pyfunc.__module__, source.pyfunc.__qualname__,
                     source.signature, source.max_registers, arch)
        ptx_path = self._path(stem, arch, ".ptx")
        write_text(ptx_path, ptx)
        cubin_path = self.workdir / f"{stem}.{arch}.cubin"
        cap = ["--maxrregcount", str(source.max_registers)] if source.max_registers else []
        run = subprocess.run([str(ptxas), f"-arch={arch}", *cap, "-o", str(cubin_path), str(ptx_path)],
                             check=False, capture_output=True, text=True)
        if run.returncode:
            return Compiled(label, error=f"ptxas: {' '.join(run.stderr.split())[:400]}")
        return self._disassemble(label, cubin_path.read_bytes(), stem, arch, {source.pyfunc: entries[0]},
                                 cuobjdump)

    def _path(self, stem: str, arch: str, suffix: str) -> Path:
        folder = self.keep / arch if self.keep else self.workdir
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{stem}{suffix}"

    def _disassemble(self, label, cubin: bytes, stem, arch, names, cuobjdump: Path) -> Compiled:
        cubin_path = self._path(stem, arch, ".cubin")
        with atomic_path(cubin_path) as tmp:
            tmp.write_bytes(cubin)
        run = subprocess.run([str(cuobjdump), "-sass", str(cubin_path)], check=False, capture_output=True, text=True)
        if run.returncode:
            return Compiled(label, error=f"cuobjdump: {' '.join(run.stderr.split())[:400]}")
        if self.keep:
            write_text(self._path(stem, arch, ".sass"), run.stdout)
        usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", str(cubin_path)], check=False,
                               capture_output=True, text=True)
        if usage.returncode:
            return Compiled(label, error=f"cuobjdump --dump-resource-usage: {' '.join(usage.stderr.split())[:400]}")
        return Compiled(label, sass.parse_cuobjdump(run.stdout), names, resources=parse_resource_usage(usage.stdout))


_RESOURCE_FUNCTION = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_RESOURCE = re.compile(r"\b([A-Z]+(?:\[\d+\])?):(\d+)")


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump --dump-resource-usage` -> {function: {"REG": 31, "SHARED": 0, "STACK": 0, ...}}."""
    out: dict[str, dict[str, int]] = {}
    function = None
    for line in text.splitlines():
        if (m := _RESOURCE_FUNCTION.match(line)):
            function = m.group(1)
        elif function and (found := _RESOURCE.findall(line)):
            out[function] = {k: int(v) for k, v in found}
            function = None
    return out


# Resident blocks per SM at most (CUDA C Programming Guide, "Technical Specifications per Compute
# Capability"); the register file is 64 K 32-bit registers per SM on all of these.
MAX_BLOCKS_PER_SM = {"sm_80": 32, "sm_89": 24, "sm_90": 32}
REGISTER_ALLOCATION_UNIT = 256  # registers are allocated per warp in units of 256
SUB_PARTITIONS = 4  # the register file is split between an SM's 4 schedulers; a warp lives in one
SHARED_RESERVED_PER_BLOCK = 1024  # sm_80 and later reserve 1 KiB of shared memory per block for the system
SHARED_ALLOCATION_UNIT = 128


def blocks_that_fit(limits, block: int, registers: int, shared_bytes: int) -> int:
    """Blocks of `block` threads that fit on one SM at once, given each thread's registers and each block's
    static shared memory (the arithmetic of CUDA's cuda_occupancy.h)."""
    warps = -(-block // 32)
    per_warp = -(-registers * 32 // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    warps_by_registers = SUB_PARTITIONS * (REGISTERS_PER_SM // SUB_PARTITIONS // max(1, per_warp))
    shared = -(-shared_bytes // SHARED_ALLOCATION_UNIT) * SHARED_ALLOCATION_UNIT + SHARED_RESERVED_PER_BLOCK
    return min(limits.max_threads_per_sm // block, MAX_BLOCKS_PER_SM.get(limits.arch, 32),
               warps_by_registers // warps, limits.shared_bytes_per_sm // shared)


def occupancy_problem(job: _Job, usage: dict[str, int] | None) -> str | None:
    """Why the planned grid does not run in the waves its plan declares (None when it does, or when unknown):
    `Plan.waves` is 1 for a grid that fills every SM once, or the exact number of waves of an oversubscribed
    grid; with `fits` blocks resident per SM, the grid runs in ceil(grid / (SMs x fits)) waves."""
    if not usage or "REG" not in usage:
        return None
    limits = REFERENCE_LIMITS[job.arch]
    fits = blocks_that_fit(limits, job.plan.block, usage["REG"], usage.get("SHARED", 0))
    runs = -(-job.plan.grid // (limits.sm_count * fits)) if fits else None
    if runs == job.plan.waves:
        return None
    what = (f"occupancy: {usage['REG']} registers/thread and {usage.get('SHARED', 0)} B shared/block fit "
            f"{fits} blocks of {job.plan.block} threads per SM; ")
    if job.plan.waves == 1:
        planned = -(-job.plan.grid // limits.sm_count)
        return what + (f"the grid plans {planned} per SM on {limits.sm_count} SMs: a second, partial wave "
                       f"instead of one that fills every SM")
    return what + (f"the grid of {job.plan.grid} blocks runs in {runs} waves on {limits.sm_count} SMs, not the "
                   f"{job.plan.waves} its plan declares")


# --- the plans to prove -------------------------------------------------------------------------------------


@dataclass
class _Job:
    benchmark: Benchmark
    plan: Plan
    arch: str
    source: CudaSource | NumbaSource | None
    modes: list[str]
    error: str | None = None


def _plan_key(b: Benchmark, plan: Plan, source, arch: str):
    work = (plan.work.bytes_read, plan.work.bytes_written, tuple(sorted(plan.work.flops.items())))
    return (b.name, b.backend, b.kernel, arch, source, plan.grid, plan.block, plan.loop_trips, work,
            repr(sorted(plan.params.items())))


def collect_jobs(benchmarks: Iterable[Benchmark], archs: Sequence[str]) -> list[_Job]:
    jobs: dict[tuple, _Job] = {}
    errors = []
    for arch in archs:
        for b in benchmarks:
            for quick in (False, True):
                mode = "quick" if quick else "full"
                try:
                    plans = list(b.plans(REFERENCE_LIMITS[arch], quick))
                    sourced = [(p, b.source(p)) for p in plans]
                except Exception as exc:  # noqa: BLE001 -- a family's planning bug: reported, the rest still proven
                    errors.append(_Job(b, Plan(0, 0, Work()), arch, None, [mode],
                                       f"planning failed: {type(exc).__name__}: {exc}"))
                    continue
                for plan, source in sourced:
                    if source is None:
                        continue  # library calls: nothing to compile
                    job = jobs.setdefault(_plan_key(b, plan, source, arch), _Job(b, plan, arch, source, []))
                    job.modes.append(mode)
    return list(jobs.values()) + errors


# --- verdicts -----------------------------------------------------------------------------------------------


def derive(analysis: sass.Analysis, plan: Plan) -> Work | None:
    """(loop body x loop_trips + once-per-thread) x threads x kernels; None when the loop's trips are unknown.
    `steps` (a latency's dependent steps) is not in SASS: the chase's are proven apart (`chase_problems`)."""
    trips = plan.loop_trips if analysis.loop else 0
    if trips is None:
        return None
    body, once = analysis.body, analysis.once
    threads = plan.threads * plan.kernels  # a graph's kernels are the same kernel, each on plan.threads

    def per_key(field: str) -> dict[str, int]:
        loop, outside = getattr(body, field), getattr(once, field)
        return {k: (loop.get(k, 0) * trips + outside.get(k, 0)) * threads for k in sorted({*loop, *outside})}

    return Work(bytes_read=(body.read_bytes * trips + once.read_bytes) * threads,
                bytes_written=(body.write_bytes * trips + once.write_bytes) * threads,
                flops=per_key("flops"), special=per_key("special"))


def compare(b: Benchmark, declared: Work, derived: Work) -> tuple[list[str], list[str]]:
    """(differences, notes). int32 is compared only for int32 benchmarks: plain IMADs are also index math;
    MUFU results only for special-function benchmarks."""
    reasons, notes = [], []
    int32_compared = b.precision == "int32" or declared.flops.get("int32", 0) > 0
    for p in sorted(set(declared.flops) | set(derived.flops)):
        want, got = declared.flops.get(p, 0), derived.flops.get(p, 0)
        if p == "int32" and not int32_compared:
            notes.append(f"int32 (plain IMAD) {got} not declared, not compared")
        elif want != got:
            reasons.append(f"{p} FLOPs declared {want} != SASS {got} ({got - want:+})")
    # MUFU is compared only for SFU ceilings: elsewhere it is index math (MUFU.RCP seeds an integer division)
    for f in sorted(set(declared.special) | set(derived.special)):
        want, got = declared.special.get(f, 0), derived.special.get(f, 0)
        if b.kind != "special":
            notes.append(f"{f} (MUFU) {got} not declared, not compared: index math")
        elif want != got:
            reasons.append(f"{f} MUFU results declared {want} != SASS {got} ({got - want:+})")
    for what in ("bytes_read", "bytes_written"):
        want, got = getattr(declared, what), getattr(derived, what)
        if want != got:
            reasons.append(f"{what} declared {want} != SASS {got} ({got - want:+})")
    return reasons, notes


def _dram_widths(b: Benchmark, analysis: sass.Analysis) -> list[str]:
    if b.kind != "bandwidth" or b.level != "dram" or b.backend != "cuda-c":
        return []
    narrow = {op: n for op, n in analysis.global_widths.items() if sass.access_bytes(op) != DRAM_ACCESS_BYTES}
    if not narrow:
        return []
    return ["DRAM kernel uses non-128-bit global accesses: "
            + ", ".join(f"{op} x{n}" for op, n in sorted(narrow.items()))]


def chase_problems(b: Benchmark, plan: Plan, analysis: sass.Analysis) -> list[str]:
    """A memory-latency ceiling (kind latency, a level) must be a pointer chase whose declared steps are its
    loads: one dependent global load per trip, loop_trips x threads of them."""
    if b.kind != "latency" or b.level is None:
        return []
    problems = [p for p in [sass_chase.chase_problem(analysis.loop_instructions)] if p]
    loads = (plan.loop_trips or 0) * plan.threads
    if plan.work.steps != loads:
        problems.append(f"steps declared {plan.work.steps} != {loads} dependent loads (loop_trips x threads)")
    return problems


def judge(job: _Job, compiled: Compiled | None) -> InspectionResult:
    b, plan = job.benchmark, job.plan
    base = {"benchmark": b.name, "backend": b.backend, "kernel": b.kernel, "arch": job.arch,
            "params": dict(plan.params), "modes": tuple(job.modes), "threads": plan.threads,
            "loop_trips": plan.loop_trips, "declared": plan.work.as_dict()}
    error = job.error or (compiled.error if compiled else "not compiled")
    key = job.source.name_expression if isinstance(job.source, CudaSource) else getattr(job.source, "pyfunc", None)
    function = compiled.names.get(key) if compiled and not compiled.error else None
    if not job.error and compiled and not compiled.error:
        error = None if function in compiled.functions else f"function {function} not in the cubin"
    if error:
        return InspectionResult(**base, function=function, derived=None, loop=None, verdict=ERROR,
                                reasons=(error,))
    instructions = compiled.functions[function]
    analysis = sass.analyse(function, instructions)
    derived = derive(analysis, plan)
    notes = list(analysis.notes)
    reasons = _dram_widths(b, analysis) + chase_problems(b, plan, analysis)
    usage = compiled.resources.get(function) or {}
    occupancy = occupancy_problem(job, usage)
    if occupancy:
        reasons.append(occupancy)
    if plan.loop_trips is None:
        verdict = NOT_PROVEN
        notes.append("plan.loop_trips is None: not proven offline")
    elif analysis.problems:
        verdict = UNPROVABLE
        reasons += analysis.problems
    else:
        if not analysis.loop and plan.loop_trips != 1:
            notes.append(f"no loop holds work in the SASS: loop_trips={plan.loop_trips} unused")
        differences, compare_notes = compare(b, plan.work, derived)
        reasons += differences
        notes += compare_notes
        verdict = MISMATCH if reasons else OK
        if "fp8" in plan.work.flops and sass.emulates_fp8(instructions):
            reasons.append(sass.SM90_FP8_NOTE)
    if reasons and verdict in (OK, NOT_PROVEN):
        verdict = MISMATCH
    return InspectionResult(**base, function=function, derived=derived.as_dict() if derived else None,
                            loop=analysis.loop, registers=usage.get("REG"), loop_counts=analysis.body.counts,
                            once_counts=analysis.once.counts, conditional_counts=analysis.conditional.counts,
                            loop_work=analysis.body.work, once_work=analysis.once.work,
                            verdict=verdict, reasons=tuple(reasons), notes=tuple(notes))


# --- the run ------------------------------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"inspect: {message}", file=sys.stderr, flush=True)


def inspect_benchmarks(benchmarks: Iterable[Benchmark], archs: Sequence[str] = ARCHS, *,
                       keep: str | os.PathLike | None = None, jobs: int = JOBS) -> list[InspectionResult]:
    """Compile, disassemble and prove every plan of every benchmark with a source, for each arch."""
    unknown = [a for a in archs if a not in REFERENCE_LIMITS]
    if unknown:
        raise CeilingsError(f"unknown arch {unknown[0]!r}: choose from {', '.join(REFERENCE_LIMITS)}")
    work = collect_jobs(list(benchmarks), archs)
    todo = [j for j in work if j.source is not None]
    if not todo:
        return [judge(j, None) for j in work]
    cuobjdump = find_tool("cuobjdump")
    ptxas = None
    if any(isinstance(j.source, NumbaSource) for j in todo):
        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
            raise CeilingsError("NUMBA_ENABLE_CUDASIM=1: Numba's simulator cannot compile to PTX; unset it")
        ptxas = find_tool("ptxas")
    if any(isinstance(j.source, CudaSource) for j in todo):
        _nvrtc()

    # one compile per (CUDA file, options, arch) with all its name expressions; one per Numba (function, arch)
    groups: dict[tuple, list[_Job]] = {}
    for j in todo:
        s = j.source
        key = (("cuda", s.file, s.code, s.options, j.arch) if isinstance(s, CudaSource)
               else ("numba", s.pyfunc, s.signature, s.max_registers, j.arch))
        groups.setdefault(key, []).append(j)

    keep_dir = Path(keep) if keep else None
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ceilings-inspect-") as tmp:
        compiler = Compiler(Path(tmp), keep_dir)

        def build(key):
            if key[0] == "cuda":
                _, file, code, options, arch = key
                exprs = tuple(dict.fromkeys(j.source.name_expression for j in groups[key]))
                done = compiler.cuda(code, file, options, exprs, arch, cuobjdump)
            else:
                done = compiler.numba(groups[key][0].source, key[-1], ptxas, cuobjdump)
            _log(f"compiled {done.label}" + (f": {done.error}" if done.error else ""))
            return done

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            built = dict(zip(groups, pool.map(build, groups)))
    _log(f"{len(built)} compiles for {len(todo)} plans in {time.perf_counter() - started:.1f} s")
    by_job = {id(j): built[key] for key, js in groups.items() for j in js}
    return [judge(j, by_job.get(id(j))) for j in work]


def results_frame(results: Sequence[InspectionResult]):
    """One row per result; declared/derived flattened to columns (fp32, bytes_read, ...)."""
    import pandas as pd

    rows = []
    for r in results:
        row = {k: v for k, v in r.as_dict().items() if k not in ("declared", "derived")}
        row["params"] = _variant(r.params)
        for label, work in (("declared", r.declared), ("sass", r.derived or {})):
            row[f"{label}_bytes_read"] = work.get("bytes_read")
            row[f"{label}_bytes_written"] = work.get("bytes_written")
            for p, v in work.get("flops", {}).items():
                row[f"{label}_{p}"] = v
        rows.append(row)
    return pd.DataFrame(rows)


def _variant(params: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items()) or "-"


def _work_text(work: dict | None) -> str:
    if work is None:
        return "?"
    parts = [f"{p}={v:.4g}" for p, v in sorted(work["flops"].items()) if v]
    parts += [f"{tag}={work[k]:.4g}" for tag, k in (("R", "bytes_read"), ("W", "bytes_written")) if work[k]]
    return " ".join(parts) or "0"


def _counts_text(counts: dict, limit: int = 6) -> str:
    shown = sorted(counts.items(), key=lambda kv: -kv[1])
    return " ".join(f"{k}x{v}" for k, v in shown[:limit]) + (" ..." if len(shown) > limit else "") or "-"


def format_table(results: Sequence[InspectionResult]) -> str:
    header = ("kernel", "backend", "variant", "arch", "declared", "SASS-derived", "loop (per trip)", "verdict")
    rows = [(r.benchmark, r.backend, _variant(r.params), r.arch, _work_text(r.declared), _work_text(r.derived),
             (f"{r.loop}: " if r.loop else "no loop: ") + _counts_text(r.loop_work if r.loop else r.once_work),
             r.verdict) for r in results]
    head, *lines = aligned(header, rows, left=header).split("\n")
    out = [head]
    for r, line in zip(results, lines):  # each result's reasons under its row
        out += [line, *(f"    ! {reason}" for reason in r.reasons)]
    return "\n".join(out)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 all ok or not proven, 1 a MISMATCH/unprovable/error, 2 a usage or tool error. "
               f"Tools are looked up in ${TOOLS_ENV} when set. See docs/inspect.md.")
    parser.add_argument("--arch", action="append", choices=tuple(REFERENCE_LIMITS),
                        help=f"architecture to compile for (repeatable; default: {' and '.join(ARCHS)})")
    parser.add_argument("--only", metavar="GLOB", help="benchmarks whose name/group/backend/kernel match")
    parser.add_argument("--json", metavar="PATH", help="write every result (declared, SASS counts, verdict)")
    parser.add_argument("--keep", metavar="DIR", help="keep the cubins, PTX and SASS under DIR/<arch>/")
    parser.add_argument("--jobs", type=int, default=JOBS, help="compiles in parallel (default %(default)s)")
    return parser


def _make_keep_folder(keep: Path) -> None:
    try:
        keep.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CeilingsError(f"--keep {keep}: cannot create that folder ({exc.strerror or exc}); "
                            f"choose another") from None
    check_folder(keep)


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from .registry import select

    benchmarks = select(args.only)
    if not benchmarks:
        raise CeilingsError(f"--only {args.only!r} matches no benchmark")
    if args.jobs < 1:
        raise CeilingsError(f"--jobs {args.jobs}: must be 1 or more")
    # outputs are checked before the compiles (a minute for the full set), not after them
    if args.json:
        check_target(args.json)
    if args.keep:
        _make_keep_folder(Path(args.keep))
    results = inspect_benchmarks(benchmarks, tuple(args.arch or ARCHS), keep=args.keep, jobs=args.jobs)
    print(format_table(results))
    if args.json:
        write_text(args.json, json.dumps([r.as_dict() for r in results], indent=1, default=str) + "\n")
    skipped = sorted({b.name for b in benchmarks if b.backend == "library"})
    not_proven = [r for r in results if r.verdict == NOT_PROVEN]
    failed = [r for r in results if r.failed]
    if skipped:
        _log(f"no source (library calls), not inspected: {', '.join(skipped)}")
    if not_proven:
        names = sorted({f"{r.benchmark}:{r.backend} [{r.arch}]" for r in not_proven})
        _log(f"not proven (loop_trips None): {', '.join(names)}")
    _log(f"{len(results)} plans: {len(results) - len(failed) - len(not_proven)} ok, {len(not_proven)} not "
         f"proven, {len(failed)} failing")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

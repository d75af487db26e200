"""Every CuPy kernel launch of every CUDA C family, run offline against a fake `cupy`.

What only a real GPU would otherwise show: an argument whose C type differs from the kernel's parameter (CuPy
passes a Python int as a 64-bit `long long` and a Python float as a `double`, which shifts every later
parameter of an `int` / `float` kernel), a launch or a poison fill outside the runtime's non-blocking stream
(which does not synchronise with the legacy default stream), a host read of device memory before that
stream finished, and a block larger than the kernel's `__launch_bounds__`. The fake records launches instead
of running them; the parameter types are read from the kernel's signature in kernels/cuda/*.cu (template
arguments and `typename Lane<T>::Bits`-style members resolved from the name expression and the file's
explicit specialisations). A GPU test at the end runs the real measurement path (probe_device, limits_of,
measure_plan with EventTimer) on a few plans.
"""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pytest

from kernels import cache, fma, intensity, stream, tensor
from kernels.base import CUDA_DIR, DeviceLimits, Runtime
from tests.gpu import skip_if_numba_simulated

# C parameter type -> the numpy dtype CuPy must be given for it
C_SCALARS = {"int": "int32", "unsigned": "uint32", "unsigned int": "uint32", "long long": "int64",
             "unsigned long long": "uint64", "size_t": "uint64", "float": "float32", "double": "float64",
             "bool": "bool"}
# pointer element type -> dtype of the array passed (vector types are arrays of their scalar)
C_ELEMENTS = {**C_SCALARS, "float4": "float32", "double2": "float64"}

# A small device (CC 8.9 so that every tensor op, fp8 included, has a plan): host arrays stay a few MiB.
SMALL = DeviceLimits(sm_count=2, compute_capability=(8, 9), l2_bytes=256 * 2**10, free_bytes=64 * 2**20,
                     max_threads_per_sm=1536)
FAMILIES = (stream, cache, fma, intensity, tensor)


# ---------------------------------------------------------------------------------- the .cu signatures

def _strip_comments(code: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", code, flags=re.DOTALL)


def kernel_signature(code: str, name_expression: str) -> tuple[list[tuple[str, bool]], int | None]:
    """[(C type, is pointer)] of the kernel's parameters with template arguments substituted, and the
    maximum block size of its __launch_bounds__ (None without one)."""
    code = _strip_comments(code)
    name, _, targs = name_expression.partition("<")
    args = [a.strip() for a in targs.rstrip(">").split(",")] if targs else []
    m = re.search(r"template\s*<([^>]*)>\s*__global__\s+void\s+(?:__launch_bounds__\(([^)]*)\)\s*)?"
                  + re.escape(name) + r"\s*\(([^)]*)\)", code)
    assert m, f"no kernel {name} in the source"
    tparams = [p.split()[-1] for p in m.group(1).split(",")]
    assert len(tparams) == len(args), name_expression
    values = dict(zip(tparams, args))

    def resolve(ctype: str) -> str:
        member = re.fullmatch(r"typename\s+(\w+)<(\w+)>::(\w+)", ctype)
        if member:
            outer, param, field = member.groups()
            spec = re.search(r"template\s*<>\s*struct\s+" + outer + r"<" + re.escape(values[param])
                             + r">\s*\{(.*?)\n\};", code, flags=re.DOTALL)
            assert spec, f"no specialisation {outer}<{values[param]}>"
            return resolve(re.search(r"using\s+" + field + r"\s*=\s*([^;]+);", spec.group(1)).group(1).strip())
        return values.get(ctype, ctype)

    params = []
    for raw in m.group(3).split(","):
        text = re.sub(r"\b(const|__restrict__)\b", " ", raw)
        pointer = "*" in text
        words = text.replace("*", " ").split()
        params.append((resolve(" ".join(words[:-1])), pointer))
    bound = None
    if m.group(2):
        expr = m.group(2).split(",")[0]
        for param, value in values.items():
            expr = re.sub(rf"\b{param}\b", value, expr)
        bound = int(eval(expr, {"__builtins__": {}}))  # integer template arithmetic only
    return params, bound


# ------------------------------------------------------------------------------------------- fake CuPy

class LaunchError(AssertionError):
    pass


class FakeStream:
    def __init__(self, fake, name: str):
        self.fake, self.name, self.pending, self.ptr = fake, name, False, id(self)

    def __enter__(self):
        self.fake.stack.append(self)
        return self

    def __exit__(self, *exc):
        self.fake.stack.pop()

    def synchronize(self):
        self.pending = False


class FakeArray(np.ndarray):
    """A host array standing in for a device one; it knows the fake CuPy it belongs to."""

    fake = None

    def fill(self, value):
        self.fake.enqueue(f"fill of a {self.dtype} array")
        super().fill(value)

    def get(self, stream=None, **kw):
        return self.fake.read(self, stream)


class FakeKernel:
    def __init__(self, fake, code: str, name_expression: str):
        self.fake, self.name = fake, name_expression
        self.params, self.bound = kernel_signature(code, name_expression)

    def __call__(self, grid, block, args, shared_mem=0):
        where = f"{self.name}"
        if not (isinstance(grid, tuple) and isinstance(block, tuple)):
            raise LaunchError(f"{where}: grid and block must be tuples, got {grid!r}, {block!r}")
        if not all(isinstance(d, (int, np.integer)) and d >= 1 for d in grid + block):
            raise LaunchError(f"{where}: grid/block dims must be positive integers: {grid}, {block}")
        threads = int(np.prod(block))
        if threads > 1024 or (self.bound is not None and threads > self.bound):
            raise LaunchError(f"{where}: block of {threads} exceeds __launch_bounds__ {self.bound}")
        if grid[0] >= 2**31:
            raise LaunchError(f"{where}: grid.x {grid[0]} beyond the limit")
        if len(args) != len(self.params):
            raise LaunchError(f"{where}: {len(args)} arguments for {len(self.params)} parameters")
        for i, (arg, (ctype, pointer)) in enumerate(zip(args, self.params)):
            if pointer:
                want = C_ELEMENTS[ctype]
                if not isinstance(arg, FakeArray) or arg.dtype != np.dtype(want) or not arg.flags.c_contiguous:
                    raise LaunchError(f"{where} argument {i}: {ctype}* needs a contiguous {want} device array, "
                                      f"got {type(arg).__name__} {getattr(arg, 'dtype', '')}")
            else:
                want = C_SCALARS[ctype]
                if not isinstance(arg, np.generic) or arg.dtype != np.dtype(want):
                    got = getattr(arg, "dtype", type(arg).__name__)
                    raise LaunchError(f"{where} argument {i}: C {ctype} needs numpy.{want}, got {got} "
                                      "(a Python int is passed as long long, a Python float as double)")
        self.fake.enqueue(f"launch of {where}")
        self.fake.launches.append((self.name, grid, block, args))


class FakeRawModule:
    def __init__(self, fake, code=None, *, options=(), name_expressions=None, **kw):
        if not isinstance(options, tuple):  # RawModule's `options` is a typed Cython tuple
            raise TypeError(f"options must be a tuple, got {type(options).__name__}")
        self.fake, self.code, self.names = fake, code, tuple(name_expressions or ())

    def get_function(self, name):
        assert name in self.names, f"{name} was not among the name expressions {self.names}"
        return FakeKernel(self.fake, self.code, name)


class FakeCupy(types.ModuleType):
    """The slice of CuPy the families use, with stream bookkeeping: work enqueued on a stream makes it
    pending until synchronised; a host read through any other stream while it is pending is a race."""

    def __init__(self):
        super().__init__("cupy")
        self.stack: list[FakeStream] = []
        self.launches: list = []
        self.runtime_stream = FakeStream(self, "runtime")
        null = FakeStream(self, "null")
        self.cuda = types.SimpleNamespace(Stream=types.SimpleNamespace(null=null))
        self.null = null
        self.RawModule = lambda code=None, **kw: FakeRawModule(self, code, **kw)

    def current(self) -> FakeStream:
        return self.stack[-1] if self.stack else self.null

    def enqueue(self, what: str) -> None:
        if self.current() is not self.runtime_stream:
            raise LaunchError(f"{what} on the {self.current().name} stream, not the runtime's non-blocking "
                              "stream: it is not ordered with the kernels")
        self.runtime_stream.pending = True

    def read(self, array, stream) -> np.ndarray:
        through = stream or self.current()
        if through is not self.runtime_stream and self.runtime_stream.pending:
            raise LaunchError("host read through the legacy default stream while the runtime stream still "
                              "has work: it can read before the kernel finished (synchronize first)")
        return np.array(array, copy=True).view(np.ndarray)

    def _wrap(self, host: np.ndarray) -> FakeArray:
        out = host.view(FakeArray)
        out.fake = self
        return out

    def asarray(self, host):
        """CuPy's copy keeps an F-contiguous layout and makes anything else C-contiguous."""
        host = np.asarray(host)
        return self._wrap(np.array(host, order="F" if host.flags.fnc else "C"))

    def empty(self, shape, dtype=np.float64):
        """All bits set (NaN, or the largest integer): never a right result, so no check can pass by luck."""
        count = int(np.prod(shape))
        return self._wrap(np.full(count * np.dtype(dtype).itemsize, 0xFF, np.uint8).view(dtype).reshape(shape))

    def empty_like(self, a):
        return self.empty(a.shape, a.dtype)

    def asnumpy(self, a, stream=None, **kw):
        return self.read(a, stream)

    def get_default_memory_pool(self):
        return types.SimpleNamespace(free_all_blocks=lambda: None)

    def __getattr__(self, name):
        """numpy's array functions and types (arange, zeros, uint32, ...) for the rest: CuPy's run the same
        arithmetic on the device."""
        return getattr(np, name)


@pytest.fixture
def fake_cupy(monkeypatch):
    fake = FakeCupy()
    FakeArray.fake = fake
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def cuda_c_cases():
    """Every plan of every CUDA C benchmark on SMALL, quick and full."""
    for family in FAMILIES:
        for bench in family.BENCHMARKS:
            if bench.backend == "cuda-c":
                for quick in (True, False):
                    for i, plan in enumerate(bench.plans(SMALL, quick)):
                        yield pytest.param(bench, plan, id=f"{bench.name}-{'quick' if quick else 'full'}-{i}")


@pytest.mark.parametrize("bench,plan", list(cuda_c_cases()))
def test_every_launch_matches_the_kernel_signature_and_stream(fake_cupy, bench, plan):
    prepared = bench.prepare(plan, Runtime(simulate=False, cupy_stream=fake_cupy.runtime_stream))
    prepared.poison()
    prepared.launch()
    prepared.launch()
    message = prepared.check()  # the fake runs nothing, so the check must say so, not raise
    assert message is not None
    prepared.release()
    name = bench.source(plan).name_expression
    assert [n for n, *_ in fake_cupy.launches] == [name] * len(fake_cupy.launches)
    assert len(fake_cupy.launches) >= 2


def test_dram_inputs_are_written_on_the_device_and_checked_there(fake_cupy):
    """The CUDA C dram.copy input is made by the device (no host copy: asarray is never called) and equals the
    hash of the index, computed here with Python integers; the check passes on the right output and names a
    single wrong element."""
    fake_cupy.asarray = None  # a host-to-device copy would fail
    bench = next(b for b in stream.BENCHMARKS if b.name == "dram.copy" and b.backend == "cuda-c")
    plan = bench.plans(SMALL, True)[0]
    prepared = bench.prepare(plan, Runtime(simulate=False, cupy_stream=fake_cupy.runtime_stream))
    prepared.poison()
    prepared.launch()
    src, dst = fake_cupy.launches[-1][3][:2]
    n = plan.params["elements"]
    want = [((i % 65521) * 2654435761 % 2**32) >> 28 for i in range(0, n, 9973)]
    assert src[::9973].tolist() == want and n > 65521
    dst[...] = src  # what the kernel does
    assert prepared.check() is None
    dst[n - 7] += 1
    assert prepared.check() == (f"dram.copy output: 1 of {n} values differ (first at index {n - 7}: got "
                                f"{src[n - 7] + 1}, expected {src[n - 7]})")
    prepared.release()


# ------------------------------------------------------------------------ the fake catches what it should

def _fma_kernel(fake):
    (plan,) = fma.plans(fma.LANES["fp32"], SMALL, True)
    source = fma.cuda_source(fma.LANES["fp32"], plan)
    return FakeKernel(fake, source.code, source.name_expression)


def test_signature_resolves_template_members_and_launch_bounds():
    code = (CUDA_DIR / "fma.cu").read_text()
    params, bound = kernel_signature(code, "fma_peak<double, 8, 64, 8>")
    assert params == [("unsigned long long", True), ("unsigned long long", False), ("unsigned long long", False),
                      ("unsigned long long", False), ("int", False), ("int", False), ("int", False)]
    assert bound == 256
    params, bound = kernel_signature((CUDA_DIR / "intensity.cu").read_text(), "intensity<double2, 4>")
    assert params == [("double2", True), ("double2", True), ("unsigned long long", False), ("double", False),
                      ("double", False)] and bound is None
    params, bound = kernel_signature((CUDA_DIR / "cache.cu").read_text(), "cache_read<1024, 2, 4, true>")
    assert params[4] == ("long long", False) and bound == 1024


def test_python_scalars_and_wrong_widths_are_rejected(fake_cupy):
    kernel = _fma_kernel(fake_cupy)
    out = fake_cupy.empty(8, np.uint32)
    good = (out, np.uint32(1), np.uint32(2), np.uint32(3), np.int32(4), np.int32(5), np.int32(0))
    with fake_cupy.runtime_stream:
        kernel((1,), (256,), good)
        with pytest.raises(LaunchError, match="Python int is passed as long long"):
            kernel((1,), (256,), good[:4] + (4,) + good[5:])
        with pytest.raises(LaunchError, match="needs numpy.uint32, got int64"):
            kernel((1,), (256,), (out, np.int64(1)) + good[2:])
        with pytest.raises(LaunchError, match="exceeds __launch_bounds__"):
            kernel((1,), (512,), good)
    with pytest.raises(LaunchError, match="not the runtime's non-blocking stream"):
        kernel((1,), (256,), good)


def test_unsynchronised_host_read_is_a_race(fake_cupy):
    array = fake_cupy.empty(4, np.float32)
    with fake_cupy.runtime_stream:
        array.fill(1.0)
    with pytest.raises(LaunchError, match="before the kernel finished"):
        fake_cupy.asnumpy(array)
    assert fake_cupy.asnumpy(array, stream=fake_cupy.runtime_stream).tolist() == [1.0] * 4
    fake_cupy.runtime_stream.synchronize()
    assert array.get().tolist() == [1.0] * 4


# ------------------------------------------------------------------------------------------------ GPU

@pytest.mark.gpu
@pytest.mark.parametrize("name,backend,kernel", [
    ("fp32.fma", "cuda-c", None), ("fp32.fma", "numba", None),
    ("dram.triad", "numba", "numba_stream.dram_triad[waves]"), ("dram.dot", "cuda-c", "dram_dot[waves]"),
    ("tensor.fp16", "cuda-c", None), ("l2.read", "cuda-c", None)])
def test_measure_plan_on_the_gpu(name, backend, kernel, gpu_limits, gpu_runtime):
    """What `ceilings.measure` does per plan: probe, plan, poison, probe launch, warm-up, timed launches
    (several to a sample between two CUDA events) on a non-blocking stream, check."""
    skip_if_numba_simulated(backend)
    from ceilings.device import probe_device
    from ceilings.harness import QUICK_BUDGET, EventTimer, measure_plan
    from kernels.registry import all_benchmarks

    device = probe_device(0)
    for key in ("compute_capability", "sm_count", "l2_bytes", "max_threads_per_sm"):
        assert device[key], (key, device["probe_errors"])
    (bench,) = [b for b in all_benchmarks() if b.name == name and b.backend == backend and kernel in (None, b.kernel)]
    plan = bench.plans(gpu_limits, True)[0]
    m = measure_plan(bench, plan, gpu_runtime, EventTimer(gpu_runtime.cupy_stream), QUICK_BUDGET)
    assert m.problem is None
    assert m.stats.n >= QUICK_BUDGET.min_reps and 0 < m.stats.min_s <= m.stats.median_s


def test_precompile_groups_every_variant_of_a_file_in_one_module(fake_cupy):
    from kernels.base import CudaSource, Runtime

    made = []
    real = fake_cupy.RawModule
    fake_cupy.RawModule = lambda code=None, **kw: made.append(kw["name_expressions"]) or real(code, **kw)
    runtime = Runtime(simulate=False, cupy_stream=fake_cupy.runtime_stream)
    a, b = CudaSource("fma.cu", "fma_peak<float, 8, 64, 8>"), CudaSource("fma.cu", "fma_peak<double, 8, 64, 8>")
    runtime.precompile([a, b, a])
    assert made == [("fma_peak<double, 8, 64, 8>", "fma_peak<float, 8, 64, 8>")]
    runtime.cuda_function(b)
    runtime.cuda_function(CudaSource("stream.cu", "dram_read<256, 4, 8>"))
    assert len(made) == 2 and made[1] == ("dram_read<256, 4, 8>",)

"""The host link: host.h2d.pinned, host.d2h.pinned, and their pageable contrast host.h2d.pageable,
host.d2h.pageable (cudaMemcpyAsync through CuPy on the run's stream), in bytes per second across the link.

The ceiling of data loading and offload: PCIe Gen5 x16 carries ~64 GB/s a direction raw (docs/latency.md).
Pinned host memory is copied by the GPU's copy engines directly; pageable memory goes through the driver's
staging buffer, so it is slower, and a copy from it returns only when done. There is no kernel, so nothing for
`kernels.inspect` to prove: the declared bytes are the copy's size, counted once (what crosses the link), and
the check compares every byte of the destination with the source's pattern. Importing this module imports no
CUDA package.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Benchmark, DeviceLimits, Plan, Prepared, Runtime, Work, format_bytes
from .stream import mismatch

COPY_BYTES = 256 * 2**20  # ~5 ms pinned at ~55 GB/s: the copy's fixed cost is far under 1 % of it
FREE_FRACTION = 0.25  # ... or less on a GPU with little free memory
PATTERN_PERIOD = 251  # bytes 0..250, a prime period: a misplaced chunk differs; 255 is the poison
POISON = 255
H2D, D2H = 1, 2  # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost


@dataclass(frozen=True)
class Copy:
    direction: str  # h2d | d2h
    pinned: bool

    @property
    def name(self) -> str:
        return f"host.{self.direction}.{'pinned' if self.pinned else 'pageable'}"


COPIES = tuple(Copy(d, p) for p in (True, False) for d in ("h2d", "d2h"))


def plan(copy: Copy, limits: DeviceLimits, quick: bool) -> Plan:
    del copy, quick
    size = min(COPY_BYTES, int(FREE_FRACTION * limits.free_bytes))
    notes = () if size == COPY_BYTES else (f"{format_bytes(size)} copies, not {format_bytes(COPY_BYTES)}: a "
                                           f"quarter of the free memory",)
    return Plan(grid=1, block=1, work=Work(bytes_read=size), params={"copy_bytes": size}, notes=notes)


def pattern(n: int) -> np.ndarray:
    return (np.arange(n, dtype=np.int64) % PATTERN_PERIOD).astype(np.uint8)


def prepare(copy: Copy, plan: Plan, runtime: Runtime) -> Prepared:
    import cupy
    import cupyx

    n = plan.params["copy_bytes"]
    stream = runtime.cupy_stream
    want = pattern(n)
    host = cupyx.empty_pinned((n,), dtype=np.uint8) if copy.pinned else np.empty(n, dtype=np.uint8)
    with stream:
        device = cupy.empty(n, dtype=cupy.uint8)
    source, kind = (host, H2D) if copy.direction == "h2d" else (device, D2H)
    destination = device if source is host else host
    dst = destination.data.ptr if destination is device else destination.ctypes.data
    src = source.data.ptr if source is device else source.ctypes.data

    def launch() -> None:
        cupy.cuda.runtime.memcpyAsync(dst, src, n, kind, stream.ptr)

    def poison() -> None:  # the source holds the pattern, the destination a byte the pattern never has
        with stream:
            if source is host:
                host[:] = want
                device.fill(POISON)
            else:
                device.set(want, stream=stream)
                host[:] = POISON
        stream.synchronize()

    def check() -> str | None:
        stream.synchronize()
        got = device.get(stream=stream) if destination is device else np.array(host)
        return mismatch(copy.name, got, want)

    def release() -> None:
        stream.synchronize()

    return Prepared(launch=launch, poison=poison, check=check, release=release)


BENCHMARKS = [
    Benchmark(name=c.name, backend="library", kind="bandwidth", kernel=f"cudaMemcpyAsync[{c.direction}]",
              description=f"{'pinned' if c.pinned else 'pageable'} host memory "
                          f"{'to the device' if c.direction == 'h2d' else 'from the device'}, "
                          f"{format_bytes(COPY_BYTES)} a copy; bytes across the link a second",
              plans=lambda limits, quick, c=c: [plan(c, limits, quick)],
              prepare=lambda p, runtime, c=c: prepare(c, p, runtime), source=lambda p: None,
              level="host", pipe="memory", peak_key="host", group="host")
    for c in COPIES
]

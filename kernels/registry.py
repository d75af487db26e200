"""Every benchmark of every family, in the order a run measures them."""

from __future__ import annotations

import fnmatch
import importlib

from .base import Benchmark

# Each module exposes BENCHMARKS: list[Benchmark]. Importing them imports no CUDA package. The order is a run's
# priority: the tensor roofs (mma.sync, wgmma, cuBLAS), the headline of a Hopper run, then DRAM, then the
# latency floors, the SFU and the host link (~10 s in all), then the rest, so that a run cut short at a time
# limit has saved those first (docs/device-check.md).
FAMILIES = ("kernels.tensor", "kernels.wgmma", "kernels.library", "kernels.stream", "kernels.latency",
            "kernels.sfu", "kernels.hostlink", "kernels.cache", "kernels.fma", "kernels.intensity")


def all_benchmarks() -> list[Benchmark]:
    return [b for module in FAMILIES for b in importlib.import_module(module).BENCHMARKS]


def select(pattern: str | None = None, *, simulate: bool = False) -> list[Benchmark]:
    """Benchmarks whose name, group, backend or kernel matches the glob(s) (comma-separated)."""
    chosen = [b for b in all_benchmarks() if b.simulable or not simulate]
    if not pattern:
        return chosen
    globs = [p.strip() for p in pattern.split(",") if p.strip()]
    return [b for b in chosen
            if any(fnmatch.fnmatch(field, g) for g in globs
                   for field in (b.name, b.group, b.backend, b.kernel, f"{b.name}:{b.backend}"))]

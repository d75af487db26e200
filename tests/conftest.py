"""Test tiers: CPU unit tests, simulator tests (`sim`), offline compiles (`nvcc`), real-GPU tests (`gpu`)."""

from __future__ import annotations

import os

import pytest


def _no_gpu_reason() -> str | None:
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return None
        return "the CUDA runtime finds no device"
    except Exception as exc:  # no driver / insufficient driver
        return f"no usable NVIDIA GPU ({type(exc).__name__})"


NO_GPU_REASON = _no_gpu_reason()

# Without a GPU, Numba kernels run on the simulator; this must be set before numba.cuda is imported.
if NO_GPU_REASON:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def pytest_collection_modifyitems(config, items):
    if NO_GPU_REASON is None:
        return
    skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU: {NO_GPU_REASON}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gpu_limits():
    """Planning limits of device 0, through the same probe the measure command uses (GPU tests only)."""
    import cupy

    from ceilings.device import limits_of, probe_device

    return limits_of(probe_device(0), cupy.cuda.runtime.memGetInfo()[0])


@pytest.fixture
def gpu_runtime():
    """A runtime on a non-blocking CuPy stream of device 0, as the measure command uses (GPU tests only)."""
    import cupy

    from kernels.base import Runtime

    return Runtime(simulate=False, cupy_stream=cupy.cuda.Stream(non_blocking=True))

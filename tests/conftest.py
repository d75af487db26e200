"""Test tiers: CPU unit tests, simulator tests (`sim`), offline compiles (`nvcc`), real-GPU tests (`gpu`)."""

from __future__ import annotations

import importlib.util
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


# the simulator is Numba's: an install without the CUDA extras (README, "Set up") has none
NO_NUMBA = importlib.util.find_spec("numba") is None


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason=f"needs an NVIDIA GPU: {NO_GPU_REASON}")
    skip_sim = pytest.mark.skip(reason="needs Numba's CUDA simulator: pip install -e '.[cuda13]' (or [cuda12])")
    for item in items:
        if "gpu" in item.keywords and NO_GPU_REASON is not None:
            item.add_marker(skip_gpu)
        elif "sim" in item.keywords and NO_NUMBA:
            item.add_marker(skip_sim)


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

"""What the GPU tests share: run a benchmark's plan on the device and check its output."""

import pytest


def skip_if_numba_simulated(backend: str) -> None:
    """A Numba benchmark can only run on the GPU when this session's Numba is not the simulator."""
    if backend == "numba":
        from numba import config

        if config.ENABLE_CUDASIM:
            pytest.skip("Numba is on its simulator in this session (NUMBA_ENABLE_CUDASIM=1)")


def run_checked(bench, plan, runtime, *, poison_is_caught: bool = False) -> None:
    """Poison, launch, check (None: right), release. poison_is_caught: the check reads the timed output, so
    before any launch it must report the poison."""
    prepared = bench.prepare(plan, runtime)
    try:
        prepared.poison()
        if poison_is_caught:
            assert prepared.check() is not None
        prepared.launch()
        runtime.cupy_stream.synchronize()
        assert prepared.check() is None
    finally:
        prepared.release()

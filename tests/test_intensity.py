"""Intensity sweep: declared work by independent arithmetic, exact expectation, SASS loop body, GPU run."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import intensity
from kernels.base import REFERENCE_LIMITS, DeviceLimits
from tests.gpu import run_checked
from tests.sass_tools import loop_counts, sass_of

H100_LIKE = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * 2**20, free_bytes=80 * 2**30)


def _bench(name):
    (b,) = [b for b in intensity.BENCHMARKS if b.name == name]
    return b


@pytest.mark.parametrize("name, elem", [("intensity.fp32", 4), ("intensity.fp64", 8)])
def test_declared_work_and_x(name, elem):
    bench = _bench(name)
    assert bench.is_sweep and bench.group == "sweep" and bench.kind == "compute"
    plans = bench.plans(H100_LIKE, False)
    assert plans[0].params["fmas"] == 0 and plans[-1].params["fmas"] >= 1024
    for plan in plans:
        threads = 132 * 2048
        n_vec = plan.params["vectors"]
        assert n_vec == threads * plan.loop_trips
        assert n_vec * 16 >= 8 * 50 * 2**20  # each array >= 8x L2
        assert plan.work.bytes_read == plan.work.bytes_written == n_vec * 16
        n = plan.params["fmas"]
        assert plan.work.total_flops == n_vec * (16 // elem) * n * 2
        # FLOP/B = 2N / (2 * element size)
        assert bench.sweep_x_of(plan) == pytest.approx(n / elem)


def test_quick_has_fewer_points():
    bench = _bench("intensity.fp32")
    assert 1 < len(bench.plans(H100_LIKE, True)) < len(bench.plans(H100_LIKE, False))


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
def test_expected_values_by_hand(precision):
    p = intensity.PRECISIONS[precision]
    x = intensity.inputs(p, 130)
    assert x[65] == 1 + 1 / 64 and x[63] == 1 + 63 / 64
    # the check launch adds 1/64 per FMA
    assert intensity.expected(p, 3, x)[65] == 1 + 4 / 64
    assert intensity.expected(p, 1024, x)[63] == 1 + 63 / 64 + 16
    assert np.array_equal(intensity.expected(p, 0, x), x)


@pytest.mark.nvcc
@pytest.mark.parametrize("name, fmas, opcode, lanes", [("intensity.fp32", 16, "FFMA", 4),
                                                     ("intensity.fp64", 16, "DFMA", 2)])
def test_loop_body_has_n_fmas_per_element(name, fmas, opcode, lanes):
    bench = _bench(name)
    plan = next(p for p in bench.plans(REFERENCE_LIMITS["sm_90"], True) if p.params["fmas"] == fmas)
    loop, _ = loop_counts(sass_of(bench.source(plan)))
    assert loop[opcode] == fmas * lanes
    assert loop["LDG.E.128.CONSTANT"] == 1 and loop["STG.E.128"] == 1


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["intensity.fp32", "intensity.fp64"])
def test_on_the_gpu(name, gpu_limits, gpu_runtime):
    for plan in _bench(name).plans(gpu_limits, True)[:3]:
        run_checked(_bench(name), plan, gpu_runtime, poison_is_caught=True)

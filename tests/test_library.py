"""cuBLAS library ceilings: plans sized from free memory, declared 2*n^3 FLOPs, the sampled check, GPU runs."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import library
from kernels.base import DeviceLimits
from tests.gpu import run_checked

GiB = 2**30
H100 = DeviceLimits(sm_count=132, compute_capability=(9, 0), l2_bytes=50 * 2**20, free_bytes=79 * GiB)
BY_NAME = {b.name: b for b in library.BENCHMARKS}
NAMES = ["cublas.fp64", "cublas.fp32", "cublas.tf32", "cublas.fp16", "cublas.bf16"]


def _with_free(limits: DeviceLimits, free: int, cc=None) -> DeviceLimits:
    return DeviceLimits(sm_count=limits.sm_count, compute_capability=cc or limits.compute_capability,
                        l2_bytes=limits.l2_bytes, free_bytes=free)


def test_the_five_ceilings_and_their_labels():
    assert sorted(BY_NAME) == sorted(NAMES)
    for b in library.BENCHMARKS:
        assert b.backend == "library" and b.group == "library" and not b.simulable
        assert "library" in b.description
        assert b.source(b.plans(H100, True)[0]) is None
    assert (BY_NAME["cublas.fp32"].pipe, BY_NAME["cublas.fp32"].peak_key) == ("cuda-core", "fp32")
    assert (BY_NAME["cublas.fp64"].pipe, BY_NAME["cublas.fp64"].peak_key) == ("tensor", "tensor.fp64")
    for p in ("tf32", "fp16", "bf16"):
        assert (BY_NAME[f"cublas.{p}"].pipe, BY_NAME[f"cublas.{p}"].peak_key) == ("tensor", f"tensor.{p}")


@pytest.mark.parametrize("name", NAMES)
def test_full_and_quick_sizes_and_flops(name):
    bench = BY_NAME[name]
    precision = name.split(".")[1]
    (full,) = bench.plans(H100, False)
    (quick,) = bench.plans(H100, True)
    assert (full.params["m"], full.params["n"], full.params["k"]) == (8192, 8192, 8192)
    assert full.work.flops == {precision: 1_099_511_627_776}  # 2 * 8192**3
    assert quick.params["n"] == 4096 and quick.work.flops == {precision: 137_438_953_472}  # 2 * 4096**3
    assert full.loop_trips is None


def test_sizes_come_from_free_memory():
    one_gib = _with_free(H100, GiB)
    # fp64: 3 * 8192^2 * 8 B = 1.5 GiB > half of 1 GiB; 3 * 4096^2 * 8 B = 384 MiB fits
    (fp64,) = BY_NAME["cublas.fp64"].plans(one_gib, False)
    assert fp64.params["n"] == 4096
    assert fp64.work.bytes_read == 2 * 4096 * 4096 * 8 and fp64.work.bytes_written == 4096 * 4096 * 8
    # fp16: 3 * 8192^2 * 2 B = 384 MiB fits in half of 1 GiB
    (fp16,) = BY_NAME["cublas.fp16"].plans(one_gib, False)
    assert fp16.params["n"] == 8192
    # 1 MiB free: not even 512^2 fits
    assert all(b.plans(_with_free(H100, 2**20), False) == [] for b in library.BENCHMARKS)


def test_capability_gates():
    turing = _with_free(H100, 16 * GiB, cc=(7, 5))
    have = {b.name for b in library.BENCHMARKS if b.plans(turing, True)}
    assert have == {"cublas.fp64", "cublas.fp32", "cublas.fp16"}
    pascal = _with_free(H100, 16 * GiB, cc=(6, 1))
    assert {b.name for b in library.BENCHMARKS if b.plans(pascal, True)} == {"cublas.fp64", "cublas.fp32"}


# ---- the sampled check: tolerances against emulated rounding --------------------------------------------------

K = 8192
_rng = np.random.default_rng(7)
A_ROWS = (_rng.random((8, K), dtype=np.float32) * 2 - 1).astype(np.float64)
B_COLS = (_rng.random((K, 8), dtype=np.float32) * 2 - 1).astype(np.float64)


def _tf32(x: np.ndarray) -> np.ndarray:
    """Truncate to tf32 (10 mantissa bits), as an HMMA reads an fp32 register."""
    bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32).astype(np.float64)


def test_check_accepts_fp32_rounding_and_rejects_tf32_as_fp32():
    fp32 = (A_ROWS.astype(np.float32) @ B_COLS.astype(np.float32)).astype(np.float64)
    tf32 = _tf32(A_ROWS) @ _tf32(B_COLS)
    assert library.compare("fp32", fp32, A_ROWS, B_COLS) is None
    assert library.compare("tf32", tf32, A_ROWS, B_COLS) is None
    assert library.compare("fp32", tf32, A_ROWS, B_COLS) is not None  # TF32 silently used for fp32


def test_check_accepts_half_outputs_and_rejects_wrong_entries():
    exact = A_ROWS @ B_COLS
    fp16_out = exact.astype(np.float16).astype(np.float64)
    bf16_out = ((exact.astype(np.float32).view(np.uint32) + 0x8000) & 0xFFFF0000).view(np.float32)
    assert library.compare("fp16", fp16_out, A_ROWS, B_COLS) is None
    assert library.compare("bf16", bf16_out.astype(np.float64), A_ROWS, B_COLS) is None
    wrong = exact.copy()
    wrong[3, 5] = exact[5, 3]  # a transposed entry: off by ~|C|, 1e-2 of the scale
    msg = library.compare("bf16", wrong, A_ROWS, B_COLS)
    assert msg is not None and msg.startswith("1 of 64")
    poisoned = exact.copy()
    poisoned[0, 0] = np.nan
    assert library.compare("fp64", poisoned, A_ROWS, B_COLS).startswith("1 of 64")


# ---- on a GPU --------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_runs_and_checks_on_gpu(name, gpu_limits, gpu_runtime):
    from cupy._core import _routines_linalg as linalg

    bench = BY_NAME[name]
    plans = bench.plans(gpu_limits, True)
    if not plans:
        pytest.skip(f"{name} has no plan on CC {gpu_limits.compute_capability}")
    before = linalg.get_compute_type(np.float32)
    run_checked(bench, plans[0], gpu_runtime, poison_is_caught=True)
    assert linalg.get_compute_type(np.float32) == before  # the TF32 pin is undone

"""What both application scripts share: device choice, the profiled range around the measured step, output.

The measured step runs between cudaProfilerStart and cudaProfilerStop (torch.cuda.profiler) inside an NVTX
range "measured_step": under `ncu --profile-from-start off` (`python -m analysis.profile --range`) ncu sees only that
step, not the model set-up or the warm-up step. Without a profiler both calls do nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable

NVTX_RANGE = "measured_step"


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda", help="torch device (default cuda; cpu for a dry run)")
    p.add_argument("--warmup", type=int, default=1, metavar="N", help="unmeasured steps first (default 1)")
    p.add_argument("--dry-run", action="store_true",
                   help="tiny sizes, to check the script anywhere (with --device cpu: no CUDA at all)")
    p.add_argument("--no-profiler-range", dest="profiler_range", action="store_false",
                   help="do not call cudaProfilerStart/Stop around the measured step")


def require_torch():
    try:
        import torch
    except ImportError:
        from common.errors import MissingDependency

        raise MissingDependency("this application needs PyTorch (pip install torch torchvision); it is not "
                                "a dependency of this project") from None
    return torch


def resolve_device(torch, name: str):
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        from common.errors import MissingDependency

        raise MissingDependency("--device cuda but torch finds no CUDA device; use --device cpu --dry-run")
    return device


@contextlib.contextmanager
def profiled_range(torch, device, enabled: bool):
    """cudaProfilerStart/Stop and an NVTX range around the block, on CUDA devices only."""
    if device.type != "cuda" or not enabled:
        yield
        return
    torch.cuda.synchronize(device)
    torch.cuda.profiler.start()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    try:
        yield
        torch.cuda.synchronize(device)
    finally:
        torch.cuda.nvtx.range_pop()
        torch.cuda.profiler.stop()


def run_steps(torch, device, step: Callable[[], object], warmup: int, profiler_range: bool) -> dict:
    """Warm-up steps, then one measured step; wall seconds of each (device synchronized). `step` returns a
    0-d tensor (read after the step, so that no host sync sits inside it)."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    t0 = time.perf_counter()
    for _ in range(warmup):
        step()
    sync()
    warm_s = time.perf_counter() - t0
    with profiled_range(torch, device, profiler_range):
        t1 = time.perf_counter()
        value = step()
        sync()
        step_s = time.perf_counter() - t1
    return {"warmup_steps": warmup, "warmup_s": warm_s, "step_s": step_s, "value": float(value)}


def emit(record: dict) -> None:
    """One JSON line on stdout: what ran and how long the measured step took."""
    print(json.dumps(record))
    sys.stdout.flush()

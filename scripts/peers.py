"""Peers: what other libraries achieve on this GPU, timed by this project's harness, beside our ceilings.

    python scripts/peers.py [--roofs ROOFS.json] OUTDIR     # on a GPU (about 20-30 s with torch)
    python scripts/peers.py --dry-run [--roofs ROOFS.json] OUTDIR   # no GPU: what would be timed

Each peer goes through `ceilings.harness.measure_plan` (poison, warm-up by time, CUDA events on one
non-blocking CuPy stream, NVML clocks, output check), exactly as a ceiling does:
- DRAM: `cupy.copyto(dst, src)` and a device-to-device cudaMemcpyAsync of a buffer of at least 8x L2
  (bytes = 2 x size: read once, written once), against the best `dram` ceiling;
- cuBLAS through CuPy: `cupy.matmul` 8192^3 fp16 (tensor cores, fp32 accumulation) and fp32 (TF32 off
  unless CUPY_TF32 is set), on uniform [-1, 1) data;
- torch (when importable): `torch.matmul` 8192^3 bf16 and fp32 with TF32 off, launched on the same
  stream (torch.cuda.ExternalStream).
A GEMM is 2 n^3 FLOPs. Each peer is compared with our best valid ceiling of the same peak key in --roofs;
a peer more than PEER_MARGIN above it means our ceiling is too low: a bug in ours (exit 1).
Writes OUTDIR/peers.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.atomic import write_text
from common.errors import MissingDependency, cli_entry
from scripts.outdir_cli import existing_folder, script_parser

PROG = "peers"
COPY_MIN_L2_MULTIPLE = 8  # a copy of 8x L2 streams from DRAM
COPY_MIN_BYTES = 512 * 2**20
GEMM_N = 8192
MEMORY_FRACTION = 0.5  # of free memory for one peer's buffers
# Two timings of the same cuBLAS call (ours in ceilings.measure, this one) differ by a percent or two; past
# this margin a peer really is faster than the ceiling we report.
PEER_MARGIN = 0.03
CHECK_SAMPLES = 8  # rows and columns of C checked against a float64 host product


@dataclass(frozen=True)
class Peer:
    name: str
    library: str  # "cupy" | "torch"
    call: str
    kind: str  # bandwidth | compute
    peak_key: str
    precision: str | None
    setup: Callable  # (plan, runtime, limits) -> Prepared


def copy_bytes(l2_bytes: int, free_bytes: int) -> int:
    """Source size for the copy peers: at least 8x L2 (and 512 MiB), two buffers in half the free memory."""
    want = max(COPY_MIN_L2_MULTIPLE * l2_bytes, COPY_MIN_BYTES)
    fit = int(free_bytes * MEMORY_FRACTION) // 2
    size = min(want, fit)
    return size - size % 2**20


def gemm_n(itemsize: int, free_bytes: int) -> int:
    n = GEMM_N
    while n > 512 and 3 * n * n * itemsize > free_bytes * MEMORY_FRACTION:
        n //= 2
    return n


def plan_for(peer: Peer, l2_bytes: int, free_bytes: int):
    from kernels.base import Plan, Work

    if peer.kind == "bandwidth":
        size = copy_bytes(l2_bytes, free_bytes)
        return Plan(grid=0, block=0, work=Work(bytes_read=size, bytes_written=size),
                    params={"bytes": size, "l2_multiple": round(size / l2_bytes, 2) if l2_bytes else None})
    itemsize = {"fp32": 4, "fp16": 2, "bf16": 2}[peer.precision]
    n = gemm_n(itemsize, free_bytes)
    return Plan(grid=0, block=0, work=Work(bytes_read=2 * n * n * itemsize, bytes_written=n * n * itemsize,
                                           flops={peer.precision: 2 * n**3}),
                params={"m": n, "n": n, "k": n, "precision": peer.precision})


# ---------------------------------------------------------------------------------------------- setups
def _cupy_copy(memcpy: bool):
    def setup(plan, runtime):
        import cupy

        from kernels.base import Prepared

        stream = runtime.cupy_stream
        with stream:  # everything on the timed (non-blocking) stream: no race with the null stream
            src = cupy.random.uniform(-1, 1, plan.params["bytes"] // 4, dtype=cupy.float32)
            dst = cupy.empty_like(src)
        stream.synchronize()

        def launch():
            if memcpy:
                dst.data.copy_from_device_async(src.data, src.nbytes, stream)
            else:
                cupy.copyto(dst, src)

        def poison():
            with stream:
                dst.fill(cupy.nan)

        def check():
            with stream:
                same = bool(cupy.array_equal(dst, src))
            return None if same else "destination differs from source"

        return Prepared(launch=launch, poison=poison, check=check)

    return setup


def _cupy_gemm(plan, runtime):
    import cupy

    from kernels.base import Prepared

    n, precision, stream = plan.params["n"], plan.params["precision"], runtime.cupy_stream
    dtype = {"fp32": cupy.float32, "fp16": cupy.float16}[precision]
    with stream:
        a = cupy.random.uniform(-1, 1, (n, n), dtype=cupy.float32).astype(dtype)
        b = cupy.random.uniform(-1, 1, (n, n), dtype=cupy.float32).astype(dtype)
        c = cupy.empty((n, n), dtype=dtype)
    stream.synchronize()

    def poison():
        with stream:
            c.fill(cupy.nan)

    def check():
        stream.synchronize()
        return gemm_problem(cupy.asnumpy(a), cupy.asnumpy(b), cupy.asnumpy(c), precision)

    return Prepared(launch=lambda: cupy.matmul(a, b, out=c), poison=poison, check=check)


def _torch_gemm(plan, runtime):
    import numpy as np
    import torch

    from kernels.base import Prepared

    n, precision = plan.params["n"], plan.params["precision"]
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as our cublas.fp32 ceiling
    stream = torch.cuda.ExternalStream(runtime.cupy_stream.ptr)
    with torch.cuda.stream(stream):
        a = (torch.rand(n, n, device="cuda") * 2 - 1).to(dtype)
        b = (torch.rand(n, n, device="cuda") * 2 - 1).to(dtype)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
    stream.synchronize()

    def launch():
        with torch.cuda.stream(stream):
            torch.matmul(a, b, out=c)

    def poison():
        with torch.cuda.stream(stream):
            c.fill_(float("nan"))

    def check():
        stream.synchronize()
        host = [t.float().cpu().numpy().astype(np.float64) for t in (a, b, c)]
        return gemm_problem(*host, precision)

    return Prepared(launch=launch, poison=poison, check=check)


def gemm_problem(a, b, c, precision: str) -> str | None:
    """Sampled entries of C against a float64 host product, relative to sum_k |a_ik||b_kj| (the scale of
    the rounding-error bound; tolerances as the cublas.* ceilings, kernels.library.TOLERANCE)."""
    import numpy as np

    from kernels.library import TOLERANCE

    n = a.shape[0]
    idx = np.linspace(0, n - 1, CHECK_SAMPLES).astype(int)
    a64, b64 = a[idx].astype(np.float64), b[:, idx].astype(np.float64)
    ref = a64 @ b64
    scale = np.abs(a64) @ np.abs(b64)
    err = np.abs(c[np.ix_(idx, idx)].astype(np.float64) - ref) / scale
    worst = float(np.nanmax(err)) if np.isfinite(err).all() else float("inf")
    tol = TOLERANCE[precision]
    return None if worst <= tol else f"sampled entry off by {worst:.3g} of sum|a||b| (allowed {tol:g})"


PEERS = (
    Peer("cupy.copyto", "cupy", "cupy.copyto(dst, src)", "bandwidth", "dram", None, _cupy_copy(memcpy=False)),
    Peer("cupy.memcpy_d2d", "cupy", "cudaMemcpyAsync device to device", "bandwidth", "dram", None,
         _cupy_copy(memcpy=True)),
    Peer("cupy.matmul.fp16", "cupy", "cupy.matmul fp16 (cuBLAS)", "compute", "tensor.fp16", "fp16", _cupy_gemm),
    Peer("cupy.matmul.fp32", "cupy", "cupy.matmul fp32 (cuBLAS)", "compute", "fp32", "fp32", _cupy_gemm),
    Peer("torch.matmul.bf16", "torch", "torch.matmul bf16", "compute", "tensor.bf16", "bf16", _torch_gemm),
    Peer("torch.matmul.fp32", "torch", "torch.matmul fp32, TF32 off", "compute", "fp32", "fp32", _torch_gemm),
)


# ------------------------------------------------------------------------------------------ comparison
def ours_for(roofs: dict | None, peak_key: str) -> dict | None:
    """Our best valid ceiling with this peak key."""
    if roofs is None:
        return None
    candidates = [c for c in roofs["ceilings"] if c.get("peak_key") == peak_key and c["valid"] and c["value"]]
    return max(candidates, key=lambda c: c["value"], default=None)


def judge(record: dict, roofs: dict | None) -> dict:
    ours = ours_for(roofs, record["peak_key"])
    record = dict(record)
    record["ours"] = None if ours is None else {"name": ours["name"], "backend": ours["backend"],
                                                 "kernel": ours["kernel"], "value": ours["value"]}
    ratio = record["value"] / ours["value"] if ours and record["value"] else None
    record["ratio_to_ours"] = ratio
    record["beats_ours"] = bool(ratio is not None and ratio > 1 + PEER_MARGIN)
    return record


def table(records: Sequence[dict]) -> str:
    from ceilings.report import format_rate
    from common.text import markdown_table

    rows = []
    for r in records:
        ours = r.get("ours")
        flag = "PEER BEATS OUR CEILING (bug in ours?)" if r.get("beats_ours") else (
            "ok" if r["valid"] else "INVALID: " + "; ".join(r["notes"][:1]))
        rows.append([r["name"], r["call"], format_rate(r["value"], r["unit"]),
                     "-" if not ours else f"{ours['name']} ({ours['backend']})",
                     "-" if not ours else format_rate(ours["value"], r["unit"]),
                     "-" if r.get("ratio_to_ours") is None else f"{r['ratio_to_ours']:.2f}", flag])
    return markdown_table(["peer", "call", "measured", "our best ceiling", "ours", "peer/ours", "status"], rows)


# ------------------------------------------------------------------------------------------------- run
def available(peers: Sequence[Peer]) -> tuple[list[Peer], list[str]]:
    """Peers whose library imports; notes for the others."""
    import importlib.util

    keep, notes = [], []
    for p in peers:
        if importlib.util.find_spec(p.library) is None:
            notes.append(f"{p.name}: skipped, {p.library} is not installed")
        else:
            keep.append(p)
    return keep, notes


def measure_peers(peers: Sequence[Peer], quick: bool) -> tuple[list[dict], dict]:
    import cupy

    from ceilings.device import limits_of, probe_device, require_gpu
    from ceilings.harness import DEFAULT_BUDGET, QUICK_BUDGET, EventTimer, measure_plan
    from ceilings.nvml import Nvml
    from kernels.base import Benchmark, Runtime

    require_gpu()
    device = probe_device(0)
    stream = cupy.cuda.Stream(non_blocking=True)
    runtime = Runtime(simulate=False, cupy_stream=stream)
    budget = QUICK_BUDGET if quick else DEFAULT_BUDGET
    nvml = Nvml(0)
    records = []
    for peer in peers:
        limits = limits_of(device, cupy.cuda.runtime.memGetInfo()[0])
        plan = plan_for(peer, limits.l2_bytes, limits.free_bytes)
        bench = Benchmark(name=peer.name, backend="library", kind=peer.kind, kernel=peer.call,
                          description=peer.call, plans=lambda _l, _q, plan=plan: [plan],
                          prepare=lambda p, rt, peer=peer: peer.setup(p, rt), source=lambda _p: None,
                          precision=peer.precision, peak_key=peer.peak_key,
                          pipe="memory" if peer.kind == "bandwidth" else "tensor")
        log(f"{peer.name}: {peer.call} {dict(plan.params)}")
        m = measure_plan(bench, plan, runtime, EventTimer(stream), budget, nvml)
        value = bench.rate(plan.work, m.stats.median_s) if m.stats and m.stats.median_s > 0 else None
        records.append({"name": peer.name, "library": peer.library, "call": peer.call, "kind": peer.kind,
                        "peak_key": peer.peak_key, "precision": peer.precision, "value": value,
                        "unit": bench.unit, "work": plan.work.as_dict(), "params": dict(plan.params),
                        "stats": m.stats.as_dict() if m.stats else {}, "clocks": m.clocks,
                        "valid": m.problem is None and value is not None,
                        "notes": [m.problem] if m.problem else []})
        cupy.get_default_memory_pool().free_all_blocks()
    keep = ("name", "compute_capability", "sm_count", "l2_bytes", "driver_version", "runtime_version")
    return records, {k: device.get(k) for k in keep}


def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "torch", "numpy"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            continue
    out["CUPY_TF32"] = os.environ.get("CUPY_TF32")
    return out


def _parser() -> argparse.ArgumentParser:
    p = script_parser(PROG, __doc__, "folder for peers.json")
    p.add_argument("--roofs", metavar="ROOFS.json", help="our ceilings to compare with (ceilings.measure output)")
    p.add_argument("--quick", action="store_true", help="the harness's short time budget")
    p.add_argument("--dry-run", action="store_true", help="no GPU: print what would be timed, write nothing")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    outdir = existing_folder(args.outdir)
    roofs = None
    if args.roofs:
        from ceilings.roofs import load_roofs

        roofs = load_roofs(args.roofs)
    peers, notes = available(PEERS)
    if args.dry_run:
        return dry_run(peers, notes, roofs)
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise MissingDependency("peers need CuPy: pip install 'ceilings[cuda13]'") from None
    records, device = measure_peers(peers, args.quick)
    records = [judge(r, roofs) for r in records]
    doc = {"device": device, "roofs": args.roofs, "margin": PEER_MARGIN, "versions": versions(),
           "skipped": notes, "peers": records}
    write_text(outdir / "peers.json", json.dumps(doc, indent=1) + "\n")
    print(table(records))
    for n in notes:
        log(n)
    log(f"wrote {outdir / 'peers.json'}")
    bad = [r["name"] for r in records if r["beats_ours"] or not r["valid"]]
    if bad:
        log(f"attention: {', '.join(bad)} (a peer above our ceiling, or a peer that failed)")
    return 1 if bad else 0


def dry_run(peers: Sequence[Peer], notes: list[str], roofs: dict | None) -> int:
    from kernels.base import REFERENCE_LIMITS

    ref = REFERENCE_LIMITS["sm_90"]
    print(f"would time (sizes for the reference sm_90 device: L2 {ref.l2_bytes} B, {ref.free_bytes} B free):")
    for p in peers:
        plan = plan_for(p, ref.l2_bytes, ref.free_bytes)
        ours = ours_for(roofs, p.peak_key)
        against = "-" if ours is None else f"{ours['name']} ({ours['backend']}) {ours['value']:.4g} {ours['unit']}"
        print(f"  {p.name:<20} {p.call:<36} {plan.params} work {plan.work.as_dict()}  vs {against}")
    for n in notes:
        print(f"  {n}")
    return 0


def log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

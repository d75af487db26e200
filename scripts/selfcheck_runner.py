"""The program `scripts/ncu_selfcheck.py` runs under Nsight Compute: each benchmark's measured launch, once.

    python scripts/selfcheck_runner.py --out WORK.json [--only PATTERN] [--sweep-plans N] [--dry-run]

For every non-sweep benchmark (and `--sweep-plans` plans of each sweep: the first and the last), planned
with quick=True on the real device (ceilings.device.probe_device + limits_of): prepare, poison, one
warm-up launch (JIT compiles, first-touch), then inside cudaProfilerStart/Stop (ncu runs with
`--profile-from-start off`) a marker kernel `ceilings_selfcheck_marker<i>` followed by the launch under
test. Everything ncu records between marker i and marker i+1 belongs to entry i, whatever the launch's
kernel is called (cuBLAS picks its own kernels). WORK.json lists, per entry, the declared Work of exactly
the plan launched and the substring of the kernel name ncu will print.

--dry-run plans for the reference sm_90 device (kernels.base.REFERENCE_LIMITS) and launches nothing:
it needs no GPU and shows what a real run would launch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.atomic import write_text
from common.errors import CeilingsError, cli_entry, describe

PROG = "selfcheck_runner"
MARKER = "ceilings_selfcheck_marker"
MARKER_SOURCE = f"template <int I> __global__ void {MARKER}() {{}}\n"
DEFAULT_SWEEP_PLANS = 2  # the first and the last plan of each sweep: ncu replays every launch


def kernel_match(bench, plan) -> str | None:
    """The part of the kernel name ncu prints that identifies this benchmark's kernel; None for libraries.

    CUDA C: the function name before its template arguments (ncu spells template arguments its own way);
    Numba: the Python function's name, which survives in Numba's mangled name.
    """
    source = bench.source(plan)
    if source is None:
        return None
    name = getattr(source, "name_expression", None)
    if name is not None:
        return name.split("<", 1)[0].strip()
    return source.pyfunc.__name__


def choose_plans(bench, plans, sweep_plans: int) -> list[tuple[int, object]]:
    """(index in the benchmark's plan list, plan): every plan of a ceiling, the ends of a sweep."""
    indexed = list(enumerate(plans))
    if not bench.is_sweep or len(indexed) <= sweep_plans:
        return indexed
    if sweep_plans == 1:
        return indexed[:1]
    step = (len(indexed) - 1) / (sweep_plans - 1)
    picks = sorted({round(i * step) for i in range(sweep_plans)})
    return [indexed[i] for i in picks]


def plan_entries(benches, limits, sweep_plans: int) -> list[dict]:
    """One entry per launch to profile, in launch order (pure: no GPU)."""
    entries = []
    for bench in benches:
        plans = list(bench.plans(limits, True))
        if not plans:
            entries.append(_entry(len(entries), bench, None, None, f"skipped: not supported on {limits.arch}"))
            continue
        for plan_index, plan in choose_plans(bench, plans, sweep_plans):
            entries.append(_entry(len(entries), bench, plan, plan_index, "planned"))
    return entries


def _entry(index: int, bench, plan, plan_index, status: str) -> dict:
    out = {"index": index, "benchmark": bench.name, "backend": bench.backend, "kind": bench.kind,
           "level": bench.level, "precision": bench.precision, "pipe": bench.pipe, "sweep": bench.is_sweep,
           "plan_index": plan_index, "kernel_match": None, "grid": None, "block": None, "params": {},
           "work": None, "status": status, "check": None}
    if plan is not None:
        out.update(kernel_match=kernel_match(bench, plan), grid=plan.grid, block=plan.block,
                   params=_jsonable(dict(plan.params)), work=plan.work.as_dict())
    return out


def _jsonable(params: dict) -> dict:
    return {k: v if isinstance(v, (int, float, str, bool, type(None))) else str(v) for k, v in params.items()}


def run_entries(entries: list[dict], benches_by_key: dict, plans_by_key: dict, runtime, stream) -> None:
    """Launch every planned entry once inside the profiler range, after a marker; record what happened."""
    import cupy
    from cupy.cuda import profiler

    markers = cupy.RawModule(code=MARKER_SOURCE, options=("-std=c++17",),
                             name_expressions=[f"{MARKER}<{e['index']}>" for e in entries])
    for e in entries:
        if e["status"] != "planned":
            continue
        key = (e["benchmark"], e["backend"])
        bench, plan = benches_by_key[key], plans_by_key[key][e["plan_index"]]
        log(f"[{e['index'] + 1}/{len(entries)}] {e['benchmark']} ({e['backend']}) plan {e['plan_index']}")
        try:
            prepared = bench.prepare(plan, runtime)
        except Exception as exc:  # noqa: BLE001 - recorded: the comparison reports it as not run
            e["status"] = f"failed to prepare: {describe(exc)}"
            continue
        try:
            prepared.poison()
            with stream:
                prepared.launch()  # warm-up: JIT, module load, first touch; outside the profiled range
            stream.synchronize()
            marker = markers.get_function(f"{MARKER}<{e['index']}>")
            profiler.start()
            try:
                with stream:
                    marker((1,), (1,), ())
                    prepared.launch()
                stream.synchronize()
            finally:
                profiler.stop()
            e["check"] = prepared.check()
            e["status"] = "launched"
        except Exception as exc:  # noqa: BLE001 - a launch error: recorded, the other entries still run
            e["status"] = f"launch failed: {describe(exc)}"
        finally:
            prepared.release()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python scripts/{PROG}.py", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, metavar="WORK.json", help="where to write the entries")
    p.add_argument("--only", metavar="PATTERN", help="benchmark globs, as ceilings.measure --only")
    p.add_argument("--sweep-plans", type=int, default=DEFAULT_SWEEP_PLANS, metavar="N",
                   help=f"plans per sweep (default {DEFAULT_SWEEP_PLANS}: first and last)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="CUDA device index (default 0)")
    p.add_argument("--dry-run", action="store_true", help="plan for the reference sm_90 device; launch nothing")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.sweep_plans < 1:
        raise CeilingsError(f"--sweep-plans {args.sweep_plans}: must be 1 or more")
    from kernels.registry import select

    benches = select(args.only)
    if not benches:
        raise CeilingsError(f"--only {args.only!r} matches no benchmark; see `python -m ceilings.measure --list`")
    if args.dry_run:
        from kernels.base import REFERENCE_LIMITS

        limits, device = REFERENCE_LIMITS["sm_90"], {"name": "reference sm_90 (dry run)",
                                                     "l2_bytes": REFERENCE_LIMITS["sm_90"].l2_bytes}
    else:
        limits, device = _real_limits(args.device)
    entries = plan_entries(benches, limits, args.sweep_plans)
    if not args.dry_run:
        import cupy

        from kernels.base import Runtime

        stream = cupy.cuda.Stream(non_blocking=True)
        by_key = {(b.name, b.backend): b for b in benches}
        plans = {key: list(b.plans(limits, True)) for key, b in by_key.items()}
        runtime = Runtime(simulate=False, cupy_stream=stream)
        # Every quick plan of a file in one NVRTC program, as `ceilings.measure --quick` compiles them: CuPy's
        # disk cache (keyed by the program's name expressions) then already holds it, and a run without it
        # compiles each file once, not each variant (inside ncu, which slows every compile).
        runtime.precompile(b.source(p) for key, b in by_key.items() if b.backend == "cuda-c" for p in plans[key])
        run_entries(entries, by_key, plans, runtime, stream)
    doc = {"dry_run": args.dry_run, "marker": MARKER, "device": device, "arch": limits.arch,
           "l2_bytes": limits.l2_bytes, "entries": entries}
    write_text(args.out, json.dumps(doc, indent=1) + "\n")
    log(f"wrote {args.out} ({len(entries)} entries)")
    return 0


def _real_limits(index: int):
    from ceilings.device import limits_of, probe_device, require_gpu

    require_gpu()
    import cupy

    cupy.cuda.Device(index).use()
    device = probe_device(index)
    keep = ("name", "compute_capability", "sm_count", "l2_bytes", "driver_version", "max_sm_clock_hz")
    return limits_of(device, cupy.cuda.runtime.memGetInfo()[0]), {k: device.get(k) for k in keep}


def log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

"""`python -m ceilings.measure`: run the microbenchmarks on a GPU and write a versioned roofs file."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from . import __version__
from .atomic import check_folder, check_target
from .errors import EXIT_INTERRUPTED, CeilingsError, MissingDependency, cli_entry
from .report import ceilings_table, markdown_table, roofs_summary, sweeps_summary

PROG = "python -m ceilings.measure"
# Planning budget for the simulator: it allocates host memory, and kernels go tiny anyway.
SIMULATED_FREE_BYTES = 64 * 2**20

DESCRIPTION = """\
Measure what this GPU really achieves: DRAM/L2/L1 bandwidth (streaming kernels and a working-set
sweep), peak FLOP/s per precision (FMA chains), tensor-core mma.sync kernels and cuBLAS, with each
kernel's output checked against a host reference. Writes a roofs file (docs/roofs-schema.md) for
`python -m analysis.roofline`, and prints measured beside clock-derived and datasheet peaks.
"""
EPILOG = """\
examples:
  python -m ceilings.measure                      # all benchmarks on device 0 (about 1-2 minutes)
  python -m ceilings.measure --quick              # short budgets, smaller sweeps (~20 s)
  python -m ceilings.measure --only 'dram.*,fp32*' --out h200.json
  python -m ceilings.measure --list               # what would run; needs no GPU
  python -m ceilings.measure --simulate --quick   # no GPU: Numba simulator, numbers mean nothing

exit codes: 0 done, 1 some ceiling invalid, 2 usage error / no GPU / missing package, 130 interrupted
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list the benchmarks (backend, kind, level/precision) and exit")
    p.add_argument("--device", default="0", metavar="N|all", help="CUDA device index, or 'all' (default 0)")
    p.add_argument("--only", metavar="PATTERN",
                   help="comma-separated globs on ceiling name, group, backend or kernel, e.g. 'dram.*,fp32.fma'")
    p.add_argument("--quick", action="store_true", help="short time budgets and smaller sweeps")
    p.add_argument("--fma-chains", type=int, metavar="K",
                   help="independent FMA chains per thread in the *.fma / int32.mad kernels (2-8; default "
                        "per architecture, 8 on sm_80/sm_90): try 2, 4 and 8 to find the peak on a new GPU")
    p.add_argument("--out", metavar="PATH",
                   help="roofs file to write ('-' for stdout: one device, no figures); default "
                        "roofs-<gpu>-<yyyymmdd-hhmm>.json here; the sweep figures go beside it as "
                        "<stem>-bandwidth-sweep.png and <stem>-compute-sweep.png")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file and its figures")
    p.add_argument("--no-plots", action="store_true", help="do not draw the sweep figures")
    p.add_argument("--simulate", action="store_true",
                   help="run the Numba kernels on Numba's CUDA simulator at tiny sizes (no GPU needed; "
                        "checks correctness, the numbers mean nothing)")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        return list_benchmarks(args.only, args.simulate)
    if args.out == "-" and args.device == "all":
        raise CeilingsError("--out - with --device all: stdout holds one JSON document; give --out PATH "
                            "(one file per device) or one --device")
    if args.simulate and args.device != "0":
        raise CeilingsError(f"--device {args.device} with --simulate: the simulator is one fake device; "
                            "drop --device")
    from kernels.registry import select

    benches = select(args.only, simulate=args.simulate)
    if args.fma_chains is not None:
        from kernels.fma import with_chains

        if args.simulate:
            raise CeilingsError("--fma-chains with --simulate: the simulator runs tiny fixed plans (K = 4); "
                                "drop one of them")
        try:
            benches = [with_chains(b, args.fma_chains) for b in benches]
        except ValueError as exc:
            raise CeilingsError(f"--fma-chains: {exc}") from None
    if not benches:
        what = f"--only {args.only!r} matches" if args.only else "there is"
        where = " runnable on the simulator" if args.simulate else ""
        raise CeilingsError(f"{what} no benchmark{where}; see `python -m ceilings.measure --list`")
    if args.simulate:
        enable_simulator()
        indices = [0]
    else:
        from .device import require_gpu

        count = require_gpu()
        indices = device_indices(args.device, count)
    status = 0
    for index in indices:
        out = output_path(args, index, len(indices) > 1)
        # before measuring: a run must not end in a write that fails and loses what it measured
        if out is not None:
            for target in outputs(out, args):
                check_target(target, force=args.force)
        elif args.out != "-":
            check_folder(".")
        doc, interrupted = run_device(index, benches, args, argv)
        emit(doc, out, args)
        if interrupted:
            print(f"{PROG}: interrupted; what was measured is saved with \"complete\": false", file=sys.stderr)
            return EXIT_INTERRUPTED
        if any(not c["valid"] for c in doc["ceilings"]):
            status = 1
    return status


def list_benchmarks(pattern: str | None, simulate: bool) -> int:
    """The benchmarks a run would measure (with --simulate: those the simulator can run)."""
    from kernels.registry import select

    rows = [[b.name, b.backend, b.group, b.kind, b.level or b.precision or "-", b.kernel,
             "yes" if b.simulable else "no", b.description] for b in select(pattern, simulate=simulate)]
    print(markdown_table(["name", "backend", "group", "kind", "level/precision", "kernel", "simulator",
                          "what it does"], rows))
    return 0


def enable_simulator() -> None:
    """Numba reads NUMBA_ENABLE_CUDASIM when numba.cuda is first imported: set it before that."""
    if "numba.cuda" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        raise CeilingsError("numba.cuda was imported before --simulate could enable the simulator; "
                            "set NUMBA_ENABLE_CUDASIM=1 in the environment")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    try:
        import numba.cuda  # noqa: F401
    except ImportError:
        raise MissingDependency("--simulate needs numba-cuda: pip install 'ceilings[cuda13]' "
                                "(or pip install numba-cuda)") from None


def device_indices(spec: str, count: int) -> list[int]:
    if spec == "all":
        return list(range(count))
    if not spec.isdigit() or int(spec) >= count:
        raise CeilingsError(f"--device {spec!r}: this machine has devices 0..{count - 1}; give an index or 'all'")
    return [int(spec)]


def output_path(args, index: int, several: bool) -> Path | None:
    if args.out == "-":
        return None
    if args.out:
        path = Path(args.out)
        return path.with_name(f"{path.stem}-d{index}{path.suffix}") if several else path
    return None  # named after the device once it is probed; see default_name


def default_name(device: dict, stamp: str, simulated: bool) -> Path:
    gpu = "simulator" if simulated else re.sub(r"[^a-z0-9]+", "-", (device.get("name") or "gpu").lower()).strip("-")
    return Path(f"roofs-{gpu}-{stamp}.json")


def outputs(roofs_path: Path, args) -> list[Path]:
    """The files a run writes: the roofs file and, unless --no-plots, the sweep figures named after it."""
    from .sweeps import sweep_figure_paths

    return [roofs_path, *([] if args.no_plots else sweep_figure_paths(roofs_path).values())]


def run_device(index: int, benches, args, argv) -> tuple[dict, bool]:
    """Measure every benchmark on one device; Ctrl-C stops early and keeps what was measured."""
    from kernels.base import Runtime

    from .device import limits_of, probe_device, simulated_device
    from .harness import (
        DEFAULT_BUDGET,
        QUICK_BUDGET,
        SIMULATED_BUDGET,
        EventTimer,
        WallTimer,
        budget_for,
        ceiling_record,
        measure_plan,
    )
    from .nvml import Nvml

    started = _now()
    if args.simulate:
        device, free = simulated_device(), SIMULATED_FREE_BYTES
        runtime, timer, budget, nvml = Runtime(simulate=True), WallTimer(), SIMULATED_BUDGET, None
    else:
        import cupy

        cupy.cuda.Device(index).use()
        device = probe_device(index)
        free = cupy.cuda.runtime.memGetInfo()[0]
        stream = cupy.cuda.Stream(non_blocking=True)
        runtime, timer, nvml = Runtime(simulate=False, cupy_stream=stream), EventTimer(stream), Nvml(index)
        budget = QUICK_BUDGET if args.quick else DEFAULT_BUDGET
    limits = limits_of(device, free, simulate=args.simulate)
    doc = {"schema_version": 1, "simulated": bool(args.simulate), "complete": False,
           "meta": meta(argv, started), "device": device, "ceilings": [], "sweeps": []}

    work = [(b, list(b.plans(limits, args.quick))) for b in benches]
    skipped = [b for b, plans in work if not plans]
    for b in skipped:
        log(f"skipped {b.name} ({b.backend}) on {limits.arch}: {b.notes[0] if b.notes else 'not supported'}")
    work = [(b, plans) for b, plans in work if plans]
    if not args.simulate:
        runtime.precompile(b.source(p) for b, plans in work if b.backend == "cuda-c" for p in plans)
    progress = _progress(sum(len(p) for _, p in work), f"GPU {index}" if not args.simulate else "simulator")
    interrupted = False
    try:
        for bench, plans in work:
            progress.set_description(f"{bench.name} ({bench.backend})")
            measured = []
            try:
                for plan in plans:
                    measured.append(measure_plan(bench, plan, runtime, timer, budget_for(bench, budget), nvml))
                    progress.update(1)
            except KeyboardInterrupt:  # keep the points of a sweep cut short
                interrupted = True
            if bench.is_sweep and measured:
                doc["sweeps"].append(sweep_record(bench, measured, device, planned=len(plans)))
            elif measured:
                doc["ceilings"].append(annotate(ceiling_record(bench, measured[0], simulated=args.simulate),
                                                device, args.simulate))
            if interrupted:
                break
    except KeyboardInterrupt:  # between two benchmarks, or while a record was being made
        interrupted = True
    finally:
        progress.close()
    doc["complete"] = not interrupted
    doc["meta"]["finished"] = _now().isoformat()
    doc["meta"]["output_name"] = str(default_name(device, started.strftime("%Y%m%d-%H%M"), args.simulate))
    return doc, interrupted


def annotate(ceiling: dict, device: dict, simulated: bool) -> dict:
    """Peaks, ratios and the likely reason for a gap; a DRAM figure above the theoretical peak is invalid."""
    if simulated:
        return ceiling
    from .gaps import annotate as add_peaks

    return add_peaks(ceiling, device)


def sweep_record(bench, measured, device: dict, planned: int) -> dict:
    """The sweep's points; `planned` > len(measured) when Ctrl-C cut it short (said first in its notes)."""
    from .harness import sweep_points
    from .sweeps import find_knee, find_plateaus

    points = sweep_points(bench, measured)
    x = [p[0] for p in points]
    y = [p[1] for p in points]
    is_bandwidth = bench.kind == "bandwidth"
    plateaus = [p.as_dict() for p in find_plateaus(x, y, l2_bytes=device.get("l2_bytes"))] \
        if is_bandwidth and points else []
    knee = find_knee(x, y) if not is_bandwidth and points else None
    failed = [m.problem for m in measured if m.problem]
    partial = [f"partial: interrupted after {len(measured)} of {planned} points"] if len(measured) < planned else []
    return {
        "name": bench.name,
        "x": {"name": bench.sweep_x.name, "unit": bench.sweep_x.unit},
        "y": {"name": "bandwidth" if is_bandwidth else "performance", "unit": bench.unit},
        "points": points,
        "plateaus": plateaus,
        "knee": None if knee is None else {"x": knee[0], "y": knee[1]},
        "backend": bench.backend,
        "kernel": bench.kernel,
        "notes": partial + failed[:3],
    }


def emit(doc: dict, out: Path | None, args) -> None:
    """Write the roofs file (atomically), the sweep figures beside it (not with --out -), and the table."""
    from .roofs import dumps, save_roofs

    table = ceilings_table(doc)
    banner = ("SIMULATED: Numba's CUDA simulator ran these kernels; every number below is meaningless "
              "(correctness only).\n") if doc["simulated"] else ""
    parts = [banner + f"{doc['device']['name']}", table, roofs_summary(doc), sweeps_summary(doc)]
    summary = "\n".join(filter(None, parts))
    if args.out == "-":
        sys.stdout.write(dumps(doc))
        print(summary, file=sys.stderr)
        return
    path = out or _free_name(Path(doc["meta"]["output_name"]), args)
    save_roofs(doc, path, force=args.force)
    print(summary)
    log(f"wrote {path}")
    if doc["sweeps"] and not args.no_plots:
        from .sweeps import save_sweep_figures

        for figure in save_sweep_figures(doc, path, force=args.force):
            log(f"wrote {figure}")


def _free_name(path: Path, args) -> Path:
    """The default name, made unique so that a second run in the same minute (or the next device of
    --device all) keeps the first's file and figures."""
    candidate, n = path, 2
    while not args.force and any(p.exists() for p in outputs(candidate, args)):
        candidate, n = path.with_name(f"{path.stem}-{n}{path.suffix}"), n + 1
    return candidate


def meta(argv, started: dt.datetime) -> dict:
    return {"tool": "ceilings", "version": __version__, "git_sha": _git_sha(),
            "argv": list(sys.argv[1:] if argv is None else argv), "started": started.isoformat(),
            "finished": None, "host": platform.node(), "python": platform.python_version()}


def _git_sha() -> str | None:
    """The commit of this checkout of ceilings; None when it is not one (installed into a venv that lives
    inside someone else's git repository, git would name their commit)."""
    source_root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=source_root,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != source_root:
        return None
    return lines[1]


class _Lines:
    """Progress as plain lines on stderr when tqdm is not installed."""

    def __init__(self, total: int, label: str):
        self.total, self.done, self.label, self.desc = total, 0, label, ""

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def update(self, n: int) -> None:
        self.done += n
        log(f"[{self.label} {self.done}/{self.total}] {self.desc}")

    def close(self) -> None:
        pass


def _progress(total: int, label: str):
    try:
        from tqdm import tqdm
    except ImportError:
        return _Lines(total, label)
    return tqdm(total=total, desc=label, unit="run", file=sys.stderr, dynamic_ncols=True, leave=False)


def log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


if __name__ == "__main__":
    sys.exit(main())

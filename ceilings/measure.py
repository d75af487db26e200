"""`python -m ceilings.measure`: run the microbenchmarks on a GPU and write a versioned roofs file."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from common.atomic import Outputs
from common.errors import EXIT_INTERRUPTED, EXIT_USER_ERROR, CeilingsError, MissingDependency, cli_entry
from common.text import markdown_table

from . import __version__
from .ranks import Task, check_unique, detect, expand, file_safe, node_gpu_index
from .report import ceilings_table, roofs_summary, sweeps_summary
from .roofs import CONCURRENT, SCHEMA_MINOR, SCHEMA_VERSION, SEQUENTIAL, SINGLE

# the run went through and wrote its roofs file, but some ceiling is invalid: a result to look at, not a
# failure (1 stays what an uncaught exception gives: a crash)
EXIT_SOME_INVALID = 3
# a failed GPU: what an uncaught exception gives, and what a --concurrent worker killed or hung counts as
EXIT_FAILED = 1
# --concurrent: a worker still running this long after its start is taken for hung (a default run of every
# ceiling takes minutes); SIGTERM first, so that it saves what it measured, then SIGKILL after the grace
WORKER_TIMEOUT_S = 3600
WORKER_GRACE_S = 60

PROG = "python -m ceilings.measure"
# Planning budget for the simulator: it allocates host memory, and kernels go tiny anyway.
SIMULATED_FREE_BYTES = 64 * 2**20
STAMP = "%Y%m%d-%H%M"  # the run's start, UTC, in default file names and %d

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
  srun --ntasks-per-node=8 --gpus-per-task=1 python -m ceilings.measure --quick --out 'roofs-%h-%g.json'
  python -m ceilings.measure --device all --concurrent --out 'roofs-%h-%g.json'   # a node's GPUs at once

exit codes: 0 done, every ceiling valid; 3 done, some ceiling invalid (the roofs file is written and says why);
2 usage error / no GPU / missing package; 130 interrupted; 1 only for a crash (a bug: please report it)
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="list the benchmarks (backend, kind, level/precision) and exit")
    p.add_argument("--device", metavar="N|all",
                   help="CUDA device index, or 'all' (default: under srun, mpirun or torchrun the task's own GPU, "
                        "by its local rank or the one GPU it sees; else 0)")
    p.add_argument("--concurrent", action="store_true",
                   help="with --device all: measure the GPUs at once, one process each, to see shared power and "
                        "PCIe (default: one after another, each alone); the file says which")
    p.add_argument("--worker-timeout", type=float, default=WORKER_TIMEOUT_S, metavar="S",
                   help=f"with --concurrent: a GPU's process still running after S seconds is taken for hung, "
                        f"stopped (SIGTERM: it saves what it measured; SIGKILL {WORKER_GRACE_S} s later) and the "
                        f"run fails naming that GPU (default {WORKER_TIMEOUT_S})")
    p.add_argument("--only", metavar="PATTERN",
                   help="comma-separated globs on ceiling name, group, backend or kernel, e.g. 'dram.*,fp32.fma'")
    p.add_argument("--quick", action="store_true", help="short time budgets and smaller sweeps")
    p.add_argument("--fma-chains", type=int, metavar="K",
                   help="independent FMA chains per thread in the *.fma / int32.mad kernels (2-8; default "
                        "per architecture, 8 on sm_80/sm_90): try 2, 4 and 8 to find the peak on a new GPU")
    p.add_argument("--out", metavar="PATH",
                   help="roofs file to write ('-' for stdout: one device, no figures), or a template of %%h "
                        "host, %%r rank, %%l local rank, %%g GPU index, %%u GPU UUID, %%d date (docs/fleet.md), "
                        "e.g. roofs-%%h-%%g.json; default roofs-<gpu>-<yyyymmdd-hhmm>.json here "
                        "(with host and rank when one of several tasks); the sweep figures go beside it as "
                        "<stem>-bandwidth-sweep.png and <stem>-compute-sweep.png")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file and its figures")
    p.add_argument("--no-plots", action="store_true", help="do not draw the sweep figures")
    p.add_argument("--simulate", action="store_true",
                   help="run the Numba kernels on Numba's CUDA simulator at tiny sizes (no GPU needed; "
                        "checks correctness, the numbers mean nothing)")
    return p


class Terminated(KeyboardInterrupt):
    """SIGTERM (`timeout`, a batch system at its time limit, `kill`): stop like Ctrl-C and keep what was measured."""


@contextmanager
def sigterm_as_interrupt():
    """While measuring, SIGTERM raises Terminated (a KeyboardInterrupt) where Python's default would kill the
    process before its last save."""
    def terminate(signum, frame):
        # one stop: timeout(1) sends SIGTERM to its child and again to its group, and a second Terminated would
        # cut the save short; SIGKILL remains the hard stop
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stopped_by(exc: KeyboardInterrupt) -> str:
    """The roofs file's `meta.stopped`: which signal ended the run early."""
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    with sigterm_as_interrupt():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        return list_benchmarks(args.only, args.simulate)
    task = detect(os.environ)
    check_request(args, task)
    benches = select_benchmarks(args)
    if args.simulate:
        enable_simulator()
        indices = [0]
    else:
        from .device import require_gpu

        indices = device_indices(args.device, require_gpu(), task)
    if args.concurrent:
        return measure_concurrently(indices, args, argv, task)
    mode, at_once = how_measured(task, len(indices), concurrent=False)
    codes = []
    for index in indices:
        codes.append(measure_device(index, benches, args, argv, task, mode, at_once,
                                    several_gpus=len(indices) > 1))
        if codes[-1] == EXIT_INTERRUPTED:
            break
    return worst(codes)


# exit codes from the worst outcome to the best: a GPU that failed (no file) outweighs one whose ceilings
# are partly invalid (a file that says why), whatever the numbers
SEVERITY = (EXIT_INTERRUPTED, EXIT_FAILED, EXIT_USER_ERROR, EXIT_SOME_INVALID, 0)


def worst(codes) -> int:
    """The run's exit code from its GPUs' codes: the most severe; a process killed by a signal (negative,
    no file) counts as failed, not as bad input."""
    known = [EXIT_FAILED if c < 0 else c for c in codes]
    return next((c for c in SEVERITY if c in known), max(known, default=0))


def check_request(args, task: Task) -> None:
    """Before any GPU work: options that cannot go together, and output names that several tasks or GPUs
    would share."""
    several = f"one of {task.world_size} tasks ({task.launcher})"
    if args.out == "-" and args.device == "all":
        raise CeilingsError("--out - with --device all: stdout holds one JSON document; give --out PATH "
                            "(one file per device) or one --device")
    if args.out == "-" and task.several:
        raise CeilingsError(f"--out - in {several}: the tasks' standard outputs would mix; give --out "
                            "roofs-%h-%g.json")
    if args.simulate and args.device not in (None, "0"):
        raise CeilingsError(f"--device {args.device} with --simulate: the simulator is one fake device; "
                            "drop --device")
    if not args.worker_timeout > 0:  # also NaN
        raise CeilingsError(f"--worker-timeout {args.worker_timeout}: give the seconds a GPU's process may run, "
                            f"above 0 (default {WORKER_TIMEOUT_S})")
    if args.concurrent and args.device != "all":
        raise CeilingsError("--concurrent measures the GPUs of --device all at once; add --device all")
    if args.device == "all" and (task.local_size or 1) > 1:
        raise CeilingsError(f"--device all in {several}, {task.local_size} of them on this node: each would "
                            "measure every GPU; drop --device (each task measures its own GPU) or start one "
                            "task per node")
    if args.out in (None, "-"):
        return
    if "%" in args.out:
        check_unique(args.out, several_tasks=task.several, several_gpus=args.device == "all")
    elif task.several:
        raise CeilingsError(f"--out {args.out} in {several}: every task would write it; make it a template with "
                            "%r (rank) or %h and %g (host, GPU index), e.g. roofs-%h-%g.json")


def select_benchmarks(args) -> list:
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
    return benches


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


def device_indices(spec: str | None, count: int, task: Task) -> list[int]:
    """The CUDA devices to measure: --device, else the task's own GPU (its local rank, or the only one it sees)."""
    if spec == "all":
        return list(range(count))
    if spec is None:
        return [own_device(count, task)]
    if not spec.isdigit() or int(spec) >= count:
        raise CeilingsError(f"--device {spec!r}: this machine has devices 0..{count - 1}; give an index or 'all'")
    return [int(spec)]


def own_device(count: int, task: Task) -> int:
    if task.launcher is None:
        return 0
    shared = (task.local_size or 1) > 1
    if count == 1:
        if shared and task.cuda_visible_devices is None:  # no binding: every task of the node got this GPU
            raise CeilingsError(f"{task.local_size} tasks on this node and one GPU, which every task sees: start "
                                "one task per GPU, or bind a GPU to each (srun --gpus-per-task=1)")
        return 0
    if task.local_rank is None:
        raise CeilingsError(f"{task.launcher} gave this task no local rank and it sees {count} GPUs: give --device")
    if task.local_rank >= count:
        raise CeilingsError(f"task {task.rank} has local rank {task.local_rank} but sees {count} GPUs "
                            f"(0..{count - 1}): start at most one task per GPU on each node, or give --device")
    return task.local_rank


def how_measured(task: Task, gpus: int, *, concurrent: bool) -> tuple[str | None, int | None]:
    """(launch.mode, launch.gpus_at_once) of a run measuring `gpus` GPUs in this process; (None, None) when a
    launcher did not say how many of its tasks share this node."""
    if concurrent:
        return CONCURRENT, gpus
    if gpus > 1:
        return SEQUENTIAL, 1
    if task.launcher is None:
        return SINGLE, 1
    if task.local_size is None:
        return None, None
    return (CONCURRENT, task.local_size) if task.local_size > 1 else (SINGLE, 1)


def measure_concurrently(indices: list[int], args, argv, task: Task) -> int:
    """Every GPU at once, one process each, each writing its own file; the worst exit code. Processes are
    spawned: a forked child cannot use CUDA once its parent has."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_measure_worker, args=(index, args, argv, task, len(indices)),
                               name=f"ceilings GPU {index}") for index in indices]
    for worker in workers:
        worker.start()
    deadline, waited = time.monotonic() + args.worker_timeout, f"{args.worker_timeout:g} s (--worker-timeout)"
    try:
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt as exc:  # wait while the workers save what they measured, but not for ever
        if isinstance(exc, Terminated):  # Ctrl-C reaches the whole process group, SIGTERM only this process
            for worker in workers:
                worker.terminate()
        deadline, waited = time.monotonic() + WORKER_GRACE_S, f"{WORKER_GRACE_S} s after the interrupt"
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
    hung = _stop_hung(workers)
    codes = [EXIT_FAILED if worker in hung else worker.exitcode for worker in workers]
    for index, worker in zip(indices, workers):
        if worker in hung:
            log(f"GPU {index}: its process had not finished after {waited}: taken for hung and stopped; its "
                f"roofs file, if any, holds what it measured before (\"complete\": false)")
        elif worker.exitcode < 0:  # killed by a signal: no file for that GPU, so the run is no pass
            log(f"GPU {index}: its process was killed (signal {-worker.exitcode}); it wrote no roofs file")
    return worst(codes)


def _stop_hung(workers) -> list:
    """The workers still running: SIGTERM (a worker saves what it measured), SIGKILL after the grace."""
    hung = [worker for worker in workers if worker.is_alive()]
    for worker in hung:
        worker.terminate()
    for worker in hung:
        worker.join(WORKER_GRACE_S)
        if worker.is_alive():
            worker.kill()
            worker.join()
    return hung


def _measure_worker(index: int, args, argv, task: Task, at_once: int) -> None:
    """A --concurrent process: measure GPU `index`, exit with measure's code (an error: one line, 2)."""
    def run(_argv) -> int:
        return measure_device(index, select_benchmarks(args), args, argv, task, CONCURRENT, at_once,
                              several_gpus=True)

    with sigterm_as_interrupt():
        sys.exit(cli_entry(f"{PROG} (GPU {index})")(run)(None))


def measure_device(index: int, benches, args, argv, task: Task, mode: str | None, at_once: int | None, *,
                   several_gpus: bool) -> int:
    """Probe device `index`, name and check its outputs, measure, write: 0, EXIT_SOME_INVALID or 130."""
    started = _now()
    session = open_device(index, args)
    launch = launch_record(task, session.device, mode, at_once)
    stamp = started.strftime(STAMP)
    out = output_path(args, session.device, launch, stamp, several_gpus)
    path = None if args.out == "-" else out or _free_name(default_name(session.device, stamp, args.simulate,
                                                                       launch), args)
    # before measuring: a run must not end in a write that is refused or fails and loses what it measured
    files = Outputs(force=args.force)
    if path is not None:
        roofs_file, *figures = outputs(path, args)
        files.want("--out", roofs_file)
        for figure in figures:
            files.want("figure", figure, picture=True)
    checkpoint = Checkpoint(path, force=args.force)
    doc, interrupted = run_device(session, benches, args, argv, launch, started, checkpoint)
    emit(doc, checkpoint, files, args)
    if interrupted:
        print(f"{PROG}: interrupted ({doc['meta']['stopped']}); what was measured is saved with "
              f"\"complete\": false", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_SOME_INVALID if any(not c["valid"] for c in doc["ceilings"]) else 0


def launch_record(task: Task, device: dict, mode: str | None, at_once: int | None) -> dict:
    """The roofs file's `launch` (docs/roofs-schema.md)."""
    return {"launcher": task.launcher, "job_id": task.job_id, "node": task.node, "rank": task.rank,
            "local_rank": task.local_rank, "world_size": task.world_size, "local_size": task.local_size,
            "cuda_visible_devices": task.cuda_visible_devices, "gpu_index": node_gpu_index(device.get("pci_bus_id")),
            "mode": mode, "gpus_at_once": at_once}


def output_path(args, device: dict, launch: dict, stamp: str, several_gpus: bool) -> Path | None:
    """The roofs file --out names for this device; None for stdout and for the default name."""
    if args.out in (None, "-"):
        return None
    if "%" in args.out:
        return Path(expand(args.out, {"h": launch["node"], "r": launch["rank"], "l": launch["local_rank"],
                                      "g": launch["gpu_index"], "u": device.get("uuid"), "d": stamp}))
    path = Path(args.out)
    return path.with_name(f"{path.stem}-d{device['index']}{path.suffix}") if several_gpus else path


def default_name(device: dict, stamp: str, simulated: bool, launch: dict) -> Path:
    gpu = "simulator" if simulated else re.sub(r"[^a-z0-9]+", "-", (device.get("name") or "gpu").lower()).strip("-")
    several = (launch["world_size"] or 1) > 1
    task = f"-{file_safe(launch['node'])}-r{launch['rank']}" if several else ""
    return Path(f"roofs-{gpu}{task}-{stamp}.json")


def outputs(roofs_path: Path, args) -> list[Path]:
    """The files a run writes: the roofs file and, unless --no-plots, the sweep figures named after it."""
    from .sweeps import sweep_figure_paths

    return [roofs_path, *([] if args.no_plots else sweep_figure_paths(roofs_path).values())]


@dataclass(frozen=True)
class Session:
    """A device opened for measuring: what it is, and how to launch and time kernels on it."""

    device: dict
    free_bytes: int
    runtime: object
    timer: object
    budget: object
    nvml: object


def open_device(index: int, args) -> Session:
    from kernels.base import Runtime

    from .device import probe_device, simulated_device
    from .harness import DEFAULT_BUDGET, QUICK_BUDGET, SIMULATED_BUDGET, EventTimer, WallTimer
    from .nvml import Nvml

    if args.simulate:
        return Session(simulated_device(), SIMULATED_FREE_BYTES, Runtime(simulate=True), WallTimer(),
                       SIMULATED_BUDGET, None)
    import cupy

    cupy.cuda.Device(index).use()
    device = probe_device(index)
    stream = cupy.cuda.Stream(non_blocking=True)
    return Session(device, cupy.cuda.runtime.memGetInfo()[0], Runtime(simulate=False, cupy_stream=stream),
                   EventTimer(stream), QUICK_BUDGET if args.quick else DEFAULT_BUDGET, Nvml(index))


class Checkpoint:
    """The roofs file, rewritten atomically after each benchmark so that a run killed at a time limit keeps
    what it measured (`complete` stays false until the end). None as the path: stdout, written at the end
    only. The first write keeps an existing file unless --force; later ones replace the run's own."""

    def __init__(self, path: Path | None, *, force: bool):
        self.path, self.force = path, force

    def save(self, doc: dict) -> None:
        if self.path is None:
            return
        from .roofs import save_roofs

        save_roofs(doc, self.path, force=self.force)
        self.force = True


def run_device(session: Session, benches, args, argv, launch: dict, started: dt.datetime,
               checkpoint: Checkpoint) -> tuple[dict, bool]:
    """Measure every benchmark on one device, saving after each; Ctrl-C or SIGTERM stops early and keeps what
    was measured."""
    from .device import limits_of
    from .harness import budget_for, ceiling_record, measure_plan

    device, runtime, timer, budget, nvml = session.device, session.runtime, session.timer, session.budget, session.nvml
    limits = limits_of(device, session.free_bytes, simulate=args.simulate)
    doc = {"schema_version": SCHEMA_VERSION, "schema_minor": SCHEMA_MINOR, "simulated": bool(args.simulate),
           "complete": False, "meta": meta(argv, started), "device": device, "launch": launch, "ceilings": [],
           "sweeps": []}

    work = [(b, list(b.plans(limits, args.quick))) for b in benches]
    skipped = [b for b, plans in work if not plans]
    for b in skipped:
        log(f"skipped {b.name} ({b.backend}) on {limits.arch}: {b.notes[0] if b.notes else 'not supported'}")
    work = [(b, plans) for b, plans in work if plans]
    if not args.simulate:
        runtime.precompile(b.source(p) for b, plans in work if b.backend == "cuda-c" for p in plans)
    progress = _progress(sum(len(p) for _, p in work), "simulator" if args.simulate else f"GPU {device['index']}")
    stop = None
    try:
        for bench, plans in work:
            progress.set_description(f"{bench.name} ({bench.backend})")
            measured = []
            try:
                for plan in plans:
                    measured.append(measure_plan(bench, plan, runtime, timer, budget_for(bench, budget), nvml))
                    progress.update(1)
            except KeyboardInterrupt as exc:  # keep the points of a sweep cut short
                stop = exc
            if bench.is_sweep and measured:
                doc["sweeps"].append(sweep_record(bench, measured, device, planned=len(plans)))
            elif measured:
                doc["ceilings"].append(annotate(ceiling_record(bench, measured[0], simulated=args.simulate),
                                                device, args.simulate))
            if stop is not None:
                break
            checkpoint.save(doc)
    except KeyboardInterrupt as exc:  # between two benchmarks, while a record was being made or saved
        stop = exc
    finally:
        progress.close()
    doc["complete"] = stop is None
    doc["meta"]["stopped"] = None if stop is None else stopped_by(stop)
    doc["meta"]["finished"] = _now().isoformat()
    return doc, stop is not None


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


def emit(doc: dict, checkpoint: Checkpoint, files: Outputs, args) -> None:
    """Write the finished roofs file (atomically) to the checkpoint's path (stdout with --out -), the sweep
    figures beside it (`files`: their paths wanted before measuring), and the table."""
    from .roofs import dumps

    table = ceilings_table(doc)
    banner = ("SIMULATED: Numba's CUDA simulator ran these kernels; every number below is meaningless "
              "(correctness only).\n") if doc["simulated"] else ""
    parts = [banner + f"{doc['device']['name']}", table, roofs_summary(doc), sweeps_summary(doc)]
    summary = "\n".join(filter(None, parts))
    if args.out == "-":
        sys.stdout.write(dumps(doc))
        print(summary, file=sys.stderr)
        return
    # the roofs file was saved after every benchmark: this is its last save, complete; the figures are the
    # run's other outputs
    checkpoint.save(doc)
    path = checkpoint.path
    if doc["sweeps"] and not args.no_plots:
        from .sweeps import stage_sweep_figures

        stage_sweep_figures(files, doc, path)
    print(summary)
    log(f"wrote {path}")
    files.commit(log=lambda written: log(f"wrote {written}"))


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
            "finished": None, "stopped": None, "host": platform.node(), "python": platform.python_version()}


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
    """Progress as a plain line on stderr at each tenth of the runs: a log (Slurm's, a pipe) gets no carriage
    returns and a few lines, not one per run."""

    STEPS = 10

    def __init__(self, total: int, label: str):
        self.total, self.done, self.label, self.desc = total, 0, label, ""

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def update(self, n: int) -> None:
        before, self.done = self.done, self.done + n
        if before * self.STEPS // max(self.total, 1) != self.done * self.STEPS // max(self.total, 1):
            log(f"[{self.label} {self.done}/{self.total}] {self.desc}")

    def close(self) -> None:
        pass


def _progress(total: int, label: str):
    """A tqdm bar on a terminal; plain lines elsewhere (a bar redrawn with carriage returns is junk in a file)."""
    if not sys.stderr.isatty():
        return _Lines(total, label)
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

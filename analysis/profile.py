"""Profile an application with Nsight Compute, collecting exactly what the roofline needs.

`python -m analysis.profile [--out NAME] [--set roofline|hierarchical|full] [-k REGEX] -- APP ARGS...` runs
`ncu --csv --page raw` with the roofline metrics, clocks left running (`--clock-control none`, like the
roofs), child processes included, writes NAME.csv and prints its kernel table.

`python -m analysis.profile --torch [--out DIR] [--wait N --warmup N --active N --repeat N] -- SCRIPT.py ARGS`
(or `-- -m MODULE ARGS`) runs a PyTorch script in this process under torch.profiler instead, each optimizer
step a profiler step (analysis.torch_profile), and writes its traces into DIR.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.torch_profile import SCHEDULE, profile_script
from common.errors import CeilingsError, MissingDependency, cli_entry

PROG = "python -m analysis.profile"

# the seed's five: FLOPs = 2 FFMA + FADD + FMUL, DRAM bytes = 32 x sectors
SEED_METRICS = ("dram__sectors_read.sum", "dram__sectors_write.sum",
                "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
                "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
                "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")
ROOFLINE_METRICS = SEED_METRICS + tuple(
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
    for op in ("dadd", "dmul", "dfma", "hadd", "hmul", "hfma")) + (
    "sm__inst_executed_pipe_tensor.sum",
    "gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
    # which GPU (named in every table, compared with the roofs) and its SMs (FLOPs per SM cycle check)
    "device__attribute_display_name", "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor", "device__attribute_multiprocessor_count",
    # each launch's grid and block: what pairs a launch with a torch trace's (analysis.runs.paired)
    "launch__grid_size", "launch__block_size")
OFFERED_ONLY = ("sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum",)
HIERARCHICAL_METRICS = ROOFLINE_METRICS + ("lts__t_bytes.sum", "l1tex__t_bytes.sum")
METRIC_SETS = {"roofline": ROOFLINE_METRICS, "hierarchical": HIERARCHICAL_METRICS,
               "full": HIERARCHICAL_METRICS}
QUERY_TIMEOUT_S = 120  # `ncu --query-metrics` takes a few seconds
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
PERMISSION_DOC = "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
NO_KERNELS = "No kernels were profiled"


def base_name(metric: str) -> str:
    """`sm__cycles_elapsed.avg.per_second` -> `sm__cycles_elapsed` (what `ncu --query-metrics` lists)."""
    return metric.split(".", 1)[0]


def parse_query(text: str, required: Sequence[str] = SEED_METRICS) -> set[str] | None:
    """Base metric names in `ncu --query-metrics` output; None unless every required metric is among them
    (a listing parsed only in part must not drop metrics)."""
    names = set(re.findall(r"^\s*([a-z][a-z0-9_]*__[a-z0-9_]+)\s", text, re.MULTILINE))
    return names if all(base_name(m) in names for m in required) else None


def query_metrics(ncu: str, required: Sequence[str] = SEED_METRICS) -> set[str] | None:
    """Base metric names this device's ncu offers, or None when the query fails or cannot be read."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], check=False, capture_output=True, text=True,
                             timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_query(out.stdout, required) if out.returncode == 0 else None


def split_available(metrics: Sequence[str], available: set[str] | None) -> tuple[list[str], list[str]]:
    """(metrics this ncu offers, metrics it does not): an unknown metric makes ncu refuse the whole run.
    `available` None (the query failed): keep all."""
    if available is None:
        return list(metrics), []
    return ([m for m in metrics if base_name(m) in available],
            [m for m in metrics if base_name(m) not in available])


def tensor_ops_metrics(available: set[str] | None) -> list[str]:
    """The tensor FLOP counters this ncu offers (sm__ops_path_tensor_*, names by architecture), the least
    split of each type (analysis.metrics.tensor_ops_columns): unknown (None) offers none, since an unknown
    metric makes ncu refuse the run."""
    from analysis.metrics import tensor_ops_columns

    offered = [f"{name}.sum" for name in sorted(available or ()) if name.startswith("sm__ops_path_tensor")]
    return sorted(n for names in tensor_ops_columns(offered).values() for n in names)


def ncu_command(app: Sequence[str], *, log_file: str | os.PathLike, metric_set: str = "roofline",
                kernel_regex: str | None = None, launch_skip: int | None = None,
                launch_count: int | None = None, ncu: str = "ncu", profiler_range: bool = False,
                available: set[str] | None = None) -> list[str]:
    """The ncu argument list (never a shell string). The CSV goes to log_file: with --log-file ncu writes
    its own output (CSV and ==PROF== lines) there while the application's output stays on the terminal.
    profiler_range: only kernels between the app's cudaProfilerStart/Stop. available: metrics this ncu
    offers (`query_metrics`); the others are left out."""
    if metric_set not in METRIC_SETS:
        raise CeilingsError(f"--set {metric_set}: not one of {', '.join(METRIC_SETS)}")
    if not app:
        raise CeilingsError("no application to profile: put it after `--`, e.g. -- ./app --size 4096")
    cmd = [ncu, "--target-processes", "all", "--clock-control", "none"]
    if profiler_range:
        cmd += ["--profile-from-start", "off"]
    if metric_set == "full":
        cmd += ["--set", "full"]
    metrics, _ = split_available(METRIC_SETS[metric_set], available)
    metrics += tensor_ops_metrics(available)
    # only where this ncu lists it (an unknown metric makes ncu refuse the run): the HFMA2.MMA moves' count
    metrics += [m for m in OFFERED_ONLY if available and base_name(m) in available]
    cmd += ["--metrics", ",".join(metrics), "--csv", "--page", "raw",
            "--log-file", str(log_file)]
    if kernel_regex:
        try:  # ncu's regex flavour is close enough to Python's for a syntax check before a long run
            re.compile(kernel_regex)
        except re.error as exc:
            raise CeilingsError(f"-k {kernel_regex!r}: not a valid regular expression ({exc})") from None
        cmd += ["-k", f"regex:{kernel_regex}"]
    if launch_skip is not None:
        cmd += ["--launch-skip", str(launch_skip)]
    if launch_count is not None:
        cmd += ["--launch-count", str(launch_count)]
    return cmd + list(app)


def find_ncu(path: str | None) -> str:
    """The ncu executable: --ncu PATH, else `ncu` on PATH; MissingDependency saying how to get it."""
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise MissingDependency(f"--ncu {path}: not an executable file")
        return path
    found = shutil.which("ncu")
    if not found:
        raise MissingDependency("ncu (Nsight Compute CLI) not found on PATH: install the CUDA toolkit or Nsight "
                                "Compute (https://developer.nvidia.com/nsight-compute) and add its folder "
                                "(e.g. /usr/local/cuda/bin) to PATH, or pass --ncu PATH")
    return found


def run_ncu(cmd: Sequence[str]) -> tuple[int, str]:
    """Run ncu, echoing its output to stderr as it comes; return the exit code and the output."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")
    except OSError as exc:
        raise MissingDependency(f"cannot run {cmd[0]}: {exc.strerror}; check --ncu PATH") from None
    lines = []
    for line in proc.stdout:
        sys.stderr.write(line)
        lines.append(line)
    return proc.wait(), "".join(lines)


def check_ncu_output(rc: int, output: str) -> None:
    """One-line CeilingsError for: counters not permitted, the application failing, nothing profiled."""
    if PERMISSION_ERROR in output:
        raise CeilingsError(f"ncu: {PERMISSION_ERROR}: this user may not read the GPU performance counters; "
                            f"run as root (sudo) or set the driver option NVreg_RestrictProfilingToAdminUsers=0 "
                            f"(see {PERMISSION_DOC})")
    errors = [ln.strip() for ln in output.splitlines() if ln.startswith("==ERROR==")]
    if rc != 0:
        why = errors[-1] if errors else f"exit status {rc}"
        raise CeilingsError(f"the profiled run failed (ncu exit status {rc}): {why}")
    if NO_KERNELS in output:
        raise CeilingsError(f"ncu: {NO_KERNELS.lower()}; check -k REGEX, --launch-skip/--launch-count and that "
                            f"the application launches CUDA kernels")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, usage=f"{PROG} [options] -- APP [ARGS...]\n       {PROG} --torch [--out DIR] [--wait N] "
        "[--warmup N] [--active N] [--repeat N] [--no-modules] [--force] -- SCRIPT.py [ARGS...] | -m MODULE [ARGS...]",
        description="Profile APP with Nsight Compute (ncu), collecting the metrics the roofline needs, with "
        "clocks left running (--clock-control none) as when the roofs were measured; write NAME.csv and print "
        "its kernel table. Then: python -m analysis.roofline --roofs ROOFS.json NAME.csv -o roofline.png",
        epilog="Sets: roofline = FLOP counters (fp64/fp32/fp16 thread instructions, tensor-pipe "
        "instructions), DRAM sectors, time and SM cycles; hierarchical = roofline + L2 and L1 bytes (for "
        "--level all); full = ncu's `--set full` plus those. Profiling replays each kernel: expect slow runs; "
        "use -k and --launch-count to profile a few launches. --torch: torch.profiler instead of ncu, in this "
        "process (no replay: kernel times, and FLOPs rebuilt from shapes), traces into the folder --out; steps are "
        "optimizer steps, a cycle is --wait steps skipped, --warmup profiled unrecorded, --active recorded; a "
        "script without optimizer steps is one window. Then: python -m analysis.roofline --roofs ROOFS.json DIR "
        "--by op -o roofline.png")
    p.add_argument("--out", default="profile", metavar="NAME",
                   help="write NAME.csv (default profile); with --torch the folder of the traces")
    p.add_argument("--set", dest="metric_set", choices=tuple(METRIC_SETS), default="roofline",
                   help="which metrics (default roofline)")
    p.add_argument("-k", "--kernel-regex", metavar="REGEX", help="profile only kernels matching REGEX")
    p.add_argument("--launch-skip", type=int, metavar="N", help="skip the first N matching launches")
    p.add_argument("--launch-count", type=int, metavar="N", help="profile N matching launches")
    p.add_argument("--range", dest="profiler_range", action="store_true",
                   help="profile only between the application's cudaProfilerStart and cudaProfilerStop "
                        "(ncu --profile-from-start off): its measured step, not set-up and warm-up")
    p.add_argument("--ncu", metavar="PATH", help="ncu executable (default: ncu on PATH)")
    p.add_argument("--dry-run", action="store_true", help="print the ncu command and exit; run nothing")
    p.add_argument("--force", action="store_true",
                   help="overwrite NAME.csv if it exists; with --torch, delete the traces of a non-empty --out")
    group = p.add_argument_group("PyTorch (--torch)")
    group.add_argument("--torch", action="store_true",
                       help="profile a PyTorch script (SCRIPT.py ARGS, or -m MODULE ARGS) with torch.profiler")
    for name, what in (("wait", "steps skipped at the start of each cycle"),
                       ("warmup", "steps profiled but not recorded, next"),
                       ("active", "steps recorded, then: one trace per cycle"),
                       ("repeat", "cycles, 0: until the script ends")):
        group.add_argument(f"--{name}", type=int, metavar="N", help=f"{what} (default {SCHEDULE[name]})")
    group.add_argument("--no-modules", action="store_true",
                       help="without the Python tracer (it costs time in Python-heavy code): no nn.Module ranges, "
                            "so no --by module")
    p.add_argument("app", nargs=argparse.REMAINDER, help="the application and its arguments, after --")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    app = args.app[1:] if args.app[:1] == ["--"] else args.app
    if args.torch:
        return _profile_torch(args, app)
    schedule = [f"--{name}" for name in SCHEDULE if getattr(args, name) is not None]
    if schedule or args.no_modules:
        raise CeilingsError(f"{(schedule or ['--no-modules'])[0]}: a torch.profiler option; add --torch to "
                            f"profile a PyTorch script")
    for flag, value in (("--launch-skip", args.launch_skip), ("--launch-count", args.launch_count)):
        if value is not None and value < (0 if flag == "--launch-skip" else 1):
            raise CeilingsError(f"{flag} {value}: must be {'0 or more' if flag == '--launch-skip' else '1 or more'}")
    out = Path(args.out if args.out.endswith(".csv") else f"{args.out}.csv")
    options = {"metric_set": args.metric_set, "kernel_regex": args.kernel_regex, "launch_skip": args.launch_skip,
               "launch_count": args.launch_count, "profiler_range": args.profiler_range}
    if args.dry_run:
        print(shlex.join(ncu_command(app, log_file=out, ncu=args.ncu or "ncu", **options)))
        return 0
    ncu_command(app, log_file=out, **options)  # argument errors (-k REGEX included) before looking for ncu
    ncu = find_ncu(args.ncu)
    available = query_metrics(ncu)
    _, dropped = split_available(METRIC_SETS[args.metric_set], available)
    if dropped:
        print(f"{PROG}: not collected (this ncu does not list them): {', '.join(dropped)}", file=sys.stderr)
    from common.atomic import atomic_path

    with atomic_path(out, force=args.force) as tmp:
        tmp.unlink()  # ncu creates the log file itself
        cmd = ncu_command(app, log_file=tmp, ncu=ncu, available=available, **options)
        print(f"{PROG}: running {shlex.join(cmd)}", file=sys.stderr)
        rc, output = run_ncu(cmd)
        log = tmp.read_text(encoding="utf-8", errors="replace") if tmp.exists() else ""
        check_ncu_output(rc, output + log)
        if not log.strip():
            raise CeilingsError("ncu wrote nothing to its log file; run the command above by hand to see why")
    print(f"{PROG}: wrote {out}", file=sys.stderr)
    from analysis.ncu import format_table, kernel_table

    print(format_table(kernel_table([str(out)])))
    return 0


def _profile_torch(args: argparse.Namespace, script: Sequence[str]) -> int:
    """--torch: run the script under torch.profiler, then say where its traces are and what to run next;
    returns the script's exit status."""
    ncu_only = {"--set": args.metric_set != "roofline", "-k": args.kernel_regex is not None,
                "--launch-skip": args.launch_skip is not None, "--launch-count": args.launch_count is not None,
                "--range": args.profiler_range, "--ncu": args.ncu is not None, "--dry-run": args.dry_run}
    given = [flag for flag, on in ncu_only.items() if on]
    if given:
        raise CeilingsError(f"{given[0]}: an ncu option; --torch profiles with torch.profiler, which records every "
                            f"kernel of its active steps")
    schedule = {name: getattr(args, name) for name in SCHEDULE if getattr(args, name) is not None}
    status, prof = profile_script(script, args.out, force=args.force, modules=not args.no_modules, **schedule)
    traces = prof.traces()
    if not traces:
        if status == 0:
            raise CeilingsError(prof.no_trace_reason())
        print(f"{PROG}: {prof.no_trace_reason()}", file=sys.stderr)
        return status
    print(f"{PROG}: {prof.steps} optimizer step(s); {len(traces)} trace(s) in {args.out}: "
          f"{', '.join(t.name for t in traces)}", file=sys.stderr)
    if prof.steps == 0:
        print(f"{PROG}: the script made no optimizer step (torch.optim), so its whole run is one window",
              file=sys.stderr)
    if prof.cuda:
        print(f"{PROG}: next: python -m analysis.roofline --roofs ROOFS.json {shlex.quote(str(args.out))} --by op "
              f"-o roofline.png", file=sys.stderr)
    else:
        print(f"{PROG}: no CUDA device, so the traces hold no GPU kernels to draw; their operators' FLOPs: "
              f"analysis.torch_profile.operator_work(TRACE)", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())

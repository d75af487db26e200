"""What every command that reads profiles shares (analysis.roofline, analysis.whatif, analysis.llm
--calibrate): the profile options, the kernel table they give, and the one writer of the run's outputs."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

from ceilings.lazy import lazy
from common.atomic import Outputs
from common.errors import CeilingsError

np = lazy("numpy")
pd = lazy("pandas")


def read_kernels(paths: Sequence[str | Path], nsys: str | Path | None = None, *, kernel_regex: str | None = None,
                 nvtx: str | None = None, time_run: int | None = None, by: str = "kernel",
                 include_early: bool = False, flops: str = "executed", max_inflated: float | None = None
                 ) -> pd.DataFrame:
    """The kernel table of profiler outputs (analysis.ncu.kernel_table), of the kernels whose name matches
    `kernel_regex` (re.search) launched inside NVTX range `nvtx`; `time_run`: the run to take a kernel's time
    from when runs disagree; `by`: rows per kernel, op, module or annotation. A CeilingsError when no kernel
    is left."""
    from analysis.ncu import kernel_table

    table = kernel_table([str(p) for p in paths], nsys=None if nsys is None else str(nsys),
                         kernel_regex=kernel_regex, nvtx=nvtx, time_run=time_run, by=by,
                         include_early=include_early, flops=flops, max_inflated=max_inflated)
    if table.empty:
        chosen = [f"{opt} {value!r}" for opt, value in (("--kernel", kernel_regex), ("--nvtx", nvtx)) if value]
        raise CeilingsError(f"{', '.join(map(str, paths))}: no kernels found"
                            + (f" with {' and '.join(chosen)}; check the name or range" if chosen else ""))
    return table


def add_profile_arguments(p: argparse.ArgumentParser) -> None:
    """The profiles and how to read them: the same options for every command that reads kernels."""
    from analysis.ncu import add_profile_filters

    p.add_argument("profiles", nargs="+", metavar="PROFILE", help="Nsight Compute output(s)")
    p.add_argument("--nsys", metavar="FILE", help="nsys kernel summary for kernel times (optional)")
    add_profile_filters(p)


def kernels_of(args: argparse.Namespace) -> pd.DataFrame:
    """read_kernels with the options of add_profile_arguments."""
    from analysis.ncu import profile_filters

    return read_kernels(args.profiles, args.nsys, **profile_filters(args))


def check_outputs(texts: Mapping[str, str | None], *, pictures: Mapping[str, str | None] | None = None, force: bool,
                  inputs: Sequence[str | None] = ()) -> Outputs:
    """Before any work: the one writer of the run (common.atomic.Outputs), every output checked: writable,
    its own file, not an input, and without `force` not there yet. texts / pictures: option -> path ('-':
    standard output, for texts only); inputs: the paths the run reads."""
    out = Outputs(inputs=inputs, force=force)
    for option, path in (pictures or {}).items():
        out.want(option, path, picture=True)
    for option, path in texts.items():
        out.want(option, path)
    return out


def profile_inputs(args: argparse.Namespace) -> list[str | None]:
    """The files add_profile_arguments' options name: what no output may replace."""
    return [*args.profiles, args.nsys]

"""What every command that reads profiles shares (analysis.roofline, analysis.whatif, analysis.llm
--calibrate): the profile options, the kernel table they give, and the one writer of the run's outputs."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ceilings.lazy import lazy
from common.atomic import Outputs
from common.errors import CeilingsError

if TYPE_CHECKING:
    from analysis.roofline import Roofs

np = lazy("numpy")
pd = lazy("pandas")

# the measured roofs files searched for in the working folder when --roofs is left out
ROOFS_FILES = "roofs-*.json"


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
    from analysis.readers.registry import reads

    p.add_argument("profiles", nargs="+", metavar="PROFILE",
                   help=f"profile(s), or folders of them; a torch.profiler trace given with an ncu profile of the "
                        f"same program takes the profile's counters for the kernels it measured (docs/torch.md); "
                        f"{reads()}")
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


def profile_roofs(gpus: Sequence[Mapping], option: str = "--roofs", folder: str | Path = ".") -> tuple[Roofs, str]:
    """Without `option`, the roofs of the GPU the profile names (`gpus`: kernel_table's attrs["gpus"]): the
    newest measured ROOFS_FILES of that GPU in `folder`, else its datasheet row; and the line that says which.
    A CeilingsError naming the remedy when the profile names no GPU, or one no roofs file or datasheet row has."""
    from analysis.roofline import Roofs, foreign_gpus, load
    from ceilings.datasheet import match_device

    names = sorted({g["gpu"] for g in gpus if g.get("gpu")})
    if len(names) != 1:
        said = f"names {len(names)} GPUs ({'; '.join(names)})" if names else "does not say which GPU it ran on"
        raise CeilingsError(f"the profile {said}: give {option} ROOFS.json (python -m ceilings.measure --out "
                            f"roofs-NAME.json on that GPU) or {option} DATASHEET-NAME (`ceilings datasheets` lists "
                            f"them)")
    mine = []
    for path in Path(folder).glob(ROOFS_FILES):
        try:
            roofs = load(path)
        except CeilingsError:  # a file of another kind, or broken: not the one meant
            continue
        if roofs.measured and not foreign_gpus(roofs, gpus):
            mine.append((path.stat().st_mtime, str(path), roofs))
    if mine:
        _, path, roofs = max(mine)
        return roofs, f"no {option}: the roofs measured in {path} ({roofs.device}, the profile's GPU; the newest " \
                      f"{ROOFS_FILES} of it here)"
    memory = next((g.get("memory_bytes") for g in gpus if g.get("memory_bytes")), None)
    row = match_device(names[0], memory)
    if row is None:
        raise CeilingsError(f"the profile's GPU {names[0]!r} has no datasheet row and no {ROOFS_FILES} of it here: "
                            f"give {option} ROOFS.json (python -m ceilings.measure on that GPU)")
    return Roofs.from_datasheet(row), (f"no {option}: the datasheet figures of {row.display_name}, the profile's "
                                       f"GPU (no measured {ROOFS_FILES} of it here; `{option} ROOFS.json` to "
                                       f"choose one)")

"""`python -m analysis.roofline`: the command, apart from the computation it calls (analysis.roofline) so
that the renderers it calls (analysis.figure, analysis.plot, analysis.html) can import that computation
without a circle."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

from analysis.roofline import (
    LEVELS,
    PRECISIONS,
    datasheet_roofs,
    device_warning,
    roofline_table,
    target_roofs,
    unknown_device_warning,
)
from analysis.roofline.budget import budget_columns, json_document, time_budget, unplaced_warning
from analysis.roofline.clocks import clock_warning, profile_sm_clock
from analysis.roofline.inputs import (
    ROOFS_FILES,
    add_profile_arguments,
    check_outputs,
    kernels_of,
    profile_inputs,
    profile_roofs,
)
from analysis.roofline.report import render_kernels, render_report
from common.errors import CeilingsError, cli_entry
from common.warn import print_warnings

PROG = "python -m analysis.roofline"
DEFAULT_TOP = 10


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Roofline of profiled kernels against the roofs measured by "
        "`python -m ceilings.measure` (or a datasheet's): a picture, a report ranking kernels by the time they "
        "would save at their roof, and a per-kernel table.",
        epilog="Make a profile with `python -m analysis.profile`. Without -o/--report/--csv the table goes to stdout; "
        "-v prints every warning whole.")
    add_profile_arguments(p)
    p.add_argument("--roofs", metavar="ROOFS.json|NAME",
                   help="roofs file from ceilings.measure, or a datasheet name (e.g. 'A100 SXM4 80GB'); default: "
                        f"the profile's GPU's, the newest measured {ROOFS_FILES} of it here, else its datasheet row")
    p.add_argument("-o", "--output", metavar="FILE", help="picture: .png, .svg or .pdf")
    p.add_argument("--report", metavar="FILE.md", help="Markdown report ('-': standard output)")
    p.add_argument("--csv", metavar="FILE.csv", help="per-kernel table ('-': standard output)")
    p.add_argument("--html", metavar="FILE.html", help="one self-contained interactive report (opens offline)")
    p.add_argument("--json", metavar="FILE.json", help="the time budget, the application and every kernel, "
                   "versioned (docs/roofline-json.md; '-': standard output)")
    p.add_argument("--force", action="store_true", help="overwrite existing -o/--report/--csv/--html files")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                   help=f"label the N kernels that take the most time (default {DEFAULT_TOP})")
    p.add_argument("--level", choices=(*LEVELS, "all"), default="dram",
                   help="memory level of the arithmetic intensity; all: hierarchical roofline (default dram)")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="judge every kernel against this flat (default: each kernel's dominant precision)")
    ds = p.add_mutually_exclusive_group()
    ds.add_argument("--datasheet", nargs="?", const="", default="", metavar="NAME",
                    help="draw datasheet roofs dashed: of the matching row (default) or of row NAME")
    ds.add_argument("--no-datasheet", dest="datasheet", action="store_const", const=None,
                    help="do not draw datasheet roofs")
    p.add_argument("--scale-clock", action="store_true",
                   help="scale the compute roofs to the profile's SM clock (median over kernels)")
    p.add_argument("--sweep", action="store_true", help="overlay the measured intensity sweep(s)")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = check_outputs({"--report": args.report, "--csv": args.csv, "--html": args.html, "--json": args.json},
                        pictures={"-o": args.output},
                        force=args.force, inputs=[*profile_inputs(args), args.roofs])
    if args.top < 0:
        raise CeilingsError(f"--top {args.top}: must be 0 or more")
    roofs = target_roofs(args.roofs, option="--roofs") if args.roofs else None  # a wrong name fails before reading
    kernels = kernels_of(args)
    gpus = kernels.attrs.get("gpus", [])
    if roofs is None:
        roofs, said = profile_roofs(gpus)
        print(f"{PROG}: {said}", file=sys.stderr)
    command = " ".join(shlex.quote(str(a)) for a in ("python", "-m", "analysis.whatif", *args.profiles, "--on",
                                                      args.roofs or roofs.origin.removeprefix("datasheet ")))
    foreign = device_warning(roofs, gpus, "every % of roof and time at roof compares these kernels with another "
                             f"GPU's roofs; to project them onto this GPU run `{command} --roofs <roofs of the "
                             f"profiled GPU>`")
    # the foreign-GPU warning first: it makes every number after it wrong; then what the roofs are
    warnings = [w for w in (foreign, unknown_device_warning(roofs, gpus)) if w]
    clock = profile_sm_clock(kernels)
    mismatch = clock_warning(roofs, clock)
    if args.scale_clock:
        if clock is None:
            raise CeilingsError("--scale-clock: the profile has no SM clock (sm__cycles_elapsed.avg.per_second)")
        roofs = roofs.scaled_to_clock(clock)
    if roofs.simulated:
        warnings.append("the roofs file is SIMULATED (Numba CUDA simulator): its numbers mean nothing")
    elif not roofs.measured:
        warnings.append(f"the roofs are {roofs.provenance}: every % of roof is against these figures, not "
                        f"against what a measured GPU reaches")
    table = roofline_table(roofs, kernels, level=args.level, precision=args.precision)
    # then what the picture leaves out, then the rest
    warnings += [w for w in (unplaced_warning(time_budget(table)), None if args.scale_clock else mismatch) if w]
    warnings += table.attrs["warnings"] + kernels.attrs.get("warnings", [])
    if args.sweep and not roofs.sweeps:
        warnings.append(f"--sweep: {roofs.origin or roofs.device} has no intensity sweeps (intensity.*, measured "
                        f"by the intensity benchmarks of python -m ceilings.measure); nothing to overlay")
    datasheet = None if args.datasheet is None else datasheet_roofs(roofs, args.datasheet or None)
    print_warnings(warnings, args.verbose)
    if args.csv:
        out.text(args.csv, table.join(budget_columns(table)).to_csv(index=False))
    if args.json:
        out.text(args.json, json_document(table, roofs_label=roofs.label, roofs_source=roofs.provenance,
                                          profiles=args.profiles, warnings=warnings))
    if args.report:
        out.text(args.report, render_report(roofs, table, profiles=args.profiles, warnings=warnings,
                                            datasheet=datasheet))
    if args.output:
        from analysis.plot import roofline_figure

        out.figure(args.output, roofline_figure(roofs, table, level=args.level, datasheet=datasheet, top=args.top,
                                                sweep=args.sweep), dpi=150, bbox_inches="tight")
    if args.html:
        from analysis.figure import roofline as roofline_data
        from analysis.html import roofline_page

        out.text(args.html, roofline_page(roofline_data(roofs, table, level=args.level, datasheet=datasheet,
                                                        top=args.top, sweep=args.sweep),
                                          roofs, warnings=warnings))
    out.commit(log=lambda path: print(f"wrote {path}", file=sys.stderr))
    if not (args.csv or args.report or args.output or args.html or args.json):
        print(render_kernels(roofs, table))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What if these kernels ran on another GPU? Project each kernel's FLOPs and bytes onto other roofs.

`python -m analysis.whatif PROFILE... --on ROOFS.json|DATASHEET-NAME ... [--roofs HOME.json|DATASHEET-NAME]`:
for every target GPU (a roofs file, or a datasheet row named by a fragment), each kernel's time at that GPU's
roof and, when the roofs of the GPU it was profiled on are given (--roofs), its time at its current efficiency
(the same % of roof as measured at home). Same FLOPs and bytes everywhere: a projection, not a prediction
(caches, occupancy and library kernel choices differ between GPUs).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from analysis.roofline import (
    LEVELS,
    NAMES_SHOWN,
    PRECISIONS,
    Roofs,
    device_warning,
    roofline_table,
    seconds,
    target_roofs,
    unknown_device_warning,
)
from analysis.roofline.inputs import add_profile_arguments, check_outputs, kernels_of, profile_inputs, profile_roofs
from analysis.roofline.report import profile_line
from ceilings.lazy import lazy
from common.atomic import STDOUT
from common.errors import CeilingsError, cli_entry, listed
from common.warn import print_warnings

pd = lazy("pandas")

PROG = "python -m analysis.whatif"

WHATIF_COLUMNS = ("gpu", "kernel", "short_name", "precision", "bound", "time_s", "pct_of_roof",
                  "time_at_roof_s", "time_at_efficiency_s", "speedup", "roofs_source", "profile_gpu")


def whatif_table(kernels: pd.DataFrame, targets: Sequence[Roofs], *, home: Roofs | None = None,
                 level: str = "dram", precision: str | None = None) -> pd.DataFrame:
    """One row per (target GPU, kernel): time at the target's roof, and at the kernel's home efficiency.

    time_at_efficiency_s = time_at_roof_s on the target / (pct_of_roof at home / 100); NaN without `home`.
    speedup = measured time_s / time_at_efficiency_s. With `home`, its own rows come first (a check:
    there time_at_efficiency_s equals time_s). Kernels a GPU cannot judge (no roof for their precision)
    are listed in `table.attrs["warnings"]`; the profile's GPUs (kernels.attrs["gpus"]) are in
    `table.attrs["gpus"]` and the profile_gpu column.
    """
    gpus = ([home] if home is not None else []) + list(targets)
    if not gpus:
        raise CeilingsError("no target GPU: give --on ROOFS.json or --on DATASHEET-NAME")
    at_home = roofline_table(home, kernels, level=level, precision=precision) if home is not None else None
    pct = at_home["pct_of_roof"] if at_home is not None else math.nan
    parts, warnings = [], []
    for gpu in gpus:
        t = roofline_table(gpu, kernels, level=level, precision=precision)
        # "above their roof" compares with the time measured at home: meaningful on the home GPU only
        if gpu is home:
            warnings += [f"{gpu.device}: {w}" for w in t.attrs["warnings"]]
        elif t.attrs["not_judged"]:  # one line a GPU: a profile of many kernels would print one each
            warnings.append(f"{gpu.device}: {len(t.attrs['not_judged'])} kernel(s) not judged: "
                            f"{listed(t.attrs['not_judged'], NAMES_SHOWN)}")
        out = t[["kernel", "short_name", "precision", "bound", "time_s", "time_at_roof_s", "roofs_source",
                 "profile_gpu"]].copy()
        # a row judged on part of its time (coverage below 1) is projected for that part: its measured time too
        out["time_s"] = t["judged_time_s"].fillna(t["time_s"] * t["coverage"])
        out.insert(0, "gpu", gpu.device if gpu is not home else f"{gpu.device} (profiled)")
        out["pct_of_roof"] = pct  # aligned on the kernel table's index
        out["time_at_efficiency_s"] = out["time_at_roof_s"] / (out["pct_of_roof"] / 100.0)
        out["speedup"] = out["time_s"] / out["time_at_efficiency_s"]
        parts.append(out[list(WHATIF_COLUMNS)])
    table = pd.concat(parts, ignore_index=True)
    table.attrs["warnings"] = warnings
    table.attrs["gpus"] = list(kernels.attrs.get("gpus", []))
    return table


def whatif_totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per GPU: measured kernel time, time at the roofs, time at the current efficiency, over the kernels
    judged on every GPU (home included), so that every GPU's totals cover the same kernels.
    `totals.attrs["left_out"]`: how many kernels that leaves out; `totals.attrs["gpus"]`: the profile's GPUs."""
    usable = table["time_at_roof_s"].notna()
    if table["time_at_efficiency_s"].notna().any():  # with a home GPU, also an efficiency (none for 0 work)
        usable &= table["time_at_efficiency_s"].notna()
    everywhere = usable.groupby(table["kernel"]).transform("all")
    grouped = table[everywhere].groupby("gpu", sort=False)
    out = pd.DataFrame({"kernels": grouped.size(), "time_s": grouped["time_s"].sum(),
                        "time_at_roof_s": grouped["time_at_roof_s"].sum(),
                        "time_at_efficiency_s": grouped["time_at_efficiency_s"].sum(min_count=1)})
    out["speedup"] = out["time_s"] / out["time_at_efficiency_s"]
    out = out.reset_index()
    out.attrs["left_out"] = table.loc[~everywhere, "kernel"].nunique()
    out.attrs["gpus"] = table.attrs.get("gpus", [])
    return out


def render_totals(totals: pd.DataFrame, gpus: Sequence[Roofs]) -> str:
    """The totals per GPU, then where each GPU's roofs and the profile come from."""
    lines = [f"{'GPU':40} {'kernels':>7} {'measured':>10} {'at roof':>10} {'at current eff.':>16} {'speedup':>8}"]
    for r in totals.itertuples():
        eff = seconds(r.time_at_efficiency_s) if not pd.isna(r.time_at_efficiency_s) else "(needs --roofs)"
        speed = f"{r.speedup:.2f}x" if not pd.isna(r.speedup) else ""
        lines.append(f"{r.gpu[:40]:40} {r.kernels:>7} {seconds(r.time_s):>10} {seconds(r.time_at_roof_s):>10} "
                     f"{eff:>16} {speed:>8}")
    lines.append("")
    if totals.attrs["left_out"]:
        lines += [f"{totals.attrs['left_out']} kernel(s) left out of the totals: not judged on every GPU (see the "
                  f"warnings)", ""]
    lines += [f"{g.label}: {g.provenance}" for g in gpus]
    # the targets are other GPUs by design: whether the home roofs are the profiled GPU's is a warning of main
    lines.append(f"Profile: {profile_line(totals.attrs.get('gpus', []))}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Project profiled kernels onto other GPUs' roofs: each kernel's time at the "
        "target's roof and at its current efficiency (% of roof kept), with totals per GPU.",
        epilog="A projection with the same FLOPs and bytes, not a prediction: caches, occupancy and the "
        "kernels libraries choose differ between GPUs. Datasheet rows give DRAM and peak FLOP/s only.")
    add_profile_arguments(p)
    p.add_argument("--on", nargs="+", action="extend", required=True, metavar="ROOFS.json|NAME",
                   help="target GPU(s): a roofs file or a datasheet name fragment (e.g. 'A100 SXM')")
    p.add_argument("--roofs", metavar="HOME.json|NAME",
                   help="roofs of the GPU the profile was taken on (a roofs file or a datasheet name): gives each "
                        "kernel's current efficiency; default: the profile's GPU's, as analysis.roofline finds them")
    p.add_argument("--level", choices=LEVELS, default="dram", help="memory level (default dram)")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="judge every kernel against this flat (default: each kernel's dominant precision)")
    p.add_argument("--csv", metavar="FILE.csv", help="write the per-kernel table here ('-': standard output)")
    p.add_argument("--html", metavar="FILE.html", help="one self-contained report: totals and every kernel per GPU")
    p.add_argument("--force", action="store_true", help="overwrite an existing --csv or --html file")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = check_outputs({"--csv": args.csv, "--html": args.html}, force=args.force,
                        inputs=[*profile_inputs(args), args.roofs, *args.on])
    home = target_roofs(args.roofs, option="--roofs") if args.roofs else None
    kernels = kernels_of(args)
    gpus = kernels.attrs.get("gpus", [])
    warnings = []
    if home is None:
        try:
            home, said = profile_roofs(gpus)
            print(f"{PROG}: {said}", file=sys.stderr)
        except CeilingsError as exc:  # the projection at the roofs needs no home
            warnings.append(f"only the time at the roof is projected: {exc}")
    targets = [target_roofs(spec, like=home) for spec in args.on]
    table = whatif_table(kernels, targets, home=home, level=args.level, precision=args.precision)
    if home is not None:  # the foreign-GPU warning first: it makes every efficiency wrong
        remedy = (f"--roofs {args.roofs or home.origin} must be the roofs of the GPU the profile ran on, else every "
                  f"current efficiency and time at it is wrong; measure that GPU or give its datasheet name")
        warnings += [w for w in (device_warning(home, gpus, remedy), unknown_device_warning(home, gpus)) if w]
    warnings += [f"{gpu.device}: {gpu.provenance}" for gpu in ([home] if home else []) + targets if not gpu.measured]
    warnings += table.attrs["warnings"] + kernels.attrs.get("warnings", [])
    print_warnings(warnings, args.verbose)
    if args.csv:
        out.text(args.csv, table.to_csv(index=False))
    totals = whatif_totals(table)
    if args.html:
        from analysis.html import whatif_page

        out.text(args.html, whatif_page(table, totals, ([home] if home else []) + targets, warnings=warnings))
    out.commit(log=lambda path: print(f"wrote {path}", file=sys.stderr))
    # with a table on standard output the totals go to stderr, so that the output stays one file
    print(render_totals(totals, ([home] if home else []) + targets),
          file=sys.stderr if STDOUT in (args.csv, args.html) else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The roofline's Markdown report: where the numbers come from, the roofs used, the totals, the kernels
ranked by the time they would save, and the warnings (analysis.roofline's tables rendered as text)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analysis.roofline import (
    FOREIGN_PROFILE,
    GPU_NAME_HINT,
    LATENCY,
    LATENCY_BOUND_FACTOR,
    LEVELS,
    NO_FLOPS,
    REPORT_MAX_ROWS,
    Roofs,
    application_line,
    foreign_gpus,
    percent,
    profile_device,
    seconds,
    si,
    totals,
)
from analysis.roofline.budget import application, budget_lines, headline, time_budget
from analysis.roofline.links import COMMUNICATION_BOUND
from ceilings.lazy import lazy
from common.text import aligned

np = lazy("numpy")
pd = lazy("pandas")



def profile_line(gpus: Sequence[Mapping], roofs: Roofs | None = None) -> str:
    """Which GPU the profile came from, for every table, report and plot: how to find out when the profile does
    not say, and FOREIGN_PROFILE first when it is not the GPU of `roofs`."""
    text = f"profiled on {profile_device(gpus)}"
    if roofs is not None and foreign_gpus(roofs, gpus):
        text = f"{FOREIGN_PROFILE} {text}, not on the roofs' {roofs.label}"
    if not gpus or not all(g.get("gpu") for g in gpus):
        text += f"; {GPU_NAME_HINT}"
    return text


def roofs_lines(roofs: Roofs, level: str = "dram", floor: tuple[float, str] | None = None) -> list[str]:
    """One line per roof, with the ceiling that gave it and the ridge against `level` (dram for 'all'); the
    launch floor the table used (`floor`, device_floor), else the roofs' own."""
    ridge_level = "dram" if level == "all" else level
    lines = [f"{r.key}: {si(r.value, 'B/s')} ({r.ceiling})" for r in roofs.bandwidths]
    for r in roofs.flats:
        ridge = roofs.ridge(r.key, ridge_level)
        lines.append(f"{r.key}: {si(r.value, 'FLOP/s')} ({r.ceiling}); ridge at {ridge:.3g} FLOP/B "
                     f"against {ridge_level}")
    clock = f"{roofs.sm_clock_hz / 1e9:.3f} GHz" if roofs.sm_clock_hz else "unknown"
    lines.append(f"SM clock of the roofs: {clock}")
    floor_s, source = floor or roofs.floor
    lines.append(f"launch floor: {seconds(floor_s)} a kernel ({source}); a kernel whose roofs allow less is "
                 f"latency-bound, as is one without counters within {LATENCY_BOUND_FACTOR:g}x of it")
    return lines


KERNEL_HEADER = ("#", "kernel", "precision", "bound", "AI (FLOP/B)", "achieved", "roof", "% of roof", "time",
                 "at roof", "saved", "share")
KERNEL_CELL = KERNEL_HEADER.index("kernel")
# left-aligned in the text table (the rest are numbers, right-aligned)
TEXT_CELLS = ("kernel", "precision", "bound")


def kernel_rows(roofs: Roofs, table: pd.DataFrame, limit: int | None = None) -> list[list[str]]:
    """The cells (KERNEL_HEADER) of the first `limit` kernels, in readable units: the one formatting of the
    Markdown report and of the table on stdout. A kernel without FLOPs (copy, memset) is shown as achieved
    bandwidth (bytes / time) against the bandwidth roof of its level, since its FLOP/s are 0."""
    rows = []
    for i, r in enumerate((table if limit is None else table.head(limit)).itertuples(), 1):
        judged = not pd.isna(r.pct_of_roof)
        if r.bound == LATENCY:  # against the launch floor: a time, not a rate (and maybe no counters at all)
            achieved, roof = ("" if pd.isna(r.flop_per_s) else si(r.flop_per_s, "FLOP/s")), "launch floor"
        elif r.bound == COMMUNICATION_BOUND:  # bus bytes against the interconnect
            achieved = si(r.bytes / r.time_s, "B/s") if judged else ""
            roof = si(roofs.link.value, "B/s") if judged else ""
        elif r.precision == NO_FLOPS:
            achieved = si(r.bytes / r.time_s, "B/s") if judged else ""
            roof = si(roofs.bandwidth(r.level).value, "B/s") if judged else ""
        else:
            achieved = si(r.flop_per_s, "FLOP/s")
            roof = si(r.roof_flop_per_s, "FLOP/s") if judged else ""
        rows.append([
            str(i), str(r.short_name), r.precision if isinstance(r.precision, str) else "unknown",
            r.bound if judged else "not judged", f"{r.ai:.3g}" if judged and not pd.isna(r.ai) else "", achieved, roof,
            f"{r.pct_of_roof:.1f}%" if judged else "", seconds(r.time_s),
            seconds(r.time_at_roof_s) if judged else "", seconds(r.time_saved_s) if judged else "",
            f"{r.share * 100:.1f}%" if not pd.isna(r.share) else ""])
    return rows


def render_kernels(roofs: Roofs, table: pd.DataFrame) -> str:
    """Every kernel as a fixed-width text table (the report's columns and units), for a terminal, under the
    roofs' GPU and provenance and the profile's GPU."""
    head = [f"roofs: {roofs.label}: {roofs.provenance}", profile_line(table.attrs.get("gpus", []), roofs), ""]
    budget = time_budget(table)
    if len(budget):
        head += [f"time budget (all {seconds(budget['time_s'].sum())} of kernel time):",
                 *(f"  {line}" for line in budget_lines(budget)), ""]
    return "\n".join(head) + "\n" + aligned(KERNEL_HEADER, kernel_rows(roofs, table), left=TEXT_CELLS)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def budget_section(table: pd.DataFrame) -> list[str]:
    """The report's time budget: every second of kernel time by class and cause, and the timeline."""
    budget = time_budget(table)
    if budget.empty:
        return ["## Time budget", "", "No kernel has a time: the profile lacks kernel durations.", ""]
    out = ["## Time budget", "",
           f"All of the profile's kernel time, {seconds(budget['time_s'].sum())}: what the roofline places (compute-, "
           f"memory-, latency-bound), communication, and what it cannot place, with why.", "",
           "| class | cause | time | share | what would place it |", "|---|---|---:|---:|---|"]
    out += [f"| {r['class']} | {_md(r['cause'])} | {seconds(r['time_s'])} | {r['share']:.1%} | {_md(r['remedy'])} |"
            for _, r in budget.iterrows()]
    timeline = timeline_line(table)
    return out + (["", timeline] if timeline else []) + [""]


def timeline_line(table: pd.DataFrame) -> str | None:
    """The GPU's busy, idle and overlapped time in words, where the profile has timestamps (traces)."""
    app = application(table, time_budget(table))
    if app["busy_time_s"] is None:
        return None
    return (f"Timeline: the GPU was busy {seconds(app['busy_time_s'])} (the union of kernel intervals, per GPU) of "
            f"a {seconds(app['window_s'])} window from the first kernel to the last (idle "
            f"{seconds(app['idle_time_s'])}); communication overlapped other kernels for {seconds(app['overlap_s'])}.")


def render_report(roofs: Roofs, table: pd.DataFrame, *, profiles: Sequence[str] = (),
                  warnings: Sequence[str] = (), datasheet: Roofs | None = None) -> str:
    """The Markdown report: provenance, roofs, totals, kernels ranked by time saved, warnings."""
    level = table.attrs.get("level", "dram")
    t = totals(table)
    profiled = profile_line(table.attrs.get("gpus", []), roofs)
    out = [f"# Roofline: {roofs.device}", ""]
    if profiled.startswith(FOREIGN_PROFILE):
        out += [f"**{_md(profiled)}.** Every % of roof below compares these kernels with another GPU; see the "
                f"warnings.", ""]
    if not roofs.measured:
        out += [f"**{roofs.provenance}.** These roofs are not measurements made on this machine.", ""]
    out += [f"- Roofs: {roofs.label}: {roofs.provenance}; from {roofs.origin}",
            f"- Profile: {', '.join(map(str, profiles)) or '-'}; {_md(profiled)}",
            f"- Level: {level}" + (" (each kernel against its slowest measured level)" if level == "all" else ""),
            ""]
    out += budget_section(table)
    out += ["## Roofs used", ""]
    out += [f"- {line}" for line in roofs_lines(roofs, level, table.attrs.get("floor"))]
    if datasheet is not None:
        out += ["", f"Datasheet ({datasheet.device}), for comparison only: "
                + "; ".join(f"{r.key} {si(r.value, 'B/s' if r.key in LEVELS else 'FLOP/s')}"
                            for r in (*datasheet.bandwidths, *datasheet.flats))]
    if t["judged"]:
        whole = headline(table, time_budget(table))
        at_roof = f"{seconds(t['time_at_roof_s'])} (measured: {seconds(t['judged_time_s'])})"
        saving = (f"{seconds(t['time_saved_s'])} ({percent(t['time_saved_s'], whole['kernel_time_s'])} of all "
                  f"kernel time; the time placed on the roofs is {percent(whole['placed_share'], 1)} of it)")
    else:
        at_roof = saving = ("n/a: no kernel has a time (the profile lacks gpu__time_duration.sum; profile with "
                            "python -m analysis.profile or give --nsys)" if pd.isna(t["time_s"]) else
                            "n/a: no kernel could be judged (see the warnings)")
    out += ["", "## Totals", "",
            f"- Kernels: {t['kernels']} ({t['judged']} judged against the roofs)",
            f"- Total kernel time: {seconds(t['time_s'])}",
            f"- Time of the judged kernels at their roofs: {at_roof}",
            f"- Potential saving: {saving}",
            f"- Application: {application_line(table.attrs.get('application'))}", ""]
    no_flops = table[table["precision"] == NO_FLOPS]
    if len(no_flops):
        out += [(f"Kernels without floating-point work ({len(no_flops)}, "
                f"{percent(no_flops['time_s'].sum(min_count=1), t['time_s'])} of time: copies, memsets, gathers) have "
                f"arithmetic intensity 0: they are memory-bound, their time at the roof is bytes / bandwidth, "
                f"and they are in the table but not on the log-log plot; the table gives their achieved "
                f"bandwidth against the bandwidth roof."), ""]
    out += ["## Kernels by potential saving", "",
            "| " + " | ".join(KERNEL_HEADER) + " |",
            "|" + "|".join("---" if h in TEXT_CELLS else "---:" for h in KERNEL_HEADER) + "|"]
    for cells in kernel_rows(roofs, table, REPORT_MAX_ROWS):
        cells[KERNEL_CELL] = f"`{_md(cells[KERNEL_CELL])}`"
        out.append("| " + " | ".join(cells) + " |")
    if len(table) > REPORT_MAX_ROWS:
        out.append(f"\n{len(table) - REPORT_MAX_ROWS} more kernels are in the CSV table (--csv).")
    out += ["", "Full names of the kernels above:", ""]
    out += [f"{i}. `{_md(r.kernel)}`" for i, r in enumerate(table.head(REPORT_MAX_ROWS).itertuples(), 1)]
    out += ["", "## Warnings", ""]
    out += [f"- {_md(w)}" for w in warnings] or ["- none"]
    return "\n".join(out) + "\n"

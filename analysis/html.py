"""The roofline and what-if pages (analysis.roofline --html, analysis.whatif --html), rendered by common.html.

roofline_section turns an analysis.figure.Roofline (the same roofs, ridges, points, label texts, colours,
legend and honesty notes as the PNG of analysis.plot) into a chart section; chart_lines and chart_ridges turn
analysis.figure's roofs and ridges into the chart's, for every page with roofs (analysis.llm.html too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from analysis.figure import NO_FLOPS_NAME, ROWS, Roofline
from analysis.roofline import ALGORITHMIC, NO_FLOPS, Roofs, seconds, si
from analysis.roofline.report import KERNEL_HEADER, kernel_rows, profile_line, timeline_line
from common.html import (
    chart_section,
    count_text,
    finite_number,
    frame_table,
    notes_section,
    page,
    table_section,
    table_spec,
)


def chart_lines(lines) -> list[dict]:
    return [{"gid": ln.gid, "x": list(ln.x), "y": list(ln.y), "color": ln.color, "width": ln.width,
             "datasheet": ln.datasheet, "dash": ln.datasheet, "slope": ln.slope, "label": ln.label} for ln in lines]


def chart_ridges(ridges) -> list[dict]:
    return [{"key": r.key, "x": r.x, "y": r.y, "color": r.color, "label": r.label} for r in ridges]


def _legend(entries) -> list[dict]:
    return [{"label": e.label, "kind": e.kind, "color": e.color, "shape": e.shape, "filter": e.filter}
            for e in entries]


def roofline_section(fig: Roofline, roofs: Roofs, *, sid: str = "roofline", notes: Sequence[str] = ()) -> dict:
    """The roofline `fig` (analysis.figure.roofline) with its table: every row of fig.table (also those not on
    the plot), judged against `roofs`."""
    table = fig.table
    position = {label: i for i, label in enumerate(table.index)}
    heading, *subtitle = fig.title
    app = fig.application
    # a label's row, by its point (the same numbers of the same table), so that a legend filter hides it too
    at = {(x, y): position[r] for m in fig.marks for r, x, y in zip(m.rows, m.x, m.y)}
    return chart_section(
        sid, heading, subtitle=subtitle, warning=fig.warning, x_range=fig.x_range, y_range=fig.y_range,
        xlabel=fig.xlabel, ylabel=fig.ylabel, y_unit="FLOP/s", lines=chart_lines(fig.roofs),
        ridges=chart_ridges(fig.ridges),
        marks=[{"gid": m.gid, "filter": m.precision, "hollow": m.hollow, "color": m.color, "shape": m.shape,
                "points": [[position[r], x, y, a] for r, x, y, a in zip(m.rows, m.x, m.y, m.area)]}
               for m in fig.marks],
        joins=[[position[row], color, [list(p) for p in points]] for row, color, points in fig.joins],
        sweeps=[{"name": name, "points": [list(p) for p in points]} for name, points in fig.sweeps],
        application=None if app is None else {"x": app.x, "y": app.y, "text": app.text, "radius": app.radius},
        labels=[{"x": lb.x, "y": lb.y, "text": lb.text, "radius": lb.radius, "row": at.get((lb.x, lb.y))}
                for lb in fig.labels],
        legend_title=fig.legend_title, legend=_legend(fig.legend), notes=[fig.not_drawn, *notes],
        filters=[p if isinstance(p, str) else None for p in table["precision"]], table=_rows(roofs, table))


def roofline_page(fig: Roofline, roofs: Roofs, *, warnings: Sequence[str] = ()) -> str:
    """analysis.roofline --html: the roofline and its table, then every warning of the run."""
    return page(f"Roofline: {roofs.device}", [roofline_section(fig, roofs), budget_section(fig),
                               notes_section("warnings", "Warnings", warnings)])


def budget_section(fig: Roofline) -> dict:
    """All of the kernel time of `fig` by class and cause (analysis.roofline.budget), with what would place the
    rest: its bar and its table."""
    bar = [{"label": s.label, "share": s.share, "color": s.color} for s in fig.budget]
    return table_section("budget", "Time budget: all of the kernel time", bar=bar, table=frame_table(fig.budget_rows, [
        ("class", "class", None), ("cause", "cause", None), ("time_s", "time", seconds),
        ("share", "share", lambda v: f"{v:.1%}"), ("remedy", "what would place it", None)]),
        notes=[line for line in (timeline_line(fig.table),) if line])


def whatif_page(table: pd.DataFrame, totals: pd.DataFrame, gpus: Sequence[Roofs], *,
                warnings: Sequence[str] = ()) -> str:
    """analysis.whatif --html: the totals per GPU (analysis.whatif.whatif_totals), every kernel on every GPU
    (whatif_table), where each GPU's roofs and the profile come from, and the warnings."""
    speedup = (lambda v: f"{v:.2f}x")
    left_out = totals.attrs.get("left_out", 0)
    provenance = [f"{g.label}: {g.provenance}" for g in gpus] + [profile_line(totals.attrs.get("gpus", []))]
    return page("What if: these kernels on other GPUs", [
        table_section("totals", "Totals per GPU (the kernels judged on every GPU)", frame_table(totals, [
            ("gpu", "GPU", None), ("kernels", "kernels", count_text), ("time_s", "measured", seconds),
            ("time_at_roof_s", "at roof", seconds), ("time_at_efficiency_s", "at current efficiency", seconds),
            ("speedup", "speedup", speedup)]),
            subtitle=provenance, warning=any(not g.measured for g in gpus),
            notes=[f"{left_out} kernel(s) left out of the totals: not judged on every GPU (see the warnings)"]
            if left_out else []),
        table_section("kernels", "Every kernel on every GPU", frame_table(table, [
            ("kernel", "kernel", None), ("gpu", "GPU", None), ("precision", "precision", None),
            ("bound", "bound", None), ("time_s", "measured", seconds), ("pct_of_roof", "% of roof at home",
                                                                        lambda v: f"{v:.1f}%"),
            ("time_at_roof_s", "at roof", seconds), ("time_at_efficiency_s", "at current efficiency", seconds),
            ("speedup", "speedup", speedup)]),
            notes=["A projection with the same FLOPs and bytes, not a prediction: caches, occupancy and the "
                   "kernels libraries choose differ between GPUs."]),
        notes_section("warnings", "Warnings", warnings)])


def _rows(roofs: Roofs, table: pd.DataFrame) -> dict:
    """The table of every row, in the formatting of the Markdown report (analysis.roofline.report.kernel_rows), the
    whole kernel name first."""
    cells = kernel_rows(roofs, table)
    col = {h: i for i, h in enumerate(KERNEL_HEADER)}
    columns = [(ROWS[table.attrs.get("by", "kernel")], False), ("launches", True), ("time", True), ("share", True),
               ("precision", False), ("bound", False), ("AI (FLOP/B)", True), ("achieved", True), ("roof", True),
               ("% of roof", True), ("FLOPs", True), ("bytes", True), ("at roof", True), ("saved", True)]
    rows = []
    # records, not iterrows: each row of iterrows deep-copies table.attrs (thousands of warnings on a trace)
    for c, k in zip(cells, table.to_dict("records")):
        no_flops = k["precision"] == NO_FLOPS
        achieved = (k["bytes"] / k["time_s"] if k["time_s"] > 0 else math.nan) if no_flops else k["flop_per_s"]
        row = [(str(k["kernel"]), str(k["kernel"])),
               (count_text(k["launches"]), k["launches"]),
               (c[col["time"]], k["time_s"]), (c[col["share"]], k["share"]),
               (NO_FLOPS_NAME if no_flops else c[col["precision"]], c[col["precision"]]),
               (c[col["bound"]], c[col["bound"]]),
               (c[col["AI (FLOP/B)"]], k["ai"]), (c[col["achieved"]], achieved),
               (c[col["roof"]], roofs.bandwidth(k["level"]).value if no_flops and c[col["roof"]] else
                k["roof_flop_per_s"]),
               (c[col["% of roof"]], k["pct_of_roof"]),
               (_known(si, k["flops"], "FLOP"), k["flops"]),
               (_known(si, k["bytes"], "B") + _bytes_kind(k) if finite_number(k["bytes"]) else "", k["bytes"]),
               (c[col["at roof"]], k["time_at_roof_s"]), (c[col["saved"]], k["time_saved_s"])]
        rows.append(row)
    return table_spec(columns, rows)


def _bytes_kind(k) -> str:
    """Whose bytes a row's are: its level's counted ones, algorithmic (its operator's inputs + outputs) or a
    collective's bus bytes over the link."""
    if k.get("bytes_kind") in (ALGORITHMIC, "bus"):
        return f" ({k['bytes_kind']})"
    return f" ({k['level']})" if isinstance(k["level"], str) else ""


def _known(fmt, value, unit) -> str:
    return fmt(float(value), unit) if finite_number(value) else ""

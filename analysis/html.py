"""Self-contained HTML reports: one file that opens in any browser, offline, and asks nothing of the network.

One page skeleton (`page`) holds pluggable sections, drawn in the browser by one small script
(analysis/report.js) and styled by one sheet (analysis/report.css), both inlined:
- "roofline": the log-log roofline of an analysis.figure.Roofline (the same roofs, ridges, points, label texts,
  colours, legend and honesty notes as the PNG of analysis.plot), every kernel a point with its whole name,
  numbers and context on hover, the legend's precisions as filters, zoom (wheel) and pan (drag), linked to a
  sortable, searchable table of every row (selecting a row marks its point, clicking a point its row);
- "table": a sortable, searchable table; "notes": a heading over a list of lines (warnings).

The data travels as JSON in a <script type="application/json"> with every "<", ">" and "&" escaped, so no text
in it (kernel names come from profiles and may hold anything) can end the script or become markup; the script
puts every text into the page as text, never as HTML. A Content-Security-Policy forbids every fetch.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources

import pandas as pd

from analysis.figure import NO_FLOPS_NAME, ROWS, Roofline
from analysis.roofline import KERNEL_HEADER, NO_FLOPS, Roofs, kernel_rows, si

# no resource of any kind may be fetched: inline scripts and styles only, pictures only as data: URLs
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
# what a profile may say of a kernel beyond its numbers (analysis.readers.contract META_COLUMNS), shown when known
CONTEXT_COLUMNS = {"op": "op", "module": "module", "nvtx": "NVTX range"}

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head><body>
<svg id="svg-ns" width="0" height="0" aria-hidden="true"></svg>
<main id="report"><noscript>This report draws itself with JavaScript; enable it to see the figures.</noscript></main>
<script type="application/json" id="report-data">{data}</script>
<script>{js}</script>
</body></html>
"""


def page(title: str, sections: Sequence[Mapping]) -> str:
    """The HTML document of `sections` (made by roofline_section, table_section, notes_section) under `title`."""
    data = json.dumps({"title": title, "sections": [_finite(s) for s in sections]}, ensure_ascii=False,
                      allow_nan=False, separators=(",", ":"))
    # "<", ">" and "&" only occur inside JSON strings, where \u escapes mean the same characters
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    here = resources.files("analysis")
    return PAGE.format(csp=CSP, title=html.escape(title), data=data, css=(here / "report.css").read_text("utf-8"),
                       js=(here / "report.js").read_text("utf-8"))


def table_spec(columns: Sequence[tuple[str, bool]], rows: Sequence[Sequence[tuple[str, object]]]) -> dict:
    """A table for the page: columns (label, numeric); rows of cells (text shown, key sorted by: a number, a
    string, or None for unknown, sorted last)."""
    return {"columns": [{"label": label, "numeric": numeric} for label, numeric in columns],
            "rows": [[[text, _key(key)] for text, key in row] for row in rows]}


def table_section(sid: str, heading: str, table: dict, *, subtitle: Sequence[str] = (), notes: Sequence[str] = (),
                  warning: bool = False) -> dict:
    return {"kind": "table", "id": sid, "heading": heading, "subtitle": list(subtitle), "notes": list(notes),
            "warning": warning, "table": table}


def notes_section(sid: str, heading: str, items: Sequence[str]) -> dict:
    return {"kind": "notes", "id": sid, "heading": heading, "items": list(items)}


def roofline_section(fig: Roofline, roofs: Roofs, *, kernels: pd.DataFrame | None = None, sid: str = "roofline",
                     notes: Sequence[str] = ()) -> dict:
    """The roofline `fig` (analysis.figure.roofline) with its table: every row of fig.table (also those not on
    the plot), judged against `roofs`; `kernels`: the kernel table fig.table was judged from, for each row's op,
    module and NVTX range where the profile knows them."""
    table = fig.table
    position = {label: i for i, label in enumerate(table.index)}
    heading, *subtitle = fig.title
    rows, facts = _rows(roofs, table, kernels)
    return {
        "kind": "roofline", "id": sid, "heading": heading, "subtitle": subtitle, "warning": fig.warning,
        "x_range": list(fig.x_range), "y_range": list(fig.y_range), "xlabel": fig.xlabel, "ylabel": fig.ylabel,
        "y_unit": "FLOP/s",
        "roofs": [{"gid": ln.gid, "x": list(ln.x), "y": list(ln.y), "color": ln.color, "width": ln.width,
                   "datasheet": ln.datasheet, "slope": ln.slope, "label": ln.label} for ln in fig.roofs],
        "ridges": [{"key": r.key, "x": r.x, "y": r.y, "color": r.color, "label": r.label} for r in fig.ridges],
        "marks": [{"gid": m.gid, "filter": m.precision, "hollow": m.hollow, "color": m.color, "shape": m.shape,
                   "points": [[position[r], x, y, a] for r, x, y, a in zip(m.rows, m.x, m.y, m.area)]}
                  for m in fig.marks],
        "joins": [[position[row], color, [list(p) for p in points]] for row, color, points in fig.joins],
        "sweeps": [{"name": name, "points": [list(p) for p in points]} for name, points in fig.sweeps],
        "application": None if fig.application is None else {
            "x": fig.application.x, "y": fig.application.y, "text": fig.application.text,
            "radius": fig.application.radius},
        "labels": [{"x": lb.x, "y": lb.y, "text": lb.text, "radius": lb.radius} for lb in fig.labels],
        "legend_title": fig.legend_title,
        "legend": [{"label": e.label, "kind": e.kind, "color": e.color, "shape": e.shape, "filter": e.filter}
                   for e in fig.legend],
        "notes": [n for n in (fig.not_drawn, *notes) if n],
        "rows": [{"name": str(k["kernel"]), "filter": k["precision"] if isinstance(k["precision"], str) else None,
                  "facts": f} for (_, k), f in zip(table.iterrows(), facts)],
        "table": rows,
    }


def roofline_page(fig: Roofline, roofs: Roofs, *, kernels: pd.DataFrame | None = None,
                  warnings: Sequence[str] = ()) -> str:
    """analysis.roofline --html: the roofline and its table, then every warning of the run."""
    return page(f"Roofline: {roofs.device}", [roofline_section(fig, roofs, kernels=kernels),
                               notes_section("warnings", "Warnings", warnings)])


def _rows(roofs: Roofs, table: pd.DataFrame, kernels: pd.DataFrame | None) -> tuple[dict, list]:
    """The table of every row and each row's tooltip facts (label, text), in the formatting of the Markdown
    report (analysis.roofline.kernel_rows), the whole kernel name first."""
    cells = kernel_rows(roofs, table)
    col = {h: i for i, h in enumerate(KERNEL_HEADER)}
    context = [c for c in CONTEXT_COLUMNS if kernels is not None and c in kernels
               and kernels[c].reindex(table.index).notna().any()]
    columns = [(ROWS[table.attrs.get("by", "kernel")], False), ("launches", True), ("time", True), ("share", True), ("precision", False),
               ("bound", False), ("AI (FLOP/B)", True), ("achieved", True), ("roof", True), ("% of roof", True),
               ("FLOPs", True), ("bytes", True), ("at roof", True), ("saved", True),
               *((CONTEXT_COLUMNS[c], False) for c in context)]
    rows, facts = [], []
    for c, (label, k) in zip(cells, table.iterrows()):
        no_flops = k["precision"] == NO_FLOPS
        achieved = k["bytes"] / k["time_s"] if no_flops else k["flop_per_s"]
        meta = {c_: kernels.at[label, c_] for c_ in context}
        row = [(str(k["kernel"]), str(k["kernel"])),
               (_count(k["launches"]), k["launches"]),
               (c[col["time"]], k["time_s"]), (c[col["share"]], k["share"]),
               (NO_FLOPS_NAME if no_flops else c[col["precision"]], c[col["precision"]]),
               (c[col["bound"]], c[col["bound"]]),
               (c[col["AI (FLOP/B)"]], k["ai"]), (c[col["achieved"]], achieved),
               (c[col["roof"]], roofs.bandwidth(k["level"]).value if no_flops and c[col["roof"]] else
                k["roof_flop_per_s"]),
               (c[col["% of roof"]], k["pct_of_roof"]),
               (_known(si, k["flops"], "FLOP"), k["flops"]),
               (_known(si, k["bytes"], "B") + (f" ({k['level']})" if isinstance(k["level"], str) else "")
                if _finite_number(k["bytes"]) else "", k["bytes"]),
               (c[col["at roof"]], k["time_at_roof_s"]), (c[col["saved"]], k["time_saved_s"]),
               *((_text(meta[c_]), _text(meta[c_])) for c_ in context)]
        rows.append(row)
        named = [(h, text) for (h, _), (text, _) in zip(columns, row)][1:]
        facts.append([(h, text or "unknown") for h, text in named])
    return table_spec(columns, rows), facts


def _count(value) -> str:
    return f"{int(value):,}" if _finite_number(value) else ""


def _known(fmt, value, unit) -> str:
    return fmt(float(value), unit) if _finite_number(value) else ""


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _finite_number(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _key(value):
    """A sort key for the page: a finite number, a string, or None (unknown)."""
    if isinstance(value, str):
        return value
    return float(value) if _finite_number(value) else None


def _finite(obj):
    """`obj` with every NaN or infinity (unknown in the data) as None, numpy scalars as Python numbers."""
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, (bool, str)) or obj is None:
        return obj
    if hasattr(obj, "item"):  # a numpy scalar
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    return obj


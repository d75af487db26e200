"""Self-contained HTML reports: one file that opens in any browser, offline, and asks nothing of the network.

One page skeleton (`page`) holds pluggable sections, drawn in the browser by one small script
(common/report.js) and styled by one sheet (common/report.css), both inlined:
- "chart" (chart_section): a log-log chart, such as the roofline of an analysis.figure.Roofline (the same
  roofs, ridges, points, label texts, colours, legend and honesty notes as the PNG of analysis.plot): every
  point a row of a sortable, searchable table, its cells (the whole kernel name first) on hover; the legend's
  keys as filters; zoom (wheel) and pan (drag); selecting a row marks its point, clicking a point its row;
- "strip" (strip_section): dots on one axis, a row per category (a ceiling), outliers named;
- "table": a sortable, searchable table; "notes": a heading over a list of lines (warnings).

The renderer knows figures, not domains: each command builds its sections (analysis.html for the roofline and
what-if pages, analysis.llm.html, ceilings.compare, ceilings.fleet) and hands them to `page`.

The data travels as JSON in a <script type="application/json"> with every "<", ">" and "&" escaped, so no text
in it (kernel names come from profiles and may hold anything) can end the script or become markup; the script
puts every text into the page as text, never as HTML. A Content-Security-Policy forbids every fetch.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING

from .atomic import plain

if TYPE_CHECKING:  # only annotations: a command that imports the renderer does not pay for pandas
    import pandas as pd

# no resource of any kind may be fetched: inline scripts and styles only, pictures only as data: URLs
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

# matplotlib's "tab:" colours (the default cycle) as CSS: series of bars and dots, in this order
TAB10 = {"blue": "#1f77b4", "orange": "#ff7f0e", "green": "#2ca02c", "red": "#d62728", "purple": "#9467bd",
         "brown": "#8c564b", "pink": "#e377c2", "gray": "#7f7f7f", "olive": "#bcbd22", "cyan": "#17becf"}
SERIES_COLORS = tuple(TAB10.values())
# significant digits of the numbers in a page's data (texts carry the shown figures): a smaller file
FLOAT_DIGITS = 7

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
    """The HTML document of `sections` (made by the *_section functions) under `title`."""
    data = json.dumps({"title": title, "sections": [plain(s, FLOAT_DIGITS) for s in sections]}, ensure_ascii=False,
                      allow_nan=False, separators=(",", ":"))
    # "<", ">" and "&" only occur inside JSON strings, where \u escapes mean the same characters
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    here = resources.files("common")
    return PAGE.format(csp=CSP, title=html.escape(title), data=data, css=(here / "report.css").read_text("utf-8"),
                       js=(here / "report.js").read_text("utf-8"))


def table_spec(columns: Sequence[tuple[str, bool]], rows: Sequence[Sequence[tuple[str, object]]]) -> dict:
    """A table for the page: columns (label, numeric); rows of cells (text shown, key sorted by: a number, a
    string, or None for unknown, sorted last). A chart's tooltip of a row is its cells: the first one is the
    name (whole), the others are labelled by their column."""
    # a cell is [text, key], or [text] where the text is its own key (most text columns): half the size
    return {"columns": [{"label": label, "numeric": numeric} for label, numeric in columns],
            "rows": [[[text] if key == text else [text, _key(key)] for text, key in row] for row in rows]}


def frame_table(frame: pd.DataFrame, columns: Sequence[tuple[str, str, Callable | None]]) -> dict:
    """A table of `frame`'s rows: per (column, label, fmt), the cell fmt(value) sorted by the value (fmt None:
    a text column); a missing value is an empty cell, sorted last."""
    rows = [[((fmt(v) if fmt else str(v)) if _known_value(v) else "", v if _known_value(v) else None)
             for v, (_, _, fmt) in zip(values, columns)]
            for values in frame[[c for c, _, _ in columns]].itertuples(index=False)]
    return table_spec([(label, fmt is not None) for _, label, fmt in columns], rows)


def table_section(sid: str, heading: str, table: dict, *, subtitle: Sequence[str] = (), notes: Sequence[str] = (),
                  warning: bool = False, bar: Sequence[Mapping] = ()) -> dict:
    """A table; `bar`: shares of a whole drawn above it as one stacked bar, segments {"label", "share" (0 to 1),
    "color" (CSS)} in order, each named with its share in a key."""
    return {"kind": "table", "id": sid, "heading": heading, "subtitle": list(subtitle), "notes": list(notes),
            "warning": warning, "table": table, "bar": list(bar)}


def strip_section(sid: str, heading: str, rows: Sequence[Mapping], series: Sequence[tuple[str, str]], *,
                  xlabel: str, log: bool = False, unit: str = "", threshold: float | None = None,
                  baseline: float | None = None,
                  subtitle: Sequence[str] = (), notes: Sequence[str] = (), table: dict | None = None,
                  warning: bool = False, dodge: bool = False) -> dict:
    """Dots on one axis, a row per category: rows of {"label", "points": [(value, series index, name,
    facts [(label, text)], outlier label or None)]}; series (name, CSS colour); a dashed line at `threshold`,
    a grey one at `baseline`;
    `dodge`: each series drawn a little apart in its row (equal values of two series both show)."""
    return {"kind": "strip", "id": sid, "heading": heading, "subtitle": list(subtitle), "notes": list(notes),
            "warning": warning, "xlabel": xlabel, "log": log, "unit": unit, "threshold": threshold,
            "baseline": baseline, "dodge": dodge, "series": [{"name": n, "color": c} for n, c in series],
            "rows": list(rows), "table": table}


def notes_section(sid: str, heading: str, items: Sequence[str]) -> dict:
    return {"kind": "notes", "id": sid, "heading": heading, "items": list(items)}


def chart_section(sid: str, heading: str, *, x_range, y_range, xlabel: str, ylabel: str, y_unit: str,
                  lines: Sequence[Mapping] = (), ridges: Sequence[Mapping] = (), marks: Sequence[Mapping] = (),
                  joins: Sequence = (), filters: Sequence[str | None] = (), legend: Sequence[Mapping] = (),
                  legend_title: str = "", table: dict | None = None, subtitle: Sequence[str] = (),
                  notes: Sequence[str] = (), labels: Sequence[Mapping] = (), sweeps: Sequence[Mapping] = (),
                  application: Mapping | None = None, warning: bool = False) -> dict:
    """A log-log chart (the roofline's, and any other): lines {gid, x, y, color, width, datasheet, dash, slope,
    label}; ridges {key, x, y, color, label}; marks {gid, filter, hollow, color, shape, points [[row, x, y,
    area]]}, a point's row being its row of `table` (whose cells its tooltip shows); joins [row, color, [[x, y]
    ...]]; labels {x, y, text, radius, row}; filters: each table row's filter (a legend key with that filter
    hides its marks, joins and labels); legend {label, kind, color, shape, filter}."""
    return {"kind": "chart", "id": sid, "heading": heading, "subtitle": list(subtitle), "warning": warning,
            "x_range": list(x_range), "y_range": list(y_range), "xlabel": xlabel, "ylabel": ylabel, "y_unit": y_unit,
            "roofs": list(lines), "ridges": list(ridges), "marks": list(marks), "joins": list(joins),
            "sweeps": list(sweeps), "application": application, "labels": list(labels),
            "legend_title": legend_title, "legend": list(legend), "notes": [n for n in notes if n],
            "filters": list(filters), "table": table}


def _known_value(value) -> bool:
    return isinstance(value, str) or finite_number(value)


def count_text(value) -> str:
    """A table cell of a count (launches, a batch): 1,024; empty when unknown."""
    return f"{int(value):,}" if finite_number(value) else ""


def cell_text(value) -> str:
    """A table cell of an optional text (a UUID, say): empty when None or NaN (pandas' missing)."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def finite_number(value) -> bool:
    """Whether `value` is a known number (not None, NaN, infinite or a text): what a cell shows a figure of."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _key(value):
    """A sort key for the page: a finite number, a string, or None (unknown)."""
    if isinstance(value, str):
        return value
    return float(value) if finite_number(value) else None

"""Self-contained HTML reports: one file that opens in any browser, offline, and asks nothing of the network.

One page skeleton (`page`) holds pluggable sections, drawn in the browser by one small script
(analysis/report.js) and styled by one sheet (analysis/report.css), both inlined:
- "chart" (chart_section): a log-log chart, such as the roofline of an analysis.figure.Roofline (the same
  roofs, ridges, points, label texts, colours, legend and honesty notes as the PNG of analysis.plot): every
  point a row of a sortable, searchable table, its cells (the whole kernel name first) on hover; the legend's
  keys as filters; zoom (wheel) and pan (drag); selecting a row marks its point, clicking a point its row;
- "strip" (strip_section): dots on one axis, a row per category (a ceiling), outliers named;
- "table": a sortable, searchable table; "notes": a heading over a list of lines (warnings).

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

import pandas as pd

from analysis.figure import NO_FLOPS_NAME, ROWS, Roofline
from analysis.roofline import KERNEL_HEADER, NO_FLOPS, Roofs, kernel_rows, profile_line, seconds, si

# no resource of any kind may be fetched: inline scripts and styles only, pictures only as data: URLs
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

# matplotlib's "tab:" colours (the default cycle) as CSS: series of bars and dots, in this order
TAB10 = {"blue": "#1f77b4", "orange": "#ff7f0e", "green": "#2ca02c", "red": "#d62728", "purple": "#9467bd",
         "brown": "#8c564b", "pink": "#e377c2", "gray": "#7f7f7f", "olive": "#bcbd22", "cyan": "#17becf"}
SERIES_COLORS = tuple(TAB10.values())
# significant digits of the numbers in a page's data (texts carry the shown figures): a smaller file
FLOAT_DIGITS = 7
SWEEP_MARGIN = 1.5  # the batch sweep's axis reaches this factor beyond its smallest and largest batch

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
    data = json.dumps({"title": title, "sections": [_finite(s) for s in sections]}, ensure_ascii=False,
                      allow_nan=False, separators=(",", ":"))
    # "<", ">" and "&" only occur inside JSON strings, where \u escapes mean the same characters
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    here = resources.files("analysis")
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
                  warning: bool = False) -> dict:
    return {"kind": "table", "id": sid, "heading": heading, "subtitle": list(subtitle), "notes": list(notes),
            "warning": warning, "table": table}


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


def _lines(lines) -> list[dict]:
    return [{"gid": ln.gid, "x": list(ln.x), "y": list(ln.y), "color": ln.color, "width": ln.width,
             "datasheet": ln.datasheet, "dash": ln.datasheet, "slope": ln.slope, "label": ln.label} for ln in lines]


def _ridges(ridges) -> list[dict]:
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
        xlabel=fig.xlabel, ylabel=fig.ylabel, y_unit="FLOP/s", lines=_lines(fig.roofs), ridges=_ridges(fig.ridges),
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
    return page(f"Roofline: {roofs.device}", [roofline_section(fig, roofs),
                               notes_section("warnings", "Warnings", warnings)])


def whatif_page(table: pd.DataFrame, totals: pd.DataFrame, gpus: Sequence[Roofs], *,
                warnings: Sequence[str] = ()) -> str:
    """analysis.whatif --html: the totals per GPU (analysis.whatif.whatif_totals), every kernel on every GPU
    (whatif_table), where each GPU's roofs and the profile come from, and the warnings."""
    speedup = (lambda v: f"{v:.2f}x")
    left_out = totals.attrs.get("left_out", 0)
    provenance = [f"{g.label}: {g.provenance}" for g in gpus] + [profile_line(totals.attrs.get("gpus", []))]
    return page("What if: these kernels on other GPUs", [
        table_section("totals", "Totals per GPU (the kernels judged on every GPU)", frame_table(totals, [
            ("gpu", "GPU", None), ("kernels", "kernels", _count), ("time_s", "measured", seconds),
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


def compare_page(table: pd.DataFrame) -> str:
    """ceilings.compare --html: per panel (bandwidth, compute) a row per ceiling, a dot per roofs file and
    datasheet (ceilings.compare.compare_table), on a log axis; then the whole table."""
    from ceilings.compare import DISPLAY, SIMULATED_MARK, VERSUS_FIRST, number_columns, panels, value_columns
    from kernels.base import relative

    columns = value_columns(table)
    series = [(c, SERIES_COLORS[i % len(SERIES_COLORS)]) for i, c in enumerate(columns)]
    first = columns[0]
    sections = []
    for unit, title in panels(table):
        rows = []
        scale, shown = DISPLAY[unit]
        for name, r in table[table["unit"] == unit].iterrows():
            versus = _finite_number(r[first]) and r[first]
            points = [(r[c], i, f"{name}: {c}", [("value", f"{r[c] / scale:.4g} {shown}")] + (
                [("vs the first", f"{relative(r['kind'], r[c], r[first]):.2f}x")] if c != first and versus else []),
                None) for i, c in enumerate(columns) if _finite_number(r[c]) and r[c] > 0]
            if points:
                rows.append({"label": name, "points": points})
        if rows:
            sections.append(strip_section(f"compare-{unit}", title, rows, series, xlabel=unit, log=True, unit=unit,
                                          dodge=True))
    numbers = number_columns(table)
    fmt = {c: (lambda v: f"{v:.2f}x") if c.endswith(VERSUS_FIRST) else None for c in numbers}
    cells = []
    for name, r in table.iterrows():
        scale, shown = DISPLAY[r["unit"]]
        cells.append([(name, name), (shown, shown)] + [
            ((fmt[c](r[c]) if fmt[c] else f"{r[c] / scale:.4g}") if _finite_number(r[c]) else "",
             r[c] if _finite_number(r[c]) else None) for c in numbers])
    sections.append(table_section("table", "Every ceiling", table_spec(
        [("ceiling", False), ("unit", False), *((c, True) for c in numbers)], cells),
        notes=["best valid value per ceiling name per file; datasheet columns by each ceiling's peak key"]))
    simulated = any(c.endswith(SIMULATED_MARK) for c in columns)
    title = ("SIMULATED columns (Numba's CUDA simulator: meaningless numbers): " if simulated else "") + \
        "Ceilings side by side"
    return page(title, sections)


def fleet_page(fleet) -> str:
    """ceilings.fleet --html: per judged ceiling and group, every GPU's ratio to its baseline as a dot (those
    under --min-ratio red, the lowest named host:GPU), then the outliers with their likely cause, the groups'
    notes."""
    from ceilings.fleet import (
        FAIL_COLOR,
        LABELLED_OUTLIERS,
        PASS_COLOR,
        judged_ceilings,
    )
    from ceilings.report import format_rate

    colour = lambda name: TAB10.get(name.removeprefix("tab:"), name)
    causes = {(o.gpu.path, o.ceiling): o for o in fleet.outliers}
    rows = []
    for name in judged_ceilings(fleet):
        for group in fleet.groups:
            ratios = sorted(((fleet.ratios[g.path][name], g) for g in group.gpus if name in fleet.ratios[g.path]),
                            key=lambda p: p[0])
            if not ratios:
                continue
            low = [g.path for r, g in ratios if r < fleet.min_ratio][:LABELLED_OUTLIERS]
            points = []
            for ratio, g in ratios:
                o = causes.get((g.path, name))
                facts = [("ceiling", name), ("ratio", f"{ratio:.3f}"), ("group", group.id), ("file", g.path)]
                if o is not None:
                    facts += [("value", format_rate(o.value, o.unit) if o.unit else "-"), ("reason", o.reason),
                              ("likely cause", o.cause or "-")]
                points.append((ratio, int(ratio < fleet.min_ratio), g.label, facts,
                               g.label if g.path in low else None))
            below = sum(r < fleet.min_ratio for r, _ in ratios)
            rows.append({"label": f"{name} · {group.id} ({len(ratios)} GPUs"
                                  + (f", {below} under" if below else "") + ")", "points": points})
    n = sum(len(g.gpus) for g in fleet.groups)
    failing = len({o.gpu.path for o in fleet.outliers})
    against = fleet.reference or "its group's median"
    title = (("SIMULATED (Numba simulator: numbers are meaningless): " if fleet.simulated else "")
             + f"{n} GPUs in {len(fleet.groups)} group(s), {failing} falling short")
    outliers = table_spec(
        [("host:GPU", False), ("UUID", False), ("PCI bus", False), ("group", False), ("ceiling", False),
         ("value", True), ("ratio", True), ("reason", False), ("likely cause", False), ("file", False)],
        [[(o.gpu.label, o.gpu.label), *((_text(v), _text(v)) for v in (o.gpu.uuid, o.gpu.pci_bus_id)),
          (o.group, o.group), (o.ceiling or "", o.ceiling or ""),
          (format_rate(o.value, o.unit) if o.unit and o.value is not None else "", o.value),
          (f"{o.ratio:.3f}" if o.ratio is not None else "", o.ratio), (o.reason, o.reason),
          (o.cause or "", o.cause or ""), (o.gpu.path, o.gpu.path)] for o in fleet.outliers])
    sections = [strip_section("fleet", f"Every GPU against {against}; red: under {fleet.min_ratio:g}", rows,
                              [("passes", colour(PASS_COLOR)), (f"under {fleet.min_ratio:g}", colour(FAIL_COLOR))],
                              xlabel=f"ratio to {'the reference' if fleet.reference else 'group median'}",
                              threshold=fleet.min_ratio, baseline=1.0, warning=fleet.simulated,
                              notes=[] if rows else ["no GPU could be judged: too few GPUs of each configuration; "
                                                     "give --reference"]),
                table_section("outliers", "Outliers" if fleet.outliers else "Outliers: none, every GPU passes",
                              outliers),
                notes_section("notes", "Notes", fleet.notes)]
    return page(title, sections)


def llm_page(model, results: Sequence, sweep: pd.DataFrame | None, *, warnings: Sequence[str] = ()) -> str:
    """analysis.llm --html: per GPU the model's prefill and decode ops on its roofs (as analysis.llm.plot
    draws them: op class by colour, which the legend filters, phase by shape), every op in a table; the batch
    sweep of the decode step (each GPU a line, hollow where weights and KV cache do not fit, dashed where the
    weight GEMMs turn compute-bound); a summary per GPU and the warnings."""
    from analysis.figure import NEUTRAL_COLOR, roofs_only
    from analysis.llm.plot import (
        CLASS_COLORS,
        GPU_COLORS,
        MARKER_AREA_MIN,
        MARKER_AREA_SPAN,
        PHASE_MARKERS,
        not_on_plot,
        ops_view,
    )

    pct = lambda v: f"{v * 100:.1f}%"
    sections = []
    for i, r in enumerate(results):
        ops, drawn, x_range, y_range = ops_view(r)
        # ops_view's ops keep their position in prefill + decode (one index), the table's rows
        placed = pd.concat([r.prefill, r.decode], ignore_index=True)
        placed["share"] = placed["time_s"] / placed.groupby("phase")["time_s"].transform("sum")
        placed["ai"] = placed["flops"] / placed["bytes"]
        cols = [("op", "op", None), ("phase", "phase", None), ("op_class", "op class", None),
                ("count", "count", _count), ("roof", "roof", None), ("bound", "bound", None),
                ("flops", "FLOPs", lambda v: si(v, "FLOP")), ("bytes", "bytes", lambda v: si(v, "B")),
                ("ai", "AI (FLOP/B)", lambda v: f"{v:.3g}"), ("time_s", "time", seconds), ("share", "share", pct),
                ("time_at_roof_s", "at roof", seconds), ("efficiency", "efficiency", lambda v: f"{v:.2f}"),
                ("why", "why", None)]
        table = frame_table(placed, cols)
        marks = [{"gid": f"llm:{phase}:{cls}", "filter": cls, "hollow": False, "color": CLASS_COLORS[cls],
                  "shape": PHASE_MARKERS[phase],
                  "points": [[int(j), o.ai, o.flop_per_s, MARKER_AREA_MIN + o.share * MARKER_AREA_SPAN]
                             for j, o in group.iterrows()]}
                 for (phase, cls), group in ops.groupby(["phase", "op_class"])]
        lines, ridges = roofs_only(drawn, x_range)
        legend = [{"label": c, "kind": "patch", "color": CLASS_COLORS[c], "shape": "s", "filter": c}
                  for c in CLASS_COLORS if c in set(ops["op_class"])]
        legend += [{"label": p + (" (first step)" if p == "decode" else ""), "kind": "marker",
                    "color": NEUTRAL_COLOR, "shape": PHASE_MARKERS[p], "filter": None}
                   for p in PHASE_MARKERS if p in set(ops["phase"])]
        legend.append({"label": "marker area ∝ share of its phase's time", "kind": "text", "color": NEUTRAL_COLOR,
                       "shape": "o", "filter": None})
        st = r.setup
        sections.append(chart_section(
            f"ops-{i}", f"{model.name} on {r.gpu.label}: prefill of {st.prompt} tokens, decode step at context "
            f"{st.prompt}, batch {st.batch}", subtitle=[f"roofs: {r.gpu.roofs.provenance}"],
            warning=not r.gpu.roofs.measured, x_range=x_range, y_range=y_range,
            xlabel="Arithmetic intensity (FLOP/byte, DRAM)", ylabel="Performance (FLOP/s)", y_unit="FLOP/s",
            lines=_lines(lines), ridges=_ridges(ridges), marks=marks, legend=legend, legend_title="ops (op class)",
            filters=list(placed["op_class"]), table=table,
            notes=[not_on_plot(r, ops)]))
    if sweep is not None and len(sweep):
        sections.append(_sweep_section(model, sweep, results, GPU_COLORS))
    summary = pd.DataFrame([{"gpu": r.gpu.label, "ttft": r.ttft_s, "step": r.first_step_s, "mean": r.mean_step_s,
                             "tps": r.tokens_per_s, "fits": {True: "yes", False: "no", None: "unknown"}[r.memory.fits],
                             "max_batch": r.memory.max_batch, "crossover": r.crossover_batch} for r in results])
    sections.append(table_section("summary", "Per GPU", frame_table(summary, [
        ("gpu", "GPU", None), ("ttft", "time to first token", seconds), ("step", "first decode step", seconds),
        ("mean", "time per output token", seconds), ("tps", "tokens/s", lambda v: f"{v:,.0f}"),
        ("fits", "weights + KV cache fit", None), ("max_batch", "largest batch", _count),
        ("crossover", "GEMMs compute-bound from batch", _count)])))
    sections.append(notes_section("warnings", "Warnings", warnings))
    return page(f"{model.name}: prefill and decode on the roofs", sections)


def _sweep_section(model, sweep: pd.DataFrame, results: Sequence, colors: Sequence[str]) -> dict:
    """The batch sweep (analysis.llm.place.batch_sweep) as a log-log chart: tokens/s against batch per GPU."""
    from analysis.figure import NEUTRAL_COLOR, decades, drawable

    sweep = sweep.reset_index(drop=True)
    marks, joins, lines, legend = [], [], [], []
    y = sweep["tokens_per_s"].to_numpy(dtype=float)
    y = y[drawable(y)]
    y_range = decades(min(y, default=1.0), max(y, default=1.0), 2)
    x_range = (sweep["batch"].min() / SWEEP_MARGIN, sweep["batch"].max() * SWEEP_MARGIN)  # no point on an edge
    for i, r in enumerate(results):
        color, label = colors[i % len(colors)], r.gpu.label
        rows = sweep[(sweep["gpu"] == label) & drawable(sweep["tokens_per_s"])]
        fits = rows["fits"].map(lambda f: f is not False)
        for hollow, part in ((False, rows[fits]), (True, rows[~fits])):
            if len(part):
                marks.append({"gid": f"sweep:{label}" + (":no-fit" if hollow else ""), "filter": label,
                              "hollow": hollow, "color": color, "shape": "o",
                              "points": [[int(j), float(o.batch), float(o.tokens_per_s), 30.0]
                                         for j, o in part.iterrows()]})
        if len(rows):
            joins.append([int(rows.index[0]), color, [[float(b), float(t)] for b, t in
                                                      zip(rows["batch"], rows["tokens_per_s"])]])
        c = r.crossover_batch
        if c is not None and c <= sweep["batch"].max():
            lines.append({"gid": f"crossover:{label}", "x": [c, c], "y": list(y_range), "color": color, "width": 1,
                          "datasheet": False, "dash": True, "slope": False, "label_row": len(lines),
                          "label": f"compute-bound GEMMs from batch {c}"})
        legend.append({"label": label, "kind": "marker", "color": color, "shape": "o", "filter": label})
    legend += [{"label": "weights + KV cache do not fit", "kind": "hollow", "color": NEUTRAL_COLOR, "shape": "o",
                "filter": None},
               {"label": "weight GEMMs compute-bound from here", "kind": "datasheet", "color": NEUTRAL_COLOR,
                "shape": "o", "filter": None}]
    cols = [("gpu", "GPU", None), ("batch", "batch", _count), ("step_time_s", "step time", seconds),
            ("tokens_per_s", "tokens/s", lambda v: f"{v:,.0f}"), ("gemms", "weight GEMMs", None),
            ("fits", "fits", None)]
    table = frame_table(sweep.assign(fits=sweep["fits"].map({True: "yes", False: "no", None: "unknown"})), cols)
    s = results[0].setup
    sources = "; ".join(dict.fromkeys(r.gpu.roofs.provenance for r in results))
    return chart_section(
        "sweep", f"{model.name}: decode step at context {s.prompt} ({s.weights} weights, {s.kv_cache} KV cache), "
        f"KV cache for {s.prompt + s.gen} tokens a sequence", subtitle=[f"roofs: {sources}"],
        warning=not all(r.gpu.roofs.measured for r in results), x_range=x_range, y_range=y_range,
        xlabel="batch (sequences decoded together)", ylabel="decode tokens/s (batch / step time)", y_unit="tok/s",
        lines=lines, marks=marks, joins=joins, filters=list(sweep["gpu"]), legend=legend,
        legend_title="decode on each GPU", table=table)


def _rows(roofs: Roofs, table: pd.DataFrame) -> dict:
    """The table of every row, in the formatting of the Markdown report (analysis.roofline.kernel_rows), the
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
               (c[col["at roof"]], k["time_at_roof_s"]), (c[col["saved"]], k["time_saved_s"])]
        rows.append(row)
    return table_spec(columns, rows)


def _known_value(value) -> bool:
    return isinstance(value, str) or _finite_number(value)


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
    if isinstance(obj, float):  # to FLOAT_DIGITS: positions and sort keys, not figures anyone reads
        return float(f"{obj:.{FLOAT_DIGITS}g}") if math.isfinite(obj) else None
    return obj


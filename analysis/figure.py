"""The roofline picture as data, computed once for every renderer: analysis.plot draws it with matplotlib (PNG,
SVG, PDF), analysis.html in a browser. Both draw the same points, roofs, ridges, label texts, colours, legend
and honesty notes, so a picture and a report of one run cannot disagree.

Pure computation: no matplotlib, no HTML. `roofline(...)` builds a `Roofline`; `roofs_only(...)` the roofs
without a profile (analysis.llm).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.roofline import (
    ALGORITHMIC,
    COUNTED,
    DATASHEET,
    FOREIGN_PROFILE,
    LEVELS,
    NO_FLOPS,
    PRECISIONS,
    Roofs,
    percent,
    seconds,
    si,
)
from analysis.roofline.budget import COMMUNICATION, ON_LINK, PLACED, UNPLACED, share_shown, time_budget
from analysis.roofline.links import COMMUNICATION_BOUND
from analysis.roofline.report import profile_line

PRECISION_COLORS = {"fp64": "#7b3294", "fp32": "#2166ac", "fp16": "#1b9e77", "tensor": "#d95f02",
                    NO_FLOPS: "#888888",
                    # a tensor type's own flat (Roofs.flat("tensor.bf16")), drawn by plot_roofs
                    "tensor.fp64": "#5e3c99", "tensor.tf32": "#e08214", "tensor.fp16": "#d95f02",
                    "tensor.bf16": "#b35806", "tensor.fp8": "#e7298a", "tensor.int8": "#66a61e"}
LEVEL_COLORS = {"dram": "#222222", "l2": "#6a6a6a", "l1": "#a0a0a0"}
LEVEL_MARKERS = {"dram": "o", "l2": "s", "l1": "^"}
NEUTRAL_COLOR = "#555555"  # legend keys that stand for a kind of mark, not for a precision
WARNING_COLOR = "#b2182b"
APPLICATION_COLOR = "#ffd92f"
# marker area (points^2) = MARKER_AREA_MIN + share of total time x MARKER_AREA_SPAN
MARKER_AREA_MIN = 16.0
MARKER_AREA_SPAN = 1400.0
APPLICATION_AREA = 260.0  # points^2: the application's star
# the axes extend this factor beyond the outermost ridge/kernel/sweep point
AXIS_MARGIN = 4.0
# the decades a log axis may span: matplotlib's log ticks overflow float64 well before its end (1e308) and no
# measurement comes near either bound, so a point beyond is not drawn (and counted in the note), never a crash
DRAWABLE_EXPONENTS = (-100, 100)
DATASHEET_DASH = (5, 3)  # a datasheet roof's dashes: on, off (points)
ROWS = {"kernel": "kernel", "op": "operator", "module": "module", "annotation": "range"}  # what --by made rows of
# what a profile may say of a kernel beyond its numbers (analysis.readers.contract META_COLUMNS)
NO_FLOPS_NAME = "no FLOPs"
# the time budget's bar: placed classes in strong colours, communication apart, what is not placed in greys
BUDGET_COLORS = {"compute-bound": "#d95f02", "memory-bound": "#2166ac", "latency-bound": "#1b9e77",
                 "communication": "#7b3294"}
COMMUNICATION_UNPLACED_COLOR = "#c2a5cf"
UNPLACED_GREYS = ("#8c8c8c", "#a8a8a8", "#c4c4c4", "#dcdcdc")  # its largest causes, then the rest
ALGORITHMIC_NOTE = "hollow: algorithmic bytes (AI an upper bound)"


@dataclass(frozen=True)
class Line:
    """A roof: a bandwidth slope or a compute flat, from (x0, y0) to (x1, y1) in FLOP/B and FLOP/s."""

    gid: str  # "roof:dram", "roof:fp32", "datasheet:fp32"
    key: str  # Roof.key
    x: tuple[float, float]
    y: tuple[float, float]
    color: str
    width: float
    datasheet: bool  # drawn dashed (DATASHEET_DASH)
    slope: bool  # a bandwidth roof
    value: float  # B/s or FLOP/s
    label: str  # "DRAM 3.35 TB/s", "fp32 60 TFLOP/s (fma.fp32)"


@dataclass(frozen=True)
class Ridge:
    """Where a flat meets the slope of the drawn level."""

    key: str
    x: float
    y: float
    color: str
    label: str  # "fp32 ridge 18 FLOP/B"


@dataclass(frozen=True)
class Marks:
    """One group of kernel markers: one precision, one level, counted or algorithmic bytes (hollow, since the
    intensity is then an upper bound, not a count)."""

    gid: str  # "kernels:fp32", "kernels:fp32:l2", "kernels:fp32:algorithmic"
    precision: str
    level: str
    hollow: bool
    color: str
    shape: str  # a LEVEL_MARKERS value
    rows: tuple  # the kernels' index labels in Roofline.table
    x: tuple[float, ...]
    y: tuple[float, ...]
    area: tuple[float, ...]  # points^2


@dataclass(frozen=True)
class Label:
    """A text placed next to a point by the renderer (kernels, the application)."""

    x: float
    y: float
    text: str
    radius: float  # points: the marker's, so the text starts beyond it


@dataclass(frozen=True)
class LegendEntry:
    """One key of the legend. kind: "marker", "patch" (a colour swatch), "hollow", "text" (no key), "star",
    "ridge", "datasheet", "sweep". filter: the precision its key stands for (a browser hides its kernels)."""

    label: str
    kind: str
    color: str = NEUTRAL_COLOR
    shape: str = "o"
    filter: str | None = None


@dataclass(frozen=True)
class Segment:
    """One part of the time budget's bar: its name, share of all kernel time, colour, and whether it is placed
    on the roofline."""

    label: str
    share: float
    color: str
    placed: bool


@dataclass(frozen=True)
class Roofline:
    """Everything a renderer draws: the axes, roofs, ridges, kernel markers, labels, legend and the notes that
    keep the picture honest (roofs not measured here, a profile from another GPU, algorithmic bytes)."""

    title: tuple[str, ...]  # the heading, then the roofs' provenance, then the profile's GPU
    warning: bool  # the title is a warning (roofs not measured, or a profile from another GPU)
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    xlabel: str
    level: str  # "dram", "l2", "l1" or "all"
    roofs: tuple[Line, ...]
    ridges: tuple[Ridge, ...]
    marks: tuple[Marks, ...]
    joins: tuple[tuple[object, str, tuple], ...]  # level "all": (row, colour, ((x, y), ...)) per kernel
    sweeps: tuple[tuple[str, tuple], ...]  # (name, points)
    application: Label | None
    labels: tuple[Label, ...]  # the `top` kernels by time, largest first
    not_drawn: str | None  # the kernels that cannot sit on log axes, counted
    legend: tuple[LegendEntry, ...]
    legend_title: str = "kernels (dominant precision)"
    ylabel: str = "Performance (FLOP/s)"
    budget: tuple[Segment, ...] = ()  # all of the kernel time, as one stacked bar (analysis.roofline.budget)
    budget_note: str = ""  # the bar in words, every segment with its share
    budget_rows: pd.DataFrame = field(default_factory=pd.DataFrame)  # time_budget(table): the bar as a table
    table: pd.DataFrame = field(default_factory=pd.DataFrame)  # roofline_table: the rows the markers stand for


def roofline(roofs: Roofs, table: pd.DataFrame, *, level: str = "dram", datasheet: Roofs | None = None,
             top: int = 10, sweep: bool = False) -> Roofline:
    """The roofline of `table` (analysis.roofline.roofline_table) against `roofs`: level "all" draws each kernel's
    L1, L2 and DRAM points (of the levels the roofs have), joined; `datasheet`: roofs drawn dashed; `top`: the
    kernels labelled. Kernels without FLOPs are counted in a note."""
    primary = "dram" if level == "all" else level
    # a kernel's point at a level without a roof is judged against nothing: not drawn
    levels = [lv for lv in LEVELS if roofs.bandwidth(lv)] if level == "all" else [primary]
    drawn = _drawable(table, levels)
    sweeps = tuple((s.name, s.points) for s in roofs.sweeps if s.points) if sweep else ()
    x_range, y_range = _limits(roofs, drawn, levels, primary, sweeps)
    lines = _roofs(roofs, primary, x_range, prefix="roof", datasheet=False)
    if datasheet is not None:
        lines += _roofs(datasheet, "dram", x_range, prefix="datasheet", datasheet=True)
    marks = _marks(drawn, level, levels)
    point = table.attrs.get("application")
    application = (Label(point["ai"], point["flop_per_s"], "application", math.sqrt(APPLICATION_AREA) / 2)
                   if level != "all" and point is not None and drawable([point["ai"], point["flop_per_s"]]).all()
                   else None)
    label_level = "dram" if level == "all" else primary
    labels = tuple(Label(k[f"ai_{label_level}"], k["flop_per_s"], f"{k['short_name']} ({_share(k['share'])})",
                         math.sqrt(_area(pd.Series([k["share"]]))[0]) / 2)
                   for _, k in drawn.nlargest(top, "time_s").iterrows()) if top > 0 else ()
    # what the points are: a profile of some GPU, or a prediction (analysis.predict) that ran on none
    profiled = table.attrs.get("predicted") or profile_line(table.attrs.get("gpus", []), roofs)
    foreign = profiled.startswith(FOREIGN_PROFILE)
    budget = time_budget(table)
    segments = budget_segments(budget)
    shown = share_shown(budget)
    rows = ROWS[table.attrs.get("by", "kernel")]  # what a point stands for: a kernel, an operator, ...
    return Roofline(
        title=(f"{roofs.device}: {rows}s against the roofs"
               + (f" ({shown:.0%} of the kernel time; the time budget has all of it)" if shown < 1 - 1e-9 else ""),
               f"roofs: {roofs.provenance}", profiled),
        warning=not roofs.measured or foreign, x_range=x_range, y_range=y_range,
        xlabel=f"Arithmetic intensity (FLOP/byte{', ' + primary.upper() if level != 'all' else ''})",
        level=level, roofs=lines, ridges=_ridges(roofs, primary), marks=marks, joins=_joins(drawn, level, levels),
        sweeps=sweeps, application=application, labels=labels, not_drawn=_not_drawn(table, drawn, levels),
        legend=_legend(marks, level, ridges=bool(roofs.flats), datasheet=datasheet, sweeps=bool(sweeps),
                       application=point if application else None),
        legend_title=f"{rows}s (dominant precision)",
        table=table, budget=segments, budget_note=_budget_note(segments, budget), budget_rows=budget)


def budget_segments(budget: pd.DataFrame) -> tuple[Segment, ...]:
    """The time budget as bar segments: each placed class and communication, then the largest causes of the
    unplaced time and the rest of it as one."""
    by_class = budget.groupby("class", sort=False)["share"].sum()
    out = [Segment(cls, share, BUDGET_COLORS[cls], cls in PLACED) for cls, share in by_class.items()
           if cls in PLACED]
    # communication on the interconnect's roof, then what of it is not placed, paler
    linked = budget["cause"] == ON_LINK
    communication = budget["class"] == COMMUNICATION
    for label, share, color in (("communication on the link", budget.loc[linked, "share"].sum(),
                                 BUDGET_COLORS[COMMUNICATION]),
                                ("communication not placed", budget.loc[communication & ~linked, "share"].sum(),
                                 COMMUNICATION_UNPLACED_COLOR)):
        if share > 0:
            out.append(Segment(label, share, color, False))
    unplaced = budget[budget["class"] == UNPLACED]
    named = len(UNPLACED_GREYS) - 1 if len(unplaced) > len(UNPLACED_GREYS) else len(unplaced)
    out += [Segment(r["cause"], r["share"], grey, False) for (_, r), grey in zip(unplaced.head(named).iterrows(),
                                                                                 UNPLACED_GREYS)]
    if len(unplaced) > named:
        out.append(Segment("other unplaced", unplaced["share"].iloc[named:].sum(), UNPLACED_GREYS[-1], False))
    return tuple(out)


def _budget_note(segments: Sequence[Segment], budget: pd.DataFrame) -> str:
    if not segments:
        return ""
    placed = sum(s.share for s in segments if s.placed)
    parts = [f"{s.label} {_share(s.share)}" for s in segments]
    return (f"all {seconds(budget['time_s'].sum())} of kernel time: on the roofline {_share(placed)}; "
            + ", ".join(parts))


def roofs_only(roofs: Roofs, x_range: tuple[float, float]) -> tuple[tuple[Line, ...], tuple[Ridge, ...]]:
    """The roofs without a profile over x_range (FLOP/byte against DRAM): the DRAM slope and every flat of
    `roofs.flats` (any Roofs.flat key) with its ridge point."""
    return _roofs(roofs, "dram", x_range, prefix="roof", datasheet=False), _ridges(roofs, "dram")


def _roofs(roofs: Roofs, primary: str, x_range: tuple[float, float], *, prefix: str,
           datasheet: bool) -> tuple[Line, ...]:
    """Bandwidth slopes (up to the highest flat) and compute flats (from the primary slope on)."""
    x_lo, x_hi = x_range
    top = max((r.value for r in roofs.flats), default=None)
    lines = []
    for bw in roofs.bandwidths:
        x_end = top / bw.value if top else x_hi
        width = 1.1 if datasheet else 2.2 if bw.key == primary else 1.2
        lines.append(Line(f"{prefix}:{bw.key}", bw.key, (x_lo, x_end), (bw.value * x_lo, bw.value * x_end),
                          LEVEL_COLORS[bw.key], width, datasheet, True, bw.value,
                          f"{bw.key.upper()} {si(bw.value, 'B/s')}"))
    slope = roofs.bandwidth(primary)
    for flat in roofs.flats:
        # a measured flat names its ceiling; a datasheet's says nothing the title does not (and its label fits
        # right of its ridge)
        source = "" if flat.ceiling == DATASHEET else f" ({flat.ceiling})"
        lines.append(Line(f"{prefix}:{flat.key}", flat.key, (flat.value / slope.value, x_hi), (flat.value, flat.value),
                          PRECISION_COLORS[flat.key], 1.1 if datasheet else 2.0, datasheet, False, flat.value,
                          f"{flat.key} {si(flat.value, 'FLOP/s')}{source}"))
    return tuple(lines)


def _ridges(roofs: Roofs, primary: str) -> tuple[Ridge, ...]:
    out = []
    for flat in roofs.flats:
        x = roofs.ridge(flat.key, primary)
        out.append(Ridge(flat.key, x, flat.value, PRECISION_COLORS[flat.key], f"{flat.key} ridge {x:.3g} FLOP/B"))
    return tuple(out)


def drawable(values) -> np.ndarray:
    """Which of `values` can sit on a log axis: positive, finite and within DRAWABLE_EXPONENTS."""
    v = np.asarray(values, dtype=float)
    lo, hi = DRAWABLE_EXPONENTS
    with np.errstate(invalid="ignore"):
        return (v >= 10.0**lo) & (v <= 10.0**hi)


def decades(lo: float, hi: float, margin: float = 1.0) -> tuple[float, float]:
    """Whole decades from `lo` / `margin` to `hi` x `margin`, within DRAWABLE_EXPONENTS (a value beyond, 0 or inf,
    is taken at that bound): in logarithms, so that nothing near the end of float64 overflows, and as floats
    (10 ** 400 is an int that no axis takes)."""
    e_min, e_max = DRAWABLE_EXPONENTS

    def exponent(value: float) -> float:
        return math.log10(min(max(value, 10.0**e_min), 10.0**e_max))

    return (10.0 ** max(math.floor(exponent(lo) - math.log10(margin)), e_min),
            10.0 ** min(math.ceil(exponent(hi) + math.log10(margin)), e_max))


def _drawable(table: pd.DataFrame, levels: Sequence[str], within=drawable) -> pd.DataFrame:
    """Kernels whose FLOP rate and AI at some drawn level are `within` (drawable; or any positive number)."""
    has_ai = np.zeros(len(table), dtype=bool)
    for lv in levels:
        has_ai |= within(table[f"ai_{lv}"])
    return table[within(table["flop_per_s"]) & has_ai]


def _positive(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return (v > 0) & (v < np.inf)


def _limits(roofs: Roofs, drawn: pd.DataFrame, levels, primary: str, sweeps):
    xs = [roofs.ridge(r.key, primary) for r in roofs.flats]
    ys = [r.value for r in roofs.flats]
    for lv in levels:
        xs += list(drawn[f"ai_{lv}"])
    ys += list(drawn["flop_per_s"])
    for _, points in sweeps:
        xs += [x for x, _ in points]
        ys += [y for _, y in points]
    return axes(xs, ys, roofs.bandwidth(primary).value)


def axes(xs, ys, slope: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """The x and y ranges (whole decades) of a roofline whose points, ridges and flats are at `xs` (FLOP/B) and
    `ys` (FLOP/s), those not drawable left out, under a bandwidth slope of `slope` B/s."""
    xs = np.asarray(xs, dtype=float)
    xs = xs[drawable(xs)] if drawable(xs).any() else [1.0]
    x_range = decades(min(xs), max(xs), AXIS_MARGIN)
    ys = np.asarray(ys, dtype=float)
    ys = ys[drawable(ys)]
    # without flats, kernels or sweeps the slope across the x range sets the y range; the slope must enter the
    # plot, and kernels far below every roof still show
    top = max(ys, default=slope * x_range[1])
    return x_range, decades(min(min(ys, default=top), slope * x_range[0]), top, 2)


def _area(share: pd.Series) -> np.ndarray:
    return MARKER_AREA_MIN + share.fillna(0).to_numpy(dtype=float) * MARKER_AREA_SPAN


def _marks(drawn: pd.DataFrame, level: str, levels: Sequence[str]) -> tuple[Marks, ...]:
    """One group per (precision, counted or algorithmic bytes, level) that has at least one marker, in drawing
    order."""
    out = []
    algorithmic = drawn.get("bytes_kind", pd.Series(COUNTED, index=drawn.index)) == ALGORITHMIC
    for prec in (*PRECISIONS, NO_FLOPS):
        for estimated in (False, True):
            group = drawn[(drawn["precision"] == prec) & (algorithmic == estimated)]
            for lv in levels:
                ai = group[f"ai_{lv}"].astype(float)
                sel = drawable(ai)
                if not sel.any():
                    continue
                gid = (f"kernels:{prec}" + (f":{lv}" if level == "all" else "")
                       + (f":{ALGORITHMIC}" if estimated else ""))
                out.append(Marks(gid, prec, lv, estimated, PRECISION_COLORS[prec],
                                 LEVEL_MARKERS[lv] if level == "all" else "o", tuple(group.index[sel]),
                                 tuple(ai[sel]), tuple(group["flop_per_s"][sel].astype(float)),
                                 tuple(_area(group["share"][sel]))))
    return tuple(out)


def _joins(drawn: pd.DataFrame, level: str, levels: Sequence[str]) -> tuple:
    """Level "all": each kernel's points at its levels, by intensity, to be joined by a line."""
    if level != "all":
        return ()
    return tuple((row, PRECISION_COLORS.get(k["precision"], PRECISION_COLORS[NO_FLOPS]),
                  tuple(sorted((k[f"ai_{lv}"], k["flop_per_s"]) for lv in levels if drawable(k[f"ai_{lv}"]))))
                 for row, k in zip(drawn.index, drawn.to_dict("records")))  # iterrows copies attrs per row


def _share(share: float) -> str:
    """A share of time for a label: two digits below 10 % ("0.4%"), whole percents above."""
    pct = share * 100
    return f"{pct:.0f}%" if pct >= 10 else f"{pct:.2g}%"


def _not_drawn(table: pd.DataFrame, drawn: pd.DataFrame, levels: Sequence[str]) -> str | None:
    missing = table.drop(drawn.index)
    if missing.empty:
        return None
    # of all of the kernel time, as the time budget's bar: with the launches left out before the trace began
    total = table["time_s"].sum(min_count=1) + (table.attrs.get("timeline", {}).get("early_s") or 0.0)
    no_flops = missing[missing["precision"] == NO_FLOPS]
    parts = []
    rows = ROWS[table.attrs.get("by", "kernel")]
    if len(no_flops):
        parts.append(f"{len(no_flops)} {rows}(s) without FLOPs (AI 0, memory-bound; "
                     f"{percent(no_flops['time_s'].sum(min_count=1), total)} of time)")
    collectives = missing[missing["bound"] == COMMUNICATION_BOUND]
    if len(collectives):  # judged against the interconnect, whose bytes are no FLOP's
        parts.append(f"{len(collectives)} collective {rows}(s) on the interconnect "
                     f"({percent(collectives['time_s'].sum(min_count=1), total)} of time)")
    beyond = _drawable(missing, levels, _positive)
    unknown = missing.drop(no_flops.index).drop(beyond.index).drop(collectives.index)
    if len(unknown):
        parts.append(f"{len(unknown)} {rows}(s) whose FLOPs, bytes or time are unknown "
                     f"({percent(unknown['time_s'].sum(min_count=1), total)} of time)")
    if len(beyond):
        lo, hi = DRAWABLE_EXPONENTS
        parts.append(f"{len(beyond)} {rows}(s) off the axes, 1e{lo} to 1e{hi} "
                     f"({percent(beyond['time_s'].sum(min_count=1), total)} of time)")
    return "Not on the plot: " + "; ".join(parts) + ". See the table."


def _legend(marks: Sequence[Marks], level: str, *, ridges: bool, datasheet: Roofs | None, sweeps: bool,
            application: Mapping | None) -> tuple[LegendEntry, ...]:
    """One entry per kind of marker or line drawn, none for what is not drawn."""
    precisions = [p for p in (*PRECISIONS, NO_FLOPS) if any(m.precision == p for m in marks)]
    names = [(p, p if p != NO_FLOPS else NO_FLOPS_NAME) for p in precisions]
    if level == "all":  # the shape says the level, so a precision is a colour (of its markers and joins)
        out = [LegendEntry(name, "patch", PRECISION_COLORS[p], filter=p) for p, name in names]
        out += [LegendEntry(f"{lv.upper()} intensity", "marker", shape=LEVEL_MARKERS[lv]) for lv in LEVELS
                if any(m.level == lv and not m.hollow for m in marks)]
    else:
        out = [LegendEntry(name, "marker", PRECISION_COLORS[p], filter=p) for p, name in names]
    if any(m.hollow for m in marks):
        out.append(LegendEntry(ALGORITHMIC_NOTE, "hollow"))
    if marks:
        out.append(LegendEntry("marker area ∝ share of time", "text"))
    if application:
        out.append(LegendEntry(f"application: FLOPs / {application['time_kind'].split(' (')[0]}", "star", "black"))
    if ridges:
        out.append(LegendEntry("roof ridge point", "ridge", shape="D"))
    if datasheet is not None:
        out.append(LegendEntry(f"datasheet: {datasheet.device}", "datasheet"))
    if sweeps:
        out.append(LegendEntry("measured intensity sweep", "sweep"))
    return tuple(out)

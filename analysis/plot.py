"""Drawing the roofline: functions take data (analysis.roofline.Roofs and its table) and a matplotlib `ax`.

Every artist carries a gid ("roof:dram", "roof:fp32", "roof-label:dram", "roof-label:fp32", "ridge:fp32",
"ridge-label:fp32", "datasheet:fp32", "kernels:fp32", "kernel-label", "hier:<kernel>", "sweep:<name>",
"note:not-drawn") so that notebooks and tests can find it.
matplotlib is imported inside the functions: `analysis` works without it until something is drawn.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.roofline import ALGORITHMIC, COUNTED, FOREIGN_PROFILE, LEVELS, NO_FLOPS, PRECISIONS, Roofs, percent, profile_line, si

PRECISION_COLORS = {"fp64": "#7b3294", "fp32": "#2166ac", "fp16": "#1b9e77", "tensor": "#d95f02",
                    NO_FLOPS: "#888888",
                    # a tensor type's own flat (Roofs.flat("tensor.bf16")), drawn by plot_roofs
                    "tensor.fp64": "#5e3c99", "tensor.tf32": "#e08214", "tensor.fp16": "#d95f02",
                    "tensor.bf16": "#b35806", "tensor.fp8": "#e7298a", "tensor.int8": "#66a61e"}
LEVEL_COLORS = {"dram": "#222222", "l2": "#6a6a6a", "l1": "#a0a0a0"}
LEVEL_MARKERS = {"dram": "o", "l2": "s", "l1": "^"}
# marker area (points^2) = MARKER_AREA_MIN + share of total time x MARKER_AREA_SPAN
MARKER_AREA_MIN = 16.0
MARKER_AREA_SPAN = 1400.0
FIGSIZE = (11.0, 6.5)
# the axes extend this factor beyond the outermost ridge/kernel/sweep point
AXIS_MARGIN = 4.0
FONT_SIZE = 8.5
# where a kernel's label may go: directions from the marker, tried in order at each gap (points beyond the
# marker's edge), nearest gap first
LABEL_DIRECTIONS = ((1, 0), (1, 1), (1, -1), (-1, 0), (-1, 1), (-1, -1), (0, 1), (0, -1))
LABEL_GAPS = (4, 16, 30)
# a roof label's left end, in points right of its ridge point: tried in order (nearer ones may cross the slope)
ROOF_LABEL_DX = (7, 20, 35)
# where along a slope (x / the axis' lower x limit) its label may go, tried in order
SLOPE_LABEL_AT = (1.6, 4, 10)
# labels drawn over a marker or line stay legible
LABEL_BOX = {"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.7}
# a label keeps this many pixels from other labels and markers; lines are sampled every LINE_STEP_PX
LABEL_PAD_PX = 2.0
LINE_STEP_PX = 3.0
RIDGE_MARKER_SIZE = 5  # points
APPLICATION_AREA = 260.0  # points^2: the application's star
ROWS = {"kernel": "kernel", "op": "operator", "module": "module", "annotation": "range"}  # what --by made rows of
WARNING_COLOR = "#b2182b"


def roofline_figure(roofs: Roofs, table: pd.DataFrame, **kwargs):
    """A new Figure (no pyplot, so no GUI backend) holding one roofline; kwargs go to plot_roofline."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, layout="constrained")
    FigureCanvasAgg(fig)  # a canvas that can measure text, for placing labels
    plot_roofline(fig.add_subplot(), roofs, table, **kwargs)
    return fig


def plot_roofline(ax, roofs: Roofs, table: pd.DataFrame, *, level: str = "dram", datasheet: Roofs | None = None,
                  top: int = 10, sweep: bool = False, title: bool = True) -> None:
    """Draw roofs, ridge points, kernels and (optionally) datasheet roofs and intensity sweeps on `ax`.

    table: analysis.roofline.roofline_table(...). level "all" draws each kernel's L1, L2 and DRAM points
    (of the levels the roofs have) joined by a line (hierarchical roofline); kernels without FLOPs cannot sit
    on log axes and are counted in a note instead. The legend shows exactly the markers and lines drawn.
    """
    primary = "dram" if level == "all" else level
    # a kernel's point at a level without a roof is judged against nothing: not drawn
    kernel_levels = [lv for lv in LEVELS if roofs.bandwidth(lv)] if level == "all" else [primary]
    drawn = _drawable(table, kernel_levels)
    (x_lo, x_hi), (y_lo, y_hi) = _limits(roofs, drawn, kernel_levels, primary, sweep)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    _draw_roofs(ax, roofs, primary, x_lo, x_hi, style={"linestyle": "-"}, prefix="roof")
    if datasheet is not None:
        _draw_roofs(ax, datasheet, "dram", x_lo, x_hi, prefix="datasheet",
                    style={"linestyle": (0, (5, 3)), "linewidth": 1.1, "alpha": 0.6})
    _draw_ridges(ax, roofs, primary)
    sweeps = [s for s in roofs.sweeps if s.points] if sweep else []
    for s in sweeps:
        ax.plot(*zip(*s.points), linestyle=":", marker=".", markersize=4, color="#555555", linewidth=1,
                gid=f"sweep:{s.name}", zorder=3)
    marks = _draw_kernels(ax, drawn, level, kernel_levels)
    application = table.attrs.get("application")
    application = application if _draw_application(ax, application, "dram" if level != "all" else "all") else None
    _note_not_drawn(ax, table, drawn)
    _legend(ax, marks, level, ridges=bool(roofs.flats), datasheet=datasheet, sweeps=bool(sweeps),
            application=application)

    _style_axes(ax, f"Arithmetic intensity (FLOP/byte{', ' + primary.upper() if level != 'all' else ''})")
    if title:
        profiled = profile_line(table.attrs.get("gpus", []), roofs)
        color = WARNING_COLOR if not roofs.measured or profiled.startswith(FOREIGN_PROFILE) else "black"
        ax.set_title(f"{roofs.device}: {ROWS[table.attrs.get('by', 'kernel')]}s against the roofs\n"
                     f"{_wrap('roofs: ' + roofs.provenance)}\n"
                     f"{_wrap(profiled)}", fontsize=10.5, color=color, loc="left")
    # last: label placement measures text where the layout (legend, title) has put the axes
    _place_labels(ax, roofs, primary, drawn, top, "dram" if level == "all" else primary, (x_lo, x_hi),
                  application)


def plot_roofs(ax, roofs: Roofs, x_range: tuple[float, float], y_range: tuple[float, float]) -> None:
    """The roofline without a profile: log axes over x_range x y_range (FLOP/byte against DRAM, FLOP/s), the
    DRAM slope, every flat of `roofs.flats` (any Roofs.flat key: "fp32", "tensor.bf16", ...) with its ridge
    point, and their labels, placed clear of markers already drawn with a gid starting "kernels:". For work
    other than a profile's kernels (analysis.llm): draw it first, then call this."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*x_range)
    ax.set_ylim(*y_range)
    _draw_roofs(ax, roofs, "dram", *x_range, style={"linestyle": "-"}, prefix="roof")
    _draw_ridges(ax, roofs, "dram")
    _style_axes(ax, "Arithmetic intensity (FLOP/byte, DRAM)")
    _place_labels(ax, roofs, "dram", pd.DataFrame(), 0, "dram", x_range)


def _draw_ridges(ax, roofs: Roofs, primary: str) -> None:
    for flat in roofs.flats:
        ax.plot([roofs.ridge(flat.key, primary)], [flat.value], marker="D", markersize=RIDGE_MARKER_SIZE,
                color=PRECISION_COLORS[flat.key], markeredgecolor="white", linestyle="none", zorder=4,
                gid=f"ridge:{flat.key}")


def _style_axes(ax, xlabel: str) -> None:
    from matplotlib.ticker import EngFormatter, FuncFormatter

    ax.set_xlabel(xlabel)
    ax.set_ylabel("Performance (FLOP/s)")
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s", sep=" "))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _wrap(text: str, width: int = 110) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def _drawable(table: pd.DataFrame, levels: list[str]) -> pd.DataFrame:
    """Kernels that have a positive FLOP rate and a positive, finite AI at some drawn level."""
    ok = table["flop_per_s"].gt(0)
    has_ai = pd.Series(False, index=table.index)
    for lv in levels:
        ai = table[f"ai_{lv}"]
        has_ai |= ai.gt(0) & np.isfinite(ai.astype(float))
    return table[ok & has_ai]


def _limits(roofs, drawn, levels, primary, sweep):
    xs = [roofs.ridge(r.key, primary) for r in roofs.flats]
    ys = [r.value for r in roofs.flats]
    for lv in levels:
        ai = drawn[f"ai_{lv}"].astype(float)
        xs += list(ai[np.isfinite(ai) & (ai > 0)])
    ys += list(drawn["flop_per_s"])
    if sweep:
        for s in roofs.sweeps:
            xs += [x for x, _ in s.points if x > 0]
            ys += [y for _, y in s.points if y > 0]
    xs = [x for x in xs if x and math.isfinite(x) and x > 0] or [1.0]
    x_lo = 10 ** math.floor(math.log10(min(xs) / AXIS_MARGIN))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * AXIS_MARGIN))
    slope = roofs.bandwidth(primary).value
    # without flats, kernels or sweeps the slope across the x range sets the y range
    ys = [y for y in ys if y and math.isfinite(y) and y > 0] or [slope * x_hi]
    y_hi = 10 ** math.ceil(math.log10(max(ys) * 2))
    # the slope must enter the plot; kernels far below every roof still show
    y_lo = 10 ** math.floor(math.log10(min(min(ys), slope * x_lo) / 2))
    return (x_lo, x_hi), (y_lo, y_hi)


def _draw_roofs(ax, roofs: Roofs, primary: str, x_lo: float, x_hi: float, *, prefix: str, style: dict) -> None:
    """Bandwidth slopes and compute flats (labelled by _place_labels once the layout is done)."""
    top = max((r.value for r in roofs.flats), default=None)
    for bw in roofs.bandwidths:
        x_end = top / bw.value if top else x_hi
        emphasis = bw.key == primary
        ax.plot([x_lo, x_end], [bw.value * x_lo, bw.value * x_end], color=LEVEL_COLORS[bw.key],
                linewidth=style.get("linewidth", 2.2 if emphasis else 1.2), zorder=2, gid=f"{prefix}:{bw.key}",
                **{k: v for k, v in style.items() if k != "linewidth"})
    slope = roofs.bandwidth(primary)
    for flat in roofs.flats:
        x_start = flat.value / slope.value
        ax.plot([x_start, x_hi], [flat.value, flat.value], color=PRECISION_COLORS[flat.key],
                linewidth=style.get("linewidth", 2.0), zorder=2, gid=f"{prefix}:{flat.key}",
                **{k: v for k, v in style.items() if k != "linewidth"})


def _area(share: pd.Series) -> np.ndarray:
    return MARKER_AREA_MIN + share.fillna(0).to_numpy(dtype=float) * MARKER_AREA_SPAN


def _draw_kernels(ax, drawn: pd.DataFrame, level: str, levels: list[str]) -> set[tuple[str, str]]:
    """The kernels' markers (and, for level "all", the lines joining each kernel's levels); returns the
    (precision, level) pairs that have at least one marker, for the legend."""
    if level == "all":
        for _, k in drawn.iterrows():
            pts = sorted((k[f"ai_{lv}"], k["flop_per_s"]) for lv in levels
                         if math.isfinite(k[f"ai_{lv}"]) and k[f"ai_{lv}"] > 0)
            ax.plot(*zip(*pts), color=PRECISION_COLORS.get(k["precision"], "#888888"), linewidth=0.9,
                    alpha=0.6, zorder=3, gid=f"hier:{k['kernel']}")
    marks = set()
    algorithmic = drawn.get("bytes_kind", pd.Series(COUNTED, index=drawn.index)) == ALGORITHMIC
    for prec in (*PRECISIONS, NO_FLOPS):
        for estimated in (False, True):
            group = drawn[(drawn["precision"] == prec) & (algorithmic == estimated)]
            for lv in levels:
                ai = group[f"ai_{lv}"].astype(float)
                sel = np.isfinite(ai) & (ai > 0)
                if not sel.any():
                    continue
                marks.add((prec, ALGORITHMIC if estimated else lv))
                color = PRECISION_COLORS[prec]
                # algorithmic bytes: hollow, since the point's intensity is an upper bound, not a count
                ax.scatter(ai[sel], group["flop_per_s"][sel], s=_area(group["share"][sel]),
                           c="none" if estimated else color, marker=LEVEL_MARKERS[lv] if level == "all" else "o",
                           alpha=0.8, edgecolors=color if estimated else "white",
                           linewidths=1.4 if estimated else 0.6, zorder=5,
                           gid=f"kernels:{prec}" + (f":{lv}" if level == "all" else "")
                           + (f":{ALGORITHMIC}" if estimated else ""))
    return marks


def _draw_application(ax, point: dict | None, primary: str) -> bool:
    """The whole application as one star (total FLOPs over GPU busy time), when the table has the point and
    its bytes are of the drawn level."""
    if point is None or primary != "dram" or not (point["ai"] > 0 and math.isfinite(point["ai"])):
        return False
    ax.scatter([point["ai"]], [point["flop_per_s"]], s=APPLICATION_AREA, marker="*", c="#ffd92f",
               edgecolors="black", linewidths=0.9, zorder=5.5, gid="application")  # above kernels, under labels
    return True


class _Placer:
    """Greedy label placement in display space: each label takes the first candidate position that stays
    inside the axes and overlaps no earlier label, marker or roof line; when every candidate collides, the
    one with the least overlap (text and markers first, then lines). Without a canvas that can measure text
    the first candidate is taken."""

    def __init__(self, ax):
        canvas = ax.figure.canvas
        self.renderer = canvas.get_renderer() if hasattr(canvas, "get_renderer") else None
        self.boxes: list = []  # labels and markers
        self.markers: list = []  # (x, y, box) of the kernel markers, display space
        self.points = np.empty((0, 2))  # samples along the roof lines
        if self.renderer is None:
            return
        ax.figure.draw_without_rendering()  # run the layout engine so that extents are final
        self.inside = ax.get_window_extent(self.renderer)
        self.boxes = [t.get_window_extent(self.renderer).padded(LABEL_PAD_PX) for t in ax.texts]
        px_per_pt = ax.figure.dpi / 72
        markers = [c for c in ax.collections if (c.get_gid() or "").startswith(("kernels:", "application"))]
        for c in markers:
            centers = ax.transData.transform(c.get_offsets())
            radii = np.sqrt(np.broadcast_to(c.get_sizes(), len(centers))) / 2 * px_per_pt
            self.markers += [(x, y, _square(x, y, r + LABEL_PAD_PX)) for (x, y), r in zip(centers, radii)]
        self.boxes += [box for _, _, box in self.markers]
        lines = [ln for ln in ax.lines if (ln.get_gid() or "").split(":")[0] in ("roof", "datasheet", "ridge")]
        samples = []
        for ln in lines:
            xy = ax.transData.transform(np.column_stack(ln.get_data()))
            if ln.get_marker() not in (None, "None", "none", ""):  # a ridge point
                r = ln.get_markersize() / 2 * px_per_pt
                self.boxes += [_square(x, y, r + LABEL_PAD_PX) for x, y in xy]
                continue
            for a, b in zip(xy[:-1], xy[1:]):
                n = max(2, int(np.hypot(*(b - a)) / LINE_STEP_PX) + 1)
                samples.append(a + np.linspace(0, 1, n)[:, None] * (b - a))
        self.points = np.concatenate(samples) if samples else self.points

    def place(self, make, candidates, avoid=()):
        """`make(*candidate)` draws a label; keep the best candidate's label. `avoid`: boxes (e.g. the
        label's own marker) not counted as collisions."""
        best = None
        for candidate in candidates:
            label = make(*candidate)
            if self.renderer is None:
                return label
            box = _text_box(label, self.renderer)
            cost = self._cost(box, avoid)
            if cost == (0, 0.0, 0):
                self.boxes.append(box.padded(LABEL_PAD_PX))
                return label
            if best is None or cost < best[0]:
                best = (cost, candidate)
            label.remove()
        label = make(*best[1])
        self.boxes.append(_text_box(label, self.renderer).padded(LABEL_PAD_PX))
        return label

    def _cost(self, box, avoid) -> tuple[int, float, int]:
        inside = self.inside
        outside = int(not (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0
                           and box.y1 <= inside.y1))
        overlap = 0.0
        for other in self.boxes:
            if any(other is a for a in avoid):
                continue
            w = min(box.x1, other.x1) - max(box.x0, other.x0)
            h = min(box.y1, other.y1) - max(box.y0, other.y0)
            if w > 0 and h > 0:
                overlap += w * h
        p = self.points
        crossing = int(((p[:, 0] > box.x0) & (p[:, 0] < box.x1) & (p[:, 1] > box.y0) & (p[:, 1] < box.y1)).sum())
        return outside, overlap, crossing


def _square(x: float, y: float, r: float):
    from matplotlib.transforms import Bbox

    return Bbox.from_extents(x - r, y - r, x + r, y + r)


def _text_box(label, renderer):
    """The extent of a label's text (an Annotation's own extent also covers its leader line)."""
    from matplotlib.text import Text

    label.get_window_extent(renderer)  # positions an Annotation's text
    return Text.get_window_extent(label, renderer)


def _align(dx: float, dy: float) -> dict:
    return {"ha": "left" if dx > 0 else "right" if dx < 0 else "center",
            "va": "bottom" if dy > 0 else "top" if dy < 0 else "center"}


def _place_labels(ax, roofs: Roofs, primary: str, drawn: pd.DataFrame, top: int, level: str,
                  x_range: tuple[float, float], application: dict | None = None) -> None:
    """Bandwidth labels (lower left, under their slope), roof labels (at the left end of each flat, just
    above it, else at its right end), ridge labels, then the `top` kernels by time, each clear of the
    labels, markers and roof lines placed before it."""
    x_lo, x_hi = x_range
    placer = _Placer(ax)
    for bw in roofs.bandwidths:
        def slope_label(x, dx, dy, bw=bw):
            return ax.annotate(f"{bw.key.upper()} {si(bw.value, 'B/s')}", (x, bw.value * x), xytext=(dx, dy),
                               textcoords="offset points", fontsize=FONT_SIZE, color=LEVEL_COLORS[bw.key],
                               zorder=6, gid=f"roof-label:{bw.key}", **_align(dx, dy))

        # under the slope to its right (empty at low intensity), else above it to its left
        placer.place(slope_label, [(x_lo * f, dx, dy) for dx, dy in ((6, -4), (-6, 4)) for f in SLOPE_LABEL_AT])
    for flat in roofs.flats:
        ridge = roofs.ridge(flat.key, primary)
        color = PRECISION_COLORS[flat.key]

        def roof_label(x, dx, dy, flat=flat, color=color):
            return ax.annotate(f"{flat.key} {si(flat.value, 'FLOP/s')} ({flat.ceiling})", (x, flat.value),
                               xytext=(dx, dy), textcoords="offset points", fontsize=FONT_SIZE, color=color,
                               zorder=6, gid=f"roof-label:{flat.key}", bbox=LABEL_BOX, **_align(dx, dy))

        # left end, clear of the ridge marker and of the slope rising from it, or right end; above the line,
        # else below it
        placer.place(roof_label, (*((ridge, dx, 2) for dx in ROOF_LABEL_DX), (x_hi, -4, 2),
                                  (ridge, ROOF_LABEL_DX[0], -3), (x_hi, -4, -3)))

        def ridge_label(dx, dy, flat=flat, ridge=ridge, color=color):
            return ax.annotate(f"{flat.key} ridge {ridge:.3g} FLOP/B", (ridge, flat.value), xytext=(dx, dy),
                               textcoords="offset points", fontsize=FONT_SIZE - 0.5, color=color, zorder=6,
                               gid=f"ridge-label:{flat.key}", bbox=LABEL_BOX, **_align(dx, dy))

        placer.place(ridge_label, ((-6, 4), (-6, 12), (-8, 0), (6, -4)))
    if application is not None:  # its label first: it is the point people look for
        xy, radius = (application["ai"], application["flop_per_s"]), math.sqrt(APPLICATION_AREA) / 2

        def application_label(dx, dy, xy=xy):
            return ax.annotate("application", xy, xytext=(dx, dy), textcoords="offset points", fontsize=FONT_SIZE,
                               fontweight="bold", zorder=6, gid="application-label", bbox=LABEL_BOX,
                               **_align(dx, dy))

        placer.place(application_label, [((radius + gap) * ux / math.hypot(ux, uy),
                                           (radius + gap) * uy / math.hypot(ux, uy))
                                          for gap in LABEL_GAPS for ux, uy in LABEL_DIRECTIONS])
    if top <= 0:
        return
    for _, k in drawn.nlargest(top, "time_s").iterrows():
        xy = (k[f"ai_{level}"], k["flop_per_s"])
        radius = math.sqrt(_area(pd.Series([k["share"]]))[0]) / 2  # points
        cx, cy = ax.transData.transform(xy)
        own = [box for x, y, box in placer.markers if math.hypot(x - cx, y - cy) < 1]

        def kernel_label(dx, dy, k=k, xy=xy, radius=radius):
            return ax.annotate(f"{k['short_name']} ({_share(k['share'])})", xy, xytext=(dx, dy),
                               textcoords="offset points", fontsize=FONT_SIZE, zorder=6, gid="kernel-label",
                               arrowprops={"arrowstyle": "-", "color": "0.55", "lw": 0.6, "shrinkA": 0,
                                           "shrinkB": radius},
                               bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                     "alpha": 0.7}, **_align(dx, dy))

        candidates = [((radius + gap) * ux / math.hypot(ux, uy), (radius + gap) * uy / math.hypot(ux, uy))
                      for gap in LABEL_GAPS for ux, uy in LABEL_DIRECTIONS]
        placer.place(kernel_label, candidates, avoid=own)


def _share(share: float) -> str:
    """A share of time for a label: two digits below 10 % ("0.4%"), whole percents above."""
    pct = share * 100
    return f"{pct:.0f}%" if pct >= 10 else f"{pct:.2g}%"


def _note_not_drawn(ax, table: pd.DataFrame, drawn: pd.DataFrame) -> None:
    missing = table.drop(drawn.index)
    if missing.empty:
        return
    total = table["time_s"].sum(min_count=1)
    no_flops = missing[missing["precision"] == NO_FLOPS]
    other = len(missing) - len(no_flops)
    parts = []
    rows = ROWS[table.attrs.get("by", "kernel")]
    if len(no_flops):
        parts.append(f"{len(no_flops)} {rows}(s) without FLOPs (AI 0, memory-bound; "
                     f"{percent(no_flops['time_s'].sum(min_count=1), total)} of time)")
    if other:
        unplaced = missing.drop(no_flops.index)
        parts.append(f"{other} {rows}(s) whose FLOPs, bytes or time are unknown "
                     f"({percent(unplaced['time_s'].sum(min_count=1), total)} of time)")
    ax.text(0.01, 0.01, "Not on the plot: " + "; ".join(parts) + ". See the table.", transform=ax.transAxes,
            fontsize=FONT_SIZE - 0.5, color="#555555", ha="left", va="bottom", gid="note:not-drawn")


def _legend(ax, marks: set[tuple[str, str]], level: str, *, ridges: bool, datasheet: Roofs | None,
            sweeps: bool, application: dict | None = None) -> None:
    """One entry per kind of marker or line drawn (marks: the (precision, level) pairs with markers), none for
    what is not drawn."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    def marker(color, label, shape="o"):
        return Line2D([], [], marker=shape, linestyle="none", color=color, markersize=7, label=label)

    names = [(p, p if p != NO_FLOPS else "no FLOPs") for p in (*PRECISIONS, NO_FLOPS) if any(m[0] == p for m in marks)]
    if level == "all":  # the shape says the level, so a precision is a colour (of its markers and joins)
        handles = [Patch(color=PRECISION_COLORS[p], label=name) for p, name in names]
        handles += [marker("#555555", f"{lv.upper()} intensity", LEVEL_MARKERS[lv]) for lv in LEVELS
                    if any(m[1] == lv for m in marks)]
    else:
        handles = [marker(PRECISION_COLORS[p], name) for p, name in names]
    if any(m[1] == ALGORITHMIC for m in marks):
        handles.append(Line2D([], [], marker="o", linestyle="none", markerfacecolor="none", color="#555555",
                              markersize=7, label="hollow: algorithmic bytes (AI an upper bound)"))
    if marks:
        handles.append(Line2D([], [], color="none", label="marker area ∝ share of time"))
    if application:
        handles.append(Line2D([], [], marker="*", linestyle="none", markerfacecolor="#ffd92f", color="black",
                              markersize=11, label=f"application: FLOPs / {application['time_kind'].split(' (')[0]}"))
    if ridges:
        handles.append(marker("#555555", "roof ridge point", "D"))
    if datasheet is not None:
        handles.append(Line2D([], [], color="#555555", linestyle=(0, (5, 3)), label=f"datasheet: {datasheet.device}"))
    if sweeps:
        handles.append(Line2D([], [], color="#555555", linestyle=":", marker=".", label="measured intensity sweep"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize=FONT_SIZE, title="kernels (dominant precision)", title_fontsize=FONT_SIZE)

"""Drawing the roofline: analysis.figure says what is drawn (Roofline), these functions draw it on a matplotlib `ax`.

Every artist carries a gid ("roof:dram", "roof:fp32", "roof-label:dram", "roof-label:fp32", "ridge:fp32",
"ridge-label:fp32", "datasheet:fp32", "kernels:fp32", "kernel-label", "hier:<kernel>", "sweep:<name>",
"note:not-drawn") so that notebooks and tests can find it.
matplotlib is imported inside the functions: `analysis` works without it until something is drawn.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.figure import (
    APPLICATION_AREA,
    APPLICATION_COLOR,
    BUDGET_COLORS,
    DATASHEET_DASH,
    NEUTRAL_COLOR,
    WARNING_COLOR,
    Label,
    Line,
    Ridge,
    Roofline,
    roofline,
    roofs_only,
)

FIGSIZE = (11.0, 6.5)
FONT_SIZE = 8.5
BUDGET_HEIGHT = 0.9  # inches under the roofline for the time budget's bar and its line
NOTE_WIDTH = 160  # characters a line of the note of kernels not drawn: the longest two-part note, one line
# where a kernel's label may go: directions from the marker, tried in order at each gap (points beyond the
# marker's edge), nearest gap first
LABEL_DIRECTIONS = ((1, 0), (1, 1), (1, -1), (-1, 0), (-1, 1), (-1, -1), (0, 1), (0, -1))
LABEL_GAPS = (4, 16, 30)
# a roof label's left end, in points right of its ridge point: tried in order (nearer ones may cross the slope)
ROOF_LABEL_DX = (7, 20, 35)
# a ridge label's offset (points) from its ridge point, tried in order: above left (beside the slope; further
# left, clear of a roof label that had to reach left of the ridge), higher, left, below right
RIDGE_LABEL_AT = ((-6, 4), (-14, 4), (-24, 4), (-6, 12), (-6, 20), (-8, 0), (6, -4), (6, -12))
# where along a slope (x / the axis' lower x limit) its label may go, tried in order
SLOPE_LABEL_AT = (1.6, 4, 10)
# labels drawn over a marker or line stay legible
LABEL_BOX = {"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.7}
# a label keeps this many pixels from other labels and markers; lines are sampled every LINE_STEP_PX
LABEL_PAD_PX = 2.0
LINE_STEP_PX = 3.0
RIDGE_MARKER_SIZE = 5  # points


def roofline_figure(roofs, table: pd.DataFrame, **kwargs):
    """A new Figure (no pyplot, so no GUI backend) holding one roofline; kwargs go to plot_roofline."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    data = roofline(roofs, table, **kwargs)
    width, height = FIGSIZE
    # all of the kernel time as one bar under the roofline (which shows the placed part), in height of its own
    fig = Figure(figsize=(width, height + BUDGET_HEIGHT if data.budget else height), layout="constrained")
    FigureCanvasAgg(fig)  # a canvas that can measure text, for placing labels
    if data.budget:
        ax, bar = fig.subplots(2, 1, height_ratios=(height, BUDGET_HEIGHT))
        draw_budget(bar, data)
    else:
        ax = fig.add_subplot()
    draw_roofline(ax, data)
    if data.budget:
        fit_budget_labels(bar)
    return fig


def draw_budget(ax, fig: Roofline) -> None:
    """The time budget of `fig` as one stacked bar on `ax`, 0 to 100 % of the kernel time: each segment named
    inside it, and every one, with its share, in the line under the bar. fit_budget_labels, once the figure
    holds all it will, leaves the names only where they fit."""
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.5, 0.5)
    left = 0.0
    for segment in fig.budget:
        ax.barh(0, segment.share, left=left, color=segment.color, edgecolor="white", linewidth=0.8,
                gid=f"budget:{segment.label}")
        label = ax.text(left + segment.share / 2, 0, f"{segment.label} {segment.share:.0%}", ha="center",
                        va="center", fontsize=FONT_SIZE - 0.5, gid="budget-label",
                        color="white" if segment.color in BUDGET_COLORS.values() else "black")
        label.set_in_layout(False)  # a name that overflows its segment until fit_budget_labels must not move axes
        left += segment.share
    ax.set_yticks([])
    ax.set_xticks([])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel(_wrap(fig.budget_note, NOTE_WIDTH), fontsize=FONT_SIZE - 0.5, color=NEUTRAL_COLOR, loc="left")


def fit_budget_labels(ax) -> None:
    """Remove the names of draw_budget's segments that do not fit inside them, measured where the finished
    layout puts the bar (a legend or a note added after draw_budget narrows it)."""
    renderer = ax.figure.canvas.get_renderer()
    ax.figure.draw_without_rendering()
    bars = [p for p in ax.patches if (p.get_gid() or "").startswith("budget:")]
    for bar, label in zip(bars, [t for t in ax.texts if t.get_gid() == "budget-label"]):  # both in segment order
        if label.get_window_extent(renderer).width > bar.get_window_extent(renderer).width - 2 * LABEL_PAD_PX:
            label.remove()


def plot_roofline(ax, roofs, table: pd.DataFrame, *, title: bool = True, **kwargs) -> None:
    """Draw the roofline of `table` (analysis.roofline.roofline_table) against `roofs` (analysis.roofline.Roofs)
    on `ax`; kwargs (level, datasheet, top, sweep) go to analysis.figure.roofline, which says what is drawn."""
    draw_roofline(ax, roofline(roofs, table, **kwargs), title=title)


def draw_roofline(ax, fig: Roofline, *, title: bool = True) -> None:
    """Draw analysis.figure.Roofline `fig` on `ax`: roofs, ridge points, kernels, the application, the legend
    (exactly the markers and lines drawn), then the labels, each placed clear of what is drawn before it."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*fig.x_range)
    ax.set_ylim(*fig.y_range)
    _draw_lines(ax, fig.roofs)
    _draw_ridges(ax, fig.ridges)
    for name, points in fig.sweeps:
        ax.plot(*zip(*points), linestyle=":", marker=".", markersize=4, color=NEUTRAL_COLOR, linewidth=1,
                gid=f"sweep:{name}", zorder=3)
    for row, color, points in fig.joins:
        ax.plot(*zip(*points), color=color, linewidth=0.9, alpha=0.6, zorder=3,
                gid=f"hier:{fig.table.at[row, 'kernel']}")
    for m in fig.marks:
        ax.scatter(m.x, m.y, s=m.area, c="none" if m.hollow else m.color, marker=m.shape, alpha=0.8,
                   edgecolors=m.color if m.hollow else "white", linewidths=1.4 if m.hollow else 0.6, zorder=5,
                   gid=m.gid)
    if fig.application is not None:  # above kernels, under labels
        ax.scatter([fig.application.x], [fig.application.y], s=APPLICATION_AREA, marker="*", c=APPLICATION_COLOR,
                   edgecolors="black", linewidths=0.9, zorder=5.5, gid="application")
    if fig.not_drawn:  # under the x axis' title, where it covers no point
        ax.annotate(_wrap(fig.not_drawn, NOTE_WIDTH), (0, 0), xycoords=("axes fraction", ax.xaxis.label),
                    xytext=(0, -4), textcoords="offset points", fontsize=FONT_SIZE - 0.5, color=NEUTRAL_COLOR,
                    ha="left", va="top", gid="note:not-drawn")
    _legend(ax, fig)
    _style_axes(ax, fig.xlabel)
    if title:
        heading, provenance, profiled = fig.title
        ax.set_title(f"{heading}\n{_wrap(provenance)}\n{_wrap(profiled)}", fontsize=10.5, loc="left",
                     color=WARNING_COLOR if fig.warning else "black")
    # last: label placement measures text where the layout (legend, title) has put the axes
    _place_labels(ax, fig.roofs, fig.ridges, fig.x_range, fig.application, fig.labels)


def plot_roofs(ax, roofs, x_range: tuple[float, float], y_range: tuple[float, float]) -> None:
    """The roofline without a profile: log axes over x_range x y_range (FLOP/byte against DRAM, FLOP/s), the
    DRAM slope, every flat of `roofs.flats` (any Roofs.flat key: "fp32", "tensor.bf16", ...) with its ridge
    point, and their labels, placed clear of markers already drawn with a gid starting "kernels:". For work
    other than a profile's kernels (analysis.llm): draw it first, then call this."""
    log_axes(ax, x_range, y_range)
    lines, ridges = roofs_only(roofs, x_range)
    _draw_lines(ax, lines)
    _draw_ridges(ax, ridges)
    _place_labels(ax, lines, ridges, x_range)


def log_axes(ax, x_range: tuple[float, float], y_range: tuple[float, float]) -> None:
    """The roofline's axes without a profile: log scales over x_range x y_range, titled and ticked; labels
    placed on them are measured where they will be drawn."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*x_range)
    ax.set_ylim(*y_range)
    _style_axes(ax, "Arithmetic intensity (FLOP/byte, DRAM)")


def _draw_lines(ax, lines: tuple[Line, ...]) -> None:
    for line in lines:
        style = {"linestyle": (0, DATASHEET_DASH), "alpha": 0.6} if line.datasheet else {"linestyle": "-"}
        ax.plot(line.x, line.y, color=line.color, linewidth=line.width, zorder=2, gid=line.gid, **style)


def _draw_ridges(ax, ridges: tuple[Ridge, ...]) -> None:
    for r in ridges:
        ax.plot([r.x], [r.y], marker="D", markersize=RIDGE_MARKER_SIZE, color=r.color, markeredgecolor="white",
                linestyle="none", zorder=4, gid=f"ridge:{r.key}")


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


class _Placer:
    """Greedy label placement in display space: each label takes the first candidate position that stays
    inside the axes and overlaps no earlier text (labels, the note, the legend), marker or roof line. When
    every candidate collides, a label that may be left out (a kernel's or a ridge's: the table and the axes
    say them) is left out unless a candidate inside covers no text and no marker: a ridge's then takes the
    one crossing the fewest line samples (its opaque box hides the line), a kernel's only one crossing none
    (its box lets a line show through its text, a strike-through). One that may not be left out (a roof's
    value) takes the candidate that overlaps least: no text first, then markers, then lines. Without a
    canvas that can measure text the first candidate is taken."""

    def __init__(self, ax):
        canvas = ax.figure.canvas
        self.renderer = canvas.get_renderer() if hasattr(canvas, "get_renderer") else None
        self.texts: list = []  # labels, the note, the legend: no label may overlap one
        self.boxes: list = []  # markers and ridge points: a label overlaps one only if it must
        self.markers: list = []  # (x, y, box) of the kernel markers, display space
        self.points = np.empty((0, 2))  # samples along the roof lines
        if self.renderer is None:
            return
        ax.figure.draw_without_rendering()  # run the layout engine so that extents are final
        self.inside = ax.get_window_extent(self.renderer)
        self.texts = [t.get_window_extent(self.renderer).padded(LABEL_PAD_PX) for t in ax.texts]
        if ax.get_legend() is not None:
            self.texts.append(ax.get_legend().get_window_extent(self.renderer))
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

    def place(self, make, candidates, avoid=(), required=True, over_lines=True):
        """`make(*candidate)` draws a label; keep the best candidate's label, or none (None returned) where
        every candidate overlaps text or leaves the axes (or, not `over_lines`, crosses a roof line) and the
        label is not `required`. `avoid`: boxes (e.g. the label's own marker) not counted as collisions."""
        best = None
        for candidate in candidates:
            label = make(*candidate)
            if self.renderer is None:
                return label
            box = _text_box(label, self.renderer)
            cost = self._cost(box, avoid)
            if cost == (0, 0.0, 0.0, 0):
                self.texts.append(box.padded(LABEL_PAD_PX))
                return label
            if best is None or cost < best[0]:
                best = (cost, candidate)
            label.remove()
        if not required and any(best[0] if not over_lines else best[0][:3]):
            return None
        label = make(*best[1])
        self.texts.append(_text_box(label, self.renderer).padded(LABEL_PAD_PX))
        return label

    def _cost(self, box, avoid) -> tuple[int, float, float, int]:
        inside = self.inside
        outside = int(not (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0
                           and box.y1 <= inside.y1))
        p = self.points
        crossing = int(((p[:, 0] > box.x0) & (p[:, 0] < box.x1) & (p[:, 1] > box.y0) & (p[:, 1] < box.y1)).sum())
        return (outside, _overlap(box, self.texts, avoid), _overlap(box, self.boxes, avoid), crossing)


def _overlap(box, others, avoid) -> float:
    """The area (pixels^2) `box` shares with `others`, those in `avoid` left out."""
    area = 0.0
    for other in others:
        if any(other is a for a in avoid):
            continue
        w = min(box.x1, other.x1) - max(box.x0, other.x0)
        h = min(box.y1, other.y1) - max(box.y0, other.y0)
        if w > 0 and h > 0:
            area += w * h
    return area


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


def _place_labels(ax, lines: tuple[Line, ...], ridges: tuple[Ridge, ...], x_range: tuple[float, float],
                  application: Label | None = None, kernels: tuple[Label, ...] = ()) -> None:
    """Bandwidth labels (lower left, under their slope), roof labels (at the left end of each flat, just
    above it, else at its right end), ridge labels, the application's, then the kernels' (largest first), each
    clear of the labels, markers and roof lines placed before it; a ridge's or a kernel's label with no clear
    place is left out. Datasheet roofs are not labelled (the legend names them)."""
    x_lo, x_hi = x_range
    placer = _Placer(ax)
    roofs = [line for line in lines if not line.datasheet]
    for bw in (line for line in roofs if line.slope):
        def slope_label(x, dx, dy, bw=bw):
            return ax.annotate(bw.label, (x, bw.value * x), xytext=(dx, dy), textcoords="offset points",
                               fontsize=FONT_SIZE, color=bw.color, zorder=6, gid=f"roof-label:{bw.key}",
                               **_align(dx, dy))

        # under the slope to its right (empty at low intensity), else above it to its left
        placer.place(slope_label, [(x_lo * f, dx, dy) for dx, dy in ((6, -4), (-6, 4)) for f in SLOPE_LABEL_AT])
    for flat, ridge in zip((line for line in roofs if not line.slope), ridges):
        def roof_label(x, dx, dy, flat=flat):
            return ax.annotate(flat.label, (x, flat.value), xytext=(dx, dy), textcoords="offset points",
                               fontsize=FONT_SIZE, color=flat.color, zorder=6, gid=f"roof-label:{flat.key}",
                               bbox=LABEL_BOX, **_align(dx, dy))

        # left end, clear of the ridge marker and of the slope rising from it, or right end; above the line,
        # else below it
        placer.place(roof_label, (*((ridge.x, dx, 2) for dx in ROOF_LABEL_DX), (x_hi, -4, 2),
                                  (ridge.x, ROOF_LABEL_DX[0], -3), (x_hi, -4, -3)))
    for ridge in ridges:  # after every roof's value, which they must not push aside
        def ridge_label(dx, dy, ridge=ridge):
            return ax.annotate(ridge.label, (ridge.x, ridge.y), xytext=(dx, dy), textcoords="offset points",
                               fontsize=FONT_SIZE - 0.5, color=ridge.color, zorder=6, gid=f"ridge-label:{ridge.key}",
                               bbox=LABEL_BOX, **_align(dx, dy))

        placer.place(ridge_label, RIDGE_LABEL_AT, required=False)
    if application is not None:  # its label first: it is the point people look for
        def application_label(dx, dy):
            return ax.annotate(application.text, (application.x, application.y), xytext=(dx, dy),
                               textcoords="offset points", fontsize=FONT_SIZE, fontweight="bold", zorder=6,
                               gid="application-label", bbox=LABEL_BOX, **_align(dx, dy))

        placer.place(application_label, _around(application.radius))
    for k in kernels:
        cx, cy = ax.transData.transform((k.x, k.y))
        own = [box for x, y, box in placer.markers if math.hypot(x - cx, y - cy) < 1]

        def kernel_label(dx, dy, k=k):
            return ax.annotate(k.text, (k.x, k.y), xytext=(dx, dy), textcoords="offset points", fontsize=FONT_SIZE,
                               zorder=6, gid="kernel-label",
                               arrowprops={"arrowstyle": "-", "color": "0.55", "lw": 0.6, "shrinkA": 0,
                                           "shrinkB": k.radius},
                               bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                     "alpha": 0.7}, **_align(dx, dy))

        placer.place(kernel_label, _around(k.radius), avoid=own, required=False, over_lines=False)


def _around(radius: float) -> list[tuple[float, float]]:
    """Offsets (points) of a label around a marker of `radius` points: each direction at each gap."""
    return [((radius + gap) * ux / math.hypot(ux, uy), (radius + gap) * uy / math.hypot(ux, uy))
            for gap in LABEL_GAPS for ux, uy in LABEL_DIRECTIONS]


def _legend(ax, fig: Roofline) -> None:
    """One legend entry per analysis.figure.LegendEntry."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    def handle(e):
        if e.kind == "patch":
            return Patch(color=e.color, label=e.label)
        if e.kind == "hollow":
            return Line2D([], [], marker="o", linestyle="none", markerfacecolor="none", color=e.color, markersize=7,
                          label=e.label)
        if e.kind == "text":
            return Line2D([], [], color="none", label=e.label)
        if e.kind == "star":
            return Line2D([], [], marker="*", linestyle="none", markerfacecolor=APPLICATION_COLOR, color=e.color,
                          markersize=11, label=e.label)
        if e.kind == "datasheet":
            return Line2D([], [], color=e.color, linestyle=(0, DATASHEET_DASH), label=e.label)
        if e.kind == "sweep":
            return Line2D([], [], color=e.color, linestyle=":", marker=".", label=e.label)
        return Line2D([], [], marker=e.shape, linestyle="none", color=e.color, markersize=7, label=e.label)

    ax.legend(handles=[handle(e) for e in fig.legend], loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize=FONT_SIZE, title=fig.legend_title, title_fontsize=FONT_SIZE)

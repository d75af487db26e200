"""Drawing the roofline: functions take data (analysis.roofline.Roofs and its table) and a matplotlib `ax`.

Every artist carries a gid ("roof:dram", "roof:fp32", "ridge:fp32", "datasheet:fp32", "kernels:fp32",
"hier:<kernel>", "sweep:<name>", "note:not-drawn") so that notebooks and tests can find it.
matplotlib is imported inside the functions: `analysis` works without it until something is drawn.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.roofline import LEVELS, NO_FLOPS, PRECISIONS, Roofs, si

PRECISION_COLORS = {"fp64": "#7b3294", "fp32": "#2166ac", "fp16": "#1b9e77", "tensor": "#d95f02",
                    NO_FLOPS: "#888888"}
LEVEL_COLORS = {"dram": "#222222", "l2": "#6a6a6a", "l1": "#a0a0a0"}
LEVEL_MARKERS = {"dram": "o", "l2": "s", "l1": "^"}
# marker area (points^2) = MARKER_AREA_MIN + share of total time x MARKER_AREA_SPAN
MARKER_AREA_MIN = 16.0
MARKER_AREA_SPAN = 1400.0
FIGSIZE = (11.0, 6.5)
# the axes extend this factor beyond the outermost ridge/kernel/sweep point
AXIS_MARGIN = 4.0
FONT_SIZE = 8.5
# where a kernel's label may go (points from the marker), tried in order
LABEL_OFFSETS = ((9, 9), (9, -9), (-9, 9), (-9, -9), (12, 22), (12, -22), (-12, 22), (-12, -22), (0, 32), (0, -32))
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
    joined by a line (hierarchical roofline); kernels without FLOPs cannot sit on log axes and are counted
    in a note instead.
    """
    primary = "dram" if level == "all" else level
    kernel_levels = list(LEVELS) if level == "all" else [primary]
    drawn = _drawable(table, kernel_levels)
    (x_lo, x_hi), (y_lo, y_hi) = _limits(roofs, table, drawn, kernel_levels, primary, sweep)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    _draw_roofs(ax, roofs, primary, x_lo, x_hi, style={"linestyle": "-"}, prefix="roof", labels=True)
    if datasheet is not None:
        _draw_roofs(ax, datasheet, "dram", x_lo, x_hi, prefix="datasheet", labels=False,
                    style={"linestyle": (0, (5, 3)), "linewidth": 1.1, "alpha": 0.6})
    _draw_ridges(ax, roofs, primary)
    if sweep:
        for s in roofs.sweeps:
            x, y = zip(*s.points) if s.points else ((), ())
            ax.plot(x, y, linestyle=":", marker=".", markersize=4, color="#555555", linewidth=1,
                    gid=f"sweep:{s.name}", zorder=3)
    _draw_kernels(ax, drawn, level, kernel_levels)
    _note_not_drawn(ax, table, drawn)
    _legend(ax, roofs, drawn, level, datasheet, sweep)

    ax.set_xlabel(f"Arithmetic intensity (FLOP/byte{', ' + primary.upper() if level != 'all' else ''})")
    ax.set_ylabel("Performance (FLOP/s)")
    from matplotlib.ticker import EngFormatter, FuncFormatter

    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s", sep=" "))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title:
        color = WARNING_COLOR if not roofs.measured else "black"
        ax.set_title(f"{roofs.device}: kernels against the roofs\n{_wrap('roofs: ' + roofs.provenance)}",
                     fontsize=10.5, color=color, loc="left")
    # last: label placement measures text where the layout (legend, title) has put the axes
    _label_top(ax, drawn, top, "dram" if level == "all" else primary)


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


def _limits(roofs, table, drawn, levels, primary, sweep):
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
    ys = [y for y in ys if y and math.isfinite(y) and y > 0]
    x_lo = 10 ** math.floor(math.log10(min(xs) / AXIS_MARGIN))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * AXIS_MARGIN))
    y_hi = 10 ** math.ceil(math.log10(max(ys) * 2))
    # the slope must enter the plot; kernels far below every roof still show
    y_lo = 10 ** math.floor(math.log10(min(min(ys), roofs.bandwidth(primary).value * x_lo) / 2))
    return (x_lo, x_hi), (y_lo, y_hi)


def _draw_roofs(ax, roofs: Roofs, primary: str, x_lo: float, x_hi: float, *, prefix: str, labels: bool,
                style: dict) -> None:
    top = max((r.value for r in roofs.flats), default=None)
    for bw in roofs.bandwidths:
        x_end = top / bw.value if top else x_hi
        emphasis = bw.key == primary
        ax.plot([x_lo, x_end], [bw.value * x_lo, bw.value * x_end], color=LEVEL_COLORS[bw.key],
                linewidth=style.get("linewidth", 2.2 if emphasis else 1.2), zorder=2, gid=f"{prefix}:{bw.key}",
                **{k: v for k, v in style.items() if k != "linewidth"})
        if labels:
            x_t = x_lo * 1.6
            ax.text(x_t, bw.value * x_t * 1.25, f"{bw.key.upper()} {si(bw.value, 'B/s')}", fontsize=FONT_SIZE,
                    color=LEVEL_COLORS[bw.key], ha="left", va="bottom", gid=f"{prefix}-label:{bw.key}")
    slope = roofs.bandwidth(primary)
    for flat in roofs.flats:
        x_start = flat.value / slope.value
        ax.plot([x_start, x_hi], [flat.value, flat.value], color=PRECISION_COLORS[flat.key],
                linewidth=style.get("linewidth", 2.0), zorder=2, gid=f"{prefix}:{flat.key}",
                **{k: v for k, v in style.items() if k != "linewidth"})
        if labels:
            # below the line: datasheet roofs, when drawn, lie above the measured ones
            ax.text(x_hi / 1.15, flat.value / 1.1, f"{flat.key} {si(flat.value, 'FLOP/s')} ({flat.ceiling})",
                    fontsize=FONT_SIZE, color=PRECISION_COLORS[flat.key], ha="right", va="top",
                    gid=f"{prefix}-label:{flat.key}")


def _draw_ridges(ax, roofs: Roofs, primary: str) -> None:
    for flat in roofs.flats:
        ridge = roofs.ridge(flat.key, primary)
        color = PRECISION_COLORS[flat.key]
        ax.plot([ridge], [flat.value], marker="D", markersize=5, color=color, markeredgecolor="white",
                linestyle="none", zorder=4, gid=f"ridge:{flat.key}")
        ax.annotate(f"{flat.key} ridge {ridge:.3g} FLOP/B", (ridge, flat.value), xytext=(-6, 4),
                    textcoords="offset points", ha="right", va="bottom", fontsize=FONT_SIZE - 0.5, color=color,
                    zorder=6, gid=f"ridge-label:{flat.key}",
                    bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.7})


def _area(share: pd.Series) -> np.ndarray:
    return MARKER_AREA_MIN + share.fillna(0).to_numpy(dtype=float) * MARKER_AREA_SPAN


def _draw_kernels(ax, drawn: pd.DataFrame, level: str, levels: list[str]) -> None:
    if level == "all":
        for _, k in drawn.iterrows():
            pts = sorted((k[f"ai_{lv}"], k["flop_per_s"]) for lv in levels
                         if math.isfinite(k[f"ai_{lv}"]) and k[f"ai_{lv}"] > 0)
            ax.plot(*zip(*pts), color=PRECISION_COLORS.get(k["precision"], "#888888"), linewidth=0.9,
                    alpha=0.6, zorder=3, gid=f"hier:{k['kernel']}")
    for prec in (*PRECISIONS, NO_FLOPS):
        group = drawn[drawn["precision"] == prec]
        if group.empty:
            continue
        for lv in levels:
            ai = group[f"ai_{lv}"].astype(float)
            sel = np.isfinite(ai) & (ai > 0)
            ax.scatter(ai[sel], group["flop_per_s"][sel], s=_area(group["share"][sel]),
                       c=PRECISION_COLORS[prec], marker=LEVEL_MARKERS[lv] if level == "all" else "o",
                       alpha=0.8, edgecolors="white", linewidths=0.6, zorder=5,
                       gid=f"kernels:{prec}" + (f":{lv}" if level == "all" else ""))


def _label_top(ax, drawn: pd.DataFrame, top: int, level: str) -> None:
    """Label the `top` kernels by time; each label takes the first offset that overlaps no other text and
    stays inside the axes (when the canvas can measure text; otherwise the first offset)."""
    if top <= 0:
        return
    renderer = ax.figure.canvas.get_renderer() if hasattr(ax.figure.canvas, "get_renderer") else None
    if renderer is not None:
        ax.figure.draw_without_rendering()  # run the layout engine so that extents are final
    taken = [t.get_window_extent(renderer) for t in ax.texts] if renderer else []
    inside = ax.get_window_extent(renderer) if renderer else None
    for _, k in drawn.nlargest(top, "time_s").iterrows():
        for dx, dy in LABEL_OFFSETS:
            label = ax.annotate(f"{k['short_name']} ({k['share'] * 100:.0f}%)", (k[f"ai_{level}"], k["flop_per_s"]),
                                xytext=(dx, dy), textcoords="offset points", fontsize=FONT_SIZE,
                                ha="left" if dx > 0 else "right", va="center", zorder=6, gid="kernel-label",
                                arrowprops={"arrowstyle": "-", "color": "0.55", "lw": 0.6, "shrinkA": 0,
                                            "shrinkB": 4},
                                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                      "alpha": 0.7})
            if renderer is None:
                break
            box = label.get_window_extent(renderer)
            fits = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
            if fits and not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            if (dx, dy) != LABEL_OFFSETS[-1]:
                label.remove()


def _note_not_drawn(ax, table: pd.DataFrame, drawn: pd.DataFrame) -> None:
    missing = table.drop(drawn.index)
    if missing.empty:
        return
    total = table["time_s"].sum()
    no_flops = missing[missing["precision"] == NO_FLOPS]
    other = len(missing) - len(no_flops)
    parts = []
    if len(no_flops):
        parts.append(f"{len(no_flops)} kernel(s) without FLOPs (AI 0, memory-bound; "
                     f"{no_flops['time_s'].sum() / total * 100:.1f}% of time)")
    if other:
        parts.append(f"{other} kernel(s) without counters to place them")
    ax.text(0.01, 0.01, "Not on the plot: " + "; ".join(parts) + ". See the table.", transform=ax.transAxes,
            fontsize=FONT_SIZE - 0.5, color="#555555", ha="left", va="bottom", gid="note:not-drawn")


def _legend(ax, roofs: Roofs, drawn: pd.DataFrame, level: str, datasheet: Roofs | None, sweep: bool) -> None:
    from matplotlib.lines import Line2D

    def marker(color, label, shape="o", **kw):
        return Line2D([], [], marker=shape, linestyle="none", color=color, markersize=7, label=label, **kw)

    handles = [marker(PRECISION_COLORS[p], p if p != NO_FLOPS else "no FLOPs")
               for p in (*PRECISIONS, NO_FLOPS) if (drawn["precision"] == p).any()]
    if level == "all":
        handles += [marker("#555555", f"{lv.upper()} intensity", LEVEL_MARKERS[lv]) for lv in LEVELS
                    if roofs.bandwidth(lv)]
    handles.append(Line2D([], [], color="none", label="marker area ∝ share of time"))
    handles.append(marker("#555555", "roof ridge point", "D"))
    if datasheet is not None:
        handles.append(Line2D([], [], color="#555555", linestyle=(0, (5, 3)), label=f"datasheet: {datasheet.device}"))
    if sweep and roofs.sweeps:
        handles.append(Line2D([], [], color="#555555", linestyle=":", marker=".", label="measured intensity sweep"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize=FONT_SIZE, title="kernels (dominant precision)", title_fontsize=FONT_SIZE)

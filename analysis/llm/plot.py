"""Drawing an LLM's ops on the roofs and the batch sweep; functions take data (place.Result, a sweep table) and
a matplotlib `ax`. matplotlib is imported inside the functions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from analysis.figure import DRAWABLE_EXPONENTS, WARNING_COLOR, axes, drawable
from analysis.llm.models import Model
from analysis.llm.place import Result
from analysis.llm.serve import closed_loop, load
from analysis.plot import FONT_SIZE, log_axes, plot_roofs
from common.errors import CeilingsError

CLASS_COLORS = {"gemm": "#d95f02", "attention": "#7570b3", "norm": "#1b9e77", "elementwise": "#2166ac"}
PHASE_MARKERS = {"prefill": "o", "decode": "^"}
# marker area (points^2) = MIN + share of its phase's time x SPAN
MARKER_AREA_MIN, MARKER_AREA_SPAN = 18.0, 600.0
LABEL_SHARE = 0.03  # ops taking at least this share of their phase's time are named on the plot
CLUSTER_FACTOR = 1.5  # ops this close (a ratio, both axes) share a label
LABEL_LINE_PT = 10.0  # a label line's height: a label that overlaps one placed before it moves down by it
LABEL_TRIES = 12
PANEL_SIZE = (11.0, 6.0)
SWEEP_SIZE = (9.0, 5.5)
GPU_COLORS = ("#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")


def _drawn(result: Result) -> pd.DataFrame:
    """The placed ops of both phases that can sit on log axes (FLOPs and a time), with their share of their
    phase's time."""
    ops = pd.concat([result.prefill, result.decode], ignore_index=True)
    ops["share"] = ops["time_s"] / ops.groupby("phase")["time_s"].transform("sum")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # no FLOPs or no time: not drawable
        ops["flop_per_s"] = ops["flops"] / ops["time_s"]
    return ops[(ops["flops"] > 0) & ops["time_s"].gt(0) & drawable(ops["flop_per_s"]) & drawable(ops["ai"])]


def ops_view(result: Result):
    """What plot_ops (and analysis.llm.html) draw of one GPU: the drawable ops (_drawn), the roofs with only the
    flats those ops run on, and the axes' ranges (whole decades)."""
    roofs = result.gpu.roofs
    ops = _drawn(result)
    keys = list(dict.fromkeys(k for roof in ops["roof"] for k in roof.split("+") if roofs.flat(k)))
    drawn = replace(roofs, flats=tuple(roofs.flat(k) for k in keys))
    x_range, y_range = axes([*ops["ai"], *(drawn.ridge(k) for k in keys)],
                            [*ops["flop_per_s"], *(f.value for f in drawn.flats)], roofs.bandwidth("dram").value)
    return ops, drawn, x_range, y_range


def not_on_plot(result: Result, ops: pd.DataFrame) -> str | None:
    """The note naming prefill's ops that ops_view leaves out (`ops`: those it draws): most have no FLOPs; an op
    with FLOPs has no time (not placed) or lies beyond the axes (roofs of absurd figures)."""
    left_out = sorted(set(result.prefill["op"]) - set(ops["op"]))
    if not left_out:
        return None
    with_flops = set(result.prefill.loc[result.prefill["flops"] > 0, "op"])
    lo, hi = DRAWABLE_EXPONENTS
    parts = {"no FLOPs: memory- or interconnect-bound": [o for o in left_out if o not in with_flops],
             f"no time, or off the axes at 1e{lo} to 1e{hi}": [o for o in left_out if o in with_flops]}
    return "Not on the plot " + "; ".join(f"({why}, in the table): {', '.join(ops)}" for why, ops in parts.items()
                                          if ops)


def plot_ops(ax, model: Model, result: Result) -> None:
    """The model's ops on one GPU's roofs: prefill and decode (its first step) apart by marker, op classes by
    colour, each op at its intensity and its FLOPs over its time (at the roofs, or below them where a profile
    calibrated its class). The drawn flats are the roofs the ops run on."""
    roofs = result.gpu.roofs
    ops, drawn, x_range, y_range = ops_view(result)
    for (phase, cls), group in ops.groupby(["phase", "op_class"]):
        ax.scatter(group["ai"], group["flop_per_s"], s=MARKER_AREA_MIN + group["share"] * MARKER_AREA_SPAN,
                   marker=PHASE_MARKERS[phase], c=CLASS_COLORS[cls], edgecolors="white", linewidths=0.6,
                   alpha=0.85, zorder=5, gid=f"kernels:llm:{phase}:{cls}")
    note = not_on_plot(result, ops)
    if note:
        ax.text(0.01, 0.01, note, transform=ax.transAxes, fontsize=FONT_SIZE - 0.5, color="#555555",
                gid="note:not-drawn")
    placed = pd.concat([result.prefill, result.decode])
    _ops_legend(ax, ops, calibrated=bool(((placed["efficiency"] != 1) | (placed["floor_s"] > 0)).any()))
    s = result.setup
    ax.set_title(f"{model.name} on {result.gpu.label}: prefill of {s.prompt} tokens, decode step at context "
                 f"{s.prompt}, batch {s.batch}\nroofs: {roofs.provenance}", fontsize=10, loc="left",
                 color="black" if roofs.measured else WARNING_COLOR)
    # labels go under the roofs, where no op can be, toward the middle, each moved down until it is clear of
    # those placed before it: measured on the final axes, once the legend and the title have taken their room
    log_axes(ax, x_range, y_range)
    ax.figure.draw_without_rendering()
    renderer = ax.figure.canvas.get_renderer()
    from matplotlib.text import Text  # an annotation's own extent: its text, not its arrow
    x_mid, placed_boxes = math.sqrt(x_range[0] * x_range[1]), []
    for phase, xy, names in _clusters(ops[ops["share"] >= LABEL_SHARE]):
        left, text = xy[0] > x_mid, f"{phase}: " + _wrap_names(names)
        for step in range(LABEL_TRIES):
            label = ax.annotate(text, xy, xytext=(-8 if left else 8, -8 - LABEL_LINE_PT * step),
                                textcoords="offset points", fontsize=FONT_SIZE - 0.5, va="top",
                                ha="right" if left else "left", zorder=6, gid="op-label",
                                arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.6},
                                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none",
                                      "alpha": 0.7})
            label.get_window_extent(renderer)  # positions the annotation's text
            box = Text.get_window_extent(label, renderer).padded(2)
            if not any(box.overlaps(other) for other in placed_boxes) or step == LABEL_TRIES - 1:
                placed_boxes.append(box)
                break
            label.remove()
    # last: its roof labels are placed where the legend and the title have left the axes (placed before them,
    # a label fitted to a wider axes ran out of it, over the legend's keys)
    plot_roofs(ax, drawn, x_range, y_range)


def _clusters(ops: pd.DataFrame) -> list[tuple[str, tuple[float, float], list[str]]]:
    """Ops of a phase whose points lie within CLUSTER_FACTOR of each other in both coordinates share one label
    (decode's GEMMs all sit at 1 FLOP/B): (phase, point, names), the op with the most time first."""
    clusters: list[dict] = []
    for op in ops.sort_values("share", ascending=False).itertuples():
        xy = (op.ai, op.flop_per_s)
        near = next((c for c in clusters if c["phase"] == op.phase
                     and all(max(a / b, b / a) < CLUSTER_FACTOR for a, b in zip(c["xy"], xy))), None)
        if near is None:
            clusters.append({"phase": op.phase, "xy": xy, "names": [op.op]})
        else:
            near["names"].append(op.op)
    return [(c["phase"], c["xy"], c["names"]) for c in clusters]


def _wrap_names(names: list[str], per_line: int = 3) -> str:
    return ",\n".join(", ".join(names[i:i + per_line]) for i in range(0, len(names), per_line))


def _ops_legend(ax, ops: pd.DataFrame, calibrated: bool) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="s", linestyle="none", color=CLASS_COLORS[c], markersize=7, label=c)
               for c in CLASS_COLORS if c in set(ops["op_class"])]
    handles += [Line2D([], [], marker=PHASE_MARKERS[p], linestyle="none", color="#555555", markersize=7,
                       label=f"{p}" + (" (first step)" if p == "decode" else "")) for p in PHASE_MARKERS
                if p in set(ops["phase"])]
    handles.append(Line2D([], [], color="none", label="marker area ∝ share of its phase's time"))
    if calibrated:
        handles.append(Line2D([], [], color="none", label="below the roof: kernel floors, fitted efficiency"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=FONT_SIZE,
              title="ops (op class)", title_fontsize=FONT_SIZE)


def ops_figure(model: Model, results: Sequence[Result]):
    """A Figure (no pyplot) with one plot_ops panel per GPU."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(PANEL_SIZE[0], PANEL_SIZE[1] * len(results)), layout="constrained")
    FigureCanvasAgg(fig)  # a canvas that can measure text, for placing the roof labels
    for ax, result in zip(fig.subplots(len(results), 1, squeeze=False)[:, 0], results):
        plot_ops(ax, model, result)
    return fig


def plot_sweep(ax, model: Model, sweep: pd.DataFrame, results: Sequence[Result]) -> None:
    """Decode tokens/s against batch on each GPU (the sweep table of place.batch_sweep): solid where weights and
    KV cache fit, dotted where they do not, and where the weight GEMMs turn compute-bound (crossover)."""
    if not drawable(sweep["tokens_per_s"]).any():
        lo, hi = DRAWABLE_EXPONENTS
        raise CeilingsError(f"--sweep-plot: no decode rate of the sweep lies between 1e{lo} and 1e{hi} tokens/s, so "
                            f"there is nothing to draw; are the roofs' figures real? (see the table)")
    for i, result in enumerate(results):
        color = GPU_COLORS[i % len(GPU_COLORS)]
        rows = sweep[sweep["gpu"] == result.gpu.label]
        fits = rows["fits"].map(lambda f: f is not False).to_numpy()
        x, y = rows["batch"].to_numpy(), rows["tokens_per_s"].to_numpy(dtype=float)
        y = np.where(drawable(y), y, np.nan)  # a rate beyond the axes (roofs of absurd figures) is left out
        ax.plot(x, np.where(fits, y, np.nan), color=color, marker="o", markersize=4, linewidth=1.8,
                label=result.gpu.label, gid=f"sweep:{result.gpu.label}")
        if not fits.all():  # from the last batch that fits on, dotted
            start = max(int(np.argmin(fits)) - 1, 0)
            ax.plot(x[start:], y[start:], color=color, linestyle=":", marker="x", markersize=4, linewidth=1.2,
                    gid=f"sweep-no-fit:{result.gpu.label}")
        if result.crossover_batch is not None and result.crossover_batch <= x.max():
            ax.axvline(result.crossover_batch, color=color, linestyle="--", linewidth=1, alpha=0.7,
                       gid=f"crossover:{result.gpu.label}")
            # at the bottom, under the curves (they rise with the batch), stacked per GPU
            ax.annotate(f"compute-bound GEMMs\nfrom batch {result.crossover_batch}", (result.crossover_batch, 0),
                        xycoords=("data", "axes fraction"), xytext=(4, 4 + 26 * i), textcoords="offset points",
                        fontsize=FONT_SIZE - 0.5, color=color, va="bottom", gid=f"crossover-label:{result.gpu.label}")
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("decode tokens/s (batch / step time)")
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="#555555", linestyle=":", marker="x", label="weights + KV cache do not fit"))
    handles.append(Line2D([], [], color="#555555", linestyle="--", label="weight GEMMs compute-bound from here"))
    ax.legend(handles=handles, loc="upper left", fontsize=FONT_SIZE, frameon=False)  # small batches sit low
    s = results[0].setup
    sources = "; ".join(dict.fromkeys(r.gpu.roofs.provenance for r in results))
    ax.set_title(f"{model.name}: decode step at context {s.prompt} ({s.weights} weights, {s.kv_cache} KV "
                 f"cache), KV cache for {s.prompt + s.gen} tokens a sequence\nroofs: {sources}", fontsize=10,
                 loc="left", color="black" if all(r.gpu.roofs.measured for r in results) else WARNING_COLOR)


def sweep_figure(model: Model, sweep: pd.DataFrame, results: Sequence[Result]):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=SWEEP_SIZE, layout="constrained")
    FigureCanvasAgg(fig)
    plot_sweep(fig.add_subplot(), model, sweep, results)
    return fig


SERVE_LATENCIES = (("ttft_s", "time to first token"), ("tpot_s", "time per output token"))


def plot_serve(axes_pair, model: Model, serving: Sequence) -> None:
    """--serve's latencies against the request rate: P50 (solid) and P99 (dashed) TTFT on the first ax, TPOT on
    the second, a colour per GPU; a hollow marker where the server preempted requests."""
    from matplotlib.ticker import FuncFormatter

    closed = closed_loop(serving)
    for (key, what), ax in zip(SERVE_LATENCIES, axes_pair):
        if not any(load(m) is not None and m[key]["p50"] is not None for s in serving for m in s.runs):
            ax.text(0.5, 0.5, f"no {what}: no request produced more than one token" if key == "tpot_s" else
                    f"no {what}", ha="center", va="center", transform=ax.transAxes, fontsize=FONT_SIZE)
            ax.set_axis_off()
            continue
        for color, s in zip(GPU_COLORS, serving):
            runs = [m for m in s.runs if load(m) is not None and m[key]["p50"] is not None]
            rates = [load(m) for m in runs]
            for p, style in (("p50", "-"), ("p99", "--")):
                ax.plot(rates, [m[key][p] * 1e3 for m in runs], linestyle=style, color=color, marker="o",
                        markersize=4, label=f"{s.gpu.label} {p.upper()}")
            preempted = [m for m in runs if m["preemptions"]]
            ax.scatter([load(m) for m in preempted], [m[key]["p99"] * 1e3 for m in preempted], s=60,
                       facecolors="none", edgecolors=color)
        ax.set_xlabel("clients (closed loop: each sends its next request when one finishes)" if closed else
                      "requests a second (Poisson arrivals)", fontsize=FONT_SIZE)
        ax.set_ylabel(f"{what} (ms)", fontsize=FONT_SIZE)
        ax.set_yscale("log")
        for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):  # 20, not 2 x 10^1
            axis(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
        ax.tick_params(labelsize=FONT_SIZE)
    axes_pair[0].legend(loc="upper left", fontsize=FONT_SIZE, frameon=False)
    sources = "; ".join(dict.fromkeys(s.gpu.roofs.provenance for s in serving))
    runs = serving[0].runs[0]
    axes_pair[0].figure.suptitle(
        f"{model.name}: {runs['requests']} requests at each {'concurrency' if closed else 'rate'}, P50 solid, "
        f"P99 dashed (hollow: preemptions)\n"
        f"roofs: {sources}", fontsize=10, x=0.01, ha="left",
        color="black" if all(s.gpu.roofs.measured for s in serving) else WARNING_COLOR)


def serve_figure(model: Model, serving: Sequence):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12.0, 5.0), layout="constrained")
    FigureCanvasAgg(fig)
    plot_serve(fig.subplots(1, 2), model, serving)
    return fig

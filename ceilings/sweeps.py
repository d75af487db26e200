"""Sweeps: plateaus of bandwidth against working set, the knee of FLOP/s against intensity, and their
figures (with the memory's theoretical DRAM bandwidth marked).

Computation returns data (frozen dataclasses, tuples); plotting takes a matplotlib `ax` and a sweep
dict as in docs/roofs-schema.md `sweeps[]` (`points` is a list of [x, y]). matplotlib is imported only
by `save_sweep_figures`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from common.atomic import Outputs
from kernels.base import format_bytes

from .peaks import dram_peak
from .roofs import record

# --- plateau detection (all in log y: a threshold is a ratio, whatever the level) ----------------------
LEVEL_STEP = 0.15  # a point more than 15% off its segment's median starts a new segment (a new level)
EDGE_TOLERANCE = 0.06  # segment ends further than this from the median are transition points: trimmed
FLAT_TOLERANCE = 0.10  # a plateau's least-squares trend, end to end, stays within 10% (else: a slope)
MAX_PLATEAU_SLOPE = 0.08  # ... and below 8% per octave: a short piece of a monotone tail is no plateau
MIN_PLATEAU_POINTS = 3  # at 4 points per octave: 3/4 of an octave
SMOOTH_WINDOW = 3  # running median: one outlier never starts or breaks a plateau
# With the L2 size known: a plateau centred above it is DRAM; the first one is L1 when it ends below
# L2 / 16 (L1s are <= 256 KiB; L2s >= 4 MiB); the others are L2 (two: the near and far partitions).
L1_MAX_FRACTION_OF_L2 = 1 / 16
NAMES_BY_COUNT = {1: ["dram"], 2: ["l2", "dram"], 3: ["l1", "l2", "dram"],
                  4: ["l1", "l2.near", "l2.far", "dram"]}

# --- knee ----------------------------------------------------------------------------------------------
KNEE_FLAT_TOLERANCE = 0.10  # points within 10% of the top are on the flat
KNEE_SLOPE_FRACTION = 0.5  # points below half the top are on the bandwidth slope
MIN_KNEE_POINTS = 2  # on each side

@dataclass(frozen=True)
class Plateau:
    level: str  # l1 | l2 | l2.near | l2.far | dram (numbered when a name repeats)
    x_min: float
    x_max: float
    value: float  # median y of the plateau's points

    def as_dict(self) -> dict:
        return asdict(self)


def _running_median(values: np.ndarray, window: int) -> np.ndarray:
    half = window // 2
    return np.array([np.median(values[max(0, i - half): i + half + 1]) for i in range(len(values))])


def _segments(smooth: np.ndarray) -> list[list[int]]:
    """Greedy: a point joins the current segment while within LEVEL_STEP of the segment's median."""
    step = math.log1p(LEVEL_STEP)
    segments, current = [], [0]
    for i in range(1, len(smooth)):
        if abs(smooth[i] - np.median(smooth[current])) <= step:
            current.append(i)
        else:
            segments.append(current)
            current = [i]
    segments.append(current)
    return segments


def _trim(segment: list[int], smooth: np.ndarray) -> list[int]:
    edge = math.log1p(EDGE_TOLERANCE)
    while len(segment) > MIN_PLATEAU_POINTS:
        centre = np.median(smooth[segment])
        first, last = abs(smooth[segment[0]] - centre), abs(smooth[segment[-1]] - centre)
        if max(first, last) <= edge:
            break
        segment = segment[1:] if first >= last else segment[:-1]
    return segment


def _is_flat(segment: list[int], log_x: np.ndarray, smooth: np.ndarray) -> bool:
    xs, ys = log_x[segment], smooth[segment]
    if len(segment) < MIN_PLATEAU_POINTS or xs[-1] == xs[0]:
        return False
    slope = np.polyfit(xs, ys, 1)[0]  # log y per log x
    return (abs(slope * (xs[-1] - xs[0])) <= math.log1p(FLAT_TOLERANCE)
            and abs(slope * math.log(2)) <= math.log1p(MAX_PLATEAU_SLOPE))


def _names(plateaus: list[tuple[float, float, float]], l2_bytes: float | None) -> list[str]:
    count = len(plateaus)
    if not l2_bytes:
        if count in NAMES_BY_COUNT:
            return NAMES_BY_COUNT[count]
        middle = [f"l2.{i}" for i in range(2, count - 2)]
        return ["l1", "l2.near", *middle, "l2.far", "dram"]
    beyond = [math.sqrt(lo * hi) > l2_bytes for lo, hi, _ in plateaus]
    cache = beyond.index(True) if True in beyond else count
    names = []
    if cache and plateaus[0][1] < l2_bytes * L1_MAX_FRACTION_OF_L2:
        names.append("l1")
    l2 = cache - len(names)
    names += {0: [], 1: ["l2"], 2: ["l2.near", "l2.far"]}.get(l2, [f"l2.{i + 1}" for i in range(l2)])
    names += ["dram"] * (count - cache)
    return _numbered(names)


def _numbered(names: list[str]) -> list[str]:
    """A name used more than once gets .1, .2, ... (e.g. two plateaus beyond L2: both kept, told apart)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        if names.count(name) == 1:
            out.append(name)
        else:
            seen[name] = seen.get(name, 0) + 1
            out.append(f"{name}.{seen[name]}")
    return out


def find_plateaus(x: Sequence[float], y: Sequence[float], l2_bytes: float | None = None) -> list[Plateau]:
    """Plateaus of a bandwidth-against-working-set curve, smallest set first.

    The curve is smoothed with a running median in log y, cut where a point leaves its segment's median
    by more than LEVEL_STEP, each segment's transition points trimmed; segments of at least
    MIN_PLATEAU_POINTS whose trend stays within FLAT_TOLERANCE are plateaus (a monotone tail never is);
    neighbours within LEVEL_STEP merge. Names come from `l2_bytes` when given, else from the order.
    """
    pts = sorted((float(a), float(b)) for a, b in zip(x, y)
                 if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0)
    if len(pts) < MIN_PLATEAU_POINTS:
        return []
    xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    log_x, smooth = np.log(xs), _running_median(np.log(ys), SMOOTH_WINDOW)
    kept = [seg for seg in (_trim(s, smooth) for s in _segments(smooth)) if _is_flat(seg, log_x, smooth)]
    merged: list[list[int]] = []
    for seg in kept:
        if merged and abs(np.median(smooth[merged[-1]]) - np.median(smooth[seg])) <= math.log1p(LEVEL_STEP):
            merged[-1] = merged[-1] + seg
        else:
            merged.append(seg)
    spans = [(xs[seg[0]], xs[seg[-1]], float(np.median(ys[seg]))) for seg in merged]
    return [Plateau(name, float(lo), float(hi), value)
            for name, (lo, hi, value) in zip(_names(spans, l2_bytes), spans)]


def find_knee(ai: Sequence[float], flops: Sequence[float], peak: float | None = None
              ) -> tuple[float, float] | None:
    """The ridge of an achieved-FLOP/s-against-intensity curve: where the bandwidth line through its
    low-intensity points (median FLOP/s per FLOP/B) meets its flat (`peak`, or the measured top: the
    median of the points within KNEE_FLAT_TOLERANCE of the highest smoothed value). None unless there are
    MIN_KNEE_POINTS on the slope (below KNEE_SLOPE_FRACTION of the flat) and on the flat."""
    pts = sorted((float(a), float(b)) for a, b in zip(ai, flops)
                 if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0)
    if len(pts) < 2 * MIN_KNEE_POINTS:
        return None
    xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    top = float(np.max(_running_median(ys, SMOOTH_WINDOW)))
    flat = ys >= (1 - KNEE_FLAT_TOLERANCE) * top
    level = float(peak) if peak else float(np.median(ys[flat]))
    slope = ys <= KNEE_SLOPE_FRACTION * level
    if flat.sum() < MIN_KNEE_POINTS or slope.sum() < MIN_KNEE_POINTS:
        return None
    bandwidth = float(np.median(ys[slope] / xs[slope]))
    return level / bandwidth, level


def dram_theoretical(device: dict) -> float | None:
    """Theoretical DRAM bandwidth in B/s at the device's max memory clock (`ceilings.peaks.dram_peak`);
    None when the clock or the bus width is unknown."""
    return dram_peak(device.get("memory_clock_hz"), device.get("memory_bus_width_bits"))


# --- plotting ------------------------------------------------------------------------------------------

def _byte_axis(ax, xs: np.ndarray) -> None:
    ax.set_xscale("log", base=2)
    lo, hi = math.floor(math.log2(xs.min())), math.ceil(math.log2(xs.max()))
    step = max(1, math.ceil((hi - lo) / 10))  # at most ~10 labelled powers of two
    ticks = [2.0**k for k in range(lo, hi + 1, step)]
    ax.set_xticks(ticks, [format_bytes(t) for t in ticks])


def plot_bandwidth_sweep(ax, sweep: dict, dram_theoretical: float | None = None,
                         l2_bytes: float | None = None) -> None:
    """Bandwidth (TB/s) against working set (log2 bytes): points, shaded plateaus with their values,
    the theoretical DRAM bandwidth (dashed) and the L2 size (dotted) when given."""
    pts = np.array(sweep["points"], dtype=float).reshape(-1, 2)
    ax.plot(pts[:, 0], pts[:, 1] / 1e12, marker="o", markersize=3, label=f"{sweep['kernel']} "
            f"({sweep['backend']})")
    if len(pts):
        _byte_axis(ax, pts[:, 0])
    for i, plateau in enumerate(sweep.get("plateaus") or []):
        color = f"C{i + 1}"
        ax.axvspan(plateau["x_min"], plateau["x_max"], color=color, alpha=0.15)
        ax.hlines(plateau["value"] / 1e12, plateau["x_min"], plateau["x_max"], colors=color)
        ax.annotate(f"{plateau['level']} {plateau['value'] / 1e12:.2f} TB/s",
                    (math.sqrt(plateau["x_min"] * plateau["x_max"]), plateau["value"] / 1e12),
                    textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8, color=color)
    if dram_theoretical:
        ax.axhline(dram_theoretical / 1e12, linestyle="--", color="0.3",
                   label=f"DRAM theoretical {dram_theoretical / 1e12:.2f} TB/s")
    if l2_bytes:
        ax.axvline(l2_bytes, linestyle=":", color="0.3", label=f"L2 {format_bytes(l2_bytes)}")
    top = max([*pts[:, 1], dram_theoretical or 0, 1.0]) / 1e12
    ax.set_ylim(0, top * 1.15)  # room for the plateau labels
    ax.set_xlabel(f"{sweep['x']['name']} ({sweep['x']['unit']})")
    ax.set_ylabel("bandwidth (TB/s)")
    ax.set_title(sweep["name"])
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")


def plot_compute_sweep(ax, sweep: dict, bandwidth: float | None = None, peak: float | None = None) -> None:
    """Achieved FLOP/s against arithmetic intensity (log-log), the ideal min(bandwidth x AI, peak) when
    both are given, and the knee (the sweep's, else found here)."""
    from matplotlib.ticker import FuncFormatter

    pts = np.array(sweep["points"], dtype=float).reshape(-1, 2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.plot(pts[:, 0], pts[:, 1] / 1e12, marker="o", markersize=3,
            label=f"{sweep['kernel']} ({sweep['backend']})")
    if bandwidth and peak and len(pts):
        ai = np.geomspace(pts[:, 0].min(), pts[:, 0].max(), 200)
        ax.plot(ai, np.minimum(bandwidth * ai, peak) / 1e12, linestyle="--", color="0.3",
                label=f"ideal: min({bandwidth / 1e12:.2f} TB/s x AI, {peak / 1e12:.1f} TFLOP/s)")
    knee = sweep.get("knee")
    knee_xy = (knee["x"], knee["y"]) if knee else find_knee(pts[:, 0], pts[:, 1], peak)
    if knee_xy:
        ax.plot([knee_xy[0]], [knee_xy[1] / 1e12], marker="*", markersize=12, color="C3", linestyle="none",
                label=f"knee {knee_xy[0]:.3g} FLOP/B, {knee_xy[1] / 1e12:.3g} TFLOP/s")
    ax.set_xlabel(f"{sweep['x']['name']} ({sweep['x']['unit']})")
    ax.set_ylabel("achieved (TFLOP/s)")
    ax.set_title(sweep["name"])
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def figure_title(doc: dict) -> str:
    title = doc["device"].get("name") or "unknown device"
    return f"SIMULATED (Numba simulator: numbers are meaningless) - {title}" if doc["simulated"] else title


# the figures a roofs file gets beside it: <roofs stem>-<suffix>, for the sweeps in that unit
SWEEP_FIGURE_NAMES = {"B/s": "bandwidth-sweep.png", "FLOP/s": "compute-sweep.png"}


def sweep_figure_paths(roofs_path: str | Path) -> dict[str, Path]:
    """unit -> the figure beside `roofs_path` named after it: run.json -> run-bandwidth-sweep.png, ..."""
    roofs_path = Path(roofs_path)
    return {unit: roofs_path.with_name(f"{roofs_path.stem}-{suffix}") for unit, suffix in SWEEP_FIGURE_NAMES.items()}


def save_sweep_figures(doc: dict, roofs_path: str | Path, *, force: bool = True) -> list[Path]:
    """Write `sweep_figure_paths(roofs_path)` (one panel per sweep) for the sweeps in a validated roofs
    document, each only when it has sweeps; force=False refuses to overwrite. Returns the files written."""
    out = Outputs(force=force)
    units = {s["y"]["unit"] for s in doc["sweeps"]}
    for unit, path in sweep_figure_paths(roofs_path).items():
        if unit in units:
            out.want("figure", path, picture=True)
    stage_sweep_figures(out, doc, roofs_path)
    return [Path(p) for p in out.commit()]


def stage_sweep_figures(out: Outputs, doc: dict, roofs_path: str | Path) -> None:
    """Render the figures of save_sweep_figures into `out` (common.atomic.Outputs), written at its commit. The
    caller has `want`ed their paths before its work (measure: before measuring, not after)."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    device, title, rec = doc["device"], figure_title(doc), record(doc, sweeps=False)
    for unit, path in sweep_figure_paths(roofs_path).items():
        sweeps = [s for s in doc["sweeps"] if s["y"]["unit"] == unit]
        if not sweeps:
            continue
        fig = Figure(figsize=(9, 4.5 * len(sweeps)), layout="constrained")
        for ax, sweep in zip(np.atleast_1d(fig.subplots(len(sweeps), 1)), sweeps):
            if unit == "B/s":
                plot_bandwidth_sweep(ax, sweep, dram_theoretical(device), device.get("l2_bytes"))
            else:
                precision = sweep["name"].rsplit(".", 1)[-1]
                dram = rec.best(kind="bandwidth", level="dram")
                flat = rec.best(kind="compute", precision=precision, pipe="cuda-core")
                plot_compute_sweep(ax, sweep, dram and dram.value, flat and flat.value)
        fig.suptitle(title)
        out.figure(path, fig, dpi=120)

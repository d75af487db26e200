"""Compare roofs files side by side (and against datasheets): a table on stdout and a grouped bar chart.

    python -m ceilings.compare A.json [B.json ...] [--datasheet NAME ...] [-o compare.png] [--csv OUT]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from common import atomic
from common.errors import CeilingsError, cli_entry
from common.html import SERIES_COLORS, finite_number, page, strip_section, table_section, table_spec
from common.warn import add_verbose, print_warnings
from kernels.base import relative

from .datasheet import Row, find_datasheet
from .lazy import lazy
from .roofs import RoofsRecord

pd = lazy("pandas")

PROG = "python -m ceilings.compare"
SIMULATED_MARK = " (SIMULATED)"
DATASHEET_PREFIX = "datasheet "
# A run's column of how it performs against the first (kernels.base.relative: above 1 better, a latency's
# ratio inverted), not its value divided by the first's.
VERSUS_FIRST = " vs first"
# The columns that describe a ceiling, before its numbers.
FACTS = ("unit", "peak_key", "kind")
# Display scale per unit (kernels.base.UNITS): bandwidth in GB/s, compute in TFLOP/s, special functions in
# Gop/s, latencies (launches, loads) in us.
DISPLAY = {"B/s": (1e9, "GB/s"), "FLOP/s": (1e12, "TFLOP/s"), "op/s": (1e9, "Gop/s"), "s": (1e-6, "us")}
PANELS = (("B/s", "Bandwidth"), ("FLOP/s", "Compute"))
# the share of a bar panel's height above its tallest bar, for the bar's value written upwards (5 characters)
LABEL_ROOM = 0.15
LIMIT_DECADES = 300  # an axis limit stays within 1e-300..1e300, clear of float64's ends
BAR_GROUP = 0.8  # of the room between two ceilings, the share their bars take
# a bar panel's width (inches): at least PANEL_WIDTH, and BAR_INCHES a bar (its value, written upwards in
# x-small type at 120 dpi, is 0.1 in thick) plus PANEL_MARGIN for the y axis
PANEL_WIDTH, BAR_INCHES, PANEL_MARGIN = 6.5, 0.15, 1.2
# Drawn only when some file has such a ceiling (schema 1.4), so older files draw as before.
EXTRA_PANELS = (("op/s", "Special functions (MUFU)"), ("s", "Latency floors (lower is better)"))


def panels(table: pd.DataFrame) -> list[tuple[str, str]]:
    """The (unit, title) panels of a compare table: bandwidth and compute always, the others where it has them."""
    return [*PANELS, *(p for p in EXTRA_PANELS if (table["unit"] == p[0]).any())]


def run_label(roofs: RoofsRecord, file_label: str) -> str:
    return f"{roofs.device.name or 'unknown device'} [{file_label}]" + (SIMULATED_MARK if roofs.simulated else "")


def path_labels(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Each file's stem, or where stems collide the shortest end of its path that tells it apart
    (run1/roofs.json, run2/roofs.json -> run1/roofs, run2/roofs). The same file given twice is an error."""
    full = [Path(os.path.abspath(p)) for p in paths]  # abspath: ./a.json and a.json are one file
    for i, path in enumerate(full):
        if path in full[:i]:
            raise CeilingsError(f"{paths[i]}: given twice")
    keys = [(*p.parent.parts, p.stem) for p in full]
    labels = []
    for i, key in enumerate(keys):
        others = keys[:i] + keys[i + 1:]
        k = next((k for k in range(1, len(key) + 1) if all(o[-k:] != key[-k:] for o in others)), None)
        # no k when only the extension differs (a/roofs.json, a/roofs.js): the whole path then
        labels.append(str(Path(*key[-k:])) if k else str(full[i]))
    return labels


def compare_table(runs: Mapping[str, RoofsRecord], datasheets: Sequence[Row] = ()) -> pd.DataFrame:
    """One row per ceiling name; for each labelled run its best valid value, how it performs against the first
    run (kernels.base.relative: twice the first's launch time is 0.5), and one column per datasheet
    (Row.peaks() via the ceiling's peak_key). Values in base units."""
    if not runs:
        raise CeilingsError("nothing to compare: give at least one roofs file")
    labels = list(runs)
    best = {label: roofs.best_by_name() for label, roofs in runs.items()}
    meta: dict[str, dict] = {}
    for label in labels:  # every ceiling name, in order of first appearance, even if never valid
        for c in runs[label].ceilings:
            meta.setdefault(c.name, {"unit": c.unit, "peak_key": c.peak_key, "kind": c.kind})
    records = []
    for name, info in meta.items():
        record = {"ceiling": name, **info}
        for label in labels:
            c = best[label].get(name)
            record[label] = c.value if c else math.nan
        first = record[labels[0]]
        for label in labels[1:]:
            record[label + VERSUS_FIRST] = relative(info["kind"], record[label], first) if first else math.nan
        for row in datasheets:
            record[DATASHEET_PREFIX + row.display_name] = row.peaks().get(info["peak_key"], math.nan)
        records.append(record)
    columns = ["ceiling", *FACTS, *labels, *(lb + VERSUS_FIRST for lb in labels[1:]),
               *(DATASHEET_PREFIX + r.display_name for r in datasheets)]
    return pd.DataFrame.from_records(records, columns=columns).set_index("ceiling")


def number_columns(table: pd.DataFrame) -> list[str]:
    """The measured, versus-first and datasheet columns, in table order."""
    return [c for c in table.columns if c not in FACTS]


def value_columns(table: pd.DataFrame) -> list[str]:
    """The measured and datasheet columns (not the versus-first ones), in table order."""
    return [c for c in number_columns(table) if not c.endswith(VERSUS_FIRST)]


def format_table(table: pd.DataFrame) -> str:
    """Human-readable text: a legend naming each column [n], then values in GB/s or TFLOP/s, how each run
    performs against [1] as 0.93x (below 1: worse, a latency too), missing as '-'."""
    ids = {col: f"[{i}]" for i, col in enumerate(value_columns(table), start=1)}
    first = value_columns(table)[0]
    shown = pd.DataFrame(index=table.index)
    shown["unit"] = [DISPLAY[u][1] for u in table["unit"]]
    for col in number_columns(table):
        if col.endswith(VERSUS_FIRST):
            head = f"{ids[col.removesuffix(VERSUS_FIRST)]}vs{ids[first]}"
            shown[head] = [f"{v:.2f}x" if not math.isnan(v) else "-" for v in table[col]]
        else:
            shown[ids[col]] = [f"{v / DISPLAY[u][0]:.4g}" if not math.isnan(v) else "-"
                               for v, u in zip(table[col], table["unit"])]
    legend = "\n".join(f"{ids[col]} {col}" for col in ids)
    return f"{legend}\n{shown.to_string()}"


def plot_compare(ax, table: pd.DataFrame, unit: str) -> None:
    """Grouped bars on `ax` for the ceilings in `unit`: one bar group per ceiling, one bar per value column
    (runs, then datasheets), log y axis in GB/s or TFLOP/s. Missing values are NaN-height bars."""
    rows = table[table["unit"] == unit]
    scale, label = DISPLAY[unit]
    columns = value_columns(table)
    width = BAR_GROUP / max(len(columns), 1)
    x = range(len(rows))
    for i, col in enumerate(columns):
        bars = ax.bar([xi + (i - (len(columns) - 1) / 2) * width for xi in x], rows[col] / scale, width,
                      label=col, hatch="//" if col.startswith(DATASHEET_PREFIX) else None)
        ax.bar_label(bars, labels=["" if v != v else f"{v:.0f}" if v >= 100 else f"{v:.3g}"
                                   for v in rows[col] / scale], fontsize="x-small", rotation=90, padding=2)
    ax.set_xticks(list(x), list(rows.index), rotation=30, ha="right")
    ax.set_yscale("log")
    values = rows[columns].to_numpy(dtype=float) / scale
    if (values > 0).any():
        # log bars start at the axis bottom: put it a decade under the smallest bar so heights compare; above
        # the tallest, room for its value: LABEL_ROOM of the axis, at least a factor 3
        # in decades, kept within float64 (a value near 1e308 or 5e-324 in a file has no room beyond it)
        low = math.log10(float(values[values > 0].min())) - 1
        high = math.log10(float(values[values > 0].max()))
        room = max(math.log10(3), LABEL_ROOM / (1 - LABEL_ROOM) * (high - low))
        ax.set_ylim(bottom=10 ** max(low, -LIMIT_DECADES), top=10 ** min(high + room, LIMIT_DECADES))
    ax.set_ylabel(label)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.3))


def compare_page(table: pd.DataFrame) -> str:
    """ceilings.compare --html: per panel (bandwidth, compute) a row per ceiling, a dot per roofs file and
    datasheet (compare_table), on a log axis; then the whole table."""
    columns = value_columns(table)
    series = [(c, SERIES_COLORS[i % len(SERIES_COLORS)]) for i, c in enumerate(columns)]
    first = columns[0]
    sections = []
    for unit, title in panels(table):
        rows = []
        scale, shown = DISPLAY[unit]
        for name, r in table[table["unit"] == unit].iterrows():
            versus = finite_number(r[first]) and r[first]
            points = [(r[c], i, f"{name}: {c}", [("value", f"{r[c] / scale:.4g} {shown}")] + (
                [("vs the first", f"{relative(r['kind'], r[c], r[first]):.2f}x")] if c != first and versus else []),
                None) for i, c in enumerate(columns) if finite_number(r[c]) and r[c] > 0]
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
            ((fmt[c](r[c]) if fmt[c] else f"{r[c] / scale:.4g}") if finite_number(r[c]) else "",
             r[c] if finite_number(r[c]) else None) for c in numbers])
    sections.append(table_section("table", "Every ceiling", table_spec(
        [("ceiling", False), ("unit", False), *((c, True) for c in numbers)], cells),
        notes=["best valid value per ceiling name per file; datasheet columns by each ceiling's peak key"]))
    simulated = any(c.endswith(SIMULATED_MARK) for c in columns)
    title = ("SIMULATED columns (Numba's CUDA simulator: meaningless numbers): " if simulated else "") + \
        "Ceilings side by side"
    return page(title, sections)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Print measured ceilings of one or more roofs files side by side (best valid value per "
                    "ceiling name per file, how each performs against the first file: 0.5x is half as fast, "
                    "or twice the first's latency), optionally with datasheet columns, "
                    "and draw a grouped bar chart (bandwidth and compute panels, log axes).")
    p.add_argument("roofs", nargs="+", help="roofs JSON files written by `python -m ceilings.measure`")
    p.add_argument("--datasheet", action="append", default=[], metavar="NAME",
                   help="add a datasheet column, e.g. 'H100 SXM' or 'A100 80GB SXM' (repeatable)")
    p.add_argument("-o", "--output", default="compare.png",
                   help="chart file: .png, .svg or .pdf (default: compare.png)")
    p.add_argument("--csv", metavar="OUT", help="also write the table (base units) as CSV")
    p.add_argument("--html", metavar="OUT.html", help="also write one self-contained interactive report")
    p.add_argument("--force", action="store_true", help="overwrite existing -o / --csv / --html files")
    add_verbose(p)
    return p.parse_args(argv)


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    out = atomic.Outputs(inputs=args.roofs, force=args.force)
    out.want("-o", args.output, picture=True)
    out.want("--csv", args.csv)
    out.want("--html", args.html)
    from .roofs import load_record

    runs: dict[str, RoofsRecord] = {}
    for path, name in zip(args.roofs, path_labels(args.roofs)):
        roofs = load_record(Path(path))
        runs[run_label(roofs, name)] = roofs
    rows = [find_datasheet(name) for name in args.datasheet]
    table = compare_table(runs, rows)
    print_warnings([f"{name}: SIMULATED on Numba's CUDA simulator: its numbers are meaningless"
                    for name, roofs in runs.items() if roofs.simulated], args.verbose)
    print(format_table(table))
    if args.csv:
        out.text(args.csv, table.to_csv())
    if args.html:
        out.text(args.html, compare_page(table))
    from matplotlib.figure import Figure

    shown = panels(table)
    bars = max((table["unit"] == unit).sum() for unit, _ in shown) * len(value_columns(table)) / BAR_GROUP
    fig = Figure(figsize=(max(PANEL_WIDTH, PANEL_MARGIN + BAR_INCHES * bars) * len(shown), 7), layout="constrained")
    for ax, (unit, title) in zip(fig.subplots(1, len(shown)), shown):
        plot_compare(ax, table, unit)
        ax.set_title(title)
    out.figure(args.output, fig, dpi=120, bbox_inches="tight")  # the legends sit under the axes
    out.commit(log=lambda path: print(f"wrote {path}", file=sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Read Nsight Compute / Nsight Systems outputs and tabulate FLOPs, bytes and time per kernel.

    python -m analysis.ncu FILE... [--nsys FILE] [--csv OUT] [--json OUT] [--per-launch]

Formats are detected from content, not from the file name: ncu text (--metrics layout, section layouts,
--print-summary per-kernel), ncu --csv details page, ncu --page raw --csv, .ncu-rep (through NVIDIA's
ncu_report module when an ncu install provides it), nsys cuda_gpu_kern_sum/gpukernsum (CSV or text, also
inside `nsys profile --stats=true` output), and this tool's own --csv output.

Python use: `read_profile(path)` gives one row per launch with raw metrics in base units;
`kernel_table(paths, nsys=None, per_launch=False)` gives the columns in `OUTPUT_COLUMNS`.
See docs/ncu-ingestion.md for the formulas and their caveats.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import json
import math
import os
import shutil
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ceilings.atomic import write_text
from ceilings.errors import CeilingsError, cli_entry

from . import ncu_csv, ncu_text
from .metrics import EXTENSIVE, OUTPUT_COLUMNS, TENSOR_METRICS, derive, with_rates
from .units import unit_factor

PROG = "python -m analysis.ncu"
NCU_REP_MAGIC = b"NVR\0"
UTF8_BOM = b"\xef\xbb\xbf"
BINARY_PROBE_BYTES = 65536  # a NUL byte in the first 64 KiB means binary, not text output
LAUNCH_COLUMNS = ["grid", "block", "device", "cc"]
META_COLUMNS = ["run", "id", "kernel", "launches", *LAUNCH_COLUMNS, "source", "name_truncated"]
TOP_KERNELS = 20  # rows of the printed table
PRINT_NAME_WIDTH = 60
NCU_REPORT_DIRS = ("/opt/nvidia/nsight-compute/*/extras/python", "/opt/nvidia/nsight-compute*/extras/python",
                   "/usr/local/cuda*/nsight-compute*/extras/python", "/usr/local/NVIDIA-Nsight-Compute*/extras/python")


def read_profile(path: str | os.PathLike) -> pd.DataFrame:
    """One row per launch (per kernel for summaries and nsys, with `launches` = N and values per launch).

    Columns: run, id, kernel, launches, grid, block, device, cc, source ('ncu' or 'nsys'), name_truncated,
    then one column per metric in base units (bytes, seconds, hertz, counts; percentages in percent).
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CeilingsError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise CeilingsError(f"{p}: is a folder; pass the profiler output files") from None
    except OSError as exc:
        raise CeilingsError(f"{p}: cannot read ({exc.strerror})") from None
    if not data or data.isspace():
        raise CeilingsError(f"{p}: empty file; expected Nsight Compute or Nsight Systems output")
    if data.startswith(NCU_REP_MAGIC):
        return _finish(_read_ncu_rep(p), p, data)
    if b"\0" in data[:BINARY_PROBE_BYTES]:
        raise CeilingsError(f"{p}: binary file, not Nsight Compute/Systems text or CSV output")
    # read_csv may read a regular file again by path (faster than from memory); not a pipe (drained), and
    # not a file whose bytes were changed below (a BOM: the header must start the line)
    file = p if stat.S_ISREG(p.stat().st_mode) and not data.startswith(UTF8_BOM) else None
    data = data.removeprefix(UTF8_BOM)  # Windows `Out-File -Encoding utf8`
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    return _finish(_read_text_forms(data, str(p), file), p, data)


def _read_text_forms(data: bytes, path: str, file: Path | None = None) -> pd.DataFrame:
    """CSV forms are read from the bytes (read_csv decodes them); text forms are decoded first."""
    own = ncu_csv.find_own_csv(data)
    if own is not None:
        return ncu_csv.read_own(data, own, path)
    header = ncu_csv.find_ncu_header(data)
    if header:
        start, line = header
        if b'"Metric Name"' in line:
            return ncu_csv.read_details(data, start, path, file)
        return ncu_csv.read_raw(data, start, path)
    text = data.decode("utf-8", errors="replace")
    if ncu_csv.find_nsys_csv(data):
        return ncu_csv.read_nsys_csv(text, path)
    launches, profiler_seen = ncu_text.scan_text(text, path)
    if not launches:
        if profiler_seen:
            raise CeilingsError(f"{path}: profiler output without any kernel results (did the profiled run "
                                f"fail or launch no kernel? see its ==ERROR== lines)")
        if _is_roofs_file(data):
            raise CeilingsError(f"{path} is a roofs file (ceilings.measure output); pass it with --roofs")
        raise CeilingsError(f"{path}: not Nsight Compute or Nsight Systems output (no kernel heading, ncu CSV "
                            f"header or nsys kernel summary found)")
    meta = pd.DataFrame.from_records(
        [(x.run, x.id, x.kernel, x.launches, x.grid, x.block, x.device, x.cc, x.source, x.name_truncated)
         for x in launches], columns=META_COLUMNS)
    metrics = pd.DataFrame.from_records([x.metrics for x in launches], index=meta.index)
    return pd.concat([meta, metrics], axis=1)


def _is_roofs_file(data: bytes) -> bool:
    """A roofs document (docs/roofs-schema.md): a JSON object with "schema_version" and "ceilings"."""
    if not data.lstrip().startswith(b"{"):
        return False
    try:
        doc = json.loads(data)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return False
    return isinstance(doc, dict) and "schema_version" in doc and "ceilings" in doc


def _finish(df: pd.DataFrame, path: Path, data: bytes) -> pd.DataFrame:
    if df.empty:
        raise CeilingsError(f"{path}: profiler output without any kernel results")
    for col, default in (("source", "ncu"), ("name_truncated", False), *((c, None) for c in LAUNCH_COLUMNS)):
        if col not in df.columns:
            df[col] = default
    if df["kernel"].isna().any() or (df["kernel"].astype(str) == "").any():
        raise CeilingsError(f"{path}: a launch without a kernel name; truncated or edited file?")
    _launch_facts_from_metrics(df)
    rest = [c for c in df.columns if c not in META_COLUMNS]
    if not np.isfinite(df[rest].to_numpy(dtype="float64")).any():
        raise CeilingsError(f"{path}: every metric of every launch is missing (n/a or nan): ncu ran but measured "
                            f"nothing{_first_error(data)}")
    df = df[META_COLUMNS + rest].reset_index(drop=True)
    df["launches"] = df["launches"].astype("int64")
    return df


def _launch_facts_from_metrics(df: pd.DataFrame) -> None:
    """cc, grid and block from the device__attribute_* / launch__* metrics, in every format, where the
    kernel heading or CSV columns did not give them."""
    major = df.get("device__attribute_compute_capability_major")
    minor = df.get("device__attribute_compute_capability_minor")
    if major is not None and minor is not None:
        known = major.notna() & minor.notna()
        cc = major[known].astype("int64").astype(str) + "." + minor[known].astype("int64").astype(str)
        df["cc"] = df["cc"].where(df["cc"].notna(), cc)
    for col, metric in (("grid", "launch__grid_size"), ("block", "launch__block_size")):
        if metric in df.columns:
            known = df[metric].notna()
            df[col] = df[col].where(df[col].notna(), df.loc[known, metric].astype("int64").astype(str))


def _first_error(data: bytes) -> str:
    """'; its first error, at line N: ==ERROR== ...' when the output has an ==ERROR== line, else ''."""
    hit = next(ncu_csv.lines_starting(data, b"==ERROR=="), None)
    if hit is None:
        return ""
    pos, line = hit
    lineno = data.count(b"\n", 0, pos) + 1
    return f"; its first error, at line {lineno}: {line.decode(errors='replace').strip()}"


# ---------------------------------------------------------------------------------------------- .ncu-rep
def _import_ncu_report():
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    candidates = []
    ncu = shutil.which("ncu")
    if ncu:
        candidates.append(str(Path(ncu).resolve().parent / "extras" / "python"))
    for pattern in NCU_REPORT_DIRS:
        candidates.extend(sorted(glob.glob(pattern), reverse=True))  # newest version first
    for folder in candidates:
        if (Path(folder) / "ncu_report.py").is_file():
            sys.path.insert(0, folder)
            try:
                return importlib.import_module("ncu_report")
            except ImportError:
                sys.path.remove(folder)
    return None


def _read_ncu_rep(path: Path) -> pd.DataFrame:
    module = _import_ncu_report()
    if module is None:
        raise CeilingsError(f"{path}: an .ncu-rep report needs NVIDIA's ncu_report module (ships with Nsight "
                            f"Compute in extras/python; not found); convert it with: ncu --import {path} --csv "
                            f"--page raw > {path}.csv")
    try:
        context = module.load_report(str(path))
        rows = []
        for r in range(context.num_ranges()):
            rng = context.range_by_idx(r)
            for a in range(rng.num_actions()):
                rows.append(_action_row(rng.action_by_idx(a), r, a))
    except CeilingsError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure inside NVIDIA's module is a bad report
        raise CeilingsError(f"{path}: ncu_report could not read it ({type(exc).__name__}: {exc}); convert it "
                            f"with: ncu --import {path} --csv --page raw > {path}.csv") from None
    return pd.DataFrame(rows)


def _action_row(action, run: int, index: int) -> dict:
    from .ncu_text import metric_key

    row = {"run": run, "id": index, "kernel": action.name(), "launches": 1}
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        try:
            value = float(metric.as_double())
        except (TypeError, ValueError):
            continue
        if not math.isnan(value):
            row[metric_key(None, name)] = value * unit_factor(metric.unit())
    return row


# -------------------------------------------------------------------------------------------- the table
def _merge_runs(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Runs that each collected some metrics become one: merged by kernel name and launch order."""
    parts = []
    for i, df in enumerate(frames):
        part = df.copy()
        part.insert(0, "_run", pd.factorize(part["run"])[0] + (i << 20))
        parts.append(part)
    allruns = pd.concat(parts, ignore_index=True, sort=False)
    allruns = allruns.sort_values(["_run", "id"], kind="stable")
    allruns["_occ"] = allruns.groupby(["_run", "kernel"], sort=False).cumcount()
    merged = allruns.groupby(["kernel", "_occ"], sort=False, dropna=False).first().reset_index()
    merged["id"] = np.arange(len(merged))
    return merged.drop(columns=["_occ", "_run", "run"])


def _nsys_match(kernels: Iterable[str], nsys: pd.DataFrame) -> dict[str, float]:
    """ncu kernel name -> nsys time per launch; nsys cuts names at 100 characters, so match by prefix."""
    exact = nsys[~nsys["name_truncated"]].drop_duplicates("kernel").set_index("kernel")["gpu__time_duration.sum"]
    cut = nsys[nsys["name_truncated"]]
    found = {}
    for name in kernels:
        if name in exact.index:
            found[name] = float(exact[name])
            continue
        hits = cut[[name.startswith(prefix) for prefix in cut["kernel"]]]
        if len(hits):
            longest = hits["kernel"].str.len().max()
            best = hits[hits["kernel"].str.len() == longest]
            if len(best) == 1:  # two nsys rows with the same cut name: ambiguous, leave the time missing
                found[name] = float(best["gpu__time_duration.sum"].iloc[0])
    return found


def kernel_table(paths: Sequence[str | os.PathLike] | str | os.PathLike,
                 nsys: Sequence[str | os.PathLike] | str | os.PathLike | None = None,
                 per_launch: bool = False) -> pd.DataFrame:
    """The kernel table: OUTPUT_COLUMNS per kernel (summed over launches), or per launch with `id` and
    grid/block/device/cc. Extensive columns are totals over the row's `launches`; missing metrics are NaN.
    Per kernel, `table.attrs["warnings"]` names the metrics that some but not all launches of a kernel had.
    """
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    nsys = [nsys] if isinstance(nsys, (str, os.PathLike)) else list(nsys or [])
    if not paths:
        raise CeilingsError("no input files given")
    frames = [read_profile(p) for p in paths]
    nsys_frames = [read_profile(p) for p in nsys]
    for p, f in zip(nsys, nsys_frames):
        if not (f["source"] == "nsys").all():
            raise CeilingsError(f"{p}: given as --nsys but it is not an nsys kernel summary")
    ncu_frames = [f[f["source"] == "ncu"] for f in frames]
    ncu_frames = [f for f in ncu_frames if len(f)]
    nsys_rows = pd.concat([f[f["source"] == "nsys"] for f in frames + nsys_frames], ignore_index=True)

    warnings = []
    if ncu_frames:
        launches = _merge_runs(ncu_frames)
        derived = derive(launches)
        tensor = launches.reindex(columns=list(TENSOR_METRICS)).fillna(0).gt(0).any(axis=1)
        unknown = int((tensor & derived["flops_tensor"].isna()).sum())
        if unknown:
            warnings.append(f"flops_tensor: unknown for {unknown} launch(es) with tensor instructions: the "
                            "profile has no compute capability (collect device__attribute_compute_capability"
                            "_major/_minor) or no FLOPs-per-instruction rule for it (docs/ncu-ingestion.md)")
        if len(nsys_rows):
            needed = launches.loc[derived["time_s"].isna(), "kernel"].unique()
            times = _nsys_match(needed, nsys_rows)
            derived["time_s"] = derived["time_s"].fillna(launches["kernel"].map(times))
            unmatched = [str(k) for k in needed if k not in times]
            if unmatched:
                warnings.append(f"time_s: {len(unmatched)} kernel(s) without an ncu time match no nsys kernel "
                                f"name, or two cut to the same prefix (first: {unmatched[0][:60]!r}); they have "
                                "no rates")
    else:  # nsys summaries alone: times only
        launches = nsys_rows.assign(id=np.arange(len(nsys_rows)))
        derived = derive(launches)

    table = pd.concat([launches[["id", "kernel", "launches", *LAUNCH_COLUMNS]], derived], axis=1)
    table[EXTENSIVE] = table[EXTENSIVE].mul(table["launches"], axis=0)
    if per_launch:
        out = with_rates(table)[["id", *OUTPUT_COLUMNS, *LAUNCH_COLUMNS]].reset_index(drop=True)
    else:
        out = _per_kernel(table)
    out.attrs["warnings"] = warnings + out.attrs.get("warnings", [])
    return out


def _per_kernel(table: pd.DataFrame) -> pd.DataFrame:
    """Totals per kernel. A total is missing unless every launch of the kernel has the metric: a sum over
    some launches divided by the time of all would give wrong rates. Metrics lost so are in
    attrs["warnings"]."""
    groups = table.groupby("kernel", sort=False)
    counts = groups[EXTENSIVE].count()
    complete = counts.eq(groups.size(), axis=0)
    out = groups[EXTENSIVE].sum().where(complete)
    out["launches"] = groups["launches"].sum()
    out["sm_clock_hz"] = groups["sm_clock_hz"].mean()
    out = with_rates(out.reset_index())
    extra = []
    for col in ("cc", "device"):  # kept when every launch of every kernel agrees
        values = table[col].dropna().unique()
        if len(values) == 1:
            out[col] = values[0]
            extra.append(col)
    out = out.sort_values("time_s", ascending=False, na_position="last", kind="stable")
    out = out[[*OUTPUT_COLUMNS, *extra]].reset_index(drop=True)
    lost = (counts.gt(0) & ~complete).sum()
    out.attrs["warnings"] = [f"{col}: missing for {n} kernel(s) because only some of their launches have it"
                             for col, n in lost.items() if n]
    return out


# ------------------------------------------------------------------------------------------ printing
_PRINTED = (  # column, title, scale, format
    ("launches", "launches", 1, "{:.0f}"),
    ("time_s", "time ms", 1e3, "{:.4g}"),
    ("flops", "GFLOP", 1e-9, "{:.4g}"),
    ("dram_bytes", "DRAM GB", 1e-9, "{:.4g}"),
    ("ai_dram", "FLOP/B", 1, "{:.3g}"),
    ("flop_per_s", "TFLOP/s", 1e-12, "{:.4g}"),
    ("dram_bytes_per_s", "GB/s", 1e-9, "{:.4g}"),
    ("sm_clock_hz", "SM GHz", 1e-9, "{:.3g}"),
)


def format_table(table: pd.DataFrame, top: int = TOP_KERNELS) -> str:
    """Fixed-width text of the `top` kernels by time (missing values as '-')."""
    rows = table.sort_values("time_s", ascending=False, na_position="last", kind="stable").head(top)
    cells = [[title for _, title, _, _ in _PRINTED] + ["kernel"]]
    for _, row in rows.iterrows():
        name = str(row["kernel"])
        name = name if len(name) <= PRINT_NAME_WIDTH else name[:PRINT_NAME_WIDTH - 1] + "…"
        cells.append([("-" if pd.isna(row[col]) else fmt.format(row[col] * scale))
                      for col, _, scale, fmt in _PRINTED] + [name])
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]) - 1)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in cells]
    return "\n".join(lines)


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Tabulate FLOPs, bytes and time per kernel from Nsight Compute (text, CSV, raw CSV, "
                    ".ncu-rep) and Nsight Systems outputs; formats are detected from content.",
        epilog="Several files (e.g. one ncu run per metric) are merged by kernel name and launch order. "
               "Missing metrics stay empty (CSV) / null (JSON), never 0. See docs/ncu-ingestion.md.")
    parser.add_argument("files", nargs="+", help="ncu/nsys outputs, or this tool's own --csv output")
    parser.add_argument("--nsys", action="append", default=[], metavar="FILE",
                        help="nsys cuda_gpu_kern_sum/gpukernsum output (CSV or text) for kernel times")
    parser.add_argument("--csv", metavar="OUT", help="write the table as CSV ('-': standard output)")
    parser.add_argument("--json", metavar="OUT", help="write the table as JSON records ('-': standard output)")
    parser.add_argument("--per-launch", action="store_true", help="one row per launch instead of per kernel")
    parser.add_argument("--top", type=int, default=TOP_KERNELS, help="rows of the printed table (default 20)")
    args = parser.parse_args(argv)
    if args.top < 0:
        raise CeilingsError(f"--top {args.top}: must be 0 or more")
    table = kernel_table(args.files, nsys=args.nsys, per_launch=args.per_launch)
    for w in table.attrs.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    if args.csv:
        write_text(args.csv, table.to_csv(index=False))
    if args.json:
        write_text(args.json, table.to_json(orient="records", indent=1) + "\n")
    if not (args.csv or args.json):
        print(format_table(table, args.top))
        print(f"{len(table)} {'launches' if args.per_launch else 'kernels'}, top {min(args.top, len(table))} "
              f"by time shown", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

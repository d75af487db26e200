"""Vectorised readers for the CSV forms: ncu details page, ncu raw page, nsys kernel summary, and this
tool's own kernel table. Each returns one row per launch (or per kernel, with `launches` = N and values
per launch) with metric values in base units.

Columns are found by name, never by position. Rows shorter than the header are padded; rule rows (empty
metric fields), repeated headers and lines of application output are dropped.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import pandas as pd

from ceilings.errors import CeilingsError

from .metrics import EXTENSIVE, canonical_metric
from .ncu_text import CLI_SECTION, metric_key
from .units import parse_value, parse_values, unit_factor, unit_factors

NCU_CSV_HEADER = re.compile(r'^"ID",(?:"[^"\n]*",)*?"Kernel Name".*$', re.MULTILINE)
NSYS_CSV_HEADER = re.compile(r'^"?Time ?\(%\)"?,.*Instances.*Name"?\s*$', re.MULTILINE)
OWN_CSV_HEADER = re.compile(r"^(?:id,)?kernel,launches,time_s,flops_fp64,flops_fp32,", re.MULTILINE)

# Columns of the raw page that describe the launch rather than measure it.
RAW_META = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
            "Metric Value", "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
            "Estimated Speedup"}
_NON_CSV_LINE = re.compile(r'^(?!")(?=.)', re.MULTILINE)


def _ncu_frame(text: str, start: int, path: str) -> pd.DataFrame:
    body = text[start:]
    if _NON_CSV_LINE.search(body):  # application output or ==PROF== lines among the rows: every ncu cell is quoted
        body = "\n".join(line for line in body.split("\n") if line.startswith('"'))
    try:
        df = pd.read_csv(io.StringIO(body), dtype=str, na_filter=False, engine="c")
    except (pd.errors.ParserError, ValueError) as exc:
        raise CeilingsError(f"{path}: unreadable ncu CSV ({_one_line(exc)}); truncated or edited file?") from None
    df = df.fillna("")
    ids = pd.to_numeric(df["ID"], errors="coerce")
    df = df[ids.notna()]  # repeated header rows ("ID") and stray lines
    df.insert(0, "_id", ids[ids.notna()].astype("int64"))
    return df


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]


def _runs(df: pd.DataFrame) -> np.ndarray:
    """Several runs in one file (concatenated CSVs): one run per process, in order of appearance."""
    if "Process ID" in df.columns:
        return pd.factorize(df["Process ID"])[0]
    return np.zeros(len(df), dtype="int64")


def _launch_meta(df: pd.DataFrame) -> pd.DataFrame:
    cols = {"Kernel Name": "kernel", "Grid Size": "grid", "Block Size": "block", "Device": "device", "CC": "cc"}
    present = {k: v for k, v in cols.items() if k in df.columns}
    meta = df.drop_duplicates(["run", "_id"])[["run", "_id", *present]].rename(columns=present)
    for col in ("grid", "block", "device", "cc"):
        if col not in meta.columns:
            meta[col] = None
        else:
            meta[col] = meta[col].replace("", None)
    return meta.rename(columns={"_id": "id"}).set_index(["run", "id"])


def read_details(text: str, start: int, path: str) -> pd.DataFrame:
    """ncu --csv details page (12 to 20 columns, NVTX columns, rule rows): long -> wide, one row per launch."""
    df = _ncu_frame(text, start, path)
    for needed in ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value"):
        if needed not in df.columns:
            raise CeilingsError(f"{path}: ncu CSV without a {needed!r} column; expected --csv details output")
    df["run"] = _runs(df)
    meta = _launch_meta(df)
    df = df[df["Metric Name"] != ""]  # rule rows
    values = parse_values(df["Metric Value"]).to_numpy() * unit_factors(df["Metric Unit"])
    section = df["Section Name"] if "Section Name" in df.columns else pd.Series(CLI_SECTION, index=df.index)
    codes, uniques = pd.factorize(section + "\x1f" + df["Metric Name"])
    key_codes, key_names = pd.factorize(np.array([metric_key(*u.split("\x1f", 1)) for u in uniques] + [""]))
    long = pd.DataFrame({"run": df["run"].to_numpy(), "id": df["_id"].to_numpy(),
                         "metric": pd.Categorical.from_codes(key_codes[codes], key_names), "value": values})
    long = long[~np.isnan(long["value"].to_numpy())].drop_duplicates(["run", "id", "metric"])
    wide = long.set_index(["run", "id", "metric"])["value"].unstack("metric")
    wide.columns = list(wide.columns.astype(str))
    out = meta.join(wide, how="left").reset_index()
    out["launches"] = 1
    return out


def read_raw(text: str, start: int, path: str) -> pd.DataFrame:
    """ncu --page raw --csv: header row, units row, one row per launch; 'a; b' per-instance cells -> NaN."""
    body = text[start:]
    lines = [line for line in body.split("\n") if line.startswith('"')]
    if len(lines) < 2:
        raise CeilingsError(f"{path}: ncu raw CSV without its units row; truncated file?")
    units = next(csv.reader([lines[1]]))
    df = _ncu_frame("\n".join([lines[0], *lines[2:]]), 0, path)
    header = list(df.columns[1:])  # after _id
    unit_of = dict(zip(header, units + [""] * (len(header) - len(units))))
    df["run"] = _runs(df)
    meta = _launch_meta(df)
    metrics: dict[str, pd.Series] = {}
    for col in header:
        if col in RAW_META:
            continue
        series = pd.Series(parse_values(df[col]).to_numpy() * unit_factor(unit_of.get(col, "")), index=df.index)
        key = canonical_metric(col)
        metrics[key] = metrics[key].fillna(series) if key in metrics else series
    wide = pd.DataFrame(metrics)
    wide.index = pd.MultiIndex.from_arrays([df["run"].to_numpy(), df["_id"].to_numpy()], names=["run", "id"])
    wide = wide[~wide.index.duplicated()]
    out = meta.join(wide, how="left")
    major = out.get("device__attribute_compute_capability_major")
    minor = out.get("device__attribute_compute_capability_minor")
    if major is not None and minor is not None:
        cc = major.map(lambda v: "" if v != v else str(int(v))) + "." + minor.map(
            lambda v: "" if v != v else str(int(v)))
        out["cc"] = out["cc"].fillna(cc.where(major.notna() & minor.notna()))
    for col, metric in (("grid", "launch__grid_size"), ("block", "launch__block_size")):
        if metric in out.columns:
            out[col] = out[col].fillna(out[metric].map(lambda v: None if v != v else str(int(v))))
    out = out.reset_index()
    out["launches"] = 1
    return out


def read_nsys_csv(text: str, path: str) -> pd.DataFrame:
    """nsys stats cuda_gpu_kern_sum / gpukernsum CSV tables (possibly several reports in one file)."""
    rows = []
    for match in NSYS_CSV_HEADER.finditer(text):
        block = text[match.start():].split("\n\n", 1)[0].strip().split("\n")
        reader = csv.DictReader(block)
        for i, rec in enumerate(reader):
            name = (rec.get("Name") or "").strip()
            count = parse_value(rec.get("Instances") or "")
            total = parse_value(rec.get("Total Time (ns)") or "")
            avg_text = next((rec[k] for k in ("Avg (ns)", "Average (ns)", "Average", "Avg") if rec.get(k)), None)
            avg = parse_value(avg_text) if avg_text else total / count
            if not name or count != count or avg != avg:
                raise CeilingsError(f"{path}: unreadable nsys kernel summary row {i + 1}: {str(rec)[:80]}")
            truncated = name.endswith("…") or name.endswith("...")
            rows.append({"run": -1, "id": len(rows), "kernel": name.rstrip("…").rstrip(".") if truncated else name,
                         "launches": int(count), "source": "nsys", "name_truncated": truncated,
                         "gpu__time_duration.sum": avg * 1e-9})
    return pd.DataFrame(rows)


def read_own(text: str, start: int, path: str) -> pd.DataFrame:
    """This tool's --csv output read back: totals per row become values per launch again."""
    try:
        df = pd.read_csv(io.StringIO(text[start:]), keep_default_na=True, dtype={"kernel": str, "cc": str})
    except (pd.errors.ParserError, ValueError) as exc:
        raise CeilingsError(f"{path}: unreadable kernel table CSV ({_one_line(exc)})") from None
    launches = pd.to_numeric(df["launches"], errors="coerce")
    if df["kernel"].isna().any() or launches.isna().any() or (launches <= 0).any():
        raise CeilingsError(f"{path}: kernel table CSV with a row lacking kernel or launches; truncated file?")
    out = pd.DataFrame({"run": 0, "id": df["id"] if "id" in df.columns else np.arange(len(df)),
                        "kernel": df["kernel"], "launches": launches.astype("int64")})
    for col in EXTENSIVE:
        out[col] = pd.to_numeric(df.get(col), errors="coerce") / launches
    if "sm_clock_hz" in df.columns:
        out["sm_clock_hz"] = pd.to_numeric(df["sm_clock_hz"], errors="coerce")
    for col in ("grid", "block", "device", "cc"):
        out[col] = df[col].astype("object").where(df[col].notna(), None) if col in df.columns else None
    return out

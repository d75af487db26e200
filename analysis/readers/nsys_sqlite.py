"""Nsight Systems SQLite exports (`nsys export --type sqlite`), and `.nsys-rep` reports exported to one by
`nsys export` when nsys is on PATH: one row per kernel launch with its full name (never cut, unlike the
`nsys stats` text), its time, grid, block, GPU, process and the NVTX ranges it was launched in; for a caller
that uses sums only (contract: each_launch, ranges), one row per kernel, process, grid, block, GPU (and ranges),
with the ranges left unread where it uses none.

The schema, read by table and column name (sources):
- CUPTI_ACTIVITY_KIND_KERNEL: start, end (ns), deviceId, correlationId, globalPid, demangledName (a StringIds
  id: the name with templates and signature, the name ncu prints; shortName is the bare function name),
  gridX/Y/Z, blockX/Y/Z. Sources: NVIDIA's "SQLite Export Schema Reference" (nsys-exporter/exported_data.html;
  the opening of the copies shipped with CUDA 10.1, nsys 2020.1 and 2021.5: start, end, deviceId, correlationId
  here, globalTid, correlationId, nameId of API calls), the annotated column list of a recent nsys (with 2024's
  greenContextId) quoted in public code, and the report scripts nsys ships (reports/cuda_gpu_trace.py,
  cuda_kern_exec_trace.py, nvtx_kern_sum.py, copyright 2020-2024), which read all these columns.
- StringIds(id, value): every name is an id into it.
- CUPTI_ACTIVITY_KIND_RUNTIME: start, end, globalTid, correlationId: the API call that launched a kernel has its
  correlationId in its process: `k.globalPid == (r.globalTid & 0xFFFFFFFFFF000000)` in cuda_kern_exec_trace.py
  and nvtx_kern_sum.py (correlation ids repeat across processes).
- globalPid and globalTid are serialized ids: PID = (id >> 24) & 0xFFFFFF, TID = id & 0xFFFFFF (those scripts:
  `(r.globalTid >> 24) & 0x00FFFFFF AS pid`, cuda_gpu_trace.py: `globalPid / 0x1000000 % 0x1000000 AS PID`);
  the bits above 48 tell hosts or VMs apart.
- NVTX_EVENTS: start, end (NULL: never closed), eventType, text or textId (StringIds; the name is
  `coalesce(sid.value, ne.text)` in nvtx_kern_sum.py), globalTid. eventType 59 is a push/pop range, 60 a
  start/end range, 70 and 71 the same of NVTXT (EVENT_TYPE_NVTX[T]_PUSHPOP/STARTEND_RANGE in
  nvtx_kern_sum.py; 75 creates a domain, not a range).
- TARGET_INFO_GPU: id (the kernels' deviceId: cuda_gpu_trace.py joins `gpu.id == kern.deviceId`), name; where
  the table has them (the schema reference of nsys 2026.4, schema 3.28.1, lists them all), computeMajor,
  computeMinor, and the GPU facts smCount, totalMemory (B) and clockRate (Hz; taken as CUDA's clock rate, the max
  SM clock), read into the ncu device attributes they are (GPU_FACT_COLUMNS).

Across versions: nsys 2021.1-2021.2 named the GPU table TARGET_INFO_CUDA_GPU (keyed by deviceId; per a public
port of nsys 2021.1's reports): such an export gives no GPU name here. textId (NVTX names in StringIds) and
mangledName came later than text and demangledName; greenContextId in 2024 (neither is needed). The docs of
2019-2021 say every column is NOT NULL and a missing value is exported as its default, so a 0 id or size is
missing, not a value.

NVTX ranges of a launch, as nvtx_kern_sum.py places kernels: those that enclose the launch's API call
(start <= call start, call end <= end), not its execution. Push/pop ranges are thread ranges: the call's
thread's only. Start/end ranges are process ranges (NVTX docs: one may end on another thread than it began):
any of the call's process (nvtx_kern_sum.py matches these on the thread too). A range never closed lasts to
the end of the trace (nvtx_kern_sum.py: `ifnull(ne.end, max)`); one without a name is left out. Outermost
first: by start, then the longer (then by name). A launch whose API call the export lacks has nvtx None
(unknown); without NVTX_EVENTS every launch has (). A launch keeps at most the innermost MAX_DEPTH (64) of the
ranges open at its call's start (more means ranges pushed and never popped, which would make each launch's list
grow with the run): a note counts the launches cut and the ranges never closed.

`.nsys-rep` (and the older `.qdrep`): no source consulted states its magic bytes, so a report is recognised by
its name and binary content (a NUL byte in its first 64 KiB) and handed to nsys, which checks the rest.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tempfile
from collections import defaultdict
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from common.errors import QUOTED_ERROR_CHARS, CeilingsError, describe

from .bulk import MAX_DEPTH, open_ranges, paused_gc, row_codes
from .contract import HEAD_BYTES, TIMES, Format, Source
from .nsys import TIME_METRIC

MAGIC = b"SQLite format 3\0"  # the first 16 bytes of every SQLite database (sqlite.org/fileformat2.html)
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
PUSH_POP = (59, 70)
START_END = (60, 71)
TID_BITS = 24
PID_MASK = 0xFFFFFF
KERNEL_COLUMNS = ("start", "end", "deviceId", "correlationId", "globalPid", "demangledName",
                  "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
CHUNK_ROWS = 65536  # rows fetched at a time
SQL_PARAMETERS = 900  # parameters of one query (SQLite's limit was 999 before 3.32)
NULL = -(2**63)  # a NULL integer as fetched: no exported value is this
NEVER = np.iinfo("int64").max  # the end of a range never closed: it lasts to the end of the trace
EXPORT_TIMEOUT_S = 1800  # a report of a long run exports for minutes; a hung nsys must not hang the command


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _packed_dims(columns: tuple[str, str, str]) -> str:
    """SQL packing a launch's x, y, z sizes into one integer (x in bits 0-30, y from 31, z from 47; fetching one
    value a row, not three, is most of the reading time), 0 where the export has no size (0, the exported
    default of a missing value) or one no CUDA launch has (y or z above 65535, x above 2^31 - 1)."""
    x, y, z = columns
    return (f"CASE WHEN typeof({x}) = 'integer' AND typeof({y}) = 'integer' AND typeof({z}) = 'integer' AND "
            f"{x} BETWEEN 1 AND {2**31 - 1} AND {y} BETWEEN 1 AND 65535 AND {z} BETWEEN 1 AND 65535 "
            f"THEN {x} + ({y} << 31) + ({z} << 47) ELSE 0 END")


def _dims(packed: int) -> str | None:
    """'(x, y, z)' of _packed_dims' integer; None where the export has no size."""
    return f"({packed & (2**31 - 1)}, {(packed >> 31) & 65535}, {packed >> 47})" if packed else None


def _pid(global_id: int) -> str | None:
    return str((global_id >> TID_BITS) & PID_MASK) if global_id else None


class NotIntegers(Exception):
    """A value of an integer column of `table` that is none (text, NULL, beyond int64): an edited or corrupt
    export; read_export names the file."""


def _fetch(con: sqlite3.Connection, query: str, columns: int, table: str) -> np.ndarray:
    """The integer rows of `query` (from `table`) as an int64 array, CHUNK_ROWS at a time (never a million tuples
    at once); NotIntegers where a value is none. A real number is cut to an integer (nsys writes none: finding
    one would cost each value a type test, 5% of the reading)."""
    cursor = con.execute(query)
    try:
        parts = [np.array(rows, dtype="int64") for rows in iter(lambda: cursor.fetchmany(CHUNK_ROWS), [])]
    except (ValueError, TypeError, OverflowError):  # numpy's cast of text, of None, of a number past int64
        raise NotIntegers(table) from None
    return np.concatenate(parts) if parts else np.empty((0, columns), dtype="int64")


def _strings(con: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    """StringIds' values of `ids` (those it has), looked up by primary key a batch at a time."""
    out = {}
    for batch in np.array_split(ids, len(ids) // SQL_PARAMETERS + 1):
        out.update(con.execute(f"SELECT id, value FROM StringIds WHERE id IN ({', '.join('?' * len(batch))})",
                               batch.tolist()))
    return out


def _by_value(values: np.ndarray, convert) -> np.ndarray:
    """convert(value) for each of `values` (an object array), computed once per distinct value (a million
    launches, a few hundred names, sizes and devices)."""
    codes, unique = pd.factorize(values)
    converted = np.empty(len(unique), dtype=object)
    converted[:] = [convert(v) for v in unique.tolist()]
    return converted[codes]


def _grouped(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows grouped by their code (0, 1, ...): the rows in code order (stable: each group in row order), the
    size of each group and where each begins in that order."""
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes)
    return order, sizes, np.cumsum(sizes) - sizes


def _summed(keys: np.ndarray, ns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Launches in start order summed by their row of `keys`: for each distinct row, in the order of its first
    launch, that launch's index, the number of launches and their total of `ns` (int64: exact)."""
    order, launches, bounds = _grouped(row_codes(keys.T))
    total = np.add.reduceat(ns[order], bounds) if len(ns) else ns
    return order[bounds], launches, total


def _runs(process: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows in start order, labelled by process (None: unknown): the run of each (one per process, in the
    order of its first row) and its place in its run."""
    run = pd.factorize(pd.Series(process, dtype=object).fillna(""))[0]
    order, sizes, bounds = _grouped(run)
    place = np.empty(len(run), dtype="int64")
    place[order] = np.arange(len(run)) - np.repeat(bounds, sizes)
    return run, place


# TARGET_INFO_GPU's GPU facts, as the ncu device attributes they are (analysis.ncu.GPU_FACTS), in base units
GPU_FACT_COLUMNS = {"smCount": "device__attribute_multiprocessor_count",
                    "totalMemory": "device__attribute_total_memory",
                    "clockRate": "device__attribute_max_gpu_frequency_khz"}


def _gpus(con: sqlite3.Connection, tables: set[str]) -> dict[int, tuple]:
    """deviceId -> (name, compute capability, then the GPU_FACT_COLUMNS in their order), from TARGET_INFO_GPU
    where the export has it; what a column the table lacks would give is None, as is a 0 (a missing value)."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    have = _columns(con, "TARGET_INFO_GPU")
    cc = "computeMajor, computeMinor" if {"computeMajor", "computeMinor"} <= have else "NULL, NULL"
    columns = ", ".join(c if c in have else "NULL" for c in GPU_FACT_COLUMNS)
    facts = defaultdict(set)
    for device, name, major, minor, *numbers in con.execute(f"SELECT id, name, {cc}, {columns} FROM TARGET_INFO_GPU"):
        facts[device].add((name or None, f"{major}.{minor}" if major and minor is not None else None,
                           *(float(n) if n else None for n in numbers)))
    # a device listed twice with different facts (several hosts or VMs in one report) is unknown
    return {device: next(iter(f)) for device, f in facts.items() if len(f) == 1}


def _launches(con: sqlite3.Connection, tables: set[str], process: np.ndarray, corr: np.ndarray
              ) -> pd.DataFrame | None:
    """For each kernel (its process key, -1 where unknown, and correlationId) the API call that launched it:
    columns start, end, tid (globalTid), NaN where the export has none; None without the table. A key that
    two calls share is left out: which of them launched the kernel is unknown."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        return None
    calls = _fetch(con, "SELECT correlationId, globalTid, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE "
                        "globalTid IS NOT NULL AND correlationId IN "
                        "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL)", 4, "CUPTI_ACTIVITY_KIND_RUNTIME")
    calls = pd.DataFrame({"process": calls[:, 1] >> TID_BITS, "corr": calls[:, 0], "start": calls[:, 2],
                          "end": calls[:, 3], "tid": calls[:, 1]})
    calls = calls[~calls.duplicated(["process", "corr"], keep=False)]
    kernels = pd.DataFrame({"process": process, "corr": corr})
    return kernels.merge(calls, on=["process", "corr"], how="left")  # the kernels' order, one row each


def _ranges(con: sqlite3.Connection) -> tuple[dict, dict, int]:
    """The NVTX ranges, push/pop ones by thread (globalTid), start/end ones by process: for each key the
    ranges' starts and ends (a range never closed ends at NEVER) as arrays and names as a list, outermost
    first (by start, then the longer; then by name); and how many were never closed."""
    name = "coalesce(s.value, e.text)" if "textId" in _columns(con, "NVTX_EVENTS") else "e.text"
    join = "LEFT JOIN StringIds AS s ON s.id = e.textId" if name != "e.text" else ""
    by_thread, by_process, never_closed = defaultdict(list), defaultdict(list), 0
    for start, end, kind, text, tid in con.execute(
            f"SELECT e.start, e.end, e.eventType, {name}, e.globalTid FROM NVTX_EVENTS AS e {join} "
            f"WHERE e.eventType IN ({', '.join(map(str, PUSH_POP + START_END))}) AND {name} IS NOT NULL"):
        if type(start) is not int or type(tid) is not int or not (end is None or type(end) is int):
            raise NotIntegers("NVTX_EVENTS")  # start, end and globalTid are integers in every nsys export
        span = (start, NEVER if end is None else end, text)
        never_closed += end is None
        if kind in PUSH_POP:
            by_thread[tid].append(span)
        else:
            by_process[tid >> TID_BITS].append(span)

    def arrays(spans: list[tuple]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        spans.sort(key=lambda s: (s[0], -s[1], s[2]))
        return (np.array([s[0] for s in spans], dtype="int64"), np.array([s[1] for s in spans], dtype="int64"),
                [s[2] for s in spans])

    return ({k: arrays(v) for k, v in by_thread.items()}, {k: arrays(v) for k, v in by_process.items()},
            never_closed)


def _enclosing(ranges: dict, keys: np.ndarray, starts: np.ndarray, ends: np.ndarray
               ) -> tuple[np.ndarray, list[tuple], list[bool]]:
    """The ranges that enclose each call (its key in `ranges`, start, end): start <= call start and call end
    <= end. For each call the number of its set (-1 where its key has no ranges); each set as (key, indices
    of the key's ranges, outermost first, at most MAX_DEPTH); for each set whether ranges were left out."""
    of_call = np.full(len(keys), -1, dtype="int64")
    sets: list[tuple] = []
    deep: list[bool] = []
    order = np.argsort(keys, kind="stable")
    for rows in np.split(order, np.flatnonzero(np.diff(keys[order])) + 1) if len(order) else []:
        key = keys[rows[0]].item()
        if key not in ranges:
            continue
        r_start, r_end, _ = ranges[key]
        which, found, cut = open_ranges(r_start, r_end, starts[rows])
        of_call[rows] = which + len(sets)
        deep += cut.tolist()
        sets += [(key, chain) for chain in found]
        # a range open at the call's start but over before its end does not enclose it: such calls get a set
        # of their own (few: API calls last microseconds)
        by_end = np.sort(r_end)
        over = np.flatnonzero(np.searchsorted(by_end, ends[rows]) > np.searchsorted(by_end, starts[rows]))
        for row, end in zip(rows[over].tolist(), ends[rows[over]].tolist()):
            chain = sets[of_call[row]][1]
            deep.append(deep[of_call[row]])
            sets.append((key, tuple(i for i in chain if r_end[i] >= end)))
            of_call[row] = len(sets) - 1
    return of_call, sets, deep


def _chains(*chains: tuple) -> np.ndarray:
    """An object array of tuples (np.array would make a 2-D array of them)."""
    out = np.empty(len(chains), dtype=object)
    out[:] = chains
    return out


def _nvtx(con: sqlite3.Connection, tables: set[str], process: np.ndarray, corr: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The kernels' NVTX range names, outermost first (module docstring): the distinct tuples of names and
    each kernel's index into them (-1: unknown); how many launches were inside more than MAX_DEPTH ranges (the
    innermost MAX_DEPTH kept) and how many ranges were never closed. process: the kernels' process keys (-1:
    unknown)."""
    if "NVTX_EVENTS" not in tables:
        return _chains(()), np.zeros(len(corr), dtype="int64"), 0, 0
    by_thread, by_process, never_closed = _ranges(con)
    if not by_thread and not by_process:
        return _chains(()), np.zeros(len(corr), dtype="int64"), 0, 0
    calls = _launches(con, tables, process, corr)
    if calls is None:
        return _chains(), np.full(len(corr), -1, dtype="int64"), 0, never_closed
    known = np.flatnonzero(calls["tid"].notna().to_numpy())
    tid = calls["tid"].to_numpy()[known].astype("int64")
    start, end = calls["start"].to_numpy()[known].astype("int64"), calls["end"].to_numpy()[known].astype("int64")
    thread_set, thread_sets, thread_deep = _enclosing(by_thread, tid, start, end)
    process_set, process_sets, process_deep = _enclosing(by_process, tid >> TID_BITS, start, end)
    # launches in the same thread and process ranges (most of them) share one tuple of names
    pairs, unique = pd.factorize(pd.MultiIndex.from_arrays([thread_set, process_set]))
    names = np.empty(len(unique), dtype=object)
    cut = np.zeros(len(unique), dtype=bool)
    for n, (t, p) in enumerate(unique.tolist()):
        found = [(ranges, sets[i]) for ranges, sets, i in ((by_thread, thread_sets, t), (by_process, process_sets, p))
                 if i >= 0]
        spans = [(ranges[key][0][i], -ranges[key][1][i], ranges[key][2][i]) for ranges, (key, chain) in found
                 for i in chain]
        spans.sort(key=lambda s: (s[0], s[1]))  # stable: a thread's range before a process's of the same span
        names[n] = tuple(text for _, _, text in spans[-MAX_DEPTH:])
        cut[n] = len(spans) > MAX_DEPTH or (t >= 0 and thread_deep[t]) or (p >= 0 and process_deep[p])
    # one index per distinct tuple of names (two threads' sets may name the same ranges): a key to sum by
    same, distinct = pd.factorize(names)
    of_kernel = np.full(len(corr), -1, dtype="int64")
    of_kernel[known] = same[pairs]
    return _chains(*distinct), of_kernel, int(cut[pairs].sum()), never_closed


@paused_gc()
def read_export(db: str, label: str, each_launch: bool = True, ranges: bool = True) -> pd.DataFrame:
    """The launches of the SQLite export at path `db`; messages name `label` (the file the user passed).
    Without `ranges` NVTX ranges are left unread (nvtx None: neither the API calls nor NVTX_EVENTS are read,
    half the time of a large export); without `each_launch` the launches of each kernel, process, grid, block,
    GPU (and NVTX ranges) are summed into one row (launches = N, the time per launch from the exact total in
    ns): a million launches make a few thousand rows."""
    remedy = "export it again (`nsys export --type sqlite --output FILE.sqlite REPORT.nsys-rep`)"
    try:
        with closing(sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)) as con:
            tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
                raise CeilingsError(f"{label}: not an nsys export: no CUPTI_ACTIVITY_KIND_KERNEL table; was the run "
                                    f"traced with --trace=cuda?")
            missing = [c for c in KERNEL_COLUMNS if c not in _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")]
            if missing or "StringIds" not in tables:
                what = f"column {', '.join(missing)} in CUPTI_ACTIVITY_KIND_KERNEL" if missing else "StringIds table"
                raise CeilingsError(f"{label}: an nsys export without the {what}, which this reader needs; "
                                    f"{remedy} with a current nsys")
            # in the table's order, then sorted by start here (as ORDER BY start, rowid: SQLite's sort costs more)
            columns = [f"coalesce(start, {NULL})", f"coalesce(end, {NULL})", "coalesce(deviceId, -1)",
                       "coalesce(globalPid, 0)", f"coalesce(demangledName, {NULL})", _packed_dims(KERNEL_COLUMNS[6:9]),
                       _packed_dims(KERNEL_COLUMNS[9:])] + ["coalesce(correlationId, 0)"] * ranges
            kernels = _fetch(con, f"SELECT {', '.join(columns)} FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid",
                             len(columns), "CUPTI_ACTIVITY_KIND_KERNEL")
            kernels = kernels[np.argsort(kernels[:, 0], kind="stable")]
            start, end, device, gpid, name_id, grid, block = kernels[:, :7].T
            names = _strings(con, np.unique(name_id))
            broken = (start == NULL) | (end < start) | ~np.isin(name_id, np.fromiter(names, "int64", len(names)))
            if broken.any():
                start_ns, end_ns, name_id, name = con.execute(
                    "SELECT k.start, k.end, k.demangledName, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k LEFT JOIN "
                    "StringIds AS s ON s.id = k.demangledName ORDER BY k.start, k.rowid LIMIT 1 OFFSET ?",
                    (int(np.argmax(broken)),)).fetchone()
                why = f"kernel name id {name_id} not in StringIds" if name is None else \
                    f"a kernel from {start_ns} to {end_ns} ns"
                raise CeilingsError(f"{label}: a broken nsys export ({why}); {remedy}")
            gpus = _gpus(con, tables)
            chains, chain, deep, never_closed = _chains(), np.full(len(kernels), -1, dtype="int64"), 0, 0
            if ranges:
                corr = kernels[:, 7]
                # a launch's process key (globalPid without its thread bits), -1 where its process or call is unknown
                chains, chain, deep, never_closed = _nvtx(
                    con, tables, np.where((gpid != 0) & (corr != 0), gpid >> TID_BITS, -1), corr)
    except sqlite3.Error as exc:
        raise CeilingsError(f"{label}: an SQLite file that cannot be read ({describe(exc)}); truncated copy? "
                            f"{remedy}") from None
    except NotIntegers as exc:
        raise CeilingsError(f"{label}: a broken nsys export (a value that is no integer, such as text, in an "
                            f"integer column of {exc}); {remedy}") from None
    launches, ns = np.ones(len(kernels), dtype="int64"), end - start
    if not each_launch:
        first, launches, ns = _summed(np.column_stack([kernels[:, 2:7], chain]), ns)
        (device, gpid, name_id, grid, block), chain = kernels[first, 2:7].T, chain[first]
    facts = {d: (str(d) if d >= 0 else None, *gpus.get(d, (None,) * (2 + len(GPU_FACT_COLUMNS))))
             for d in np.unique(device).tolist()}
    process = _by_value(gpid, _pid)
    run, place = _runs(process)
    order = np.argsort(run, kind="stable")  # rows by run, in start order within each
    columns = {"run": run, "id": place, "process": process, "kernel": _by_value(name_id, names.__getitem__),
               # seconds per launch (the contract's) in one correctly rounded division: 1e9 x launches is exact
               # (below 9e6 launches), x 1e-9 would not be (it has no exact binary form)
               "launches": launches, TIME_METRIC: ns / (1e9 * launches),
               "grid": _by_value(grid, _dims), "block": _by_value(block, _dims),
               **{col: _by_value(device, lambda d, i=i: facts[d][i]) for i, col in enumerate(("device", "gpu", "cc"))},
               **{col: _by_value(device, lambda d, i=i: facts[d][i]).astype("float64")  # None: NaN
                  for i, col in enumerate(GPU_FACT_COLUMNS.values(), 3)},
               "nvtx": _chains(*chains, None)[chain]}  # -1, unknown, picks the None at the end
    df = pd.DataFrame({col: values[order] for col, values in columns.items()})
    df["source"], df["name_truncated"] = "nsys", False
    if deep:
        df.attrs["notes"] = [f"{deep} launch(es) inside more than {MAX_DEPTH} NVTX ranges at once ({never_closed} "
                             f"range(s) never closed: pushed and not popped): only the innermost {MAX_DEPTH} of each "
                             f"are kept; pop every range pushed"]
    return df


def _read_sqlite(source: Source, _found) -> pd.DataFrame:
    with source.on_disk() as db:
        return read_export(db, source.path, **source.uses)


def _is_report(source: Source) -> bool | None:
    binary = b"\0" in source.data[:HEAD_BYTES]
    return True if binary and source.path.lower().endswith(REPORT_SUFFIXES) else None


def _read_report(source: Source, _found) -> pd.DataFrame:
    path = source.path
    command = f"nsys export --type sqlite --output {path}.sqlite {path}"
    nsys = shutil.which("nsys")
    if nsys is None:
        raise CeilingsError(f"{path}: an .nsys-rep report; nsys is not on PATH to export it: run `{command}` where "
                            f"nsys is installed and pass {path}.sqlite")
    with source.on_disk() as report, tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "export.sqlite"
        try:
            done = subprocess.run([nsys, "export", "--type", "sqlite", "--output", str(db), report],
                                  capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CeilingsError(f"{path}: `nsys export` did not finish in {EXPORT_TIMEOUT_S} s; run `{command}` "
                                f"and pass {path}.sqlite") from None
        except OSError as exc:
            raise CeilingsError(f"{path}: cannot run {nsys} ({describe(exc)}); run `{command}` and pass "
                                f"{path}.sqlite") from None
        if done.returncode != 0 or not db.is_file():
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            why = said[-1][:QUOTED_ERROR_CHARS] if said else f"exit status {done.returncode}, no export written"
            raise CeilingsError(f"{path}: `nsys export` failed ({why}); run `{command}` to see why")
        return read_export(str(db), path, **source.uses)


SQLITE = Format("nsys .sqlite export", TIMES, lambda src: True if src.data.startswith(MAGIC) else None,
                _read_sqlite, binary=True, head=len(MAGIC))
REPORT = Format(".nsys-rep (through nsys export)", TIMES, _is_report, _read_report, binary=True,
                head=HEAD_BYTES)

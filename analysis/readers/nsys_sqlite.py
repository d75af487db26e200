"""Nsight Systems SQLite exports (`nsys export --type sqlite`), and `.nsys-rep` reports exported to one by
`nsys export` when nsys is on PATH: one row per kernel launch with its full name (never cut, unlike the
`nsys stats` text), its time, grid, block, GPU, process and the NVTX ranges it was launched in.

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
- TARGET_INFO_GPU: id (the kernels' deviceId: cuda_gpu_trace.py joins `gpu.id == kern.deviceId`), name.
  computeMajor/computeMinor are read where the table has them; those names were seen in one public test
  fixture only, not in NVIDIA's text.

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
first: by start, then the longer. A launch whose API call the export lacks has nvtx None (unknown); without
NVTX_EVENTS every launch has ().

`.nsys-rep` (and the older `.qdrep`): no source consulted states its magic bytes, so a report is recognised by
its name and binary content (a NUL byte in its first 64 KiB) and handed to nsys, which checks the rest.
"""

from __future__ import annotations

import heapq
import math
import shutil
import sqlite3
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pandas as pd

from ceilings.errors import QUOTED_ERROR_CHARS, CeilingsError, describe

from .contract import TIMES, Format, Source
from .nsys import TIME_METRIC

MAGIC = b"SQLite format 3\0"  # the first 16 bytes of every SQLite database (sqlite.org/fileformat2.html)
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
BINARY_PROBE_BYTES = 65536  # as read_profile: a NUL byte in the first 64 KiB means a binary file
PUSH_POP = (59, 70)
START_END = (60, 71)
TID_BITS = 24
PID_MASK = 0xFFFFFF
KERNEL_COLUMNS = ("start", "end", "deviceId", "correlationId", "globalPid", "demangledName",
                  "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")
EXPORT_TIMEOUT_S = 1800  # a report of a long run exports for minutes; a hung nsys must not hang the command


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f"PRAGMA table_info({table})")}


def _dims(values: tuple) -> str | None:
    """'(x, y, z)'; None where the export has no size (0 is the exported default of a missing value)."""
    return "(" + ", ".join(str(v) for v in values) + ")" if all(v and v >= 1 for v in values) else None


def _pid(global_id: int | None) -> str | None:
    return str((global_id >> TID_BITS) & PID_MASK) if global_id else None


def _gpus(con: sqlite3.Connection, tables: set[str]) -> dict[int, tuple[str | None, str | None]]:
    """deviceId -> (name, compute capability), from TARGET_INFO_GPU where the export has it."""
    if "TARGET_INFO_GPU" not in tables:
        return {}
    cc = "computeMajor, computeMinor" if {"computeMajor", "computeMinor"} <= _columns(con, "TARGET_INFO_GPU") \
        else "NULL, NULL"
    facts = defaultdict(set)
    for device, name, major, minor in con.execute(f"SELECT id, name, {cc} FROM TARGET_INFO_GPU"):
        facts[device].add((name or None, f"{major}.{minor}" if major and minor is not None else None))
    # a device listed twice with different facts (several hosts or VMs in one report) is unknown
    return {device: next(iter(f)) for device, f in facts.items() if len(f) == 1}


def _launches(con: sqlite3.Connection, tables: set[str]) -> dict[tuple[int, int], tuple[int, int, int]] | None:
    """(process key, correlationId) -> (start, end, globalTid) of the API call; None without the table. A key
    that two calls share is left out: which of them launched the kernel is unknown."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        return None
    calls, shared = {}, set()
    for corr, tid, start, end in con.execute(
            "SELECT correlationId, globalTid, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            "WHERE correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL)"):
        key = (tid >> TID_BITS, corr)
        if key in calls:
            shared.add(key)
        calls[key] = (start, end, tid)
    for key in shared:
        del calls[key]
    return calls


def _ranges(con: sqlite3.Connection) -> tuple[dict, dict]:
    """The NVTX ranges as (start, end, name): push/pop ones by thread (globalTid), start/end ones by process."""
    name = "coalesce(s.value, e.text)" if "textId" in _columns(con, "NVTX_EVENTS") else "e.text"
    join = "LEFT JOIN StringIds AS s ON s.id = e.textId" if name != "e.text" else ""
    by_thread, by_process = defaultdict(list), defaultdict(list)
    for start, end, kind, text, tid in con.execute(
            f"SELECT e.start, e.end, e.eventType, {name}, e.globalTid FROM NVTX_EVENTS AS e {join} "
            f"WHERE e.eventType IN ({', '.join(map(str, PUSH_POP + START_END))}) AND {name} IS NOT NULL"):
        span = (start, math.inf if end is None else end, text)
        if kind in PUSH_POP:
            by_thread[tid].append(span)
        else:
            by_process[tid >> TID_BITS].append(span)
    return by_thread, by_process


def _enclosing(ranges: dict, calls: dict, found: dict[int, list]) -> None:
    """Adds to found[row] the ranges of key that enclose each call (key -> [(start, end, row)]): a sweep over
    the calls by start, keeping the ranges begun and not yet over."""
    for key, todo in calls.items():
        spans, active, i = sorted(ranges.get(key, ())), [], 0
        for start, end, row in sorted(todo):
            while i < len(spans) and spans[i][0] <= start:
                heapq.heappush(active, (spans[i][1], i))
                i += 1
            while active and active[0][0] < start:  # over before this call, and so before every later one
                heapq.heappop(active)
            found[row] += [spans[j] for over, j in active if over >= end]


def _nvtx(con: sqlite3.Connection, tables: set[str], kernels: list[tuple]) -> list[tuple | None]:
    """Each kernel's NVTX range names, outermost first (module docstring); kernels: (process key, corr)."""
    if "NVTX_EVENTS" not in tables:
        return [()] * len(kernels)
    by_thread, by_process = _ranges(con)
    if not by_thread and not by_process:
        return [()] * len(kernels)
    calls = _launches(con, tables)
    if calls is None:
        return [None] * len(kernels)
    on_thread, in_process, found = defaultdict(list), defaultdict(list), defaultdict(list)
    known = set()
    for row, key in enumerate(kernels):
        call = calls.get(key)
        if call is not None:
            start, end, tid = call
            on_thread[tid].append((start, end, row))
            in_process[tid >> TID_BITS].append((start, end, row))
            known.add(row)
    _enclosing(by_thread, on_thread, found)
    _enclosing(by_process, in_process, found)
    return [tuple(text for _, _, text in sorted(found[row], key=lambda s: (s[0], -s[1]))) if row in known
            else None for row in range(len(kernels))]


def read_export(db: str, label: str) -> pd.DataFrame:
    """The launches of the SQLite export at path `db`; messages name `label` (the file the user passed)."""
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
            rows = con.execute(
                "SELECT k.start, k.end, k.deviceId, k.globalPid, k.correlationId, s.value, k.demangledName, "
                "k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ "
                "FROM CUPTI_ACTIVITY_KIND_KERNEL AS k LEFT JOIN StringIds AS s ON s.id = k.demangledName "
                "ORDER BY k.start").fetchall()
            gpus = _gpus(con, tables)
            nvtx = _nvtx(con, tables, [(gp >> TID_BITS if gp and corr else None, corr)
                                       for _, _, _, gp, corr, *_ in rows])
    except sqlite3.Error as exc:
        raise CeilingsError(f"{label}: an SQLite file that cannot be read ({describe(exc)}); truncated copy? "
                            f"{remedy}") from None
    out = []
    for (start, end, device, gp, _, name, name_id, *dims), ranges in zip(rows, nvtx):
        if name is None or start is None or end is None or end < start:
            why = f"kernel name id {name_id} not in StringIds" if name is None else f"a kernel from {start} to {end} ns"
            raise CeilingsError(f"{label}: a broken nsys export ({why}); {remedy}")
        gpu, cc = gpus.get(device, (None, None))
        out.append({"process": _pid(gp), "kernel": name, "launches": 1, TIME_METRIC: (end - start) * 1e-9,
                    "grid": _dims(dims[:3]), "block": _dims(dims[3:]),
                    "device": None if device is None else str(device), "gpu": gpu, "cc": cc, "nvtx": ranges,
                    "source": "nsys", "name_truncated": False})
    df = pd.DataFrame(out)
    if len(df):  # one run per process, in the order of their first kernel; id: the launch's place in its run
        df.insert(0, "run", pd.factorize(df["process"].fillna(""))[0])
        df.insert(1, "id", df.groupby("run").cumcount())
        df = df.sort_values(["run", "id"], kind="stable").reset_index(drop=True)
    return df


@contextmanager
def _on_disk(source: Source) -> Iterator[str]:
    """A path holding the source's bytes: its own file, or a temporary copy (decompressed bytes, a pipe)."""
    if source.file is not None:
        yield str(source.file)
        return
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / Path(source.path).name
        copy.write_bytes(source.data)
        yield str(copy)


def _read_sqlite(source: Source, _found) -> pd.DataFrame:
    with _on_disk(source) as db:
        return read_export(db, source.path)


def _is_report(source: Source) -> bool | None:
    binary = b"\0" in source.data[:BINARY_PROBE_BYTES]
    return True if binary and source.path.lower().endswith(REPORT_SUFFIXES) else None


def _read_report(source: Source, _found) -> pd.DataFrame:
    path = source.path
    command = f"nsys export --type sqlite --output {path}.sqlite {path}"
    nsys = shutil.which("nsys")
    if nsys is None:
        raise CeilingsError(f"{path}: an .nsys-rep report; nsys is not on PATH to export it: run `{command}` where "
                            f"nsys is installed and pass {path}.sqlite")
    with _on_disk(source) as report, tempfile.TemporaryDirectory() as folder:
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
        return read_export(str(db), path)


SQLITE = Format("nsys .sqlite export", TIMES, lambda src: True if src.data.startswith(MAGIC) else None,
                _read_sqlite, binary=True, head=len(MAGIC))
REPORT = Format(".nsys-rep (through nsys export)", TIMES, _is_report, _read_report, binary=True,
                head=BINARY_PROBE_BYTES)

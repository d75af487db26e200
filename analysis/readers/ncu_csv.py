"""Vectorised readers for the CSV forms: ncu details page, ncu raw page, and this tool's own kernel table.
Each returns one row per launch (or per kernel, with `launches` = N and values per launch) with metric values
in base units.

Columns are found by name, never by position. Rows shorter than the header are padded; rule rows (empty
metric fields), repeated headers and lines of application output are dropped.
"""

from __future__ import annotations

import csv
import io
import os
import re
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from ceilings.lazy import lazy
from common.errors import CeilingsError, describe

from ..metrics import EXTENSIVE, canonical_metric
from ..units import metric_factor, parse_values, unit_factors
from .bulk import first_rows, row_codes
from .contract import COUNTERS, Format, Source
from .ncu_text import GPU_NAME_METRIC, metric_key

np = lazy("numpy")
pd = lazy("pandas")

OWN_CSV_HEADER = re.compile(rb"\s*((?:id,)?kernel,launches,time_s,flops_fp64,flops_fp32,)")
OWN_CSV_START = len(b"id,kernel,launches,time_s,flops_fp64,flops_fp32,")  # the most OWN_CSV_HEADER needs
SCAN_STEP = 1 << 22  # bytes _only_csv_rows looks at in one step: a few MB, in the CPU's cache
SCAN_THREADS = min(os.cpu_count() or 1, 8)
# The start of a data row ('"12",') or of a repeated header ('"ID",'): never the rest of a quoted field.
RECORD_START = re.compile(rb'"(?:\d+|ID)",')
MAX_ID = 1 << 40  # launch IDs are below this: a launch's key is run x MAX_ID + ID
MAX_LAUNCHES = 2.0**63  # a count of launches is an int64
# Cells of the value column that read_csv itself reads as NaN (ncu's 'n/a'; nan and inf are missing too);
# other words ('(!) nan', 'PolicySpread') make it a column of strings, parsed by units.parse_values.
VALUE_NA = ["", "n/a", "N/A", "nan", "NaN", "-nan", "inf", "-inf"]


def lines_starting(data: bytes, prefix: bytes):
    """(offset, line) of every line that starts with `prefix`, found with bytes.find (fast on big files)."""
    pos = data.find(prefix)
    while pos >= 0:
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        if pos == 0 or data[pos - 1] == 10:  # 10: b"\n"
            yield pos, data[pos:end]
        pos = data.find(prefix, end)


def find_ncu_header(data: bytes) -> tuple[int, bytes] | None:
    """Offset and text of the first ncu CSV header line ('"ID",...,"Kernel Name",...')."""
    return next(((pos, line) for pos, line in lines_starting(data, b'"ID",') if b'"Kernel Name"' in line), None)


def refuse_lacking_header(data: bytes, path: str) -> None:
    """Where find_ncu_header found nothing but the first quoted line looks like an ncu CSV header (starts with
    "ID", or names Kernel Name or Metric Name): a CeilingsError naming the column it lacks (renamed, cut away)."""
    line = next((line for _, line in lines_starting(data, b'"')), b"")
    if b'"Invocations"' in line:
        require_columns(_header(line, path), SUMMARY_COLUMNS, path, SUMMARY_LAYOUT)
    if line.startswith(b'"ID",') or b'"Kernel Name"' in line or b'"Metric Name"' in line:
        require_columns(_header(line, path), ("ID", "Kernel Name"), path, "ncu CSV")


def find_own_csv(data: bytes) -> int | None:
    """Offset of this tool's own CSV header when it is the first non-blank line."""
    m = OWN_CSV_HEADER.match(data)
    return m.start(1) if m else None

# Columns of the raw page that describe the launch rather than measure it.
RAW_META = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
            "Metric Value", "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
            "Estimated Speedup"}


def csv_records(data: bytes, start: int) -> list[bytes]:
    """The CSV records from `start` on, without application output.

    A line not starting with '"' is dropped, unless it continues a quoted field that spans lines (the
    record so far has an odd number of quotes) and that field closes before the next row starts. A row cut
    short by application output never closes: it is kept alone, as written.
    """
    lines = data[start:].split(b"\n")
    records = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        i += 1
        if not line.startswith(b'"'):
            continue
        quotes = line.count(b'"')
        if quotes % 2:
            j = i
            while j < n and quotes % 2 and not RECORD_START.match(lines[j]):
                quotes += lines[j].count(b'"')
                j += 1
            if quotes % 2 == 0:
                line = b"\n".join(lines[i - 1:j])
                i = j
        records.append(line)
    return records


def record_lines(data: bytes, start: int, records: list[bytes]) -> Callable[[int], int]:
    """For a parse error in b"\n".join(records) (csv_records(data, start), in order): its line -> the file's
    line (records may span lines; lines between them were dropped). Computed only when asked."""
    def file_line(n: int) -> int:
        pos, line, seen = start, data.count(b"\n", 0, start) + 1, 0
        for rec in records:
            at = data.find(rec, pos)
            line += data.count(b"\n", pos, at)
            span = rec.count(b"\n") + 1
            if seen + span >= n:
                break
            seen, line, pos = seen + span, line + span - 1, at + len(rec)
        return line + n - seen - 1
    return file_line


# pandas' tokenizer names the line of an error ("Expected 12 fields in line 7"), or, 0-based, the row a quoted
# cell opened on ("EOF inside string starting at row 5")
PANDAS_LINE = re.compile(r"\b(line|row) (\d+)")


def parse_error(path: str, exc: BaseException, file_line: Callable[[int], int], what: str) -> CeilingsError:
    """A read_csv error as one line quoting the file's line, not pandas' count of the rows it was given."""
    m = PANDAS_LINE.search(str(exc))
    if m is None:
        return CeilingsError(f"{path}: unreadable {what} ({describe(exc)}); truncated or edited file?")
    line = file_line(int(m.group(2)) + (m.group(1) == "row"))
    why = describe(PANDAS_LINE.sub(f"line {line}", str(exc), count=1))
    return CeilingsError(f"{path}:{line}: unreadable {what} ({why}); truncated or edited file?")


def _header(record: bytes, path: str) -> list[str]:
    """The cells of one CSV record (it may span lines)."""
    try:
        return next(csv.reader(io.StringIO(record.decode("utf-8", errors="replace"), newline="")), [])
    except csv.Error as exc:
        raise CeilingsError(f"{path}: unreadable ncu CSV header or units row ({exc}); "
                            "truncated or edited file?") from None


def require_columns(header: Sequence[str], needed: Sequence[str], path: str, layout: str) -> None:
    """A CeilingsError naming the first of `needed` that `header` lacks (renamed or cut away): a reader asking for
    it by name would fail with a KeyError."""
    missing = [c for c in needed if c not in header]
    if missing:
        raise CeilingsError(f"{path}: {layout} without a {missing[0]!r} column (header: {str(list(header))[:80]}...); "
                            f"an edited or truncated export? Export it again with ncu")


def _ncu_frame(source: io.BytesIO | tuple[Path, int], header: list[str], path: str,
               file_line: Callable[[int], int], usecols: set[str] | None = None,
               categories: set[str] | frozenset[str] = frozenset(), value: str | None = None) -> pd.DataFrame:
    """One ncu CSV table from `source`, columns by name: bytes positioned at its header line, or (file,
    lines before the header), which read_csv reads ~1.6x faster than the same bytes in memory.

    `value`: a column whose numbers read_csv parses itself (thousands separators included): a column of
    floats, or of strings where a cell is no number. Every other column is text ('' where a row is short).
    `file_line`: read_csv's line number of an error -> the file's.
    """
    require_columns(header, ("ID", "Kernel Name"), path, "ncu CSV")
    cols = [c for c in dict.fromkeys(header) if c and (usecols is None or c in usecols)]  # not a trailing ","
    # every column is read (read_csv with usecols is ~1.7x slower), the unused ones as cheap categories
    dtypes = {c: ("category" if c in categories or c not in cols else str) for c in dict.fromkeys(header)
              if c != value}
    if value in cols:  # the missing-value words are NaN in the value column only
        options = {"keep_default_na": False, "na_values": {value: VALUE_NA}, "thousands": ","}
    else:
        options = {"na_filter": False}
    if isinstance(source, tuple):
        file, skip = source
        read = lambda dtype: pd.read_csv(file, skiprows=skip, dtype=dtype, compression=None,  # noqa: E731
                                         index_col=False, encoding_errors="replace", **options)
    else:
        at = source.tell()

        def read(dtype):
            source.seek(at)
            return pd.read_csv(source, dtype=dtype, index_col=False, encoding_errors="replace", **options)
    try:
        with warnings.catch_warnings():  # a row longer than the header: an error, not cells dropped quietly
            warnings.simplefilter("error", pd.errors.ParserWarning)
            try:  # fast path: every ID an integer of int64 (no repeated header rows, no 'inf')
                with warnings.catch_warnings():
                    warnings.simplefilter("error", RuntimeWarning)  # numpy's cast of 'inf': not all integers
                    df = read({**dtypes, "ID": "int64"})
            except (ValueError, OverflowError, RuntimeWarning):
                df = read(dtypes)
    except (pd.errors.ParserError, pd.errors.ParserWarning, ValueError) as exc:
        raise parse_error(path, exc, file_line, "ncu CSV") from None
    df = df[cols]
    # short rows: the missing cells are empty text, as in the fields ncu leaves empty
    for col in (c for c in cols if c != value):
        missing = df[col].isna()
        if missing.any():
            if isinstance(df[col].dtype, pd.CategoricalDtype) and "" not in df[col].cat.categories:
                df[col] = df[col].cat.add_categories("")
            df[col] = df[col].fillna("")
    ids = df["ID"] if df["ID"].dtype == "int64" else pd.to_numeric(df["ID"], errors="coerce")
    if ids.isna().any():  # repeated header rows ("ID") and stray lines
        df, ids = df[ids.notna()], ids[ids.notna()]
    if df.empty:
        raise CeilingsError(f"{path}: ncu CSV header without any kernel rows; truncated output or no kernel profiled?")
    bad = ~((ids >= 0) & (ids < MAX_ID) & (ids % 1 == 0))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise CeilingsError(f"{path}: kernel {str(df['Kernel Name'].iloc[i])[:80]!r}: ID '{df['ID'].iloc[i]}' is no "
                            f"launch number (ncu numbers launches 0, 1, 2, ...); edited or corrupt file? Export it "
                            f"again")
    df.insert(0, "_id", ids.astype("int64").to_numpy())
    return df


def _runs(df: pd.DataFrame) -> np.ndarray:
    """Several runs in one file (concatenated CSVs): one run per process, in order of appearance."""
    if "Process ID" in df.columns:
        return pd.factorize(df["Process ID"])[0]
    return np.zeros(len(df), dtype="int64")


def _nvtx_columns(header: list[str]) -> list[str]:
    """ncu --nvtx columns: 'thread Domain:Push/Pop_Range:PL_Type:PL_Value', 'Id:Domain:Start/Stop_Range:...'."""
    return [c for c in header if "_Range:" in c]


def _nvtx_names(cell: str) -> tuple[str, ...]:
    """Range names of an NVTX cell: each range is '"[id:]domain:name:type:value"' (quoted when several); the
    name is what lies between the domain and the payload's two fields (it may hold ':')."""
    cell = str(cell)
    items = re.findall(r'"([^"]*)"', cell) or ([cell.strip()] if cell.strip() else [])
    names = []
    for item in items:
        fields = item.strip().split(":")
        if len(fields) >= 5:  # id, domain, name..., type, value
            names.append(":".join(fields[2:-2]))
        elif len(fields) >= 4:  # domain, name..., type, value
            names.append(":".join(fields[1:-2]))
    return tuple(names)


def _launch_meta(df: pd.DataFrame, first_rows: np.ndarray) -> pd.DataFrame:
    cols = {"Kernel Name": "kernel", "Grid Size": "grid", "Block Size": "block", "Device": "device", "CC": "cc"}
    present = {k: v for k, v in cols.items() if k in df.columns}
    rows = df.iloc[first_rows]
    meta = rows[["run", "_id", *present]].rename(columns=present)
    meta["kernel"] = meta["kernel"].astype(str)
    for col in ("grid", "block", "device", "cc"):
        if col not in meta.columns:
            meta[col] = None
        else:
            meta[col] = _by_distinct(meta[[col]], lambda cell: None if cell == "" else cell)
    if "Process ID" in rows.columns:
        parts = [c for c in ("Process ID", "Process Name", "Host Name") if c in rows.columns]

        def label(*cells):
            got = dict(zip(parts, cells))
            host = f"@{got['Host Name']}" if "Host Name" in got else ""
            return f"{got['Process ID']} {got.get('Process Name', '')}{host}".strip()
        meta["process"] = _by_distinct(rows[parts], label).astype(str)
    else:
        meta["process"] = None
    nvtx = _nvtx_columns(list(rows.columns))
    meta["nvtx"] = _by_distinct(rows[nvtx], lambda *cells: sum(map(_nvtx_names, cells), ())) if nvtx else \
        [()] * len(meta)
    return meta.rename(columns={"_id": "id"}).reset_index(drop=True)


def _by_distinct(cells: pd.DataFrame, make: Callable) -> pd.Series:
    """make(*row) for each row of `cells` (objects), called once per distinct row: a million launches hold a
    few processes, grids and NVTX stacks."""
    codes = row_codes(cells[col] for col in cells.columns)
    firsts = cells.iloc[first_rows(codes)]
    made = pd.Series([make(*row) for row in firsts.itertuples(index=False, name=None)], dtype=object)
    return pd.Series(made.to_numpy()[codes], index=cells.index, dtype=object)


def _launches(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's launch, numbered in order of first appearance (pd.factorize's codes), and the first row of
    each. ncu writes a launch's rows together and launches in increasing ID: then the numbers are counted at
    each change of key, without hashing every row's."""
    change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    firsts = np.concatenate([[0], change])
    if (np.diff(keys[firsts]) > 0).all():  # no launch's rows come back after another's
        steps = np.zeros(len(keys), dtype=np.intp)
        steps[change] = 1
        return np.cumsum(steps), firsts
    launch = pd.factorize(keys)[0]
    return launch, first_rows(launch)


DETAILS_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Block Size", "Grid Size",
                   "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"}


def _only_csv_rows(data: bytes | int, start: int) -> bool:
    """Whether every line after `start` starts with '"' or is blank (read_csv skips those): none is application
    output, a ==PROF== line or the rest of a quoted field that spans lines. `data`: the bytes, or a file
    descriptor to read them from a step at a time into a buffer of each thread's (the file is never held whole,
    and one cut short while it is read is read as far as it goes). A file's lines start as its content's (CRLF
    made LF changes no line's first byte; a blank CRLF line is taken for one that is not: the content is then
    read as any other). In numpy, SCAN_STEP bytes a step, the steps spread over threads (numpy and reads let
    go of the GIL): a regular expression takes 2.5x as long over 100 MB."""
    size = os.fstat(data).st_size if isinstance(data, int) else len(data)
    buffers = threading.local()

    def step_at(at: int) -> tuple[bytes | bytearray, int, int]:
        """The step at `at` and the byte after it (a line's first byte after the step's last newline): what
        holds them, and where they lie in it."""
        if not isinstance(data, int):
            return data, at, min(at + SCAN_STEP + 1, size)
        if not hasattr(buffers, "step"):
            buffers.step = bytearray(SCAN_STEP + 1)
        return buffers.step, 0, os.preadv(data, [buffers.step], at)

    def clean(at: int) -> bool:
        held, lo, hi = step_at(at)
        step = np.frombuffer(held, dtype=np.uint8)[lo:hi]
        after = step[np.flatnonzero(step[:-1] == ord("\n")) + 1]  # the first byte of each line
        return not ((after != ord('"')) & (after != ord("\n"))).any()

    steps = range(start, size - 1, SCAN_STEP)
    if len(steps) <= 1:
        return all(map(clean, steps))
    from concurrent.futures import ThreadPoolExecutor  # 6 ms of imports: not for --help

    pool = ThreadPoolExecutor(SCAN_THREADS)
    try:
        return all(pool.map(clean, steps))
    finally:
        pool.shutdown(cancel_futures=True)  # a step found that fails: the others not started are not needed


def read_details(src: Source, found: tuple[int, bytes]) -> pd.DataFrame:
    """ncu --csv details page (12 to 20 columns, NVTX columns, rule rows): long -> wide, one row per launch.
    `found`: the header line and its offset. `src.file`, if any, is read again by read_csv when only CSV rows
    follow the header; scanned from the file where it holds the content as it is (then never copied into memory)."""
    start, line = found
    path, file = src.path, src.file
    before = src.prefix(start)
    # lines before the header are rows for read_csv to skip only without quotes or lone CRs (both make its idea
    # of a line differ from ours)
    by_file = file is not None and not re.search(b'["\r]', before)
    with src.opened() as fd:
        only_rows = _only_csv_rows(src.data if fd is None else fd, start)
    if only_rows:  # read_csv reads them as they are
        header = _header(line, path)
        if by_file:
            source: io.BytesIO | tuple[Path, int] = (file, before.count(b"\n"))
            file_line = int  # read_csv counts the skipped lines too
        else:
            source = io.BytesIO(src.data)
            source.seek(start)
            skipped = before.count(b"\n")
            file_line = lambda n: skipped + n  # noqa: E731
    else:
        records = csv_records(src.data, start)
        source, header = io.BytesIO(b"\n".join(records)), _header(records[0], path)
        file_line = record_lines(src.data, start, records)
    used = DETAILS_COLUMNS | set(_nvtx_columns(header))
    df = _ncu_frame(source, header, path, file_line, used, used - {"ID", "Metric Value"}, "Metric Value")
    require_columns(df.columns, ("Kernel Name", "Metric Name", "Metric Unit", "Metric Value"), path,
                    "ncu --csv details output")
    df["run"] = _runs(df)
    launch, first_rows = _launches(df["run"].to_numpy() * MAX_ID + df["_id"].to_numpy())
    meta = _launch_meta(df, first_rows)
    gpu_rows = (df["Metric Name"] == GPU_NAME_METRIC).to_numpy()
    meta["gpu"] = None
    if gpu_rows.any():  # a string metric: the device's name
        named = pd.Series(df["Metric Value"][gpu_rows].astype(str).to_numpy(), index=launch[gpu_rows])
        meta["gpu"] = named[~named.index.duplicated()].reindex(meta.index).astype(object)
    values = parse_values(df["Metric Value"]).to_numpy() * unit_factors(df["Metric Unit"], df["Metric Name"])
    names = df["Metric Name"].cat
    if "Section Name" in df.columns:
        sections = df["Section Name"].cat
        pair = sections.codes.to_numpy().astype("int64") * (len(names.categories) + 1) + names.codes.to_numpy()
        pair_codes, pair_uniques = pd.factorize(pair)
        n = len(names.categories) + 1
        keys = [metric_key(str(sections.categories[u // n]), str(names.categories[u % n])) for u in pair_uniques]
    else:
        pair_codes = names.codes.to_numpy()
        keys = [metric_key(None, str(c)) for c in names.categories]
    key_codes, key_names = pd.factorize(np.array(keys + [""], dtype=object))
    metric = key_codes[pair_codes]
    no_name = names.categories.get_indexer([""])[0]  # rule rows have no metric name (-1: none such)
    keep = ~np.isnan(values) & (names.codes.to_numpy() != no_name)
    if not keep.all():
        launch, metric, values = launch[keep], metric[keep], values[keep]
    wide = np.full((len(meta), len(key_names)), np.nan)
    wide[launch, metric] = values
    known = ~np.isnan(wide)
    if np.count_nonzero(known) < len(values):  # a launch with a metric twice (in two sections): the first wins
        first = ~pd.Series(launch * len(key_names) + metric).duplicated().to_numpy()
        wide[:] = np.nan
        wide[launch[first], metric[first]] = values[first]
        known = ~np.isnan(wide)
    used = np.flatnonzero(known.any(axis=0))
    metrics = pd.DataFrame(wide[:, used], columns=[str(key_names[i]) for i in used])
    out = pd.concat([meta, metrics], axis=1)
    out["launches"] = 1
    return out


def read_raw(src: Source, start: int) -> pd.DataFrame:
    """ncu --page raw --csv: header row, units row, one row per launch; 'a; b' per-instance cells -> NaN."""
    data, path = src.data, src.path
    records = csv_records(data, start)
    if len(records) < 2:
        raise CeilingsError(f"{path}: ncu raw CSV without its units row; truncated file?")
    header, units = _header(records[0], path), _header(records[1], path)
    if units[:1] != [""]:  # ncu leaves the units row's first cell (ID, see find_ncu_header) empty
        line = data.count(b"\n", 0, data.find(records[1], start)) + 1
        raise CeilingsError(f"{path}:{line}: ncu raw CSV without its units row (the row after the header is a "
                            f"launch); its values cannot be scaled to base units; export it again with ncu "
                            f"--page raw --csv")
    table = [records[0], *records[2:]]
    df = _ncu_frame(io.BytesIO(b"\n".join(table)), header, path, record_lines(data, start, table))
    unit_of = dict(zip(header, units + [""] * (len(header) - len(units))))
    df["run"] = _runs(df)
    launch_key = pd.Series(df["run"].to_numpy() * MAX_ID + df["_id"].to_numpy())
    df = df[~launch_key.duplicated().to_numpy()]
    meta = _launch_meta(df, np.arange(len(df)))
    meta["gpu"] = (df[GPU_NAME_METRIC].astype(object).where(df[GPU_NAME_METRIC] != "", None).to_numpy()
                   if GPU_NAME_METRIC in df.columns else None)
    metrics: dict[str, pd.Series] = {}
    for col in header:
        # RAW_META, NVTX, or an empty cell (a trailing ",")
        if col in RAW_META or not col or "_Range:" in col or col == GPU_NAME_METRIC:
            continue
        series = pd.Series(parse_values(df[col]).to_numpy() * metric_factor(col, unit_of.get(col, "")), index=df.index)
        key = canonical_metric(col)
        metrics[key] = metrics[key].fillna(series) if key in metrics else series
    out = pd.concat([meta, pd.DataFrame(metrics).reset_index(drop=True)], axis=1)
    out["launches"] = 1
    return out


def read_own(src: Source, start: int) -> pd.DataFrame:
    """This tool's --csv output read back: totals per row become values per launch again."""
    path = src.path
    source = io.BytesIO(src.data)
    source.seek(start)
    try:
        df = pd.read_csv(source, keep_default_na=True, encoding_errors="replace",
                         dtype={"kernel": str, "cc": str, "gpu": str, "process": str, "tensor_type": str})
    except (pd.errors.ParserError, ValueError) as exc:
        raise CeilingsError(f"{path}: unreadable kernel table CSV ({describe(exc)})") from None
    launches = _numbers(df["launches"])
    if df["kernel"].isna().any() or launches.isna().any():
        raise CeilingsError(f"{path}: kernel table CSV with a row lacking kernel or launches; truncated file?")
    # a count that is no whole number from 1 up is refused by the one value check of every reader
    out = pd.DataFrame({"run": 0, "id": df["id"] if "id" in df.columns else np.arange(len(df)),
                        "kernel": df["kernel"], "launches": launches})
    for col in EXTENSIVE:  # a column an older table lacks (ops_tensor_int, alg_bytes) is missing
        out[col] = _numbers(df[col]) / launches if col in df.columns else float("nan")
    if "sm_clock_hz" in df.columns:
        out["sm_clock_hz"] = _numbers(df["sm_clock_hz"])
    notes = []
    if "coverage" in df.columns:  # the share of a row's time its FLOPs cover (an older table: all or none)
        coverage = _numbers(df["coverage"])
        wrong = coverage.notna() & ~coverage.between(0, 1)
        if wrong.any():
            notes.append(f"coverage: {int(wrong.sum())} row(s) hold a share outside 0-1 (first: "
                         f"{df['kernel'][wrong].iloc[0][:60]!r} = {coverage[wrong].iloc[0]:g}): missing, so their "
                         f"rates are not given; an edited file?")
        out["coverage"] = coverage.where(~wrong)
    for col in ("grid", "block", "device", "cc", "gpu", "process", "tensor_type"):
        out[col] = df[col].astype("object").where(df[col].notna(), None) if col in df.columns else None
    out.attrs["notes"] = notes
    return out


def _numbers(column: pd.Series) -> pd.Series:
    """A column as floats, text NaN; through text, as read_csv keeps an integer too long for int64 as a Python
    int, which to_numeric cannot make a float (a 400-digit count becomes inf, refused by the value check)."""
    return pd.to_numeric(column.astype(str), errors="coerce")


SUMMARY_KEYS = ["Process ID", "Kernel Name", "Block Size", "Grid Size", "Device"]
SUMMARY_COLUMNS = ("Kernel Name", "Invocations", "Metric Name", "Metric Unit", "Average")  # read by name
SUMMARY_LAYOUT = "ncu --print-summary per-kernel --csv"


def _find_summary(src: Source) -> int | None:
    """`--print-summary per-kernel --csv`: no ID column; Invocations and Minimum/Maximum/Average instead."""
    return next((pos for pos, line in lines_starting(src.data, b'"Process ID",')
                 if b'"Invocations"' in line and b'"Average"' in line and b'"Kernel Name"' in line), None)


def read_summary(src: Source, start: int) -> pd.DataFrame:
    """One row per summarised kernel (and grid, block, device, process): launches = Invocations, each metric
    its Average in base units."""
    records = csv_records(src.data, start)
    header = _header(records[0], src.path)
    # the finder saw Kernel Name, Invocations and Average; the rest is asked for by name
    require_columns(header, SUMMARY_COLUMNS, src.path, SUMMARY_LAYOUT)
    try:
        with warnings.catch_warnings():  # a row longer than the header: an error, not cells dropped quietly
            warnings.simplefilter("error", pd.errors.ParserWarning)
            df = pd.read_csv(io.BytesIO(b"\n".join(records)), dtype=str, keep_default_na=False, index_col=False,
                             encoding_errors="replace")  # as every reader: a name's Latin-1 byte, U+FFFD
    except (pd.errors.ParserError, pd.errors.ParserWarning) as exc:
        raise parse_error(src.path, exc, record_lines(src.data, start, records), "ncu summary CSV") from None
    keys = [k for k in SUMMARY_KEYS if k in df.columns]
    named = df[df["Metric Name"] != ""]
    first = named.drop_duplicates(keys)
    launch = pd.Series(range(len(first)), index=pd.MultiIndex.from_frame(first[keys]))
    codes = launch.reindex(pd.MultiIndex.from_frame(named[keys])).to_numpy()
    values = parse_values(named["Average"]).to_numpy() * unit_factors(named["Metric Unit"], named["Metric Name"])
    metrics = pd.DataFrame({"_launch": codes, "metric": [metric_key(sec, name) for sec, name in
                                                         zip(named.get("Section Name", [None] * len(named)),
                                                             named["Metric Name"])],
                            "value": values}).dropna(subset=["value"])
    wide = metrics.drop_duplicates(["_launch", "metric"]).pivot(index="_launch", columns="metric", values="value")
    first = first.assign(run=0, _id=range(len(first)))
    meta = _launch_meta(first, np.arange(len(first)))
    if header.count("Invocations") != 1:
        raise CeilingsError(f"{src.path}: per-kernel summary CSV with {header.count('Invocations')} Invocations "
                            f"columns; truncated or edited file?")
    meta["launches"] = first["Invocations"].to_numpy()  # as written: the value check reads it, quoting a bad one
    return pd.concat([meta, wide.reindex(range(len(first))).reset_index(drop=True)], axis=1)


def _find_own(src: Source) -> int | None:
    """find_own_csv on the head, or on all the content where the head is blank but for fewer bytes than the
    header begins with (the head may cut it): the header is the first line that is not blank."""
    return find_own_csv(src.head if len(src.head.lstrip()) >= OWN_CSV_START else src.data)


def _ncu_header(src: Source) -> tuple[int, bytes] | None:
    """find_ncu_header, once per source (the details and raw formats both ask)."""
    if "ncu_header" not in src.memo:
        src.memo["ncu_header"] = src.first(find_ncu_header)
    return src.memo["ncu_header"]


def _find_details(src: Source) -> tuple[int, bytes] | None:
    header = _ncu_header(src)
    return header if header and b'"Metric Name"' in header[1] else None


def _find_raw(src: Source) -> int | None:
    header = _ncu_header(src)
    return header[0] if header and b'"Metric Name"' not in header[1] else None


OWN_CSV = Format("ceilings kernel table (CSV)", COUNTERS, _find_own, read_own)
DETAILS_CSV = Format("ncu --csv (details page)", COUNTERS, _find_details, read_details)
SUMMARY_CSV = Format("ncu --print-summary per-kernel --csv", COUNTERS, _find_summary, read_summary)
RAW_CSV = Format("ncu --csv --page raw", COUNTERS, _find_raw, read_raw)

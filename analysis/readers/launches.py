"""Reading one profile file into launches: `read_profile(path)`, one row per launch (per kernel for
summaries and nsys) with META_COLUMNS and raw metrics in base units, whatever the format (the registry's
readers, analysis.readers.registry), its content as the readers see it (`read_source`), and the one check of
every reader's numbers. analysis.ncu builds the kernel table from these rows (docs/ncu-ingestion.md)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ceilings.inputs import GZIP_MAGIC, gunzip, loads_json, read_bytes
from ceilings.lazy import lazy
from common.errors import CeilingsError, describe

from ..units import parse_values
from . import ncu_csv
from .contract import (
    HEAD_BYTES,
    META_COLUMNS,
    META_DTYPES,
    TIMES,
    Format,
    Source,
)

np = lazy("numpy")
pd = lazy("pandas")

UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# lines that only profiler output has: ncu's ==PROF== / ==ERROR== lines, a `[PID] process@host` line
PROFILER_LINE = re.compile(r"^(?:==PROF==|==ERROR==|\[\d+\] \S+@)", re.MULTILINE)
MAX_COUNTER = 2.0**64  # profiler counters are 64-bit: a value past this was not measured


def read_profile(path: str | os.PathLike, flops: str = "executed", *, each_launch: bool = True,
                 ranges: bool = True, max_inflated: float | None = None) -> pd.DataFrame:
    """One row per launch (per kernel for summaries and nsys, with `launches` = N and values per launch).

    Columns: META_COLUMNS (run, id, kernel, launches, grid, block, device, cc, gpu, process, nvtx, op,
    module, source, name_truncated), then one column per metric in base units (bytes, seconds, hertz,
    counts; percentages in percent). `attrs["format"]` names the format read and `attrs["yields"]` what it
    holds (COUNTERS or TIMES, analysis.readers.contract). `flops`: how FLOPs rebuilt from a torch trace's
    shapes count causal attention (analysis.ops.matrix.FLOP_CONVENTIONS). What the caller uses, where less
    lets a reader do less (an nsys export of a million launches): `ranges`, each launch's NVTX ranges (else
    nvtx may be None); `each_launch`, rows per launch (else they may be sums per kernel, as summaries give).
    `max_inflated`: the GB a gzip'd file may decompress to (ceilings.inputs.max_decompressed_bytes).
    """
    from .registry import detect  # every reader, and pandas: not for --help

    source = read_source(path, max_inflated)
    source.memo.update(flops=flops, each_launch=each_launch, ranges=ranges)
    found = source.memo["binary_format"] or detect(source)
    if found is None:
        _not_a_profile(source)
    fmt, where = found
    try:
        df = fmt.read(source, where)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:  # a CSV cut inside a quoted cell, bytes that are
        # not UTF-8 in a cell: one line, not a traceback
        raise CeilingsError(f"{source.path}: {fmt.name} that does not parse ({describe(exc)}); truncated or "
                            f"edited file? Export it again") from None
    return _finish(df, source, fmt)


def read_source(path: str | os.PathLike, max_inflated: float | None = None) -> Source:
    """A file's content as the readers see it: gzip decompressed (by content), and for text a leading BOM
    dropped and CRLF made LF; one-line errors for a missing, unreadable, empty or binary-but-unknown file.
    A text file past HEAD_BYTES whose head needs no change is read whole only when a reader asks (contract)."""
    from .registry import detect

    p = Path(path)
    head = read_bytes(p, WHAT_IS_READ, HEAD_BYTES)
    gzipped = head.startswith(GZIP_MAGIC)  # torch.profiler's .json.gz, or any profile gzipped: by content
    data = gunzip(read_bytes(p, WHAT_IS_READ), p, max_inflated) if gzipped else head
    # a binary format is read from its file: its first bytes are all it needs here (contract)
    source = Source(data, str(p), None if gzipped else p)
    source.memo["binary_format"] = detect(source, binary=True)  # kept: read_profile does not look again
    if source.memo["binary_format"] is not None:
        return source
    if data.startswith(UTF16_BOMS) or data[1:HEAD_BYTES:2].count(0) > len(data[:HEAD_BYTES]) // 4:
        raise CeilingsError(f"{p}: UTF-16 text (PowerShell's `>` or Out-File saves so); save it as UTF-8: "
                            f"`Get-Content IN | Set-Content -Encoding utf8 OUT`, or iconv -f UTF-16 -t UTF-8")
    if b"\0" in data[:HEAD_BYTES]:
        raise CeilingsError(f"{p}: binary file, not Nsight Compute/Systems text or CSV output")
    if not gzipped and len(head) == HEAD_BYTES and not head.isspace() and not head.startswith(UTF8_BOM) \
            and b"\r" not in head:
        text = Source(head, str(p), p, load=lambda: _as_read(read_bytes(p, WHAT_IS_READ)))
    else:
        if not gzipped and len(head) == HEAD_BYTES:
            data = read_bytes(p, WHAT_IS_READ)
        if not data or data.isspace():
            raise CeilingsError(f"{p}: empty file; expected Nsight Compute or Nsight Systems output")
        # read_csv may read a regular file again by path (faster than from memory); not a file whose bytes were
        # changed here (decompressed; a BOM: the header must start the line)
        text = Source(_as_read(data), str(p), None if gzipped or data.startswith(UTF8_BOM) else p)
    text.memo["binary_format"] = None
    return text


WHAT_IS_READ = "profiler output file (a folder is taken only as one of torch.profiler traces)"


def _as_read(data: bytes) -> bytes:
    """Text as the readers see it: a leading BOM (Windows `Out-File -Encoding utf8`) dropped, CRLF made LF;
    `data` itself where neither is there."""
    if data.startswith(UTF8_BOM):
        data = data.removeprefix(UTF8_BOM)
    return data.replace(b"\r\n", b"\n") if b"\r" in data else data


def _not_a_profile(source: Source) -> None:
    """Why no format recognised the file, as a CeilingsError."""
    ncu_csv.refuse_lacking_header(source.data, source.path)
    if PROFILER_LINE.search(source.text):
        raise CeilingsError(f"{source.path}: profiler output without any kernel results (did the profiled run "
                            f"fail or launch no kernel? see its ==ERROR== lines)")
    if _is_roofs_file(source.data):
        raise CeilingsError(f"{source.path} is a roofs file (ceilings.measure output); pass it with --roofs")
    raise CeilingsError(f"{source.path}: not Nsight Compute or Nsight Systems output (no kernel heading, ncu "
                        f"CSV header or nsys kernel summary found)")


def _is_roofs_file(data: bytes) -> bool:
    """A roofs document (docs/roofs-schema.md): a JSON object with "schema_version" and "ceilings"."""
    if not data.lstrip().startswith(b"{"):
        return False
    try:
        doc = loads_json(data, "")
    except (ValueError, CeilingsError):  # JSONDecodeError, UnicodeDecodeError, nesting beyond the parser
        return False
    return isinstance(doc, dict) and "schema_version" in doc and "ceilings" in doc


def _finish(df: pd.DataFrame, source: Source, fmt: Format) -> pd.DataFrame:
    path = Path(source.path)
    attrs = dict(df.attrs)  # what the reader noted (notes, memory_operations, busy_s) survives the reshaping
    if df.empty:
        raise CeilingsError(f"{path}: profiler output without any kernel results")
    defaults = {"source": "nsys" if fmt.yields == TIMES else "ncu", "name_truncated": False, "nvtx": (),
                "before_trace": False, "op_helper": False}
    for col in META_COLUMNS:
        if col not in df.columns:
            df[col] = [defaults.get(col)] * len(df) if col == "nvtx" else defaults.get(col)
    for col in (c for c, dtype in META_DTYPES.items() if dtype == "bool"):  # flags a reader may leave unset
        df[col] = df[col].fillna(False).astype(bool)
    if df["kernel"].isna().any() or (df["kernel"].astype(str) == "").any():
        raise CeilingsError(f"{path}: a launch without a kernel name; truncated or edited file?")
    rest = [c for c in df.columns if c not in META_COLUMNS]
    attrs["notes"] = [*attrs.get("notes", []), *_not_utf8(df, path), *_check_values(df, rest, source)]
    _launch_facts_from_metrics(df)
    if not np.isfinite(df[rest].to_numpy(dtype="float64")).any():
        raise CeilingsError(f"{path}: every metric of every launch is missing (n/a or nan): ncu ran but measured "
                            f"nothing{_first_error(source.data)}")
    df = df[META_COLUMNS + rest].reset_index(drop=True)
    df["launches"] = df["launches"].astype(META_DTYPES["launches"])
    df.attrs.update(attrs, format=fmt.name, yields=fmt.yields)
    return df


def _not_utf8(df: pd.DataFrame, path: Path) -> list[str]:
    """A warning where kernel names hold bytes that are not UTF-8: every text reader decodes them as U+FFFD (an
    export saved as Latin-1 or cp1252), so the names differ from the profiler's while the numbers are read."""
    names = [str(name) for name in pd.unique(df["kernel"]) if "\ufffd" in str(name)]
    if not names:
        return []
    return [f"{path}: {len(names)} kernel name(s) hold bytes that are not UTF-8, shown as \ufffd (first: "
            f"{names[0][:80]!r}); was the export saved in another encoding (Latin-1)? The numbers are read as "
            f"written; save it as UTF-8 for the names"]


def _check_values(df: pd.DataFrame, metrics: Sequence[str], source: Source) -> list[str]:
    """The one check of every reader's numbers: each is missing (NaN, where the profiler wrote n/a) or finite,
    not negative and below MAX_COUNTER; `launches` a whole number from 1 up.

    A launch count outside that is no profile: CeilingsError naming the kernel and value. A metric value
    outside it is not measured (ncu writes negative values for some sampled or derived counters: bank
    conflicts of LDGSTS), so it becomes missing for that launch, never 0: the rest of the file is read, and a
    warning per metric (returned) names how many launches lost it, the first kernel, value and file line."""
    path = source.path
    launches = df["launches"]
    # a reader's numbers need no conversion one launch at a time (a million nsys launches); text readers give the
    # count as written ("1,000", "1e308", 23 digits), read here, so that a refusal quotes it, not what a cast made
    numeric = pd.api.types.is_numeric_dtype(launches) and not pd.api.types.is_bool_dtype(launches)
    launches = (launches if numeric else parse_values(launches)).astype("float64")
    bad = ~((launches >= 1) & (launches < ncu_csv.MAX_LAUNCHES) & (launches % 1 == 0))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        written = df["launches"].iloc[i]  # text as written, a number as a number (not numpy's repr)
        shown = repr(written) if isinstance(written, str) else f"{launches.iloc[i]:g}"
        raise CeilingsError(f"{path}: kernel {_kernel_at(df, i)}: {shown} launches; a count is a whole number from 1 "
                            f"up; edited or corrupt file?")
    df["launches"] = launches  # whole numbers: _finish makes them int64
    if not len(metrics):
        return []
    with np.errstate(invalid="ignore"):
        values = df[list(metrics)].to_numpy(dtype="float64")
        bad = ~np.isnan(values) & ~((values >= 0) & (values < MAX_COUNTER))
    if not bad.any():
        return []
    warnings = []
    for j in np.flatnonzero(bad.any(axis=0)):
        rows = np.flatnonzero(bad[:, j])
        i, metric, value = int(rows[0]), metrics[j], values[rows[0], j]
        line = _line_of(source, metric, value)
        where = f" (line {line})" if line else ""
        warnings.append(f"{metric}: {len(rows)} launch(es) hold a value no counter can have (0 or more, finite, "
                        f"below 2^64), first kernel {_kernel_at(df, i)} = {value:g}{where}: missing for those "
                        f"launches (what is derived from it too), the rest read; a sampled or derived counter, "
                        f"or an edited file")
        if df[metric].dtype.kind != "f":  # a reader's integer column: NaN needs floats (pandas would warn)
            df[metric] = df[metric].astype("float64")
        df.iloc[rows, df.columns.get_loc(metric)] = np.nan
    return warnings


def _line_of(source: Source, metric: str, value: float) -> int | None:
    """The file line that writes `metric` (or its section label) = `value` in some unit (a power of 1000 apart
    from the base unit), the first such; None where no line shows it (a summary's average, a torch trace)."""
    data = source.data
    name = metric.rsplit("/", 1)[-1].encode()  # a section layout's metric is 'Section/Label'
    pos = data.find(name)
    for _ in range(MAX_LINES_SEARCHED):
        if pos < 0:
            return None
        start, end = data.rfind(b"\n", 0, pos) + 1, data.find(b"\n", pos)
        line = data[start:end if end >= 0 else len(data)]
        for number in WRITTEN_NUMBER.findall(line[line.find(name) + len(name):]):
            written = float(number.replace(b",", b""))
            if written and any(math.isclose(written * 1000.0**k, value, rel_tol=1e-6) for k in range(-4, 5)):
                return data.count(b"\n", 0, start) + 1
        pos = data.find(name, end)
    return None


MAX_LINES_SEARCHED = 1000  # lines naming a bad value's metric looked at for it: the first launches hold it
WRITTEN_NUMBER = re.compile(rb"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _kernel_at(df: pd.DataFrame, i: int) -> str:
    name = str(df["kernel"].iloc[i])[:80]
    launch_id = df["id"].iloc[i] if "id" in df.columns else None
    return name if launch_id is None or pd.isna(launch_id) else f"{name} (ID {launch_id})"


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

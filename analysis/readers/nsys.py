"""Nsight Systems `nsys stats` reports, CSV and text: kernel times, matched to ncu counters by name.

Three reports, each read from CSV and from text (their headers in each nsys version, and where they were
verified: docs/ncu-ingestion.md, section "nsys"):
- `cuda_gpu_kern_sum` (older `gpukernsum`; `cuda_gpu_kern_gb_sum` and nsys 2022 add GridXYZ/BlockXYZ): one row
  per kernel (and grid, block) with Instances and the average time per launch.
- `cuda_kern_exec_sum` (older `kernexecsum`): one row per kernel, launching process and thread, device and
  launch API. The kernel's own GPU time is KAvg; TAvg, AAvg and QAvg include the host's API call and the
  wait in the launch queue, which are not kernel time.
- `cuda_gpu_trace` (older `gputrace`): one row per kernel launch with its grid, block, device and Duration.
  Its memcpy/memset rows are not kernels: they are dropped and counted in `attrs["memory_operations"]`.

Every table in a file is a run of its own (`run` = 0, 1, ... in file order), also when one report appears
twice: `nsys profile --stats=true` logs pasted one after another, or the reports of several profiles. A
file holding several of these reports is read as the first Format in formats() that recognises it.
Text tables are a header, a dash row and rows up to a blank line. A kernel summary's row is read as tokens:
one per numeric column (GridXYZ and BlockXYZ: three), the name the rest of the line, so a row that sits a
column left or right of the dash row (a one-digit Time (%), a pasted report) reads the same. The other
reports have text and empty cells: they are cut at the dash row's spans, the name's start moved back to the
start of its word. Lines of "..." (rows left out of a pasted report) are skipped and counted in a note.
nsys cuts names at 100 characters with "…" in text: `name_truncated` says so and the name is kept without
the ellipsis.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

import pandas as pd

from common.errors import CeilingsError

from ..units import parse_value
from .contract import TIMES, Format, Source

TIME_METRIC = "gpu__time_duration.sum"
DURATION_COLUMNS = ("Duration (ns)", "Duration(nsec)")  # cuda_gpu_trace; gputrace of nsys 2020-2021
AVG_COLUMNS = ("Avg (ns)", "Average (ns)", "Average")  # nsys 2022-, 2021, 2020 (docs: section nsys)
# nsys rounds Avg to 0.1 ns (a pasted report may round it more): an Avg further than this from Total Time /
# Instances means the row's cells are not the header's (a cell missing), so its time would be wrong
AVG_TOLERANCE_NS, AVG_TOLERANCE = 0.5, 1e-3
# the whitespace tokens of a kernel summary's columns before the name: one each, but these
SUMMARY_TOKENS = {"GridXYZ": 3, "BlockXYZ": 3}
ELIDED = re.compile(r"[.…\s]*(?:\.\.\.|…)[.…\s]*")  # a pasted report's "..." line: rows left out
TOKEN = re.compile(r"\S+")
MEMORY_OPERATIONS = ("[CUDA memcpy", "[CUDA memset")  # trace rows of memory operations, not kernels
DEVICE = re.compile(r"(?P<gpu>.*\S)\s+\((?P<id>\d+)\)")  # trace "Device": "NVIDIA A100-SXM4-40GB (0)"
BLANK_LINE = re.compile(rb"\n[ \t]*(?:\n|\Z)")  # a table ends at a blank line or at the end of the file
DASHES = re.compile(r"-+")
TEXT_CELL_GAP = re.compile(r"\s{2,}")  # text columns are two spaces apart; names hold single spaces only
OPTIONAL = dict.fromkeys(("grid", "block", "device", "gpu", "process"))  # None where a report lacks them


class BadRow(ValueError):
    """Why a row cannot be read; the reader adds FILE:LINE, the report and the remedy."""


@dataclass(frozen=True)
class Report:
    title: str  # in messages: "unreadable row in the nsys <title>"
    command: str  # the nsys report that writes it, for the remedy
    needle: bytes  # a column name in the header of every version: candidate lines are found with one scan
    is_header: Callable[[list[str]], bool]  # the header's column names
    row: Callable[[dict[str, str]], dict | None]  # one row's cells -> its columns; None: not a kernel
    tokens: dict[str, int] | None = None  # text rows as tokens (these columns' counts, else 1), else by spans


def _cell(cells: dict[str, str], key: str) -> str:
    return (cells.get(key) or "").strip()  # a CSV row cut short has no cells for its last columns


def _count(cells: dict[str, str], key: str) -> int:
    text = _cell(cells, key)
    value = parse_value(text)
    if not (math.isfinite(value) and value >= 1 and value.is_integer()):
        raise BadRow(f"{key} {text!r} is not a count of launches")
    return int(value)


def _ns(cells: dict[str, str], key: str) -> float:
    text = _cell(cells, key)
    value = parse_value(text)
    if not (math.isfinite(value) and value >= 0):
        raise BadRow(f"{key} {text!r} is not a time")
    return value


def _name(cells: dict[str, str], key: str) -> dict:
    name = _cell(cells, key)
    if not name:
        raise BadRow(f"no {key}")
    truncated = name.endswith("…")
    return {"kernel": name.removesuffix("…") if truncated else name, "name_truncated": truncated}


def _dims(texts: list[str], what: str) -> str | None:
    """'(x, y, z)' of a grid or block given as three cells, or as one 'x y z' cell; None when all are empty."""
    if not any(texts):
        return None
    values = [parse_value(t) for t in texts]
    if not all(math.isfinite(v) and v >= 1 and v.is_integer() for v in values):
        raise BadRow(f"{what} {' '.join(texts)!r} is not three sizes")
    return "(" + ", ".join(str(int(v)) for v in values) + ")"


def kernel_row(cells: dict[str, str]) -> dict:
    """A row of cuda_gpu_kern_sum / gpukernsum (text or CSV): time per launch = Total Time / Instances (the
    Avg column is rounded)."""
    avg_key = next((k for k in AVG_COLUMNS if k in cells), None)
    if avg_key is None:
        raise BadRow(f"no average column ({' / '.join(AVG_COLUMNS)})")
    row = _name(cells, "Name")
    count, avg, total = _count(cells, "Instances"), _ns(cells, avg_key), _ns(cells, "Total Time (ns)")
    if abs(avg - total / count) > AVG_TOLERANCE_NS + AVG_TOLERANCE * avg:
        raise BadRow(f"{avg_key} {avg:g} is not Total Time {total:g} / Instances {count}: cells out of place")
    grid_block = {}
    if "GridXYZ" in cells:  # nsys 2022 and cuda_gpu_kern_gb_sum: '%4d %4d %4d'
        grid_block = {"grid": _dims(_cell(cells, "GridXYZ").split(), "GridXYZ"),
                      "block": _dims(_cell(cells, "BlockXYZ").split(), "BlockXYZ")}
    return {**row, "launches": count, TIME_METRIC: total / count * 1e-9, **grid_block}


def exec_row(cells: dict[str, str]) -> dict:
    """A row of cuda_kern_exec_sum: the kernel's execution time (KAvg) per launch, not the API or queue time."""
    return {**_name(cells, "Kernel Name"), "launches": _count(cells, "Count"),
            TIME_METRIC: _ns(cells, "KAvg (ns)") * 1e-9,
            "device": _cell(cells, "DevId") or None, "process": _cell(cells, "PID") or None}


def trace_row(cells: dict[str, str]) -> dict | None:
    """A row of cuda_gpu_trace / gputrace: one launch and its Duration; None for a memcpy or memset."""
    row = _name(cells, "Name")
    if row["kernel"].startswith(MEMORY_OPERATIONS):
        return None
    duration = next(k for k in DURATION_COLUMNS if k in cells)  # the header has one (TRACE.is_header)
    device = DEVICE.fullmatch(_cell(cells, "Device"))
    return {**row, "launches": 1, TIME_METRIC: _ns(cells, duration) * 1e-9,
            "grid": _dims([_cell(cells, k) for k in ("GrdX", "GrdY", "GrdZ")], "grid"),
            "block": _dims([_cell(cells, k) for k in ("BlkX", "BlkY", "BlkZ")], "block"),
            "device": device["id"] if device else None,
            "gpu": device["gpu"] if device else _cell(cells, "Device") or None}


KERN_SUM = Report("kernel summary", "cuda_gpu_kern_sum", b"Instances",
                  lambda n: n[0] in ("Time (%)", "Time(%)") and {"Total Time (ns)", "Instances"} <= set(n)
                  and n[-1] == "Name", kernel_row, SUMMARY_TOKENS)
EXEC_SUM = Report("kernel launch & exec summary", "cuda_kern_exec_sum", b"QCount",
                  lambda n: {"Count", "QCount", "KAvg (ns)"} <= set(n) and n[-1] == "Kernel Name", exec_row)
TRACE = Report("GPU trace", "cuda_gpu_trace", b"GrdX",
               lambda n: {"CorrId", "GrdX", "BlkX"} <= set(n) and any(k in n for k in DURATION_COLUMNS)
               and n[-1] == "Name", trace_row)


def _csv_names(line: str) -> list[str]:
    try:
        return [c.strip() for c in next(csv.reader([line]), [])]
    except csv.Error:  # not a CSV line, so no CSV header
        return []


def _text_names(line: str) -> list[str]:
    return TEXT_CELL_GAP.split(line.strip())


def _is_dash_row(line: str) -> bool:
    return bool(line.strip()) and not line.strip(" -")


def _line_end(data: bytes, start: int) -> int:
    end = data.find(b"\n", start)
    return len(data) if end < 0 else end


def _line(data: bytes, start: int) -> str:
    return data[start:_line_end(data, start)].decode("utf-8", errors="replace")


def _header_starts(source: Source, report: Report, text: bool) -> list[int]:
    """Byte offsets of the lines that open a table of `report`: its header (text: with a dash row below)."""
    data, starts = source.data, []
    pos = data.find(report.needle)
    while pos >= 0:
        start, end = data.rfind(b"\n", 0, pos) + 1, _line_end(data, pos)
        line = _line(data, start)
        if report.is_header(_text_names(line) if text else _csv_names(line)) and (
                not text or _is_dash_row(_line(data, end + 1))):
            starts.append(start)
        pos = data.find(report.needle, end)
    return starts


def _tables(source: Source, starts: list[int]) -> Iterator[tuple[int, list[str]]]:
    """(line number of the header, the table's lines from its header up to the blank line that ends it)."""
    for start in starts:
        end = BLANK_LINE.search(source.data, start)
        block = source.data[start:end.start() if end else len(source.data)]
        yield source.data.count(b"\n", 0, start) + 1, block.decode("utf-8", errors="replace").split("\n")


def _csv_rows(source: Source, report: Report, header_line: int, lines: list[str]):
    """(cells, line number) of each row of a CSV table; a quoted name may span lines."""
    names = _csv_names(lines[0])
    reader = csv.reader(lines[1:])
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            _fail(source, header_line + reader.line_num, report, f"not CSV ({exc})")
        where = header_line + reader.line_num  # lines read so far: the row's last line
        if len(cells) > len(names):
            _fail(source, where, report, f"{len(cells)} cells under a header of {len(names)} columns")
        yield dict(zip(names, cells)), where


def _text_rows(source: Source, report: Report, header_line: int, lines: list[str]):
    """(cells, line number) of each row of a text table: tokens, or cut at the spans of its dash row (see
    the module's docstring); "..." lines are yielded as None."""
    names, spans = _text_names(lines[0]), [m.span() for m in DASHES.finditer(lines[1])]
    if len(names) != len(spans):
        _fail(source, header_line, report, f"the header names {len(names)} columns, the dash row below it "
                                          f"{len(spans)}", what="table")
    for offset, line in enumerate(lines[2:], start=2):
        where = header_line + offset
        if ELIDED.fullmatch(line):
            yield None, where
        elif report.tokens is not None:
            yield _tokens(source, report, where, names, line), where
        else:
            yield _spans(names, spans, line), where


def _tokens(source: Source, report: Report, where: int, names: list[str], line: str) -> dict[str, str]:
    """A row's cells as whitespace tokens, report.tokens[column] (else 1) per column, the last column (the
    name, which may hold spaces) the rest of the line."""
    found = list(TOKEN.finditer(line))
    cells, i = {}, 0
    for name in names[:-1]:
        n = report.tokens.get(name, 1)
        if i + n >= len(found):
            _fail(source, where, report, f"{len(found)} cells, fewer than the {len(names)} columns of the header")
        cells[name] = " ".join(m.group() for m in found[i:i + n])
        i += n
    cells[names[-1]] = line[found[i].start():]
    return cells


def _spans(names: list[str], spans: list[tuple[int, int]], line: str) -> dict[str, str]:
    """A row's cells cut at the dash row's spans; the last (the name) from the start of its first word to the
    end of the line, so a row shifted left keeps the name's first characters."""
    cells = {k: line[a:b] for k, (a, b) in zip(names[:-1], spans[:-1])}
    start = spans[-1][0]
    while 0 < start <= len(line) and not line[start - 1].isspace():
        start -= 1
    cells[names[-1]] = line[start:]
    return cells


def _fail(source: Source, line: int, report: Report, why: str, what: str = "row") -> NoReturn:
    raise CeilingsError(f"{source.path}:{line}: unreadable {what} in the nsys {report.title} ({report.command}): "
                        f"{why}; export the report again (`nsys stats --report {report.command} --format csv "
                        f"REPORT.nsys-rep`) or fix the file")


def _reader(report: Report, text: bool) -> Callable[[Source, list[int]], pd.DataFrame]:
    rows_of = _text_rows if text else _csv_rows

    def read(source: Source, starts: list[int]) -> pd.DataFrame:
        rows, dropped, elided = [], 0, []
        for run, (header_line, lines) in enumerate(_tables(source, starts)):
            index = 0  # the row's place among the kernels of its run
            for cells, where in rows_of(source, report, header_line, lines):
                if cells is None:
                    elided.append(where)
                    continue
                try:
                    row = report.row(cells)
                except BadRow as exc:
                    _fail(source, where, report, str(exc))
                if row is None:
                    dropped += 1
                    continue
                rows.append({"run": run, "id": index, **OPTIONAL, **row, "source": "nsys"})
                index += 1
        df = pd.DataFrame(rows)
        if elided:
            df.attrs["notes"] = [f"{len(elided)} '...' line(s) (first: line {elided[0]}) stand for rows left out "
                                 f"of a pasted {report.command} report: their kernels are not in the table; "
                                 f"use the report as nsys wrote it"]
        if report is TRACE:  # the only report that lists memory operations beside the kernels
            df.attrs["memory_operations"] = dropped
        return df

    return read


def _format(report: Report, text: bool) -> Format:
    return Format(f"nsys {report.title} ({'text' if text else 'CSV'})", TIMES,
                  lambda source: _header_starts(source, report, text) or None, _reader(report, text))


CSV = _format(KERN_SUM, text=False)
TEXT = _format(KERN_SUM, text=True)
EXEC_CSV = _format(EXEC_SUM, text=False)
EXEC_TEXT = _format(EXEC_SUM, text=True)
TRACE_CSV = _format(TRACE, text=False)
TRACE_TEXT = _format(TRACE, text=True)

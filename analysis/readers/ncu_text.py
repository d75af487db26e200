"""Single-pass line scanner for ncu text output (--log-file or captured stdout).

Handles the `--metrics` layout ("Section: Command line profiler metrics"), the section layouts (2020 and
2023+ tables, with or without the Metric Name/Unit/Value header), `--print-summary per-kernel` (Average
column) and `per-gpu` (moved into the per-kernel layout first; a kernel whose sections are blocks of their
own, each under its line again, is one kernel), old and new kernel headings, NVTX blocks (the ranges a launch
ran in), rule text, application output and `==PROF==` lines (also inside a table), the named tables of
`--print-details` (ncu 2025: "Table Name :" lines, with or without sections), and several runs in one file
(each `[PID] process@host` line starts a run); a report shifted right as a whole (kernel headings at 4 spaces
or more, a bot's log) is moved back first.
Table rows are cut at the column spans of their dash rows, never split on spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import isfinite

from ceilings.lazy import lazy
from common.errors import CeilingsError

from ..metrics import METRIC_ALIASES, canonical_metric
from ..units import metric_factor, parse_value
from .contract import COUNTERS, Format, Source

pd = lazy("pandas")

CLI_SECTION = "Command line profiler metrics"
MIN_METRIC_TABLE_SPANS = 3  # name, unit, value; rule separators ("----- -----") have 2

_PROCESS = re.compile(r"^\[(\d+)\] (.*)@(.*?)\s*$")
# Anchored from the right: names contain commas, parentheses, templates and lambdas.
_HEADING_NEW = re.compile(
    r"^(?P<name>\S.*?)(?: \((?P<grid>\d+, \d+, \d+)\)x\((?P<block>\d+, \d+, \d+)\))?"
    r"(?:, Context (?P<ctx>\d+), Stream (?P<stream>\d+))?, Device (?P<dev>\d+), CC (?P<cc>\d+\.\d+|\?)"
    r"(?:, Invocations (?P<n>\S+))?\s*$")  # any count, as written: the value check refuses one that is no count
_HEADING_OLD = re.compile(
    r"^(?P<name>\S.*), (?P<when>\d{4}-\w{3}-\d{1,2} \d{1,2}:\d{2}:\d{2}), Context (?P<ctx>\d+),"
    r" Stream (?P<stream>\d+)\s*$")
# `--print-summary per-gpu`: a GPU heading at 2 spaces, then each kernel (and grid) one level deeper:
#   "  Device 0, CC 9.0" / "    NAME (g, g, g)x(b, b, b), Invocations 300" / "      Section: ..."
# older ncu: "  Device 0" / "    NAME, Block Size 256, Grid Size 512, 1 invocations" (header row, then one dash row)
_GPU_HEADING = re.compile(r"^  Device (?P<dev>\d+)(?:, CC (?P<cc>\d+\.\d+))?\s*$", re.MULTILINE)
_GPU_KERNEL = re.compile(r"^    (?P<name>\S.*?)(?:, Invocations (?P<n>\S+)|, Block Size \d+, Grid Size \d+, "
                         r"(?P<old>\d+) invocations)\s*$")
_SPANS = re.compile(r"-+")
# any kernel heading, found cheaply (the scanner matches them exactly): at ncu's 2 spaces, or deeper when the
# whole report is shifted right (a bot or CI log that indents what the tool printed, application output
# interleaved at the left margin)
_ANY_HEADING = re.compile(r"^(?P<indent>  +)\S.*(?:, Context \d+, Stream \d+|, Device \d+, CC \d+\.\d+)",
                          re.MULTILINE)
HEADING_INDENT = 2
PER_GPU = "per-gpu"  # what _find answers for a `--print-summary per-gpu` layout; else the report's shift
# `--print-details` (ncu 2025) names each table on a line of its own, with or without a "Section:" above:
# "    Table Name : GPU Throughput", then maybe "    Table Description : ...", then the table
TABLE_NAME = "    Table Name : "
# an NVTX range inside a heading's "NVTX Start/End Ranges:" / "NVTX Push/Pop Stack ..." block: "<0,name>"
_NVTX_RANGE = re.compile(r"^\s+<\d+,(.*)>\s*$")
NVTX_BLOCK = "    NVTX "
GPU_NAME_METRIC = "device__attribute_display_name"  # a string: kept as the launch's `gpu`, not a number


@dataclass
class TextLaunch:
    run: int
    id: int
    kernel: str
    launches: int | str = 1  # a heading's Invocations as written, read by the value check
    grid: str | None = None
    block: str | None = None
    device: str | None = None
    cc: str | None = None
    gpu: str | None = None
    process: str | None = None
    nvtx: tuple[str, ...] = ()
    source: str = "ncu"
    name_truncated: bool = False
    metrics: dict[str, float] = field(default_factory=dict)


def metric_key(section: str | None, label: str) -> str:
    """Metric names stay as they are; section-layout labels become 'Section/Label' unless aliased."""
    if "__" in label or label in METRIC_ALIASES or not section or section == CLI_SECTION:
        return canonical_metric(label)
    return f"{section}/{label}"


def _is_dash_row(stripped: str) -> bool:
    return stripped[:1] == "-" and not stripped.strip("- ")


def _spans(line: str) -> list[tuple[int, int]]:
    return [m.span() for m in _SPANS.finditer(line)]


def _tuple(text: str | None) -> str | None:
    return f"({text})" if text else None


def per_gpu_as_per_kernel(text: str) -> str:
    """A `--print-summary per-gpu` text in the per-kernel layout: each kernel line becomes a per-kernel
    heading naming its GPU, the lines under it move up one level, and an old table whose header row has no
    dash row above it gets one (the per-kernel scanner opens tables at a dash row)."""
    lines = text.split("\n")
    out, device, close = [], None, None  # close: the dash row an old table (no closing row) ends with
    for i, line in enumerate(lines):
        if close is not None and not line.strip():
            out.append(close)
            close = None
        gpu = _GPU_HEADING.match(line)
        if gpu:
            device = f", Device {gpu['dev']}" + (f", CC {gpu['cc']}" if gpu["cc"] else ", CC ?")
            continue
        kernel = _GPU_KERNEL.match(line) if device else None
        if kernel:
            out.append(f"  {kernel['name']}{device}, Invocations {kernel['n'] or kernel['old']}")
            continue
        if device and line.startswith("      "):
            line = line[2:]
            if line.lstrip().startswith("Metric Name") and not _is_dash_row(out[-1].strip() if out else ""):
                below = lines[i + 1][2:] if i + 1 < len(lines) else ""
                if _is_dash_row(below.strip()):
                    out.append(below)
                    close = below
        elif device and line and not line.startswith("    "):
            device = None  # the summary ended (a process line, ==PROF== output)
        out.append(line)
    if close is not None:
        out.append(close)
    return "\n".join(out)


def scan_text(text: str, path: str) -> list[TextLaunch]:
    """The launch records of an ncu text file."""
    launches: list[TextLaunch] = []
    run = 0
    launch_in_run = 0
    current: TextLaunch | None = None
    section: str | None = None
    in_table = False
    table_start_line = 0
    spans: list[tuple[int, int]] = []
    u0 = u1 = v0 = v1 = 0  # unit and value cells of the open table
    value_to_end = True  # the value is the last column: taken to the end of the line
    expect_header = False  # the first line after an opening dash row may be a header
    header_sep_pending = False  # a header row is followed by its own dash row
    process: str | None = None
    table_name: str | None = None  # the "Table Name :" line above the next table
    table_section: str | None = None  # what names the open table's metrics: its section, else its table name
    in_nvtx = False  # inside a heading's NVTX block
    heading = ""  # the current launch's heading, and the sections printed under it so far
    sections: set[str] = set()
    # Caches: a big log repeats few distinct dash rows, headings, and (name, unit) cells per table layout.
    span_cache: dict[str, list[tuple[int, int]]] = {}
    heading_cache: dict[str, dict[str, str | None]] = {}
    row_caches: dict[tuple, dict[str, tuple[str | None, float]]] = {}  # (section, u0, u1) -> line[:u1] -> ...
    row_cache: dict[str, tuple[str | None, float]] = {}  # (metric key, unit factor) by name and unit cells

    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        if in_table:
            # A data row: 4 spaces, then a name. The structural checks below cannot apply to it.
            c = line[4:5]
            is_row = (not expect_header and line.startswith("    ") and c not in "-=" and not c.isspace()
                      and not line.startswith("Section: ", 4))
            if not is_row:
                stripped = line.strip()
                if not stripped or stripped.startswith("=="):
                    continue
                if line[:1] != " " and not _PROCESS.match(line):
                    continue  # the application's output at the margin, printed into the table
                if _is_dash_row(stripped):
                    if header_sep_pending:
                        header_sep_pending = False
                    else:
                        in_table = False
                    continue
                if expect_header:
                    expect_header = False
                    if stripped.startswith("Metric Name"):
                        names = [line[a:b].strip() for a, b in spans]
                        value_col = names.index("Average") if "Average" in names else len(spans) - 1
                        v0, v1 = spans[value_col]
                        value_to_end = value_col == len(spans) - 1
                        header_sep_pending = True
                        continue
                is_row = not (line.startswith("    Section: ") or (line.startswith("  ") and line[2:3] != " "))
                in_table = is_row  # a table that lost its closing dash row: fall through to the structure
            if is_row:
                raw = line[v0:] if value_to_end else line[v0:v1]
                if "," in raw:  # thousands separators: float() would fail
                    value = parse_value(raw)
                else:
                    try:
                        value = float(raw)
                    except ValueError:
                        value = parse_value(raw)
                if not isfinite(value):  # n/a, words, nan, inf: not stored
                    if line[4:].startswith(GPU_NAME_METRIC):
                        current.gpu = line[v0:].strip() if value_to_end else line[v0:v1].strip()
                    continue
                cells = line[:u1]
                entry = row_cache.get(cells)
                if entry is None:
                    name = line[:u0].strip()
                    entry = row_cache[cells] = (metric_key(table_section, name) if name else None,
                                                metric_factor(name, line[u0:u1].strip()))
                key, factor = entry
                if key is not None and key not in current.metrics:
                    current.metrics[key] = value * factor
                continue

        if in_nvtx:
            m = _NVTX_RANGE.match(line)
            if m:
                current.nvtx += (m.group(1),)
                continue
            in_nvtx = line.startswith("      ")  # domain lines ("<default domain>") are indented deeper
            if in_nvtx:
                continue
        if line.startswith("    Section: "):
            section, table_name = line[13:].strip(), None
            sections.add(section)
            continue
        if line.startswith(TABLE_NAME):
            table_name = line[len(TABLE_NAME):].strip()
            continue
        if current is not None and section is None and table_name is None and line.startswith(NVTX_BLOCK):
            in_nvtx = True
            continue
        first = line[:1]
        if first == "[":
            m = _PROCESS.match(line)
            if m:
                run += 1
                launch_in_run = 0
                current = None
                process = f"{m.group(1)} {m.group(2)}@{m.group(3)}"
                continue
        if line.startswith("  ") and line[2:3] not in (" ", "") and (", Context " in line or ", CC " in line):
            body = line[2:]
            g = heading_cache.get(body)
            if g is None:
                m = _HEADING_NEW.match(body)
                if m:  # new headings repeat for every launch of a kernel and grid; old ones carry a timestamp
                    g = heading_cache[body] = m.groupdict()
                else:
                    m = _HEADING_OLD.match(body)
                    g = m.groupdict() if m else None
            if g is not None:
                # A summary prints a kernel once, with each section once; `--print-summary per-gpu` may print
                # every section as a block of its own under the kernel's line again. So a summary heading that
                # repeats the current one above a section not yet printed under it goes on with that kernel (a
                # launch heading repeats for every launch: each is a launch of its own).
                below = lines[lineno] if lineno < len(lines) else ""
                if g.get("n") and current is not None and body == heading and below.startswith("    Section: ") \
                        and below[13:].strip() not in sections:
                    continue
                heading, sections = body, set()
                current = TextLaunch(run=run, id=launch_in_run, kernel=g["name"], grid=_tuple(g.get("grid")),
                                 block=_tuple(g.get("block")), device=g.get("dev"),
                                 cc=None if g.get("cc") == "?" else g.get("cc"),
                                 launches=g.get("n") or 1, process=process)
                launches.append(current)
                launch_in_run += 1
                section = table_name = None
                continue
        stripped = line.strip()
        if current is not None and (section or table_name) and _is_dash_row(stripped) and line.startswith("    "):
            table_spans = span_cache.get(line)
            if table_spans is None:
                table_spans = span_cache[line] = _spans(line)
            if len(table_spans) >= MIN_METRIC_TABLE_SPANS:
                in_table, expect_header, header_sep_pending = True, True, False
                spans, table_start_line = table_spans, lineno
                (u0, u1), (v0, v1) = spans[1], spans[2]
                value_to_end = len(spans) == MIN_METRIC_TABLE_SPANS
                table_section = section or table_name  # a named table outside any section: its name
                row_cache = row_caches.setdefault((table_section, u0, u1), {})
            continue

    if in_table:
        raise CeilingsError(f"{path}:{len(lines)}: file ends inside the metrics table begun at line "
                            f"{table_start_line} (truncated output?); profile again or fix the file")
    return launches


def _per_gpu(source: Source) -> bool:
    """A `--print-summary per-gpu` layout (a bytes search first: the pattern alone is slow on big logs)."""
    return b"\n  Device " in source.data and _GPU_HEADING.search(source.text) is not None


def _find(source: Source):
    """PER_GPU for a per-gpu summary (its GPU heading), else how far right of ncu's 2 spaces the first kernel
    heading (old or new style) is: the whole report's shift; None without either."""
    if _per_gpu(source):
        return PER_GPU
    m = _ANY_HEADING.search(source.text)
    return None if m is None else len(m["indent"]) - HEADING_INDENT


def dedent_report(text: str, shift: int) -> str:
    """A report shifted right by `shift` spaces moved back: every line indented at least that deep loses the
    shift; lines at the margin (the application's) stay."""
    pad = " " * shift
    return "\n".join(line[shift:] if line.startswith(pad) else line for line in text.split("\n"))


def _read(source: Source, found) -> pd.DataFrame:
    text = source.text
    if found == PER_GPU:
        text = per_gpu_as_per_kernel(text)
    elif found:
        text = dedent_report(text, found)
    launches = scan_text(text, source.path)
    columns = ["run", "id", "kernel", "launches", "grid", "block", "device", "cc", "gpu", "process", "nvtx"]
    meta = pd.DataFrame.from_records([tuple(getattr(x, c) for c in columns) for x in launches], columns=columns)
    metrics = pd.DataFrame.from_records([x.metrics for x in launches], index=meta.index)
    return pd.concat([meta, metrics], axis=1)


TEXT = Format("ncu text", COUNTERS, _find, _read)

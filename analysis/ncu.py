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
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from ceilings.inputs import add_max_inflated
from ceilings.lazy import lazy
from common.atomic import Outputs
from common.errors import CeilingsError, cli_entry, listed
from common.text import aligned
from common.warn import add_verbose, print_warnings

from .metrics import (
    EXTENSIVE,
    OUTPUT_COLUMNS,
    PHANTOM_NOTE,
    TENSOR_METRICS,
    TimeParts,
    derive,
    impossible_rates,
    time_parts,
    with_rates,
)
from .readers.contract import (
    BEFORE_TRACE,
    COUNTERS,
    LAUNCH_COLUMNS,
    TIMES,
    no_launches,
)
from .readers.launches import read_profile
from .readers.registry import reads
from .runs import GROUPS_LISTED, NAME_IN_WARNING, combined, ms, paired

np = lazy("numpy")
pd = lazy("pandas")

PROG = "python -m analysis.ncu"
TOP_KERNELS = 20  # rows of the printed table
PRINT_NAME_WIDTH = 60


def _refuse_repeats(paths: Sequence[str | os.PathLike]) -> None:
    """The same file given twice would count every kernel twice."""
    seen: dict = {}
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue  # read_profile says why
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise CeilingsError(f"{p} and {seen[key]} are the same file: its kernels would be counted twice; give "
                                f"it once")
        seen[key] = p


# -------------------------------------------------------------------------------------------- the table
def _nsys_times(kernels: Sequence[str], nsys: pd.DataFrame, warnings: list[str]) -> dict[str, float]:
    """ncu kernel name -> nsys seconds per launch (over every nsys run: total time / total launches).

    A full nsys name matches only itself. nsys cuts names at 100 characters: a cut name matches the ncu
    names it begins, the longest such cut name winning; when one cut name begins several distinct ncu
    names, or two nsys rows carry the same cut name, which kernel is which is unknown: no time, a warning."""
    rows = nsys.assign(_total=nsys["gpu__time_duration.sum"] * nsys["launches"])
    full = rows[~rows["name_truncated"]].groupby("kernel")[["_total", "launches"]].sum()
    cut = rows[rows["name_truncated"]]
    found, ambiguous = {}, set()
    for name in kernels:
        if name in full.index:
            found[name] = full.at[name, "_total"] / full.at[name, "launches"]
            continue
        hits = cut[[name.startswith(prefix) for prefix in cut["kernel"]]]
        if not len(hits):
            continue
        best = hits[hits["kernel"].str.len() == hits["kernel"].str.len().max()]
        prefix = best["kernel"].iloc[0]
        claimants = [k for k in kernels if k.startswith(prefix) and k not in full.index]
        if best.groupby("run").size().max() > 1 or len(set(claimants)) > 1:
            ambiguous.add(prefix)
            continue
        found[name] = best["_total"].sum() / best["launches"].sum()
    if ambiguous:
        first = sorted(ambiguous)[0]
        warnings.append(f"time_s: {len(ambiguous)} nsys name(s) cut at 100 characters begin several distinct "
                        f"kernels (first: {first[:NAME_IN_WARNING]!r}…): those kernels get no nsys time; export "
                        "full names (nsys stats --report cuda_gpu_kern_sum on an nsys-rep whose names fit, or "
                        "the .sqlite export)")
    return found


def kernel_table(paths: Sequence[str | os.PathLike] | str | os.PathLike,
                 nsys: Sequence[str | os.PathLike] | str | os.PathLike | None = None,
                 per_launch: bool = False, *, kernel_regex: str | None = None, nvtx: str | None = None,
                 per_process: bool = False, time_run: int | None = None, by: str = "kernel",
                 include_early: bool = False, flops: str = "executed", max_inflated: float | None = None
                 ) -> pd.DataFrame:
    """The kernel table: OUTPUT_COLUMNS per kernel (summed over launches and processes), per process and
    kernel (`per_process`, with a `process` column), or per launch with `id` and LAUNCH_COLUMNS.

    Extensive columns are totals over the row's `launches`; missing metrics are NaN. Runs of ncu are passes
    (merged by kernel name and launch order) or processes (kept apart), see analysis.runs.group_runs; `time_run`
    picks the run whose times count where runs disagree. Kernels that only nsys timed are rows without counters.
    `kernel_regex` keeps the kernels whose name matches (re.search); `nvtx` the launches inside an NVTX range
    of that name. `by`: one row per kernel (default), or per operator, nn.Module or innermost annotation
    (NVTX / record_function range) that launched the kernels (GROUPINGS; the `kernel` column names the
    group). Kernels launched before a torch trace began are left out unless `include_early`, which keeps
    them under their own name (`_before_trace`); `flops` and `max_inflated` are read_profile's. attrs: "warnings"
    (list of str), "gpus" (dicts gpu/cc/device, and GPU_FACTS and RUN_CLOCK where known), "missing" (roofline
    inputs the profile lacks, by column), "busy_s" (seconds in which some kernel ran, where the profile has
    timestamps: torch traces), "by".
    """
    if by not in GROUPINGS:
        raise CeilingsError(f"--by {by}: not one of {', '.join(GROUPINGS)}")
    paths = expand_inputs([paths] if isinstance(paths, (str, os.PathLike)) else list(paths))
    nsys = [nsys] if isinstance(nsys, (str, os.PathLike)) else list(nsys or [])
    if not paths:
        raise CeilingsError("no input files given")
    _refuse_repeats([*paths, *nsys])
    pattern = _compile(kernel_regex)
    warnings: list[str] = []
    # what the table uses: rows per launch for --per-launch, NVTX ranges for --nvtx and --by annotation
    uses = {"each_launch": per_launch, "ranges": by == "annotation" or nvtx is not None, "max_inflated": max_inflated}
    frames = [_before_trace(read_profile(p, flops, **uses), str(p), include_early, warnings) for p in paths]
    nsys_frames = [read_profile(p, **uses) for p in nsys]
    for p, f in zip(nsys, nsys_frames):
        if f.attrs["yields"] != TIMES:
            raise CeilingsError(f"{p}: given as --nsys but it is {f.attrs['format']}, not an nsys kernel summary")
    paths, frames = paired([str(p) for p in paths], frames, warnings)
    counted = [(str(p), f) for p, f in zip(paths, frames) if f.attrs["yields"] == COUNTERS]
    timed = [f for f in frames + nsys_frames if f.attrs["yields"] == TIMES]
    nsys_rows = pd.concat(timed, ignore_index=True) if timed else no_launches()
    if time_run is not None and not 1 <= time_run <= sum(f["run"].nunique() for _, f in counted):
        raise CeilingsError(f"--time-run {time_run}: the ncu inputs hold "
                            f"{sum(f['run'].nunique() for _, f in counted)} run(s), numbered from 1")

    launches = combined(counted, time_run, warnings)
    launches, nsys_rows = _filter(launches, nsys_rows, pattern, nvtx, warnings)
    derived = derive(launches)
    _tensor_warnings(launches, derived, warnings)
    if len(nsys_rows) and len(launches):
        needed = launches.loc[derived["time_s"].isna(), "kernel"].unique()
        times = _nsys_times(list(launches["kernel"].unique()), nsys_rows, warnings)
        derived["time_s"] = derived["time_s"].fillna(launches["kernel"].map({k: times[k] for k in needed
                                                                             if k in times}))
        unmatched = [str(k) for k in needed if k not in times]
        if unmatched:
            warnings.append(f"time_s: {len(unmatched)} kernel(s) without an ncu time match no nsys kernel "
                            f"name, or two cut to the same prefix (first: {unmatched[0][:60]!r}); they have "
                            "no rates")
    if len(nsys_rows):
        # with --nvtx, nsys rows without ranges serve as times only: their other kernels may be outside it
        ranged = nvtx is None or any(isinstance(r, tuple) and len(r) > 0 for r in nsys_rows["nvtx"])
        time_only = _time_only_rows(nsys_rows, set(launches["kernel"])) if ranged else nsys_rows.iloc[0:0]
        if not len(launches):
            several = [(p, f["run"].nunique()) for p, f in zip([*paths, *nsys], frames + nsys_frames)
                       if f.attrs["yields"] == TIMES and f["run"].nunique() > 1]
            warnings += [f"{p}: {n} nsys runs (tables, or processes of an export) in one file: each kernel's "
                         f"launches and time are summed over them; --per-process shows them apart"
                         for p, n in several]
        if len(launches) and len(time_only):
            warnings.append(f"{time_only['kernel'].nunique()} kernel(s) only nsys saw (not profiled by ncu) are "
                            f"rows with times and no counters (first: {time_only['kernel'].iloc[0][:60]!r})")
        launches = pd.concat([launches, time_only], ignore_index=True)
        derived = pd.concat([derived, derive(time_only)], ignore_index=True)

    launches["unknown_work"] = launches["unknown_work"].where(
        launches["unknown_work"].notna() | derived["flops"].notna(),
        np.where(launches["source"].eq("nsys"), "times only", "no counters"))
    if by in UNRECORDED_REMEDY:
        _refuse_unrecorded(launches, by, [*paths, *nsys])
    if "_key" not in launches:
        launches["_key"] = launches["kernel"]
    launches["_key"] = launches["_key"].fillna(launches["kernel"])
    table = pd.concat([launches[["id", "kernel", "launches", *LAUNCH_COLUMNS, "process", "_key", *GROUP_COLUMNS,
                                 "before_trace", "op_helper", "unknown_work"]],
                       derived], axis=1)
    table[EXTENSIVE] = table[EXTENSIVE].mul(table["launches"], axis=0)
    if per_launch:
        out = with_rates(table)[["id", *OUTPUT_COLUMNS, *LAUNCH_COLUMNS, "process", "op", "module"]
                                ].reset_index(drop=True)
    else:
        out = _per_kernel(_grouped(table, by), per_process)
    diagnosis = _diagnosis(table, paths, nsys)
    notes = [f"{p}: {note}" for p, f in zip(paths, frames) for note in f.attrs.get("notes", [])]
    memory = sum(f.attrs.get("memory_operations", 0) for f in frames)
    if memory:
        notes.append(f"{memory} memcpy/memset operation(s) are not kernels: left out of the table")
    out.attrs["gpus"] = _gpus(table, launches)
    conventions = {f.attrs.get("attention_flops") for f in frames} - {None}
    if conventions:  # how causal attention was counted (--flops), in the CSV and JSON beside the numbers
        out["attention_flops"] = conventions.pop()
    # an impossible rate first: it makes the row's numbers wrong
    # judged per launch (or per row the profile gave), before a sum could average a wrong one away
    out.attrs["warnings"] = (impossible_rates(table, out.attrs["gpus"]) + warnings + notes
                             + out.attrs.get("warnings", []) + diagnosis)
    out.attrs["missing"] = table.attrs["missing"]
    # the readers' busy time covers all their kernels: not a subset chosen by a filter, nor nsys's extra rows
    whole = pattern is None and nvtx is None and not len(nsys_rows)
    for fact in ("busy_s", "window_s", "overlap_s"):
        values = [f.attrs.get("busy_all_s" if fact == "busy_s" and include_early else fact) for _, f in counted]
        out.attrs[fact] = sum(values) if whole and values and all(v is not None for v in values) else None
    # the kernel time of the launches left out (before the trace began): the time budget counts it
    out.attrs["early_s"] = sum(f.attrs.get("early_s", 0.0) for f in frames)
    out.attrs["by"] = by
    return out


PART_PREFIX = "part: "  # time_parts' columns while they ride along the kernel table's groupby
# what --by groups launches by: the column that names the group
GROUPINGS = {"kernel": "kernel", "op": "op", "module": "module", "annotation": "nvtx"}
GROUP_COLUMNS = ["op", "module", "nvtx"]


# how to record what --by module / annotation groups by, for a profile where no launch has it
UNRECORDED_REMEDY = {
    "module": "no launch records the nn.Module that ran it; record with torch.profiler's with_stack=True (eager "
              "modules; with_modules=True names TorchScript ones), as python -m analysis.profile --torch does",
    "annotation": "no launch ran inside an NVTX or record_function range; mark the steps with NVTX ranges "
                  "(torch.cuda.nvtx.range_push) and profile with nsys --trace cuda,nvtx or ncu --nvtx, or with "
                  "torch.profiler.record_function in a torch trace",
}


def _refuse_unrecorded(launches: pd.DataFrame, by: str, paths: Sequence) -> None:
    """A CeilingsError where no launch has the module or annotation --by groups by: one "(no module)" row of
    all of the time would say nothing. Where some have it, the others are grouped under "(no ...)"."""
    column = launches[GROUPINGS[by]]
    known = column.notna() if by == "module" else column.map(lambda r: isinstance(r, tuple) and len(r) > 0)
    if not known.any():
        raise CeilingsError(f"--by {by}: {listed([str(p) for p in paths], GROUPS_LISTED, sep=', ')}: "
                            f"{UNRECORDED_REMEDY[by]}")


def _grouped(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Launches keyed by their group: the kernel, or the op / module / innermost annotation that launched
    them ("(none)" for launches the profile does not place in one)."""
    if by == "kernel":
        return table
    # an op's helper kernels carry none of its FLOPs (they are on its compute kernel): 0 in the op's sum
    helper = table["op_helper"].astype(bool)
    work = [*PRECISION_COLUMNS, "flops", "alg_bytes"]
    table = table.assign(**{c: table[c].where(~helper, 0.0) for c in work},
                         coverage=table["coverage"].where(~helper, 1.0))
    column = table[GROUPINGS[by]]
    if by == "annotation":
        column = column.map(lambda ranges: ranges[-1] if isinstance(ranges, tuple) and ranges else None)
    label = column.astype(object).where(column.notna(), f"(no {by})").where(~table["before_trace"].astype(bool),
                                                                              f"({BEFORE_TRACE})")
    return table.assign(kernel=label, _key=label)


def _before_trace(frame: pd.DataFrame, path: str, include: bool, warnings: list[str]) -> pd.DataFrame:
    """The launches of a profile, without those launched before the trace began (torch.profiler's GPU side
    records kernels queued before its CPU side started: their op and step are unknown), or with `include`
    those kept, named apart ("NAME [launched before the trace began]") from the trace's launches of the
    same kernel. Either way a warning counts them."""
    early = frame["before_trace"]
    if not early.any():
        return frame
    time = frame.loc[early, "time_s"].sum()
    said = (f"{path}: {int(early.sum())} kernel(s) ({ms(time)}, {time / frame['time_s'].sum():.0%} of the kernel "
            f"time) were {BEFORE_TRACE} (their launch is not in it: correlation ids older than its first runtime "
            f"call)")
    if include:
        warnings.append(f"{said}: kept, named apart, without an op or step")
        kept = frame.copy()
        kept.loc[early, "kernel"] = kept.loc[early, "kernel"] + f" [{BEFORE_TRACE}]"
        return kept
    if early.all():
        raise CeilingsError(f"{said}: every kernel; --include-early reads them (without ops or steps), or start "
                            f"the profiler before the GPU work")
    warnings.append(f"{said}: left out of every figure; --include-early shows them, apart")
    kept = frame[~early].reset_index(drop=True)
    kept.attrs = {**frame.attrs, "early_s": float(time)}
    return kept


TRACE_PATTERNS = ("*.pt.trace.json", "*.pt.trace.json.gz")  # what torch's tensorboard_trace_handler writes


def expand_inputs(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Files as given; a folder stands for the torch.profiler traces in it (a TensorBoard log folder, one
    trace per rank and step), in name order."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted({str(f) for pattern in TRACE_PATTERNS for f in p.glob(pattern)})
            if not found:
                raise CeilingsError(f"{p}: a folder without torch.profiler traces ({', '.join(TRACE_PATTERNS)}); "
                                    f"pass the profiler output files")
            out += found
        else:
            out.append(str(p))
    return out


def _compile(kernel_regex: str | None):
    if kernel_regex is None:
        return None
    try:
        return re.compile(kernel_regex)
    except re.error as exc:
        raise CeilingsError(f"--kernel {kernel_regex!r}: not a valid regular expression ({exc})") from None


def _filter(launches: pd.DataFrame, nsys_rows: pd.DataFrame, pattern, nvtx: str | None,
            warnings: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Launches (and nsys rows) whose kernel matches `pattern` and that ran inside NVTX range `nvtx`."""
    if pattern is not None:
        def matches(kernel) -> bool:
            return bool(pattern.search(str(kernel)))

        launches, nsys_rows = _kept(launches, "kernel", matches), _kept(nsys_rows, "kernel", matches)
        if not len(launches) and not len(nsys_rows):
            raise CeilingsError(f"--kernel {pattern.pattern!r}: no kernel name matches")
    if nvtx is not None:
        def ranges(rows):
            return rows["nvtx"].map(lambda r: tuple(r) if isinstance(r, tuple) else ())

        ncu_ranges, nsys_ranges = ranges(launches), ranges(nsys_rows)
        known = {n for r in (*ncu_ranges, *nsys_ranges) for n in r}
        if not known:
            raise CeilingsError(f"--nvtx {nvtx!r}: the profile records no NVTX ranges; profile with ncu --nvtx "
                                f"(and --nvtx-include to profile only that range), nsys --trace=cuda,nvtx (its "
                                f".sqlite export), or torch.profiler around record_function ranges")
        if nvtx not in known:
            raise CeilingsError(f"--nvtx {nvtx!r}: no launch ran inside such a range; the profile's ranges: "
                                f"{', '.join(sorted(known)[:10])}")
        def inside(ranges) -> bool:
            return isinstance(ranges, tuple) and nvtx in ranges

        launches = _kept(launches, "nvtx", inside)
        if nsys_ranges.map(len).any():  # an nsys export with its NVTX ranges
            nsys_rows = _kept(nsys_rows, "nvtx", inside)
        elif len(nsys_rows):
            warnings.append(f"--nvtx {nvtx!r}: nsys kernel summaries have no NVTX ranges; their times are used "
                            f"for matching ncu kernels only")
            nsys_rows = nsys_rows[nsys_rows["kernel"].isin(set(launches["kernel"]))
                                  | nsys_rows["name_truncated"]]
    return launches.reset_index(drop=True), nsys_rows.reset_index(drop=True)


def _kept(rows: pd.DataFrame, column: str, keep) -> pd.DataFrame:
    """The rows whose `column` passes `keep`, by a boolean mask even when there are none (a frame indexed by an
    empty object Series selects columns: none, and then no "kernel" column)."""
    return rows[rows[column].map(keep).astype(bool)]


def _time_only_rows(nsys_rows: pd.DataFrame, profiled: set[str]) -> pd.DataFrame:
    """nsys rows of kernels ncu did not profile: neither its full name nor, cut, the start of a profiled
    name (an ambiguous cut name belongs to profiled kernels, whose time it would count twice). Cut names
    keep the ellipsis and stay apart from each other (two kernels may share the first 100 characters)."""
    cut = nsys_rows["name_truncated"].astype(bool)
    claimed = {p for p in nsys_rows.loc[cut, "kernel"] if any(k.startswith(p) for k in profiled)}
    rows = nsys_rows[~nsys_rows["kernel"].isin(profiled) & ~(cut & nsys_rows["kernel"].isin(claimed))].copy()
    truncated = rows["name_truncated"].astype(bool)
    rows.loc[truncated, "kernel"] = rows.loc[truncated, "kernel"] + "…"
    # a cut name is never merged with another row, of its run or of another run: which kernel it is, is unknown
    rows["_key"] = rows["kernel"]
    rows.loc[truncated, "_key"] = rows.loc[truncated, "kernel"] + "#" + rows.index[truncated].astype(str)
    rows["process"] = rows["run"].map({run: f"nsys run {int(run) + 1}" for run in rows["run"].unique()})
    return rows.reset_index(drop=True)


def _tensor_warnings(launches: pd.DataFrame, derived: pd.DataFrame, warnings: list[str]) -> None:
    tensor = launches.reindex(columns=list(TENSOR_METRICS)).fillna(0).gt(0).any(axis=1)
    unknown = tensor & derived["flops_tensor"].isna()
    if unknown.any():
        ccs = sorted({str(c) for c in launches.loc[unknown, "cc"].dropna()}) or ["unknown"]
        warnings.append(f"flops_tensor: missing for {int(unknown.sum())} launch(es) with tensor instructions "
                        f"(CC {', '.join(ccs)}): one tensor instruction is 512 to 8192+ FLOPs by its SASS shape, "
                        f"so instruction counts give FLOPs only on sm_70/72; collect the FLOP counters "
                        f"sm__ops_path_tensor_* (ncu --query-metrics lists them; python -m analysis.profile "
                        f"collects them)")
    phantom = derived["phantom_flops"].fillna(0) > 0
    if phantom.any():
        names = launches.loc[phantom, "kernel"].unique()
        left_out = derived.loc[phantom, "phantom_flops"].mul(launches.loc[phantom, "launches"]).sum()
        warnings.append(f"flops_fp16/flops_tensor: {left_out:.4g} "
                        f"FLOPs of {int(phantom.sum())} launch(es) of {len(names)} kernel(s) left out (first: "
                        f"{str(names[0])[:NAME_IN_WARNING]!r}): {PHANTOM_NOTE}")
    ints = derived["ops_tensor_int"].fillna(0) > 0
    if ints.any():
        warnings.append(f"ops_tensor_int: {int(ints.sum())} launch(es) ran integer tensor operations; they are not "
                        f"FLOPs and are not in flops (see the ops_tensor_int column)")


# what a profile records about its GPU beyond name and CC, by the metrics that give it (a launch's first one
# present wins): ncu's device attributes, Launch Statistics' "# SMs" (launch__sm_count); a torch trace's
# deviceProperties and an nsys export's TARGET_INFO_GPU are read into the same metrics. Enough to tell
# another GPU when no name is given
GPU_FACTS = {"sm_count": ("device__attribute_multiprocessor_count", "launch__sm_count"),
             "max_sm_clock_hz": ("device__attribute_max_gpu_frequency_khz",),
             "memory_bytes": ("device__attribute_total_memory",)}
# and one the launches measure rather than the device records: the median SM clock they ran at (Hz)
RUN_CLOCK = "sm_clock_hz"


def _gpus(table: pd.DataFrame, launches: pd.DataFrame) -> list[dict]:
    """Each GPU of the table: gpu, cc, device (text), the GPU_FACTS the profile records and RUN_CLOCK
    (numbers, base units: the readers give the kHz clock attribute in Hz)."""
    facts = table[["gpu", "cc", "device", RUN_CLOCK]].copy()
    for key, metrics in GPU_FACTS.items():
        present = [m for m in metrics if m in launches.columns]
        if present:
            facts[key] = launches[present].astype("float64").bfill(axis=1).iloc[:, 0].to_numpy()
    # one row a GPU, over whichever of its launches carry the facts (ncu rows beside nsys time-only rows): the
    # median, which is the device facts' one value and the clock of a typical launch
    facts = facts.groupby(["gpu", "cc", "device"], dropna=False, sort=False).median().reset_index()
    facts = facts[facts.notna().any(axis=1)]
    return [{k: (str(v) if k in ("gpu", "cc", "device") else float(v)) for k, v in row.items() if not pd.isna(v)}
            | {k: None for k in ("gpu", "cc", "device") if pd.isna(row[k])} for row in facts.to_dict("records")]


# roofline input -> the analysis.profile metric set that collects it; L2 and L1 bytes serve --level all only,
# so their absence is recorded in attrs["missing"] but not warned about here
ROOFLINE_INPUTS = {"time_s": "roofline", "flops": "roofline", "dram_bytes": "roofline",
                   "l2_bytes": "hierarchical", "l1_bytes": "hierarchical"}
PRECISION_COLUMNS = ("flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor")


def _diagnosis(table: pd.DataFrame, paths: Sequence, nsys: Sequence) -> list[str]:
    """Which roofline inputs no launch of the table has (attrs["missing"]), and for time, FLOPs and DRAM
    bytes a warning with the command that collects them."""
    missing = [c for c in ROOFLINE_INPUTS if table[c].isna().all()]
    table.attrs["missing"] = missing
    core = [c for c in missing if ROOFLINE_INPUTS[c] == "roofline"]
    if not core or table.empty:
        return []
    lacking = [c for c in PRECISION_COLUMNS if table[c].isna().all()]
    if "flops" in core and len(lacking) < len(PRECISION_COLUMNS):
        core[core.index("flops")] = f"flops (no {', '.join(lacking)})"
    files = ", ".join(str(p) for p in [*paths, *nsys])
    estimated = int(table["alg_bytes"].notna().sum())
    if "dram_bytes" in core and estimated:  # a torch trace: the ops with shapes are placed anyway
        core[core.index("dram_bytes")] = (f"dram_bytes (only {estimated} launch(es) have algorithmic bytes from "
                                          f"their shapes, a lower bound, and are placed with those)")
    return [f"{files}: no kernel has {', '.join(core)}, so the roofline cannot place them; collect them with: "
            f"python -m analysis.profile --out NAME -- APP ARGS (ncu with the roofline metrics)"]


WORK_BYTES = ("dram_bytes", "l2_bytes", "l1_bytes", "alg_bytes")  # the bytes a row's FLOPs are set against


def _per_kernel(table: pd.DataFrame, per_process: bool = False) -> pd.DataFrame:
    """Totals per kernel (per process and kernel with `per_process`; per group of _grouped): every total the
    sum of what its launches have, so each view holds the same FLOPs, bytes and time. `coverage` is the
    share of the row's time in launches whose FLOPs are known; each rate is over the launches that have its
    numerator (a sum over some launches divided by the time of all would be a wrong rate). Where a row's
    FLOPs and bytes are known on different launches, or FLOPs on a launch without a time, no set of launches
    holds both: coverage and intensities are missing, and the roofline cannot place the row. Rows so are
    counted in attrs["warnings"]."""
    keys = ["process", "_key"] if per_process else ["_key"]
    known = table[["time_s", "flops", *WORK_BYTES]].notna().to_numpy()
    timed, flops, has = known[:, 0], known[:, 1], known[:, 2:]
    durations, coverage = table["time_s"].to_numpy(dtype="float64"), table["coverage"].to_numpy(dtype="float64")
    # per launch, summed per row in one groupby: counts, the covered times, and each byte count known on a
    # launch without FLOPs or missing on one with them; FLOPs on a launch without a time, or on a row read back
    # whose own coverage is unknown, are in no rate
    helper = pd.DataFrame({"_flops_n": flops, "_flops_time": durations * coverage,
                           # a row read back holds its bytes on the share of its time its FLOPs cover
                           "_dram_time": np.where(has[:, 0], durations * np.where(flops, coverage, 1.0), np.nan),
                           "_untimed": flops & (~timed | np.isnan(coverage)), "_dram_untimed": has[:, 0] & ~timed,
                           **{f"_has_{c}": has[:, i] for i, c in enumerate(WORK_BYTES)},
                           **{f"_apart_{c}": has[:, i] != flops for i, c in enumerate(WORK_BYTES)}},
                          index=table.index)
    table = table.assign(process=table["process"].fillna("-"))
    parts = time_parts(table).groupby([table[k] for k in keys], sort=False).sum()
    groups = table.groupby(keys, sort=False)
    out = groups[EXTENSIVE].sum(min_count=1)
    helper = helper.groupby([table[k] for k in keys], sort=False).sum()
    size = groups.size()
    mixed = (helper[[f"_apart_{c}" for c in WORK_BYTES]].to_numpy() > 0) \
        & (helper[[f"_has_{c}" for c in WORK_BYTES]].to_numpy() > 0) & (helper["_flops_n"] > 0).to_numpy()[:, None]
    apart_rows = mixed.any(axis=1) | (helper["_untimed"] > 0).to_numpy()
    time = out["time_s"]
    share = helper["_flops_time"] / time.where(time > 0)
    whole = helper["_flops_n"].eq(size)
    coverage = share.where(time > 0, whole.astype(float).where(whole | helper["_flops_n"].eq(0)))
    out["coverage"] = coverage.where(helper["_flops_n"] > 0, 0.0).where(~apart_rows)
    out["kernel"] = groups["kernel"].first()
    out["launches"] = groups["launches"].sum()
    out["sm_clock_hz"] = groups["sm_clock_hz"].mean()
    # the one type every launch of the kernel agrees on, else None (unknown or mixed)
    types = groups["tensor_type"]
    agreed = types.nunique().eq(1) & types.count().eq(size)
    out["tensor_type"] = types.first().astype(object).where(agreed, None)
    out = with_rates(out, flops_time=helper["_flops_time"].where(helper["_untimed"].eq(0)),
                     dram_time=helper["_dram_time"].where(helper["_dram_untimed"].eq(0)))
    out = out.join(parts.add_prefix(PART_PREFIX)).reset_index()
    extra = ["process"] if per_process else []
    for col in ("cc", "device", "gpu"):  # kept when every launch of every kernel agrees
        values = table[col].dropna().unique()
        if len(values) == 1:
            out[col] = values[0]
            extra.append(col)
    out = out.sort_values("time_s", ascending=False, na_position="last", kind="stable").reset_index(drop=True)
    parts = out.filter(like=PART_PREFIX)
    out = out[[*OUTPUT_COLUMNS, *extra]]
    out.attrs["warnings"] = _coverage_warnings(out, int(apart_rows.sum()))
    out.attrs["time_parts"] = TimeParts(parts.rename(columns=lambda c: c[len(PART_PREFIX):]))
    return out



def _coverage_warnings(out: pd.DataFrame, apart: int) -> list[str]:
    """What the rows' totals cover: rows whose FLOPs cover part of their time, rows with no coverage."""
    warnings = []
    part = out[(out["coverage"] > 0) & (out["coverage"] < 1)]
    if len(part):
        time = part["time_s"].sum()
        known = (part["time_s"] * part["coverage"]).sum()
        warnings.append(f"flops: known for only some launches of {len(part)} row(s) ({ms(known)} of their "
                        f"{ms(time)}; first: {str(part['kernel'].iloc[0])[:NAME_IN_WARNING]!r}): each shows the "
                        f"sum of what is known and its share of the row's time (coverage), its rates over that "
                        f"share; the other launches' FLOPs are not in the profile (ops without a FLOP model, "
                        f"kernels without counters)")
    if apart:
        first = out.loc[out["coverage"].isna() & out["flops"].notna(), "kernel"]
        named = f" (first: {str(first.iloc[0])[:NAME_IN_WARNING]!r})" if len(first) else ""
        warnings.append(f"flops and bytes are known on different launches of {apart} row(s){named}, or FLOPs on "
                        f"launches without a time: their totals are kept, their coverage and intensities are not given "
                        f"(no set of launches holds both), so the roofline cannot place them; --per-launch shows "
                        f"each launch")
    return warnings


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
    ("coverage", "FLOPs of time %", 100, "{:.0f}"),  # the share of the row's time whose FLOPs are known
)


def format_table(table: pd.DataFrame, top: int = TOP_KERNELS) -> str:
    """Fixed-width text of the `top` kernels by time (missing values as '-')."""
    rows = table.sort_values("time_s", ascending=False, na_position="last", kind="stable").head(top)
    cells = []
    for _, row in rows.iterrows():
        name = str(row["kernel"])
        if "process" in table.columns:  # --per-process: the same kernel once per process
            name = f"[{row['process']}] {name}"
        name = name if len(name) <= PRINT_NAME_WIDTH else name[:PRINT_NAME_WIDTH - 1] + "…"
        cells.append([("-" if pd.isna(row[col]) else fmt.format(row[col] * scale))
                      for col, _, scale, fmt in _PRINTED] + [name])
    return aligned([title for _, title, _, _ in _PRINTED] + ["kernel"], cells, left={"kernel"})


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="The profile table: FLOPs, bytes and time per kernel (or op, module, range) of Nsight Compute, "
                    "Nsight Systems, torch.profiler and nvprof outputs, told apart by content.",
        epilog="Runs that collected different metrics over the same launches (one ncu run per metric, a "
               "sections run then a --metrics run) are merged by kernel name and launch order; runs that "
               "measured the same metrics (two processes or ranks) are distinct launches, summed per kernel "
               "(--per-process shows them apart). Kernels only nsys saw are rows with times only. Missing "
               "metrics stay empty (CSV) / null (JSON), never 0. See docs/ncu-ingestion.md.")
    parser.add_argument("files", nargs="+", help=f"profiles, or folders of them; {reads()}")
    parser.add_argument("--nsys", action="append", default=[], metavar="FILE",
                        help="nsys cuda_gpu_kern_sum/gpukernsum output (CSV or text) for kernel times")
    parser.add_argument("--csv", metavar="OUT", help="write the table as CSV ('-': standard output)")
    parser.add_argument("--json", metavar="OUT", help="write the table as JSON records ('-': standard output)")
    parser.add_argument("--force", action="store_true", help="overwrite existing --csv / --json files")
    parser.add_argument("--per-launch", action="store_true", help="one row per launch instead of per kernel")
    parser.add_argument("--per-process", action="store_true",
                        help="one row per process and kernel (ranks under one ncu --target-processes all)")
    add_profile_filters(parser)
    parser.add_argument("--top", type=int, default=TOP_KERNELS, help="rows of the printed table (default 20)")
    args = parser.parse_args(argv)
    if args.top < 0:
        raise CeilingsError(f"--top {args.top}: must be 0 or more")
    out = Outputs(inputs=[*args.files, *args.nsys], force=args.force)
    out.want("--csv", args.csv)
    out.want("--json", args.json)
    table = kernel_table(args.files, nsys=args.nsys, per_launch=args.per_launch, per_process=args.per_process,
                         **profile_filters(args))
    print_warnings(table.attrs.get("warnings", []), args.verbose)
    if args.csv:
        out.text(args.csv, table.to_csv(index=False))
    if args.json:
        out.text(args.json, table.to_json(orient="records", indent=1) + "\n")
    out.commit()
    if not (args.csv or args.json):
        print(f"GPU: {describe_gpus(table.attrs.get('gpus', []))}")
        print(format_table(table, args.top))
        print(f"{len(table)} {'launches' if args.per_launch else 'kernels'}, top {min(args.top, len(table))} "
              f"by time shown", file=sys.stderr)
    return 0


def add_profile_filters(parser: argparse.ArgumentParser) -> None:
    """The options of every command that reads profiles: which kernels, which NVTX range, which timing run."""
    parser.add_argument("--kernel", metavar="REGEX", help="only kernels whose full name matches REGEX")
    parser.add_argument("--nvtx", metavar="RANGE", help="only launches inside the NVTX range RANGE (ncu --nvtx)")
    parser.add_argument("--time-run", type=int, metavar="N",
                        help="where runs disagree on a kernel's time, take it from run N (the warnings number "
                             "the runs)")
    parser.add_argument("--by", choices=tuple(GROUPINGS), default="kernel",
                        help="one row per kernel (default), or per operator, nn.Module or innermost NVTX / "
                             "record_function range that launched the kernels (torch.profiler traces; ncu --nvtx)")
    parser.add_argument("--include-early", action="store_true",
                        help=f"keep the kernels {BEFORE_TRACE} (a torch.profiler trace's kernels whose launch it "
                             f"lacks), named apart; left out by default")
    from .ops.matrix import FLOP_CONVENTIONS
    parser.add_argument("--flops", choices=tuple(FLOP_CONVENTIONS), default=next(iter(FLOP_CONVENTIONS)),
                        help="how FLOPs from a torch.profiler trace's shapes count causal attention: "
                             + "; ".join(f"{k}: {v}" for k, v in FLOP_CONVENTIONS.items()) + " (default executed)")
    add_max_inflated(parser)
    add_verbose(parser)


def profile_filters(args: argparse.Namespace) -> dict:
    return {"kernel_regex": args.kernel, "nvtx": args.nvtx, "time_run": args.time_run, "by": args.by,
            "include_early": args.include_early, "flops": args.flops, "max_inflated": args.max_inflated}


def describe_gpus(gpus: Sequence[dict]) -> str:
    """'NVIDIA A100-SXM4-80GB (CC 8.0)' for each GPU the profile ran on, or what is known and how to get
    the rest."""
    if not gpus:
        return ("unknown (the profile names no GPU; collect device__attribute_display_name and "
                "device__attribute_compute_capability_major/_minor with ncu)")
    parts = []
    for g in gpus:
        name = g.get("gpu") or (f"device {g['device']}" if g.get("device") else "unnamed GPU")
        parts.append(f"{name} (CC {g.get('cc') or 'unknown'})")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())

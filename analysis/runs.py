"""How the launches of several inputs combine: passes of ncu over the same launches (complementary metrics: the
NERSC recipe, a sections run then a --metrics run) merged by kernel name and launch order; runs that measured
the same metrics (processes, ranks, profiling cycles) kept as distinct launches; a torch.profiler trace and an
ncu profile of the same step paired, the profile's counters on the trace's launches (`paired`)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ceilings.lazy import lazy
from common.errors import CeilingsError, listed

from .metrics import TIME_METRICS, derive, launch_clock, launch_time
from .readers.contract import COUNTERS, META_COLUMNS, MODELLED, no_launches

np = lazy("numpy")
pd = lazy("pandas")

FACT_PREFIXES = ("launch__", "device__attribute_")
# two runs' times of one kernel (median per launch) that differ by more than this factor are reported
TIME_DISAGREEMENT = 1.2
NAME_IN_WARNING = 60
GROUPS_LISTED = 3  # runs named in a warning; --per-process shows every one
KERNELS_LISTED = 3  # kernels named in a warning that covers many


@dataclass(frozen=True)
class Run:
    """One pass or process of one input file: where it came from and what it measured."""

    number: int  # 1-based, in input order: what --time-run takes
    path: str
    process: str | None  # its first process label, where the file names one
    # the metrics it measured, beyond times and launch facts: two runs sharing one are distinct launches
    counters: frozenset[str]

    @property
    def label(self) -> str:
        where = f", process {self.process}" if self.process is not None else ""
        return f"run {self.number} ({Path(self.path).name}{where})"


def split_runs(frames: Sequence[pd.DataFrame], paths: Sequence[str]) -> tuple[list[Run], pd.DataFrame]:
    """Every run of the inputs, and all their launches in one frame, `_run` indexing that list: one pass per
    file, not one per run (a log of a thousand processes is a thousand runs)."""
    runs: list[Run] = []
    parts = []
    for path, df in zip(paths, frames):
        codes, _ = pd.factorize(df["run"])  # runs in order of appearance; a launch without one (-1) is in none
        # launch and device facts are the same in every pass over a launch: not measurements
        measured = np.array([c for c in df.columns.difference(META_COLUMNS).difference(TIME_METRICS)
                             if not c.startswith(FACT_PREFIXES)], dtype=object)
        count = codes.max() + 1
        has = df[list(measured)].notna().groupby(codes).any().reindex(range(count)).to_numpy(dtype=bool)
        process = df["process"].groupby(codes).first()
        for code in range(count):
            label = process.get(code)
            runs.append(Run(len(runs) + 1, path, None if pd.isna(label) else label, frozenset(measured[has[code]])))
        parts.append(df[codes >= 0].assign(_run=codes[codes >= 0] + len(runs) - count))
    return runs, pd.concat(parts, ignore_index=True, sort=False)


def group_runs(runs: Sequence[Run]) -> list[list[Run]]:
    """Passes over the same launches (complementary metrics: the NERSC recipe, a sections run then a
    --metrics run) are one group; a run that measured a metric a group already has (another process, e.g.
    a second rank under `--target-processes all`) starts a group of its own."""
    groups: list[tuple[list[Run], set[str]]] = []
    # per metric set, where its search starts: every group before shares a metric with it (it was searched, or
    # joined, and a group's metrics only grow), so a thousand runs of one set search no group twice
    start: dict[frozenset[str], int] = {}
    for run in runs:
        metrics = run.counters
        i = start.get(metrics, 0) if metrics else 0
        while i < len(groups) and groups[i][1] & metrics:
            i += 1
        if i == len(groups):
            groups.append(([run], set(metrics)))
        else:
            groups[i][0].append(run)
            groups[i][1].update(metrics)
        start[metrics] = i + 1
    return [g for g, _ in groups]


def merge_groups(frame: pd.DataFrame, runs: Sequence[Run], groups: Sequence[Sequence[Run]], time_run: int | None,
                  warnings: list[str]) -> pd.DataFrame:
    """Each group's runs merged by kernel name and launch order; each launch's time from one run: `time_run`
    if it is in the group, else the first run that timed the launch. Disagreeing runs are reported. All
    groups at once: one sort of every launch and one groupby of those to merge, whatever the number of runs."""
    timed = [sorted(group, key=lambda r: r.number != time_run) for group in groups]  # the timing run first
    group_of, order_of = np.empty(len(runs), dtype=np.int64), np.empty(len(runs), dtype=np.int64)
    for g, group in enumerate(timed):
        for order, run in enumerate(group):
            group_of[run.number - 1], order_of[run.number - 1] = g, order
    sizes = np.array([len(group) for group in groups])
    frame = frame.assign(_group=group_of[frame["_run"]], _order=order_of[frame["_run"]])
    frame = frame.sort_values(["_group", "_order", "id"], kind="stable")
    frame["time_s"], frame["sm_clock_hz"] = launch_time(frame), launch_clock(frame)
    # a run alone in its group has one row per launch, already in launch order: nothing to merge (a groupby of
    # every launch to find so); the runs of a group of several are merged
    single = sizes[frame["_group"].to_numpy()] == 1
    keys = ["_group", "kernel"]
    parts = [frame[single][[*keys, *frame.columns.difference(keys, sort=False)]]] if single.any() else []
    if not single.all():
        parts.append(_merged(frame[~single], timed, warnings))
    merged = (pd.concat(parts) if len(parts) > 1 else parts[0]).sort_values("_group", kind="stable")
    merged = merged.reset_index(drop=True)
    labels = [next((r.process for r in group if r.process is not None), f"group {g + 1}")
              for g, group in enumerate(groups)]
    merged["process"] = np.array(labels, dtype=object)[merged["_group"]]
    return merged.drop(columns=["_order", "_run"])


def _merged(frame: pd.DataFrame, timed: Sequence[Sequence[Run]], warnings: list[str]) -> pd.DataFrame:
    """The launches of groups of several runs (sorted by group, order in it and ID; timed) merged: each run's
    launches of a kernel numbered and matched by that number across the runs of its group."""
    frame = frame.assign(_occ=frame.groupby(["_run", "kernel"], sort=False).cumcount())
    _check_times(frame, timed, warnings)
    frame = frame.sort_values(["_group", "_order", "_occ"], kind="stable")
    merged = frame.groupby(["_group", "kernel", "_occ"], sort=False, dropna=False).first().reset_index()
    return merged.drop(columns=["_occ"])


def _check_times(frame: pd.DataFrame, timed: Sequence[Sequence[Run]], warnings: list[str]) -> None:
    """Runs of a group whose median time per launch of a kernel differ by more than TIME_DISAGREEMENT."""
    per_run = frame.groupby(["_group", "kernel", "_order"], sort=False)["time_s"].median().dropna().unstack()
    if per_run.shape[1] < 2:
        return
    spread = per_run.max(axis=1) / per_run.min(axis=1)
    apart = spread[spread > TIME_DISAGREEMENT]
    if apart.empty:
        return
    def said(item) -> str:  # one warning for them all: a profile of many kernels would print one line each
        (g, kernel), ratio = item
        times = per_run.loc[(g, kernel)].dropna()
        values = ", ".join(f"{timed[g][int(o)].label} {ms(t)}" for o, t in times.items())
        used = timed[g][int(times.index[0])]
        return f"{str(kernel)[:NAME_IN_WARNING]!r} by {ratio:.3g}x ({values}; used {used.label})"

    warnings.append(f"time_s: runs disagree by more than {TIME_DISAGREEMENT}x (median per launch) on {len(apart)} "
                    f"kernel(s) of a group of runs: {listed(list(apart.items()), KERNELS_LISTED, said)}; choose the "
                    f"timing run with --time-run N")


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def combined(counted: Sequence[tuple[str, pd.DataFrame]], time_run: int | None, warnings: list[str]) -> pd.DataFrame:
    """The launches of the counted inputs ((path, launches) each): their runs grouped and merged."""
    runs, frame = split_runs([f for _, f in counted], [p for p, _ in counted]) if counted else ([], None)
    groups = group_runs(runs)
    if len(groups) > 1:
        runs_named = listed(groups, GROUPS_LISTED,
                            lambda g: g[0].label + (f" with {len(g) - 1} more pass(es)" if len(g) > 1 else ""))
        warnings.append(f"{len(groups)} runs measured the same metrics (processes, ranks or profiling cycles): "
                        f"distinct launches, summed per kernel: {runs_named}; --per-process shows them apart")
    return merge_groups(frame, runs, groups, time_run, warnings) if groups else no_launches()


# ------------------------------------------------------------------------ a trace paired with an ncu profile
# what an ncu profile measures of a launch's work: it replaces what a trace modelled from shapes, the FLOPs as
# one set (where the profile has them all), each level's bytes alone
FLOP_COLUMNS = ["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops", "ops_tensor_int", "phantom_flops"]
BYTE_COLUMNS = ["dram_bytes", "l2_bytes", "l1_bytes"]
MEASURED = [*FLOP_COLUMNS, *BYTE_COLUMNS]


def name_key(name: str) -> str:
    """A kernel's name as both ncu and a torch trace write it: no `void `, no parameter list, no spaces (ncu
    writes template placeholders for parameters, `(int, T2)`, a trace the demangled types)."""
    name = name.removeprefix("void ")
    depth = 0
    for i, c in enumerate(name):
        depth += (c in "<[") - (c in ">]")
        if c == "(" and depth == 0 and i > 0:
            name = name[:i]
            break
    return "".join(name.split())


def _dim3_size(dim3) -> int:
    """Blocks in a grid (threads in a block) from "(x, y, z)" or a count; -1 where not known."""
    numbers = re.findall(r"\d+", str(dim3)) if isinstance(dim3, str) else []
    return math.prod(int(n) for n in numbers) if numbers else -1


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"name": frame["kernel"].map(name_key), "grid": frame["grid"].map(_dim3_size),
                         "block": frame["block"].map(_dim3_size)}, index=frame.index)


def paired(paths: list[str], frames: list[pd.DataFrame],
           warnings: list[str]) -> tuple[list[str], list[pd.DataFrame]]:
    """A torch.profiler trace given with an ncu profile of the same step: each trace launch of a kernel the
    profile measured takes the profile's FLOPs and bytes, the mean per launch of its launches of that kernel
    name, grid and block (of that name alone where either side does not record the grid and the profile ran it
    with one grid), in place of the shape models; the trace keeps its times, its ops and the rest of its
    launches. The profiles are then used up: (paths, frames) without them. Other inputs are as they were."""
    traces = [i for i, f in enumerate(frames) if f["source"].eq(MODELLED).any()]
    profiles = [i for i, f in enumerate(frames) if f.attrs.get("yields") == COUNTERS and i not in traces]
    if not traces or not profiles:
        return paths, frames
    _same_gpu([paths[i] for i in (*traces, *profiles)], [frames[i] for i in (*traces, *profiles)])
    counted = pd.concat([pd.concat([_keyed(frames[i]), derive(frames[i])[[*MEASURED, "tensor_type"]],
                                    frames[i][["launches"]]], axis=1) for i in profiles], ignore_index=True)
    keys = [counted["name"], counted["grid"], counted["block"]]
    # each column's mean over the launches that measured it (passes of other metrics, other runs, left out)
    launches = counted[MEASURED].notna().mul(counted["launches"], axis=0)
    sums = counted[MEASURED].mul(counted["launches"], axis=0).groupby(keys).sum(min_count=1)
    per_launch = sums / launches.groupby(keys).sum().where(lambda n: n > 0)
    per_launch = per_launch[per_launch.notna().any(axis=1)]
    per_launch["tensor_type"] = counted["tensor_type"].groupby(keys).first()
    # by name alone: the names the profile ran with one grid and block only
    names = per_launch.reset_index()
    alone = names[~names["name"].duplicated(keep=False)].set_index("name")
    out, took, total, used, seen = list(frames), 0.0, 0.0, set(), set()
    for i in traces:
        frame, keyed = frames[i].copy(), _keyed(frames[i])
        exact = per_launch.reindex(pd.MultiIndex.from_frame(keyed)).set_axis(frame.index)
        by_name = alone.reindex(keyed["name"]).set_axis(frame.index)
        measured = exact[MEASURED].notna().any(axis=1)
        loose = ~measured & by_name[MEASURED].notna().any(axis=1) & (keyed["grid"].eq(-1) | by_name["grid"].eq(-1))
        found = exact.where(measured, by_name.where(loose)[[*MEASURED, "tensor_type"]])
        mine = frame["source"].eq(MODELLED) & ~frame["op_helper"]
        flops = mine & found["flops"].notna()
        for col in FLOP_COLUMNS:
            frame[col] = found[col].where(flops, frame[col] if col in frame else np.nan)
        frame["tensor_type"] = found["tensor_type"].where(flops & found["tensor_type"].notna(), frame["tensor_type"])
        for col in BYTE_COLUMNS:
            frame[col] = found[col].where(mine & found[col].notna(), frame[col] if col in frame else np.nan)
        frame["unknown_work"] = frame["unknown_work"].where(~flops, None)
        hit = mine & found[MEASURED].notna().any(axis=1)
        out[i] = frame
        took += float(frame.loc[hit, "time_s"].sum())
        total += float(frame["time_s"].sum())
        used.update(keyed.loc[hit, "name"])
        seen.update(keyed["name"])
    absent, elsewhere = set(names["name"]) - seen, (set(names["name"]) & seen) - used
    named = ", ".join(paths[i] for i in profiles)
    said = [f"{took / total if total else 0:.0%} of the trace's kernel time takes its FLOPs and bytes from {named} "
            f"(measured counters, the mean per launch of its launches of the same kernel name, grid and block, in "
            f"place of the shape models)"]
    if absent:
        said.append(f"{len(absent)} kernel(s) it measured are not in the trace (another step or process?), first: "
                    f"{sorted(absent)[0][:NAME_IN_WARNING]!r}")
    if elsewhere:
        said.append(f"{len(elsewhere)} kernel(s) it measured only at grids or blocks the trace does not run them "
                    f"at, first: {sorted(elsewhere)[0][:NAME_IN_WARNING]!r}")
    warnings.append("; ".join(said))
    keep = [i for i in range(len(frames)) if i not in profiles]
    return [paths[i] for i in keep], [out[i] for i in keep]


def _same_gpu(paths: Sequence[str], frames: Sequence[pd.DataFrame]) -> None:
    """A pair from two GPUs would put one GPU's counters on the other's times."""
    seen = {}
    for path, frame in zip(paths, frames):
        for cc in frame["cc"].dropna().unique():
            seen.setdefault(str(cc), path)
    if len(seen) > 1:
        (a, pa), (b, pb) = list(seen.items())[:2]
        raise CeilingsError(f"{pa} ran on a GPU of CC {a}, {pb} on one of CC {b}: a trace pairs with an ncu profile "
                            f"of the same step on the same GPU; give them apart")

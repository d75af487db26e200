"""The time budget of a roofline: all of the profile's kernel time, in the classes a reader needs to trust a
roofline at a glance, summing to 100 %.

- placed: compute-, memory- or latency-bound (the row's `bound`): the time whose FLOPs and bytes place it
  against the roofs, or the launch floor (a row placed by the floor alone: all of its time);
- communication: the launches of collectives (readers.contract.COMMUNICATION), whose time is the interconnect's:
  at its roof where their bus bytes are known (analysis.roofline.links), else not placed;
- unplaced, by cause: why the work is unknown (readers.contract.UNKNOWN_WORK: no shapes recorded, a compiled
  graph, no op, no op model, no counters, launched before the trace began), or why a row whose work is known
  was not judged (the roofline's reason: no byte counters, no roof of its precision).

The rows' time in parts comes from the kernel table (analysis.metrics.time_parts, per launch, summed per row);
a table without them (read back from this tool's CSV) splits a row by its coverage alone. For traces, the
timeline beside it: the GPU's busy time (the union of kernel intervals, per device), its idle time in the
window from the first kernel's start to the last one's end, and how long communication overlapped compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from analysis.metrics import COMMUNICATION_PART, KNOWN, row_parts
from analysis.readers.contract import BEFORE_TRACE, UNKNOWN_WORK
from ceilings.lazy import lazy
from common.atomic import json_text

from . import LATENCY, totals
from .links import COMMUNICATION_BOUND

pd = lazy("pandas")

PLACED = ("compute-bound", "memory-bound", "latency-bound")
COMMUNICATION = COMMUNICATION_PART  # the class of the time of the time_parts column of that name
UNPLACED = "unplaced"
CLASSES = (*PLACED, COMMUNICATION, UNPLACED)
BUDGET_COLUMNS = ("class", "cause", "time_s", "share", "remedy")
# the cause of placed time, by class; a row of unknown work held to the floor alone is latency-bound all the same
PLACED_CAUSE = {"compute-bound": "at the compute roofs", "memory-bound": "at the bandwidth roofs",
                "latency-bound": "at the launch floor"}
FLOOR_ALONE = "at the launch floor (work unknown: placed by its time alone)"
COLLECTIVES = "collectives (NCCL, c10d) not placed: no message size or no link roof"
ON_LINK = "at the interconnect roof (bus bytes over the link)"
NOT_IN_INPUT = "work not in the input (a table read back keeps no cause)"


def time_budget(table: pd.DataFrame) -> pd.DataFrame:
    """BUDGET_COLUMNS, one row per (class, cause) with time, largest first within CLASSES' order; the shares
    sum to 1 over all of the kernel time (the table's and that of the launches left out before the trace
    began). Empty when the profile has no kernel time."""
    budget = rows_in_parts(table).sum()
    early = table.attrs.get("timeline", {}).get("early_s") or 0.0
    budget[UNPLACED, BEFORE_TRACE] = budget.get((UNPLACED, BEFORE_TRACE), 0.0) + early
    budget = budget[budget > 0]
    total = float(budget.sum())
    rows = [{"class": cls, "cause": cause, "time_s": float(seconds), "share": float(seconds) / total,
             "remedy": UNKNOWN_WORK.get(cause, "")}
            for (cls, cause), seconds in sorted(budget.items(), key=lambda kv: (CLASSES.index(kv[0][0]), -kv[1]))]
    return pd.DataFrame(rows, columns=list(BUDGET_COLUMNS))


def rows_in_parts(table: pd.DataFrame) -> pd.DataFrame:
    """Each row's time by (class, cause), the columns a MultiIndex: its known work's time in the class of its
    `bound` (or, not judged, unplaced for the roofline's reason), its collectives' time, its unknown work's by
    cause; a row of unknown work held to the floor alone is latency-bound in all of its time but collectives.
    A row's parts sum to its time."""
    parts = _parts(table)
    time = table["time_s"].astype("float64").fillna(0.0)
    bound = table["bound"].astype(object)
    alone = bound.eq(LATENCY) & parts[KNOWN].eq(0)  # unknown work held to the floor: all of its time
    linked = bound.eq(COMMUNICATION_BOUND)
    out = {(COMMUNICATION, ON_LINK): parts[COMMUNICATION].where(linked, 0.0),
           (COMMUNICATION, COLLECTIVES): parts[COMMUNICATION].where(~linked, 0.0),
           ("latency-bound", FLOOR_ALONE): (time - parts[COMMUNICATION]).where(alone, 0.0)}
    known = parts[KNOWN].where(~alone, 0.0)
    for cls in PLACED:
        cause = (cls, PLACED_CAUSE[cls])
        out[cause] = out.get(cause, 0.0) + known.where(bound.eq(cls.removesuffix("-bound")), 0.0)
    why = pd.Series(table.attrs.get("why_not_judged", {}), dtype=object).reindex(table.index)
    unjudged = known.where(bound.isna(), 0.0)
    for reason in why.fillna("not judged")[unjudged > 0].unique():
        out[UNPLACED, reason] = unjudged.where(why.fillna("not judged").eq(reason), 0.0)
    for cause in parts.columns.drop([KNOWN, COMMUNICATION]):
        out[UNPLACED, cause] = out.get((UNPLACED, cause), 0.0) + parts[cause].where(~alone, 0.0)
    frame = pd.DataFrame(out, index=table.index)
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["class", "cause"])
    return frame


def budget_columns(table: pd.DataFrame) -> pd.DataFrame:
    """The time budget per row, as --csv gives it beside each row: placed_s (compute-, memory- or latency-bound),
    communication_s, unplaced_s and unplaced_cause (the cause of most of its unplaced time)."""
    parts = rows_in_parts(table)
    classes = parts.T.groupby(level="class").sum().T.reindex(columns=list(CLASSES), fill_value=0.0)
    unplaced = parts.xs(UNPLACED, axis=1, level="class") if UNPLACED in parts.columns.get_level_values(0) else None
    cause = unplaced.idxmax(axis=1).where(unplaced.max(axis=1) > 0, "") if unplaced is not None and \
        unplaced.shape[1] else pd.Series("", index=table.index)
    return pd.DataFrame({"placed_s": classes[list(PLACED)].sum(axis=1), "communication_s": classes[COMMUNICATION],
                         "unplaced_s": classes[UNPLACED], "unplaced_cause": cause}, index=table.index)


def _parts(table: pd.DataFrame) -> pd.DataFrame:
    """The rows' time in parts (analysis.metrics.time_parts), aligned with the table; from coverage alone where the
    kernel table's parts are not there."""
    parts = row_parts(table)
    if parts is not None:
        return parts
    time = table["time_s"].astype("float64").fillna(0.0)
    known = time * table["coverage"].astype("float64").fillna(0.0).clip(0.0, 1.0)
    return pd.DataFrame({KNOWN: known, COMMUNICATION: 0.0, NOT_IN_INPUT: time - known}, index=table.index)


def share_shown(budget: pd.DataFrame) -> float:
    """The share of the kernel time placed on the roofline (NaN for an empty budget)."""
    return float(budget.loc[budget["class"].isin(PLACED), "share"].sum()) if len(budget) else math.nan


def application(table: pd.DataFrame, budget: pd.DataFrame) -> dict:
    """The application as the JSON and report give it: its FLOPs and bytes (None unless every kernel's are
    known: analysis.roofline.application_point), all of its kernel time, and, where the profile has
    timestamps, the GPU's busy time, the window, idle time in it and communication overlapping compute."""
    point = table.attrs.get("application")
    timeline = table.attrs.get("timeline", {})
    busy, window = timeline.get("busy_s"), timeline.get("window_s")
    return {"flops": point["flops"] if point else None, "bytes": point["bytes"] if point else None,
            "bytes_kind": point["bytes_kind"] if point else None,
            "kernel_time_s": float(budget["time_s"].sum()) if len(budget) else None,
            "busy_time_s": busy, "window_s": window,
            "idle_time_s": window - busy if busy is not None and window is not None else None,
            "overlap_s": timeline.get("overlap_s"),
            "flop_per_s": point["flop_per_s"] if point else None, "time_kind": point["time_kind"] if point else None}


def headline(table: pd.DataFrame, budget: pd.DataFrame) -> dict[str, float]:
    """The potential saving over all of the kernel time: the judged rows' savings (each against the larger of
    its roofs and the floor), as a share of the budget's total, and the share placed."""
    saved = totals(table)["time_saved_s"]
    total = float(budget["time_s"].sum()) if len(budget) else math.nan
    return {"time_saved_s": saved, "kernel_time_s": total,
            "saved_share": saved / total if total > 0 and not math.isnan(saved) else math.nan,
            "placed_share": share_shown(budget)}


def budget_lines(budget: pd.DataFrame, limit: int | None = None) -> list[str]:
    """One line per budget row, "memory-bound  at the bandwidth roofs  12.3 ms  3.6 %", for text outputs."""
    from . import seconds

    rows = budget if limit is None else budget.head(limit)
    width = max((len(c) for c in rows["class"]), default=0)
    return [f"{r['class']:<{width}}  {seconds(r['time_s']):>9}  {r['share']:6.1%}  {r['cause']}"
            for _, r in rows.iterrows()]



JSON_FORMAT = "ceilings.roofline"
JSON_VERSION = 1  # docs/roofline-json.md; a new field is a minor change, a renamed or removed one a new version


def json_document(table: pd.DataFrame, *, roofs_label: str, roofs_source: str, profiles: Sequence[str],
                  warnings: Sequence[str]) -> str:
    """The roofline as --json writes it (docs/roofline-json.md): base units, a missing value null, never 0."""
    budget = time_budget(table)
    kernels = table.drop(columns=["borrowed"], errors="ignore").join(budget_columns(table))
    doc = {"format": JSON_FORMAT, "version": JSON_VERSION, "roofs": {"gpu": roofs_label, "source": roofs_source},
           "profiles": [str(p) for p in profiles], "level": table.attrs.get("level", "dram"),
           "by": table.attrs.get("by", "kernel"),
           "launch_floor_s": (table.attrs.get("floor") or (None,))[0],
           "time_budget": budget.to_dict(orient="records"), "application": application(table, budget),
           "saving": headline(table, budget), "kernels": kernels.to_dict(orient="records"),
           "warnings": list(warnings)}
    return json_text(doc)


def unplaced_warning(budget: pd.DataFrame) -> str | None:
    """One line when the roofline places less than all of the kernel time: the share on it, on the interconnect,
    and the largest causes of the rest."""
    shown = share_shown(budget)
    if not len(budget) or shown >= 1 - 1e-9:
        return None
    link = float(budget.loc[budget["cause"] == ON_LINK, "share"].sum())
    rest = budget[~budget["class"].isin(PLACED) & (budget["cause"] != ON_LINK)].head(3)
    causes = ", ".join(f"{r['cause'] if r['class'] == UNPLACED else COMMUNICATION} {r['share']:.0%}"
                       for _, r in rest.iterrows())
    return (f"{shown:.0%} of the kernel time is on the roofline" + (f", {link:.0%} on the interconnect" if link else "")
            + f"; not placed: {causes} (the time budget in the report, --json or the table has all of it)")

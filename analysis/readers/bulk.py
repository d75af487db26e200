"""What readers of large profiles share: the garbage collector paused while they build millions of objects,
the ranges (operators, NVTX / record_function ranges) open at each launch, found in one sweep, and rows of
repeated values numbered by their distinct values."""

from __future__ import annotations

import gc
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from ceilings.lazy import lazy

np = lazy("numpy")  # imported by ncu_csv, which --help loads: numpy and pandas when first used
pd = lazy("pandas")

# the most ranges a launch is placed in: real nesting is a few dozen deep at most; more means ranges pushed and
# never popped, which would make every launch's list (and the reading) grow with the length of the run
MAX_DEPTH = 64


def row_codes(columns) -> np.ndarray:
    """One code per distinct row of `columns` (arrays or Series of one length), numbered in order of first
    appearance: a million launches hold a few thousand distinct kernels, processes, grids and stacks. Column by
    column (each step's codes stay below rows x distinct values: no overflow), 3x faster than a groupby."""
    codes = None
    for column in columns:
        values, distinct = pd.factorize(column, use_na_sentinel=False)
        codes = values if codes is None else pd.factorize(codes * len(distinct) + values)[0]
    return codes


def first_rows(codes: np.ndarray) -> np.ndarray:
    """The first row of each code, for codes numbered in order of first appearance (row_codes, pd.factorize)."""
    return np.flatnonzero(~pd.Series(codes).duplicated().to_numpy())


@contextmanager
def paused_gc() -> Iterator[None]:
    """The garbage collector off: a trace's millions of new dicts and tuples hold no cycles, and each
    collection would rescan all of them (a 500 MB trace's JSON loads in 0.6x the time without it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def open_ranges(starts, ends, points) -> tuple[np.ndarray, list[tuple[int, ...]], np.ndarray]:
    """The ranges that contain each point (start <= point <= end): for each point the number of its set of
    ranges, an index into `sets`; `sets`: each set's range indices in index order, at most the last MAX_DEPTH;
    `deep`: for each set, whether more than MAX_DEPTH ranges were open there (only the innermost kept).

    The ranges must be sorted by start (callers sort them outermost first: by start, then the longer), so
    index order is outermost first. A range that ends before it starts contains no point. Times are numbers
    of one kind (integer nanoseconds stay integers: exact at any size). One sweep over the ranges' starts and
    ends in time order; each point is placed by two binary searches (the number of starts at or before it
    and of ends before it), so a million points cost a few array operations and the sets a Python step each.
    """
    starts, ends, points = np.asarray(starts), np.asarray(ends), np.asarray(points)
    valid = np.flatnonzero(ends >= starts)
    starts, ends = starts[valid], ends[valid]
    by_end = np.argsort(ends, kind="stable")
    # the sweep's events: range i begins at its start, and is over after its end (a point at the end is inside)
    times = np.concatenate([starts, ends[by_end]])
    kinds = np.concatenate([np.zeros(len(starts), "int8"), np.ones(len(starts), "int8")])
    which = np.concatenate([np.arange(len(starts)), by_end])
    order = np.lexsort((kinds, times))  # stable: ranges beginning together keep their order
    kinds, which = kinds[order].tolist(), valid[which[order]].tolist()
    # a point sees the events before it: the starts at or before it and the ends before it
    seen = np.searchsorted(starts, points, side="right") + np.searchsorted(ends[by_end], points, side="left")
    states, of_point = np.unique(seen, return_inverse=True)
    sets: list[tuple[int, ...]] = []
    deep: list[bool] = []
    active: list[int] = []  # indices of the ranges begun and not over, in index order
    done = 0
    for upto in states.tolist():
        for kind, i in zip(kinds[done:upto], which[done:upto]):
            if kind:
                del active[bisect_left(active, i)]
            else:
                active.append(i)
        done = upto
        sets.append(tuple(active[-MAX_DEPTH:]))
        deep.append(len(active) > MAX_DEPTH)
    return of_point.reshape(-1), sets, np.array(deep, dtype=bool)


def enclosing(events: list[dict], queries: list[tuple]) -> tuple[dict, int]:
    """For each query (pid, tid, ts, key): the indices in `events` of the events on that thread whose interval
    contains ts, outermost first (by start, then the longer; same start and length, as integer-microsecond
    traces have: the parent first, by its smaller External id). Operators nest, but record_function ranges
    need not (a ProfilerStep#N begins inside the optimizer step's range): every event open at ts counts, at
    most the innermost MAX_DEPTH. Also how many queries were inside more."""
    by_thread: dict[tuple, list[int]] = defaultdict(list)
    for i, e in enumerate(events):
        by_thread[(e.get("pid"), e.get("tid"))].append(i)
    asked: dict[tuple, list[tuple]] = defaultdict(list)
    for pid, tid, ts, key in queries:
        asked[(pid, tid)].append((ts, key))
    out, deep = {}, 0
    for thread, todo in asked.items():
        members = by_thread.get(thread, [])
        spans = []
        for i in members:
            e = events[i]
            tie = (e.get("args") or {}).get("External id", i)
            spans.append((e["ts"], e.get("dur", 0), tie if type(tie) in (int, float) else 0))
        ts, durs, ties = np.array(spans, dtype="float64").reshape(-1, 3).T
        order = np.lexsort((ties, -durs, ts))
        which, sets, cut = open_ranges(ts[order], (ts + durs)[order], np.array([t for t, _ in todo], dtype="float64"))
        deep += int(cut[which].sum())
        ranked = order.tolist()
        chains = [tuple(members[ranked[r]] for r in chain) for chain in sets]  # queries in one set share one chain
        for w, (_, key) in zip(which.tolist(), todo):
            out[key] = chains[w]
    return out, deep

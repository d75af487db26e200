"""What readers of large profiles share: the garbage collector paused while they build millions of objects,
and the ranges (operators, NVTX / record_function ranges) open at each launch, found in one sweep."""

from __future__ import annotations

import gc
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# the most ranges a launch is placed in: real nesting is a few dozen deep at most; more means ranges pushed and
# never popped, which would make every launch's list (and the reading) grow with the length of the run
MAX_DEPTH = 64


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


def open_ranges(starts, ends, points) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """For each point, the indices of the ranges that contain it (start <= point <= end), in index order, at
    most the last MAX_DEPTH of them; and which points were inside more than MAX_DEPTH ranges (a bool array).
    Times are numbers of one kind (integer nanoseconds stay integers: exact at any size).

    The ranges must be sorted by start (callers sort them outermost first: by start, then the longer), so
    index order is outermost first. A range that ends before it starts contains no point. Points in the same
    set of ranges share one tuple. One sweep over the ranges' starts and ends in time order; each point is
    placed by two binary searches (the number of starts at or before it and of ends before it).
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
    states: dict[int, tuple[int, ...]] = {}
    deep: list[int] = []
    active: list[int] = []  # indices of the ranges begun and not over, in index order
    done = 0
    for upto in np.unique(seen).tolist():
        for kind, i in zip(kinds[done:upto], which[done:upto]):
            if kind:
                del active[bisect_left(active, i)]
            else:
                active.append(i)
        done = upto
        states[upto] = tuple(active[-MAX_DEPTH:])
        if len(active) > MAX_DEPTH:
            deep.append(upto)
    return [states[s] for s in seen.tolist()], np.isin(seen, deep)

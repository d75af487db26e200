"""nvprof output: recognised so that it is named as what it is, with the ncu command to use instead.

nvprof does not support Volta's successors (compute capability 7.5 and later) and its metric names are not
ncu's; its numbers are not read.
"""

from __future__ import annotations

import re

from common.errors import CeilingsError

from .contract import COUNTERS, Format, Source

# "==12345== NVPROF is profiling process 12345, command: ./app" and "==12345== Profiling result:"
NVPROF_LINE = re.compile(r"^==\d+== (?:NVPROF is profiling process|Profiling application:)", re.MULTILINE)


def find(source: Source):
    if b"NVPROF is profiling process" not in source.data and b"== Profiling application:" not in source.data:
        return None  # a bytes search first: the pattern would scan a 100 MB log ten times slower
    match = NVPROF_LINE.search(source.text)
    if match is None:
        return None
    return source.text.count("\n", 0, match.start()) + 1


def read(source: Source, line: int):
    raise CeilingsError(f"{source.path}:{line}: nvprof output, not Nsight Compute: its metrics are not read "
                        f"here; profile with `python -m analysis.profile --out NAME -- APP ARGS` (or `ncu "
                        f"--csv --page raw --metrics ... APP`) instead")


TEXT = Format("nvprof output", COUNTERS, find, read)

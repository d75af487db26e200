"""Nsight Compute's binary report (`.ncu-rep`, older `.nsight-cuprof-report`), read through NVIDIA's
`ncu_report` module when an Nsight Compute install provides it; else a one-line error with the command that
converts it to CSV."""

from __future__ import annotations

import glob
import importlib
import math
import shutil
import sys
from pathlib import Path

import pandas as pd

from common.errors import CeilingsError

from ..units import metric_factor
from .contract import COUNTERS, Format, Source
from .ncu_text import metric_key

MAGIC = b"NVR\0"
NCU_REPORT_DIRS = ("/opt/nvidia/nsight-compute/*/extras/python", "/opt/nvidia/nsight-compute*/extras/python",
                   "/usr/local/cuda*/nsight-compute*/extras/python", "/usr/local/NVIDIA-Nsight-Compute*/extras/python")


def _import_ncu_report():
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    candidates = []
    ncu = shutil.which("ncu")
    if ncu:
        candidates.append(str(Path(ncu).resolve().parent / "extras" / "python"))
    for pattern in NCU_REPORT_DIRS:
        candidates.extend(sorted(glob.glob(pattern), reverse=True))  # newest version first
    for folder in candidates:
        if (Path(folder) / "ncu_report.py").is_file():
            sys.path.insert(0, folder)
            try:
                return importlib.import_module("ncu_report")
            except ImportError:
                sys.path.remove(folder)
    return None


def _read_ncu_rep(source: Source, _found) -> pd.DataFrame:
    path = source.path
    module = _import_ncu_report()
    if module is None:
        raise CeilingsError(f"{path}: an .ncu-rep report needs NVIDIA's ncu_report module (ships with Nsight "
                            f"Compute in extras/python; not found); convert it with: ncu --import {path} --csv "
                            f"--page raw > {path}.csv")
    try:
        rows = []
        with source.on_disk() as on_disk:  # a gzipped report: its bytes decompressed, read while they exist
            context = module.load_report(on_disk)
            for r in range(context.num_ranges()):
                rng = context.range_by_idx(r)
                for a in range(rng.num_actions()):
                    rows.append(_action_row(rng.action_by_idx(a), r, a))
    except CeilingsError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure inside NVIDIA's module is a bad report
        raise CeilingsError(f"{path}: ncu_report could not read it ({type(exc).__name__}: {exc}); convert it "
                            f"with: ncu --import {path} --csv --page raw > {path}.csv") from None
    return pd.DataFrame(rows)


def _action_row(action, run: int, index: int) -> dict:
    row = {"run": run, "id": index, "kernel": action.name(), "launches": 1}
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        try:
            value = float(metric.as_double())
        except (TypeError, ValueError):
            continue
        if not math.isnan(value):
            row[metric_key(None, name)] = value * metric_factor(name, metric.unit())
    return row


REPORT = Format(".ncu-rep (through ncu_report)", COUNTERS, lambda src: True if src.data.startswith(MAGIC) else None,
                _read_ncu_rep, binary=True, head=len(MAGIC))

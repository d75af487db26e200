"""From raw ncu metrics (base units, one row per launch) to FLOPs, bytes, time and rates.

Every derived quantity is missing (NaN) when the metrics it needs are absent: never 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SECTOR_BYTES = 32  # DRAM, L2 and L1 sectors are 32 bytes on every architecture ncu supports

# Section-layout labels and pre-2020 metric names -> the metric they print (SpeedOfLight/LaunchStats sections).
METRIC_ALIASES = {
    "Duration": "gpu__time_duration.sum",
    "SM Frequency": "sm__cycles_elapsed.avg.per_second",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
    "Block Size": "launch__block_size",
    "Grid Size": "launch__grid_size",
    "gpu__time_duration": "gpu__time_duration.sum",  # 2019 raw page
    "dram__read_bytes": "dram__bytes_read.sum",
    "dram__write_bytes": "dram__bytes_write.sum",
    "dram__read_sectors": "dram__sectors_read.sum",
    "dram__write_sectors": "dram__sectors_write.sum",
    "gpc__frequency": "gpc__cycles_elapsed.avg.per_second",
    "sm__elapsed_cycles_avg": "sm__cycles_elapsed.avg",
}

# Tensor-pipe FLOPs per warp-level tensor instruction (sm__inst_executed_pipe_tensor*), by compute capability.
# APPROXIMATE: the FLOPs of one instruction depend on its shape and type (HMMA.884 vs .16816, TF32, INT8,
# FP8, sparsity); these are dense FP16 numbers. 7.0 is NERSC's constant for V100; the others are the
# published dense FP16 tensor FLOP/clk/SM divided by the 4 SM sub-partitions. See docs/ncu-ingestion.md.
TENSOR_FLOPS_PER_INST = {
    "7.0": 512,    # V100: NERSC roofline recipe
    "7.2": 512,    # Xavier (Volta tensor cores)
    "7.5": 256,    # Turing: 1024 FLOP/clk/SM / 4
    "8.0": 512,    # A100: 2048 / 4
    "8.6": 256,    # GA10x: 1024 / 4
    "8.7": 256,    # Orin: 1024 / 4
    "8.9": 256,    # Ada: 1024 / 4
    "9.0": 1024,   # H100: 4096 / 4
    "10.0": 2048,  # B200: 8192 / 4
    "12.0": 256,   # RTX 50: 1024 / 4
}
# DMMA (FP64 tensor) instructions: published FP64 tensor FLOP/clk/SM / 4. APPROXIMATE, as above.
DMMA_FLOPS_PER_INST = {"8.0": 32, "9.0": 64, "10.0": 32}

# FLOPs per counted thread instruction: an FMA is 2, add and mul 1. For fp16, ncu's sass_thread_inst
# metrics count a packed HFMA2/HADD2/HMUL2 once per thread (thread-instruction counters; see
# docs/ncu-ingestion.md), the same convention as ncu's own half-precision roofline (2 x hfma): so
# flops_fp16 is a lower bound, by up to 2x for fully packed half2 code.
FMA_FLOPS = 2

PRECISIONS = {"fp64": ("dfma", "dadd", "dmul"), "fp32": ("ffma", "fadd", "fmul"), "fp16": ("hfma", "hadd", "hmul")}
# the tensor-pipe instruction total, then its hmma, imma and dmma parts
TENSOR_METRICS = ("sm__inst_executed_pipe_tensor.sum",
                  *(f"sm__inst_executed_pipe_tensor_op_{op}.sum" for op in ("hmma", "imma", "dmma")))

OUTPUT_COLUMNS = ["kernel", "launches", "time_s", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor",
                  "flops", "dram_bytes", "l2_bytes", "l1_bytes", "ai_dram", "ai_l2", "ai_l1", "flop_per_s",
                  "dram_bytes_per_s", "sm_clock_hz"]
EXTENSIVE = ["time_s", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops",
             "dram_bytes", "l2_bytes", "l1_bytes"]


def canonical_metric(name: str) -> str:
    """`smsp__` and `sm__` sums of instruction counts are the same number: keep one spelling."""
    name = METRIC_ALIASES.get(name, name)
    if name.startswith("smsp__") and name.endswith(".sum") and (
            "sass_thread_inst_executed_op_" in name or "inst_executed_pipe_tensor" in name):
        return "sm__" + name[len("smsp__"):]
    return name


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name in df.columns:
        return df[name].astype("float64")
    return pd.Series(np.nan, index=df.index, dtype="float64")


def _first(*series: pd.Series) -> pd.Series:
    out = series[0]
    for s in series[1:]:
        out = out.fillna(s)
    return out


def _sectors(df: pd.DataFrame, unit: str) -> pd.Series:
    """32 x (`unit`__t_sectors.sum), else 32 x (read + write [+ atom + red]) when read and write are present."""
    total = _col(df, f"{unit}__t_sectors.sum")
    ops = [_col(df, f"{unit}__t_sectors_op_{op}.sum") for op in ("read", "write", "atom", "red")]
    by_op = ops[0] + ops[1] + ops[2].fillna(0) + ops[3].fillna(0)
    return SECTOR_BYTES * _first(total, by_op)


def _times(count: pd.Series, per_inst: pd.Series) -> pd.Series:
    """count x per_inst, where a zero count is 0 FLOPs even when the per-instruction rule is unknown."""
    return (count * per_inst).where(count != 0, count)


def _tensor_flops(df: pd.DataFrame) -> pd.Series:
    cc = df["cc"] if "cc" in df.columns else pd.Series(None, index=df.index, dtype="object")
    per_inst = cc.map(TENSOR_FLOPS_PER_INST).astype("float64")
    per_dmma = cc.map(DMMA_FLOPS_PER_INST).astype("float64")
    total, *ops = (_col(df, name) for name in TENSOR_METRICS)
    has_ops = ops[0].notna() | ops[1].notna() | ops[2].notna()
    by_op = (_times(ops[0].fillna(0), per_inst) + _times(ops[1].fillna(0), per_inst)
             + _times(ops[2].fillna(0), per_dmma))
    return _first(_times(total, per_inst), by_op.where(has_ops))


def derive(raw: pd.DataFrame) -> pd.DataFrame:
    """Per-launch output columns from per-launch raw metrics (values per launch, base units).

    Columns already present under their output name (this tool's own CSV read back, nsys times) are used
    as they are.
    """
    out = pd.DataFrame(index=raw.index)
    inputs = {"flops_tensor": ["flops_tensor", *TENSOR_METRICS]}  # output column -> the raw columns it uses
    for prec, (fma, add, mul) in PRECISIONS.items():
        names = [f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in (fma, add, mul)]
        ops = [_col(raw, name) for name in names]
        out[f"flops_{prec}"] = _first(_col(raw, f"flops_{prec}"), FMA_FLOPS * ops[0] + ops[1] + ops[2])
        inputs[f"flops_{prec}"] = [f"flops_{prec}", *names]
    out["flops_tensor"] = _first(_col(raw, "flops_tensor"), _tensor_flops(raw))
    # a precision the input counts but this row lacks (n/a) makes the total unknown, not smaller
    counted = [col for col, names in inputs.items() if raw.columns.isin(names).any()]
    total = out[counted].sum(axis=1, skipna=False) if counted else np.nan
    out["flops"] = _first(_col(raw, "flops"), pd.Series(total, index=raw.index, dtype="float64"))
    out["dram_bytes"] = _first(
        _col(raw, "dram_bytes"), _col(raw, "dram__bytes.sum"),
        _col(raw, "dram__bytes_read.sum") + _col(raw, "dram__bytes_write.sum"),
        SECTOR_BYTES * (_col(raw, "dram__sectors_read.sum") + _col(raw, "dram__sectors_write.sum")),
        SECTOR_BYTES * _col(raw, "dram__sectors.sum"))
    out["l2_bytes"] = _first(_col(raw, "l2_bytes"), _col(raw, "lts__t_bytes.sum"), _sectors(raw, "lts"))
    out["l1_bytes"] = _first(_col(raw, "l1_bytes"), _col(raw, "l1tex__t_bytes.sum"), _sectors(raw, "l1tex"))
    cycles_per_s = _col(raw, "sm__cycles_elapsed.avg.per_second")
    out["time_s"] = _first(_col(raw, "time_s"), _col(raw, "gpu__time_duration.sum"),
                           _col(raw, "sm__cycles_elapsed.avg") / cycles_per_s.where(cycles_per_s > 0))
    out["sm_clock_hz"] = _first(_col(raw, "sm_clock_hz"), cycles_per_s,
                                _col(raw, "gpc__cycles_elapsed.avg.per_second"), _col(raw, "sm__frequency"))
    return out


def with_rates(table: pd.DataFrame) -> pd.DataFrame:
    """Add intensities and rates to a table of totals; a row without time has no rates."""
    t = table
    for level in ("dram", "l2", "l1"):
        b = t[f"{level}_bytes"]
        t[f"ai_{level}"] = t["flops"] / b.where(b > 0)
    time = t["time_s"].where(t["time_s"] > 0)
    t["flop_per_s"] = t["flops"] / time
    t["dram_bytes_per_s"] = t["dram_bytes"] / time
    return t

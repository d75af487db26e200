"""Calibration by a real profile: the measured efficiency of each op class, to project onto other GPUs.

The kernels of a profiled prefill or decode step (any profile analysis.ncu.kernel_table reads) are sorted into
op classes by their names (KERNEL_CLASSES, data); per class, efficiency = time at the roofs of the model's ops
of that class on the profiled GPU / the measured time of its kernels. Another GPU's time of an op is then its
time at that GPU's roofs / the efficiency of its class: the efficiency factor other tools ask users to guess,
measured. A class the profile lacks, or whose kernels are not all timed, stays at the roof, and says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from analysis.llm.work import OP_CLASSES

COMMUNICATION = "communication"  # profiled, never modelled (one GPU, no tensor parallelism)
OTHER = "other"  # a kernel no pattern matches
# (op class, kernel-name pattern), tried in order, first match wins (re.search, case-insensitive): kernel names
# of cuBLAS/cuBLASLt (gemm, gemv, nvjet, xmma), CUTLASS, Marlin and vLLM's fused MoE, FlashAttention
# (flash_fwd*), xFormers/PyTorch (fmha), vLLM paged attention, PyTorch softmax (naive attention's softmax),
# vLLM/PyTorch norms and torch.compile's Triton kernels (a norm fuses its rsqrt), NCCL and vLLM's all-reduce
KERNEL_CLASSES = (
    (COMMUNICATION, r"nccl|all_?reduce|all_?gather|reduce_?scatter|cross_device_reduce"),
    # MoE routing and vLLM's KV-cache write, before 'softmax', 'moe' GEMMs and 'flash'
    ("elementwise", r"topk|moe_align|moe_sum|gating|reshape_and_cache"),
    ("gemm", r"fused_moe|marlin"),
    ("attention", r"flash|fmha|attention|attn|softmax|sdpa"),
    ("norm", r"rms_?norm|layer_?norm|rsqrt"),
    ("gemm", r"gemm|gemv|cutlass|cublas|xmma|nvjet|matmul|splitk"),
    ("elementwise", r"elementwise|vectorized|unrolled|rotary|rope|silu|gelu|act_and_mul|embedding|index_select|"
                    r"cache|copy|triton_poi|fill"),
)
CALIBRATION_COLUMNS = ("op_class", "kernels", "measured_s", "at_roof_s", "efficiency", "applied", "note")


def kernel_class(name: str) -> str:
    """The op class of a kernel name (KERNEL_CLASSES), OTHER when no pattern matches."""
    return next((cls for cls, pattern in KERNEL_CLASSES if re.search(pattern, name, re.IGNORECASE)), OTHER)


@dataclass(frozen=True)
class Calibration:
    """The measured efficiency of each op class of one phase, from one profile on one GPU."""

    phase: str
    gpu: str  # the label of the roofs the profile is compared with
    table: pd.DataFrame  # CALIBRATION_COLUMNS, one row per class seen in the model or the profile
    kernels: pd.DataFrame  # the profile's kernels with their op_class

    @property
    def efficiency(self) -> dict[str, float]:
        """op class -> efficiency, for the classes applied."""
        applied = self.table[self.table["applied"]]
        return dict(zip(applied["op_class"], applied["efficiency"]))


def calibrate(kernels: pd.DataFrame, predicted: pd.DataFrame, phase: str, gpu: str, steps: int = 1
              ) -> Calibration:
    """Compare the profile's kernels (kernel_table, `steps` forward passes of `phase`) with the model's ops of
    that phase placed on the profiled GPU's roofs (place.place); efficiency = at the roofs / measured."""
    kernels = kernels.assign(op_class=[kernel_class(str(k)) for k in kernels["kernel"]])
    rows = []
    for cls in (*OP_CLASSES, COMMUNICATION, OTHER):
        mine = kernels[kernels["op_class"] == cls]
        ops = predicted[predicted["op_class"] == cls]
        if mine.empty and ops.empty:
            continue
        at_roof = float(ops["time_at_roof_s"].sum(skipna=False)) if len(ops) else math.nan
        untimed = int(mine["time_s"].isna().sum())
        measured = float(mine["time_s"].sum()) / steps if len(mine) and not untimed else math.nan
        row = {"op_class": cls, "kernels": len(mine), "measured_s": measured, "at_roof_s": at_roof,
               "efficiency": math.nan, "applied": False}
        if ops.empty:
            row["note"] = ("not modelled: one GPU, no tensor parallelism" if cls == COMMUNICATION else
                           "no pattern matches these kernels: not modelled" if cls == OTHER else
                           "the model has no op of this class in this phase")
        elif mine.empty:
            row["note"] = "the profile has no kernel of this class: stays at the roof"
        elif untimed:
            row["note"] = f"{untimed} of its kernels have no time: stays at the roof"
        elif math.isnan(at_roof):
            row["note"] = "the roofs cannot place its ops: not calibrated"
        elif not measured > 0:
            row["note"] = "its kernels took no time: stays at the roof"
        else:
            row.update(efficiency=at_roof / measured, applied=True,
                       note="measured faster than the roofs allow: the model counts more work than the kernels did "
                            "(fused ops, cache hits) or the roofs are low" if at_roof > measured else "applied")
        rows.append(row)
    return Calibration(phase, gpu, pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS)), kernels)

"""Calibration by real profiles: a latency floor a kernel and an efficiency of the roof, per op class, to
project onto other batches, contexts and GPUs.

The kernels of a profiled prefill or decode step (any profile analysis.roofline.inputs.read_kernels reads) are sorted
into op classes by their names (KERNEL_CLASSES, data). Each class is modelled as

    measured = kernels x floor + (time at the roofs of the model's ops of that class) / efficiency

(place.Cost: the sum, since a kernel's launch, ramp-up and tail do not overlap its own work). From one profile
the floor is the smallest kernel's time (a kernel that is all latency), lowered where the class's time leaves
less; from two or more profiles at different batches or contexts both are fitted by least squares. Floors are
never negative and efficiencies never above 1, so a prediction is never below the roof. A class the profile
lacks, or whose kernels are not all timed, stays at the roof, and says so. Kernel counts far from the ops the
model expects, or efficiencies under 1 %, are warnings naming the mismatch. Refused: a training trace, and a
profile that is not a step of this model (no GEMM or no attention kernel where every layer runs both, or GEMM
kernels a step more than REFUSED_OFF times off the model's GEMM ops).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from analysis.llm.place import COMMUNICATION, Cost
from analysis.llm.work import OP_CLASSES
from ceilings.lazy import lazy
from common.errors import CeilingsError

np = lazy("numpy")
pd = lazy("pandas")

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
CALIBRATION_COLUMNS = ("op_class", "kernels", "expected", "measured_s", "at_roof_s", "floor_s", "efficiency",
                       "applied", "note")
# kernels that only training runs: backward passes, gradients, optimizer steps
TRAINING = r"backward|bwd|grad|adam|adagrad|sgd|optimizer|multi_tensor_apply"
MISMATCH = 2.0  # kernels per step against the ops expected: more than this many times off is a warning
# GEMM kernels a step against the model's GEMM ops: more than this many times off is not this model's step. Real
# engines stay inside it: unfused q, k, v and gate, up projections (7 GEMMs a layer where the model counts 4)
# with a split-K reduction kernel each is 3.5x; a profile of N steps without --calibrate-steps N is N x.
REFUSED_OFF = 4.0
REQUIRED = ("gemm", "attention")  # classes every layer of the model runs: a step of it holds kernels of both
LOW_EFFICIENCY = 0.01


def kernel_class(name: str) -> str:
    """The op class of a kernel name (KERNEL_CLASSES), OTHER when no pattern matches."""
    return next((cls for cls, pattern in KERNEL_CLASSES if re.search(pattern, name, re.IGNORECASE)), OTHER)


@dataclass(frozen=True)
class Profile:
    """One profiled forward pass: its kernels (read_kernels), how many passes they hold, and the model's ops of
    that pass placed on the profiled GPU's roofs (place.place)."""

    kernels: pd.DataFrame
    predicted: pd.DataFrame
    steps: int = 1
    label: str = ""  # what it ran, for messages ("batch 1")


@dataclass(frozen=True)
class Calibration:
    """The fitted floor and efficiency of each op class of one phase, from profiles on one GPU."""

    phase: str
    gpu: str  # the label of the roofs the profiles are compared with
    table: pd.DataFrame  # CALIBRATION_COLUMNS, one row per class seen in the model or the profiles
    kernels: pd.DataFrame  # the profiles' kernels with their op_class
    warnings: tuple[str, ...] = ()

    @property
    def costs(self) -> dict[str, Cost]:
        """op class -> Cost of a model op instance, for the classes applied: the profile's kernels' floors
        spread over the ops the model counts (an engine that fuses two ops pays one floor for them)."""
        applied = self.table[self.table["applied"]]
        return {r.op_class: Cost(r.floor_s * r.kernels / r.expected, r.efficiency) for r in applied.itertuples()}


def _classed(kernels: pd.DataFrame) -> pd.DataFrame:
    launches = kernels["launches"] if "launches" in kernels else pd.Series(1, index=kernels.index)
    return kernels.assign(op_class=[kernel_class(str(k)) for k in kernels["kernel"]],
                          launches=launches.fillna(1).astype(int))


def _fit(points: Sequence[tuple[float, float, float]], smallest: float) -> tuple[float, float]:
    """(floor, efficiency) of `kernels x floor + at_roof / efficiency = measured` over (kernels, measured,
    at_roof) points; one point: the floor is the smallest kernel's time, at most what the class's time leaves
    at efficiency 1. The floor at least 0, the efficiency at most 1."""
    n, m, w = (np.array(c, dtype=float) for c in zip(*points))
    if len(points) == 1 or np.linalg.matrix_rank(np.column_stack([n, w])) < 2:
        floor = min(smallest, float(np.min((m - w) / n)))
    else:
        floor = float(np.linalg.lstsq(np.column_stack([n, w]), m, rcond=None)[0][0])
    floor = max(0.0, floor)
    rest = float(m.sum() - floor * n.sum())
    return floor, (min(1.0, float(w.sum()) / rest) if rest > 0 else 1.0)


def _refuse_another_step(profile: Profile, classed: pd.DataFrame, phase: str) -> None:
    """A CeilingsError naming what was looked for and found where the profile is not a `phase` step of the
    model: a REQUIRED class without a kernel, or GEMM kernels a step more than REFUSED_OFF times off its GEMM
    ops. Its floors and efficiencies would be another program's (an AlexNet trace set a Llama's GEMMs to 89 %)."""
    found = classed.groupby("op_class")["launches"].sum() / profile.steps
    expected = profile.predicted.groupby("op_class")["count"].sum()
    why = [f"no {cls} kernel (names matching {'|'.join(pattern for c, pattern in KERNEL_CLASSES if c == cls)}) "
           f"where the model runs {expected[cls]:g} {cls} ops a step"
           for cls in REQUIRED if expected.get(cls, 0) and not found.get(cls, 0)]
    gemms, ops = found.get("gemm", 0), expected.get("gemm", 0)
    if gemms and ops and not 1 / REFUSED_OFF <= gemms / ops <= REFUSED_OFF:
        why.append(f"{gemms:g} gemm kernels a step where the model runs {ops:g} gemm ops, more than "
                   f"{REFUSED_OFF:g}x off")
    if why:
        held = ", ".join(f"{cls} {n:g}" for cls, n in found.sort_values(ascending=False).items())
        raise CeilingsError(f"--calibrate{' ' + profile.label if profile.label else ''}: not a {phase} step of this "
                            f"model: {'; '.join(why)} (found a step: {held or 'no'} kernels); give a profile of "
                            f"one {phase} step of this model and setup (scripts/apps/decode_step.py is a decode step "
                            f"to profile), with --calibrate-steps N if it holds N steps")


def calibrate(profiles: Sequence[Profile], phase: str, gpu: str) -> Calibration:
    """Fit each class's floor and efficiency from profiles of `phase` (one, or several at different batches or
    contexts); CeilingsError for a training trace or a profile of another program (_refuse_another_step)."""
    classed = [_classed(p.kernels) for p in profiles]
    for p, k in zip(profiles, classed):
        training = k[k["kernel"].astype(str).str.contains(TRAINING, case=False, regex=True)]
        if len(training):
            raise CeilingsError(f"--calibrate {p.label}: a training trace ({len(training)} kernel(s) of backward "
                                f"passes or optimizer steps, e.g. {str(training['kernel'].iloc[0])[:60]}); "
                                f"give a profile of an inference {phase} step")
        _refuse_another_step(p, k, phase)
    timed = pd.concat(classed)
    per_launch = (timed["time_s"] / timed["launches"]).dropna()
    smallest = float(per_launch[per_launch > 0].min()) if (per_launch > 0).any() else 0.0
    rows, warnings = [], []
    for cls in (*OP_CLASSES, OTHER):
        mine = [k[k["op_class"] == cls] for k in classed]
        ops = [p.predicted[p.predicted["op_class"] == cls] for p in profiles]
        if all(m.empty for m in mine) and all(o.empty for o in ops):
            continue
        kernels = [float(m["launches"].sum()) / p.steps for m, p in zip(mine, profiles)]
        expected = [float(o["count"].sum()) for o in ops]
        at_roof = [float(o["time_at_roof_s"].sum(skipna=False)) if len(o) else math.nan for o in ops]
        untimed = sum(int(m["time_s"].isna().sum()) for m in mine)
        measured = [float(m["time_s"].sum()) / p.steps if len(m) and not untimed else math.nan
                    for m, p in zip(mine, profiles)]
        row = {"op_class": cls, "kernels": kernels[0], "expected": expected[0], "measured_s": measured[0],
               "at_roof_s": at_roof[0], "floor_s": math.nan, "efficiency": math.nan, "applied": False}
        if not expected[0]:
            row["note"] = ("no pattern matches these kernels: not modelled" if cls == OTHER else
                           "not modelled: one GPU (give --tp)" if cls == COMMUNICATION else
                           "the model has no op of this class in this phase")
        elif not kernels[0]:
            row["note"] = "the profile has no kernel of this class: stays at the roof"
        elif untimed:
            row["note"] = f"{untimed} of its kernels have no time: stays at the roof"
        elif any(math.isnan(w) for w in at_roof):
            row["note"] = "the roofs cannot place its ops: not calibrated"
        elif not all(m > 0 for m in measured):
            row["note"] = "its kernels took no time: stays at the roof"
        else:
            floor, eff = _fit(list(zip(kernels, measured, at_roof)), smallest)
            faster = any(w > m for w, m in zip(at_roof, measured))
            row.update(floor_s=floor, efficiency=eff, applied=True,
                       note="measured faster than the roofs allow (fused ops, cache hits, or low roofs): held at "
                            "the roof" if faster else "applied")
        for p, n, e in zip(profiles, kernels, expected):
            if e and n and not 1 / MISMATCH <= n / e <= MISMATCH:
                warnings.append(f"{cls}: the profile{' of ' + p.label if p.label else ''} has {n:g} kernels a "
                                f"step where the model expects {e:g} ops: more than {MISMATCH:g}x off; is it a "
                                f"{phase} step of this model and setup (--calibrate-steps)?")
        if row["applied"] and row["efficiency"] < LOW_EFFICIENCY:
            warnings.append(f"{cls}: efficiency {row['efficiency']:.2%} of the roof after a floor of "
                            f"{row['floor_s'] * 1e6:.3g} us a kernel: under {LOW_EFFICIENCY:.0%}; the profile "
                            f"does not look like this model's {phase} (model, batch, context, types)")
        rows.append(row)
    return Calibration(phase, gpu, pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS)), pd.concat(classed),
                       tuple(warnings))

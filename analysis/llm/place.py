"""A model's work placed on a GPU's roofs: each op's time at the roofs (analysis.roofline.time_at_roofs, the
one placement), phase totals, whether weights and KV cache fit, the batch where decode turns compute-bound,
and the cost of a token: the numbers a choice of hardware needs, one GPU per Result.

Every op runs alone (kernels one after another), at max(compute, memory) of its own roofs; an op whose roof
the roofs lack is not placed, and a total over it is missing (NaN), never a smaller number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from analysis.llm.models import Model
from analysis.llm.work import Op, Setup, kv_bytes_per_token, kv_cache_bytes, step_ops, weights_bytes
from analysis.roofline import AtRoof, Roofs, target_roofs, time_at_roofs

LEVEL = "dram"  # the work model counts DRAM traffic
PLACED_COLUMNS = ("phase", "op", "op_class", "count", "roof", "flops", "bytes", "weights_bytes", "kv_read_bytes",
                  "kv_write_bytes", "activation_bytes", "ai", "bound", "compute_s", "memory_s", "time_at_roof_s",
                  "efficiency", "time_s", "why")
# the crossover search doubles the batch up to this, then gives up (no GPU holds such a batch)
MAX_BATCH = 1 << 20
DEFAULT_SWEEP_MAX = 1024


@dataclass(frozen=True)
class Gpu:
    """A GPU to place the work on: its roofs, its memory and, when given, its price."""

    spec: str  # as given to --roofs
    roofs: Roofs
    memory_bytes: float | None
    memory_source: str
    usd_per_hour: float | None = None

    @property
    def label(self) -> str:
        return self.roofs.label


def gpu_of(spec: str) -> Gpu:
    """The GPU of a roofs file or a datasheet name (roofline.target_roofs) and its memory: the datasheet's
    figure for a datasheet row, the device's total in a roofs file, unknown when neither says."""
    roofs = target_roofs(spec, option="--roofs")
    if roofs.memory_bytes:
        where = (f"datasheet: {roofs.memory_bytes / 2**30:g} GiB" if roofs.from_datasheet_row
                 else "device memory recorded in the roofs file")
        return Gpu(spec, roofs, float(roofs.memory_bytes), where)
    return Gpu(spec, roofs, None, "unknown: the roofs file does not record the device memory")


def _at(roofs: Roofs, op: Op) -> AtRoof | str:
    return time_at_roofs(roofs, op.flops, {LEVEL: op.total_bytes})


def place(roofs: Roofs, ops: Sequence[Op], phase: str, efficiency: Mapping[str, float] | None = None
          ) -> pd.DataFrame:
    """One row per op (PLACED_COLUMNS): its work, bound and time at the roofs, and its time at the measured
    efficiency of its class (time at the roofs / efficiency; 1, at the roof, for a class not calibrated).
    An op that cannot be placed has NaN times and says why."""
    efficiency = efficiency or {}
    rows = []
    for op in ops:
        at = _at(roofs, op)
        placed = not isinstance(at, str)
        eff = efficiency.get(op.op_class, 1.0)
        flops, nbytes = op.total_flops, op.total_bytes
        rows.append({
            "phase": phase, "op": op.name, "op_class": op.op_class, "count": op.count,
            "roof": "+".join(k for k, v in op.flops.items() if v > 0) or "memory",
            "flops": flops, "bytes": nbytes, "weights_bytes": op.nbytes.get("weights", 0.0),
            "kv_read_bytes": op.nbytes.get("kv_read", 0.0), "kv_write_bytes": op.nbytes.get("kv_write", 0.0),
            "activation_bytes": op.nbytes.get("activations", 0.0), "ai": flops / nbytes,
            "bound": at.bound if placed else math.nan, "compute_s": at.compute_s if placed else math.nan,
            "memory_s": at.memory_s if placed else math.nan, "time_at_roof_s": at.time_s if placed else math.nan,
            "efficiency": eff, "time_s": at.time_s / eff if placed else math.nan, "why": "" if placed else at})
    return pd.DataFrame(rows, columns=list(PLACED_COLUMNS))


def step_time(roofs: Roofs, ops: Sequence[Op], efficiency: Mapping[str, float] | None = None) -> float:
    """The time of a forward pass: the sum of its ops' times (place's time_s), NaN when one is not placed."""
    total = 0.0
    for op in ops:
        at = _at(roofs, op)
        if isinstance(at, str):
            return math.nan
        total += at.time_s / (efficiency or {}).get(op.op_class, 1.0)
    return total


def phase_total(placed: pd.DataFrame, column: str) -> float:
    """A column summed over a phase's ops; NaN when any op lacks it (a partial sum would be a wrong number)."""
    return float(placed[column].sum(skipna=False))


@dataclass(frozen=True)
class Memory:
    """Weights and KV cache against the GPU's memory. The KV cache is the batch's at the end of the request
    (prompt + gen tokens per sequence); activations, workspace and the CUDA context are not counted."""

    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float | None
    fits: bool | None  # None: the GPU's memory is unknown
    max_batch: int | None  # sequences of prompt + gen tokens that fit beside the weights
    max_context: int | None  # tokens per sequence that fit at --batch (at most the model's max_context)
    context_capped: bool  # max_context is the model's max_position_embeddings, not the memory


def memory(model: Model, setup: Setup, capacity_bytes: float | None) -> Memory:
    weights = weights_bytes(model, setup)
    tokens = setup.prompt + setup.gen
    kv = kv_cache_bytes(model, setup, tokens)
    if capacity_bytes is None:
        return Memory(weights, kv, None, None, None, None, False)
    room = capacity_bytes - weights
    per_token = kv_bytes_per_token(model, setup)
    max_batch = max(0, math.floor(room / (per_token * tokens)))
    max_context = max(0, math.floor(room / (per_token * setup.batch)))
    capped = model.max_context is not None and max_context > model.max_context
    return Memory(weights, kv, capacity_bytes, weights + kv <= capacity_bytes, max_batch,
                  model.max_context if capped else max_context, capped)


def _weight_gemms(ops: Sequence[Op]) -> list[Op]:
    """The GEMMs that read weights (not attention's batched GEMMs): the work whose intensity grows with batch."""
    return [op for op in ops if op.op_class == "gemm" and op.nbytes.get("weights")]


def gemms_compute_bound(model: Model, setup: Setup, roofs: Roofs, batch: int) -> bool | None:
    """Whether the first decode step's weight GEMMs, together, take longer on the compute roofs than on the
    memory roof at this batch; None when the roofs cannot place them."""
    ats = [_at(roofs, op) for op in _weight_gemms(step_ops(model, replace(setup, batch=batch), 1, setup.prompt))]
    if any(isinstance(at, str) for at in ats):
        return None
    return sum(at.compute_s for at in ats) >= sum(at.memory_s for at in ats)


def crossover_batch(model: Model, setup: Setup, roofs: Roofs) -> int | None:
    """The smallest batch at which decode's weight GEMMs are compute-bound (their FLOPs grow with the batch,
    their weight bytes do not: the batch where their intensity reaches the ridge point); None when the roofs
    cannot place them or no batch up to MAX_BATCH does. Attention reads each sequence's own KV cache, so its
    intensity does not grow with the batch and it stays memory-bound."""
    if gemms_compute_bound(model, setup, roofs, 1) is None:
        return None
    low, high = 0, 1  # low: memory-bound (or none), high: tried next
    while not gemms_compute_bound(model, setup, roofs, high):
        if high >= MAX_BATCH:
            return None
        low, high = high, high * 2
    while high - low > 1:  # compute-bound at high, not at low: the ratio grows with the batch
        middle = (low + high) // 2
        low, high = (low, middle) if gemms_compute_bound(model, setup, roofs, middle) else (middle, high)
    return high


@dataclass(frozen=True)
class Result:
    """One GPU's prefill, decode, memory, crossover and cost for one model and setup."""

    gpu: Gpu
    setup: Setup
    prefill: pd.DataFrame  # placed ops of the prefill
    decode: pd.DataFrame  # placed ops of the first decode step (context = prompt)
    step_times: tuple[float, ...]  # every decode step, contexts prompt .. prompt + gen - 1
    memory: Memory
    crossover_batch: int | None

    @property
    def ttft_s(self) -> float:
        """Time to first token: the prefill."""
        return phase_total(self.prefill, "time_s")

    @property
    def first_step_s(self) -> float:
        return self.step_times[0]

    @property
    def mean_step_s(self) -> float:
        """Mean time of a decode step: the time per output token of one sequence."""
        return math.fsum(self.step_times) / len(self.step_times)

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput of the batch: a token per sequence per step."""
        return self.setup.batch / self.mean_step_s

    @property
    def request_s(self) -> float:
        return self.ttft_s + math.fsum(self.step_times)

    @property
    def usd_per_million_tokens(self) -> float | None:
        """What a million generated tokens cost at the GPU's price: the whole request (prefill and every decode
        step) over the batch's generated tokens; None without a price."""
        if self.gpu.usd_per_hour is None:
            return None
        return self.gpu.usd_per_hour / 3600 * self.request_s / (self.setup.batch * self.setup.gen) * 1e6


def evaluate(model: Model, setup: Setup, gpu: Gpu,
             efficiency: Mapping[str, Mapping[str, float]] | None = None) -> Result:
    """The model's request on one GPU; `efficiency`: per phase, the measured efficiency of each op class."""
    efficiency = efficiency or {}
    roofs = gpu.roofs
    prefill = place(roofs, step_ops(model, setup, setup.prompt, 0), "prefill", efficiency.get("prefill"))
    decode_eff = efficiency.get("decode")
    first = step_ops(model, setup, 1, setup.prompt)
    steps = [step_time(roofs, step_ops(model, setup, 1, setup.prompt + i), decode_eff)
             for i in range(1, setup.gen)]
    decode = place(roofs, first, "decode", decode_eff)
    return Result(gpu, setup, prefill, decode, (phase_total(decode, "time_s"), *steps),
                  memory(model, setup, gpu.memory_bytes), crossover_batch(model, setup, roofs))


SWEEP_COLUMNS = ("gpu", "batch", "step_time_s", "tokens_per_s", "gemms", "fits")


def sweep_batches(limit: int) -> list[int]:
    """Powers of two from 1 to `limit` (and `limit` itself)."""
    batches = [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]
    return batches + ([limit] if batches[-1] != limit else [])


def batch_sweep(model: Model, setup: Setup, gpu: Gpu, batches: Sequence[int],
                efficiency: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The first decode step (context = prompt) at each batch: its time, the batch's tokens/s, whether its
    weight GEMMs are compute- or memory-bound, and whether weights + KV cache (prompt + gen tokens a sequence)
    fit (None: memory unknown)."""
    rows = []
    for b in batches:
        at = replace(setup, batch=b)
        time_s = step_time(gpu.roofs, step_ops(model, at, 1, setup.prompt), efficiency)
        bound = gemms_compute_bound(model, setup, gpu.roofs, b)
        rows.append({"gpu": gpu.label, "batch": b, "step_time_s": time_s, "tokens_per_s": b / time_s,
                     "gemms": math.nan if bound is None else "compute" if bound else "memory",
                     "fits": memory(model, at, gpu.memory_bytes).fits})
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))

"""A model's work placed on a GPU's roofs: each op's time at the roofs (analysis.roofline.time_at_roofs, the
one placement), phase totals, whether weights and KV cache fit, the batch where decode turns compute-bound,
and the cost of a token: the numbers a choice of hardware needs, one GPU per Result.

Every op runs alone (kernels one after another), at max(compute, memory) of its own roofs; an op whose roof
the roofs lack is not placed, and a total over it is missing (NaN), never a smaller number. A calibrated class
(Cost) adds a latency floor a kernel and runs its work at an efficiency of the roof: floor + work / (eff x roof),
never below the roof. Tensor parallelism's all-reduces run on the interconnect (Link): their bytes over the link's
bandwidth at the roof, plus the link's latency each as their floor (unless a calibration fitted one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from analysis.llm.models import Model
from analysis.llm.work import (
    Op,
    Setup,
    context_fit,
    kv_cache_bytes,
    step_ops,
    weights_bytes,
)
from analysis.roofline import AtRoof, Roofs, target_roofs, time_at_roofs
from ceilings.lazy import lazy

pd = lazy("pandas")

LEVEL = "dram"  # the work model counts DRAM traffic
PLACED_COLUMNS = ("phase", "op", "op_class", "count", "roof", "flops", "bytes", "weights_bytes", "kv_read_bytes",
                  "kv_write_bytes", "activation_bytes", "ai", "bound", "compute_s", "memory_s", "time_at_roof_s",
                  "floor_s", "efficiency", "time_s", "why")
# the crossover search doubles the batch up to this, then gives up (no GPU holds such a batch)
MAX_BATCH = 1 << 20
DEFAULT_SWEEP_MAX = 1024
COMMUNICATION = "communication"  # the op class placed on the interconnect
MIB = 2**20
# the share of the memory a server takes (vLLM's gpu_memory_utilization default)
DEFAULT_MEMORY_FRACTION = 0.9
# memory besides weights, KV cache and the step's activations: the CUDA context, cuBLAS and NCCL workspaces
# (an estimate; vLLM measures it by profiling a step)
WORKSPACE_BYTES = 2**30


@dataclass(frozen=True)
class Cost:
    """How an op class runs: each kernel pays `floor_s`, and its work runs at `efficiency` (at most 1) of the
    roof. Sum, not max: a kernel's launch, ramp-up and tail come before and after its work, not during it;
    the sum is linear in the kernels and the work, so two profiles fit it exactly."""

    floor_s: float = 0.0
    efficiency: float = 1.0

    def time(self, op: Op, at_roof_s: float) -> float:
        return op.count * self.floor_s + at_roof_s / self.efficiency


AT_ROOF = Cost()


@dataclass(frozen=True)
class Link:
    """The interconnect of tensor parallelism: bandwidth a direction a GPU, latency of one all-reduce."""

    name: str
    bandwidth: float  # B/s
    latency_s: float | None  # None: no cited figure
    source: str


@dataclass(frozen=True)
class TargetGpu:
    """A GPU to place the work on: its roofs, its memory and, when given, its price."""

    spec: str  # as given to --roofs
    roofs: Roofs
    memory_bytes: float | None  # what the GPU shows (nvidia-smi's total), or the marketed size where unknown
    memory_source: str
    usd_per_hour: float | None = None
    link: Link | None = None  # None: no figures for its interconnect

    @property
    def label(self) -> str:
        return self.roofs.label


def gpu_of(spec: str) -> TargetGpu:
    """The GPU of a roofs file or a datasheet name (roofline.target_roofs), its memory and its interconnect: a
    roofs file's device total (what the GPU shows), else serving.csv's visible memory, else the datasheet's
    marketed size (more than the GPU shows); the link from serving.csv."""
    roofs = target_roofs(spec, option="--roofs")
    row = roofs.serving
    link = Link(row.link, row.link_gbs * 1e9,
                row.allreduce_latency_us * 1e-6 if row.allreduce_latency_us else None,
                row.source) if row and row.link_gbs else None
    if roofs.memory_bytes and not roofs.from_datasheet_row:
        return TargetGpu(spec, roofs, float(roofs.memory_bytes), "device memory recorded in the roofs file", link=link)
    if row and row.visible_memory_mib:
        mib = row.visible_memory_mib
        return TargetGpu(spec, roofs, mib * MIB, f"{mib:,.0f} MiB as the GPU shows it (ceilings/data/serving.csv)",
                   link=link)
    if roofs.memory_bytes:
        return TargetGpu(spec, roofs, float(roofs.memory_bytes), f"datasheet: {roofs.memory_bytes / 2**30:g} GiB, the "
                   f"marketed size (the GPU shows less; add it to ceilings/data/serving.csv)", link=link)
    return TargetGpu(spec, roofs, None, "unknown: the roofs file does not record the device memory", link=link)


def _at(roofs: Roofs, op: Op, link: Link | None = None) -> AtRoof | str:
    if op.op_class == COMMUNICATION:
        if link is None:
            return "no interconnect figures for this GPU (ceilings/data/serving.csv)"
        if link.latency_s is None:
            return f"no all-reduce latency for its {link.name} (ceilings/data/serving.csv)"
        wire = op.nbytes["interconnect"] / link.bandwidth
        return AtRoof(wire, 0.0, wire, "interconnect", "interconnect")
    return time_at_roofs(roofs, op.flops, {LEVEL: op.total_bytes})


def _cost(op: Op, costs: Mapping[str, Cost], link: Link | None) -> Cost:
    """The op's class's Cost; an all-reduce without a fitted one pays the link's latency as its floor (a
    floor: no efficiency scales it), its bytes at the link's bandwidth."""
    if op.op_class == COMMUNICATION and op.op_class not in costs and link is not None:
        return Cost(link.latency_s or 0.0)
    return costs.get(op.op_class, AT_ROOF)


def place(roofs: Roofs, ops: Sequence[Op], phase: str, costs: Mapping[str, Cost] | None = None,
          link: Link | None = None) -> pd.DataFrame:
    """One row per op (PLACED_COLUMNS): its work, bound and time at the roofs, and its time at the Cost of its
    class (at the roof for a class without one). An op that cannot be placed has NaN times and says why."""
    costs = costs or {}
    rows = []
    for op in ops:
        at = _at(roofs, op, link)
        placed = not isinstance(at, str)
        cost = _cost(op, costs, link)
        flops, nbytes = op.total_flops, op.total_bytes
        rows.append({
            "phase": phase, "op": op.name, "op_class": op.op_class, "count": op.count,
            "roof": "+".join(k for k, v in op.flops.items() if v > 0) or
                    ("interconnect" if op.op_class == COMMUNICATION else "memory"),
            "flops": flops, "bytes": nbytes, "weights_bytes": op.nbytes.get("weights", 0.0),
            "kv_read_bytes": op.nbytes.get("kv_read", 0.0), "kv_write_bytes": op.nbytes.get("kv_write", 0.0),
            "activation_bytes": op.nbytes.get("activations", 0.0), "ai": flops / nbytes,
            "bound": at.bound if placed else math.nan, "compute_s": at.compute_s if placed else math.nan,
            "memory_s": at.memory_s if placed else math.nan, "time_at_roof_s": at.time_s if placed else math.nan,
            "floor_s": cost.floor_s, "efficiency": cost.efficiency,
            "time_s": cost.time(op, at.time_s) if placed else math.nan, "why": "" if placed else at})
    return pd.DataFrame(rows, columns=list(PLACED_COLUMNS))


def step_time(roofs: Roofs, ops: Sequence[Op], costs: Mapping[str, Cost] | None = None,
              link: Link | None = None) -> float:
    """The time of a forward pass: the sum of its ops' times (place's time_s), NaN when one is not placed."""
    total = 0.0
    for op in ops:
        at = _at(roofs, op, link)
        if isinstance(at, str):
            return math.nan
        total += _cost(op, costs or {}, link).time(op, at.time_s)
    return total


def phase_total(placed: pd.DataFrame, column: str) -> float:
    """A column summed over a phase's ops; NaN when any op lacks it (a partial sum would be a wrong number)."""
    return float(placed[column].sum(skipna=False))


@dataclass(frozen=True)
class Memory:
    """One GPU's memory as a server has it: `fraction` of what the GPU shows, less the workspace and the
    largest transient activations of one prompt's prefill (naive attention's scores, or the MLP's), holds the
    weights and the batch's KV cache at the end of the request (prompt + gen tokens a sequence)."""

    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float | None  # what the GPU shows
    usable_bytes: float | None  # fraction x capacity - workspace - transient
    transient_bytes: float
    fits: bool | None  # None: the GPU's memory is unknown
    max_batch: int | None  # sequences of prompt + gen tokens that fit beside the weights
    max_context: int | None  # tokens per sequence that fit at --batch (at most the model's max_context)
    context_capped: bool  # max_context is the model's max_position_embeddings, not the memory


def usd_per_million_tokens(gpu: TargetGpu, tp: int, tokens_per_s: float) -> float:
    """What a million output tokens cost at `tokens_per_s` on all `tp` GPUs at the GPU's price (it has one)."""
    return tp * gpu.usd_per_hour / 3600 / tokens_per_s * 1e6


def transient_bytes(model: Model, setup: Setup) -> float:
    """The activations one op instance of one prompt's prefill reads and writes at once, the largest of them:
    what must be free beside weights and KV cache while a prompt is prefilled (a server prefills a prompt, or a
    chunk, at a time; a sequence at a time here)."""
    ops = step_ops(model, replace(setup, batch=1), setup.prompt, 0)
    return max(op.nbytes.get("activations", 0.0) / op.count for op in ops)


def memory(model: Model, setup: Setup, capacity_bytes: float | None,
           fraction: float = DEFAULT_MEMORY_FRACTION) -> Memory:
    weights = weights_bytes(model, setup)
    tokens = setup.prompt + setup.gen
    kv = kv_cache_bytes(model, setup, tokens)
    transient = transient_bytes(model, setup)
    if capacity_bytes is None:
        return Memory(weights, kv, None, None, transient, None, None, None, False)
    usable = fraction * capacity_bytes - WORKSPACE_BYTES - transient
    room = usable - weights
    max_batch = max(0, math.floor(room / kv_cache_bytes(model, replace(setup, batch=1), tokens)))
    max_context = context_fit(model, setup, room)
    capped = model.max_context is not None and max_context > model.max_context
    return Memory(weights, kv, capacity_bytes, usable, transient, weights + kv <= usable, max_batch,
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
    """One GPU's prefill, decode, memory, crossover and cost for one model and setup (per GPU of --tp)."""

    gpu: TargetGpu
    setup: Setup
    prefill: pd.DataFrame  # placed ops of the prefill
    decode: pd.DataFrame  # placed ops of a decode step at context --prompt
    step_times: tuple[float, ...]  # every decode step, contexts prompt .. prompt + gen - 2 (Setup.decode_contexts)
    memory: Memory
    crossover_batch: int | None  # where the weight GEMMs turn compute-bound

    @property
    def ttft_s(self) -> float:
        """Time to first token: the prefill, which produces it."""
        return phase_total(self.prefill, "time_s")

    @property
    def first_step_s(self) -> float:
        """The decode step at context --prompt (the one the table shows, also when --gen 1 runs none)."""
        return phase_total(self.decode, "time_s")

    @property
    def mean_step_s(self) -> float:
        """Mean time of a decode step: the time per output token after the first (NaN when --gen 1)."""
        return math.fsum(self.step_times) / len(self.step_times) if self.step_times else math.nan

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput of the batch: a token per sequence per step."""
        return self.setup.batch / self.mean_step_s

    @property
    def request_s(self) -> float:
        """The whole request: the prefill and every decode step (end-to-end latency of a sequence)."""
        return self.ttft_s + math.fsum(self.step_times)

    @property
    def usd_per_million_tokens(self) -> float | None:
        """What a million output tokens cost at the GPU's price, for all --tp GPUs: the whole request over the
        batch x --gen tokens it produces; None without a price."""
        if self.gpu.usd_per_hour is None:
            return None
        return usd_per_million_tokens(self.gpu, self.setup.tp, self.setup.batch * self.setup.gen / self.request_s)

    @property
    def crossover_beyond_fit(self) -> bool:
        """The weight GEMMs' crossover lies beyond the largest batch that fits: decode stays memory-bound."""
        m = self.memory
        return self.crossover_batch is not None and m.max_batch is not None and self.crossover_batch > m.max_batch


def evaluate(model: Model, setup: Setup, gpu: TargetGpu, costs: Mapping[str, Mapping[str, Cost]] | None = None,
             memory_fraction: float = DEFAULT_MEMORY_FRACTION) -> Result:
    """The model's request on one GPU (one of --tp); `costs`: per phase, the Cost of each op class."""
    costs = costs or {}
    roofs, link = gpu.roofs, gpu.link
    prefill = place(roofs, step_ops(model, setup, setup.prompt, 0), "prefill", costs.get("prefill"), link)
    decode_costs = costs.get("decode")
    decode = place(roofs, step_ops(model, setup, 1, setup.prompt), "decode", decode_costs, link)
    steps = [phase_total(decode, "time_s")] if setup.gen > 1 else []
    steps += [step_time(roofs, step_ops(model, setup, 1, c), decode_costs, link)
              for c in setup.decode_contexts[1:]]
    return Result(gpu, setup, prefill, decode, tuple(steps), memory(model, setup, gpu.memory_bytes, memory_fraction),
                  crossover_batch(model, setup, roofs))


SWEEP_COLUMNS = ("gpu", "batch", "step_time_s", "tokens_per_s", "gemms", "fits")


def sweep_batches(limit: int) -> list[int]:
    """Powers of two from 1 to `limit` (and `limit` itself)."""
    batches = [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]
    return batches + ([limit] if batches[-1] != limit else [])


def batch_sweep(model: Model, setup: Setup, gpu: TargetGpu, batches: Sequence[int],
                costs: Mapping[str, Cost] | None = None,
                memory_fraction: float = DEFAULT_MEMORY_FRACTION) -> pd.DataFrame:
    """The decode step at context --prompt at each batch: its time, the batch's tokens/s, whether its weight
    GEMMs are compute- or memory-bound, and whether weights + KV cache (prompt + gen tokens a sequence) fit
    (None: memory unknown)."""
    rows = []
    for b in batches:
        at = replace(setup, batch=b)
        time_s = step_time(gpu.roofs, step_ops(model, at, 1, setup.prompt), costs, gpu.link)
        bound = gemms_compute_bound(model, setup, gpu.roofs, b)
        rows.append({"gpu": gpu.label, "batch": b, "step_time_s": time_s, "tokens_per_s": b / time_s,
                     "gemms": math.nan if bound is None else "compute" if bound else "memory",
                     "fits": memory(model, at, gpu.memory_bytes, memory_fraction).fits})
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


STEP_COLUMNS = ("gpu", "tokens", "context", "time_s", "time_at_roof_s", "time_per_token_s")


def steps_table(model: Model, setup: Setup, gpu: TargetGpu, steps: Sequence[tuple[int, int]],
                costs: Mapping[str, Cost] | None = None) -> pd.DataFrame:
    """Forward passes of T new tokens a sequence at context C (--step T:C), at the batch: a speculative
    decoding step verifying T - 1 draft tokens, or a chunk of T prompt tokens after C already prefilled. Time
    per token: the step over the batch x T tokens it yields when every draft is accepted (an upper bound on
    what speculation gives)."""
    rows = []
    for tokens, context in steps:
        placed = place(gpu.roofs, step_ops(model, setup, tokens, context), "step", costs, gpu.link)  # once
        time_s = phase_total(placed, "time_s")
        rows.append({"gpu": gpu.label, "tokens": tokens, "context": context, "time_s": time_s,
                     "time_at_roof_s": phase_total(placed, "time_at_roof_s"),
                     "time_per_token_s": time_s / (setup.batch * tokens)})
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS))

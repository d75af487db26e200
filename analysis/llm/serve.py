"""LLM serving on the step model: requests arrive, a scheduler batches them step by step as vLLM does by
default, and each step takes the time the roofs give its mix of prefill chunks and decodes (`--serve`).

The scheduler (vLLM's V1 engine, vllm/v1/core/sched/scheduler.py): continuous batching over a paged KV cache of
`block_size`-token blocks (one pool shared by the model's KV cache groups, a sliding-window group freeing the
blocks that slide out of its window: KvCache); each step spends a budget of `max_num_batched_tokens` on the
running requests first (a decode is one token, an unfinished prefill its next chunk) in the order they were
admitted, then admits waiting requests first come first served while at most `max_num_seqs` run and blocks are
free; a running request that needs a block when none is free preempts the one admitted last, whose blocks are
freed and which is recomputed from scratch (its prompt and the tokens it had produced) when it is admitted again.
Without chunked prefill a prompt is prefilled whole in a step of prefills alone, before decodes resume.

A request is `prompt` tokens known and `gen` to produce: a step computes the KV of the tokens it has not yet
computed (all of a prompt's, a chunk of them, or the one token produced last); a step that completes them
produces the next token. The first is the time to first token (TTFT); the times between a request's tokens are
its inter-token latencies (ITL), their mean its time per output token (TPOT).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ceilings.inputs import read_bytes
from ceilings.lazy import lazy
from common.errors import CeilingsError

from .models import Model
from .place import Cost, TargetGpu, memory, place, step_time, usd_per_million_tokens
from .work import Setup, attention_ops, batch_ops, check_context, kv_bytes_per_token

np = lazy("numpy")

# the limits of a server not told otherwise (vLLM's own defaults depend on its version and the GPU: docs/llm.md)
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_BATCHED_TOKENS = 8192
DEFAULT_BLOCK_SIZE = 16
PERCENTILES = (50, 90, 99)
WORKLOAD_COLUMNS = ("prompt_tokens", "output_tokens")  # and, optionally, arrival_s
MAX_REQUESTS = 1_000_000
MAX_WORKLOAD_BYTES = 256 << 20


@dataclass(frozen=True)
class Request:
    arrival_s: float
    prompt: int
    gen: int


@dataclass(frozen=True)
class Limits:
    """What a server is told: vLLM's --max-num-seqs, --max-num-batched-tokens, --block-size and whether it
    chunks prefills (--enable-chunked-prefill, on by default in its V1 engine)."""

    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    block_size: int = DEFAULT_BLOCK_SIZE
    chunked_prefill: bool = True


# ------------------------------------------------------------------------------------------------ traffic
def poisson(rate: float, lengths: Sequence[tuple[int, int]], seed: int) -> list[Request]:
    """Requests of `lengths` ((prompt, gen) each, in order) arriving as a Poisson process of `rate` a second:
    exponential gaps, the first request at time 0."""
    if not (math.isfinite(rate) and rate > 0):
        raise CeilingsError(f"--rate {rate}: give requests a second above 0")
    gaps = np.random.default_rng(seed).exponential(1 / rate, len(lengths))
    arrivals = np.concatenate([[0.0], np.cumsum(gaps[1:])])
    return [Request(float(t), p, g) for t, (p, g) in zip(arrivals, lengths)]


def read_workload(path: str, model: Model) -> tuple[list[tuple[int, int]], list[float] | None]:
    """A workload file: JSON lines or CSV with columns prompt_tokens, output_tokens and optionally arrival_s
    (seconds, non-decreasing). Its lengths and, where given, arrival times; a one-line error naming the line and
    field of anything else."""
    data = read_bytes(path, "workload file", MAX_WORKLOAD_BYTES + 1)
    if len(data) > MAX_WORKLOAD_BYTES:
        raise CeilingsError(f"{path}: over {MAX_WORKLOAD_BYTES >> 20} MiB; a workload is lengths a request")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CeilingsError(f"{path}: not UTF-8 text (byte {e.start}); give JSON lines or CSV") from None
    if text.lstrip().startswith("{"):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise CeilingsError(f"{path}:{number}: not a JSON object ({e.msg}); give one request a line") from None
            if not isinstance(row, dict):
                raise CeilingsError(f"{path}:{number}: not a JSON object; give one request a line")
            rows.append((number, row))
    else:
        reader = csv.DictReader(io.StringIO(text))
        missing = [c for c in WORKLOAD_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise CeilingsError(f"{path}: no column {', '.join(missing)} (has {', '.join(reader.fieldnames or [])}); "
                                f"give {', '.join(WORKLOAD_COLUMNS)} and optionally arrival_s")
        rows = [(number, row) for number, row in enumerate(reader, 2)]
        extra = next((number for number, row in rows if None in row), None)
        if extra is not None:
            raise CeilingsError(f"{path}:{extra}: more fields than the header names; give one request a line, "
                                f"{', '.join(reader.fieldnames)}")
    if not rows:
        raise CeilingsError(f"{path}: no requests")
    if len(rows) > MAX_REQUESTS:
        raise CeilingsError(f"{path}: {len(rows)} requests; at most {MAX_REQUESTS:,} are simulated")
    timed = any(row.get("arrival_s") not in (None, "") for _, row in rows)  # then every row must have one
    lengths, arrivals = [], []
    for number, row in rows:
        prompt, gen = (_count(row.get(c), path, number, c) for c in WORKLOAD_COLUMNS)
        check_context(model, prompt + gen, f"{path}:{number}: prompt_tokens + output_tokens")
        lengths.append((prompt, gen))
        if timed:
            arrivals.append(_seconds(row.get("arrival_s"), path, number, arrivals[-1] if arrivals else 0.0))
    return lengths, arrivals if timed else None


def _count(value, path: str, number: int, column: str) -> int:
    try:
        count = int(value) if isinstance(value, str) else value
    except ValueError:
        count = None
    if type(count) is not int or count < 1:
        raise CeilingsError(f"{path}:{number}: {column} {value!r}: give a whole number of tokens, 1 or more")
    return count


def _seconds(value, path: str, number: int, previous: float) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= previous):
        raise CeilingsError(f"{path}:{number}: arrival_s {value!r}: give seconds, finite and not before the "
                            f"previous request's ({previous:g})")
    return seconds


# ------------------------------------------------------------------------------------------- the KV cache
@dataclass(frozen=True)
class KvCache:
    """What a server has for the KV cache: `fraction` of the memory the GPU shows, less the weights, the
    activations of the largest step (a prefill of max_num_batched_tokens) and the workspace, in one pool of
    blocks shared by the KV cache groups, as vLLM's V1 engine lays it out (vllm/v1/core/kv_cache_utils.py,
    get_kv_cache_groups): a model of one attention type is one group of all its layers; one with full and
    sliding-window layers has groups of `group_layers` layers each (`full_groups` of full-attention layers,
    `window_groups` of windowed ones), and a block holds `block_size` tokens of one group's layers."""

    blocks: int
    block_size: int
    bytes_per_token: float
    usable_bytes: float
    full_groups: int = 1
    window_groups: int = 0
    window: int | None = None  # tokens; None: no layer slides
    group_layers: int | None = None  # layers a group holds (padded)

    @property
    def tokens(self) -> int:
        """vLLM's "GPU KV cache size: N tokens" (_report_kv_cache_config): the pool's blocks shared out evenly
        over the groups, in tokens; with one group every block is `block_size` tokens of every layer."""
        return self.blocks // (self.full_groups + self.window_groups) * self.block_size

    @property
    def layout(self) -> str:
        """How a pool with a sliding-window group counts (for the reports); empty without one."""
        if not self.window_groups:
            return ""
        return (f"vLLM's hybrid layout: {self.full_groups} full-attention and {self.window_groups} sliding-window "
                f"group(s) of {self.group_layers} layers share the blocks (the tokens: blocks // "
                f"{self.full_groups + self.window_groups} x {self.block_size}); a windowed group holds the blocks of "
                f"a request's last {self.window} tokens (all of a prompt chunk's while it is prefilled)")

    def held(self, computed: int, new: int) -> int:
        """The blocks a request holds, over all groups, while a step computes `new` tokens after its `computed`:
        a full-attention group every block up to the last token (FullAttentionManager); a sliding-window group
        the same less the whole blocks before its window, which KVCacheManager.allocate_slots frees
        (SlidingWindowManager.remove_skipped_blocks, get_num_skipped_tokens: computed - window + 1 tokens)
        before it allocates the step's blocks."""
        slots = -(-(computed + new) // self.block_size)
        skipped = max(0, computed - self.window + 1) // self.block_size if self.window_groups else 0
        return self.full_groups * slots + self.window_groups * (slots - skipped)

    def need(self, tokens: int, chunk: int) -> int:
        """The most blocks a request of `tokens` tokens can hold in chunks of up to `chunk` (vLLM's own bound at
        start-up, for a max_model_len of `tokens`: a sliding-window group holds at most the window less one
        plus a chunk, and a block more where the window starts inside one; SlidingWindowSpec.
        max_memory_usage_bytes in vllm/v1/kv_cache_interface.py)."""
        whole = -(-tokens // self.block_size)
        if not self.window_groups:
            return self.full_groups * whole
        windowed = -(-min(self.window - 1 + chunk, tokens) // self.block_size) + 1
        return self.full_groups * whole + self.window_groups * windowed


def load(run: dict) -> float | None:
    """A run's x: its clients in a closed loop (--concurrency), else its rate (None: a workload's own arrivals)."""
    return run["concurrency"] or run["rate"]


def closed_loop(serving: Sequence) -> bool:
    """Whether the GpuServing's runs are closed loops of clients (--concurrency) rather than rates."""
    return any(m["concurrency"] for s in serving for m in s.runs)


def kv_groups(model: Model) -> tuple[int, int, int]:
    """vLLM's KV cache groups of `model` (get_kv_cache_groups): full-attention groups, sliding-window groups, and
    layers a group. One attention type: one group of every layer; both (_get_kv_cache_groups_uniform_page_size):
    each type's layers cut into groups of the fewer type's count, or of the more numerous one's when that is
    under 1.5 times the fewer, the last group of a type padded to that size."""
    windowed = model.window_layers if model.sliding_window is not None else 0
    if windowed in (0, model.layers):
        return (0, 1, model.layers) if windowed else (1, 0, model.layers)
    counts = (model.layers - windowed, windowed)
    size = max(counts) if max(counts) < 1.5 * min(counts) else min(counts)
    return -(-counts[0] // size), -(-counts[1] // size), size


def kv_cache(model: Model, setup: Setup, gpu: TargetGpu, limits: Limits, fraction: float) -> KvCache:
    if gpu.memory_bytes is None:
        raise CeilingsError(f"{gpu.label}: its memory is unknown ({gpu.memory_source}): the KV cache cannot be "
                            f"sized; give a roofs file that records it or a datasheet name")
    # what the weights leave of the memory a server takes, beside the activations of its largest step
    held = memory(model, replace(setup, prompt=limits.max_num_batched_tokens), gpu.memory_bytes, fraction)
    usable = held.usable_bytes - held.weights_bytes
    per_token = kv_bytes_per_token(model, setup)
    full, windowed, size = kv_groups(model)
    # a block is a page of block_size tokens in each of a group's layers (get_num_blocks: memory // page // size)
    block_token = per_token * size / model.layers
    blocks = max(0, math.floor(usable / (limits.block_size * block_token)))
    return KvCache(blocks, limits.block_size, per_token, usable, full, windowed,
                   model.sliding_window if windowed else None, size)


# -------------------------------------------------------------------------------------------- step times
class StepClock:
    """The time of a step at the roofs (with the costs of its phase): the ops that depend only on the step's
    token count and the sequences it scores, cached by those, plus its attention over each sequence's context."""

    def __init__(self, model: Model, setup: Setup, gpu: TargetGpu, costs: Mapping[str, Mapping[str, Cost]]):
        self.model, self.setup, self.gpu, self.costs = model, setup, gpu, costs
        self._rest: dict[tuple[int, int, str], float] = {}

    def __call__(self, sequences: Sequence[tuple[int, int]], logits: int, prefill: bool) -> float:
        phase = "prefill" if prefill else "decode"
        costs, roofs, link = self.costs.get(phase), self.gpu.roofs, self.gpu.link
        tokens = sum(t for t, _ in sequences)
        key = (tokens, logits, phase)
        if key not in self._rest:
            whole = [(tokens, 0)]
            self._rest[key] = step_time(roofs, batch_ops(self.model, self.setup, whole, logits), costs, link) - \
                step_time(roofs, attention_ops(self.model, self.setup, whole), costs, link)
        return self._rest[key] + step_time(roofs, attention_ops(self.model, self.setup, sequences), costs, link)


# ------------------------------------------------------------------------------------------ the scheduler
@dataclass(eq=False)  # each request is itself: compared by identity
class _Running:
    request: Request
    index: int
    generated: int = 0  # output tokens produced
    computed: int = 0  # tokens whose KV is in the cache
    blocks: int = 0
    token_times: list[float] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.request.prompt + self.generated


@dataclass(frozen=True)
class Timeline:
    """Per step: the requests it ran and the KV blocks in use after it."""

    batch: tuple[int, ...]
    blocks_used: tuple[int, ...]


@dataclass(frozen=True)
class Served:
    """Every request's token times (the first is its TTFT's end), and what the server went through."""

    requests: tuple[Request, ...]
    token_times: tuple[tuple[float, ...], ...]
    preemptions: int
    timeline: Timeline


class _Scheduler:
    """The state between steps: requests waiting (arrived, or preempted: those first), running in admission
    order, and the free KV blocks."""

    def __init__(self, cache: KvCache, limits: Limits):
        self.cache, self.limits = cache, limits
        self.waiting: deque[_Running] = deque()
        self.running: list[_Running] = []
        self.free, self.preemptions = cache.blocks, 0

    def _blocks(self, seq: _Running, new: int) -> int:
        """The blocks `seq` needs beyond its own to compute `new` more tokens (fewer than none: its window freed
        more than the step takes)."""
        return self.cache.held(seq.computed, new) - seq.blocks

    def _preempt(self, seq: _Running) -> None:
        """Free its blocks; it is recomputed, prompt and produced tokens, when admitted again (first)."""
        self.running.remove(seq)
        self.free += seq.blocks
        seq.computed = seq.blocks = 0
        self.waiting.appendleft(seq)
        self.preemptions += 1

    def _take(self, seq: _Running, new: int, step: list) -> None:
        extra = self._blocks(seq, new)
        seq.blocks, self.free = seq.blocks + extra, self.free - extra
        step.append((seq, new))

    def step(self) -> list[tuple[_Running, int]]:
        """The (request, new tokens) of the next step; empty when nothing can run."""
        limits, step = self.limits, []
        budget = limits.max_num_batched_tokens
        if not limits.chunked_prefill and self.waiting:  # a step of whole prompts, before decodes resume
            budget = self._admit(budget, step, whole=True)
            if step:
                return step
        preempted = False
        for seq in list(self.running):  # running requests first, in admission order
            if budget == 0 or seq not in self.running:
                continue
            new = min(seq.length - seq.computed, budget)
            while self._blocks(seq, new) > self.free and self.running[-1] is not seq:
                self._preempt(self.running[-1])  # admitted after seq: not in this step yet
                preempted = True
            if self._blocks(seq, new) > self.free:  # the last admitted itself: it waits for blocks
                self._preempt(seq)
                preempted = True
                continue
            self._take(seq, new, step)
            budget -= new
        if limits.chunked_prefill and not preempted:  # then waiting requests, first come first served
            self._admit(budget, step, whole=False)
        return step

    def _admit(self, budget: int, step: list, whole: bool) -> int:
        while self.waiting and budget > 0 and len(self.running) < self.limits.max_num_seqs:
            seq = self.waiting[0]
            new = seq.length - seq.computed
            if whole and new > budget:
                break
            new = min(new, budget)
            if self._blocks(seq, new) > self.free:
                break
            self.running.append(self.waiting.popleft())
            self._take(seq, new, step)
            budget -= new
        return budget

    def finish(self, seq: _Running) -> None:
        self.running.remove(seq)
        self.free += seq.blocks


def simulate(requests: Sequence[Request], clock: Callable[[Sequence[tuple[int, int]], int, bool], float],
             cache: KvCache, limits: Limits, concurrency: int | None = None) -> Served:
    """Run `requests` through the scheduler; `clock(sequences, logits, prefill)` the time of a step over (new
    tokens, context) a sequence, `logits` of which produce a token, `prefill` when any computes a prompt. With
    `concurrency` the clients are a closed loop, as a benchmark at fixed concurrency runs them: that many requests
    arrive at 0, and each finishing one sends the next, in order (their own arrival times are not used)."""
    for r in requests:
        held = r.prompt + r.gen - 1  # the last token produced is never computed: its KV is never held
        need = cache.need(held, limits.max_num_batched_tokens)
        if need > cache.blocks:
            raise CeilingsError(f"a request of {r.prompt} + {r.gen} tokens needs {need} KV blocks; the cache holds "
                                f"{cache.blocks} ({cache.tokens:,} tokens): shorten it, or give the server more "
                                f"memory (--memory-fraction, --tp)")
        if not limits.chunked_prefill and held > limits.max_num_batched_tokens:
            raise CeilingsError(f"a request of {r.prompt} + {r.gen} tokens cannot be prefilled whole (recomputed "
                                f"after a preemption) within --max-num-batched-tokens "
                                f"{limits.max_num_batched_tokens}: raise it, or chunk prefills")
    requests = list(requests)
    closed = deque(range(concurrency, len(requests))) if concurrency else deque()  # sent as others finish
    if concurrency:
        requests = [replace(r, arrival_s=0.0) if i < concurrency else r for i, r in enumerate(requests)]
    pending = deque(sorted(range(min(concurrency or len(requests), len(requests))),
                           key=lambda i: requests[i].arrival_s))
    scheduler = _Scheduler(cache, limits)
    times: list[tuple[float, ...] | None] = [None] * len(requests)
    now, finished = 0.0, 0
    batches, used = [], []
    while finished < len(requests):
        while pending and requests[pending[0]].arrival_s <= now:
            i = pending.popleft()
            scheduler.waiting.append(_Running(requests[i], i))
        step = scheduler.step()
        if not step:  # idle, or waiting for blocks that only a finishing request frees
            if not pending:
                raise CeilingsError("the scheduler cannot run any request: no KV blocks free and none running; "
                                    "give the server more memory (--memory-fraction, --tp)")
            now = max(now, requests[pending[0]].arrival_s)
            continue
        produces = [seq.computed + new == seq.length for seq, new in step]
        took = clock([(new, seq.computed) for seq, new in step], sum(produces),
                     any(seq.computed + new < seq.length or new > 1 for seq, new in step))
        if not (math.isfinite(took) and took >= 0):
            raise CeilingsError(f"a step of {sum(new for _, new in step)} tokens has no time on these roofs (an op "
                                f"of it cannot be placed: run without --serve to see which and why)")
        now += took
        used.append(cache.blocks - scheduler.free)  # before the requests that finish free their blocks
        for (seq, new), token in zip(step, produces):
            seq.computed += new
            if not token:
                continue
            seq.generated += 1
            seq.token_times.append(now)
            if seq.generated == seq.request.gen:
                scheduler.finish(seq)
                times[seq.index] = tuple(seq.token_times)
                finished += 1
                if closed:  # its client sends the next request now
                    i = closed.popleft()
                    requests[i] = replace(requests[i], arrival_s=now)
                    pending.append(i)
        batches.append(len(step))
    return Served(tuple(requests), tuple(times), scheduler.preemptions,
                  Timeline(tuple(batches), tuple(used)))


# -------------------------------------------------------------------------------------------- the metrics
def _stats(values) -> dict[str, float | None]:
    values = np.asarray(values, dtype="float64")
    if not len(values):
        return {**{f"p{p}": None for p in PERCENTILES}, "mean": None}
    return {**{f"p{p}": float(np.percentile(values, p)) for p in PERCENTILES}, "mean": float(values.mean())}


def metrics(served: Served, kv: KvCache, rate: float | None, slo: tuple[float | None, float | None] = (None, None)
            ) -> dict:
    """The `serve` object of one rate: latency statistics in seconds (p50, p90, p99, mean), throughput over the
    time from the first arrival to the last token, the KV cache, the batch, preemptions; goodput with SLOs."""
    first = [t[0] - r.arrival_s for r, t in zip(served.requests, served.token_times)]
    e2e = [t[-1] - r.arrival_s for r, t in zip(served.requests, served.token_times)]
    # a request's time per output token after the first; None for a request of one token
    per_token = [(t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else None for t in served.token_times]
    tpot = [v for v in per_token if v is not None]
    itl = np.concatenate([np.diff(t) for t in served.token_times if len(t) > 1] or [np.empty(0)])
    start = min(r.arrival_s for r in served.requests)
    duration = max(t[-1] for t in served.token_times) - start
    tokens = sum(len(t) for t in served.token_times)
    out = {"rate": rate, "requests": len(served.requests), "duration_s": duration,
           "ttft_s": _stats(first), "tpot_s": _stats(tpot), "itl_s": _stats(itl), "e2e_s": _stats(e2e),
           "output_tokens_per_s": tokens / duration if duration > 0 else None,
           "requests_per_s": len(served.requests) / duration if duration > 0 else None,
           "kv_capacity_tokens": kv.tokens, "kv_capacity_blocks": kv.blocks,
           "kv_peak_blocks": max(served.timeline.blocks_used, default=0),
           "max_batch": max(served.timeline.batch, default=0),
           "mean_batch": float(np.mean(served.timeline.batch)) if served.timeline.batch else 0.0,
           "preemptions": served.preemptions}
    if kv.window_groups:  # the pool is shared by groups: the blocks count pages of a group's layers
        out["kv_groups"] = {"full_attention": kv.full_groups, "sliding_window": kv.window_groups,
                            "layers_each": kv.group_layers, "window": kv.window}
    slo_ttft, slo_tpot = slo
    if slo_ttft is not None or slo_tpot is not None:
        good = sum((slo_ttft is None or f <= slo_ttft) and (slo_tpot is None or p is None or p <= slo_tpot)
                   for f, p in zip(first, per_token))
        out["goodput_rps"] = good / duration if duration > 0 else None
    return out


def highest_rate(run: Callable[[float], dict], slo: tuple[float | None, float | None], low: float, high: float,
                 steps: int = 8) -> float | None:
    """The highest rate in [low, high] whose P99 TTFT and P99 TPOT meet the SLOs, by bisection on `run(rate)`
    (a metrics object); None when even `low` misses them."""
    def meets(rate: float) -> bool:
        m = run(rate)
        # no TPOT (every request of one token) meets a TPOT target, as goodput counts it
        return all(limit is None or m[key]["p99"] is None and key == "tpot_s" or
                   (m[key]["p99"] is not None and m[key]["p99"] <= limit)
                   for key, limit in zip(("ttft_s", "tpot_s"), slo))

    if not meets(low):
        return None
    if meets(high):
        return high
    for _ in range(steps):
        middle = (low + high) / 2
        low, high = (middle, high) if meets(middle) else (low, middle)
    return low



# ----------------------------------------------------------------------------------------- runs of a GPU
@dataclass(frozen=True)
class Traffic:
    """What arrives: request lengths, at each `rates` (Poisson, `seed`), from each number of closed-loop clients
    (`concurrencies`), or at the workload's own `arrivals`."""

    lengths: tuple[tuple[int, int], ...]
    rates: tuple[float, ...]
    arrivals: tuple[float, ...] | None = None
    seed: int = 0
    slo: tuple[float | None, float | None] = (None, None)  # P99 TTFT, P99 TPOT (s)
    concurrencies: tuple[int, ...] = ()


@dataclass(frozen=True)
class GpuServing:
    """One GPU's serving: its KV cache, a metrics object per rate (or one at the workload's arrivals), the
    highest rate meeting the SLOs at P99 (None: not searched, or even the lowest rate misses them) and what a
    million output tokens cost there."""

    gpu: TargetGpu
    kv: KvCache
    runs: tuple[dict, ...]
    slo_rate: float | None
    usd_per_million_tokens: float | None


def serve_gpu(model: Model, setup: Setup, gpu: TargetGpu, costs: Mapping[str, Mapping[str, Cost]], limits: Limits,
              traffic: Traffic, fraction: float) -> GpuServing:
    kv = kv_cache(model, setup, gpu, limits, fraction)
    clock = StepClock(model, setup, gpu, costs)
    if not math.isfinite(clock([(1, 0)], 1, False)):  # an op no roof places: say which before simulating
        placed = place(gpu.roofs, batch_ops(model, setup, [(1, 0)]), "decode", costs.get("decode"), gpu.link)
        why = placed[placed["why"] != ""].iloc[0]
        raise CeilingsError(f"{gpu.label}: {why['op']} cannot be placed ({why['why']}): --serve needs the time of "
                            f"every op of a step; measure that ceiling, or give the GPU's figures")

    @functools.cache  # the rate search meets the rates it is given, and the cost the rate it found
    def run(rate: float | None, concurrency: int | None = None) -> dict:
        if rate is not None:
            requests = poisson(rate, traffic.lengths, traffic.seed)
        else:  # the workload's arrivals, or a closed loop that sets them
            requests = [Request(t, p, g) for t, (p, g) in zip(traffic.arrivals or [0.0] * len(traffic.lengths),
                                                              traffic.lengths)]
        served = simulate(requests, clock, kv, limits, concurrency)
        return {**metrics(served, kv, rate, traffic.slo), "concurrency": concurrency}

    if traffic.arrivals is not None:
        runs = (run(None),)
    else:
        runs = tuple(run(rate) for rate in traffic.rates) + tuple(run(None, c) for c in traffic.concurrencies)
    slo_rate = highest_rate(run, traffic.slo, min(traffic.rates), max(traffic.rates)) \
        if any(v is not None for v in traffic.slo) and traffic.rates and traffic.arrivals is None else None
    usd = None
    if gpu.usd_per_hour is not None:
        at = run(slo_rate) if slo_rate is not None else max(runs, key=lambda m: m["output_tokens_per_s"] or 0)
        usd = usd_per_million_tokens(gpu, setup.tp, at["output_tokens_per_s"]) if at["output_tokens_per_s"] else None
    return GpuServing(gpu, kv, runs, slo_rate, usd)

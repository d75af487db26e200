"""The LLM roofline as text (a terminal table) and as JSON (base units; a missing value is null, never 0)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from analysis.llm.calibrate import Calibration
from analysis.llm.models import Model
from analysis.llm.place import Result
from analysis.llm.serve import closed_loop, load
from analysis.llm.work import CUDA_CORE, Setup, kv_bytes_per_token, parameters
from analysis.roofline import seconds, si
from ceilings.lazy import lazy
from common.text import aligned

pd = lazy("pandas")

ATTENTION_NAMES = {"flash": "FlashAttention (one fused kernel)", "naive": "naive attention (scores in DRAM)"}
HARDWARE_HEADER = ("GPU", "TTFT", "decode step", "per token", "tokens/s", "weights + KV", "memory", "usable",
                   "fits", "max batch", "max context", "GEMMs compute-bound from batch", "$/M tokens")
OP_HEADER = ("phase", "op", "x", "class", "roof", "FLOPs", "weights", "KV read", "KV write", "activations",
             "AI", "bound", "at roofs", "time", "share")
TEXT_CELLS = ("GPU", "fits", "phase", "op", "class", "roof", "bound")


def _num(value) -> float | int | bool | str | None:
    """A JSON value: NaN and None are null (missing), numpy scalars plain Python."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _na(value, fmt) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt(value)


def model_lines(model: Model, setup: Setup) -> list[str]:
    """What is modelled: the model, the setup, the weights and the KV cache."""
    mlp = (f"{model.experts} experts of {model.intermediate}, top-{model.experts_per_token}" if model.moe
           else f"dense {model.intermediate}")
    quant = f" (int4: group {setup.group_size}, fp16 scale + 4-bit zero a group)" if setup.weights == "int4" else ""
    contexts = setup.decode_contexts
    steps = (f"{setup.gen} output tokens a sequence: the prefill's, then {len(contexts)} decode steps (contexts "
             f"{contexts[0]} to {contexts[-1]})" if len(contexts) else f"{setup.gen} output token: the prefill's")
    tp = (f"; tensor parallelism over {setup.tp} GPUs (every figure per GPU but $/M tokens; 2 all-reduces a "
          f"layer)" if setup.tp > 1 else "")
    tp += (f"; expert parallelism over {setup.ep} GPUs ({model.experts // setup.ep} experts each"
           f"{f', all-to-all dispatch and combine of {setup.dp} attention groups' if setup.dp > 1 else ''})"
           if setup.ep > 1 else "")

    def count(n: int) -> str:
        return f"{n / 1e9:.3g} B" if n >= 1e9 else f"{n / 1e6:.3g} M"

    active = f" ({count(parameters(model, active=True))} active a token)" if model.moe else ""
    window = (f", a sliding window of {model.sliding_window} tokens on {model.window_layers} of them"
              if model.window_layers else "")
    return [f"{model.name}: {count(parameters(model))} parameters{active}, {model.layers} layers{window}, hidden "
            f"{model.hidden}, "
            f"{model.attention} attention ({model.heads} heads, {model.kv_heads} KV heads of {model.head_dim}), "
            f"gated MLP {mlp} ({model.activation}), {'RMSNorm' if model.norm == 'rms' else 'LayerNorm'}, "
            f"{'tied' if model.tied else 'untied'} LM head [{model.source}]",
            f"setup: batch {setup.batch}, prompt {setup.prompt} tokens, {steps}{tp}; weights {setup.weights}{quant}, "
            f"activations {setup.activations}, KV cache "
            f"{setup.kv_cache}; {ATTENTION_NAMES[setup.attention]}; GEMMs on tensor.{setup.gemm_type}, CUDA-core "
            f"ops on {CUDA_CORE}",
            f"KV cache: {si(kv_bytes_per_token(model, setup), 'B')} a token of a sequence"]


def hardware_rows(results: Sequence[Result]) -> list[list[str]]:
    rows = []
    for r in results:
        m = r.memory
        fits = {True: "yes", False: "NO", None: "unknown"}[m.fits]
        crossover = _na(r.crossover_batch, str) + (" (beyond max batch)" if r.crossover_beyond_fit else "")
        rows.append([r.gpu.label, _na(r.ttft_s, seconds), _na(r.first_step_s, seconds), _na(r.mean_step_s, seconds),
                     _na(r.tokens_per_s, lambda v: f"{v:.4g}"), si(m.weights_bytes + m.kv_cache_bytes, "B"),
                     _na(m.capacity_bytes, lambda v: si(v, "B")), _na(m.usable_bytes, lambda v: si(v, "B")), fits,
                     _na(m.max_batch, str), _na(m.max_context, str) + (" (model max)" if m.context_capped else ""),
                     crossover, _na(r.usd_per_million_tokens, lambda v: f"{v:.3g}")])
    return rows


def op_rows(result: Result) -> list[list[str]]:
    rows = []
    for placed in (result.prefill, result.decode):
        total = placed["time_s"].sum(skipna=False)
        for o in placed.itertuples():
            rows.append([o.phase, o.op, str(o.count), o.op_class, o.roof, si(o.flops, "FLOP"),
                         si(o.weights_bytes, "B"), si(o.kv_read_bytes, "B"), si(o.kv_write_bytes, "B"),
                         si(o.activation_bytes, "B"), f"{o.ai:.3g}", _na(o.bound, str),
                         _na(o.time_at_roof_s, seconds),
                         _na(o.time_s, seconds) + ("*" if o.efficiency != 1 or o.floor_s else ""),
                         _na(o.time_s / total, lambda v: f"{v:.1%}")])
    return rows


def calibration_lines(cal: Calibration) -> list[str]:
    header = ("class", "kernels", "expected", "measured", "at roofs", "floor", "efficiency", "note")
    rows = [[c.op_class, f"{c.kernels:g}", f"{c.expected:g}", _na(c.measured_s, seconds), _na(c.at_roof_s, seconds),
             _na(c.floor_s, seconds), _na(c.efficiency, lambda v: f"{v:.1%}"), c.note]
            for c in cal.table.itertuples()]
    return [f"calibration: {cal.phase} profile against the roofs of {cal.gpu}: measured = kernels x floor + time at "
            f"the roofs / efficiency, per class (kernels: a step's in the profile; expected: the model's ops); "
            f"applied to the {cal.phase} ops of every GPU", aligned(header, rows, left=TEXT_CELLS)]


def floor_text(result: Result, floors: bool) -> str:
    """What latency floor a kernel the GPU's times include (analysis.llm's --floors / --no-floors)."""
    if not floors:
        return "no latency floor a kernel (--no-floors): times at the roofs"
    measured = "its launch.stream" if result.gpu.roofs.launch_floor is not None else "the default"
    return (f"latency floor {seconds(result.gpu.roofs.floor[0])} a kernel ({measured}) of each class no profile "
            f"calibrated (--no-floors drops it)")


def render_text(model: Model, setup: Setup, results: Sequence[Result], calibration: Calibration | None = None,
                sweep: pd.DataFrame | None = None, steps: pd.DataFrame | None = None, *, floors: bool = True) -> str:
    """Model and setup, the GPUs side by side, the calibration, the batch sweep, then each GPU's ops."""
    out = model_lines(model, setup) + [""]
    out += [f"{r.gpu.label}: roofs {r.gpu.roofs.provenance}; memory {r.gpu.memory_source}; {floor_text(r, floors)}"
            for r in results]
    out += ["", "times with the floors said above (*: above the roof, by a latency floor a kernel or a fitted "
            "efficiency); per token: the mean "
            f"decode step; tokens/s of the batch; TTFT = the prefill; weights + the KV cache at "
            f"{setup.prompt + setup.gen} tokens a sequence against the usable memory (--memory-fraction of what the "
            f"GPU shows, less workspace and a prompt's activations); GEMMs compute-bound from batch: where decode's "
            f"weight GEMMs cross the ridge (attention at a context never does)",
            aligned(HARDWARE_HEADER, hardware_rows(results), left=TEXT_CELLS)]
    if calibration is not None:
        out += [""] + calibration_lines(calibration)
    if sweep is not None:
        rows = [[r.gpu, str(r.batch), _na(r.step_time_s, seconds), _na(r.tokens_per_s, lambda v: f"{v:.4g}"),
                 _na(r.gemms, str), {True: "yes", False: "NO", None: "unknown"}[r.fits]]
                for r in sweep.itertuples()]
        out += ["", f"batch sweep: the decode step at context {setup.prompt}",
                aligned(("GPU", "batch", "step", "tokens/s", "GEMMs", "fits"), rows, left=TEXT_CELLS)]
    if steps is not None:
        rows = [[r.gpu, str(r.tokens), str(r.context), _na(r.time_s, seconds), _na(r.time_at_roof_s, seconds),
                 _na(r.time_per_token_s, seconds)] for r in steps.itertuples()]
        out += ["", f"steps of T tokens a sequence at context C, batch {setup.batch} (speculative decoding: T - 1 "
                    f"drafts verified, the draft model's own steps not counted; chunked prefill: a chunk after C); "
                    f"per token: if every token is kept",
                aligned(("GPU", "T", "C", "step", "at roofs", "per token"), rows, left=TEXT_CELLS)]
    for r in results:
        out += ["", f"ops on {r.gpu.label} (x: instances, all of them in each number; decode: its first step)",
                aligned(OP_HEADER, op_rows(r), left=TEXT_CELLS)]
    return "\n".join(out) + "\n"


def serving_text(serving: Sequence) -> str:
    """--serve's tables: per GPU its KV cache, then a row per rate (latency percentiles, throughput, batch)."""
    def ms(stats: dict, p: str) -> str:
        return _na(stats[p], lambda v: f"{v * 1e3:.1f}")

    out = []
    for s in serving:
        kv = s.kv
        head = (f"serving on {s.gpu.label}: KV cache {kv.tokens:,} tokens in {kv.blocks:,} blocks of "
                f"{kv.block_size} ({si(kv.bytes_per_token, 'B')} a token, {si(kv.usable_bytes, 'B')} usable"
                f"{'; ' + kv.layout if kv.layout else ''})")
        closed = closed_loop((s,))
        rows = [[_na(load(m), lambda v: f"{v:g}"),
                 ms(m["ttft_s"], "p50"), ms(m["ttft_s"], "p99"), ms(m["tpot_s"], "p50"), ms(m["tpot_s"], "p99"),
                 ms(m["itl_s"], "p99"), ms(m["e2e_s"], "p50"), ms(m["e2e_s"], "p99"),
                 _na(m["output_tokens_per_s"], lambda v: f"{v:,.0f}"), _na(m["requests_per_s"], lambda v: f"{v:.3g}"),
                 str(m["max_batch"]), str(m["preemptions"])]
                + ([_na(m.get("goodput_rps"), lambda v: f"{v:.3g}")] if "goodput_rps" in m else [])
                for m in s.runs]
        header = ("clients" if closed else "rate/s", "TTFT p50 ms", "p99", "TPOT p50 ms", "p99", "ITL p99 ms",
                  "E2E p50 ms", "p99", "out tok/s", "req/s", "max batch", "preempted") + \
            (("goodput/s",) if "goodput_rps" in s.runs[0] else ())
        out += ["", head, aligned(header, rows, left=TEXT_CELLS)]
        if s.slo_rate is not None or any("goodput_rps" in m for m in s.runs):
            out.append(f"highest rate meeting the P99 SLOs (within the --rate values given): "
                       f"{_na(s.slo_rate, lambda v: f'{v:.3g} requests/s')}")
        if s.usd_per_million_tokens is not None:
            out.append(f"cost: ${s.usd_per_million_tokens:.3g} per million output tokens (all --tp GPUs, at "
                       f"{'that rate' if s.slo_rate is not None else 'the highest throughput simulated'})")
    return "\n".join(out) + "\n"


def _serving_json(s) -> dict:
    return {"kv_capacity_tokens": s.kv.tokens, "kv_capacity_blocks": s.kv.blocks, "block_size": s.kv.block_size,
            "kv_bytes_per_token": s.kv.bytes_per_token, "kv_usable_bytes": s.kv.usable_bytes,
            "slo_rate_rps": s.slo_rate, "usd_per_million_output_tokens": s.usd_per_million_tokens}


def to_json(model: Model, setup: Setup, results: Sequence[Result], calibration: Calibration | None = None,
            sweep: pd.DataFrame | None = None, warnings: Sequence[str] = (), steps: pd.DataFrame | None = None,
            *, floors: bool = True, serving: Sequence | None = None) -> dict:
    """Everything in base units (s, B, FLOP); per GPU the prefill, decode, memory, cost and per-op rows, and with
    --serve its `serve` runs (a metrics object per rate) and `serving` summary."""
    gpus = []
    for i, r in enumerate(results):
        m = r.memory
        ops = pd.concat([r.prefill, r.decode], ignore_index=True)
        gpus.append({
            "gpu": r.gpu.label, "roofs": r.gpu.spec, "roofs_source": r.gpu.roofs.provenance,
            "measured_roofs": r.gpu.roofs.measured, "launch_floor_s": r.gpu.roofs.floor[0] if floors else None,
            "prefill": {"tokens": setup.batch * setup.prompt, "flops": float(r.prefill["flops"].sum()),
                        "bytes": float(r.prefill["bytes"].sum()), "time_s": _num(r.ttft_s)},
            "decode": {"steps": len(setup.decode_contexts), "first_step_time_s": _num(r.first_step_s),
                       "mean_time_per_token_s": _num(r.mean_step_s), "tokens_per_s": _num(r.tokens_per_s),
                       "first_step_flops": float(r.decode["flops"].sum()),
                       "first_step_bytes": float(r.decode["bytes"].sum()),
                       "weight_gemms_compute_bound_from_batch": r.crossover_batch,
                       "crossover_beyond_max_batch": r.crossover_beyond_fit},
            "memory": {"weights_bytes": m.weights_bytes, "kv_cache_bytes": m.kv_cache_bytes,
                       "capacity_bytes": m.capacity_bytes, "capacity_source": r.gpu.memory_source, "fits": m.fits,
                       "usable_bytes": m.usable_bytes, "transient_bytes": m.transient_bytes,
                       "max_batch": m.max_batch, "max_context": m.max_context,
                       "max_context_is_model_max": m.context_capped},
            "cost": None if r.gpu.usd_per_hour is None else {
                "usd_per_hour": r.gpu.usd_per_hour, "usd_per_million_tokens": _num(r.usd_per_million_tokens)},
            "ops": [{k: _num(v) for k, v in row.items()} for row in ops.to_dict("records")],
            **({"serve": list(serving[i].runs), "serving": _serving_json(serving[i])} if serving else {})})
    return {
        "model": {"name": model.name, "source": model.source, "parameters": parameters(model),
                  "active_parameters": parameters(model, active=True),
                  "layers": model.layers, "hidden": model.hidden, "heads": model.heads, "kv_heads": model.kv_heads,
                  "head_dim": model.head_dim, "intermediate": model.intermediate, "vocab": model.vocab,
                  "experts": model.experts, "experts_per_token": model.experts_per_token, "tied": model.tied},
        "setup": {"batch": setup.batch, "prompt": setup.prompt, "gen": setup.gen, "weights": setup.weights,
                  "activations": setup.activations, "kv_cache": setup.kv_cache, "attention": setup.attention,
                  "group_size": setup.group_size if setup.weights == "int4" else None, "tp": setup.tp,
                  "ep": setup.ep,
                  "gemm_roof": f"tensor.{setup.gemm_type}", "cuda_core_roof": CUDA_CORE, "latency_floors": floors},
        "gpus": gpus,
        "calibration": None if calibration is None else {
            "phase": calibration.phase, "gpu": calibration.gpu,
            "classes": [{k: _num(v) for k, v in row.items()} for row in calibration.table.to_dict("records")]},
        "sweep": None if sweep is None else [{k: _num(v) for k, v in row.items()}
                                             for row in sweep.to_dict("records")],
        "steps": None if steps is None else [{k: _num(v) for k, v in row.items()} for row in steps.to_dict("records")],
        "warnings": list(warnings),
    }

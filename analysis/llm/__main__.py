"""`python -m analysis.llm --model NAME|config.json --roofs ROOFS.json|DATASHEET-NAME ...`: an LLM's prefill and
decode, op by op, on measured roofs (or datasheet figures), on one GPU or several side by side, calibrated by a
real profile with --calibrate. See docs/llm.md."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace

from analysis.llm.calibrate import Calibration, Profile, calibrate
from analysis.llm.models import SHIPPED, Model, load_model
from analysis.llm.place import (
    COMMUNICATION,
    DEFAULT_MEMORY_FRACTION,
    DEFAULT_SWEEP_MAX,
    MAX_BATCH,
    WORKSPACE_BYTES,
    Cost,
    Result,
    TargetGpu,
    batch_sweep,
    evaluate,
    gpu_of,
    place,
    steps_table,
    sweep_batches,
)
from analysis.llm.report import render_text, serving_text, to_json
from analysis.llm.serve import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    Limits,
    Traffic,
    read_workload,
    serve_gpu,
)
from analysis.llm.work import (
    ACTIVATION_DTYPES,
    ATTENTION_KINDS,
    DEFAULT_GROUP_SIZE,
    KV_DTYPES,
    OP_CLASSES,
    PHASES,
    TP_SIZES,
    WEIGHT_DTYPES,
    Setup,
    check_context,
    check_setup,
    step_ops,
)
from analysis.readers.registry import reads
from analysis.roofline import DEFAULT_LAUNCH_FLOOR_S, device_warning, si, unknown_device_warning
from analysis.roofline.inputs import check_outputs, read_kernels
from ceilings.inputs import add_max_inflated
from ceilings.lazy import lazy
from common.atomic import STDOUT, Outputs
from common.errors import CeilingsError, cli_entry
from common.warn import add_verbose, print_warnings

pd = lazy("pandas")

PROG = "python -m analysis.llm"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="An LLM's prefill (time to first token) and decode steps (time per token), op by "
        "op, placed on measured roofs or datasheet figures: latency, tokens/s, memory fit, the batch where decode "
        "turns compute-bound and the cost of a token, several GPUs side by side; --calibrate applies the "
        "efficiencies a real profile measured.",
        epilog="Times are the roofs' (the least the work needs on that GPU) plus a latency floor a kernel (the "
        "roofs file's launch.stream, else the default; --no-floors: at the roofs alone), or, for the classes "
        "--calibrate fitted, a floor and an efficiency per op class. Conventions (vLLM's "
        "benchmark): --gen G output tokens a sequence, the first from the prefill (TTFT), then G - 1 decode "
        "steps; 'per token' is the mean decode step (ITL); tokens/s is the batch over that mean; $/M tokens is "
        "the whole request (prefill + decode steps) on all --tp GPUs over the batch x G tokens produced. "
        "docs/llm.md says what is counted and what is not.")
    p.add_argument("--model", metavar="NAME|config.json",
                   help="a Hugging Face config.json (or its folder), or a shipped name (--list-models), any case")
    p.add_argument("--list-models", action="store_true", help="list the shipped models and exit")
    p.add_argument("--roofs", action="append", default=[], metavar="ROOFS.json|NAME",
                   help="a roofs file from ceilings.measure or a datasheet name ('H100 SXM'); repeat to compare GPUs")
    p.add_argument("--batch", type=int, default=1, help="sequences decoded together (default 1)")
    p.add_argument("--prompt", type=int, default=2048, help="prompt tokens a sequence (default 2048)")
    p.add_argument("--gen", type=int, default=256,
                   help="output tokens a sequence (vLLM's output_len): the first from the prefill, then --gen - 1 "
                        "decode steps (default 256)")
    p.add_argument("--tp", type=int, default=1, choices=TP_SIZES,
                   help="tensor-parallel GPUs of each --roofs kind: weights, KV heads and FLOPs split, two "
                        "all-reduces a layer on the GPU's interconnect (default 1)")
    p.add_argument("--ep", type=int, default=1, choices=TP_SIZES,
                   help="expert-parallel GPUs (MoE): each holds 1/N of the routed experts whole, attention split by "
                        "--tp; N a multiple of --tp, N / tp attention groups of --batch each (default 1: experts "
                        "split by --tp)")
    p.add_argument("--memory-fraction", type=float, default=DEFAULT_MEMORY_FRACTION, metavar="F",
                   help=f"share of the GPU's memory the server takes, as vLLM's gpu_memory_utilization (default "
                        f"{DEFAULT_MEMORY_FRACTION})")
    p.add_argument("--floors", action=argparse.BooleanOptionalAction, default=True,
                   help=f"a latency floor on every kernel of a class no profile calibrated: the roofs file's "
                        f"launch.stream ceiling, else {DEFAULT_LAUNCH_FLOOR_S * 1e6:g} us (docs/llm.md gives its "
                        f"source); on by default, --no-floors gives the times at the roofs alone")
    p.add_argument("--weights", choices=WEIGHT_DTYPES,
                   help="weight type of the decoder layers' matrices (default: --activations)")
    p.add_argument("--activations", choices=ACTIVATION_DTYPES, default="bf16", help="default bf16")
    p.add_argument("--kv-cache", choices=KV_DTYPES, help="KV-cache type (default: --activations)")
    p.add_argument("--group-size", type=int, default=DEFAULT_GROUP_SIZE,
                   help=f"int4 quantisation group (default {DEFAULT_GROUP_SIZE})")
    p.add_argument("--attention", choices=ATTENTION_KINDS, default="flash",
                   help="flash: one fused kernel (default); naive: scores and softmax through DRAM")
    p.add_argument("--price", action="append", default=[], metavar="GPU=USD_PER_HOUR",
                   help="a GPU's price per hour (GPU as given to --roofs, or its device name): cost per million "
                        "generated tokens")
    p.add_argument("--step", action="append", default=[], metavar="T:C",
                   help="also a forward pass of T tokens a sequence at context C: speculative decoding (T - 1 "
                        "drafts verified at once) or a chunk of a chunked prefill; repeat for several")
    p.add_argument("--sweep", action="store_true", help="print the batch sweep of the decode step")
    p.add_argument("--sweep-max", type=int, default=DEFAULT_SWEEP_MAX, metavar="N",
                   help=f"largest batch of the sweep (powers of two up to it; default {DEFAULT_SWEEP_MAX})")
    p.add_argument("--sweep-plot", metavar="FILE", help="the batch-sweep chart: .png, .svg or .pdf")
    p.add_argument("--calibrate", nargs="+", action="append", metavar="PROFILE",
                   help="ncu / nsys / torch-trace profile of a real prefill or decode step of this model and setup; "
                        "repeat with --calibrate-batch for profiles at other batches (floor and efficiency fitted "
                        f"to all); {reads()}")
    add_max_inflated(p)  # of a gzip'd --calibrate profile
    p.add_argument("--calibrate-batch", type=int, action="append", metavar="B",
                   help="the batch each --calibrate profile ran at, in their order (default --batch)")
    p.add_argument("--calibrate-phase", choices=PHASES, default="decode",
                   help="what the profile ran: the prefill, or a decode step at context --prompt (default decode)")
    p.add_argument("--calibrate-steps", type=int, default=1, metavar="N",
                   help="forward passes the profile holds (default 1): its times are divided by N")
    p.add_argument("--calibrate-on", metavar="ROOFS.json|NAME",
                   help="roofs of the GPU the profile ran on (default: the first --roofs)")
    serve = p.add_argument_group("serving (--serve): requests, a scheduler as vLLM's, latency percentiles")
    serve.add_argument("--serve", action="store_true",
                       help="simulate serving: requests arrive (Poisson at --rate, or a --workload), are batched "
                            "step by step as vLLM's scheduler does, each step at its roofs time; TTFT, TPOT, ITL, "
                            "E2E percentiles, throughput, KV-cache capacity, preemptions")
    serve.add_argument("--rate", type=float, action="append", default=[], metavar="QPS",
                       help="requests a second, Poisson arrivals; repeat for a sweep")
    serve.add_argument("--concurrency", type=int, action="append", default=[], metavar="N",
                       help="closed-loop clients instead of --rate: N requests at once, each finishing one sending "
                            "the next, as a fixed-concurrency benchmark runs; repeat for a sweep")
    serve.add_argument("--requests", type=int, default=1000, metavar="N",
                       help="requests simulated at each rate, of --prompt and --gen tokens (default 1000)")
    serve.add_argument("--workload", metavar="FILE", help="JSON lines or CSV of prompt_tokens, output_tokens and "
                       "optionally arrival_s (then no --rate): the requests' lengths, instead of --prompt/--gen")
    serve.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrivals (default 0)")
    serve.add_argument("--max-num-seqs", type=int, default=DEFAULT_MAX_NUM_SEQS, metavar="N",
                       help=f"requests running at once, as vLLM's (default {DEFAULT_MAX_NUM_SEQS})")
    serve.add_argument("--max-num-batched-tokens", type=int, default=DEFAULT_MAX_BATCHED_TOKENS, metavar="N",
                       help=f"tokens a step computes, as vLLM's (default {DEFAULT_MAX_BATCHED_TOKENS})")
    serve.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                       help=f"tokens a KV-cache block (default {DEFAULT_BLOCK_SIZE})")
    serve.add_argument("--chunked-prefill", action=argparse.BooleanOptionalAction, default=True,
                       help="prefill chunks batched with decodes (vLLM V1's default); --no-chunked-prefill: whole "
                            "prompts in steps of their own")
    serve.add_argument("--slo-ttft", type=float, metavar="S", help="P99 time-to-first-token target, seconds")
    serve.add_argument("--slo-tpot", type=float, metavar="S", help="P99 time-per-output-token target, seconds: "
                       "with --slo-ttft, the goodput and the highest --rate (searched between the lowest and "
                       "highest given) that meets both")
    serve.add_argument("--serve-plot", metavar="FILE", help="latency percentiles against rate, a line per GPU: "
                       ".png, .svg or .pdf")
    p.add_argument("--json", metavar="FILE", help="everything as JSON ('-': standard output)")
    p.add_argument("-o", "--output", metavar="FILE", help="roofline of the ops, a panel per GPU: .png, .svg or .pdf")
    p.add_argument("--html", metavar="FILE.html", help="one self-contained interactive report: the ops per GPU, "
                   "the batch sweep (with --sweep), a summary")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    add_verbose(p)
    return p


def _setup(args: argparse.Namespace) -> Setup:
    return Setup(batch=args.batch, prompt=args.prompt, gen=args.gen, weights=args.weights or args.activations,
                 activations=args.activations, kv_cache=args.kv_cache or args.activations, attention=args.attention,
                 group_size=args.group_size, tp=args.tp, ep=args.ep)


def _steps(specs: Sequence[str], model: Model) -> list[tuple[int, int]]:
    """--step T:C as (tokens, context); a one-line error for a malformed one or one past the model's context."""
    out = []
    for spec in specs:
        tokens, sep, context = spec.partition(":")
        try:
            t, c = int(tokens), int(context)
        except ValueError:
            t = c = -1
        if not sep or t < 1 or c < 0:
            raise CeilingsError(f"--step {spec}: give TOKENS:CONTEXT, e.g. 5:2048 (4 drafts verified at context "
                                f"2048) or 512:1024 (a prefill chunk of 512 after 1024 tokens)")
        check_context(model, t + c, f"--step {spec}")
        out.append((t, c))
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("-", " ").replace("_", " ").split())


def _priced(gpus: list[TargetGpu], prices: Sequence[str]) -> list[TargetGpu]:
    """The GPUs with the prices of --price GPU=USD, GPU matched to a --roofs spec or device name (any case)."""
    for item in prices:
        name, sep, value = item.rpartition("=")
        try:
            usd = float(value)
        except ValueError:
            usd = math.nan
        if not sep or not name.strip() or not usd > 0 or not math.isfinite(usd):
            raise CeilingsError(f"--price {item}: give GPU=USD_PER_HOUR with a positive price, e.g. 'H100 SXM=2.5'")
        hits = [i for i, g in enumerate(gpus) if _norm(name) in (_norm(g.spec), _norm(g.roofs.device))]
        if not hits:
            raise CeilingsError(f"--price {item}: {name!r} is none of the --roofs GPUs "
                                f"({'; '.join(g.spec for g in gpus)}); name one as given to --roofs")
        for i in hits:
            gpus[i] = replace(gpus[i], usd_per_hour=usd)
    return gpus


def _calibration(args, model: Model, setup: Setup, gpus: list[TargetGpu], warnings: list[str]) -> Calibration:
    """The floors and efficiencies fitted to the profiles of --calibrate-phase on the --calibrate-on GPU."""
    if args.calibrate_steps < 1:
        raise CeilingsError(f"--calibrate-steps {args.calibrate_steps}: must be 1 or more")
    batches = args.calibrate_batch or [setup.batch] * len(args.calibrate)
    if len(batches) != len(args.calibrate):
        raise CeilingsError(f"--calibrate-batch: {len(batches)} given for {len(args.calibrate)} --calibrate "
                            f"profiles; give one per profile, in their order")
    spec = args.calibrate_on or args.roofs[0]
    home = next((g for g in gpus if g.spec == spec), None) or gpu_of(spec)
    phase, profiles = args.calibrate_phase, []
    for files, batch in zip(args.calibrate, batches):
        if batch < 1:
            raise CeilingsError(f"--calibrate-batch {batch}: must be 1 or more")
        kernels = read_kernels(files, max_inflated=args.max_inflated)
        if not kernels["time_s"].notna().any():
            raise CeilingsError(f"--calibrate {' '.join(files)}: no kernel has a time (gpu__time_duration.sum); "
                                f"profile with python -m analysis.profile, or give an nsys or torch trace")
        gpus_seen = kernels.attrs.get("gpus", [])
        warnings += [w for w in (device_warning(home.roofs, gpus_seen, "every efficiency compares the profile with "
                                                "another GPU's roofs; give --calibrate-on the roofs of the "
                                                "profiled GPU"), unknown_device_warning(home.roofs, gpus_seen)) if w]
        warnings += [f"--calibrate: {w}" for w in kernels.attrs.get("warnings", [])]
        at = replace(setup, batch=batch)
        ops = step_ops(model, at, setup.prompt, 0) if phase == "prefill" else step_ops(model, at, 1, setup.prompt)
        profiles.append(Profile(kernels, place(home.roofs, ops, phase, link=home.link), args.calibrate_steps,
                                f"{' '.join(files)} (batch {batch})"))
    cal = calibrate(profiles, phase, home.label)
    other = cal.kernels[cal.kernels["op_class"] == "other"]
    if len(other):
        names = ", ".join(sorted(str(k)[:60] for k in other["kernel"])[:5])
        warnings.append(f"--calibrate: {len(other)} kernel(s) match no class pattern and are left out: {names}")
    warnings += [f"--calibrate: {w}" for w in cal.warnings]
    for row in cal.table.itertuples():
        if not row.applied and row.op_class in OP_CLASSES and row.expected:  # say why it stays at the roof
            warnings.append(f"--calibrate: {row.op_class}: {row.note}")
        elif row.applied and row.note != "applied":
            warnings.append(f"--calibrate: {row.op_class}: {row.note}")
    return cal


def _costs(args, calibration: Calibration | None, gpu: TargetGpu) -> dict[str, dict[str, Cost]]:
    """Per phase, each class's Cost on `gpu`: the calibrated ones for the profiled phase, --floors' floor for
    the other classes (its roofs' launch floor: measured, else the default; not the all-reduces: their latency
    is the interconnect's), else at the roof."""
    floor = gpu.roofs.floor[0]
    floors = {c: Cost(floor) for c in OP_CLASSES if c != COMMUNICATION} if args.floors else {}
    costs = {phase: dict(floors) for phase in PHASES}
    if calibration is not None:
        costs[calibration.phase].update(calibration.costs)
    return costs


def _warnings(model: Model, results: Sequence[Result], fraction: float) -> list[str]:
    out = []
    for r in results:
        g, m = r.gpu, r.memory
        if not g.roofs.measured:
            out.append(f"{g.label}: the roofs are {g.roofs.provenance}: every time is against these figures, not "
                       f"what a measured GPU reaches")
        if m.fits is False:
            out.append(f"{g.label}: weights + KV cache ({si(m.weights_bytes + m.kv_cache_bytes, 'B')}) exceed the "
                       f"{si(m.usable_bytes, 'B')} a server has of it (--memory-fraction {fraction:g} of "
                       f"{si(m.capacity_bytes, 'B')}, less {si(WORKSPACE_BYTES, 'B')} of workspace and "
                       f"{si(m.transient_bytes, 'B')} of a prompt's activations): its times assume they fit")
        elif m.fits is None:
            out.append(f"{g.label}: memory {g.memory_source}: fit, max batch and max context are unknown")
        unplaced = pd.concat([r.prefill, r.decode])
        unplaced = unplaced[unplaced["why"] != ""]
        for why, group in unplaced.groupby("why", sort=False):  # one line per reason, not per op
            ops = ", ".join(dict.fromkeys(group["op"]))
            out.append(f"{g.label}: {ops} not placed ({why}): the {' and '.join(dict.fromkeys(group['phase']))} "
                       f"totals are n/a; measure that ceiling with python -m ceilings.measure, or choose types the "
                       f"roofs have (--activations, --weights)")
        if r.crossover_batch is None and not math.isnan(r.first_step_s):
            out.append(f"{g.label}: the weight GEMMs stay memory-bound up to batch {MAX_BATCH}")
        elif r.crossover_beyond_fit:
            out.append(f"{g.label}: the weight GEMMs turn compute-bound from batch {r.crossover_batch}, beyond the "
                       f"{m.max_batch} sequences that fit: decode stays memory-bound at every batch it holds")
    if model.max_context is None:
        out.append(f"{model.name}: the config has no max_position_embeddings: max context is limited by memory only")
    return out


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list_models:
        for name, (source, _) in SHIPPED.items():
            print(f"{name}  {source}")
        return 0
    if not args.model or not args.roofs:
        raise CeilingsError("give --model NAME|config.json and at least one --roofs ROOFS.json|NAME "
                            "(--list-models lists the shipped models)")
    profiles = [path for group in args.calibrate or [] for path in group]
    out = check_outputs({"--json": args.json, "--html": args.html},
                        pictures={"-o": args.output, "--sweep-plot": args.sweep_plot, "--serve-plot": args.serve_plot},
                        force=args.force, inputs=[args.model, *args.roofs, *profiles, args.calibrate_on, args.workload])
    if args.serve_plot and not args.serve:
        raise CeilingsError("--serve-plot: give --serve (and --rate) too")
    if args.sweep_max < 1:
        raise CeilingsError(f"--sweep-max {args.sweep_max}: must be 1 or more")
    model, warnings = load_model(args.model)
    setup = _setup(args)
    check_setup(model, setup)
    if not 0 < args.memory_fraction <= 1:
        raise CeilingsError(f"--memory-fraction {args.memory_fraction}: give a share of the memory, above 0 and "
                            f"at most 1")
    steps = _steps(args.step, model)
    gpus = _priced([gpu_of(spec) for spec in args.roofs], args.price)
    calibration = _calibration(args, model, setup, gpus, warnings) if args.calibrate else None
    costs = [_costs(args, calibration, g) for g in gpus]
    results = [evaluate(model, setup, g, c, args.memory_fraction) for g, c in zip(gpus, costs)]
    sweep = None
    if args.sweep or args.sweep_plot:
        sweep = pd.concat([batch_sweep(model, setup, g, sweep_batches(args.sweep_max), c["decode"],
                                       args.memory_fraction) for g, c in zip(gpus, costs)], ignore_index=True)
    stepped = pd.concat([steps_table(model, setup, g, steps, c["decode"]) for g, c in zip(gpus, costs)],
                        ignore_index=True) if steps else None
    serving = None
    if args.serve:
        limits, traffic = _serving(args, model)
        serving = [serve_gpu(model, setup, g, c, limits, traffic, args.memory_fraction) for g, c in zip(gpus, costs)]
    warnings += _warnings(model, results, args.memory_fraction)
    print_warnings(warnings, args.verbose)
    _write(out, args, model, setup, results, calibration, sweep, stepped, warnings, serving)
    return 0


def _serving(args, model: Model) -> tuple[Limits, Traffic]:
    """--serve's scheduler limits and traffic, each value checked."""
    for name in ("requests", "max_num_seqs", "max_num_batched_tokens", "block_size"):
        if getattr(args, name) < 1:
            raise CeilingsError(f"--{name.replace('_', '-')} {getattr(args, name)}: give 1 or more")
    for name in ("slo_ttft", "slo_tpot"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise CeilingsError(f"--{name.replace('_', '-')} {value}: give seconds above 0")
    limits = Limits(args.max_num_seqs, args.max_num_batched_tokens, args.block_size, args.chunked_prefill)
    if args.workload:
        lengths, arrivals = read_workload(args.workload, model)
        if arrivals is not None and (args.rate or args.concurrency):
            raise CeilingsError(f"--rate or --concurrency with {args.workload}, whose requests have arrival_s: give "
                                f"one or the other")
        if arrivals is not None and args.serve_plot:
            raise CeilingsError(f"--serve-plot draws latencies against --rate; {args.workload}'s requests arrive at "
                                f"their own times (one run): leave it out, or drop arrival_s and give --rate")
    else:
        check_context(model, args.prompt + args.gen, "--prompt + --gen")
        lengths, arrivals = [(args.prompt, args.gen)] * args.requests, None
    if arrivals is None and not args.rate and not args.concurrency:
        raise CeilingsError("--serve: give --rate QPS or --concurrency N (repeat for a sweep), or a --workload with "
                            "arrival_s")
    if args.rate and args.concurrency:
        raise CeilingsError("--rate and --concurrency: an open loop (arrivals at a rate) or a closed one (N clients); "
                            "give one")
    for clients in args.concurrency:
        if clients < 1:
            raise CeilingsError(f"--concurrency {clients}: give 1 or more clients")
    return limits, Traffic(tuple(lengths), tuple(sorted(args.rate)), tuple(arrivals) if arrivals else None,
                           args.seed, (args.slo_ttft, args.slo_tpot), tuple(sorted(args.concurrency)))


def _write(out: Outputs, args, model, setup, results, calibration, sweep, stepped, warnings, serving) -> None:
    if args.json:
        doc = to_json(model, setup, results, calibration, sweep, warnings, stepped, floors=args.floors,
                      serving=serving)
        out.text(args.json, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    if args.serve_plot:
        from analysis.llm.plot import serve_figure

        out.figure(args.serve_plot, serve_figure(model, serving), dpi=150, bbox_inches="tight")
    if args.output:
        from analysis.llm.plot import ops_figure

        out.figure(args.output, ops_figure(model, results), dpi=150, bbox_inches="tight")
    if args.sweep_plot:
        from analysis.llm.plot import sweep_figure

        out.figure(args.sweep_plot, sweep_figure(model, sweep, results), dpi=150, bbox_inches="tight")
    if args.html:
        from analysis.llm.html import llm_page

        out.text(args.html, llm_page(model, results, sweep, warnings=warnings, floors=args.floors,
                                     serving=serving))
    out.commit(log=lambda path: print(f"wrote {path}", file=sys.stderr))
    if STDOUT not in (args.json, args.html):
        print(render_text(model, setup, results, calibration, sweep, stepped, floors=args.floors), end="")
        if serving:
            print(serving_text(serving), end="")


if __name__ == "__main__":
    sys.exit(main())

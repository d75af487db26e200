"""torch.profiler (Kineto) chrome traces: GPU kernels with their times, the operator, nn.Module and
record_function range that launched each, and FLOPs rebuilt from the operators' recorded shapes.

Facts about the format: ../shared/torch-traces/MANIFEST.md. What this reader does with them:
- Kernels are `cat: kernel` events (`dur` in microseconds); memcpy/memset events are counted apart
  (attrs["memory_operations"]), never kernels.
- A kernel's launch is the `cuda_runtime`/`cuda_driver` event with its `correlation` (else the `ac2g` flow
  that ends at it). The operators, modules (`python_function` "nn.Module: ...") and `user_annotation`
  ranges (record_function, ProfilerStep#N) enclosing that launch in time on its thread are its op, module
  and annotations; newer traces also give the kernel its op's "External id", used when no launch is found.
  Kernels whose op cannot be found are kept, and counted in a warning; those without a launch whose
  correlation id is older than the trace's first runtime call were launched before it began (`before_trace`).
- Traces of torch 1.8-1.10 use Kineto's old names (Operator, Runtime, Kernel, Memcpy, Memset, "external
  id"): `_events` renames them to today's (CATEGORIES, ARGUMENTS) before anything reads them.
- FLOPs and algorithmic bytes (inputs + outputs by dtype, a lower bound of DRAM traffic, never DRAM bytes)
  come from "Input Dims" (analysis.ops: matrix ops by PyTorch's own rules; the memory-bound ops,
  pooling, recommendation and serving ops by this project's), for one operator per call tree: the outermost
  enclosing operator whose rule gives a
  number (aten::conv2d, not also the aten::cudnn_convolution inside it; autograd nodes have no rule, so the
  aten ops they run count). Its work goes to its longest own kernel (one whose innermost op has a rule of
  its kind: a matrix op's GEMM, not a copy, clone or bias add inside it); its other kernels are
  `op_helper`, their own FLOPs missing. A matrix op's half precisions are tensor-core FLOPs, fp32 CUDA-core
  unless the kernel's name says TF32 tensor cores; other ops' FLOPs are CUDA-core fp32 (fp64 for double),
  and an op without FLOPs (a copy) has 0, so its bytes place it.
- What torch <= 1.11 traces do not record (no "Concrete Inputs": a convolution's stride and padding, a batch
  norm's training flag, a pooling's output) is taken from the backward ops of the same step where they show
  it (readers.torch_derive), and a warning says so.
- `cuda_profiler_range` events (CUPTI counters through torch.profiler's experimental_config) are hardware
  counters per kernel: they are used instead of the shape estimates.
- The device comes from deviceProperties; an AMD GPU is declined (the roofs here are NVIDIA's).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

import pandas as pd

from ceilings.inputs import loads_json
from common.errors import CeilingsError

from ..metrics import canonical_metric
from .bulk import MAX_DEPTH, enclosing, paused_gc
from .collectives import collective
from .contract import BEFORE_TRACE, COMMUNICATION, COUNTERS, MODELLED, Format, Source
from .torch_derive import DERIVED, derive

US = 1e-6  # trace times are microseconds
# the event categories of torch 1.8-1.10 traces, as today's (Kineto's ActivityType names were renamed; the
# TensorBoard plugin's parser reads both, case-insensitively): every category is looked up lowercased
CATEGORIES = {"operator": "cpu_op", "runtime": "cuda_runtime", "memcpy": "gpu_memcpy", "memset": "gpu_memset",
              "gpu_user_annotation": "gpu_user_annotation"}
# and their argument names ("external id", "Input dims" then; "External id", "Input Dims" now)
ARGUMENTS = {"external id": "External id", "Input dims": "Input Dims"}
# torch.profiler's step() is a record_function "ProfilerStep#N": an Operator event in old traces, an annotation
STEP_PREFIX = "ProfilerStep#"
# deviceProperties that are ncu device attributes, as those metrics: they tell another GPU without a name
DEVICE_FACTS = {"numSms": "device__attribute_multiprocessor_count", "totalGlobalMem": "device__attribute_total_memory"}
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
FLOW_START = "ac2g start"  # _events' key of the flows from launches to kernels ("ph": "s", "cat": "ac2g")
MEMORY_CATEGORIES = ("gpu_memcpy", "gpu_memset")
MODULE_PREFIX = "nn.Module: "
# the roofline precision of work done in each dtype by the operators with FLOP rules (GEMM, conv, attention)
PRECISION_COLUMN = {"fp64": "flops_fp64", "fp32": "flops_fp32", "fp16": "flops_tensor", "bf16": "flops_tensor",
                    "fp8": "flops_tensor"}
# the other ops' (element-wise, norms, reductions): PyTorch's kernels compute half precisions in fp32 (opmath_t)
VECTOR_COLUMN = {"fp64": "flops_fp64", "fp32": "flops_fp32", "fp16": "flops_fp32", "bf16": "flops_fp32",
                 "fp8": "flops_fp32"}
FLOP_COLUMNS = ("flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor")
# cuBLAS/CUTLASS kernels that run fp32 GEMMs as TF32 on tensor cores say so in their names
# ("cutlass_80_tensorop_s1688gemm...", "sm80_xmma_gemm_tf32f32...", "ampere_..._tf32..."); SIMT kernels
# ("ampere_sgemm_128x64", "cutlass_80_simt_sgemm") do not
TF32_KERNEL = re.compile(r"tensorop_s\d+gemm|tf32|_s1688|_s16816")
# cuBLAS matrix-vector kernels ("gemv2T_kernel_val<int, int, __nv_bfloat16, float, ...>", "gemvNSP_kernel",
# "gemvx") run on CUDA cores whatever the dtype, computing in fp32 (the float compute type among their
# template arguments): their half-precision work is fp32 CUDA-core work, not tensor work
CUDA_CORE_KERNEL = re.compile(r"gemv", re.IGNORECASE)
PROBE_BYTES = 4096  # "deviceProperties" or "schemaVersion" appear in the first few KiB of a Kineto trace
HEAD_BYTES = PROBE_BYTES * 16  # and "traceEvents" in the first 64 KiB


def _find(source: Source):
    """A JSON object that opens like a Kineto trace (given the trace's first HEAD_BYTES: TRACE.head)."""
    head = source.data[:PROBE_BYTES].lstrip()
    if not head.startswith(b"{") or not (b'"traceEvents"' in source.data
                                         or b'"deviceProperties"' in head or b'"schemaVersion"' in head):
        return None
    return True


def _load(source: Source) -> dict:
    try:
        doc = loads_json(source.data, source.path)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise CeilingsError(f"{source.path}: a torch.profiler trace that is not valid JSON ({exc}); truncated "
                            f"file?") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise CeilingsError(f"{source.path}: JSON without a traceEvents list: not a torch.profiler trace")
    return doc


def _events(doc: dict, path: str) -> dict[str, list[dict]]:
    """The trace's complete ("X") events by category, in today's vocabulary (CATEGORIES, ARGUMENTS: old
    traces' events are renamed in place), and under FLOW_START the flow events that begin at a launch. An
    event whose ts or dur is no finite number (dur: 0 or more), or whose args are no object, is refused here,
    naming it: the reader's arithmetic takes them as they are."""
    by_cat: dict[str, list[dict]] = defaultdict(list)
    today: dict = {}  # each category as written -> as today's traces write it (millions of events, a few names)
    for i, e in enumerate(doc["traceEvents"]):
        if type(e) is not dict:
            continue
        ph = e.get("ph")
        if ph != "X" or "ts" not in e:
            if ph == "s" and e.get("cat") == "ac2g":
                by_cat[FLOW_START].append(e)
            continue
        wrong = _wrong_field(e)
        if wrong:
            raise CeilingsError(f"{path}: traceEvents[{i}] ({str(e.get('name'))[:60]!r}): {wrong}; edited or "
                                f"corrupt trace? Profile again")
        written = e.get("cat", "")
        try:
            cat = today[written]
        except (KeyError, TypeError):  # a new name; an unhashable one (a list) is text like any other
            cat = str(written).lower()
            cat = CATEGORIES.get(cat, cat)
            if isinstance(written, str):
                today[written] = cat
        if cat == "cpu_op" and str(e.get("name", "")).startswith(STEP_PREFIX):
            cat = "user_annotation"
        if cat != written:
            e["cat"] = cat
        args = e.get("args")
        if type(args) is dict and not args.keys().isdisjoint(ARGUMENTS):
            for old, new in ARGUMENTS.items():
                if old in args and new not in args:
                    args[new] = args.pop(old)
        by_cat[cat].append(e)
    return by_cat


def _wrong_field(e: dict) -> str | None:
    """What makes an event unusable: ts or dur no finite number (dur negative), args no object, a name that is
    no text, or an argument the reader computes with (ARG_TYPES) of another type than Kineto writes."""
    for key in ("ts", "dur"):
        value = e.get(key, 0)
        if not (_is_number(value) and math.isfinite(value) and (key == "ts" or value >= 0)):
            return f"{key} = {str(value)[:40]!r}, not a number of microseconds"
    if type(e.get("args", {})) is not dict:
        return f"args = {str(e['args'])[:40]!r}, not an object"
    if not isinstance(e.get("name", ""), str):
        return f"name = {str(e['name'])[:40]!r}, not text"
    args = e.get("args", {})
    for key, kind, what in ARG_TYPES:
        value = args.get(key)
        if value is not None and not (isinstance(value, kind) and not isinstance(value, bool)):
            return f"args[{key!r}] = {str(value)[:40]!r}, not {what}"
    return None


# the arguments the reader computes with, and what Kineto writes for each (absent or null: not recorded)
ARG_TYPES = (("correlation", int, "an integer"), ("External id", int, "an integer"), ("device", int, "an integer"),
             ("stream", int, "an integer"), ("Input Dims", list, "a list"), ("Input type", list, "a list"),
             ("Concrete Inputs", list, "a list"), ("Input Strides", list, "a list"))


def _device(doc: dict, path: str) -> dict:
    """gpu, cc and SM count of the trace's first device; an AMD device is declined (by its name, or a warp of 64
    lanes where the name is empty, as some vLLM traces leave it: an NVIDIA warp is 32)."""
    props = [d for d in doc.get("deviceProperties") or [] if isinstance(d, dict)]
    if not props:
        return {"gpu": None, "cc": None}
    first = props[0]
    name = str(first.get("name") or "") or None
    amd = name and ("AMD" in name or "Radeon" in name or "Instinct" in name) or first.get("gcnArchName") \
        or first.get("warpSize") == 64
    if amd:
        raise CeilingsError(f"{path}: a trace from an AMD GPU ({name or 'a warp of 64 lanes'}): the roofs of this "
                            f"project are measured on NVIDIA GPUs; for AMD use rocprof-compute's roofline")
    major, minor = first.get("computeMajor"), first.get("computeMinor")
    facts = {metric: float(first[key]) for key, metric in DEVICE_FACTS.items() if _is_number(first.get(key))}
    return {"gpu": name, "cc": f"{major}.{minor}" if major is not None and minor is not None else None, **facts}


@paused_gc()
def _read(source: Source, _found) -> pd.DataFrame:
    from functools import partial

    from ..ops import NOT_RECORDED
    from ..ops import OPS as FLOP_OPS
    from ..ops import op_work as work_of
    from ..ops.matrix import ATTENTION_OPS, FLOP_CONVENTIONS, MATRIX_OPS

    # how causal attention is counted: kernel_table's `flops` (read_profile puts it in the memo)
    convention = source.memo.get("flops", "executed")
    op_work = partial(work_of, convention=convention)
    other = next(c for c in FLOP_CONVENTIONS if c != convention)

    doc = _load(source)
    device = _device(doc, source.path)
    by_cat = _events(doc, source.path)
    kernels = sorted(by_cat.get("kernel", []), key=lambda e: e["ts"])
    ranges = by_cat.get("cuda_profiler_range", [])
    if not kernels and not ranges:
        raise CeilingsError(f"{source.path}: a torch.profiler trace without GPU kernels: profile with "
                            f"activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a CUDA device")
    rank = (doc.get("distributedInfo") or {}).get("rank")
    world_size = (doc.get("distributedInfo") or {}).get("world_size")
    process = f"rank {rank}" if rank is not None else None
    memory = [e for cat in MEMORY_CATEGORIES for e in by_cat.get(cat, [])]

    launches = {}
    for cat in LAUNCH_CATEGORIES:
        for e in by_cat.get(cat, []):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launches[corr] = e
    flows_start = {f.get("id"): f for f in by_cat.get(FLOW_START, [])}
    derive(by_cat.get("cpu_op", []))  # what old traces did not record, from their backward ops
    ops_by_external = {(e.get("args") or {}).get("External id"): e for e in by_cat.get("cpu_op", [])}
    around = by_cat.get("cpu_op", []) + by_cat.get("user_annotation", []) + [
        e for e in by_cat.get("python_function", []) if str(e.get("name", "")).startswith(MODULE_PREFIX)]
    queries = [(*where, i) for i, k in enumerate(kernels)
               if (where := _launch_point(k.get("args") or {}, launches, flows_start, ops_by_external))]
    chains, deep = enclosing(around, queries)
    # correlation ids grow with every CUDA call: a kernel without a launch in the trace whose id is older
    # than the trace's first runtime call was launched before the profiler's CPU side began recording
    first_call = min((c for c in launches if _is_number(c)), default=None)
    placed = {q[-1] for q in queries}
    early = {i for i, k in enumerate(kernels) if i not in placed and first_call is not None
             and _is_number(corr := (k.get("args") or {}).get("correlation")) and corr < first_call}
    shapes = any("Input Dims" in (e.get("args") or {}) for e in by_cat.get("cpu_op", []))

    rows, unlinked = [], 0
    counted_op: dict[int, tuple[dict, list[int]]] = {}  # id(op event) -> (op, rows of its kernels)
    placing: dict[tuple, tuple] = {}  # a chain -> what it says of a kernel (kernels share a few thousand chains)
    ruled_ops: dict[int, bool] = {}  # index in `around` -> the op has a FLOP rule
    communicates: dict[tuple, bool] = {}  # (kernel name, op) -> a collective's (readers.contract.COMMUNICATION)
    for i, k in enumerate(kernels):
        args = k.get("args") or {}
        chain = chains.get(i, ())
        if chain not in placing:
            ops = [j for j in chain if around[j].get("cat") == "cpu_op"]
            annotations = tuple(str(around[j]["name"]) for j in chain if around[j].get("cat") == "user_annotation")
            modules = [str(around[j]["name"])[len(MODULE_PREFIX):] for j in chain
                       if around[j].get("cat") == "python_function"]
            for j in ops:
                if j not in ruled_ops:
                    ruled_ops[j] = _work(around[j], op_work) is not None
            # one op per call tree counts, the outermost with a FLOP rule: its FLOPs include its callees'
            ruled = next((around[j] for j in ops if ruled_ops[j]), None)
            innermost = str(around[ops[-1]]["name"]) if ops else None
            # an op whose arguments do not give its work (a serving engine's fused MoE): its kernels' cause
            hidden = next((name for j in ops if (name := str(around[j]["name"])) in NOT_RECORDED), None)
            placing[chain] = (bool(ops), annotations, modules[-1] if modules else None, innermost, ruled, hidden)
        linked, annotations, module, innermost, ruled, hidden = placing[chain]
        name = str(k.get("name"))
        if (name, innermost) not in communicates:  # a regex over names of up to thousands of characters, once
            communicates[name, innermost] = bool(COMMUNICATION.search(name) or COMMUNICATION.search(innermost or ""))
        group = collective(k, innermost, [around[j] for j in chain], world_size) \
            if communicates[name, innermost] else None
        if not linked and i not in early:
            unlinked += 1
        row = {"run": 0, "id": len(rows), "kernel": str(k.get("name")), "launches": 1,
               "grid": _dim3(args.get("grid")), "block": _dim3(args.get("block")),
               "device": None if args.get("device") is None else str(args["device"]), **device,
               "process": process, "nvtx": annotations, "module": module, "source": MODELLED,
               "op": innermost, "time_s": float(k.get("dur", math.nan)) * US,
               "before_trace": i in early, "_start": k["ts"], "_end": k["ts"] + k.get("dur", 0),
               "_collective": group, "_comm": communicates[name, innermost], "_hidden": hidden}
        if ruled is not None:
            counted_op.setdefault(id(ruled), (ruled, []))[1].append(len(rows))
            # the op's own kernel: launched by an op with a rule of its kind (a GEMM's by a matrix op, not by
            # the copy, clone or bias add inside it)
            row["_direct"] = innermost in FLOP_OPS and (innermost in MATRIX_OPS) == (ruled["name"] in MATRIX_OPS)
            row["op"] = str(ruled["name"])
        rows.append(row)
    if not ranges:
        _shape_work(rows, counted_op, op_work, shapes, MATRIX_OPS)
        _unknown_work(rows, shapes)
    notes = _comm_bytes(rows) + _not_recorded(rows, NOT_RECORDED)
    df = pd.DataFrame(rows)
    if ranges:
        df = pd.concat([df, _counter_rows(ranges, device, process)], ignore_index=True) if len(df) else \
            _counter_rows(ranges, device, process)
    # one process may drive several GPUs (DataParallel): each GPU's busy time, summed
    timeline = _timeline([r for r in rows if not r["before_trace"]])
    busy_all = _timeline(rows)["busy_s"]
    df = df.drop(columns=["_start", "_end", "_direct", "_collective", "_comm", "_hidden"], errors="ignore")
    if unlinked:
        notes.append(f"{unlinked} kernel(s) whose launching operator is not in the trace (no cpu_op around their "
                     f"launch): kept, without an op")
    if deep:
        notes.append(f"{deep} kernel(s) launched inside more than {MAX_DEPTH} nested operators, modules and "
                     f"annotations (ranges never closed?): only the innermost {MAX_DEPTH} of each are read")
    if kernels and not shapes and not ranges:
        notes.append("the trace has no input shapes, so no FLOPs: profile with record_shapes=True")
    assumed = sorted({w.assumed for op, _ in counted_op.values() if (w := _work(op, op_work)) and w.assumed})
    if assumed and not ranges:
        notes += [f"{a} ({sum(_work(op, op_work).assumed == a for op, _ in counted_op.values())} op call(s))"
                  for a in assumed]

    # the convention is said where it changed a count: a causal attention (a non-causal one counts the same)
    attention = not ranges and any(str(op["name"]) in ATTENTION_OPS and _work(op, op_work) is not None
                                   and _work(op, op_work) != _work(op, partial(work_of, convention=other))
                                   for op, _ in counted_op.values())
    if attention:
        notes.append(f"attention FLOPs count {FLOP_CONVENTIONS[convention]} (--flops {convention}); --flops "
                     f"{other} counts {FLOP_CONVENTIONS[other]}")
    if ranges:
        notes.append(f"{len(ranges)} cuda_profiler_range event(s): FLOPs from their hardware counters, not from "
                     f"shapes; their times are the profiler's ranges, not kernel times")
    # busy_all_s: with the kernels launched before the trace began (kernel_table's include_early)
    # attention_flops: the convention its attention FLOPs follow, for the table's column of that name
    df.attrs.update(notes=notes, memory_operations=len(memory), **timeline, busy_all_s=busy_all,
                    attention_flops=convention if attention else None)
    return df


def _is_number(value) -> bool:
    """A JSON number (not a bool, which Python counts as an int)."""
    return type(value) is int or type(value) is float


def _timeline(rows: list[dict]) -> dict[str, float | None]:
    """Per GPU, summed over GPUs (one process may drive several: DataParallel): busy_s, the time some kernel
    ran (the union of kernel intervals, all streams); window_s, from its first kernel's start to its last
    kernel's end; overlap_s, the time communication kernels (a row's _comm, as the reading loop found it: contract.
    COMMUNICATION) ran beside other kernels. None each when there are no kernels."""
    if not rows:
        return dict.fromkeys(("busy_s", "window_s", "overlap_s"))
    per_device = defaultdict(lambda: ([], []))
    for r in rows:
        per_device[r["device"]][r["_comm"]].append((r["_start"], r["_end"]))
    busy = window = overlap = 0.0
    for compute, comms in per_device.values():
        spans = _union(compute + comms)
        busy += sum(stop - start for start, stop in spans)
        window += spans[-1][1] - spans[0][0]
        overlap += _intersection(_union(compute), _union(comms))
    return {"busy_s": busy * US, "window_s": window * US, "overlap_s": overlap * US}


def _work(op: dict, op_work):
    a = op.get("args") or {}
    return op_work(str(op["name"]), a.get("Input Dims") or [], a.get("Input type") or [], a.get("Concrete Inputs"),
                   strides=a.get("Input Strides"), derived=op.get(DERIVED))


def _launch_point(args: dict, launches: dict, flows_start: dict, ops_by_external: dict) -> tuple | None:
    """(pid, tid, ts) of the kernel's launch on the CPU: the runtime call with its correlation, else the
    ac2g flow from it; else (newer traces) the start of the operator whose External id the kernel carries."""
    corr = args.get("correlation")
    launch = launches.get(corr)
    if launch is None and corr is not None:
        launch = flows_start.get(corr)
    if launch is None and args.get("External id") != corr:
        launch = ops_by_external.get(args.get("External id"))
    return None if launch is None else (launch.get("pid"), launch.get("tid"), launch["ts"])


def _shape_work(rows: list[dict], counted_op: dict, op_work, shapes: bool, matrix_ops) -> None:
    """FLOP columns and alg_bytes of every kernel: its op's work on the op's longest own kernel (else its
    longest kernel); its other kernels are op_helper, their own FLOPs missing (NaN), as for kernels of
    operators without a FLOP rule. A matrix op's (`matrix_ops`) fp32 work on a kernel whose name says it
    runs on tensor cores (TF32_KERNEL) is TF32 tensor work; its half-precision work on a cuBLAS GEMV kernel
    (CUDA_CORE_KERNEL) is fp32 CUDA-core work. Other ops' work is CUDA-core work (VECTOR_COLUMN); an op
    with no FLOPs (a copy) has 0 in every FLOP column, so its bytes place it against the bandwidth roof."""
    for row in rows:
        for col in (*FLOP_COLUMNS, "alg_bytes"):
            row[col] = float("nan")
    for op, members in counted_op.values():
        work = _work(op, op_work)
        direct = [i for i in members if rows[i].get("_direct")] or members
        longest = max(direct, key=lambda i: rows[i]["time_s"])
        matrix = str(op["name"]) in matrix_ops
        column = (PRECISION_COLUMN if matrix else VECTOR_COLUMN).get(work.precision)
        if column == "flops_tensor" and CUDA_CORE_KERNEL.search(rows[longest]["kernel"]):
            column = "flops_fp32"
        elif matrix and work.precision == "fp32" and TF32_KERNEL.search(rows[longest]["kernel"]):
            column = "flops_tensor"
        typed = "tf32" if column == "flops_tensor" and work.precision == "fp32" else work.precision
        for i in members:
            if i != longest:  # a helper (transpose, split-K reduction): its own FLOPs are not known, not 0
                rows[i]["op_helper"] = True
                continue
            rows[i]["tensor_type"] = typed if column == "flops_tensor" else None
            for col in FLOP_COLUMNS:
                rows[i][col] = work.flops if col == column else 0.0
            rows[i]["alg_bytes"] = work.bytes if work.bytes is not None else float("nan")
            if column is None and work.flops:  # a dtype with no roof here (int8 GEMM): the FLOPs are unknown, not 0
                rows[i]["flops_tensor"] = float("nan")


def _comm_bytes(rows: list[dict]) -> list[str]:
    """comm_bytes of every launch of a collective (readers.collectives): its bus bytes on its longest kernel, 0
    on the others. All or nothing: where any collective's size or group is not recorded, none has them (a
    partial sum would place a row's time against some of its bytes); a note says so."""
    groups: dict[int, list[dict]] = {}
    for row in rows:
        row["comm_bytes"] = math.nan
        if row["_collective"] is not None and not row["before_trace"]:
            groups.setdefault(row["_collective"].event, []).append(row)
    unsized = sorted({members[0]["_collective"].kind for members in groups.values()
                      if members[0]["_collective"].bus_bytes is None})
    if unsized:
        return [f"{len(unsized)} kind(s) of collective without a recorded message size or group size (first: "
                f"{unsized[0][:60]!r}): no collective is placed on the interconnect; torch >= 2.1 records them "
                f"(record_param_comms)"] if groups else []
    for members in groups.values():
        main = max(members, key=lambda r: r["time_s"])
        for row in members:
            row["comm_bytes"] = main["_collective"].bus_bytes if row is main else 0.0
    return []


# ops of a torch.compile graph (the autograd function and the region that runs its Triton kernels) and a CUDA
# graph's replay: their kernels carry no op with shapes
COMPILED = re.compile(r"CompiledFunction|Torch-Compiled|CompiledFxGraph|CUDAGraph|cuda_graph|^triton_", re.IGNORECASE)


def _unknown_work(rows: list[dict], shapes: bool) -> None:
    """Why each launch's FLOPs are missing (contract.UNKNOWN_WORK), for the roofline's time budget."""
    for row in rows:
        if not any(math.isnan(row[c]) for c in FLOP_COLUMNS):
            continue
        op = row["op"]
        if row["before_trace"]:
            why = BEFORE_TRACE
        elif row.get("op_helper"):
            why = "op helper"
        elif COMPILED.search(op or "") or (op is None and COMPILED.search(row["kernel"])):
            why = "compiled graph"
        elif op is None:
            why = "no op"
        elif row["_hidden"]:
            why = "work not recorded"
        else:
            why = "no op model" if shapes else "no shapes"
        row["unknown_work"] = why


def _not_recorded(rows: list[dict], missing: dict[str, str]) -> list[str]:
    """A note per op whose arguments do not give its work, with the time of its kernels left unplaced."""
    times: dict[str, float] = defaultdict(float)
    for row in rows:
        if row.get("unknown_work") == "work not recorded":
            times[row["_hidden"]] += row["time_s"]
    return [f"{op}: {t * 1e3:.3g} ms of kernels unplaced: a trace does not record {missing[op]}; an ncu profile of "
            f"the same step counts their FLOPs and bytes" for op, t in sorted(times.items(), key=lambda i: -i[1])]


def _counter_rows(ranges: list[dict], device: dict, process: str | None) -> pd.DataFrame:
    """One launch per cuda_profiler_range event, its args the counters (metric names as ncu's)."""
    rows = []
    for i, e in enumerate(sorted(ranges, key=lambda e: e["ts"])):
        metrics = {canonical_metric(k): float(v) for k, v in (e.get("args") or {}).items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        rows.append({"run": 1, "id": i, "kernel": str(e.get("name")), "launches": 1, **device,
                     "process": process, "nvtx": (), **metrics})
    return pd.DataFrame(rows)


def operator_rows(source: Source) -> pd.DataFrame:
    """Every operator event of a trace (CPU-only traces too) that has a FLOP rule: name, input dims (as
    text), flops, precision, alg_bytes, cpu_time_s (analysis.torch_profile.operator_work reads a file)."""
    from ..ops import op_work

    if TRACE.recognise(source) is None:
        raise CeilingsError(f"{source.path}: not a torch.profiler trace")
    rows = []
    ops = _events(_load(source), source.path).get("cpu_op", [])
    derive(ops)
    for e in ops:
        dims = (e.get("args") or {}).get("Input Dims") or []
        work = _work(e, op_work)
        if work is not None:
            rows.append({"name": str(e["name"]), "input_dims": str(dims), "flops": work.flops,
                         "precision": work.precision, "alg_bytes": work.bytes, "cpu_time_s": e.get("dur", 0) * US})
    return pd.DataFrame(rows, columns=["name", "input_dims", "flops", "precision", "alg_bytes", "cpu_time_s"])


def _dim3(value) -> str | None:
    if isinstance(value, list) and len(value) == 3:
        return f"({value[0]}, {value[1]}, {value[2]})"
    return None


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Intervals merged where they overlap or touch, in order."""
    merged: list[list[float]] = []
    for start, stop in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return [(a, b) for a, b in merged]


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """The length of the intersection of two unions of intervals (each in order, disjoint)."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


TRACE = Format("torch.profiler trace", COUNTERS, _find, _read, head=HEAD_BYTES)

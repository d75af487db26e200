"""`python -m analysis.predict FILE.py:FUNCTION --roofs GPU...`: the roofline of a PyTorch model before it runs on
a GPU. FUNCTION returns `(model, inputs)`: an nn.Module and a tuple of example inputs (meta tensors are fine:
their shapes and dtypes are what counts). The model runs once on the meta device (no memory, no weights, no GPU)
inside a dispatch mode that records every aten op with its arguments as a torch.profiler trace records them
("Input Dims", "Input type", "Concrete Inputs", "Input Strides") and the nn.Module it ran in; each op then goes
through the same op table as a trace's ops (analysis.ops.op_work: one code path, so a model predicted
and the same model profiled give the same FLOPs and bytes op by op). Views and other ops that launch no kernel
are counted apart. Each op's time on a GPU is its work at the roofs (matrix ops on the tensor roof of their
dtype, the others on the CUDA cores, their bytes against DRAM), never below the launch floor of one kernel: a
lower bound of the step time, named as such. docs/predict.md.

Scaled-dot-product attention, which the meta device decomposes (bmm, softmax), is recorded as the one fused op
a GPU runs (flash or memory-efficient attention) in the forward pass; its backward is the decomposition's ops.
What this version leaves out: a Hugging Face config as SPEC, the picture and a check against a real trace.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from analysis.ops import op_work
from analysis.ops.base import SCALAR_TYPES, TORCH_TYPES
from analysis.ops.matrix import MATRIX_OPS
from analysis.roofline import Roofs, seconds, si, target_roofs, time_at_roofs
from analysis.roofline.inputs import check_outputs
from ceilings.lazy import lazy
from common.atomic import json_text
from common.errors import CeilingsError, MissingDependency, cli_entry
from common.text import aligned
from common.warn import add_verbose, print_warnings

pd = lazy("pandas")

PROG = "python -m analysis.predict"
# c10::ScalarType codes by torch's dtype names, as "Concrete Inputs" records a dtype argument
SCALAR_CODES = {torch_name: code for code, dtype in SCALAR_TYPES.items()
                for torch_name, named in TORCH_TYPES.items() if named == dtype}
# ops that launch no kernel although their schema does not say they are views
NO_KERNEL = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
                       "aten::_unsafe_view", "aten::detach", "aten::lift_fresh", "aten::alias",
                       "aten::_local_scalar_dense"})
# the precision whose roof an op's FLOPs run at: matrix ops on the tensor cores for half precisions (fp32 on the
# CUDA cores: TF32 is a library's choice a meta run cannot see), the others on the CUDA cores in fp32 (opmath)
MATRIX_ROOF = {"fp64": "fp64", "fp32": "fp32", "fp16": "tensor.fp16", "bf16": "tensor.bf16", "fp8": "tensor.fp8"}
VECTOR_ROOF = {"fp64": "fp64", "fp32": "fp32", "fp16": "fp32", "bf16": "fp32", "fp8": "fp32"}
# --optimizer: what torch runs on a GPU by default (foreach: one kernel per op over many tensors)
OPTIMIZERS = {"sgd": lambda params: _torch().optim.SGD(params, lr=0.01, momentum=0.9, foreach=True),
              "adam": lambda params: _torch().optim.Adam(params, foreach=True),
              "adamw": lambda params: _torch().optim.AdamW(params, foreach=True)}
# --fused-optimizer: the one kernel torch's fused=True implementation runs over every parameter instead
FUSED_OPTIMIZERS = {"sgd": "aten::_fused_sgd_", "adam": "aten::_fused_adam_", "adamw": "aten::_fused_adamw_"}
# what a model file or its function may raise, said in one line instead of a traceback
USER_CODE_ERRORS = (SyntaxError, ImportError, OSError, RuntimeError, TypeError, ValueError, AttributeError,
                    NameError, KeyError, IndexError, AssertionError, ZeroDivisionError)
ATTENTION_NOTE = ("scaled-dot-product attention is one fused kernel, forward and backward (flash attention's; the "
                  "memory-efficient one's with a mask)")
LEFT_OUT = f"a lower bound of one forward pass (--train for a training step); {ATTENTION_NOTE}"
TRAIN_LEFT_OUT = ("a lower bound of one training step (the loss: the sum of the output; the optimizer's {how}); "
                  f"{ATTENTION_NOTE}")


@dataclass(frozen=True)
class Call:
    """One aten op as the model ran it: its name as a trace writes it, its arguments as a trace records them,
    and the nn.Module path it ran in ("" for the model itself)."""

    op: str
    dims: list
    types: list
    concrete: list
    strides: list
    module: str
    list_types: list = field(default_factory=list)  # a TensorList's element dtype ("": other argument, mixed)


def _torch():
    try:
        import torch
    except ImportError as e:
        raise MissingDependency(f"{PROG} needs PyTorch (its CPU build is enough): python -m pip install torch "
                                f"--index-url https://download.pytorch.org/whl/cpu") from e
    return torch


def _recorded(value, torch) -> tuple[list, str, str, list]:
    """(dims, type, concrete value, strides) of one argument, as Kineto's record_shapes writes them."""
    if isinstance(value, torch.Tensor):
        name = str(value.dtype).removeprefix("torch.")
        return list(value.shape), TORCH_TYPES.get(name, name), "", list(value.stride())
    if value is None:
        return [], "", "", []
    if isinstance(value, torch.dtype):
        return [], "Scalar", str(SCALAR_CODES.get(str(value).removeprefix("torch."), "")), []
    if isinstance(value, (bool, int, float)):
        return [], "Scalar", str(value), []
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, torch.Tensor) for v in value):
            return [list(v.shape) for v in value], "TensorList", "", [list(v.stride()) for v in value]
        if all(isinstance(v, (bool, int, float)) for v in value):
            return [], "ScalarList", json.dumps(list(value)), []
        return [], "GenericList", "", []
    return [], "", "", []  # a device, layout or memory format: no tensor, no value a model reads


def _list_type(value, torch) -> str:
    """The element dtype of a tensor list, as "Input type" names dtypes ("" if not a tensor list or mixed): what a
    trace does not record and a recorded run knows."""
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, torch.Tensor) for v in value):
        return ""
    names = {TORCH_TYPES.get(n, n) for v in value if (n := str(v.dtype).removeprefix("torch."))}
    return names.pop() if len(names) == 1 else ""


def record(model, inputs: Sequence, *, train: bool = False, optimizer: str | None = None,
           fused_optimizer: bool = False) -> list[Call]:
    """Run `model(*inputs)` on the meta device, recording every aten op (views and other ops without a kernel
    included; `launches_kernel` tells them apart). `train`: also the backward pass of the sum of the (first)
    output as the loss, its ops in the modules whose backward they run in, then an `optimizer` step (OPTIMIZERS,
    as torch's foreach implementation runs it, or with `fused_optimizer` its one fused kernel; its ops in module
    "(optimizer)")."""
    torch = _torch()
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    # function -> the aten op a GPU trace records for it, one kernel (flash or memory-efficient attention; the
    # fused RMSNorm of torch >= 2.4 on CUDA)
    FUSED = {torch.nn.functional.scaled_dot_product_attention: "aten::scaled_dot_product_attention",
             torch.nn.functional.rms_norm: "aten::rms_norm"}

    path: list[str] = []
    calls: list[Call] = []

    fused: list[str] = []  # the fused op being run: what the dispatcher runs inside it is its decomposition

    def add(name: str, schema, args, kwargs) -> None:
        values = [args[i] if i < len(args) else kwargs.get(a.name, a.default_value if a.has_default_value()
                                                            else None)
                  for i, a in enumerate(schema.arguments)]
        recorded = [_recorded(v, torch) for v in values]
        calls.append(Call(name, [r[0] for r in recorded], [r[1] for r in recorded], [r[2] for r in recorded],
                          [r[3] for r in recorded], ".".join(path), [_list_type(v, torch) for v in values]))

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if not fused:
                add(func._schema.name if not func.is_view else f"{func._schema.name} (view)", func._schema, args,
                    kwargs)
            return func(*args, **kwargs)

    class FusedAttention(torch.autograd.Function):
        """Attention whose backward is one fused kernel too, as a GPU runs it: flash attention's backward, or the
        memory-efficient one's with a mask; recorded with the arguments its schema takes."""

        @staticmethod
        def forward(ctx, q, k, v, mask, options):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **options)
            ctx.save_for_backward(q, k, v, out)
            ctx.mask, ctx.options = mask, options
            return out

        @staticmethod
        def backward(ctx, grad):
            q, k, v, out = ctx.saved_tensors
            fused.append("attention backward")  # its allocations are no kernels
            try:
                lse = torch.empty(out.shape[:-1], dtype=torch.float32)
                dropout, causal = ctx.options.get("dropout_p", 0.0), ctx.options.get("is_causal", False)
                if ctx.mask is None:
                    op = "aten::_scaled_dot_product_flash_attention_backward"
                    args = (grad, q, k, v, out, lse, None, None, q.shape[-2], k.shape[-2], dropout, causal)
                else:
                    op = "aten::_scaled_dot_product_efficient_attention_backward"
                    args = (grad, q, k, v, ctx.mask, out, lse, None, None, dropout, [True] * 4, causal)
                add(op, torch._C._jit_get_schemas_for_operator(op)[0], args, {"scale": ctx.options.get("scale")})
                return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), None, None
            finally:
                fused.pop()

    def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        options = dict(dropout_p=dropout_p, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        return FusedAttention.apply(q, k, v, attn_mask, options)

    # a FUSED function whose backward is one kernel too, where a gradient is taken: what runs it instead
    FUSED_BACKWARD = {torch.nn.functional.scaled_dot_product_attention: attention}

    class Fused(TorchFunctionMode):
        """The functions a GPU runs as one kernel that the meta device decomposes (FUSED): recorded as the op a
        GPU trace shows, their decomposition not; attention's backward fused too where it is taken."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            op = FUSED.get(func) if not fused else None
            if op is None:
                return func(*args, **kwargs)
            add(op, torch._C._jit_get_schemas_for_operator(op)[0], args, kwargs)
            fused.append(op)
            try:
                grads = torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                                        for t in args[:3])
                return (FUSED_BACKWARD.get(func, func) if grads else func)(*args, **kwargs)
            finally:
                fused.pop()

    names = {m: n for n, m in model.named_modules()}

    def enter(module, _inputs) -> None:
        path.append(names[module].rsplit(".", 1)[-1])

    def leave(module, _inputs, _output) -> None:  # None: the module's output stays its own
        path.pop()

    def enter_backward(module, _grads) -> None:
        enter(module, ())

    def leave_backward(module, _grad_in, _grad_out) -> None:
        path.pop()

    hooks = [h for m in names if names[m] for h in (m.register_forward_pre_hook(enter),
                                                      m.register_forward_hook(leave))]
    if train:  # the backward ops run inside the modules whose backward they are
        hooks += [h for m in names if names[m] for h in (m.register_full_backward_pre_hook(enter_backward),
                                                          m.register_full_backward_hook(leave_backward))]
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in inputs]

    def train_step(step, fuse: bool) -> None:
        """A training step; `fuse`: its optimizer as the one fused kernel (fused_step), else as it runs."""
        out = model(*meta)
        loss = out if isinstance(out, torch.Tensor) else next(
            t for t in (out.values() if isinstance(out, dict) else out) if isinstance(t, torch.Tensor))
        loss.float().sum().backward()
        if step is not None:
            path.append("(optimizer)")
            if fuse:
                fused_step(step)
            else:
                step.step()
            path.pop()
            step.zero_grad(set_to_none=True)

    def fused_step(step) -> None:
        """The call torch's fused=True optimizer makes (fused kernels need a GPU's tensors: not run here), with
        the state the foreach step before built."""
        group, op = step.param_groups[0], FUSED_OPTIMIZERS[optimizer]
        params = [p for p in group["params"] if p.grad is not None]
        grads, state = [p.grad for p in params], [step.state[p] for p in params]
        if optimizer == "sgd":
            args = (params, grads, [s["momentum_buffer"] for s in state], group["weight_decay"], group["momentum"],
                    group["lr"], group["dampening"], group["nesterov"], group["maximize"], False)
        else:
            args = (params, grads, [s["exp_avg"] for s in state], [s["exp_avg_sq"] for s in state], [],
                    [s["step"] for s in state], group["lr"], *group["betas"], group["weight_decay"], group["eps"],
                    group["amsgrad"], group["maximize"])
        add(op, torch._C._jit_get_schemas_for_operator(op)[0], args, {})

    try:
        with torch.set_grad_enabled(train), torch.device("meta"), warnings.catch_warnings():
            # a model whose inputs need no gradient still runs its first module's backward: what is recorded
            warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
            model = model.to("meta").train(train)
            step = OPTIMIZERS[optimizer](model.parameters()) if train and optimizer else None
            if step is not None:  # a step before: the optimizer's state exists, as in every step but the first
                train_step(step, fuse=False)
            with Fused(), Recorder():
                if train:
                    train_step(step, fuse=fused_optimizer)
                else:
                    model(*meta)
    except (RuntimeError, TypeError, ValueError, AttributeError, NotImplementedError, IndexError,
            StopIteration) as e:
        raise CeilingsError(f"the model failed on the meta device: {type(e).__name__}: {str(e).splitlines()[0]}; "
                            f"does it run on the CPU with these inputs? (an op without a meta kernel, or "
                            f"data-dependent control flow, cannot be predicted)") from e
    finally:
        for h in hooks:
            h.remove()
    return calls


def launches_kernel(call: Call) -> bool:
    """Whether a GPU runs the call as a kernel: not a view, an allocation, a profiler marker, nor an optimizer's
    step counters (0-d tensors a GPU run keeps on the CPU)."""
    if call.op.endswith("(view)") or call.op in NO_KERNEL or call.op.startswith("profiler::"):
        return False
    lists = [d for d, t in zip(call.dims, call.types) if t == "TensorList"]
    return not (call.op.startswith("aten::_foreach_") and lists and all(s == [] for d in lists for s in d))


def op_table(calls: Sequence[Call], convention: str = "executed") -> pd.DataFrame:
    """One row per op call that launches a kernel: op, module, flops, bytes, precision (the roof its FLOPs run
    at), modelled; FLOPs and bytes missing (never 0) where no op model knows the op."""
    rows = []
    for c in calls:
        if not launches_kernel(c):
            continue
        work = op_work(c.op, c.dims, c.types, c.concrete, convention=convention, strides=c.strides,
                       list_types=c.list_types)
        roofs_of = MATRIX_ROOF if c.op in MATRIX_OPS else VECTOR_ROOF
        rows.append({"op": c.op, "module": c.module, "flops": work.flops if work else math.nan,
                     "bytes": work.bytes if work and work.bytes is not None else math.nan,
                     "roof": roofs_of.get(work.precision) if work and work.precision else None,
                     "modelled": work is not None, "assumed": work.assumed if work else None})
    return pd.DataFrame(rows, columns=["op", "module", "flops", "bytes", "roof", "modelled", "assumed"])


def time_on(roofs: Roofs, ops: pd.DataFrame, floor: bool = True) -> pd.Series:
    """Each op's time on `roofs`: its work at the roofs (FLOPs at its precision's roof, bytes against DRAM),
    never below one kernel's launch floor (with `floor`: the rate a host launches kernels, which a kernel's own
    device time can beat); missing where its work is unknown or the roofs lack its roof."""
    floor_s = roofs.floor[0] if floor else 0.0
    out = []
    for flops, nbytes, roof, modelled in ops[["flops", "bytes", "roof", "modelled"]].itertuples(index=False):
        if not modelled or math.isnan(nbytes) or (flops > 0 and roof is None):
            out.append(math.nan)
            continue
        at = time_at_roofs(roofs, {roof: flops} if flops > 0 else {}, {"dram": nbytes},
                           main=roof if flops > 0 else None)
        out.append(math.nan if isinstance(at, str) else max(at.time_s, floor_s))
    return pd.Series(out, index=ops.index, dtype="float64")


def calibrated_time(roofs: Roofs, ops: pd.DataFrame, efficiency: dict[str, float]) -> pd.Series:
    """Each op's work time at `roofs` (no launch floor) over the efficiency its class of op reached in a real
    trace (predict_check.efficiencies): an estimate, assuming the model reaches the same fraction of every GPU's
    roofs. Ops of a class the trace does not have keep time_on's lower bound."""
    from analysis.ops import op_class
    from analysis.predict_check import OTHER

    reached = ops["op"].map(lambda name: efficiency.get(op_class(name) or OTHER, math.nan))
    return (time_on(roofs, ops, floor=False) / reached).where(reached > 0, time_on(roofs, ops))


def _row_key(ops: pd.DataFrame, by: str, depth: int | None) -> pd.Series:
    """What a row of --by op|module is: the op's name, or its module path cut to `depth` ("(model)" for the
    model's own forward)."""
    if by == "op":
        return ops["op"]
    return ops["module"].map(lambda m: ".".join(m.split(".")[:depth]) if depth else m).replace("", "(model)")


def predict(ops: pd.DataFrame, gpus: Sequence[Roofs], by: str = "op", depth: int | None = None,
            times=time_on) -> pd.DataFrame:
    """Rows per op name (or nn.Module path, cut to `depth` levels): calls, flops, bytes, and the predicted seconds
    on each GPU (a column per GPU, named by its label; `times(roofs, ops)` gives each op's); sorted by the first
    GPU's time."""
    if by not in ("op", "module"):
        raise CeilingsError(f"--by {by}: give op or module")
    ops = ops.copy()
    for g in gpus:
        ops[f"time_s {g.label}"] = times(g, ops)
    grouped = ops.groupby(_row_key(ops, by, depth), sort=False)
    out = grouped[["flops", "bytes", *[f"time_s {g.label}" for g in gpus]]].sum(min_count=1)
    out.insert(0, "calls", grouped.size())
    out.insert(1, "modelled_calls", grouped["modelled"].sum())
    out.index.name = by
    first = f"time_s {gpus[0].label}" if gpus else None
    return (out.sort_values(first, ascending=False, na_position="last") if first else out).reset_index()


def as_kernels(ops: pd.DataFrame, gpu: Roofs, by: str = "op", depth: int | None = None,
               what: str = "a model", times=time_on) -> pd.DataFrame:
    """The predicted rows as a kernel table (analysis.ncu's columns) timed at their predicted time on `gpu`:
    the roofline, its picture and its time budget then read a prediction as they read a profile. Bytes are
    algorithmic (an op's inputs and outputs)."""
    np = lazy("numpy")
    ops = ops.assign(time_s=times(gpu, ops))
    tensor_roofs = tuple(r for r in MATRIX_ROOF.values() if r.startswith("tensor."))
    for column, roofs in (("flops_fp64", ("fp64",)), ("flops_fp32", ("fp32",)), ("flops_fp16", ()),
                          ("flops_tensor", tensor_roofs)):
        ops[column] = ops["flops"].where(ops["roof"].isin(roofs), 0.0).where(ops["modelled"])
    ops["tensor_type"] = ops["roof"].map(lambda r: r.removeprefix("tensor.") if isinstance(r, str)
                                         and r.startswith("tensor.") else None)
    grouped = ops.groupby(_row_key(ops, by, depth), sort=False)
    out = grouped[["time_s", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops", "bytes"]].sum(
        min_count=1)
    out["launches"] = grouped.size()
    # a row whose every call is modelled is known; one with unmodelled calls is not placed (never a part)
    known = grouped["modelled"].all()
    out[["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops", "bytes"]] = out[
        ["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops", "bytes"]].where(known)
    types = grouped["tensor_type"].agg(lambda t: t.iloc[0] if t.nunique() == 1 and t.notna().all() else None)
    out = out.assign(tensor_type=types, coverage=known.astype(float), alg_bytes=out["bytes"], dram_bytes=np.nan,
                     l2_bytes=np.nan, l1_bytes=np.nan, sm_clock_hz=np.nan).drop(columns="bytes")
    out.index.name = "kernel"
    out = out.reset_index()
    out.attrs.update(gpus=[], by=by,
                     predicted=f"PREDICTED, not profiled: {what} at the roofs (a lower bound)")
    return out


HF_PREFIX = "hf:"
HF_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def hf_spec(spec: str, batch: int = 1, tokens: int = 2048, dtype: str = "bf16"):
    """hf:CONFIG|NAME -> (the decoder built from that Hugging Face config.json, or a shipped one's, by
    analysis.llm; input_ids of batch x tokens; the assumptions the build makes)."""
    from analysis.llm.decoder import ROUTING, decoder
    from analysis.llm.models import load_model
    from analysis.llm.work import check_context

    torch = _torch()
    if batch < 1 or tokens < 1:
        raise CeilingsError(f"--batch {batch} --tokens {tokens}: give 1 or more of each")
    model, _ = load_model(spec.removeprefix(HF_PREFIX))
    check_context(model, tokens, "--tokens")
    return decoder(model, HF_DTYPES[dtype]), (torch.zeros(batch, tokens, dtype=torch.long),), \
        [ROUTING] if model.moe else []


def load_spec(spec: str):
    """FILE.py:FUNCTION -> FUNCTION() -> (model, inputs)."""
    file, sep, function = spec.rpartition(":")
    if not sep or not file.endswith(".py") or not function.isidentifier():
        raise CeilingsError(f"{spec}: give FILE.py:FUNCTION, a function returning (model, inputs)")
    path = Path(file)
    if not path.is_file():
        raise CeilingsError(f"{spec}: no such file {path}")
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(module_spec)
    try:  # the user's code: whatever it raises is said in one line, naming it
        module_spec.loader.exec_module(module)
        make = getattr(module, function, None)
        if not callable(make):
            raise CeilingsError(f"{spec}: {path} defines no function {function}")
        made = make()
    except USER_CODE_ERRORS as e:
        raise CeilingsError(f"{spec}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} (in the "
                            f"model's own code; run {path} with python to see where)") from e
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], (tuple, list))):
        raise CeilingsError(f"{spec}: {function}() must return (model, inputs), inputs a tuple of tensors")
    return made


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="The roofline of a PyTorch model before it runs: every "
                                "aten op of one forward pass, recorded on the meta device, with its FLOPs and "
                                "bytes from the op models a trace's ops use, and its time at each GPU's roofs "
                                "(a lower bound).", epilog="docs/predict.md")
    p.add_argument("spec", metavar="FILE.py:FUNCTION|hf:CONFIG", help="a function returning (model, inputs); or "
                   "hf:config.json (or a shipped name, python -m analysis.llm --list-models): a dense decoder built "
                   "from that Hugging Face config, no transformers and no weights, run on --batch x --tokens ids")
    p.add_argument("--batch", type=int, default=1, help="with hf:, sequences (default 1)")
    p.add_argument("--tokens", type=int, default=2048, help="with hf:, tokens a sequence (default 2048)")
    p.add_argument("--dtype", choices=tuple(HF_DTYPES), default="bf16", help="with hf:, the weights' and "
                   "activations' type (default bf16)")
    p.add_argument("--roofs", action="append", required=True, metavar="ROOFS.json|NAME",
                   help="a roofs file or a datasheet name; repeat for GPUs side by side")
    p.add_argument("--train", action="store_true",
                   help="a training step: forward, backward of the output's sum, and the --optimizer step")
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adamw",
                   help="with --train: the optimizer step (torch's foreach implementation; default adamw)")
    p.add_argument("--fused-optimizer", action="store_true",
                   help="with --train: the optimizer as torch's fused=True runs it, one kernel over every parameter")
    p.add_argument("--by", choices=("op", "module"), default="op", help="rows per op (default) or nn.Module")
    p.add_argument("--depth", type=int, metavar="N", help="with --by module: module paths cut to N levels")
    p.add_argument("--flops", choices=("executed", "torch"), default="executed",
                   help="causal attention: the unmasked pairs (default) or every pair, as FlopCounterMode")
    p.add_argument("--against", metavar="TRACE", help="a torch.profiler trace of the same model: FLOPs and time "
                   "per class of op, predicted at the trace GPU's roofs beside the trace's, their ratio the "
                   "efficiency reached")
    p.add_argument("--calibrate", action="store_true", help="with --against: each op's time on every --roofs GPU is "
                   "its work's time at the roofs over the efficiency its class of op reached in the trace (an "
                   "estimate: the same fraction of every GPU's roofs)")
    p.add_argument("--csv", metavar="FILE.csv", help="the table ('-': standard output)")
    p.add_argument("--json", metavar="FILE.json", help="the table, the totals per GPU and what is left out, "
                   "versioned (docs/predict.md; '-': standard output)")
    p.add_argument("-o", "--output", metavar="FILE", help="the roofline on the first --roofs GPU: .png, .svg, .pdf")
    p.add_argument("--html", metavar="FILE.html", help="the same roofline as one self-contained interactive page")
    p.add_argument("--force", action="store_true", help="overwrite existing --csv, --json, -o and --html files")
    add_verbose(p)
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.depth is not None and args.depth < 1:
        raise CeilingsError(f"--depth {args.depth}: give 1 or more")
    out = check_outputs({"--csv": args.csv, "--json": args.json, "--html": args.html}, pictures={"-o": args.output},
                        force=args.force, inputs=[args.spec.removeprefix(HF_PREFIX) if args.spec.startswith(HF_PREFIX)
                                                  else args.spec.rpartition(":")[0], *args.roofs,
                                                  *([args.against] if args.against else [])])
    if args.calibrate and not args.against:
        raise CeilingsError("--calibrate: give --against TRACE, a trace of the same model, whose efficiencies scale "
                            "the prediction")
    gpus = [target_roofs(r, option="--roofs") for r in args.roofs]
    if args.fused_optimizer and not args.train:
        raise CeilingsError("--fused-optimizer: give --train, a training step, whose optimizer it fuses")
    if args.spec.startswith(HF_PREFIX):
        *made, assumed = hf_spec(args.spec, args.batch, args.tokens, args.dtype)
    else:
        made, assumed = load_spec(args.spec), []
    calls = record(*made, train=args.train, optimizer=args.optimizer,
                   fused_optimizer=args.fused_optimizer)
    ops = op_table(calls, args.flops)
    check, checked = _against(args.against, ops, args.flops) if args.against else (None, [])
    times = time_on
    if args.calibrate:
        from analysis.predict_check import efficiencies

        reached = efficiencies(check)
        times = partial(calibrated_time, efficiency=reached)
        check.attrs["calibrated"] = reached
    table = predict(ops, gpus, args.by, args.depth, times)
    views = len(calls) - len(ops)
    unknown = ops.loc[~ops["modelled"], "op"].value_counts()
    print(f"{len(ops)} kernels ({views} views and allocations launch none); "
          f"{_left_out(args)}", file=sys.stderr)
    warnings = [*assumed, *(f"{note} ({n} op call(s))" for note, n in ops["assumed"].dropna().value_counts().items())]
    if len(unknown):
        warnings.append(f"{int(unknown.sum())} op call(s) without a model, their FLOPs, bytes and time unknown: "
                        + ", ".join(f"{op} x{n}" for op, n in unknown.head(5).items()))
    print_warnings(warnings + checked, args.verbose)
    if args.csv:
        out.text(args.csv, table.to_csv(index=False))
    if args.json:
        out.text(args.json, json_document(args, table, gpus, ops, views, unknown, check))
    if args.output or args.html:
        from analysis.roofline import roofline_table

        step = "a training step" if args.train else "one forward pass"
        judged = roofline_table(gpus[0], as_kernels(ops, gpus[0], args.by, args.depth,
                                                    f"{args.spec}, {step}", times))
        if args.output:
            from analysis.plot import roofline_figure

            out.figure(args.output, roofline_figure(gpus[0], judged), dpi=150, bbox_inches="tight")
        if args.html:
            from analysis.figure import roofline as roofline_data
            from analysis.html import roofline_page

            out.text(args.html, roofline_page(roofline_data(gpus[0], judged), gpus[0],
                                              warnings=[_left_out(args)]))
    out.commit(log=lambda path: print(f"wrote {path}", file=sys.stderr))
    if not (args.csv or args.json):
        print(render(table, gpus, ops, calibrated=args.against if args.calibrate else None))
        if check is not None:
            from analysis.predict_check import render as render_check

            print("\n" + render_check(check, check.attrs["gpu"], check.attrs["roofs"], args.against))
    return 0


def _left_out(args) -> str:
    """What the prediction is a lower bound of, and how its fused ops are counted."""
    if not args.train:
        return LEFT_OUT
    return TRAIN_LEFT_OUT.format(how="one fused kernel" if args.fused_optimizer else "foreach ops")


def _against(trace: str, ops: pd.DataFrame, convention: str) -> tuple[pd.DataFrame, list[str]]:
    """predict_check.against on the trace's own GPU's roofs (measured ones here, else its datasheet; attrs["gpu"]
    names them, attrs["roofs"] says which), and the warnings: its disagreements, then the trace's own."""
    from analysis.ncu import kernel_table
    from analysis.predict_check import against, disagreements
    from analysis.roofline.inputs import profile_roofs

    kernels = kernel_table([trace], by="op", flops=convention)
    gpu, said = profile_roofs(kernels.attrs["gpus"], option="--against's GPU")
    print(said, file=sys.stderr)
    check = against(ops, time_on(gpu, ops, floor=False), kernels)
    check.attrs["gpu"], check.attrs["roofs"] = gpu.label, gpu.provenance
    return check, disagreements(check) + list(kernels.attrs["warnings"])


JSON_FORMAT, JSON_VERSION = "ceilings.predict", 1  # a new field keeps the version; a changed one raises it


def json_document(args, table: pd.DataFrame, gpus: Sequence[Roofs], ops: pd.DataFrame, views: int,
                  unknown: pd.Series, check: pd.DataFrame | None = None) -> str:
    """--json: base units; a value not known is null, never 0."""
    doc = {"format": JSON_FORMAT, "version": JSON_VERSION, "spec": args.spec,
           "step": "training step" if args.train else "forward pass", "by": args.by,
           "left_out": _left_out(args),
           "kernels": len(ops), "views_and_allocations": views,
           "unmodelled": {op: int(n) for op, n in unknown.items()},
           # sums over the modelled ops only: where some are not, the totals are of those (named so)
           "modelled_flops": ops["flops"].sum(), "modelled_bytes": ops["bytes"].sum(),
           "gpus": [{"gpu": g.label, "roofs": g.provenance,
                     ("time_s_estimate" if args.calibrate else "time_s_lower_bound"):
                         table[f"time_s {g.label}"].sum(min_count=1)} for g in gpus],
           "rows": table.to_dict("records")}
    if check is not None:  # --against: per class of op, the prediction beside the trace
        doc["against"] = {"trace": args.against, "gpu": check.attrs["gpu"], "roofs": check.attrs["roofs"],
                          "classes": check.to_dict("records"), "calibrated": check.attrs.get("calibrated")}
    return json_text(doc)


def render(table: pd.DataFrame, gpus: Sequence[Roofs], ops: pd.DataFrame, calibrated: str | None = None) -> str:
    """The table for a terminal: per row its calls, FLOPs, bytes and time on each GPU; the totals first.
    `calibrated`: the trace whose efficiencies scaled the times."""
    how = f"calibrated by the efficiencies of {calibrated} (an estimate)" if calibrated else \
        "at the roofs (a lower bound)"
    lines = [f"{g.label}: {g.provenance}; {seconds(table[f'time_s {g.label}'].sum())} {how}" for g in gpus]
    lines += [f"total: {si(ops['flops'].sum(), 'FLOP')}, {si(ops['bytes'].sum(), 'B')} (modelled ops)", ""]
    name = table.columns[0]
    rows = [[str(r[name])[:60], str(r["calls"]), si(r["flops"], "FLOP"), si(r["bytes"], "B"),
             *(seconds(r[f"time_s {g.label}"]) for g in gpus)] for r in table.to_dict("records")]
    return "\n".join(lines) + "\n" + aligned([name, "calls", "FLOPs", "bytes", *(g.device[:24] for g in gpus)], rows,
                                             left={name})


if __name__ == "__main__":
    sys.exit(main())

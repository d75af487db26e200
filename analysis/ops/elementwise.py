"""Op models of the memory-bound torch.profiler ops: element-wise, norms, softmax, reductions, embeddings,
losses, copies and optimizers (analysis.ops joins this module's `OPS` to the others').

No PyTorch counter gives these a number (FlopCounterMode and `with_flops` count matrix ops only), so the FLOP
counts are this project's, from each op's defining formula: every + - * / and comparison is 1, every special
function (exp, log, erf, tanh, sqrt, rsqrt, pow) is 1, a copy, cast, fill or index is 0. docs/torch.md tables
the count of every op. Integer and bool arithmetic is no floating-point work: 0 FLOPs (its bytes still place
it). Half-precision element-wise math runs in fp32 in PyTorch's kernels (their `opmath_t`). Bytes as
analysis.ops.base says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from .base import (
    STAT_DTYPE,
    Args,
    OpWork,
    broadcast,
    category,
    dtype_arg,
    flops_of,
    precision_of,
    promote,
    size_of,
    total_of,
)

# --- op models -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Elementwise:
    """An op computing each output element from the operands at `reads` (broadcast): `flops` per output
    element. `like`: the output has that argument's shape and dtype (in-place ops: `self`, written as well
    as read if it is in `reads`); else the broadcast shape, in `out` (comparisons: bool), in the dtype of a
    dtype argument (`dtype_at`, by argument count), or torch's promotion of the operands. `floating`: an
    integer result is fp32 (true division, exp...); `half_to_float`: a bool argument making it fp32."""

    flops: int
    reads: tuple[int, ...] = (0,)
    like: int | None = None
    out: str | None = None
    floating: bool = False
    dtype_at: Mapping[int, int] | None = None
    half_to_float: int | None = None

    def work(self, x: Args) -> OpWork | None:
        tensors = [t for i in self.reads if (t := x.operand(i)) is not None]
        # the dtype the work is done in: the operands', and the tensor written in place
        computed = promote(x, self.reads if self.like is None else (*self.reads, self.like))
        if self.floating and computed is not None and category(computed) < 2:
            computed = "float"
        if self.like is not None:
            target = x.operand(self.like)
            if target is None:
                return None
            shape, dtype = target
            written = x.read(self.like) if target[0] else size_of([], dtype)
        else:
            shape = broadcast([t[0] for t in tensors])
            if shape is None or computed is None:
                return None
            dtype = self.out or computed
            if self.dtype_at is not None:
                dtype = dtype_arg(x, self.dtype_at, dtype)
            if self.half_to_float is not None and x.value(self.half_to_float) is True:
                dtype = "float"
            if dtype is None:  # a cast to a dtype not recorded: the copy_ inside it says more
                return None
            written = size_of(shape, dtype)
        reads = [x.read(i) for i in self.reads]
        return OpWork(flops_of(self.flops, math.prod(shape), computed), precision_of(computed),
                      total_of(*reads, written))


def inplace(rule: Elementwise) -> Elementwise:
    """The in-place variant (add_) of an out-of-place rule: `self` is read and written."""
    return replace(rule, like=0, reads=rule.reads if 0 in rule.reads else (0, *rule.reads))


@dataclass(frozen=True)
class Norm:
    """A normalisation of `input` (position 0) by statistics over groups of its elements: `stats` FLOPs per
    element to compute them (0: given, as eval-mode batch norm's running stats), `normalise` to apply them,
    1 more per element for each of `weight` and `bias` present. The groups: the last dims (`shape`: the
    normalized_shape argument, else the weight's shape), the channels (dim 1), or N x groups (`groups`).
    `saved`: statistics per group it writes for the backward pass (mean, rstd); `training`: a bool argument
    whose False means no statistics are computed, none saved, and the running ones (`running`) only read."""

    stats: int
    normalise: int
    weight: int | None
    bias: int | None
    saved: int
    shape: int | None = None
    groups: int | None = None
    training: int | None = None
    running: tuple[int, ...] = ()

    def work(self, x: Args) -> OpWork | None:
        inp = x.operand(0)
        if inp is None or not inp[0]:
            return None
        shape, dtype = inp
        count = self._groups(x, shape)
        training = True if self.training is None else x.value(self.training)
        if count is None or not isinstance(training, bool):
            return None
        per = (self.stats if training else 0) + self.normalise + sum(x.operand(i) is not None
                                                                     for i in (self.weight, self.bias))
        stat = "double" if dtype == "double" else STAT_DTYPE
        running = [x.read(i) for i in self.running] * (2 if training else 1)  # updated: read and written
        saved = size_of([count * self.saved], stat) if training else 0
        reads = [x.read(i) for i in (0, self.weight, self.bias) if i is not None]
        return OpWork(flops_of(per, math.prod(shape), dtype), precision_of(dtype),
                      total_of(*reads, *running, size_of(shape, dtype), saved))

    def _groups(self, x: Args, shape: list[int]) -> int | None:
        if self.shape is not None:
            normalized = x.value(self.shape)
            if not isinstance(normalized, list):
                weight = x.operand(self.weight)
                normalized = weight[0] if weight is not None else None
            if normalized is None or len(normalized) > len(shape) or shape[len(shape) - len(normalized):] != normalized:
                return None
            return math.prod(shape[:len(shape) - len(normalized)])
        if self.groups is not None:
            groups = x.value(self.groups)
            return shape[0] * groups if isinstance(groups, int) and len(shape) >= 2 else None
        return shape[1] if len(shape) >= 2 else None


@dataclass(frozen=True)
class NormBackward:
    """The backward of a Norm: from grad (of input's shape) and the saved statistics (`stats` positions,
    read), the input's gradient (`dx` FLOPs per element, 1 more with a weight: dy * w), the weight's (2: a
    sum of dy * x_hat) and the bias' (1: a sum of dy), each where `mask` (output_mask) asks for it; without
    a recorded mask, the input's and those of the weight present."""

    grad: int
    input: int
    stats: tuple[int, ...]
    weight: int | None
    mask: int | None
    dx: int

    def work(self, x: Args) -> OpWork | None:
        inp, weight = x.operand(self.input), x.operand(self.weight)
        if inp is None or not inp[0]:
            return None
        shape, dtype = inp
        mask = x.value(self.mask)
        if not (isinstance(mask, list) and len(mask) == 3):
            mask = [True, weight is not None, weight is not None]
        mask = [bool(m) for m in mask]
        per = mask[0] * (self.dx + (weight is not None)) + 2 * mask[1] + mask[2]
        param = size_of(weight[0], weight[1]) if weight is not None else 0
        written = [size_of(shape, dtype) if mask[0] else 0] + [param if m else 0 for m in mask[1:]]
        reads = [x.read(i) for i in (self.grad, self.input, *self.stats, self.weight) if i is not None]
        return OpWork(flops_of(per, math.prod(shape), dtype), precision_of(dtype), total_of(*reads, *written))


@dataclass(frozen=True)
class Reduction:
    """A reduction of `self` (position 0): `flops` per input element. `overloads`: by the recorded argument
    count, the positions of its dim and dtype arguments, dim None for a reduction of everything; a count not
    listed is not this reduction (max(self, other) is element-wise). `out`: the result's dtype when fixed
    (argmax: int64); `widens`: integers and bools sum into int64 (sum, prod); `indices`: with a dim it also
    writes int64 indices (max.dim). Where the dims are not recorded (older traces) the output is left out of
    the bytes: they stay a lower bound."""

    flops: int
    overloads: Mapping[int, tuple[int | None, int | None]]
    out: str | None = None
    widens: bool = False
    indices: bool = False

    def work(self, x: Args) -> OpWork | None:
        inp = x.operand(0)
        if inp is None or len(x.types) not in self.overloads:
            return None
        shape, dtype = inp
        dim_at, dtype_at = self.overloads[len(x.types)]
        default = self.out or ("long int" if self.widens and category(dtype) < 2 else dtype)
        out_dtype = dtype_arg(x, {len(x.types): dtype_at}, default) if dtype_at is not None else default
        dim = None if dim_at is None or x.omitted(dim_at) else x.value(dim_at)
        if dim_at is not None and not x.omitted(dim_at) and dim is None:
            written = 0  # the reduced dims are not recorded
        else:
            dims = [] if dim is None else [dim] if isinstance(dim, int) else dim
            reduced = {d % len(shape) for d in dims} if shape else set()
            kept = [n for i, n in enumerate(shape) if reduced and i not in reduced]  # no dims: all reduced
            written = None if out_dtype is None else size_of(kept, out_dtype)
            if self.indices and dim is not None and written is not None:
                written += size_of(kept, "long int")
        return OpWork(flops_of(self.flops, math.prod(shape), dtype), precision_of(dtype), total_of(x.read(0), written))


@dataclass(frozen=True)
class Gather:
    """Copies of indexed elements: 0 FLOPs; reads the index and the gathered elements, writes them.
    embedding(weight, indices): rows of the table, [*indices, D]; index_select(self, dim, index): `self` with
    dim cut to the index's length; gather(self, dim, index): the index's shape."""

    source: int
    index: int
    kind: str  # "embedding", "select" or "gather"
    dim: int | None = None

    def work(self, x: Args) -> OpWork | None:
        source, index = x.operand(self.source), x.operand(self.index)
        if source is None or index is None or not source[0]:
            return None
        shape, dtype = source
        if self.kind == "embedding":
            out = index[0] + shape[-1:]
        elif self.kind == "gather":
            out = index[0]
        else:
            dim = x.value(self.dim)
            if not isinstance(dim, int) or len(index[0]) > 1:
                return None
            out = list(shape)
            out[dim % len(shape)] = math.prod(index[0])
        copied = size_of(out, dtype)
        return OpWork(0.0, precision_of(dtype), total_of(x.read(self.index), copied, copied))


@dataclass(frozen=True)
class EmbeddingBackward:
    """embedding_dense_backward(grad_output, indices, num_weights, ...): each gradient row is added into the
    weight's gradient [num_weights, D], written whole (zeroed, then accumulated): 1 FLOP per grad element."""

    def work(self, x: Args) -> OpWork | None:
        grad, rows = x.operand(0), x.value(2)
        if grad is None or not grad[0] or not isinstance(rows, int):
            return None
        shape, dtype = grad
        return OpWork(flops_of(1, math.prod(shape), dtype), precision_of(dtype),
                      total_of(x.read(0), x.read(1), size_of([rows, shape[-1]], dtype)))


@dataclass(frozen=True)
class Loss:
    """Negative log-likelihood of `self` ([N, C] or [C] log-probabilities; cross_entropy: logits) at
    `target` (with its weight and reduction after it): `per_row` FLOPs per target value (pick, weigh, sum),
    plus `per_element` per input element (cross entropy's log_softmax: 5). Reads the target, the weight, and
    the input's elements it uses (all with per_element, else one per row); writes the loss: one value per
    row with reduction 0 ('none'), else 1 (also when not recorded)."""

    per_row: int
    per_element: int = 0

    def work(self, x: Args) -> OpWork | None:
        inp, target = x.operand(0), x.operand(1)
        if inp is None or target is None or not inp[0]:
            return None
        shape, dtype = inp
        rows = math.prod(target[0])
        used = size_of(shape if self.per_element else [rows], dtype)
        out = size_of([rows if x.value(3) == 0 else 1], dtype)
        flops = flops_of(self.per_row, rows, dtype) + flops_of(self.per_element, math.prod(shape), dtype)
        return OpWork(flops, precision_of(dtype), total_of(used, x.read(1), x.read(2), out))


@dataclass(frozen=True)
class LossBackward:
    """nll_loss_backward(grad_output, self, target, weight, ...): the input's gradient written whole (zeroed,
    then -w * grad / total at each target: 1 FLOP per target value); reads grad_output, target, weight."""

    def work(self, x: Args) -> OpWork | None:
        inp, target = x.operand(1), x.operand(2)
        if inp is None or target is None or not inp[0]:
            return None
        shape, dtype = inp
        return OpWork(flops_of(1, math.prod(target[0]), dtype), precision_of(dtype),
                      total_of(x.read(0), x.read(2), x.read(3), size_of(shape, dtype)))


@dataclass(frozen=True)
class ForEach:
    """A _foreach_* op: `each`, the element-wise op it runs, on every tensor of its lists (position by
    position, as the single-tensor op's schema)."""

    each: Elementwise

    def work(self, x: Args) -> OpWork | None:
        n = x.list_length()
        if n is None or any(kind == "TensorList" and len(x.dims[i]) != n for i, kind in enumerate(x.types)):
            return None
        parts = [self.each.work(x.elements(k)) for k in range(n)]
        if any(p is None for p in parts):
            return None
        return OpWork(sum(p.flops for p in parts), parts[0].precision, total_of(*(p.bytes for p in parts)),
                      x.lists_assumed())


@dataclass(frozen=True)
class Optimizer:
    """A fused optimizer step over tensor lists, the parameters first: `flops` per parameter element, plus
    `decay` when weight_decay (`decay_at`) is recorded non-zero, plus 1 for each of `extra` given (a tensor,
    e.g. grad_scale: an unscale). Per element each list of `reads` is read and each of `writes` written;
    an `optional` list present (amsgrad's max_exp_avg_sqs, SGD's momentum buffers) is read and written too,
    for `optional_flops` more."""

    flops: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    decay_at: int
    decay: int
    extra: tuple[int, ...] = ()
    optional: tuple[int, ...] = ()
    optional_flops: int = 0

    def work(self, x: Args) -> OpWork | None:
        n = x.list_length()
        if n is None or any(len(x.dims[i]) != n for i in (*self.reads, *self.writes)):
            return None
        elements = sum(math.prod(shape) for shape in x.dims[0])
        present = sum(len(x.dims[i]) == n for i in self.optional)
        decay = x.value(self.decay_at)
        per = (self.flops + (self.decay if isinstance(decay, (int, float)) and decay != 0 else 0)
               + sum(x.operand(i) is not None for i in self.extra) + self.optional_flops * present)
        lists = [*self.reads, *self.writes, *(2 * [i for i in self.optional if len(x.dims[i]) == n])]
        dtype = x.list_dtype(0)
        return OpWork(flops_of(per, elements, dtype), precision_of(dtype),
                      total_of(*(size_of([elements], x.list_dtype(i)) for i in lists)), x.lists_assumed())


@dataclass(frozen=True)
class TopK:
    """topk(self, k, dim=-1, largest, sorted): a compare per input element (selection); reads self, writes the k
    values (self's dtype) and their int64 indices along `dim`."""

    def work(self, x: Args) -> OpWork | None:
        inp, k, dim = x.operand(0), x.value(1), x.value(2)
        dim = -1 if dim is None else dim
        if inp is None or not inp[0] or type(k) is not int or type(dim) is not int or \
                not -len(inp[0]) <= dim < len(inp[0]):
            return None
        shape, dtype = inp
        out = [*shape[:dim % len(shape)], k, *shape[dim % len(shape) + 1:]]
        return OpWork(flops_of(1, math.prod(shape), dtype), precision_of(dtype),
                      total_of(x.read(0), size_of(out, dtype), size_of(out, "long int")))


@dataclass(frozen=True)
class SelectBackward:
    """select_backward(grad_output, input_sizes, dim, index): a tensor of input_sizes, zeros but for the slice
    the gradient is copied into: grad_output read, the whole output written once, 0 FLOPs."""

    def work(self, x: Args) -> OpWork | None:
        grad, sizes = x.operand(0), x.value(1)
        if grad is None or not (isinstance(sizes, list) and all(type(n) is int and n >= 0 for n in sizes)):
            return None
        return OpWork(0.0, precision_of(grad[1]), total_of(x.read(0), size_of(sizes, grad[1])))


@dataclass(frozen=True)
class Concat:
    """cat/stack of a tensor list: every element read and written once, 0 FLOPs."""

    def work(self, x: Args) -> OpWork | None:
        if x.list_length() is None:
            return None
        elements, dtype = sum(math.prod(shape) for shape in x.dims[0]), x.list_dtype(0)
        return OpWork(0.0, precision_of(dtype), total_of(*2 * [size_of([elements], dtype)]), x.lists_assumed())


# --- the table -------------------------------------------------------------------------------------------

# FLOPs per output element of the element-wise ops, from their formulas (docs/torch.md shows each)
_BINARY = Elementwise(1, reads=(0, 1))
_COMPARE = Elementwise(1, reads=(0, 1), out="bool")
_UNARY = Elementwise(1)
_SPECIAL = Elementwise(1, floating=True)  # exp, log, sqrt...: an integer input gives a float result
ELEMENTWISE: dict[str, Elementwise] = {
    "add": _BINARY, "sub": _BINARY, "mul": _BINARY, "rsub": _BINARY, "maximum": _BINARY, "minimum": _BINARY,
    "div": Elementwise(1, reads=(0, 1), floating=True),
    "pow": Elementwise(1, reads=(0, 1)),  # Tensor_Scalar (exponent a Scalar) and Tensor_Tensor
    "eq": _COMPARE, "ne": _COMPARE, "lt": _COMPARE, "le": _COMPARE, "gt": _COMPARE, "ge": _COMPARE,
    "logical_and": _COMPARE, "logical_or": _COMPARE, "logical_not": Elementwise(1, out="bool"),
    "neg": _UNARY, "abs": _UNARY, "sgn": _UNARY, "sign": _UNARY, "relu": _UNARY, "square": _UNARY,
    "clamp_min": _UNARY, "clamp_max": _UNARY, "threshold": _UNARY,
    "clamp": Elementwise(2), "hardtanh": Elementwise(2),  # a min and a max
    "leaky_relu": Elementwise(2),  # a compare, a multiply
    "exp": _SPECIAL, "log": _SPECIAL, "log2": _SPECIAL, "log1p": _SPECIAL, "sqrt": _SPECIAL, "rsqrt": _SPECIAL,
    "reciprocal": _SPECIAL, "tanh": _SPECIAL, "erf": _SPECIAL, "sin": _SPECIAL, "cos": _SPECIAL,
    "sigmoid": Elementwise(4, floating=True),  # 1 / (1 + exp(-x)): neg, exp, add, div
    "silu": Elementwise(4, floating=True),  # x / (1 + exp(-x))
    # x/2 * (1 + erf(x / sqrt 2)): 5. The tanh form would be 9, but a trace does not record `approximate`
    "gelu": Elementwise(5, floating=True),
    "where": Elementwise(1, reads=(0, 1, 2)),  # a select
    "addcmul": Elementwise(3, reads=(0, 1, 2)), "addcdiv": Elementwise(3, reads=(0, 1, 2)),  # self + v * a (*/) b
    "lerp": Elementwise(3, reads=(0, 1, 2)),  # self + w * (end - self)
    "threshold_backward": _BINARY,  # grad where x > threshold: a compare-select
    "sigmoid_backward": Elementwise(3, reads=(0, 1)),  # grad * y * (1 - y)
    "tanh_backward": Elementwise(3, reads=(0, 1)),  # grad * (1 - y * y)
    "silu_backward": Elementwise(9, reads=(0, 1)),  # s = sigmoid(x) (4); grad * s * (1 + x * (1 - s)) (5)
    # grad * (cdf + x * pdf): cdf 4 (x / sqrt 2, erf, + 1, / 2), pdf 4 (x * x, * -1/2, exp, / sqrt(2 pi)), 3
    "gelu_backward": Elementwise(11, reads=(0, 1)),
    # copies, casts and fills: bytes only
    "copy_": Elementwise(0, reads=(1,), like=0), "fill_": Elementwise(0, reads=(), like=0),
    "zero_": Elementwise(0, reads=(), like=0), "clone": Elementwise(0), "contiguous": Elementwise(0),
    "ones_like": Elementwise(0, reads=(), like=0), "zeros_like": Elementwise(0, reads=(), like=0),
    "bernoulli_": Elementwise(1, reads=(), like=0),  # dropout's mask in place: a random draw compared with p
    "masked_fill": Elementwise(0, reads=(0, 1), like=0), "masked_fill_": Elementwise(0, reads=(1,), like=0),
    # to(self, dtype, ...), to(self, device, dtype, ...), to(self, other, ...); _to_copy(self, dtype, ...)
    "to": Elementwise(0, dtype_at={8: 1, 5: 1, 6: 2}), "_to_copy": Elementwise(0, dtype_at={7: 1}),
    # softmax: max, subtract, exp, sum, divide; log_softmax: max, subtract, exp, sum, subtract the log
    "softmax": Elementwise(5, floating=True, dtype_at={3: 2}),
    "log_softmax": Elementwise(5, floating=True, dtype_at={3: 2}),
    # softmax that gives 0 where a row is all masked (-inf): the math attention path's (torch >= 2.5)
    "_safe_softmax": Elementwise(5, floating=True, dtype_at={3: 2}),
    "_softmax": Elementwise(5, floating=True, half_to_float=2),
    "_log_softmax": Elementwise(5, floating=True, half_to_float=2),
    # y * (dy - sum(dy * y)): mul, sum, sub, mul; dy - exp(y) * sum(dy): sum, exp, mul, sub
    "_softmax_backward_data": Elementwise(4, reads=(0, 1), dtype_at={4: 3}),
    "_log_softmax_backward_data": Elementwise(4, reads=(0, 1), dtype_at={4: 3}),
}
# the in-place variants (add_) that PyTorch has, counted as their op
INPLACE = ("add", "sub", "mul", "div", "pow", "neg", "abs", "relu", "square", "clamp", "clamp_min",
           "clamp_max", "threshold", "hardtanh", "leaky_relu", "exp", "log", "log2", "sqrt", "rsqrt", "reciprocal",
           "tanh", "sigmoid", "silu", "gelu", "addcmul", "addcdiv", "lerp")
FOREACH = ("add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "neg", "abs", "exp", "reciprocal",
           "sign", "clamp_min", "clamp_max", "maximum", "pow")
FOREACH_INPLACE = ("add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "neg", "abs", "exp",
                   "reciprocal", "sign", "clamp_min", "clamp_max", "maximum", "pow", "zero", "copy")

# ops of older torch that today's schemas no longer have (the schema test cannot check their positions)
REMOVED_OPS = frozenset({"aten::_cat"})
# (dim, dtype) positions by argument count
_SUM = {4: (1, 3), 5: (1, 3), 2: (None, 1)}  # sum.dim_IntList(self, dim, keepdim, dtype[, out]), sum(self, dtype)
_VAR = {4: (1, None), 2: (None, None)}  # var.dim / var.correction(self, dim, _, keepdim), var(self, unbiased)
_MAX = {3: (1, None), 1: (None, None)}  # max.dim(self, dim, keepdim), max(self)
_DIM = {3: (1, None)}  # amax(self, dim, keepdim), argmax(self, dim, keepdim), logsumexp(self, dim, keepdim)
_LAYER = dict(stats=3, normalise=2, saved=2, shape=1)  # mean and variance: x, x * x summed (3); (x - m) * r (2)
RMS = dict(stats=2, normalise=1, saved=1, shape=1, bias=None)  # x * x summed (2); x * r (1)
_BATCH = dict(stats=3, normalise=2, weight=1, bias=2, saved=2, training=5, running=(3, 4))
# dx = r * (g - mean(g) - x_hat * mean(g * x_hat)), g = dy (* w): x_hat 2, sums 3, the rest 4
_DX, _DX_RMS = 9, 6  # RMS: x_hat 1, sum of g * x_hat 2, r * (g - x_hat * mean) 3

OPS: dict = {
    **{f"aten::{name}": rule for name, rule in ELEMENTWISE.items()},
    **{f"aten::{name}_": inplace(ELEMENTWISE[name]) for name in INPLACE},
    **{f"aten::_foreach_{name}": ForEach(ELEMENTWISE[name]) for name in FOREACH},
    **{f"aten::_foreach_{name}_": ForEach(inplace(ELEMENTWISE[name]) if name in ELEMENTWISE
                                          else ELEMENTWISE[f"{name}_"]) for name in FOREACH_INPLACE},
    "aten::layer_norm": Norm(weight=2, bias=3, **_LAYER),
    "aten::native_layer_norm": Norm(weight=2, bias=3, **_LAYER),
    "aten::rms_norm": Norm(weight=2, **RMS),
    "aten::_fused_rms_norm": Norm(weight=2, **RMS),
    "aten::batch_norm": Norm(**_BATCH),
    "aten::_batch_norm_impl_index": Norm(**_BATCH),
    "aten::native_batch_norm": Norm(**_BATCH),
    "aten::cudnn_batch_norm": Norm(**_BATCH),
    "aten::group_norm": Norm(stats=3, normalise=2, weight=2, bias=3, saved=2, groups=1),
    "aten::native_group_norm": Norm(stats=3, normalise=2, weight=1, bias=2, saved=2, groups=6),
    "aten::native_layer_norm_backward": NormBackward(grad=0, input=1, stats=(3, 4), weight=5, mask=7, dx=_DX),
    "aten::native_batch_norm_backward": NormBackward(grad=0, input=1, stats=(5, 6), weight=2, mask=9, dx=_DX),
    "aten::cudnn_batch_norm_backward": NormBackward(grad=1, input=0, stats=(5, 6), weight=2, mask=None, dx=_DX),
    "aten::native_group_norm_backward": NormBackward(grad=0, input=1, stats=(2, 3), weight=4, mask=9, dx=_DX),
    "aten::_fused_rms_norm_backward": NormBackward(grad=0, input=1, stats=(3,), weight=4, mask=5, dx=_DX_RMS),
    "aten::sum": Reduction(1, _SUM, widens=True),
    "aten::prod": Reduction(1, {4: (1, 3), 2: (None, 1)}, widens=True),  # prod.dim_int(self, dim, keepdim, dtype)
    "aten::mean": Reduction(1, _SUM),  # the sum; one divide per output is left out
    "aten::amax": Reduction(1, _DIM),  # a compare per element
    "aten::amin": Reduction(1, _DIM),
    "aten::max": Reduction(1, _MAX, indices=True),
    "aten::min": Reduction(1, _MAX, indices=True),
    "aten::argmax": Reduction(1, _DIM, out="long int"),
    "aten::argmin": Reduction(1, _DIM, out="long int"),
    "aten::var": Reduction(3, _VAR),  # x - mean, its square, summed
    "aten::std": Reduction(3, _VAR),
    # x * x summed (p = 2): norm(self, p), norm(self, p, dtype), norm(self, p, dim, keepdim[, dtype])
    "aten::norm": Reduction(2, {2: (None, None), 3: (None, 2), 4: (2, None), 5: (2, 4)}),
    "aten::linalg_vector_norm": Reduction(2, {5: (2, 4)}),  # (self, ord, dim, keepdim, dtype)
    "aten::logsumexp": Reduction(4, _DIM),  # max, subtract, exp, sum
    "aten::embedding": Gather(source=0, index=1, kind="embedding"),
    "aten::index_select": Gather(source=0, index=2, kind="select", dim=1),
    "aten::gather": Gather(source=0, index=2, kind="gather"),
    "aten::embedding_dense_backward": EmbeddingBackward(),
    "aten::embedding_backward": EmbeddingBackward(),
    "aten::cross_entropy_loss": Loss(per_row=2, per_element=5),  # log_softmax (5 per element), then nll
    "aten::nll_loss": Loss(per_row=2),
    "aten::nll_loss_nd": Loss(per_row=2),
    "aten::nll_loss_forward": Loss(per_row=2),
    "aten::nll_loss_backward": LossBackward(),
    "aten::cat": Concat(),
    "aten::stack": Concat(),
    "aten::_cat": Concat(),  # torch 1.x's cat (REMOVED_OPS)
    "aten::concat": Concat(), "aten::concatenate": Concat(),
    "aten::select_backward": SelectBackward(),
    "aten::topk": TopK(),
    # m = b1 m + (1 - b1) g (3), v = b2 v + (1 - b2) g g (4), sqrt(v) / sqrt(bc2) + eps (3),
    # p -= lr / bc1 * m / denom (3); weight decay: g += wd p (2), AdamW p *= 1 - lr wd (1); amsgrad's max (1),
    # grad_scale's unscale (1). Reads p, g, m, v; writes p, m, v
    "aten::_fused_adam_": Optimizer(13, reads=(0, 1, 2, 3), writes=(0, 2, 3), decay_at=9, decay=2, extra=(13,),
                                    optional=(4,), optional_flops=1),
    "aten::_fused_adamw_": Optimizer(13, reads=(0, 1, 2, 3), writes=(0, 2, 3), decay_at=9, decay=1, extra=(13,),
                                     optional=(4,), optional_flops=1),
    # p -= lr g (2); weight decay g += wd p (2); momentum buf = m buf + (1 - d) g (3, with the buffers)
    "aten::_fused_sgd_": Optimizer(2, reads=(0, 1), writes=(0,), decay_at=3, decay=2, extra=(10,), optional=(2,),
                                   optional_flops=3),
}

"""FLOPs and algorithmic bytes of a torch.profiler op, rebuilt from the shapes its chrome trace recorded.

An exported trace carries no FLOPs, even with `with_flops=True` (they exist only in `key_averages()`), so they
are rebuilt here from a cpu_op's "Input Dims", "Input type" and "Concrete Inputs", with PyTorch's own rules:
`computeFlops` in torch/csrc/profiler/util.cpp (what `with_flops=True` counts) and `torch.utils.flop_counter`
(FlopCounterMode). `MATRIX_OPS` says, per op name, where the op's arguments are (by position in its aten
schema) and which rule counts it:

- GEMMs: 2*m*k*n per matrix product, batch and broadcast dimensions multiplying it. The added tensor of
  addmm/baddbmm/linear (bias, beta*self) and alpha/beta are not counted: both PyTorch counters leave them out.
- Convolutions: 2 * batch * prod(weight shape) * prod(output spatial), or prod(input spatial) when transposed
  (flop_counter's conv_flop_count; util.cpp's conv2d formula is the same number). Bias is not counted.
- Attention: 2*L*S*(E + Ev) per batch and head (flop_counter's sdpa_flop_count; grouped-query attention
  counts the query's heads). flop_counter ignores is_causal ("NB: We aren't accounting for causal attention
  here") and counts the whole L x S score matrix. Two conventions (FLOP_CONVENTIONS): "executed", the
  default, counts only the unmasked pairs of the causal mask sdpa documents, aligned to the top left: query i
  sees keys 0..i, which is L*(L+1)/2 of L*L pairs when L == S (the work the masked attention needs; about
  half of torch's count); "torch" counts every pair, as FlopCounterMode does. The math variant computes
  every pair either way (its aten::bmm children say so). Softmax, scaling, dropout and the mask add
  are not counted (nor by PyTorch).

`with_flops=True` also counts aten::add and aten::mul as the element count of their first input; that rule
undercounts broadcasts (a [1] + [n] add is 1 FLOP to it), ignores alpha, and skips the in-place add_/mul_
that dominate training traces. They, and every other memory-bound op (element-wise, norms, softmax,
reductions, embeddings, losses, copies, optimizers), are modelled in analysis.ops.elementwise; analysis.ops
joins every table into `OPS`: `MATRIX_OPS` holds the ones here.

A number is the work of that one call, including the ops it calls: aten::linear's is that of the aten::addmm
or aten::matmul inside it, aten::conv2d's that of its aten::convolution -> aten::_convolution ->
aten::cudnn_convolution chain, and the math attention variant calls aten::bmm. A sum over a trace must take
one op per call tree (the outermost one in `OPS` with a number), else it counts the same work two to four
times.

Bytes are ALGORITHMIC: every tensor input and the output, elements x dtype size from the recorded shapes, the
least traffic the op can have (not what DRAM saw). An expanded (stride-0) input counts at its full shape, as
recorded. Auxiliary outputs that attention variants keep for the backward pass (logsumexp, RNG state, the
math variant's attention weights) are not counted: they are not the attention's result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import DTYPES, Args, OpWork, precision_of, size_of, total_of


def _work(flops: int, tensors: list[tuple[list[int], str]], out_shape: list[int] | None) -> OpWork:
    """The op's work: `flops`, the precision of its first tensor, and the bytes of `tensors` plus an output of
    `out_shape` in the first tensor's dtype (out_shape None: the output's dtype is not the inputs')."""
    dtype = tensors[0][1]
    precision = DTYPES[dtype][0] if dtype in DTYPES else None
    if out_shape is None or any(t not in DTYPES for _, t in tensors):
        return OpWork(float(flops), precision, None)
    inputs = sum(math.prod(shape) * DTYPES[t][1] for shape, t in tensors)
    return OpWork(float(flops), precision, float(inputs + math.prod(out_shape) * DTYPES[dtype][1]))


def _matmul(a: list[int], b: list[int]) -> tuple[int, list[int]] | None:
    """FLOPs and output shape of torch.matmul(a, b): a vector operand is one row (a) or one column (b), batch
    dimensions broadcast."""
    if not a or not b:
        return None
    m, k = (a[-2], a[-1]) if len(a) > 1 else (1, a[0])
    k2, n = (b[-2], b[-1]) if len(b) > 1 else (b[0], 1)
    batch_a, batch_b = a[:-2], b[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = [1] * (width - len(batch_a)) + batch_a
    batch_b = [1] * (width - len(batch_b)) + batch_b
    if k != k2 or any(x != y and 1 not in (x, y) for x, y in zip(batch_a, batch_b)):
        return None
    batch = [max(x, y) for x, y in zip(batch_a, batch_b)]
    out = batch + a[-2:-1] + b[-1:] if len(b) > 1 else batch + a[-2:-1]
    return 2 * math.prod(batch) * m * k * n, out


@dataclass(frozen=True)
class Gemm:
    """A matrix product a @ b (+ c). Argument positions; `ranks` the ranks a and b must have (None: matmul's
    any); `args` the default overload's argument count: the .dtype overloads add an out_dtype, and their
    output dtype is not the input's."""

    a: int
    b: int
    args: int
    c: int | None = None
    ranks: tuple[int, int] | None = None
    b_transposed: bool = False  # linear's weight is [out, in]

    def work(self, x: Args) -> OpWork | None:
        a, b = x.tensor(self.a), x.tensor(self.b)
        if a is None or b is None or (self.ranks is not None and (len(a[0]), len(b[0])) != self.ranks):
            return None
        product = _matmul(a[0], b[0][::-1] if self.b_transposed else b[0])
        if product is None:
            return None
        flops, out = product
        c = x.tensor(self.c)
        tensors = [a, b] + ([c] if c is not None else [])
        return _work(flops, tensors, out if len(x.types) == self.args else None)


@dataclass(frozen=True)
class Conv:
    """A convolution. Argument positions (schemas differ: cudnn_convolution has padding before stride and no
    bias); `transposed` for ops that always are, `transposed_arg` where the op takes it as an argument."""

    stride: int
    padding: int
    dilation: int
    groups: int
    bias: int | None = 2
    output_padding: int | None = None
    transposed: bool = False
    transposed_arg: int | None = None

    def work(self, x: Args) -> OpWork | None:
        inp, weight = x.tensor(0), x.tensor(1)
        if inp is None or weight is None or len(weight[0]) < 3:
            return None
        spatial = len(weight[0]) - 2
        # conv1d/2d/3d and conv_transpose*d also take an unbatched input: one rank less than the weight
        batched = len(inp[0]) == len(weight[0])
        if not batched and len(inp[0]) != len(weight[0]) - 1:
            return None
        shape = inp[0] if batched else [1] + inp[0]
        transposed = x.value(self.transposed_arg) if self.transposed_arg is not None else self.transposed
        groups = x.value(self.groups)
        n, c_in, sizes = shape[0], shape[1], shape[2:]
        w_out, w_in, kernel = weight[0][0], weight[0][1], weight[0][2:]
        derived = x.derived.output if x.derived is not None and groups is None and not transposed else None
        if derived is not None:
            # torch <= 1.11 recorded no stride, padding, dilation or groups, but the output (its backward's
            # grad_output; only cudnn_convolution_backward, a convolution that is not transposed, shows one)
            # fixes the work without them. The weight's C_in still has to divide the input's (into groups), and
            # the output may not outgrow the input by more than a padding below the kernel's size allows (out <=
            # in + k - 1, at stride and dilation 1): a larger one is not a convolution's, and gets no work.
            out, transposed, c_out = list(derived)[-spatial:], False, w_out
            ok = len(out) == spatial and all(isinstance(o, int) for o in out) and w_in >= 1 and c_in % w_in == 0 \
                and all(o <= i + k - 1 for o, i, k in zip(out, sizes, kernel))
        else:
            lists = [x.value(self.stride), x.value(self.padding), x.value(self.dilation)]
            lists.append(x.value(self.output_padding) if transposed else [0])  # only a transposed one has it
            # aten::convolution repeats a one-value list over every spatial dimension
            lists = [v * spatial if isinstance(v, list) and len(v) == 1 else v for v in lists]
            if not isinstance(transposed, bool) or not isinstance(groups, int) or groups < 1:
                return None
            if not all(isinstance(v, list) and len(v) == spatial and all(isinstance(e, int) for e in v)
                       for v in lists):
                return None
            stride, padding, dilation, output_padding = lists
            if transposed:  # weight [C_in, C_out/groups, k...]
                c_out = w_in * groups
                out = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1
                       for i, s, p, d, k, o in zip(sizes, stride, padding, dilation, kernel, output_padding)]
                ok = c_in == w_out
            else:  # weight [C_out, C_in/groups, k...]
                c_out = w_out
                out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 if s > 0 else 0
                       for i, s, p, d, k in zip(sizes, stride, padding, dilation, kernel)]
                ok = c_in == w_in * groups
        if not ok or min(out) < 1:
            return None
        flops = 2 * n * math.prod(weight[0]) * math.prod(sizes if transposed else out)
        bias = x.tensor(self.bias)
        tensors = [inp, weight] + ([bias] if bias is not None else [])
        return _work(flops, tensors, ([n] if batched else []) + [c_out] + out)


@dataclass(frozen=True)
class ConvBackward:
    """aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask): the input's gradient and the weight's each cost the forward's FLOPs
    (2 x N x weight elements x output positions, the input's for a transposed one), as torch's FlopCounterMode
    counts them, for the gradients `output_mask` asks; the bias gradient, a sum, adds bytes only. Reads
    grad_output, and the input for the weight's gradient and the weight for the input's; writes the gradients."""

    def work(self, x: Args) -> OpWork | None:
        grad, inp, weight = x.tensor(0), x.tensor(1), x.tensor(2)
        mask, transposed = x.value(10), x.value(7)
        if grad is None or inp is None or weight is None or not isinstance(transposed, bool) or not (
                isinstance(mask, list) and len(mask) == 3 and all(isinstance(m, bool) for m in mask)):
            return None
        (g, dtype), (i, _), (w, _) = grad, inp, weight
        if not len(g) == len(i) == len(w) >= 3 or g[0] != i[0] or dtype not in DTYPES:
            return None
        forward = 2 * g[0] * math.prod(w) * math.prod(i[2:] if transposed else g[2:])
        size = DTYPES[dtype][1]
        reads = [g] + ([i] if mask[1] else []) + ([w] if mask[0] else [])
        writes = ([i] if mask[0] else []) + ([w] if mask[1] else []) + ([[g[1]]] if mask[2] else [])
        return OpWork(float(forward * (mask[0] + mask[1])), DTYPES[dtype][0],
                      float(sum(math.prod(t) for t in reads + writes) * size))


@dataclass(frozen=True)
class ConvBackwardPart:
    """cudnn_convolution_backward_input(self_size, grad_output, weight, ...) and _weight(weight_size,
    grad_output, self, ...) of torch <= 1.10: one gradient each, at the forward's FLOPs (2 x N x weight
    elements x output positions, as FlopCounterMode counts each gradient). The size argument (0) is a list
    that old traces do not record: the enclosing cudnn_convolution_backward's input or weight shape
    (Derived). Reads grad_output and the other operand (position 2), writes the gradient in its dtype."""

    gradient: str  # "input" or "weight"

    def work(self, x: Args) -> OpWork | None:
        grad, other, size = x.tensor(1), x.tensor(2), x.value(0)
        if grad is None or other is None or not isinstance(size, list) or grad[1] not in DTYPES:
            return None
        (g, dtype), (o, _) = grad, other
        weight = o if self.gradient == "input" else size
        if not len(g) == len(o) == len(size) >= 3 or not all(isinstance(e, int) for e in size):
            return None
        # cuDNN convolves operands of one dtype: grad_output's
        return _work(2 * g[0] * math.prod(weight) * math.prod(g[2:]), [grad, (o, dtype)], size)


@dataclass(frozen=True)
class Attention:
    """Scaled dot-product attention of q, k, v (positions 0, 1, 2: [..., L, E], [..., S, E], [..., S, Ev]);
    `is_causal` and `mask` (attn_mask / attn_bias) positions."""

    is_causal: int
    mask: int | None

    def work(self, x: Args) -> OpWork | None:
        q, k, v = x.tensor(0), x.tensor(1), x.tensor(2)
        shape = _attention_shape(x, q, k, v, x.value(self.is_causal))
        if shape is None:
            return None
        batch, length, pairs, e, ev = shape
        mask = x.tensor(self.mask)
        tensors = [q, k, v] + ([mask] if mask is not None else [])
        return _work(2 * math.prod(batch) * pairs * (e + ev), tensors, batch + [length, ev])


def _attention_shape(x: Args, q, k, v, causal) -> tuple[list[int], int, float, int, int] | None:
    """(batch dims, query length, query-key pairs counted, E, Ev) of an attention of q [..., L, E], k [..., S, E],
    v [..., S, Ev]; None where the shapes do not fit or the executed pairs need an is_causal not recorded."""
    if q is None or k is None or v is None or (x.convention == "executed" and not isinstance(causal, bool)):
        return None  # torch's count does not depend on is_causal; the executed pairs do
    (qs, _), (ks, _), (vs, _) = q, k, v
    if not len(qs) == len(ks) == len(vs) >= 2 or qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        return None
    # key/value heads broadcast (1) or are shared by groups of query heads (GQA): the query's count is the larger
    batch = [max(d) for d in zip(qs[:-2], ks[:-2], vs[:-2])]
    length, seen, e, ev = qs[-2], ks[-2], qs[-1], vs[-1]
    # query i sees keys 0..i (top-left aligned causal mask, as sdpa documents it)
    executed = causal is True and x.convention == "executed"
    pairs = sum(min(i + 1, seen) for i in range(length)) if executed else length * seen
    return batch, length, pairs, e, ev


@dataclass(frozen=True)
class AttentionBackward:
    """The fused backward of scaled dot-product attention (flash, memory-efficient, cuDNN: grad_out, q, k, v at
    positions 0-3), as torch's FlopCounterMode counts it (torch/utils/flop_counter.py, sdpa_backward_flop_count):
    the scores recomputed (2 x pairs x E), the output gradient through P @ V (two products, 2 x pairs x Ev each)
    and through Q @ K^T (two, 2 x pairs x E each): 2 x pairs x (3E + 2Ev) a batch-head, 2.5 times the forward.
    Reads grad_out and the tensors at `reads` (the output, the log-sum-exp, a mask) and q, k, v; writes their
    gradients."""

    is_causal: int
    reads: tuple[int, ...]

    def work(self, x: Args) -> OpWork | None:
        q, k, v = x.tensor(1), x.tensor(2), x.tensor(3)
        shape = _attention_shape(x, q, k, v, x.value(self.is_causal))
        grad = x.tensor(0)
        if shape is None or grad is None:
            return None
        batch, _, pairs, e, ev = shape
        read = [q, k, v, grad] + [t for i in self.reads if (t := x.tensor(i)) is not None and t[0]]
        return OpWork(float(2 * math.prod(batch) * pairs * (3 * e + 2 * ev)), precision_of(q[1]),
                      total_of(*(size_of(s, t) for s, t in (*read, q, k, v))))  # the gradients: q's, k's, v's


_CONV = Conv(stride=3, padding=4, dilation=5, groups=6)
_CONV_TRANSPOSE = Conv(stride=3, padding=4, output_padding=5, groups=6, dilation=7, transposed=True)
_CONVOLUTION = Conv(stride=3, padding=4, dilation=5, transposed_arg=6, output_padding=7, groups=8)

# op name -> where its arguments are and how it is counted; positions from the aten schemas (the tests check
# them against torch._C._jit_get_schemas_for_operator)
MATRIX_OPS: dict[str, Gemm | Conv | ConvBackward | ConvBackwardPart | Attention | AttentionBackward] = {
    "aten::mm": Gemm(a=0, b=1, args=2, ranks=(2, 2)),
    "aten::addmm": Gemm(c=0, a=1, b=2, args=5, ranks=(2, 2)),
    "aten::bmm": Gemm(a=0, b=1, args=2, ranks=(3, 3)),
    "aten::baddbmm": Gemm(c=0, a=1, b=2, args=5, ranks=(3, 3)),
    "aten::matmul": Gemm(a=0, b=1, args=2),
    "aten::linear": Gemm(a=0, b=1, c=2, args=3, b_transposed=True),
    # conv*d.padding (padding="same"/"valid") has the same name, but a trace does not record the string: None
    "aten::conv1d": _CONV,
    "aten::conv2d": _CONV,
    "aten::conv3d": _CONV,
    "aten::conv_transpose1d": _CONV_TRANSPOSE,
    "aten::conv_transpose2d": _CONV_TRANSPOSE,
    "aten::conv_transpose3d": _CONV_TRANSPOSE,
    "aten::convolution": _CONVOLUTION,
    "aten::_convolution": _CONVOLUTION,
    "aten::cudnn_convolution": Conv(padding=2, stride=3, dilation=4, groups=5, bias=None),
    "aten::cudnn_convolution_transpose": Conv(padding=2, output_padding=3, stride=4, dilation=5, groups=6,
                                              bias=None, transposed=True),
    "aten::convolution_backward": ConvBackward(),
    "aten::cudnn_convolution_backward_input": ConvBackwardPart("input"),
    "aten::cudnn_convolution_backward_weight": ConvBackwardPart("weight"),
    "aten::scaled_dot_product_attention": Attention(mask=3, is_causal=5),
    "aten::_scaled_dot_product_attention_math": Attention(mask=3, is_causal=5),
    "aten::_scaled_dot_product_flash_attention": Attention(mask=None, is_causal=4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": Attention(mask=5, is_causal=4),
    "aten::_scaled_dot_product_efficient_attention": Attention(mask=3, is_causal=6),
    "aten::_scaled_dot_product_cudnn_attention": Attention(mask=3, is_causal=6),
    # (grad_out, query, key, value, out, logsumexp, ..., is_causal, ...): the schemas' positions
    "aten::_scaled_dot_product_flash_attention_backward": AttentionBackward(is_causal=11, reads=(4, 5)),
    "aten::_scaled_dot_product_efficient_attention_backward": AttentionBackward(is_causal=11, reads=(4, 5, 6)),
    "aten::_scaled_dot_product_cudnn_attention_backward": AttentionBackward(is_causal=14, reads=(4, 5, 8)),
}


# how a causal attention's FLOPs are counted (the module's docstring): the default first
FLOP_CONVENTIONS = {"executed": "the unmasked pairs of the causal mask (about half of torch's count)",
                    "torch": "every query-key pair, as torch's FlopCounterMode counts them"}
# ops of torch <= 1.10 that today's schemas no longer have (positions from torch 1.9's; tests/test_torch_old.py)
REMOVED_OPS = frozenset(name for name, rule in MATRIX_OPS.items() if isinstance(rule, ConvBackwardPart))
ATTENTION_OPS = frozenset(name for name, rule in MATRIX_OPS.items()
                          if isinstance(rule, (Attention, AttentionBackward)))

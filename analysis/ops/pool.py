"""Op models of torch.profiler's pooling ops: max pooling with its indices, adaptive average pooling, and
their backward passes. Counted as analysis.ops.elementwise counts (a compare or an add is 1 FLOP; bytes are
algorithmic: what the op reads and writes once); analysis.ops joins `OPS` to its table."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import Args, OpWork, flops_of, precision_of, size_of, total_of


@dataclass(frozen=True)
class MaxPool:
    """max_pool{1,2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) over the last
    `dims` dims: a compare per window element; reads the input, writes the output and its int64 indices. The
    output's shape from the recorded arguments (torch's pooling_output_shape), else the one its backward
    shows (Derived); where the kernel is not recorded, one compare per input element: exact for windows
    that do not overlap, a lower bound where they do (ResNet's 3x3 stride 2 compares 2.25 times as often)."""

    dims: int

    def work(self, x: Args) -> OpWork | None:
        inp = x.operand(0)
        if inp is None or len(inp[0]) <= self.dims:
            return None
        shape, dtype = inp
        args = [x.value(i) for i in range(1, 5)]
        args[1] = args[1] or args[0]  # stride [] (not given): the kernel
        lists = [v * self.dims if isinstance(v, list) and len(v) == 1 else v for v in args]
        kernel = lists[0] if _ints(lists[0], self.dims) else None
        if all(_ints(v, self.dims) for v in lists) and isinstance(ceil := x.value(5), bool):
            out = shape[:-self.dims] + [_pooled(*a, ceil) for a in zip(shape[-self.dims:], *lists)]
        elif x.derived is not None and x.derived.output is not None:
            out = list(x.derived.output)
        else:
            return None
        if len(out) != len(shape) or min(out) < 1:
            return None
        compares = math.prod(out) * math.prod(kernel) if kernel else math.prod(shape)
        return OpWork(flops_of(1, compares, dtype), precision_of(dtype),
                      total_of(x.read(0), size_of(out, dtype), size_of(out, "long int")))


def _ints(v, n: int) -> bool:
    return isinstance(v, list) and len(v) == n and all(isinstance(e, int) and not isinstance(e, bool) for e in v)


def _pooled(size: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """torch's pooling_output_shape: a last window that would start in the right padding is dropped."""
    if s < 1:
        return 0
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    return out - 1 if ceil and (out - 1) * s >= size + p else out


@dataclass(frozen=True)
class PoolBackward:
    """The input's gradient of a pooling, written whole at `self`'s shape: each output gradient added into
    the input elements its window took (max: the one its index names), 1 FLOP per grad_output element
    (max) or per input element (average: its share of each window). Reads grad_output (and the max's
    indices at `indices`)."""

    per_input: bool
    indices: int | None = None

    def work(self, x: Args) -> OpWork | None:
        grad, inp = x.operand(0), x.operand(1)
        if grad is None or inp is None or not grad[0] or not inp[0]:
            return None
        dtype = grad[1]
        return OpWork(flops_of(1, math.prod(inp[0] if self.per_input else grad[0]), dtype), precision_of(dtype),
                      total_of(x.read(0), x.read(self.indices) if self.indices is not None else 0,
                             size_of(inp[0], dtype)))


@dataclass(frozen=True)
class AdaptiveAvgPool:
    """_adaptive_avg_pool{2,3}d(self, output_size): each input element added into its windows' sums (1 FLOP
    per input element where the windows tile it; the divide per output left out, as for mean); reads the
    input, writes [..., *output_size]. output_size not recorded: no number (torch 1.x reaches aten::mean
    for a 1x1 output, which counts instead)."""

    def work(self, x: Args) -> OpWork | None:
        inp, size = x.operand(0), x.value(1)
        if inp is None or not isinstance(size, list) or not inp[0] or len(size) >= len(inp[0]):
            return None
        shape, dtype = inp
        out = shape[:len(shape) - len(size)] + size
        return OpWork(flops_of(1, math.prod(shape), dtype), precision_of(dtype),
                      total_of(x.read(0), size_of(out, dtype)))


OPS = {
    "aten::max_pool1d_with_indices": MaxPool(1),
    "aten::max_pool2d_with_indices": MaxPool(2),
    "aten::max_pool3d_with_indices": MaxPool(3),
    "aten::max_pool2d_with_indices_backward": PoolBackward(per_input=False, indices=7),
    "aten::max_pool3d_with_indices_backward": PoolBackward(per_input=False, indices=7),
    "aten::adaptive_avg_pool2d": AdaptiveAvgPool(),
    "aten::_adaptive_avg_pool2d": AdaptiveAvgPool(),
    "aten::adaptive_avg_pool3d": AdaptiveAvgPool(),
    "aten::_adaptive_avg_pool3d": AdaptiveAvgPool(),
    "aten::_adaptive_avg_pool2d_backward": PoolBackward(per_input=True),
    "aten::_adaptive_avg_pool3d_backward": PoolBackward(per_input=True),
}

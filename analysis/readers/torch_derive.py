"""What a torch <= 1.11 trace did not record of an op call, found in its other events: the `Derived` that
analysis.ops.op_work takes (its note becomes the work's `assumed`, which a warning names).

Such traces record no "Concrete Inputs" (a convolution's stride and padding, a batch norm's training flag,
a pooling window) and no trace records outputs. A training step's backward pass shows them: the autograd node
that runs a backward op (the cpu_op around it with a "Sequence number") has the sequence number of the
forward ops that made it, and the backward op's "Input Dims" hold the forward's output shape:

- convolution: `cudnn_convolution_backward(input, grad_output, weight, ...)` gives the output's shape
  (grad_output), which fixes the convolution's work without its stride and padding (analysis.ops.matrix); its
  `cudnn_convolution_backward_input/_weight` children get their unrecorded size argument (the input's or the
  weight's shape) from it;
- batch norm: `cudnn_batch_norm_backward` is what autograd runs only for a training one (derivatives.yaml:
  `training ? cudnn_batch_norm_backward : native_batch_norm_backward`); `native_batch_norm_backward`'s
  saved statistics are empty in eval mode, [C] in training;
- max pooling: `max_pool*_with_indices_backward(grad_output, self, ...)` gives the output's shape.

A forward op gets a value only where its own shapes match the backward's (input, weight), so sequence numbers
shared across threads cannot mislead it. Ops that recorded their arguments are left as they are.
"""

from __future__ import annotations

import math
from collections import defaultdict

from ..ops import OPS
from ..ops.base import Derived
from ..ops.elementwise import Norm
from ..ops.matrix import Conv
from ..ops.pool import MaxPool
from .bulk import enclosing

DERIVED = "_derived"  # the key of a cpu_op event holding its Derived (read by torch_trace's _work)
SEQUENCE = "Sequence number"
CONV_NOTE = ("convolution stride and padding not recorded (torch <= 1.11 trace): its work from the output shape "
             "its backward's grad_output shows")
PART_NOTE = ("cudnn convolution gradient's size argument not recorded (torch <= 1.10 trace): the input or weight "
             "shape of the cudnn_convolution_backward around it")
NORM_NOTE = ("batch norm's training flag not recorded (torch <= 1.11 trace): derived from the backward autograd "
             "ran for it")
POOL_NOTE = ("max pooling's output not recorded (torch <= 1.11 trace): its backward's grad_output shape; its "
             "window not recorded: one compare per input element")
CONV_BACKWARD = "aten::cudnn_convolution_backward"
PARTS = {"aten::cudnn_convolution_backward_input": 0, "aten::cudnn_convolution_backward_weight": 2}  # -> shape
NORM_BACKWARDS = ("aten::cudnn_batch_norm_backward", "aten::native_batch_norm_backward")
POOL_BACKWARDS = ("aten::max_pool1d_with_indices_backward", "aten::max_pool2d_with_indices_backward",
                  "aten::max_pool3d_with_indices_backward")
BACKWARDS = frozenset((CONV_BACKWARD, *NORM_BACKWARDS, *POOL_BACKWARDS))


def derive(ops: list[dict]) -> None:
    """Set DERIVED on the cpu_op events of `ops` whose unrecorded arguments or output their backward shows.
    An op finds its autograd node with the nesting a kernel finds its op with (bulk.enclosing: the events open
    at a time on a thread, outermost first, with its tie rules)."""
    backwards = [e for e in ops if e.get("name") in BACKWARDS and not _recorded(e)]
    if not backwards:
        return
    parts = [e for e in ops if e.get("name") in PARTS and not _recorded(e)]
    asked = {id(e) for e in backwards + parts}
    chains, _ = enclosing(ops, [(e.get("pid"), e.get("tid"), e["ts"], i) for i, e in enumerate(ops)
                                if id(e) in asked])
    around = {id(ops[i]): _around(ops, i, chain) for i, chain in chains.items()}  # innermost first
    forward = defaultdict(list)  # sequence number -> forward ops with a rule that needs what was not recorded
    for e in ops:
        rule = OPS.get(e.get("name"))
        if isinstance(rule, (Conv, Norm, MaxPool)) and not _recorded(e) and SEQUENCE in _args(e):
            forward[_args(e)[SEQUENCE]].append(e)
    for b in backwards:
        dims = _dims(b)
        node = next((a for a in around[id(b)] if SEQUENCE in _args(a)), None)
        made = forward.get(_args(node)[SEQUENCE], []) if node is not None else []
        name = b["name"]
        if name == CONV_BACKWARD and len(dims) >= 3:
            inp, grad, weight = dims[:3]
            _give([f for f in made if isinstance(OPS[f["name"]], Conv) and _dims(f)[:2] == [inp, weight]],
                  Derived(CONV_NOTE, output=tuple(grad)))
        elif name in NORM_BACKWARDS and len(dims) >= 7:
            training = name == NORM_BACKWARDS[0] or math.prod(dims[5] or [0]) > 0
            for f in made:
                rule = OPS[f["name"]]
                if isinstance(rule, Norm) and rule.training is not None and _dims(f)[:1] == dims[1:2]:
                    f[DERIVED] = Derived(NORM_NOTE, values={rule.training: training})
        elif name in POOL_BACKWARDS and len(dims) >= 2:
            _give([f for f in made if isinstance(OPS[f["name"]], MaxPool) and _dims(f)[:1] == dims[1:2]],
                  Derived(POOL_NOTE, output=tuple(dims[0])))
    for e in parts:
        parent = next(iter(around[id(e)]), None)
        if parent is not None and parent["name"] == CONV_BACKWARD and len(_dims(parent)) >= 3:
            e[DERIVED] = Derived(PART_NOTE, values={0: _dims(parent)[PARTS[e["name"]]]})


def _around(ops: list[dict], i: int, chain: tuple[int, ...]) -> list[dict]:
    """The ops around ops[i], innermost first: of the events open at its start (`chain`, outermost first),
    those before it that are still open after its start. One that ends where it begins (in an
    integer-microsecond trace, the sibling before it) is not around it, though a launch at that time would be
    inside it: a launch is a point, an op has a length."""
    before = chain[:chain.index(i)] if i in chain else ()
    return [ops[j] for j in reversed(before) if ops[j]["ts"] + ops[j].get("dur", 0) > ops[i]["ts"]]


def _give(events: list[dict], derived: Derived) -> None:
    for e in events:
        e[DERIVED] = derived


def _args(e: dict) -> dict:
    return e.get("args") or {}


def _dims(e: dict) -> list:
    return _args(e).get("Input Dims") or []


def _recorded(e: dict) -> bool:
    return "Concrete Inputs" in _args(e)

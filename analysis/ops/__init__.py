"""The op models: FLOPs and algorithmic bytes of a torch op from the arguments a trace records of it (or a
recorded run: analysis.predict), one table `OPS` joined from one module per family, each with its formulas:

- matrix.py: GEMMs, convolutions, attention (PyTorch's own counters' rules);
- elementwise.py: element-wise ops, norms, softmax, reductions, embeddings, losses, copies, optimizers;
- pool.py: pooling; recsys.py: recommendation models' ops (fbgemm, embedding bags, scatter, index_put);
- serving.py: LLM serving engines' custom ops (vLLM, SGLang);
- base.py: what they share (dtypes, a call's arguments `Args`, the result `OpWork`, type promotion).

A new op model is a row of one of these tables, with its formula and source in docs/torch.md.
"""

from __future__ import annotations

from dataclasses import replace

from . import elementwise, matrix, pool, recsys, serving
from .base import Args, Derived, OpWork

# every op with a model: the matrix ops, the memory-bound ones, pooling,
# recommendation models' (fbgemm, embedding bags, scatter) and serving engines' ops
OPS = {**matrix.MATRIX_OPS, **elementwise.OPS, **pool.OPS, **recsys.OPS, **serving.OPS}
# ops whose recorded arguments do not give their work, and what is missing
NOT_RECORDED = serving.NOT_RECORDED


# the class of work of each kind of op model: ops recorded at different levels (a trace's aten::linear, a
# recorded run's aten::addmm; torch 1.9's cudnn_convolution_backward_input, torch 2's convolution_backward)
# compare by it; every kind in OPS has one (tests/test_torch_ops.py)
OP_CLASSES = {matrix.Gemm: "matrix multiply", matrix.Conv: "convolution",
              matrix.ConvBackward: "convolution backward", matrix.ConvBackwardPart: "convolution backward",
              matrix.Attention: "attention", matrix.AttentionBackward: "attention backward",
              elementwise.Elementwise: "element-wise", elementwise.ForEach: "element-wise (lists)",
              elementwise.Norm: "normalisation", elementwise.NormBackward: "normalisation backward",
              elementwise.Reduction: "reduction", elementwise.TopK: "top-k",
              elementwise.Gather: "gather", elementwise.SelectBackward: "select backward",
              elementwise.EmbeddingBackward: "embedding backward",
              elementwise.Loss: "loss", elementwise.LossBackward: "loss backward",
              elementwise.Optimizer: "optimizer", elementwise.Concat: "concatenation",
              pool.MaxPool: "pooling", pool.AdaptiveAvgPool: "pooling", pool.PoolBackward: "pooling backward",
              recsys.Permute2D: "sparse features", recsys.BlockBucketize: "sparse features",
              recsys.Streams: "sparse features", recsys.SplitLookup: "embedding bag",
              recsys.EmbeddingBag: "embedding bag", recsys.Scatter: "scatter", recsys.IndexPut: "scatter",
              serving.Fused: "fused element-wise", serving.CacheStore: "KV-cache store",
              serving.Rotary: "rotary embedding"}


def op_class(name: str | None) -> str | None:
    """The class of work of an op with a model (OP_CLASSES); None for an op without one."""
    rule = OPS.get(name) if name else None
    return None if rule is None else OP_CLASSES[type(rule)]


def op_work(name: str, dims: list, types: list, concrete: list | None,
            convention: str = "executed", strides: list | None = None, list_types: list | None = None,
            derived: Derived | None = None) -> OpWork | None:
    """FLOPs, precision and algorithmic bytes of one cpu_op from its trace args: `dims` "Input Dims", `types`
    "Input type", `concrete` "Concrete Inputs" (None where the trace has none: older PyTorch); `convention`:
    how a causal attention is counted (matrix.FLOP_CONVENTIONS); `strides` "Input Strides" (None: not recorded);
    `list_types` each TensorList argument's element dtype where known (None: a trace does not record them);
    `derived` what other events of the trace show of the call (its note becomes the work's `assumed`).

    None: the op is not in `OPS`, or its recorded arguments do not determine the work (a convolution's stride
    or an attention's is_causal not recorded, shapes that do not fit the op).
    """
    rule = OPS.get(name)
    args = Args(dims, types, concrete, convention, strides, list_types=list_types, derived=derived)
    work = None if rule is None else rule.work(args)
    return replace(work, assumed=work.assumed or derived.note) if work is not None and derived else work

"""Op models of the recommendation-model ops of a torch.profiler trace: fbgemm_gpu's sparse-feature ops
(permute, bucketize, bounds check, cumsum, pooled-embedding permute), its table-batched embedding lookup
(TBE), and the aten ops of embedding bags, scatters and index_put.

The vocabulary is analysis.ops.base's (Args, OpWork, its dtypes and helpers);
analysis.ops joins this module's `OPS` to its table. FLOPs follow analysis.ops.elementwise's convention: every + - * /
and comparison of floating-point values is 1 (an embedding bag's pooling adds 1 per gathered element), a
copy, permute, bucketize or index is 0, integer work 0. Bytes are ALGORITHMIC: each tensor the op reads and
each it writes, once: indices, offsets, lengths, the gathered rows (not the table), the output. The
scratch tensors an op makes inside (offsets computed from lengths, sort buffers) are no input or output of
it and are left out: a lower bound, as everywhere.

The argument positions are those of each op's schema: fbgemm's from its `m.def(...)` in fbgemm_gpu's
sources (docs/torch.md names the file of each), aten's from native_functions.yaml (the tests check them
against the installed PyTorch). Where an argument a model needs was not recorded (torch.profiler writes
no "Concrete Inputs" before 2.0) the op has no number, unless the missing value only decides a lower
bound or a documented default: then OpWork.assumed says what was taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import Args, OpWork, flops_of, precision_of, size_of, total_of


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


@dataclass(frozen=True)
class Streams:
    """An op that reads the tensors at `reads` and writes one tensor of argument `like`'s dtype, of its
    element count plus `extra` (a complete cumsum writes n + 1), or nothing (`like` None); `flops` per
    element of `like` in floating point (a cumsum's add), 0 for a copy or a check."""

    reads: tuple[int, ...]
    like: int | None = None
    extra: int = 0
    flops: int = 0

    def work(self, x: Args) -> OpWork | None:
        if any(x.operand(i) is None for i in self.reads):
            return None
        reads = [x.read(i) for i in self.reads]
        if self.like is None:
            precision = precision_of(x.operand(self.reads[0])[1])
            return OpWork(0.0, precision, total_of(*reads))
        like = x.operand(self.like)
        if like is None:
            return None
        n = math.prod(like[0]) + self.extra
        return OpWork(flops_of(self.flops, math.prod(like[0]), like[1]), precision_of(like[1]),
                      total_of(*reads, size_of([n], like[1])))


@dataclass(frozen=True)
class Permute2D:
    """fbgemm::permute_2D_sparse_data(permute [T'], lengths [T, B], values [N], weights? [N],
    permuted_lengths_sum?): features reordered; reads all four, writes lengths [T', B] and the N' values
    (and weights) moved. N' is N when permute has the T features' count (fbgemm assumes so too), else the
    recorded permuted_lengths_sum; without it, no number."""

    def work(self, x: Args) -> OpWork | None:
        permute, lengths, values = x.operand(0), x.operand(1), x.operand(2)
        if permute is None or lengths is None or values is None or len(lengths[0]) != 2:
            return None
        weights = x.operand(3)
        moved = math.prod(values[0]) if math.prod(permute[0]) == lengths[0][0] else x.value(4)
        if not isinstance(moved, int):
            return None
        written = [size_of([math.prod(permute[0]) * lengths[0][1]], lengths[1]), size_of([moved], values[1])]
        if weights is not None:
            written.append(size_of([moved], weights[1]))
        return OpWork(0.0, precision_of(values[1]), total_of(x.read(0), x.read(1), x.read(2), x.read(3), *written))


BUCKETS_NOTE = ("block_bucketize_sparse_features: my_size, bucketize_pos or sequence not recorded: lengths "
                "counted for one bucket, the position and unbucketize outputs left out (a lower bound)")


@dataclass(frozen=True)
class BlockBucketize:
    """fbgemm::block_bucketize_sparse_features(lengths [T*B], indices [N], bucketize_pos, sequence,
    block_sizes [T], my_size, weights? [N], ...): each index sent to its bucket. Reads lengths, indices,
    block_sizes, weights; writes lengths [my_size * T*B], indices [N], weights [N] if given, positions [N]
    (bucketize_pos) and the unbucketize permute [N] (sequence), both of the indices' dtype. Without
    my_size and the two flags (older traces) the lengths count once and the optional outputs not at all:
    a lower bound, and BUCKETS_NOTE says so."""

    def work(self, x: Args) -> OpWork | None:
        lengths, indices, blocks = x.operand(0), x.operand(1), x.operand(4)
        if lengths is None or indices is None or blocks is None:
            return None
        weights = x.operand(6)
        n = math.prod(indices[0])
        buckets, pos, sequence = x.value(5), x.value(2), x.value(3)
        recorded = isinstance(buckets, int) and isinstance(pos, bool) and isinstance(sequence, bool)
        written = [size_of([math.prod(lengths[0]) * (buckets if recorded else 1)], lengths[1]),
                   size_of([n], indices[1]),
                   size_of([n], weights[1]) if weights is not None else 0,
                   size_of([n * (recorded and pos + sequence)], indices[1])]
        return OpWork(0.0, precision_of(indices[1]), total_of(x.read(0), x.read(1), x.read(4), x.read(6), *written),
                      None if recorded else BUCKETS_NOTE)


TBE_DTYPE_NOTE = "fbgemm TBE: the output taken in the weights' dtype (output_dtype is not read)"
TBE_DIM_NOTE = "fbgemm TBE: the tables' dims differ and are not recorded: each lookup at their mean"


@dataclass(frozen=True)
class SplitLookup:
    """fbgemm::split_embedding_codegen_lookup_<optimizer>_function, the forward of a table-batched embedding
    (TBE): T tables (D_offsets [T+1]), B bags each (offsets [T*B+1]), N indices. Each index's row (its
    table's dim D) is read; pooling SUM adds it into its bag (1 FLOP per element), MEAN also divides each
    output element, NONE writes the rows as they are ([N, D], 0 FLOPs); per-sample indice_weights multiply
    each element (1 more). Reads indices, offsets, indice_weights, lxu_cache_locations and the rows; writes
    [B, total_D] (pooled). Needs total_D, max_D and pooling_mode (Concrete Inputs): where total_D is not
    T x max_D the tables' dims differ and each lookup is counted at total_D / T (TBE_DIM_NOTE)."""

    def work(self, x: Args) -> OpWork | None:
        d_offsets, indices, offsets = x.operand(6), x.operand(11), x.operand(12)
        total_d, max_d, pooling = x.value(7), x.value(8), x.value(13)
        rows = next((t for i in (1, 2, 3) if (t := x.operand(i)) is not None and math.prod(t[0]) > 0), None)
        if (d_offsets is None or indices is None or offsets is None or rows is None or pooling not in (0, 1, 2)
                or not isinstance(total_d, int) or not isinstance(max_d, int)):
            return None
        tables, n, dtype = math.prod(d_offsets[0]) - 1, math.prod(indices[0]), rows[1]
        if tables < 1 or (math.prod(offsets[0]) - 1) % tables:
            return None
        bags = (math.prod(offsets[0]) - 1) // tables
        dim = max_d if total_d == tables * max_d else total_d / tables
        gathered = n * dim
        weighted = x.operand(14) is not None and math.prod(x.operand(14)[0]) > 0
        out = gathered if pooling == 2 else bags * total_d
        flops = 0 if pooling == 2 else gathered + weighted * gathered + (pooling == 1) * out
        moved = total_of(x.read(11), x.read(12), x.read(14), x.read(16), size_of([gathered], dtype),
                         size_of([out], dtype))
        return OpWork(flops_of(1, flops, dtype), precision_of(dtype), moved,
                      _join(TBE_DTYPE_NOTE, None if dim == max_d else TBE_DIM_NOTE))


BAG_NOTE = "embedding_bag: mode and include_last_offset not recorded: taken as sum and False"


@dataclass(frozen=True)
class EmbeddingBag:
    """aten::embedding_bag(weight [V, D], indices, offsets, scale_grad_by_freq, mode, sparse,
    per_sample_weights, include_last_offset, padding_idx): B bags of D (offsets' length, less 1 with
    include_last_offset; 2-D indices: their rows). Each of the N indices' rows is read and pooled: sum and
    max 1 FLOP per element (an add, a compare), mean 1 more per output element (the divide),
    per_sample_weights 1 more per element (sum only). Reads indices, offsets, per-sample weights and the
    rows; writes [B, D]. The bookkeeping outputs (offset2bag, bag_size, max_indices) are kept for the
    backward pass, not the bag's result: not counted (as attention's logsumexp). Unrecorded mode and
    include_last_offset: sum and False (BAG_NOTE)."""

    def work(self, x: Args) -> OpWork | None:
        weight, indices, offsets = x.operand(0), x.operand(1), x.operand(2)
        if weight is None or indices is None or len(weight[0]) != 2:
            return None
        mode, last = x.value(4), x.value(7)
        note = None
        if mode is None and last is None:
            mode, last, note = 0, False, BAG_NOTE
        if mode not in (0, 1, 2) or not isinstance(last, bool):
            return None
        if offsets is not None and len(indices[0]) == 1:
            bags = math.prod(offsets[0]) - last
        elif len(indices[0]) == 2:
            bags = indices[0][0]
        else:
            return None
        d, dtype = weight[0][1], weight[1]
        gathered, out = math.prod(indices[0]) * d, bags * d
        flops = gathered + (mode == 1) * out + (x.operand(6) is not None) * gathered
        return OpWork(flops_of(1, flops, dtype), precision_of(dtype),
                      total_of(x.read(1), x.read(2), x.read(6), size_of([gathered], dtype), size_of([out], dtype)),
                      note)


@dataclass(frozen=True)
class Scatter:
    """scatter(self, dim, index, src) and scatter_add; index_add(self, dim, index, source, alpha): the
    elements at index (`counted`: scatter's index has their count, index_add's source) are written into
    `self`; an add reads them too and is 1 FLOP each (alpha's multiply is not counted, as torch's counters
    leave addmm's out). Reads index and src (its elements at index: scatter reads no more of a larger
    src; a Scalar src is none). The out-of-place op first copies self: it is read and written whole."""

    counted: int
    add: bool
    inplace: bool
    args: int = 4  # scatter's overloads with a `reduce` argument (5) multiply or add: not this op

    def work(self, x: Args) -> OpWork | None:
        target, counted = x.operand(0), x.operand(self.counted)
        if target is None or counted is None or x.operand(2) is None or len(x.types) != self.args:
            return None
        n, dtype = math.prod(counted[0]), target[1]
        src = x.operand(3)
        touched = size_of([n], dtype)
        copy = [] if self.inplace else [x.read(0)] * 2
        return OpWork(flops_of(1, n, dtype) if self.add else 0.0, precision_of(dtype),
                      total_of(x.read(2), size_of([n], src[1]) if src is not None else 0, touched,
                           touched if self.add else 0, *copy))


INDEX_NOTE = ("index_put: the index list is not in a trace: the written elements taken as values' count "
              "(values not broadcast), the indices' bytes left out")


@dataclass(frozen=True)
class IndexPut:
    """index_put(self, indices, values, accumulate) (in place: index_put_, _index_put_impl_): values
    written at the indexed elements of self; accumulate adds them (read too, 1 FLOP each). A trace does not
    record the indices (a list of optional tensors): the written elements are values' count, and the
    indices' own bytes are left out (INDEX_NOTE). accumulate not recorded, or a 0-dim values (broadcast to
    a count not known): no number. The out-of-place op first copies self."""

    inplace: bool

    def work(self, x: Args) -> OpWork | None:
        target, values, accumulate = x.operand(0), x.operand(2), x.value(3)
        if target is None or values is None or not values[0] or not isinstance(accumulate, bool):
            return None
        n, dtype = math.prod(values[0]), target[1]
        touched = size_of([n], dtype)
        copy = [] if self.inplace else [x.read(0)] * 2
        return OpWork(flops_of(1, n, dtype) if accumulate else 0.0, precision_of(dtype),
                      total_of(x.read(2), touched, touched if accumulate else 0, *copy), INDEX_NOTE)


# the optimizers whose TBE fbgemm_gpu generates (codegen/embedding_backward_code_generator.py, 2023): the
# forward's first 17 arguments are the same for all
TBE_OPTIMIZERS = ("adagrad", "adam", "lamb", "lars_sgd", "partial_rowwise_adam", "partial_rowwise_lamb",
                  "rowwise_adagrad", "rowwise_adagrad_with_weight_decay", "rowwise_adagrad_with_counter",
                  "rowwise_weighted_adagrad", "sgd")
# the backward of the pooled-embedding permute: fbgemm calls its kernel directly, so this autograd node is
# the only op around it; it records only the gradient (the saved offset and permute lists, T+1 and T
# integers, are left out)
PERMUTE_POOLED_BACKWARD = \
    "torch::autograd::CppNode<fbgemm_gpu::PermutePooledEmbsFunction<&fbgemm_gpu::permute_pooled_embs_gpu> >"

OPS: dict = {
    "fbgemm::permute_2D_sparse_data": Permute2D(),
    "fbgemm::block_bucketize_sparse_features": BlockBucketize(),
    # (rows_per_table, indices, offsets, mode, warning, weights, ...): reads; writes only on a bad index
    "fbgemm::bounds_check_indices": Streams(reads=(0, 1, 2)),
    # (pooled_embs, offset_dim_list, permute_list, inv_offset_dim_list, inv_permute_list): column blocks moved
    "fbgemm::permute_pooled_embs": Streams(reads=(0, 1, 2), like=0),
    "fbgemm::permute_pooled_embs_auto_grad": Streams(reads=(0, 1, 2), like=0),
    PERMUTE_POOLED_BACKWARD: Streams(reads=(0,), like=0),
    # (t_in [n]) -> [n + 1] (complete) or [n]: one add per element
    "fbgemm::asynchronous_complete_cumsum": Streams(reads=(0,), like=0, extra=1, flops=1),
    "fbgemm::asynchronous_exclusive_cumsum": Streams(reads=(0,), like=0, flops=1),
    "fbgemm::asynchronous_inclusive_cumsum": Streams(reads=(0,), like=0, flops=1),
    **{f"fbgemm::split_embedding_codegen_lookup_{name}_function": SplitLookup() for name in TBE_OPTIMIZERS},
    "aten::embedding_bag": EmbeddingBag(),
    "aten::_embedding_bag": EmbeddingBag(),
    "aten::_embedding_bag_forward_only": EmbeddingBag(),
    "aten::scatter": Scatter(counted=2, add=False, inplace=False),
    "aten::scatter_": Scatter(counted=2, add=False, inplace=True),
    "aten::scatter_add": Scatter(counted=2, add=True, inplace=False),
    "aten::scatter_add_": Scatter(counted=2, add=True, inplace=True),
    "aten::index_add": Scatter(counted=3, add=True, inplace=False, args=5),
    "aten::index_add_": Scatter(counted=3, add=True, inplace=True, args=5),
    "aten::index_put": IndexPut(inplace=False),
    "aten::index_put_": IndexPut(inplace=True),
    "aten::_index_put_impl_": IndexPut(inplace=True),
}

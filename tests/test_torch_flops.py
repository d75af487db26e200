"""analysis.ops.matrix: FLOPs and algorithmic bytes of torch.profiler ops from their recorded shapes.

Three tiers: hand arithmetic on trace args written out here; real traces from ../shared/torch-traces (skipped
where absent); PyTorch itself as the oracle (skipped without torch): key_averages(with_flops=True), which is
util.cpp's computeFlops, and torch.utils.flop_counter.FlopCounterMode for the ops that one does not count.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from analysis.ops import OPS, op_work
from analysis.ops.base import OpWork
from analysis.ops.matrix import (
    MATRIX_OPS,
    REMOVED_OPS,
    Attention,
    AttentionBackward,
    Conv,
    ConvBackward,
    Gemm,
)

F32, F16, BF16 = "float", "c10::Half", "c10::BFloat16"
TRACES = Path(__file__).resolve().parents[2] / "shared" / "torch-traces"


# --- GEMMs -----------------------------------------------------------------------------------------------

def test_mm():
    # [64, 32] @ [32, 16] in fp16: 2*m*k*n; bytes a + b + out, 2 bytes each
    assert op_work("aten::mm", [[64, 32], [32, 16]], [F16, F16], ["", ""]) == OpWork(
        2 * 64 * 32 * 16, "fp16", (64 * 32 + 32 * 16 + 64 * 16) * 2)


def test_addmm_counts_the_product_only():
    # PyTorch (util.cpp and flop_counter) leaves the bias add and alpha/beta out; its bytes are read
    work = op_work("aten::addmm", [[16], [64, 32], [32, 16], [], []], [F32, F32, F32, "Scalar", "Scalar"],
                   ["", "", "", "1", "1"])
    assert work == OpWork(2 * 64 * 32 * 16, "fp32", (16 + 64 * 32 + 32 * 16 + 64 * 16) * 4)


def test_gemm_dtype_overload_has_no_bytes():
    # addmm.dtype (out_dtype before beta/alpha): the output is not in the inputs' dtype
    work = op_work("aten::addmm", [[16], [64, 32], [32, 16], [], [], []],
                   [F16, F16, F16, "Scalar", "Scalar", "Scalar"], ["", "", "", "6", "1", "1"])
    assert work == OpWork(2 * 64 * 32 * 16, "fp16", None)


def test_bmm_and_baddbmm():
    # 4 products of [8, 5] @ [5, 3]
    assert op_work("aten::bmm", [[4, 8, 5], [4, 5, 3]], [BF16, BF16], None) == OpWork(
        2 * 4 * 8 * 5 * 3, "bf16", (4 * 8 * 5 + 4 * 5 * 3 + 4 * 8 * 3) * 2)
    work = op_work("aten::baddbmm", [[4, 8, 3], [4, 8, 5], [4, 5, 3], [], []], [F32, F32, F32, "Scalar", "Scalar"],
                   None)
    assert work == OpWork(2 * 4 * 8 * 5 * 3, "fp32", (4 * 8 * 3 + 4 * 8 * 5 + 4 * 5 * 3 + 4 * 8 * 3) * 4)


def test_matmul_broadcasts_and_takes_vectors():
    # [2, 1, 8, 5] @ [3, 5, 4]: batch [2, 1] x [3] -> [2, 3], out [2, 3, 8, 4]
    assert op_work("aten::matmul", [[2, 1, 8, 5], [3, 5, 4]], [F32, F32], None) == OpWork(
        2 * 6 * 8 * 5 * 4, "fp32", (2 * 8 * 5 + 3 * 5 * 4 + 2 * 3 * 8 * 4) * 4)
    # dot: 7 multiplies and adds, a 0-dim output
    assert op_work("aten::matmul", [[7], [7]], [F32, F32], None) == OpWork(2 * 7, "fp32", (7 + 7 + 1) * 4)
    # [3, 7] @ [7]: out [3]
    assert op_work("aten::matmul", [[3, 7], [7]], [F32, F32], None) == OpWork(2 * 3 * 7, "fp32", (21 + 7 + 3) * 4)


def test_linear():
    # input [2, 8, 16], weight [12, 16] (out, in), bias [12]: 16 rows of 16 -> 12
    work = op_work("aten::linear", [[2, 8, 16], [12, 16], [12]], [BF16, BF16, BF16], ["", "", ""])
    assert work == OpWork(2 * 16 * 16 * 12, "bf16", (2 * 8 * 16 + 12 * 16 + 12 + 2 * 8 * 12) * 2)
    # no bias: its slot is typed ""
    assert op_work("aten::linear", [[2, 8, 16], [12, 16], []], [F32, F32, ""], None).bytes == (
        (2 * 8 * 16 + 12 * 16 + 2 * 8 * 12) * 4)


@pytest.mark.parametrize("name, dims", [
    ("aten::mm", [[64, 32], [31, 16]]),  # inner dimensions differ
    ("aten::mm", [[2, 64, 32], [32, 16]]),  # mm takes matrices only
    ("aten::bmm", [[4, 8, 5], [5, 3]]),
    ("aten::matmul", [[2, 8, 5], [3, 5, 4]]),  # batch 2 and 3 do not broadcast
    ("aten::mm", [[64, 32], []]),  # the shapes were not recorded
])
def test_gemm_shapes_that_do_not_fit(name, dims):
    assert op_work(name, dims, [F32, F32], None) is None


def test_unknown_dtype():
    # int64 has a size but no precision of ceilings; a dtype we do not know has neither
    assert op_work("aten::mm", [[2, 3], [3, 4]], ["long int", "long int"], None) == OpWork(
        2 * 2 * 3 * 4, None, (6 + 12 + 8) * 8)
    assert op_work("aten::mm", [[2, 3], [3, 4]], ["c10::Float4_e2m1fn_x2"] * 2, None) == OpWork(
        2 * 2 * 3 * 4, None, None)


@pytest.mark.parametrize("name", ["aten::mkldnn_convolution", "aten::t", "aten::view"])
def test_ops_not_in_the_table(name):
    assert op_work(name, [[8, 16], [8, 16], []], [F32, F32, "Scalar"], ["", "", "1"]) is None


# --- convolutions ----------------------------------------------------------------------------------------

CONV2D_DIMS = [[2, 4, 10, 12], [6, 2, 3, 3], [], [], [], [], []]
CONV2D_TYPES = [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]


def test_conv2d_stride_padding_dilation_groups():
    # input N=2, C=4, 10x12; weight 6 x (4/2 groups) x 3x3; stride (2, 1), padding (1, 2), dilation (1, 2)
    # H: (10 + 2*1 - 1*(3-1) - 1) // 2 + 1 = 5; W: (12 + 2*2 - 2*(3-1) - 1) // 1 + 1 = 12
    # each of 2*6*5*12 outputs sums 2 channels x 3x3 taps: 2 FLOPs per tap
    work = op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, ["", "", "", "[2, 1]", "[1, 2]", "[1, 2]", "2"])
    assert work == OpWork(2 * 6 * 5 * 12 * (2 * 3 * 3) * 2, "fp32", (2 * 4 * 10 * 12 + 6 * 2 * 9 + 2 * 6 * 5 * 12) * 4)


def test_conv2d_unbatched_input():
    # [C, H, W]: one image, and the output has no batch dimension either
    work = op_work("aten::conv2d", [[4, 10, 12], [6, 2, 3, 3], [6], [], [], [], []], [F32, F32, F32] + CONV2D_TYPES[3:],
                   ["", "", "", "[2, 1]", "[1, 2]", "[1, 2]", "2"])
    assert work == OpWork(6 * 5 * 12 * (2 * 9) * 2, "fp32", (4 * 10 * 12 + 6 * 2 * 9 + 6 + 6 * 5 * 12) * 4)


def test_conv_needs_its_recorded_arguments():
    # no Concrete Inputs (older traces); conv2d.padding's "same" is a string, which a trace records as ""
    assert op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, None) is None
    assert op_work("aten::conv2d", CONV2D_DIMS, [F32, F32, "", "ScalarList", "", "ScalarList", "Scalar"],
                   ["", "", "", "[1, 1]", "", "[1, 1]", "1"]) is None
    # 4 input channels do not split into 3 groups of the weight's 2
    assert op_work("aten::conv2d", CONV2D_DIMS, CONV2D_TYPES, ["", "", "", "[2, 1]", "[1, 2]", "[1, 2]", "3"]) is None


def test_conv1d_and_conv3d():
    # conv1d: [2, 4, 20], weight [6, 2, 3], bias [6], stride 2, padding 1, dilation 2, groups 2
    # L: (20 + 2 - 2*2 - 1) // 2 + 1 = 9
    work = op_work("aten::conv1d", [[2, 4, 20], [6, 2, 3], [6], [], [], [], []],
                   [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
                   ["", "", "", "[2]", "[1]", "[2]", "2"])
    assert work == OpWork(2 * 6 * 9 * (2 * 3) * 2, "fp32", (2 * 4 * 20 + 6 * 2 * 3 + 6 + 2 * 6 * 9) * 4)
    # conv3d: [1, 2, 6, 6, 6], weight [4, 2, 3, 3, 3], stride 2: (6 - 2 - 1) // 2 + 1 = 2 per side
    work = op_work("aten::conv3d", [[1, 2, 6, 6, 6], [4, 2, 3, 3, 3], [], [], [], [], []], CONV2D_TYPES,
                   ["", "", "", "[2, 2, 2]", "[0, 0, 0]", "[1, 1, 1]", "1"])
    assert work == OpWork(1 * 4 * 8 * (2 * 27) * 2, "fp32", (2 * 216 + 4 * 2 * 27 + 4 * 8) * 4)


def test_conv_transpose2d():
    # conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    # input [2, 4, 5, 6], weight [4 in, 3 out, 3, 3], stride 2, padding 1, output_padding 1:
    # H: (5-1)*2 - 2*1 + 1*(3-1) + 1 + 1 = 10, W: (6-1)*2 - 2 + 2 + 1 + 1 = 12
    # every input element scatters into 3 channels x 3x3 taps: 2 FLOPs each
    work = op_work("aten::conv_transpose2d", [[2, 4, 5, 6], [4, 3, 3, 3], [], [], [], [], [], []],
                   [F16, F16, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList"],
                   ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1", "[1, 1]"])
    assert work == OpWork(2 * 4 * 5 * 6 * (3 * 9) * 2, "fp16", (2 * 4 * 30 + 4 * 3 * 9 + 2 * 3 * 10 * 12) * 2)


def test_conv_transpose_groups():
    # input [1, 4, 3, 3], weight [4, 2, 2, 2] in 2 groups: 2 x 2 = 4 output channels, (3-1) + (2-1) + 1 = 4 per side
    work = op_work("aten::conv_transpose2d", [[1, 4, 3, 3], [4, 2, 2, 2], [4], [], [], [], [], []],
                   [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList"],
                   ["", "", "", "[1, 1]", "[0, 0]", "[0, 0]", "2", "[1, 1]"])
    assert work == OpWork(4 * 9 * (2 * 2 * 2) * 2, "fp32", (36 + 32 + 4 + 4 * 16) * 4)


def test_convolution_reads_transposed():
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    # the conv_transpose2d case above, one level down
    dims = [[2, 4, 5, 6], [4, 3, 3, 3], [], [], [], [], [], [], []]
    types = [F16, F16, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    work = op_work("aten::convolution", dims, types, ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"])
    assert work.flops == 2 * 4 * 5 * 6 * (3 * 9) * 2
    # the same shapes as a plain convolution: H (5 + 2 - 2 - 1) // 2 + 1 = 3, W (6 + 2 - 2 - 1) // 2 + 1 = 3;
    # weight [4 out, 3 in] does not fit 4 input channels
    assert op_work("aten::convolution", dims, types,
                   ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]) is None
    # a one-value list holds for every spatial dimension; transposed not recorded: unknown
    work = op_work("aten::convolution", [[1, 3, 5, 6], [4, 3, 3, 3], [4], [], [], [], [], [], []],
                   [F32, F32, F32] + types[3:], ["", "", "", "[1]", "[0]", "[1]", "False", "[0]", "1"])
    assert work == OpWork(4 * 3 * 4 * (3 * 9) * 2, "fp32", (90 + 108 + 4 + 4 * 12) * 4)
    unrecorded = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "", "[1, 1]", "1"]
    assert op_work("aten::convolution", dims, types, unrecorded) is None


def test_cudnn_convolution_argument_order():
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32):
    # padding (2, 2) before stride (1, 1): out (9 + 4 - 2 - 1) + 1 = 11 per side (stride 2, padding 1: 5)
    work = op_work("aten::cudnn_convolution", [[1, 2, 9, 9], [2, 2, 3, 3], [], [], [], [], [], [], []],
                   [F16, F16, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
                   ["", "", "[2, 2]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"])
    assert work == OpWork(2 * 11 * 11 * (2 * 9) * 2, "fp16", (2 * 81 + 2 * 2 * 9 + 2 * 121) * 2)
    # cudnn_convolution_transpose(self, weight, padding, output_padding, stride, dilation, groups, ...):
    # the conv_transpose2d case with batch 1
    work = op_work("aten::cudnn_convolution_transpose", [[1, 4, 5, 6], [4, 3, 3, 3]] + [[]] * 8,
                   [F32, F32] + ["ScalarList"] * 4 + ["Scalar"] * 4,
                   ["", "", "[1, 1]", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"])
    assert work == OpWork(4 * 5 * 6 * (3 * 9) * 2, "fp32", (4 * 30 + 4 * 3 * 9 + 3 * 10 * 12) * 4)


# --- attention -------------------------------------------------------------------------------------------

SDPA_TYPES = [F32, F32, F32, "", "Scalar", "Scalar", "", "Scalar"]


def _sdpa(dims, causal, types=SDPA_TYPES):
    # scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    return op_work("aten::scaled_dot_product_attention", dims + [[]] * (8 - len(dims)), types,
                   ["", "", "", "", "0.", causal, "", "False"])


def test_sdpa():
    # q [2, 3, 8, 4], k [2, 3, 10, 4], v [2, 3, 10, 5]: per batch and head q @ k^T is 8x4 @ 4x10, p @ v 8x10 @ 10x5
    work = _sdpa([[2, 3, 8, 4], [2, 3, 10, 4], [2, 3, 10, 5]], "False")
    assert work == OpWork(6 * (2 * 8 * 4 * 10 + 2 * 8 * 10 * 5), "fp32",
                          (6 * 8 * 4 + 6 * 10 * 4 + 6 * 10 * 5 + 6 * 8 * 5) * 4)


def test_sdpa_causal_counts_the_unmasked_pairs():
    # L = S = 8: query i sees keys 0..i, 1 + 2 + ... + 8 = 36 of 64 pairs
    assert _sdpa([[2, 3, 8, 4], [2, 3, 8, 4], [2, 3, 8, 5]], "True").flops == 6 * 36 * 2 * (4 + 5)
    # L = 3 < S = 5 (top-left aligned): 1 + 2 + 3 = 6 pairs; L = 5 > S = 2: 1 + 2 + 2 + 2 + 2 = 9
    assert _sdpa([[1, 1, 3, 4], [1, 1, 5, 4], [1, 1, 5, 4]], "True").flops == 6 * 2 * (4 + 4)
    assert _sdpa([[1, 1, 5, 4], [1, 1, 2, 4], [1, 1, 2, 4]], "True").flops == 9 * 2 * (4 + 4)
    # whether it was causal is not recorded (older traces): unknown
    assert _sdpa([[2, 3, 8, 4], [2, 3, 8, 4], [2, 3, 8, 5]], "") is None


def test_sdpa_causal_counted_as_torch_counts_every_pair():
    dims = [[2, 3, 8, 4], [2, 3, 8, 4], [2, 3, 8, 5]]
    torch_count = op_work("aten::scaled_dot_product_attention", dims + [[]] * 5, SDPA_TYPES,
                          ["", "", "", "", "0.", "True", "", "False"], convention="torch")
    assert torch_count.flops == 6 * 64 * 2 * (4 + 5)  # FlopCounterMode: all 8 x 8 pairs, causal or not
    unknown = op_work("aten::scaled_dot_product_attention", dims + [[]] * 5, SDPA_TYPES,
                      ["", "", "", "", "0.", "", "", "False"], convention="torch")
    assert unknown.flops == 6 * 64 * 2 * (4 + 5)  # is_causal not recorded: torch's count needs none


def test_sdpa_grouped_query_and_mask():
    # 8 query heads share 2 key/value heads: 8 heads of 16x64 @ 64x16 and 16x16 @ 16x64
    work = _sdpa([[1, 8, 16, 64], [1, 2, 16, 64], [1, 2, 16, 64]], "False")
    assert work == OpWork(8 * (2 * 16 * 64 * 16 * 2), "fp32", (8 * 16 * 64 + 2 * 2 * 16 * 64 + 8 * 16 * 64) * 4)
    # a boolean mask [8, 10] is read (1 byte each) but not counted as FLOPs (nor by PyTorch)
    work = _sdpa([[2, 3, 8, 4], [2, 3, 10, 4], [2, 3, 10, 5], [8, 10]], "False",
                 [F32, F32, F32, "bool", "Scalar", "Scalar", "", "Scalar"])
    assert work == OpWork(6 * (2 * 8 * 4 * 10 + 2 * 8 * 10 * 5), "fp32",
                          (6 * 8 * 4 + 6 * 10 * 4 + 6 * 10 * 5 + 6 * 8 * 5) * 4 + 8 * 10)


def test_sdpa_variants_argument_positions():
    dims = [[2, 3, 16, 8], [2, 3, 24, 8], [2, 3, 24, 8]]
    full, causal = 6 * 16 * 24 * 2 * (8 + 8), 6 * sum(range(1, 17)) * 2 * (8 + 8)
    # _scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, return_debug_mask, scale)
    flash = op_work("aten::_scaled_dot_product_flash_attention", dims + [[]] * 4, [F16] * 3 + ["Scalar"] * 3 + [""],
                    ["", "", "", "0.", "True", "False", ""])
    assert flash == OpWork(causal, "fp16", (6 * 16 * 8 + 6 * 24 * 8 * 2 + 6 * 16 * 8) * 2)
    # _scaled_dot_product_efficient_attention(query, key, value, attn_bias, compute_log_sumexp, dropout_p,
    # is_causal, scale): compute_log_sumexp True, is_causal False
    eff = op_work("aten::_scaled_dot_product_efficient_attention", dims + [[]] * 5,
                  [F16] * 3 + ["", "Scalar", "Scalar", "Scalar", ""], ["", "", "", "", "True", "0.", "False", ""])
    assert eff.flops == full
    # _scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, attn_mask, scale)
    cpu = op_work("aten::_scaled_dot_product_flash_attention_for_cpu", dims + [[], [], [16, 24], []],
                  [F32] * 3 + ["Scalar", "Scalar", F32, ""], ["", "", "", "0.", "False", "", ""])
    assert cpu == OpWork(full, "fp32", (6 * 16 * 8 + 6 * 24 * 8 * 2 + 16 * 24 + 6 * 16 * 8) * 4)


# --- real traces (../shared/torch-traces) ----------------------------------------------------------------

def _cpu_ops(path: Path) -> list[dict]:
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared torch traces are not checked out)")
    with gzip.open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op"]


def _event_work(event: dict) -> OpWork | None:
    args = event["args"]
    return op_work(event["name"], args["Input Dims"], args["Input type"], args.get("Concrete Inputs"))


def test_a100_trace_gemms():
    """A100-SXM4-80GB training trace (HTA test data): no Concrete Inputs, which GEMMs do not need."""
    ops = _cpu_ops(TRACES / "a100_80gb_shapes_rank0.json.gz")
    by_shape = {(e["name"], json.dumps(e["args"]["Input Dims"])): e for e in ops if e["name"] in OPS}
    # linear [4096, 100] x weight [64, 100] + bias [64]: 4096 rows of 100 -> 64
    linear = _event_work(by_shape["aten::linear", "[[4096, 100], [64, 100], [64]]"])
    assert linear == OpWork(2 * 4096 * 100 * 64, "fp32", (4096 * 100 + 64 * 100 + 64 + 4096 * 64) * 4)
    addmm = _event_work(by_shape["aten::addmm", "[[64], [4096, 2798], [2798, 64], [], []]"])
    assert addmm == OpWork(2 * 4096 * 2798 * 64, "fp32", (64 + 4096 * 2798 + 2798 * 64 + 4096 * 64) * 4)
    # the backward's weight gradient: [64, 4096] @ [4096, 2798]
    mm = _event_work(by_shape["aten::mm", "[[64, 4096], [4096, 2798]]"])
    assert mm == OpWork(2 * 64 * 4096 * 2798, "fp32", (64 * 4096 + 4096 * 2798 + 64 * 2798) * 4)


def test_a100_trace_linear_holds_its_addmm():
    """Each aten::linear encloses one aten::addmm of the same work: a trace's sum takes one of them."""
    ops = _cpu_ops(TRACES / "a100_80gb_shapes_rank0.json.gz")
    linears = [e for e in ops if e["name"] == "aten::linear"]
    assert len(linears) == 10
    for linear in linears:
        inside = [e for e in ops if e["name"] == "aten::addmm" and e["tid"] == linear["tid"]
                  and linear["ts"] <= e["ts"] <= linear["ts"] + linear["dur"]]
        assert len(inside) == 1
        assert _event_work(inside[0]) == _event_work(linear)
        (m, k), (_, n) = inside[0]["args"]["Input Dims"][1:3]  # addmm(bias, mat1 [m, k], mat2 [k, n])
        assert _event_work(linear).flops == 2 * m * k * n


def test_alexnet_trace_without_shapes():
    """A100 AlexNet trace recorded without shapes: its conv2d -> convolution -> _convolution ->
    cudnn_convolution chains and linear -> addmm are all in MATRIX_OPS, and no op in OPS has a number
    (never 0)."""
    ops = [e for e in _cpu_ops(TRACES / "alexnet_a100_kernels.json.gz") if e["name"] in OPS]
    assert {e["name"] for e in ops if e["name"] in MATRIX_OPS} == {
        "aten::conv2d", "aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::linear",
        "aten::addmm"}
    assert all(op_work(e["name"], e["args"].get("Input Dims", []), e["args"].get("Input type", []),
                       e["args"].get("Concrete Inputs")) is None for e in ops)


def test_rocm_trace_linear():
    """MI250 trace with Concrete Inputs: linear [5, 128] x weight [128, 128] + bias, and its addmm."""
    ops = _cpu_ops(TRACES / "mi250_rocm_minitoy.json.gz")
    expected = OpWork(2 * 5 * 128 * 128, "fp32", (5 * 128 + 128 * 128 + 128 + 5 * 128) * 4)
    assert [_event_work(e) for e in ops if e["name"] in ("aten::linear", "aten::addmm")] == [expected, expected]


# --- PyTorch as the oracle -------------------------------------------------------------------------------

def _profile(fn, path: Path):
    """Runs fn under torch.profiler (CPU, shapes, with_flops) and returns (key_averages, the trace's cpu_ops)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        fn()
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    return prof.key_averages(group_by_input_shape=True), events


def _flop_counter(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _model(torch):
    """mm, addmm (nn.Linear), bmm, baddbmm, conv1d/2d/3d with stride/padding/dilation/groups,
    conv_transpose2d, sdpa causal and not, and an add and a mul."""
    import torch.nn.functional as F

    r = torch.randn
    linear = torch.nn.Linear(16, 12)

    def run():
        torch.mm(r(8, 16), r(16, 12))
        linear(r(8, 16))
        linear(r(2, 8, 16))  # aten::linear views the input as [16, 16] for its aten::addmm
        torch.bmm(r(3, 4, 5), r(3, 5, 6))
        torch.baddbmm(r(3, 4, 6), r(3, 4, 5), r(3, 5, 6))
        F.conv1d(r(2, 4, 20), r(6, 2, 3), r(6), stride=2, padding=1, dilation=2, groups=2)
        F.conv2d(r(2, 4, 10, 12), r(6, 2, 3, 3), None, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
        F.conv2d(r(2, 4, 10, 12), r(6, 2, 3, 3), None, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
        F.conv3d(r(1, 2, 6, 6, 6), r(4, 2, 3, 3, 3), stride=2)
        F.conv_transpose2d(r(2, 4, 5, 6), r(4, 3, 3, 3), stride=2, padding=1, output_padding=1)
        F.scaled_dot_product_attention(r(2, 3, 8, 4), r(2, 3, 10, 4), r(2, 3, 10, 5))
        F.scaled_dot_product_attention(r(2, 3, 8, 4), r(2, 3, 8, 4), r(2, 3, 8, 5), is_causal=True)
        x = r(8, 16)
        x + x
        x * x

    return run


def test_key_averages_oracle(tmp_path):
    """For every (op, input shapes) group key_averages(with_flops=True) counts, op_work's sum over the trace's
    events agrees for the matrix ops, and PyTorch counts exactly mm, addmm, bmm, baddbmm, conv2d and add/mul
    (by a rule of its own, the element count of the first input; test_torch_ops counts them)."""
    torch = pytest.importorskip("torch")
    averages, events = _profile(_model(torch), tmp_path / "trace.json")
    counted = {}
    for avg in averages:
        if avg.flops:
            counted.setdefault(avg.key, 0)
            counted[avg.key] += avg.flops
            if avg.key in MATRIX_OPS:
                same = [e for e in events if e["name"] == avg.key and e["args"]["Input Dims"] == avg.input_shapes]
                assert sum(_event_work(e).flops for e in same) == avg.flops, (avg.key, avg.input_shapes)
    assert set(counted) == {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::conv2d",
                            "aten::add", "aten::mul"}
    # two conv2d calls of one shape, one group: 2 x the hand-computed 25920 of test_conv2d_...
    assert counted["aten::conv2d"] == 2 * 25920
    # PyTorch counts none of these, op_work does
    for name in ("aten::linear", "aten::matmul", "aten::conv1d", "aten::conv3d", "aten::conv_transpose2d",
                 "aten::convolution", "aten::scaled_dot_product_attention"):
        assert name not in counted
        assert all(_event_work(e) is not None for e in events if e["name"] == name), name


def _cases(torch):
    """(op name, the call profiled, the call FlopCounterMode counts): the latter differs only where
    FlopCounterMode has no rule for the op the profiled call reaches (CPU flash attention)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    r = torch.randn
    aten = torch.ops.aten
    meta = {"device": "meta", "dtype": torch.float16}
    q, k, v = torch.empty(2, 3, 16, 8, **meta), torch.empty(2, 3, 24, 8, **meta), torch.empty(2, 3, 24, 8, **meta)

    def math(fn):
        def run():
            with sdpa_kernel(SDPBackend.MATH):
                fn()
        return run

    sdpa_cpu = lambda: F.scaled_dot_product_attention(r(2, 3, 64, 8), r(2, 3, 64, 8), r(2, 3, 64, 8))
    return [
        ("aten::mm", lambda: torch.mm(r(8, 16), r(16, 12)), None),
        ("aten::addmm", lambda: torch.addmm(r(12), r(8, 16), r(16, 12)), None),
        ("aten::bmm", lambda: torch.bmm(r(3, 4, 5), r(3, 5, 6)), None),
        ("aten::baddbmm", lambda: torch.baddbmm(r(3, 4, 6), r(3, 4, 5), r(3, 5, 6)), None),
        ("aten::linear", lambda: F.linear(r(2, 8, 16), r(12, 16), r(12)), None),
        ("aten::matmul", lambda: torch.matmul(r(2, 1, 8, 5), r(3, 5, 4)), None),
        ("aten::matmul", lambda: torch.matmul(r(5), r(5, 3)), None),
        ("aten::conv1d", lambda: F.conv1d(r(2, 4, 20), r(6, 2, 3), r(6), stride=2, padding=1, dilation=2, groups=2),
         None),
        ("aten::conv2d", lambda: F.conv2d(r(3, 10, 12), r(6, 1, 3, 3), None, stride=2, padding=1, groups=3), None),
        ("aten::conv3d", lambda: F.conv3d(r(1, 2, 6, 6, 6), r(4, 1, 3, 3, 3), None, padding=(1, 0, 2),
                                          dilation=(1, 2, 1), groups=2), None),
        ("aten::conv_transpose1d", lambda: F.conv_transpose1d(r(2, 4, 7), r(4, 3, 3), r(6), stride=3, padding=2,
                                                              output_padding=1, groups=2, dilation=2), None),
        ("aten::conv_transpose2d", lambda: F.conv_transpose2d(r(2, 4, 5, 6), r(4, 3, 3, 3), stride=2, padding=1,
                                                              output_padding=1), None),
        ("aten::conv_transpose3d", lambda: F.conv_transpose3d(r(1, 2, 3, 4, 5), r(2, 2, 2, 3, 2), stride=(1, 2, 1)),
         None),
        ("aten::scaled_dot_product_attention",
         math(lambda: F.scaled_dot_product_attention(r(2, 3, 8, 4), r(2, 3, 10, 4), r(2, 3, 10, 5))), None),
        ("aten::scaled_dot_product_attention",
         math(lambda: F.scaled_dot_product_attention(r(1, 4, 6, 8), r(1, 2, 6, 8), r(1, 2, 6, 8), enable_gqa=True)),
         None),
        ("aten::_scaled_dot_product_attention_math",
         math(lambda: F.scaled_dot_product_attention(r(2, 3, 8, 4), r(2, 3, 10, 4), r(2, 3, 10, 5))), None),
        ("aten::scaled_dot_product_attention", sdpa_cpu, math(sdpa_cpu)),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", sdpa_cpu, math(sdpa_cpu)),
        # the CUDA variants run on meta tensors: shapes and arguments as a GPU trace records them
        ("aten::_scaled_dot_product_flash_attention", lambda: aten._scaled_dot_product_flash_attention(q, k, v), None),
        ("aten::_scaled_dot_product_efficient_attention",
         lambda: aten._scaled_dot_product_efficient_attention(q, k, v, None, True), None),
        ("aten::_scaled_dot_product_cudnn_attention",
         lambda: aten._scaled_dot_product_cudnn_attention(q, k, v, None, True), None),
    ]


def test_flop_counter_oracle(tmp_path):
    """Each call's op event, read back from its exported trace, has the FLOPs FlopCounterMode counts for the
    call; and every op in OPS that the call went through inside it agrees."""
    torch = pytest.importorskip("torch")
    for i, (name, fn, oracle_fn) in enumerate(_cases(torch)):
        expected = _flop_counter(oracle_fn or fn)
        assert expected > 0, name
        _, events = _profile(fn, tmp_path / f"{i}.json")
        work = _event_work(next(e for e in events if e["name"] == name))
        assert work is not None and work.flops == expected, (name, work, expected)


def test_causal_against_flop_counter():
    """FlopCounterMode ignores is_causal; op_work counts the unmasked pairs, 1 + 2 + ... + 16 of 16 x 24."""
    torch = pytest.importorskip("torch")
    q, k = torch.empty(2, 3, 16, 8, device="meta", dtype=torch.float16), torch.empty(2, 3, 24, 8, device="meta",
                                                                                      dtype=torch.float16)
    call = lambda causal: torch.ops.aten._scaled_dot_product_flash_attention(q, k, k, 0.0, causal)
    full = _flop_counter(lambda: call(False))
    assert _flop_counter(lambda: call(True)) == full == 6 * 16 * 24 * 2 * (8 + 8)
    work = op_work("aten::_scaled_dot_product_flash_attention", [[2, 3, 16, 8], [2, 3, 24, 8], [2, 3, 24, 8]]
                   + [[]] * 4, ["c10::Half"] * 3 + ["Scalar"] * 3 + [""], ["", "", "", "0.", "True", "False", ""])
    assert work.flops == full * sum(range(1, 17)) / (16 * 24)


def test_table_positions_match_the_schemas():
    """Every argument position in MATRIX_OPS names the argument the installed PyTorch's schema has there
    (test_torch_ops checks the other ops')."""
    torch = pytest.importorskip("torch")
    for name, rule in MATRIX_OPS.items():
        if name in REMOVED_OPS:
            continue
        schema = next(s for s in torch._C._jit_get_schemas_for_operator(name) if s.overload_name in ("", "input"))
        arg = [a.name for a in schema.arguments]
        if isinstance(rule, Gemm):
            assert len(arg) == rule.args, name
            assert arg[rule.a] in ("self", "mat1", "batch1", "input"), name
            assert arg[rule.b] in ("mat2", "batch2", "other", "weight"), name
            assert rule.c is None or arg[rule.c] in ("self", "bias"), name
        elif isinstance(rule, Conv):
            assert arg[0] in ("input", "self") and arg[1] == "weight", name
            for field in ("stride", "padding", "dilation", "groups", "output_padding", "bias"):
                position = getattr(rule, field)
                assert position is None or arg[position] == field, (name, field)
            assert rule.transposed_arg is None or arg[rule.transposed_arg] == "transposed", name
            assert rule.bias is not None or "bias" not in arg, name
            assert (rule.output_padding is not None) == ("output_padding" in arg), name
        elif isinstance(rule, ConvBackward):  # the positions it reads: 0-2, transposed 7, output_mask 10
            assert arg[:3] == ["grad_output", "input", "weight"], name
            assert arg[7] == "transposed" and arg[10] == "output_mask", name
        elif isinstance(rule, AttentionBackward):
            assert arg[0] in ("grad_out", "grad_out_") and arg[1:4] == ["query", "key", "value"], name
            assert arg[rule.is_causal] == "is_causal", name
            assert {arg[i] for i in rule.reads} <= {"out", "logsumexp", "attn_bias"}, name
        else:
            assert isinstance(rule, Attention)
            assert arg[:3] == ["query", "key", "value"] and arg[rule.is_causal] == "is_causal", name
            assert (arg[rule.mask] if rule.mask is not None else None) == next(
                (a for a in arg if a in ("attn_mask", "attn_bias")), None), name


def test_convolution_backward_costs_the_forward_per_gradient_asked():
    """A 3x3 conv of 16 from 3 channels over 4 x 8 x 8 (stride 1, padding 1): forward 2 x 4 x (16 x 3 x 9) x 64 =
    221,184 FLOPs; the weight's gradient alone costs that, with the input's twice. Bytes (fp32): grad_output
    4 x 16 x 64, input 4 x 3 x 64 and the weight 432 read as needed, the gradients asked written."""
    dims = [[4, 16, 8, 8], [4, 3, 8, 8], [16, 3, 3, 3], [], [], [], [], [], [], [], []]
    types = ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]

    def work(mask):
        concrete = ["", "", "", "[16]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", mask]
        return op_work("aten::convolution_backward", dims, types, concrete)

    weight_only = work("[False, True, True]")
    assert weight_only.flops == 221184 and weight_only.precision == "fp32"
    assert weight_only.bytes == 4 * (4096 + 768 + 432 + 16)  # grad_output, input read; weight, bias grads
    both = work("[True, True, False]")
    assert both.flops == 2 * 221184 and both.bytes == 4 * (4096 + 768 + 432 + 768 + 432)
    assert work("") is None  # output_mask not recorded: not known

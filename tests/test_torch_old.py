"""Traces of torch <= 1.11 (no "Concrete Inputs"): a convolution's output, a batch norm's training
flag and a max pooling's output are derived from the backward ops of the same step (analysis.readers.
torch_derive), and said so; pooling ops have models.

The hand-written trace is in the torch 1.9 layout (../shared/torch-traces/MANIFEST.md): Operator, Runtime and
Kernel events, kernel "external id" = correlation (the op is the Operator around the Runtime launch),
"Sequence number" on the forward ops and on the autograd node around each backward op, no Concrete Inputs.
Expected numbers are arithmetic on the shapes written here (and torch's FlopCounterMode where torch is there).
"""

from __future__ import annotations

import math

import pytest

from analysis.ncu import read_profile
from analysis.ops import op_work
from analysis.ops.base import Derived
from analysis.readers.torch_derive import CONV_NOTE, NORM_NOTE, PART_NOTE, POOL_NOTE
from tests.test_torch_trace import trace, x

N, C, K, H, R = 4, 8, 16, 32, 3  # conv: N x C x H x H input, K x C x 3 x 3 weight, stride 2, padding 1
P = (H + 2 * 1 - R) // 2 + 1  # 16: the output side
POOLED = (P + 2 * 1 - 3) // 2 + 1  # 8: max pool 3x3 stride 2 padding 1 of the P x P activation
FP32, INT64 = 4, 8
CONV_FLOPS = 2 * N * K * C * R * R * P * P
ACT = N * K * P * P  # elements of the conv output, batch norm input and pooling input
POOL_OUT = N * K * POOLED * POOLED
X, W, Y = [N, C, H, H], [K, C, R, R], [N, K, P, P]
POOL = [N, K, POOLED, POOLED]


def op(name, ts, dur, dims, types, tid=1, seq=None, ext=0):
    args = {"external id": ext, "Input Dims": dims, "Input type": types}
    if seq is not None:
        args["Sequence number"] = seq
    return x("Operator", name, ts, dur, tid=tid, **args)


def launch(ts, corr, tid=1):
    return x("Runtime", "cudaLaunchKernel", ts, 2, tid=tid, correlation=corr, **{"external id": corr})


def kernel(name, ts, dur, corr):
    return x("Kernel", name, ts, dur, pid=0, tid=7, correlation=corr, device=0, **{"external id": corr})


def old_step(conv_input=X) -> list[dict]:
    """One training step of conv -> batch norm -> max pool, and its backward on the autograd thread (tid 2)."""
    f, g, lst = "float", "GenericList", "GenericList"
    conv = [conv_input, W] + [[]] * 7
    bn = [Y, [K], [K], [K], [K], [], [], []]
    return [
        op("ProfilerStep#1", 0, 10000, [], []),
        op("aten::conv2d", 10, 100, conv[:7], [f, f, "", lst, lst, lst, "Int"], seq=10, ext=1),
        op("aten::convolution", 11, 98, conv[:9], [f, f, "", lst, lst, lst, "Bool", lst, "Int"], seq=10, ext=2),
        op("aten::_convolution", 12, 96, conv[:13], [f, f, ""] + [lst] * 3 + ["Bool", lst, "Int"] + ["Bool"] * 4,
           seq=10, ext=3),
        op("aten::cudnn_convolution", 13, 90, conv, [f, f, lst, lst, lst, "Int", "Bool", "Bool", "Bool"], seq=10,
           ext=4),
        launch(20, 100),
        op("aten::batch_norm", 200, 100, bn + [[]], [f] * 5 + ["Bool", "Double", "Double", "Bool"], seq=11, ext=5),
        op("aten::cudnn_batch_norm", 201, 90, bn, [f] * 5 + ["Bool", "Double", "Double"], seq=11, ext=6),
        launch(210, 101),
        op("aten::max_pool2d", 400, 100, [Y] + [[]] * 5, [f] + [lst] * 4 + ["Bool"], seq=12, ext=7),
        op("aten::max_pool2d_with_indices", 401, 90, [Y] + [[]] * 5, [f] + [lst] * 4 + ["Bool"], seq=12, ext=8),
        launch(410, 102),
        # backward, in reverse
        op("MaxPool2DWithIndicesBackward", 1000, 100, [POOL], [f], tid=2, seq=12, ext=9),
        op("aten::max_pool2d_with_indices_backward", 1001, 90, [POOL, Y, [], [], [], [], [], POOL],
           [f, f, lst, lst, lst, lst, "Bool", "long int"], tid=2, ext=10),
        launch(1010, 103, tid=2),
        op("CudnnBatchNormBackward", 1200, 100, [Y], [f], tid=2, seq=11, ext=11),
        op("aten::cudnn_batch_norm_backward", 1201, 90, [Y, Y, [K], [K], [K], [K], [K], [], [0]],
           [f] * 7 + ["Double", "unsigned char"], tid=2, ext=12),
        launch(1210, 104, tid=2),
        op("CudnnConvolutionBackward", 1400, 300, [Y], [f], tid=2, seq=10, ext=13),
        op("aten::cudnn_convolution_backward", 1401, 290, [X, Y, W] + [[]] * 8,
           [f, f, f, lst, lst, lst, "Int", "Bool", "Bool", "Bool", lst], tid=2, ext=14),
        op("aten::cudnn_convolution_backward_input", 1410, 100, [[], Y, W] + [[]] * 7,
           [g, f, f, lst, lst, lst, "Int", "Bool", "Bool", "Bool"], tid=2, ext=15),
        launch(1420, 105, tid=2),
        op("aten::cudnn_convolution_backward_weight", 1550, 100, [[], Y, X] + [[]] * 7,
           [g, f, f, lst, lst, lst, "Int", "Bool", "Bool", "Bool"], tid=2, ext=16),
        launch(1560, 106, tid=2),
        kernel("implicit_convolve_sgemm", 5000, 50, 100),
        kernel("bn_fw_tr_1C11_kernel_NCHW", 5100, 20, 101),
        kernel("max_pool_forward_nchw", 5200, 10, 102),
        kernel("max_pool_backward_nchw", 5300, 10, 103),
        kernel("bn_bw_1C11_kernel_new", 5400, 20, 104),
        kernel("dgrad_engine", 5500, 50, 105),
        kernel("wgrad_alg0_engine", 5600, 50, 106),
    ]


def rows(tmp_path, events):
    t = read_profile(trace(tmp_path / "old.pt.trace.json", events))
    return t.set_index("kernel"), t.attrs["notes"]


def test_a_torch_1_9_step_has_the_work_of_every_conv_norm_and_pool_kernel(tmp_path):
    t, notes = rows(tmp_path, old_step())
    conv = t.loc["implicit_convolve_sgemm"]
    assert conv["op"] == "aten::conv2d" and conv["flops_fp32"] == CONV_FLOPS
    assert conv["alg_bytes"] == (math.prod(X) + math.prod(W) + math.prod(Y)) * FP32
    dgrad, wgrad = t.loc["dgrad_engine"], t.loc["wgrad_alg0_engine"]
    assert dgrad["op"] == "aten::cudnn_convolution_backward_input" and dgrad["flops_fp32"] == CONV_FLOPS
    assert wgrad["op"] == "aten::cudnn_convolution_backward_weight" and wgrad["flops_fp32"] == CONV_FLOPS
    # each gradient: grad_output and the other operand read, the gradient (input's, weight's) written
    assert dgrad["alg_bytes"] == wgrad["alg_bytes"] == (math.prod(Y) + math.prod(W) + math.prod(X)) * FP32
    bn = t.loc["bn_fw_tr_1C11_kernel_NCHW"]  # training: statistics 3, normalise 2, weight 1, bias 1
    assert bn["op"] == "aten::batch_norm" and bn["flops_fp32"] == 7 * ACT
    # input, weight, bias, running mean and var read and written, output, saved mean and invstd
    assert bn["alg_bytes"] == (ACT + 2 * K + 2 * 2 * K + ACT + 2 * K) * FP32
    pool = t.loc["max_pool_forward_nchw"]  # window not recorded: one compare per input element
    assert pool["op"] == "aten::max_pool2d_with_indices" and pool["flops_fp32"] == ACT
    assert pool["alg_bytes"] == ACT * FP32 + POOL_OUT * (FP32 + INT64)
    back = t.loc["max_pool_backward_nchw"]  # an add per grad_output element; grad, indices read; grad input
    assert back["flops_fp32"] == POOL_OUT
    assert back["alg_bytes"] == POOL_OUT * (FP32 + INT64) + ACT * FP32
    assert "unknown_work" not in t or t["unknown_work"].isna().all()
    for note in (CONV_NOTE, PART_NOTE, NORM_NOTE, POOL_NOTE):
        assert any(n.startswith(note) for n in notes), note
    assert any(n.startswith(f"{PART_NOTE} (2 op call(s))") for n in notes)


def test_a_forward_whose_shapes_its_backward_does_not_show_stays_without_a_number(tmp_path):
    """The sequence number links a conv to a backward of another input: not its output, so nothing is derived."""
    events = old_step(conv_input=[N, C, H + 8, H + 8])
    t, notes = rows(tmp_path, events)
    assert math.isnan(t.loc["implicit_convolve_sgemm", "flops_fp32"])
    assert t.loc["implicit_convolve_sgemm", "unknown_work"] == "no op model"
    assert not any(n.startswith(CONV_NOTE) for n in notes)


def test_ops_that_touch_in_an_integer_microsecond_trace_nest_as_kernels_find_their_ops(tmp_path):
    """Integer-microsecond ties: the autograd node and its backward op open at the same microsecond and last
    as long (the node's smaller External id puts it outside), and the weight's gradient starts at the
    microsecond the input's gradient ends (it follows that one, inside the cudnn_convolution_backward)."""
    events = old_step()
    at = {e["name"]: e for e in events if e["cat"] == "Operator"}
    at["aten::cudnn_convolution_backward"].update(ts=1400, dur=300)
    at["aten::cudnn_convolution_backward_input"].update(ts=1400, dur=150)
    at["aten::cudnn_convolution_backward_weight"].update(ts=1550, dur=100)
    t, notes = rows(tmp_path, events)
    assert t.loc["implicit_convolve_sgemm", "flops_fp32"] == CONV_FLOPS
    assert t.loc["dgrad_engine", "op"] == "aten::cudnn_convolution_backward_input"
    assert t.loc["wgrad_alg0_engine", "op"] == "aten::cudnn_convolution_backward_weight"
    assert t.loc["dgrad_engine", "flops_fp32"] == t.loc["wgrad_alg0_engine", "flops_fp32"] == CONV_FLOPS
    assert any(n.startswith(f"{PART_NOTE} (2 op call(s))") for n in notes)


def test_the_eval_mode_backward_of_a_native_batch_norm_says_eval():
    """native_batch_norm_backward's saved statistics are empty in eval mode: the forward gets training False."""
    from analysis.readers.torch_derive import derive

    def ops(saved):
        return [op("aten::native_batch_norm", 0, 10, [Y, [K], [K], [K], [K], [], [], []],
                   ["float"] * 5 + ["Bool", "Double", "Double"], seq=5),
                op("NativeBatchNormBackward", 100, 50, [Y], ["float"], tid=2, seq=5),
                op("aten::native_batch_norm_backward", 101, 40, [Y, Y, [K], [K], [K], saved, saved, [], [], []],
                   ["float"] * 7 + ["Bool", "Double", "GenericList"], tid=2)]

    for saved, training, per in (([0], False, 4), ([K], True, 7)):
        events = ops(saved)
        derive(events)
        forward = events[0]
        assert forward["_derived"].values == {5: training}
        work = op_work(forward["name"], forward["args"]["Input Dims"], forward["args"]["Input type"], None,
                       derived=forward["_derived"])
        assert work.flops == per * ACT and work.assumed == NORM_NOTE


def conv_work(inp, weight, out):
    """An aten::conv2d of a torch 1.9 trace (no Concrete Inputs) whose output its backward showed."""
    types = ["float", "float", "", "GenericList", "GenericList", "GenericList", "Int"]
    return op_work("aten::conv2d", [inp, weight, [], [], [], [], []], types, None,
                   derived=Derived(CONV_NOTE, output=tuple(out)))


@pytest.mark.parametrize("size, k, out", [
    (224, 7, 112),  # ResNet's stem: 7x7 stride 2 padding 3
    (56, 3, 56),
    (56, 1, 28),  # the downsampling 1x1, stride 2
    (32, 3, 30),  # no padding
])
def test_the_derived_output_alone_gives_a_convolutions_work(size, k, out):
    """Whatever stride and padding made the output, the FLOPs count its positions: 2 x N x weight x output."""
    work = conv_work([2, 64, size, size], [128, 64, k, k], [2, 128, out, out])
    assert work.flops == 2 * 2 * 128 * 64 * k * k * out * out and work.assumed == CONV_NOTE
    assert work.bytes == (2 * 64 * size * size + 128 * 64 * k * k + 2 * 128 * out * out) * FP32


def test_a_grouped_convolution_takes_its_groups_from_the_channels():
    """A 64-channel input and a weight of 16 channels: 4 groups, each output channel reading 16 of them."""
    assert conv_work([1, 64, 14, 14], [64, 16, 3, 3], [1, 64, 14, 14]).flops == 2 * 64 * 16 * 3 * 3 * 14 * 14
    assert conv_work([1, 64, 14, 14], [64, 24, 3, 3], [1, 64, 14, 14]) is None  # 64 is no whole number of 24s


def test_a_derived_output_no_convolution_gives_has_no_work():
    """A 56-wide input under a 3x3 kernel gives at most 56 + 3 - 1 = 58 positions (padding 2, below the
    kernel's size); 59 or a garbled 10^9 is not a convolution's output."""
    assert conv_work([1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 58, 58]).flops == 2 * 64 * 64 * 3 * 3 * 58 * 58
    assert conv_work([1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 59, 59]) is None
    assert conv_work([1, 64, 56, 56], [64, 64, 3, 3], [1, 64, 10**9, 10**9]) is None


def test_conv_flops_match_torchs_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    inp = torch.randn(X, requires_grad=True)
    weight = torch.randn(W, requires_grad=True)
    with FlopCounterMode(display=False) as forward:
        out = torch.nn.functional.conv2d(inp, weight, stride=2, padding=1)
    assert list(out.shape) == Y
    with FlopCounterMode(display=False) as backward:
        out.sum().backward()
    assert forward.get_total_flops() == CONV_FLOPS
    assert backward.get_total_flops() == 2 * CONV_FLOPS  # the input's and the weight's gradient


def test_pool_positions_match_the_schemas():
    """The positions the pooling rules read name those arguments in the installed PyTorch's schemas."""
    torch = pytest.importorskip("torch")
    from analysis.ops.pool import OPS, PoolBackward

    for name, rule in OPS.items():
        arg = [a.name for a in torch._C._jit_get_schemas_for_operator(name)[0].arguments]
        if isinstance(rule, PoolBackward):
            assert arg[:2] == ["grad_output", "self"] and (rule.indices is None or arg[rule.indices] == "indices")
        elif "max_pool" in name:
            assert arg == ["self", "kernel_size", "stride", "padding", "dilation", "ceil_mode"], name
        else:
            assert arg == ["self", "output_size"], name


def test_pooling_with_recorded_arguments_follows_torchs_output_size():
    """A newer trace records the window: 3x3 stride 2 padding 1 over 4 x 16 x 16 x 16, ceil_mode on and off,
    against the shape torch computes; 9 compares per output."""
    torch = pytest.importorskip("torch")
    for ceil in (False, True):
        for side in (16, 15):
            out = torch.nn.functional.max_pool2d(torch.zeros(4, 16, side, side), 3, 2, 1, ceil_mode=ceil)
            concrete = ["", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", str(ceil)]
            work = op_work("aten::max_pool2d_with_indices", [[4, 16, side, side]] + [[]] * 5,
                           ["float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"], concrete)
            assert work.flops == 9 * out.numel(), (ceil, side)
            assert work.bytes == 4 * 16 * side * side * FP32 + out.numel() * (FP32 + INT64)
    work = op_work("aten::_adaptive_avg_pool2d", [[4, 16, 7, 7], []], ["float", "ScalarList"], ["", "[2, 2]"])
    assert work.flops == 4 * 16 * 7 * 7 and work.bytes == (4 * 16 * 7 * 7 + 4 * 16 * 2 * 2) * FP32

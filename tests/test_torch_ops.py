"""analysis.ops.elementwise: FLOPs and algorithmic bytes of the memory-bound ops of a torch.profiler trace.

PyTorch counts none of these ops (FlopCounterMode has rules for matrix ops only: the first test shows it),
so the expected numbers are written here: the FLOPs per element of each op's formula times torch's own
numel, and bytes as the sum of numel() x element_size() of the tensors torch gives back, never from the code
under test. Each case runs under torch.profiler (CPU, shapes) and is read back from the exported trace.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from analysis.ops import elementwise, op_work
from analysis.ops.base import LIST_NOTE
from analysis.ops.elementwise import Elementwise, Norm, NormBackward, Optimizer, Reduction
from tests.test_torch_trace import trace, x

TRACES = Path(__file__).resolve().parents[2] / "shared" / "torch-traces"


def nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _events(fn, path: Path) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    prof.export_chrome_trace(str(path))
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]


def _work(event: dict):
    a = event["args"]
    return op_work(event["name"], a["Input Dims"], a["Input type"], a.get("Concrete Inputs"),
                   strides=a.get("Input Strides"))


def _cases(torch):
    """(op name, call, expected FLOPs, expected bytes): FLOPs are numel x the op's count per element."""
    import torch.nn.functional as F

    r = torch.randn
    a, b, x, g = r(4, 16), r(16), r(8, 32), r(8, 32)
    h = r(8, 32, dtype=torch.bfloat16)
    d0 = torch.tensor(2.0, dtype=torch.float64)  # a 0-dim double: it does not promote a float tensor
    ints = torch.arange(10)
    cond = x > 0
    out_b = a + b  # [4, 16]
    half = torch.empty(8, 32, dtype=torch.float16)
    idx = torch.tensor([3, 1, 4, 1, 5])
    table = r(10, 6)
    ln_w, ln_b = r(32), r(32)
    bn_x, rm, rv = r(4, 3, 5), torch.zeros(3), torch.ones(3)
    gn_x = r(4, 6, 5)
    logits, target = r(8, 10), torch.randint(0, 10, (8,))
    n = x.numel()
    aten = torch.ops.aten
    return [
        # element-wise: FLOPs per output element; the broadcast [16] is read once, the output is [4, 16]
        ("aten::add", lambda: a + b, out_b.numel(), nbytes(a, b, out_b)),
        ("aten::mul", lambda: x * 2.0, n, nbytes(x, x)),  # a Scalar is no tensor
        ("aten::mul", lambda: x * d0, n, nbytes(x, x * d0)),  # float result, 0-dim not read
        ("aten::add_", lambda: x.clone().add_(g), n, nbytes(x, g, x)),  # self read and written
        ("aten::div", lambda: x / g, n, nbytes(x, g, x)),
        ("aten::sub", lambda: h - 1.0, h.numel(), nbytes(h, h)),  # bf16 stays bf16
        ("aten::relu", lambda: torch.relu(x), n, nbytes(x, x)),
        ("aten::gelu", lambda: F.gelu(x), 5 * n, nbytes(x, x)),  # x/2 (1 + erf(x/sqrt 2))
        ("aten::silu", lambda: F.silu(x), 4 * n, nbytes(x, x)),  # x / (1 + exp(-x))
        ("aten::sigmoid", lambda: torch.sigmoid(x), 4 * n, nbytes(x, x)),
        ("aten::tanh", lambda: torch.tanh(x), n, nbytes(x, x)),
        ("aten::exp", lambda: torch.exp(x), n, nbytes(x, x)),
        ("aten::neg", lambda: -x, n, nbytes(x, x)),
        ("aten::pow", lambda: x.pow(2), n, nbytes(x, x)),
        ("aten::rsqrt", lambda: x.abs().rsqrt(), n, nbytes(x, x)),
        ("aten::clamp", lambda: x.clamp(-1, 1), 2 * n, nbytes(x, x)),  # a min and a max
        ("aten::where", lambda: torch.where(cond, x, g), n, nbytes(cond, x, g, x)),
        ("aten::gt", lambda: x > g, n, nbytes(x, g, cond)),  # a bool result
        ("aten::threshold_backward", lambda: aten.threshold_backward(g, x, 0.0), n, nbytes(g, x, x)),
        ("aten::gelu_backward", lambda: aten.gelu_backward(g, x), 11 * n, nbytes(g, x, x)),
        ("aten::silu_backward", lambda: aten.silu_backward(g, x), 9 * n, nbytes(g, x, x)),
        ("aten::sigmoid_backward", lambda: aten.sigmoid_backward(g, x), 3 * n, nbytes(g, x, x)),
        ("aten::add", lambda: ints + 1, 0, nbytes(ints, ints)),  # integer work is no floating-point work
        # copies, casts and fills: 0 FLOPs, bytes
        ("aten::fill_", lambda: x.clone().fill_(1.0), 0, nbytes(x)),
        ("aten::zero_", lambda: x.clone().zero_(), 0, nbytes(x)),
        ("aten::copy_", lambda: half.copy_(x), 0, nbytes(x, half)),
        ("aten::to", lambda: x.to(torch.float16), 0, nbytes(x, half)),
        ("aten::contiguous", lambda: x.t().contiguous(), 0, nbytes(x, x)),
        ("aten::masked_fill", lambda: x.masked_fill(cond, 0.0), 0, nbytes(x, cond, x)),
        ("aten::cat", lambda: torch.cat([x, g]), 0, 2 * nbytes(x, g)),  # tensor lists: fp32 assumed
        # gathers read what they gather
        ("aten::index_select", lambda: table.index_select(0, idx), 0, nbytes(idx) + 2 * nbytes(table[idx])),
        ("aten::embedding", lambda: F.embedding(idx, table), 0, nbytes(idx) + 2 * nbytes(table[idx])),
        # softmax: max, subtract, exp, sum, divide per element
        ("aten::softmax", lambda: torch.softmax(x, -1), 5 * n, nbytes(x, x)),
        ("aten::log_softmax", lambda: torch.log_softmax(x, -1), 5 * n, nbytes(x, x)),
        ("aten::_softmax_backward_data", lambda: aten._softmax_backward_data(g, x, -1, torch.float32), 4 * n,
         nbytes(g, x, x)),
        # reductions: FLOPs per input element; the output at its reduced shape
        ("aten::sum", lambda: x.sum(1), n, nbytes(x, x.sum(1))),
        ("aten::sum", lambda: ints.sum(), 0, nbytes(ints, ints.sum())),  # int64 result
        ("aten::mean", lambda: x.mean(), n, nbytes(x, x.mean())),
        ("aten::amax", lambda: x.amax(0), n, nbytes(x, x.amax(0))),
        ("aten::var", lambda: x.var(1), 3 * n, nbytes(x, x.var(1))),
        ("aten::argmax", lambda: x.argmax(1), n, nbytes(x, x.argmax(1))),
        ("aten::max", lambda: x.max(1), n, nbytes(x, *x.max(1))),  # values and indices
        # norms: statistics 3 (sum x, x * x, sum), normalise 2, 1 each for weight and bias
        ("aten::layer_norm", lambda: F.layer_norm(x, (32,), ln_w, ln_b), 7 * n,
         nbytes(x, ln_w, ln_b, x) + 2 * 8 * 4),  # + mean and rstd per row, fp32
        ("aten::rms_norm", lambda: F.rms_norm(x, (32,), ln_w), 4 * n, nbytes(x, ln_w, x) + 8 * 4),
        ("aten::batch_norm", lambda: F.batch_norm(bn_x, rm.clone(), rv.clone(), training=True), 5 * bn_x.numel(),
         nbytes(bn_x, bn_x) + 2 * nbytes(rm, rv) + 2 * 3 * 4),  # running stats read and written, saved stats
        ("aten::group_norm", lambda: F.group_norm(gn_x, 3), 5 * gn_x.numel(), nbytes(gn_x, gn_x) + 2 * 4 * 3 * 4),
        # losses
        ("aten::cross_entropy_loss", lambda: F.cross_entropy(logits, target), 5 * logits.numel() + 2 * 8,
         nbytes(logits, target) + 4),
        ("aten::nll_loss_forward", lambda: aten.nll_loss_forward(logits, target, None, 1, -100), 2 * 8,
         nbytes(target) + 8 * 4 + 4),  # one input element per row
        ("aten::embedding_dense_backward", lambda: aten.embedding_dense_backward(r(5, 6), idx, 10, -1, False),
         30, nbytes(r(5, 6), idx, table)),
    ]


def test_flop_counter_counts_none_of_these_ops():
    """FlopCounterMode, PyTorch's counter, has rules for matrix ops only: 0 for element-wise, norm, softmax
    and reduction calls, so the expected counts here come from the formulas."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(8, 32)
    with FlopCounterMode(display=False) as counter:
        F.gelu(x) + x
        F.layer_norm(x, (32,))
        torch.softmax(x, -1).sum()
    assert counter.get_total_flops() == 0


def test_memory_bound_ops_against_their_formulas(tmp_path):
    torch = pytest.importorskip("torch")
    for i, (name, fn, flops, expected_bytes) in enumerate(_cases(torch)):
        events = [e for e in _events(fn, tmp_path / f"{i}.json") if e["name"] == name]
        work = _work(events[0])
        assert work is not None and work.flops == flops and work.bytes == expected_bytes, (name, work, flops,
                                                                                          expected_bytes)


def test_layer_norm_backward_and_fused_adamw(tmp_path):
    """Backward of a layer norm (input, weight and bias gradients: 9 + 1 FLOPs per element for the input's,
    2 for the weight's, 1 for the bias'); AdamW over two parameters (13 + 1 for the decay per element, 7
    tensors of fp32 per element: p, g, m, v read; p, m, v written)."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    x = torch.randn(8, 32, requires_grad=True)
    w, b = torch.randn(32, requires_grad=True), torch.randn(32, requires_grad=True)
    params = [torch.nn.Parameter(torch.randn(16, 8)), torch.nn.Parameter(torch.randn(16))]
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.AdamW(params, weight_decay=0.01, fused=True)

    def run():
        F.layer_norm(x, (32,), w, b).backward(torch.randn(8, 32))  # a dense gradient (sum's is expanded)
        opt.step()

    events = _events(run, tmp_path / "bwd.json")
    backward = _work(next(e for e in events if e["name"] == "aten::native_layer_norm_backward"))
    n = x.numel()
    stats = 2 * 8 * 4  # mean and rstd per row, read
    assert backward.flops == (10 + 2 + 1) * n
    assert backward.bytes == nbytes(x, x, w) + stats + nbytes(x, w, b)  # dy, x, w read; dx, dw, db written
    adam = _work(next(e for e in events if e["name"] == "aten::_fused_adamw_"))
    elements = sum(p.numel() for p in params)
    assert adam.flops == 14 * elements and adam.bytes == 7 * elements * 4 and adam.assumed == LIST_NOTE


def test_broadcast_strides_and_promotion():
    """A stride-0 operand (expand) is read once per distinct element; an int tensor times 0.5 is float; a
    bf16 and an fp16 operand give fp32."""
    # [4, 16] + expanded [4, 16] whose strides are [0, 1]: 16 distinct elements read
    work = op_work("aten::add", [[4, 16], [4, 16], []], ["float", "float", "Scalar"], ["", "", "1"],
                   strides=[[16, 1], [0, 1], []])
    assert work.bytes == (64 + 16 + 64) * 4
    work = op_work("aten::mul", [[10], []], ["long int", "Scalar"], ["", "0.5"])
    assert work.flops == 10 and work.bytes == 10 * 8 + 10 * 4
    work = op_work("aten::add", [[10], [10], []], ["c10::BFloat16", "c10::Half", "Scalar"], ["", "", "1"])
    assert work.bytes == 10 * 2 + 10 * 2 + 10 * 4
    # shapes that do not broadcast, a cast to a dtype not recorded (older traces): no model
    assert op_work("aten::add", [[4, 16], [5], []], ["float", "float", "Scalar"], None) is None
    assert op_work("aten::to", [[8], [], [], [], []], ["float", "Scalar", "Scalar", "Scalar", ""], None) is None


def test_table_positions_match_the_schemas():
    """Every op of analysis.ops.elementwise's OPS is an aten op of the installed PyTorch, and its rule's
    positions name the arguments its schema has there."""
    torch = pytest.importorskip("torch")
    for name, rule in elementwise.OPS.items():
        if name in elementwise.REMOVED_OPS:
            continue
        schemas = torch._C._jit_get_schemas_for_operator(name)
        assert schemas, name
        args = [[a.name for a in s.arguments] for s in schemas]
        if isinstance(rule, Elementwise):
            for count, at in (rule.dtype_at or {}).items():  # some overload of that many arguments has it there
                assert any(a[at] in ("dtype", "input_dtype", "other") for a in args if len(a) == count), name
            assert rule.like is None or any(a[rule.like] == "self" for a in args), name
        elif isinstance(rule, Norm):
            first = args[0]
            assert first[0] == "input" and (rule.weight is None or first[rule.weight] == "weight"), name
            assert rule.bias is None or first[rule.bias] == "bias", name
            assert rule.training is None or first[rule.training] == "training", name
            assert rule.shape is None or first[rule.shape] == "normalized_shape", name
        elif isinstance(rule, NormBackward):
            first = args[0]
            assert first[rule.weight] == "weight" and first[rule.input] == "input", name
            assert rule.mask is None or first[rule.mask] == "output_mask", name
        elif isinstance(rule, Reduction):
            for count, (dim, dtype) in rule.overloads.items():
                assert any((dim is None or a[dim] == "dim") and (dtype is None or a[dtype] == "dtype")
                           for a in args if len(a) == count), name
        elif isinstance(rule, Optimizer):
            first = args[0]
            assert first[rule.decay_at] == "weight_decay", name
            assert [first[i] for i in rule.extra] == ["grad_scale"], name


def test_a_copy_is_judged_memory_bound_on_its_bytes(tmp_path):
    """A zero-FLOP op (copy_ fp32 -> fp16) launching a kernel: flops 0, not missing; its algorithmic bytes
    place it against the DRAM roof, memory-bound, its time at the roof its bytes over the bandwidth."""
    from analysis.ncu import kernel_table
    from analysis.roofline import ALGORITHMIC, NO_FLOPS, load, roofline_table

    n = 1 << 24
    events = [x("cpu_op", "aten::copy_", 0, 100, **{"External id": 1, "Input Dims": [[n], [n], []],
                                                     "Input type": ["c10::Half", "float", "Scalar"]}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("kernel", "copy_kernel", 200, 400, pid=0, tid=7, correlation=1)]
    kernels = kernel_table([trace(tmp_path / "copy.json", events)], by="op")
    row = kernels.iloc[0]
    assert row["flops"] == 0 and row["alg_bytes"] == n * (4 + 2) and row["coverage"] == 1
    roofs = load(Path(__file__).parent / "data" / "roofs" / "a100.json")
    judged = roofline_table(roofs, kernels).iloc[0]
    assert judged["precision"] == NO_FLOPS and judged["bytes_kind"] == ALGORITHMIC
    assert judged["bound"] == "memory" and judged["level"] == "dram"
    assert judged["time_at_roof_s"] == pytest.approx(n * 6 / roofs.bandwidth("dram").value)
    assert 0 < judged["pct_of_roof"] < 100


def test_backward_nodes_count_their_aten_ops_once(tmp_path):
    """autograd::engine::evaluate_function: MulBackward0 > MulBackward0 > two aten::mul, each launching a
    kernel: both muls count (neither holds the other), the autograd nodes nothing. aten::softmax >
    aten::_softmax and a copy_ inside it launching two kernels: the outer op counts once, on its longest
    kernel; the other is its helper."""
    from analysis.ncu import kernel_table

    dims = {"Input Dims": [[64, 128], [64, 128]], "Input type": ["float", "float"]}
    # softmax(self, dim, dtype=None), _softmax(self, dim, half_to_float)
    soft = {"Input Dims": [[64, 128], [], []], "Input type": ["float", "Scalar", ""]}
    events = [
        x("cpu_op", "autograd::engine::evaluate_function: MulBackward0", 0, 100, **{"External id": 1}),
        x("cpu_op", "MulBackward0", 1, 98, **{"External id": 2, "Input Dims": [[64, 128]], "Input type": ["float"]}),
        x("cpu_op", "aten::mul", 10, 20, **{"External id": 3, **dims}),
        x("cuda_runtime", "cudaLaunchKernel", 15, 2, correlation=11),
        x("cpu_op", "aten::mul", 40, 20, **{"External id": 4, **dims}),
        x("cuda_runtime", "cudaLaunchKernel", 45, 2, correlation=12),
        x("cpu_op", "aten::softmax", 200, 100, **{"External id": 5, **soft}),
        x("cpu_op", "aten::_softmax", 201, 60, **{"External id": 6, "Input Dims": [[64, 128], [], []],
                                                   "Input type": ["float", "Scalar", "Scalar"]}),
        x("cuda_runtime", "cudaLaunchKernel", 210, 2, correlation=13),
        x("cpu_op", "aten::copy_", 270, 20, **{"External id": 7, **dims}),
        x("cuda_runtime", "cudaLaunchKernel", 275, 2, correlation=14),
        x("kernel", "mul_kernel", 400, 5, pid=0, tid=7, correlation=11),
        x("kernel", "mul_kernel", 410, 5, pid=0, tid=7, correlation=12),
        x("kernel", "softmax_kernel", 420, 5, pid=0, tid=7, correlation=13),
        x("kernel", "copy_kernel", 430, 9, pid=0, tid=7, correlation=14)]
    f = trace(tmp_path / "bwd.json", events)
    per_launch = kernel_table([f], per_launch=True)
    n = 64 * 128
    assert per_launch["flops"].sum() == 2 * n + 5 * n  # two muls, one softmax
    ops = kernel_table([f], by="op").set_index("kernel")
    assert ops.at["aten::mul", "flops"] == 2 * n and ops.at["aten::mul", "alg_bytes"] == 2 * 3 * n * 4
    assert ops.at["aten::softmax", "flops"] == 5 * n and ops.at["aten::softmax", "launches"] == 2
    # both kernels are launched by memory-bound ops: the work is on the longest, the other is its helper
    copy = per_launch[per_launch["kernel"] == "copy_kernel"].iloc[0]
    assert copy["flops"] == 5 * n and math.isnan(per_launch[per_launch["kernel"] == "softmax_kernel"].iloc[0]["flops"])


def _placed_share(path: Path) -> float:
    """The share of a trace's kernel time whose op has FLOPs and bytes (by op, the time its coverage holds)."""
    from analysis.ncu import kernel_table

    t = kernel_table([path], by="op")
    placed = t["flops"].notna() & t["alg_bytes"].notna()
    return float((t["time_s"] * t["coverage"].fillna(0))[placed].sum() / t["time_s"].sum())


def test_real_a100_trace_places_its_aten_time():
    """HTA's A100 training trace: with GEMMs only, 0.6 % of its kernel time (2.0 of 345 ms) had FLOPs and
    bytes; with the element-wise, reduction, copy and fill ops 9.1 % (31.3 ms); with fbgemm's sparse ops
    (analysis.ops.recsys) 11.5 %. The rest: NCCL communication (47 %), torch.compile graphs (30 %, no
    shapes), kernels without an op (9 %), fbgemm's embedding lookups, and cat (its tensor lists' shapes are
    not in this trace)."""
    path = TRACES / "a100_80gb_shapes_rank0.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared torch traces are not checked out)")
    share = _placed_share(path)
    assert 0.11 <= share < 0.12
    with gzip.open(path) as f:
        ops = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op"]
    # every aten::mul of the trace has a model; [4096] * a 0-dim double stays fp32: 4096 FLOPs, 2 x 16 KiB
    muls = [e for e in ops if e["name"] == "aten::mul"]
    assert all(_work(e) is not None for e in muls)
    scaled = next(e for e in muls if e["args"]["Input Dims"] == [[4096], []] and e["args"]["Input type"][1] == "double")
    assert _work(scaled).flops == 4096 and _work(scaled).bytes == 2 * 4096 * 4
    assert not math.isnan(_work(scaled).flops)


def test_foreach_ops_sum_their_elements(tmp_path):
    """_foreach_addcmul_(self, t1, t2, value) over two tensors: addcmul_'s 3 FLOPs and 4 tensors (self read
    and written, t1, t2 read) per element; the fp32 of the lists is assumed, and the reader says so."""
    torch = pytest.importorskip("torch")

    lists = [[torch.randn(16, 8), torch.randn(16)] for _ in range(3)]
    events = _events(lambda: torch._foreach_addcmul_(*lists, value=0.5), tmp_path / "foreach.json")
    event = next(e for e in events if e["name"] == "aten::_foreach_addcmul_")
    work = _work(event)
    elements = sum(t.numel() for t in lists[0])
    assert work.flops == 3 * elements and work.bytes == 4 * nbytes(*lists[0]) and work.assumed == LIST_NOTE
    # in a GPU trace: the reader's notes count the calls resting on the assumption
    a = event["args"]
    events = [x("cpu_op", "aten::_foreach_addcmul_", 0, 100, **{"External id": 1, "Input Dims": a["Input Dims"],
                                                                 "Input type": a["Input type"],
                                                                 "Concrete Inputs": a["Concrete Inputs"]}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("kernel", "multi_tensor_apply_kernel", 200, 4, pid=0, tid=7, correlation=1)]
    from analysis.ncu import read_profile

    table = read_profile(trace(tmp_path / "foreach_gpu.json", events))
    assert table.iloc[0]["flops_fp32"] == 3 * elements
    assert f"{LIST_NOTE} (1 op call(s))" in table.attrs["notes"]


def test_select_backward_and_dropouts_mask():
    """select_backward of a [4, 768] bf16 gradient into [4, 197, 768]: the gradient read, the whole output
    written (4 x 768 x 2 + 4 x 197 x 768 x 2 bytes); bernoulli_ in place on [8, 64] fp32: a draw compared with p
    an element, self written."""
    w = op_work("aten::select_backward", [[4, 768], [], [], []], ["c10::BFloat16", "ScalarList", "Scalar", "Scalar"],
                ["", "[4, 197, 768]", "1", "0"])
    assert (w.flops, w.bytes) == (0, 4 * 768 * 2 + 4 * 197 * 768 * 2)
    w = op_work("aten::bernoulli_", [[8, 64], [], []], ["float", "Scalar", ""], ["", "0.9", ""])
    assert (w.flops, w.bytes) == (8 * 64, 8 * 64 * 4)
    # input_sizes not recorded (older traces): no number
    assert op_work("aten::select_backward", [[4, 768], [], [], []], ["float", "", "Scalar", "Scalar"], None) is None


def test_every_op_model_has_a_named_class_of_work():
    """predict --against compares ops by their class of work: every kind of op model in OPS is named in
    OP_CLASSES (no kind falls back to its Python name), and torch 1.9's cudnn_convolution_backward_input and
    _weight compare with torch 2's convolution_backward."""
    from analysis.ops import OP_CLASSES, OPS, op_class

    assert {type(rule) for rule in OPS.values()} <= set(OP_CLASSES)
    assert op_class("aten::cudnn_convolution_backward_input") == op_class("aten::cudnn_convolution_backward_weight") \
        == op_class("aten::convolution_backward") == "convolution backward"
    assert op_class("aten::max_pool2d_with_indices") == op_class("aten::adaptive_avg_pool2d") == "pooling"
    assert op_class("aten::no_such_op") is None

"""analysis.predict: a model's ops recorded on the meta device, through the op models a trace's ops use. Oracles:
torch's own FlopCounterMode for the matrix, convolution and attention FLOPs, and numel x itemsize computed here
for the bytes of element-wise ops."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (its CPU build) is not installed")

from analysis import predict  # noqa: E402
from analysis.ops.matrix import MATRIX_OPS  # noqa: E402
from analysis.roofline import target_roofs  # noqa: E402

MODELS = Path(__file__).parent / "data" / "predict" / "models.py"


def spec(function: str) -> str:
    return f"{MODELS}:{function}"


def torch_flops(function: str) -> dict[str, int]:
    """FlopCounterMode's count per op of one forward pass of the model, on the meta device."""
    from torch.utils.flop_counter import FlopCounterMode

    model, inputs = predict.load_spec(spec(function))
    with torch.no_grad(), torch.device("meta"), FlopCounterMode(display=False) as counter:
        model.to("meta")(*[t.to("meta") for t in inputs])
    return {str(op).replace("aten.", "aten::"): n for op, n in counter.get_flop_counts()["Global"].items()}


@pytest.mark.parametrize("function", ["cnn", "encoder", "decoder"])
def test_matrix_flops_equal_torchs_flop_counter(function):
    ops = predict.op_table(predict.record(*predict.load_spec(spec(function))), convention="torch")
    matrix = ops[ops["op"].isin(MATRIX_OPS)].groupby("op")["flops"].sum()
    expected = torch_flops(function)
    if function == "decoder":  # the one fused attention a GPU runs; on the meta device torch counts its two bmm
        expected["aten::scaled_dot_product_attention"] = expected.pop("aten::bmm")
    assert matrix.to_dict() == pytest.approx(expected)


def test_attention_is_one_fused_kernel_with_flash_bytes():
    """The decoder's causal attention, bf16, 2 x 8 heads x 16 x 16 (head 8): one op, not bmm + softmax; its
    bytes q, k, v (k and v repeated to 8 heads in this model) and the output, 4 x 2 x 8 x 16 x 8 x 2 bytes;
    the executed pairs of the causal mask, 136 of 256: 2 x 2 x 8 x 136 x (8 + 8) FLOPs."""
    ops = predict.op_table(predict.record(*predict.load_spec(spec("decoder"))))
    attention = ops[ops["op"] == "aten::scaled_dot_product_attention"]
    assert len(attention) == 1 and not ops["op"].isin(["aten::bmm", "aten::_safe_softmax"]).any()
    assert attention["bytes"].iloc[0] == 4 * 2 * 8 * 16 * 8 * 2
    assert attention["flops"].iloc[0] == 2 * 2 * 8 * 136 * (8 + 8)
    assert attention["roof"].iloc[0] == "tensor.bf16"


def test_elementwise_bytes_are_numel_times_itemsize():
    """The CNN's relu reads and writes 4 x 16 x 8 x 8 fp32 elements: 2 x 4096 x 4 bytes, 1 FLOP each."""
    ops = predict.op_table(predict.record(*predict.load_spec(spec("cnn"))))
    relu = ops[ops["op"] == "aten::relu"].iloc[0]
    assert relu["bytes"] == 2 * 4 * 16 * 8 * 8 * 4 and relu["flops"] == 4 * 16 * 8 * 8
    assert relu["module"] == "" and set(ops["module"]) == {"conv", "bn", "fc", ""}


def test_views_launch_no_kernel_and_modules_sum_to_the_total():
    calls = predict.record(*predict.load_spec(spec("decoder")))
    assert any(c.op.endswith("(view)") for c in calls)
    ops = predict.op_table(calls)
    gpu = target_roofs("H100 SXM")
    by_op, by_module = predict.predict(ops, [gpu], "op"), predict.predict(ops, [gpu], "module")
    column = f"time_s {gpu.label}"
    assert by_module["flops"].sum() == pytest.approx(by_op["flops"].sum())
    assert by_module[column].sum() == pytest.approx(by_op[column].sum())
    assert by_op["calls"].sum() == len(ops) == sum(predict.launches_kernel(c) for c in calls)


def test_time_is_the_roofs_time_never_below_the_launch_floor():
    """The encoder's linear1 (addmm of [32, 64] x [64, 128], fp32): 2 x 32 x 64 x 128 FLOPs at 66.9 TFLOP/s is
    16 ns, its bytes 4 x (32 x 64 + 64 x 128 + 128 + 32 x 128) at 3.35 TB/s 17 ns: both under the 3 us floor."""
    ops = predict.op_table(predict.record(*predict.load_spec(spec("encoder"))))
    gpu = target_roofs("H100 SXM")
    times = predict.time_on(gpu, ops)
    linear1 = ops.index[ops["module"] == "linear1"][0]
    assert times[linear1] == pytest.approx(gpu.floor[0])
    assert (times.dropna() >= gpu.floor[0] - 1e-15).all()


def test_a_big_gemm_is_at_its_tensor_roof():
    """An 8192 x 8192 x 8192 bf16 matmul: 2 x 8192^3 FLOPs at H100 SXM's 989.4 TFLOP/s bf16 (1.11 ms), above
    its 3 x 8192^2 x 2 bytes at 3.35 TB/s (0.12 ms)."""
    calls = [predict.Call("aten::mm", [[8192, 8192], [8192, 8192]], ["c10::BFloat16"] * 2, ["", ""],
                          [[8192, 1], [8192, 1]], "")]
    ops = predict.op_table(calls)
    assert ops.at[0, "roof"] == "tensor.bf16"
    gpu = target_roofs("H100 SXM")
    assert predict.time_on(gpu, ops)[0] == pytest.approx(2 * 8192 ** 3 / gpu.flat("tensor.bf16").value)


def test_cli_table_csv_and_errors(tmp_path, capsys):
    out = tmp_path / "p.csv"
    assert predict.main([spec("cnn"), "--roofs", "H100 SXM", "--roofs", "A100 SXM4 80GB", "--csv", str(out)]) == 0
    import pandas as pd

    table = pd.read_csv(out)
    assert list(table.columns[:5]) == ["op", "calls", "modelled_calls", "flops", "bytes"]
    assert set(table["op"]) == {"aten::convolution", "aten::native_batch_norm", "aten::relu", "aten::addmm"}
    assert predict.main([spec("cnn"), "--roofs", "H100 SXM", "--csv", str(out)]) == 2  # not overwritten
    assert "exists" in capsys.readouterr().err
    for bad in (f"{MODELS}:nothing", "models.txt:cnn", f"{MODELS}"):
        assert predict.main([bad, "--roofs", "H100 SXM"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 3 and "Traceback" not in err


def test_unmodelled_ops_are_missing_never_zero():
    calls = [predict.Call("aten::frobnicate", [[4, 4]], ["float"], [""], [[4, 1]], "")]
    ops = predict.op_table(calls)
    assert not ops.at[0, "modelled"] and math.isnan(ops.at[0, "flops"]) and math.isnan(ops.at[0, "bytes"])
    assert math.isnan(predict.time_on(target_roofs("H100 SXM"), ops)[0])


@pytest.mark.parametrize("source", ["def make(:\n", "def make():\n    raise ValueError('no such layer')\n",
                                    "import not_a_module\n", "def make():\n    return 3\n",
                                    "import torch\ndef make():\n"
                                    "    return torch.nn.Linear(4, 4), (torch.ones(3, 5),)\n"])
def test_a_broken_model_file_is_one_line(source, tmp_path, capsys):
    path = tmp_path / "model.py"
    path.write_text(source)
    assert predict.main([f"{path}:make", "--roofs", "H100 SXM"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "error" in err


@pytest.mark.parametrize("function", ["cnn", "encoder"])
def test_a_training_step_has_torchs_forward_and_backward_flops(function):
    """--train: the forward, the backward of the output's sum (and an AdamW step, whose ops are no matrix ops):
    the matrix and convolution FLOPs equal FlopCounterMode's over the same forward and backward."""
    from torch.utils.flop_counter import FlopCounterMode

    model, inputs = predict.load_spec(spec(function))
    with torch.device("meta"), FlopCounterMode(display=False) as counter:
        model.to("meta").train()(*[t.to("meta") for t in inputs]).float().sum().backward()
    expected = {str(op).replace("aten.", "aten::"): n for op, n in counter.get_flop_counts()["Global"].items()}
    calls = predict.record(*predict.load_spec(spec(function)), train=True, optimizer="adamw")
    ops = predict.op_table(calls, convention="torch")
    matrix = ops[ops["op"].isin(MATRIX_OPS) | ops["op"].str.endswith("_backward") & ops["op"].str.contains("conv")]
    assert matrix.groupby("op")["flops"].sum().to_dict() == pytest.approx(expected)
    # the optimizer's foreach ops, in the "(optimizer)" module, update every parameter element
    optimizer = ops[ops["module"] == "(optimizer)"]
    assert len(optimizer) and optimizer["op"].str.startswith("aten::_foreach_").all()


def test_the_picture_is_a_roofline_of_the_prediction(tmp_path):
    """-o: the roofline read as a profile is (as_kernels): every modelled op at or above nothing but its roof (a
    prediction is at its roof or the floor), its time budget all of the predicted time, its title says PREDICTED."""
    from analysis.plot import roofline_figure
    from analysis.roofline import roofline_table
    from analysis.roofline.budget import time_budget

    gpu = target_roofs("H100 SXM")
    ops = predict.op_table(predict.record(*predict.load_spec(spec("encoder"))))
    table = roofline_table(gpu, predict.as_kernels(ops, gpu, what="the encoder"))
    kernels = predict.as_kernels(ops, gpu)
    # each FLOP on one precision's roof: the precisions sum to the total (an fp32 GEMM is not also tensor work)
    precisions = kernels[["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]].sum(axis=1)
    assert precisions.to_numpy() == pytest.approx(kernels["flops"].fillna(0).to_numpy())
    judged = table[table["pct_of_roof"].notna()]
    assert len(judged) == len(table) and (judged["pct_of_roof"] <= 100 + 1e-6).all()
    assert not any("above their roof" in w for w in table.attrs["warnings"])
    assert time_budget(table)["time_s"].sum() == pytest.approx(predict.time_on(gpu, ops).sum())
    fig = roofline_figure(gpu, table)
    assert "PREDICTED, not profiled: the encoder" in fig.axes[0].get_title(loc="left")
    out = tmp_path / "p.png"
    assert predict.main([spec("encoder"), "--roofs", "H100 SXM", "-o", str(out)]) == 0 and out.stat().st_size > 10_000


def test_json_is_versioned_and_says_what_is_not_modelled(tmp_path, capsys):
    import json

    out = tmp_path / "p.json"
    assert predict.main([spec("decoder"), "--roofs", "H100 SXM", "--roofs", "A100 SXM4 80GB", "--json",
                         str(out)]) == 0
    doc = json.loads(out.read_text())
    assert (doc["format"], doc["version"], doc["step"]) == ("ceilings.predict", 1, "forward pass")
    assert [g["gpu"].split(" (")[0] for g in doc["gpus"]] == ["NVIDIA H100 SXM5 80GB", "NVIDIA A100 SXM4 80GB"]
    # a block this small is all launch floors (3 us a kernel on both): never slower on the H100
    assert doc["gpus"][0]["time_s_lower_bound"] <= doc["gpus"][1]["time_s_lower_bound"]
    unknown = [r for r in doc["rows"] if r["modelled_calls"] < r["calls"]]
    assert {r["op"] for r in unknown} == set(doc["unmodelled"])
    assert all(r["flops"] is None for r in unknown if r["modelled_calls"] == 0)
    assert doc["modelled_flops"] == pytest.approx(sum(r["flops"] or 0 for r in doc["rows"]))


def test_html_page_of_a_prediction(tmp_path):
    """A Llama-7B-shaped forward (examples/predict_llama.py), whose 225 GEMMs sum to one row at its roof."""
    out = tmp_path / "p.html"
    example = Path(__file__).parents[1] / "examples" / "predict_llama.py"
    assert predict.main([f"{example}:llama7b", "--roofs", "H100 SXM", "--html", str(out)]) == 0
    page = out.read_text()
    assert "PREDICTED, not profiled" in page and "Time budget" in page
    # each row is at its roofs: nothing saved, not a rounding's "3.47e-09 ns"
    import re

    assert not re.search(r"\de-\d+ ns", page)


def test_vit_base_flops_are_the_papers_arithmetic_and_torchs():
    """ViT-Base/16 at batch 4 in bf16 (197 tokens of 768, MLP 3072, 12 heads of 64, 12 blocks, a pooler): the
    linear layers 12 x 2 x 4 x 197 x (4 x 768^2 + 2 x 768 x 3072) + the pooler's 2 x 4 x 768^2; the patch
    convolution 2 x 4 x 196 x 768 x (3 x 16 x 16); attention (not causal) 12 x 4 x 12 x 197^2 x 64 x 4. A real
    H100 trace of this model (TraceLens tests/traces/h100/Falconsai_nsfw_image_detection__1016002.json.gz, read
    with `python -m analysis.ncu --by op`) has the same three numbers: BENCHMARKS.md."""
    ops = predict.op_table(predict.record(*predict.load_spec(spec("vit_base"))))
    flops = ops.groupby("op")["flops"].sum()
    assert flops["aten::addmm"] == 12 * 2 * 4 * 197 * (4 * 768 ** 2 + 2 * 768 * 3072) + 2 * 4 * 768 ** 2
    assert flops["aten::convolution"] == 2 * 4 * 196 * 768 * (3 * 16 * 16)
    assert flops["aten::scaled_dot_product_attention"] == 12 * 4 * 12 * 197 ** 2 * 64 * 4
    counted = torch_flops("vit_base")
    assert flops["aten::addmm"] == counted["aten::addmm"] and flops["aten::convolution"] == counted[
        "aten::convolution"]


def test_a_recorded_tensor_lists_dtype_is_its_own():
    """The class token joined to the patches: a bf16 cat of 4 x 1 x 768 and 4 x 196 x 768, read and written at
    2 bytes an element (a trace, which does not record a list's dtype, would take fp32), without the note."""
    ops = predict.op_table(predict.record(*predict.load_spec(spec("vit_base"))))
    cat = ops[ops["op"] == "aten::cat"].iloc[0]
    assert cat["bytes"] == 2 * 4 * 197 * 768 * 2
    calls = [c for c in predict.record(*predict.load_spec(spec("vit_base"))) if c.op == "aten::cat"]
    from analysis.ops import op_work
    work = op_work(calls[0].op, calls[0].dims, calls[0].types, calls[0].concrete, list_types=calls[0].list_types)
    assert work.assumed is None
    assert op_work(calls[0].op, calls[0].dims, calls[0].types, calls[0].concrete).bytes == 2 * 4 * 197 * 768 * 4


def linear_relu_trace(path, rows=32):
    """The linear_relu model as a trace of it on an A100 records it: aten::linear (10 us) and aten::relu (5 us)."""
    from tests.test_torch_trace import trace, x

    kernel = dict(pid=0, tid=9, device=0)
    return trace(path, [
        x("cpu_op", "aten::linear", 0, 50, **{"External id": 1, "Input Dims": [[rows, 64], [128, 64], [128]],
                                              "Input type": ["float", "float", "float"]}),
        x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
        x("cpu_op", "aten::relu", 100, 50, **{"External id": 2, "Input Dims": [[rows, 128]],
                                              "Input type": ["float"]}),
        x("cuda_runtime", "cudaLaunchKernel", 110, 5, correlation=2),
        x("kernel", "sgemm_32x32", 1000, 10, correlation=1, **kernel),
        x("kernel", "relu_kernel", 1100, 5, correlation=2, **kernel)])


def test_against_a_trace_compares_each_class_of_op(tmp_path, capsys, monkeypatch):
    """On the A100 SXM4 80GB datasheet (19.5 TFLOP/s fp32, 2,039 GB/s): the linear's 2 x 32 x 64 x 128 FLOPs
    and 4 x (32 x 64 + 128 x 64 + 128 + 32 x 128) bytes take the longer of 26.9 ns and 28.4 ns; the relu's
    4 x 2 x 32 x 128 bytes 16.1 ns; no launch floor. Efficiency: that over the trace's 10 us and 5 us."""
    monkeypatch.chdir(tmp_path)  # no roofs-*.json of an A100 here: the datasheet's
    out = tmp_path / "p.json"
    assert predict.main([spec("linear_relu"), "--roofs", "H100 SXM", "--against",
                         str(linear_relu_trace(tmp_path / "t.json")), "--json", str(out)]) == 0
    import json
    doc = json.loads(out.read_text())["against"]
    assert doc["gpu"].startswith("NVIDIA A100 SXM4 80GB")
    assert doc["roofs"] == "datasheet figures for NVIDIA A100 SXM4 80GB (not measured here)"
    classes = {c["class"]: c for c in doc["classes"]}
    gemm, relu = classes["matrix multiply"], classes["element-wise"]
    assert gemm["predicted_flops"] == gemm["trace_flops"] == 2 * 32 * 64 * 128
    linear_bytes = 4 * (32 * 64 + 128 * 64 + 128 + 32 * 128)
    assert gemm["predicted_s"] == pytest.approx(max(2 * 32 * 64 * 128 / 19.5e12, linear_bytes / 2039e9))
    assert gemm["measured_s"] == pytest.approx(10e-6)
    assert relu["predicted_s"] == pytest.approx(4 * 2 * 32 * 128 / 2039e9) and relu["measured_s"] == pytest.approx(5e-6)
    assert relu["efficiency"] == pytest.approx(relu["predicted_s"] / 5e-6)
    assert "FLOPs differ" not in capsys.readouterr().err


def test_against_another_batch_says_the_flops_differ(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert predict.main([spec("linear_relu"), "--roofs", "H100 SXM", "--against",
                         str(linear_relu_trace(tmp_path / "t.json", rows=64))]) == 0
    captured = capsys.readouterr()
    assert "warning: FLOPs differ from the trace's in matrix multiply (5.243e+05 predicted, 1.049e+06 traced)" \
        in captured.err
    assert "matrix multiply" in captured.out and "efficiency" in captured.out


def test_calibrate_divides_each_class_by_the_efficiency_the_trace_reached(tmp_path, monkeypatch):
    """The trace's linear took 10 us for work of 28.4 ns on the A100's roofs (0.28 %), its relu 5 us for 16.1 ns:
    on the H100 SXM datasheet (3.35 TB/s) the linear's bytes take 17.3 ns, so 17.3 ns / 0.28 % calibrated; the
    relu 9.78 ns / (16.1 ns / 5 us). Not a lower bound any more: the JSON names it an estimate."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "p.json"
    assert predict.main([spec("linear_relu"), "--roofs", "H100 SXM", "--against",
                         str(linear_relu_trace(tmp_path / "t.json")), "--calibrate", "--json", str(out)]) == 0
    import json
    doc = json.loads(out.read_text())
    linear_bytes, relu_bytes = 4 * (32 * 64 + 128 * 64 + 128 + 32 * 128), 4 * 2 * 32 * 128
    on_a100 = {"matrix multiply": max(2 * 32 * 64 * 128 / 19.5e12, linear_bytes / 2039e9) / 10e-6,
               "element-wise": relu_bytes / 2039e9 / 5e-6}
    assert doc["against"]["calibrated"] == pytest.approx(on_a100)
    on_h100 = max(2 * 32 * 64 * 128 / 66.9e12, linear_bytes / 3350e9) / on_a100["matrix multiply"] + \
        relu_bytes / 3350e9 / on_a100["element-wise"]
    assert doc["gpus"][0]["time_s_estimate"] == pytest.approx(on_h100)
    assert "time_s_lower_bound" not in doc["gpus"][0]


def test_against_says_its_roofs_were_measured(tmp_path, capsys, monkeypatch):
    """Roofs measured on the trace's A100 in the working folder replace its datasheet: the check's headline and
    its JSON name that file."""
    import json
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(Path(__file__).parent / "data" / "roofs" / "a100.json", tmp_path / "roofs-a100.json")
    trace = str(linear_relu_trace(tmp_path / "t.json"))
    assert predict.main([spec("linear_relu"), "--roofs", "H100 SXM", "--against", trace]) == 0
    assert f"against {trace} on NVIDIA A100-SXM4-80GB (CC 8.0): measured roofs (roofs-a100.json); " \
        in capsys.readouterr().out
    assert predict.main([spec("linear_relu"), "--roofs", "H100 SXM", "--against", trace, "--json", "p.json"]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["against"]["roofs"] == "measured roofs (roofs-a100.json)"


def test_calibrate_needs_a_trace(capsys):
    assert predict.main([spec("linear_relu"), "--roofs", "H100 SXM", "--calibrate"]) == 2
    assert "--calibrate: give --against TRACE" in capsys.readouterr().err


def test_attention_backward_is_one_fused_kernel_at_torchs_count():
    """The decoder trained: its attention's backward is one flash-attention backward (not the meta device's
    bmm and softmax backward), with torch's own count of it (flop_counter.sdpa_backward_flop_count, every pair)
    and bytes: grad_out, q, k, v, the output and an fp32 log-sum-exp read, the three gradients written."""
    from torch.utils.flop_counter import sdpa_backward_flop_count

    ops = predict.op_table(predict.record(*predict.load_spec(spec("decoder")), train=True, optimizer="sgd"),
                           convention="torch")
    backward = ops[ops["op"] == "aten::_scaled_dot_product_flash_attention_backward"]
    assert len(backward) == 1 and not ops["op"].isin(["aten::bmm", "aten::_softmax_backward_data"]).any()
    shape = (2, 8, 16, 8)  # batch, heads (k and v repeated to 8 in this model), tokens, head dim
    assert backward["flops"].iloc[0] == sdpa_backward_flop_count(shape, shape, shape, shape)
    assert backward["bytes"].iloc[0] == 8 * 2 * 8 * 16 * 8 * 2 + 2 * 8 * 16 * 4
    assert "aten::ones_like" not in set(ops.loc[~ops["modelled"], "op"])


def test_a_fused_optimizer_is_one_kernel_over_every_parameter():
    """The encoder layer's 33,472 fp32 parameters (in_proj 64 x 192 + 192, out_proj 64 x 64 + 64, linear1
    64 x 128 + 128, linear2 128 x 64 + 64, two norms 2 x 128) in one _fused_adamw_: 13 FLOPs an element and 1 for
    the decoupled weight decay (AdamW's default 0.01), p, g, m, v read and p, m, v written at 4 bytes."""
    calls = predict.record(*predict.load_spec(spec("encoder")), train=True, optimizer="adamw", fused_optimizer=True)
    ops = predict.op_table(calls)
    step = ops[ops["module"] == "(optimizer)"]
    params = 64 * 192 + 192 + 64 * 64 + 64 + 64 * 128 + 128 + 128 * 64 + 64 + 2 * 128
    assert list(step["op"]) == ["aten::_fused_adamw_"]
    assert step["flops"].iloc[0] == 14 * params and step["bytes"].iloc[0] == 7 * 4 * params
    # dropout's masks and the indexing's backward have models too: nothing unmodelled in the step
    assert ops["modelled"].all(), set(ops.loc[~ops["modelled"], "op"])


def test_hf_config_builds_the_decoder_the_step_model_counts():
    """hf:Llama-3.2-1B (16 layers, hidden 2048, 32 query and 8 KV heads of 64, MLP 8192, vocab 128256, tied) on 64
    tokens: every matrix FLOP from the config by hand (2 x tokens x each linear's in x out, the LM head over every
    position), equal to torch's FlopCounterMode on the same module, and the layers' GEMMs and attention equal to
    analysis.llm's prefill of that config (its LM head scores the last token only)."""
    from torch.utils.flop_counter import FlopCounterMode

    from analysis.llm.models import load_model
    from analysis.llm.work import Setup, step_ops

    model, inputs, assumed = predict.hf_spec("hf:Llama-3.2-1B", batch=1, tokens=64)
    assert assumed == []
    ops = predict.op_table(predict.record(model, inputs), convention="torch")
    flops = ops.groupby("op")["flops"].sum()
    layer = 2048 * (32 * 64) + 2 * 2048 * (8 * 64) + (32 * 64) * 2048 + 3 * 2048 * 8192
    assert flops["aten::mm"] == 2 * 64 * (16 * layer + 2048 * 128256)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*inputs)
    counted = {str(op).replace("aten.", "aten::"): n for op, n in counter.get_flop_counts()["Global"].items()}
    assert flops["aten::mm"] == counted["aten::mm"]
    llm, _ = load_model("Llama-3.2-1B")
    prefill = {op.name: op for op in step_ops(llm, Setup(batch=1, prompt=64), 64, 0)}
    gemms = sum(prefill[n].flops["tensor.bf16"] for n in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"))
    assert flops["aten::mm"] - 2 * 64 * 2048 * 128256 == gemms
    executed = predict.op_table(predict.record(model, inputs))
    attention = executed.loc[executed["op"] == "aten::scaled_dot_product_attention", "flops"].sum()
    assert attention == prefill["attention"].flops["tensor.bf16"]


def test_hf_moe_routes_evenly_and_says_so(capsys):
    """Mixtral-8x7B on 512 tokens, top-2 of 8 experts: each expert's gate+up and down as one batched GEMM over the
    1,024 routed rows spread evenly, 128 an expert: 2 x 8 x 128 x 4096 x (2 x 14336 + 14336) FLOPs a layer; every
    expert's weights read."""
    model, inputs, assumed = predict.hf_spec("hf:Mixtral-8x7B-v0.1", batch=1, tokens=512)
    assert len(assumed) == 1 and "uniformly at random" in assumed[0]
    ops = predict.op_table(predict.record(model, inputs))
    bmm = ops[ops["op"] == "aten::bmm"]
    assert bmm["flops"].sum() == 32 * 2 * 8 * 128 * 4096 * 3 * 14336
    assert bmm["bytes"].sum() >= 32 * 8 * 3 * 4096 * 14336 * 2  # the experts' bf16 weights, every layer
    assert ops["modelled"].all(), set(ops.loc[~ops["modelled"], "op"])
    assert predict.main(["hf:Mixtral-8x7B-v0.1", "--roofs", "H100 SXM", "--tokens", "64"]) == 0
    assert "warning: mixture of experts: the tokens routed uniformly at random" in capsys.readouterr().err


def test_hf_moe_reads_the_experts_uniform_routing_touches_on_average():
    """Qwen3-30B-A3B at 16 tokens, top-8 of 128: an expert is missed by all 16 tokens with probability
    (1 - 8/128)^16, so 128 x (1 - (15/16)^16) = 82.4 of them are touched on average: 82 batched GEMM rows of
    experts, ceil(16 x 8 / 82) = 2 rows each (analysis.llm reads the same experts' weights)."""
    model, inputs, _ = predict.hf_spec("hf:Qwen3-30B-A3B", batch=1, tokens=16)
    ops = predict.op_table(predict.record(model, inputs))
    bmm = ops[ops["op"] == "aten::bmm"]
    touched = round(128 * (1 - (15 / 16) ** 16))
    assert touched == 82
    assert bmm["flops"].sum() == 48 * 2 * touched * 2 * 2048 * 3 * 768  # a layer: gate+up (2 x 768) and down


def test_hf_refuses_what_it_does_not_build(capsys):
    assert predict.main(["hf:gpt-oss-20b", "--roofs", "H100 SXM"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sliding-window layers are not built" in err[0] and "analysis.llm" in err[0]
    assert predict.main(["hf:Llama-3.2-1B", "--roofs", "H100 SXM", "--tokens", "200000"]) == 2
    assert "200000 tokens exceeds" in capsys.readouterr().err

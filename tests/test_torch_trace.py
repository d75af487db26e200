"""torch.profiler chrome traces: kernels, their ops in both linking styles, modules, annotations, FLOPs from
shapes on the op's longest kernel, memcpy apart, devices, ranks, --by groupings, the application point.

Hand-written traces follow Kineto's layout (../shared/torch-traces/MANIFEST.md); the real traces there are
checked against numbers the test reads off the JSON itself.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.ncu import kernel_table, main, read_profile
from analysis.roofline import ALGORITHMIC, application_point, load, roofline_table
from common.errors import CeilingsError

TRACES = Path(__file__).resolve().parents[2] / "shared" / "torch-traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/torch-traces is absent")
A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0, "numSms": 108}
M, N, K = 256, 512, 128  # the mm of the hand-written trace: 2 x 256 x 512 x 128 FLOPs


def x(cat, name, ts, dur, pid=10, tid=10, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def trace(path: Path, events: list[dict], device=A100, rank=None) -> Path:
    doc = {"schemaVersion": 1, "deviceProperties": [device] if device else [], "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()) if path.suffix == ".gz" else json.dumps(doc).encode())
    return path


def model_events() -> list[dict]:
    """A step: Linear (module) -> aten::linear -> aten::mm launching a GEMM and a split-K reduction (old
    style: kernel External id = correlation, found through the launch); a relu launched by an op found
    through the kernel's External id (new style, no runtime event); a memcpy; a kernel launched outside
    any op."""
    return [
        x("user_annotation", "ProfilerStep#3", 0, 1000),
        x("user_annotation", "forward", 5, 900),
        x("python_function", "nn.Module: Linear_0", 10, 200),
        x("cpu_op", "aten::linear", 20, 150, **{"External id": 1}),
        x("cpu_op", "aten::mm", 30, 100, **{"External id": 2, "Input Dims": [[M, K], [K, N]],
                                            "Input type": ["float", "float"]}),
        x("cuda_runtime", "cudaLaunchKernel", 40, 5, correlation=900, **{"External id": 900}),
        x("cuda_runtime", "cudaLaunchKernel", 60, 5, correlation=901, **{"External id": 901}),
        x("cpu_op", "aten::relu", 300, 50, **{"External id": 3, "Input Dims": [[M, N]], "Input type": ["float"]}),
        x("kernel", "sgemm_128x64", 400, 30.0, pid=0, tid=7, correlation=900, device=0, grid=[4, 8, 1],
          block=[256, 1, 1], **{"External id": 900}),
        x("kernel", "splitK_reduce", 431, 2.0, pid=0, tid=7, correlation=901, device=0, **{"External id": 901}),
        x("kernel", "relu_kernel", 433, 4.0, pid=0, tid=7, correlation=950, device=0, **{"External id": 3}),
        x("kernel", "stray_kernel", 437, 1.0, pid=0, tid=7, correlation=999, device=0, **{"External id": 999}),
        x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 500, 10, pid=0, tid=7, correlation=902, bytes=4096),
    ]


def test_kernels_ops_modules_annotations_and_shape_flops(tmp_path):
    t = read_profile(trace(tmp_path / "step.pt.trace.json", model_events()))
    assert t.attrs["format"] == "torch.profiler trace"
    k = {r["kernel"]: r for _, r in t.iterrows()}
    assert set(k) == {"sgemm_128x64", "splitK_reduce", "relu_kernel", "stray_kernel"}  # the memcpy is no kernel
    gemm = k["sgemm_128x64"]
    assert gemm["op"] == "aten::mm" and gemm["module"] == "Linear_0"
    assert gemm["nvtx"] == ("ProfilerStep#3", "forward")
    assert gemm["time_s"] == pytest.approx(30e-6) and gemm["grid"] == "(4, 8, 1)" and gemm["block"] == "(256, 1, 1)"
    assert (gemm["gpu"], gemm["cc"]) == ("NVIDIA A100-SXM4-80GB", "8.0")
    # the op's FLOPs on its longest kernel, fp32 on CUDA cores; the reduction gets none of them
    assert gemm["flops_fp32"] == 2 * M * N * K and gemm["flops_tensor"] == 0
    assert gemm["alg_bytes"] == 4 * (M * K + K * N + M * N)
    # the reduction is a helper of aten::mm: its own FLOPs are missing (not 0), and it has no tensor type
    assert k["splitK_reduce"]["op"] == "aten::mm" and math.isnan(k["splitK_reduce"]["flops_fp32"])
    assert k["splitK_reduce"]["op_helper"] and pd.isna(k["splitK_reduce"]["tensor_type"])
    # relu, an element-wise op: 1 FLOP per element (fp32, CUDA cores), its input read and output written
    assert k["relu_kernel"]["op"] == "aten::relu" and k["relu_kernel"]["flops_fp32"] == M * N
    assert k["relu_kernel"]["alg_bytes"] == 2 * 4 * M * N and not k["relu_kernel"]["op_helper"]
    assert pd.isna(k["stray_kernel"]["op"])
    assert t.attrs["memory_operations"] == 1
    assert t.attrs["busy_s"] == pytest.approx((30 + 2 + 4 + 1) * 1e-6)  # back to back, no overlap
    assert any("1 kernel(s) whose launching operator is not in the trace" in n for n in t.attrs["notes"])


def test_ac2g_flows_link_a_kernel_whose_runtime_event_is_missing(tmp_path):
    events = [x("cpu_op", "aten::mm", 0, 100, **{"External id": 5, "Input Dims": [[M, K], [K, N]],
                                                 "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
              {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 10, "tid": 10, "ts": 50},
              x("kernel", "bf16_gemm", 200, 10, pid=0, tid=7, correlation=77, **{"External id": 77})]
    t = read_profile(trace(tmp_path / "flow.json", events))
    row = t.iloc[0]
    assert row["op"] == "aten::mm" and row["flops_tensor"] == 2 * M * N * K and row["flops_fp32"] == 0
    assert row["alg_bytes"] == 2 * (M * K + K * N + M * N)


def test_by_op_module_and_annotation(tmp_path):
    f = trace(tmp_path / "step.json.gz", model_events())
    ops = kernel_table([f], by="op")
    mm = ops[ops["kernel"] == "aten::mm"].iloc[0]
    assert mm["launches"] == 2 and mm["time_s"] == pytest.approx(32e-6) and mm["flops"] == 2 * M * N * K
    assert set(ops["kernel"]) == {"aten::mm", "aten::relu", "(no op)"}
    modules = kernel_table([f], by="module")
    assert set(modules["kernel"]) == {"Linear_0", "(no module)"}
    # gemm and reduction (launched at 40 and 60 us) and relu (its op at 300 us) ran inside "forward" (5-905 us)
    annotations = kernel_table([f], by="annotation")
    assert annotations[annotations["kernel"] == "forward"].iloc[0]["launches"] == 3
    assert kernel_table([f], nvtx="forward")["launches"].sum() == 3  # record_function ranges filter like NVTX
    assert ops.attrs["by"] == "op" and ops.attrs["busy_s"] == pytest.approx(37e-6)


def test_a_view_no_launch_records_is_refused_with_how_to_record_it(tmp_path, capsys):
    """Without the Python tracer's module ranges nor any record_function range, --by module and --by annotation
    have nothing to group by: exit 2 naming the file and how to record them, in the table, roofline and whatif
    (not one "(no module)" point of all of the time)."""
    from analysis import whatif
    from analysis.roofline.__main__ import main as roofline_main

    bare = [e for e in model_events() if e["cat"] not in ("python_function", "user_annotation")]
    f = trace(tmp_path / "bare.json.gz", bare)
    remedy = {"module": "with_stack=True", "annotation": "nsys --trace cuda,nvtx"}
    for by, said in remedy.items():
        for command, args in ((main, []), (roofline_main, ["--roofs", "A100 SXM4 80GB", "-o", str(tmp_path / "r.png")]),
                              (whatif.main, ["--on", "H100 SXM"])):
            assert command([str(f), "--by", by, *args]) == 2
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0 and f"--by {by}: {f}: no launch" in err and said in err, err
    assert not (tmp_path / "r.png").exists()


def test_overlapping_kernels_count_once_in_the_busy_time(tmp_path):
    events = [x("kernel", "a", 0, 10, pid=0, tid=7, correlation=1),
              x("kernel", "b", 5, 10, pid=0, tid=8, correlation=2),
              x("kernel", "c", 30, 5, pid=0, tid=7, correlation=3)]
    t = kernel_table([trace(tmp_path / "streams.json", events)])
    assert t.attrs["busy_s"] == pytest.approx((15 + 5) * 1e-6)  # [0, 15] and [30, 35]


def test_the_application_point_is_total_flops_over_busy_time(tmp_path):
    events = [x("cpu_op", "aten::mm", 0, 100, **{"External id": 5, "Input Dims": [[M, K], [K, N]],
                                                 "Input type": ["float", "float"]}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("kernel", "gemm", 200, 20, pid=0, tid=7, correlation=1),
              x("cpu_op", "aten::mm", 300, 100, **{"External id": 6, "Input Dims": [[M, K], [K, N]],
                                                   "Input type": ["float", "float"]}),
              x("cuda_runtime", "cudaLaunchKernel", 310, 5, correlation=2),
              x("kernel", "gemm", 210, 20, pid=0, tid=8, correlation=2)]  # overlaps the first: 30 us busy
    kernels = kernel_table([trace(tmp_path / "app.json", events)])
    point = application_point(kernels)
    assert point["flops"] == 2 * 2 * M * N * K and point["time_s"] == pytest.approx(30e-6)
    assert point["bytes"] == 2 * 4 * (M * K + K * N + M * N) and point["bytes_kind"] == ALGORITHMIC
    assert point["flop_per_s"] == pytest.approx(4 * M * N * K / 30e-6)
    roofs = load(Path(__file__).parent / "data" / "roofs" / "a100.json")
    judged = roofline_table(roofs, kernels)
    assert judged.iloc[0]["bytes_kind"] == ALGORITHMIC
    assert any("ALGORITHMIC bytes" in w for w in judged.attrs["warnings"])


def test_amd_and_cpu_only_traces_are_declined_with_the_reason(tmp_path):
    amd = {"id": 0, "name": "AMD Instinct MI250X", "gcnArchName": "gfx90a"}
    with pytest.raises(CeilingsError, match="a trace from an AMD GPU .*rocprof-compute"):
        read_profile(trace(tmp_path / "amd.json", [x("kernel", "k", 0, 1, pid=0, tid=7)], device=amd))
    with pytest.raises(CeilingsError, match=r"without GPU kernels: profile with activities=\[ProfilerActivity.CPU, "
                                            r"ProfilerActivity.CUDA\]"):
        read_profile(trace(tmp_path / "cpu.json", [x("cpu_op", "aten::mm", 0, 10)], device=None))


def test_two_ranks_are_two_processes(tmp_path):
    a = trace(tmp_path / "rank0.pt.trace.json", model_events(), rank=0)
    b = trace(tmp_path / "rank1.pt.trace.json", model_events(), rank=1)
    both = kernel_table([tmp_path])  # a TensorBoard log folder: every trace in it
    gemm = both[both["kernel"] == "sgemm_128x64"].iloc[0]
    assert gemm["launches"] == 2 and gemm["flops"] == 2 * 2 * M * N * K
    per = kernel_table([a, b], per_process=True)
    assert sorted(per[per["kernel"] == "sgemm_128x64"]["process"]) == ["rank 0", "rank 1"]


def test_a_folder_without_traces_is_a_one_line_error(tmp_path):
    with pytest.raises(CeilingsError, match=r"a folder without torch.profiler traces \(\*.pt.trace.json"):
        kernel_table([tmp_path])


def test_a_truncated_trace_is_a_one_line_error(tmp_path, capsys):
    f = tmp_path / "cut.json"
    f.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [x("kernel", "k", 0, 1)]})[:-20])
    assert main([str(f)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_a_torch_1_8_era_trace_is_read_with_its_old_category_names(tmp_path):
    """torch 1.8-1.10 traces (Kineto's old names, which TensorBoard's plugin still reads): Operator, Runtime,
    Kernel, Memcpy, Memset; "external id"; ProfilerStep#N is an Operator event, not an op."""
    events = [x("Operator", "ProfilerStep#1", 0, 1000),
              x("Operator", "aten::linear", 10, 200, **{"external id": 1}),
              x("Operator", "aten::mm", 20, 100, **{"external id": 2, "Input Dims": [[M, K], [K, N]],
                                                    "Input type": ["float", "float"]}),
              x("Runtime", "cudaLaunchKernel", 30, 5, correlation=40, **{"external id": 2}),
              x("Kernel", "volta_sgemm_128x64_nn", 300, 20, pid=0, tid=7, correlation=40, device=0,
                **{"external id": 40}),
              x("Memcpy", "Memcpy HtoD (Pageable -> Device)", 400, 5, pid=0, tid=7, correlation=41),
              x("Memset", "Memset (Device)", 410, 1, pid=0, tid=7, correlation=42)]
    t = read_profile(trace(tmp_path / "old.pt.trace.json", events))
    assert len(t) == 1
    row = t.iloc[0]
    assert row["op"] == "aten::mm" and row["nvtx"] == ("ProfilerStep#1",)
    assert row["flops_fp32"] == 2 * M * N * K
    assert t.attrs["memory_operations"] == 2
    assert not any("not in the trace" in n or "record_shapes" in n for n in t.attrs["notes"])


def early_events() -> list[dict]:
    """Two kernels whose correlation ids (5, 6) are older than the trace's first runtime call (100): they were
    launched before it began; kernel 300 has no launch either, but is newer: an unlinked kernel."""
    mm = {"External id": 1, "Input Dims": [[M, K], [K, N]], "Input type": ["float", "float"]}
    return [x("kernel", "sgemm", 0, 30, pid=0, tid=7, correlation=5, device=0),
            x("kernel", "relu_kernel", 31, 10, pid=0, tid=7, correlation=6, device=0),
            x("user_annotation", "ProfilerStep#0", 50, 500),
            x("cpu_op", "aten::mm", 60, 100, **mm),
            x("cuda_runtime", "cudaLaunchKernel", 70, 5, correlation=100),
            x("kernel", "sgemm", 200, 30, pid=0, tid=7, correlation=100, device=0),
            x("kernel", "stray", 240, 20, pid=0, tid=7, correlation=300, device=0)]


def test_kernels_launched_before_the_trace_began_are_left_out_and_counted(tmp_path):
    f = trace(tmp_path / "early.json", early_events())
    t = kernel_table([f])
    assert t["launches"].sum() == 2 and set(t["kernel"]) == {"sgemm", "stray"}
    assert t.set_index("kernel").at["sgemm", "flops"] == 2 * M * N * K  # not made missing by the early launch
    assert t.attrs["busy_s"] == pytest.approx(50e-6)
    said = [w for w in t.attrs["warnings"] if "launched before the trace began" in w]
    # 40 of the 90 us of kernel time
    assert len(said) == 1 and "2 kernel(s) (0.04 ms, 44% of the kernel time)" in said[0]
    assert "--include-early" in said[0]
    assert any("1 kernel(s) whose launching operator is not in the trace" in w for w in t.attrs["warnings"])


def test_include_early_keeps_them_named_apart(tmp_path):
    f = trace(tmp_path / "early.json", early_events())
    t = kernel_table([f], include_early=True).set_index("kernel")
    assert t.at["sgemm [launched before the trace began]", "launches"] == 1
    assert t.at["sgemm", "flops"] == 2 * M * N * K
    assert t.attrs["busy_s"] == pytest.approx(90e-6)
    ops = kernel_table([f], include_early=True, by="op").set_index("kernel")
    assert ops.at["(launched before the trace began)", "launches"] == 2
    assert ops.at["(no op)", "launches"] == 1
    steps = kernel_table([f], by="annotation").set_index("kernel")
    assert steps.at["ProfilerStep#0", "launches"] == 1
    assert main([str(f), "--include-early", "--csv", str(tmp_path / "out.csv")]) == 0
    assert "sgemm [launched before the trace began]" in (tmp_path / "out.csv").read_text()


def test_a_bf16_gemv_runs_on_cuda_cores_not_tensor_cores(tmp_path):
    """A decode step's bf16 matrix-vector product: cuBLAS runs it as gemv2T_kernel_val on CUDA cores."""
    events = [x("cpu_op", "aten::mm", 0, 100, **{"External id": 1, "Input Dims": [[1, K], [K, N]],
                                                 "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=7),
              x("kernel", "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4>",
                200, 10, pid=0, tid=7, correlation=7)]
    row = read_profile(trace(tmp_path / "gemv.json", events)).iloc[0]
    assert row["flops_fp32"] == 2 * 1 * N * K and row["flops_tensor"] == 0 and pd.isna(row["tensor_type"])


def test_a_kernel_with_flops_on_some_launches_keeps_them_and_says_its_coverage(tmp_path):
    """relu_kernel launched twice: once by an op with a FLOP rule's call tree (aten::mm), once by none: the
    kernel's FLOPs are the mm's, on 10 of its 20 us, said once."""
    mm = {"External id": 1, "Input Dims": [[M, K], [K, N]], "Input type": ["float", "float"]}
    events = [x("cpu_op", "aten::mm", 0, 100, **mm), x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("cuda_runtime", "cudaLaunchKernel", 200, 5, correlation=2),
              x("kernel", "relu_kernel", 300, 10, pid=0, tid=7, correlation=1),
              x("kernel", "relu_kernel", 320, 10, pid=0, tid=7, correlation=2)]
    table = kernel_table([trace(tmp_path / "lost.json", events)])
    said = [w for w in table.attrs["warnings"] if "known for only some launches" in w]
    assert said == ["flops: known for only some launches of 1 row(s) (0.01 ms of their 0.02 ms; first: "
                    "'relu_kernel'): each shows the sum of what is known and its share of the row's time (coverage), "
                    "its rates over that share; the other launches' FLOPs are not in the profile (ops without a "
                    "FLOP model, kernels without counters)"]
    row = table.iloc[0]
    assert row["flops"] == 2 * M * K * N and row["coverage"] == 0.5
    assert row["flop_per_s"] == pytest.approx(2 * M * K * N / 10e-6)


def test_causal_attention_counts_the_executed_pairs_unless_asked_for_torchs_count(tmp_path, capsys):
    q = [1, 2, 16, 8]  # L = S = 16: 136 of 256 pairs unmasked
    sdpa = {"External id": 1, "Input Dims": [q, q, q, [], [], [], [], []],
            "Input type": ["c10::BFloat16"] * 3 + [""] * 5, "Concrete Inputs": ["", "", "", "", "0.", "True", "", ""]}
    events = [x("cpu_op", "aten::scaled_dot_product_attention", 0, 100, **sdpa),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("kernel", "flash_fwd_kernel", 200, 10, pid=0, tid=7, correlation=1)]
    f = trace(tmp_path / "sdpa.json", events)
    executed, torch_count = kernel_table([f]), kernel_table([f], flops="torch")
    assert executed["flops"].iloc[0] == 2 * 136 * 2 * (8 + 8)
    assert torch_count["flops"].iloc[0] == 2 * 256 * 2 * (8 + 8)
    assert any("--flops executed); --flops torch counts every query-key pair" in w for w in executed.attrs["warnings"])
    assert main([str(f), "--flops", "torch", "--csv", "-"]) == 0
    out, err = capsys.readouterr()
    assert "attention FLOPs count every query-key pair" in err
    # the CSV says the convention beside its numbers; a trace without attention has no such column
    assert out.splitlines()[0].endswith(",attention_flops") and out.splitlines()[1].endswith(",torch")
    assert list(executed["attention_flops"]) == ["executed"]
    assert "attention_flops" not in kernel_table([trace(tmp_path / "step.json", model_events())]).columns
    # a non-causal attention counts the same either way: no note, no column
    sdpa["Concrete Inputs"] = ["", "", "", "", "0.", "False", "", ""]
    events[0] = x("cpu_op", "aten::scaled_dot_product_attention", 0, 100, **sdpa)
    plain = kernel_table([trace(tmp_path / "plain.json", events)])
    assert plain["flops"].iloc[0] == 2 * 256 * 2 * (8 + 8)
    assert not any("attention FLOPs count" in w for w in plain.attrs["warnings"])
    assert "attention_flops" not in plain.columns


# ------------------------------------------------------------------------------------------ real traces
def _events(name):
    return json.load(gzip.open(TRACES / name))["traceEvents"]


@needs_traces
def test_real_alexnet_trace_without_shapes_has_times_and_missing_flops():
    events = _events("alexnet_a100_kernels.json.gz")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    t = kernel_table([TRACES / "alexnet_a100_kernels.json.gz"])
    assert t["launches"].sum() == len(kernels) == 79
    assert t["time_s"].sum() == pytest.approx(sum(e["dur"] for e in kernels) * 1e-6)
    assert t["flops"].isna().all()
    assert any("record_shapes=True" in w for w in t.attrs["warnings"])
    # deviceProperties: numSms 108, totalGlobalMem 42297524224 (read off the JSON)
    assert t.attrs["gpus"] == [{"gpu": "NVIDIA A100-PG509-200", "cc": "8.0", "device": "0", "sm_count": 108.0,
                                "memory_bytes": 42297524224.0}]
    memory = sum(e.get("cat") in ("gpu_memcpy", "gpu_memset") for e in events)
    assert any(w.startswith(f"{memory} memcpy/memset") for w in t.attrs["warnings"])


@needs_traces
def test_real_alexnet_kernels_find_their_ops_through_the_launch():
    """Old style: kernel External id = correlation. Every conv kernel of AlexNet was launched inside
    aten::cudnn_convolution (read off the trace: 30 kernels)."""
    t = read_profile(TRACES / "alexnet_a100_kernels.json.gz")
    assert (t["op"] == "aten::cudnn_convolution").sum() == 30
    assert t["op"].notna().all()


@needs_traces
def test_real_cupti_counter_trace_gives_hardware_flops():
    """cuda_profiler_range events carry the ncu FLOP recipe's counters: FLOPs = 2 ffma + fadd + fmul..."""
    events = [e for e in _events("cupti_counters_a100.json.gz") if e.get("cat") == "cuda_profiler_range"]

    def count(e, op):
        return e["args"].get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum", 0)

    fp32 = sum(2 * count(e, "ffma") + count(e, "fadd") + count(e, "fmul") for e in events)
    t = kernel_table([TRACES / "cupti_counters_a100.json.gz"])
    assert t["launches"].sum() == len(events) == 77
    assert t["flops_fp32"].sum() == fp32 > 0
    assert t["time_s"].isna().all()  # the ranges' durations are not kernel times


@needs_traces
def test_real_a100_trace_with_shapes_counts_every_mm_once():
    """By brute force over the JSON: every aten::mm that is not inside another op with a FLOP rule and that
    launched a kernel contributes 2mnk, from its own Input Dims, once to the aten::mm row."""
    events = _events("a100_80gb_shapes_rank0.json.gz")
    ruled = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] in ruled]
    kernel_corr = {e["args"]["correlation"] for e in events if e.get("cat") == "kernel"}
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and (e.get("args") or {}).get("correlation") in kernel_corr]

    def inside(inner, outer):
        return (inner is not outer and (inner["pid"], inner["tid"]) == (outer["pid"], outer["tid"])
                and outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"])

    expected = 0
    for op in (o for o in ops if o["name"] == "aten::mm" and "Input Dims" in o["args"]):
        if any(inside(op, other) for other in ops):
            continue  # its work is its caller's
        if not any(inside(launch, op) for launch in launches):
            continue  # launched nothing in the trace
        (m, k), (_, n) = op["args"]["Input Dims"][:2]
        expected += 2 * m * n * k
    t = kernel_table([TRACES / "a100_80gb_shapes_rank0.json.gz"], by="op")
    assert expected > 0 and t[t["kernel"] == "aten::mm"].iloc[0]["flops"] == expected


@needs_traces
def test_real_amd_and_cpu_only_traces():
    with pytest.raises(CeilingsError, match="AMD GPU"):
        read_profile(TRACES / "mi250_rocm_minitoy.json.gz")
    with pytest.raises(CeilingsError, match="without GPU kernels"):
        read_profile(TRACES / "cpu_only.pt.trace.json.gz")


@needs_traces
def test_real_triton_trace_links_the_kernel_through_its_driver_launch():
    """One Triton kernel (dur 1.76 us) launched by cuLaunchKernel (correlation 35) inside the cpu_op named
    after it, inside "Torch-Compiled Region: 0/0" (read off the trace)."""
    t = kernel_table([TRACES / "triton_a100.json.gz"], per_launch=True)
    (k,) = t.itertuples()
    assert k.kernel == "triton_poi_fused_add_cos_sin_0" and k.op == "triton_poi_fused_add_cos_sin_0"
    assert k.time_s == pytest.approx(1.76e-6) and k.grid == "(1, 1, 1)" and k.block == "(128, 1, 1)"
    assert math.isnan(k.flops)  # a fused elementwise kernel: no FLOP rule, so missing


def test_a_filter_drops_the_busy_time_of_the_whole_trace(tmp_path):
    """--kernel keeps some kernels: the trace's busy time (all kernels) would be wrong for them, so the
    application point falls back to their summed time."""
    f = trace(tmp_path / "step.json", model_events())
    assert kernel_table([f]).attrs["busy_s"] == pytest.approx(37e-6)
    assert kernel_table([f], kernel_regex="sgemm").attrs["busy_s"] is None


def test_a_conv_is_counted_once_on_its_compute_kernel(tmp_path):
    """AlexNet's structure: conv2d > convolution > _convolution > (cudnn_convolution: the GEMM; add_: the
    bias). N=8, 3->64 channels, 11x11, stride 4, no padding: (224 - 11) // 4 + 1 = 54, so 54x54 outputs and
    2 x 8 x (64 x 3 x 11 x 11) x 54 x 54 FLOPs."""
    dims = [[8, 3, 224, 224], [64, 3, 11, 11], [64]]
    concrete = ["", "", "", "[4, 4]", "[0, 0]", "[1, 1]", "1"]
    conv = {"Input Dims": dims, "Input type": ["float"] * 3, "Concrete Inputs": concrete}
    events = [
        x("cpu_op", "aten::conv2d", 0, 100, **{"External id": 1, **conv}),
        x("cpu_op", "aten::convolution", 1, 98, **{"External id": 2, "Input Dims": dims + [[]] * 6,
                                                   "Input type": ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar"] * 3,
                                                   "Concrete Inputs": ["", "", "", "[4, 4]", "[0, 0]", "[1, 1]",
                                                                       "False", "[0, 0]", "1"]}),
        x("cpu_op", "aten::cudnn_convolution", 10, 30, **{"External id": 3}),
        x("cuda_runtime", "cudaLaunchKernel", 20, 2, correlation=11),
        x("cpu_op", "aten::add_", 50, 20, **{"External id": 4}),
        x("cuda_runtime", "cudaLaunchKernel", 55, 2, correlation=12),
        x("kernel", "implicit_convolve_sgemm", 200, 40, pid=0, tid=7, correlation=11),
        x("kernel", "elementwise_kernel_add", 241, 50, pid=0, tid=7, correlation=12)]  # longer, but no rule
    t = kernel_table([trace(tmp_path / "conv.json", events)], per_launch=True)
    flops = 2 * 8 * (64 * 3 * 11 * 11) * 54 * 54
    assert t["flops"].sum() == flops  # once, not also for the ops inside conv2d
    gemm = t[t["kernel"] == "implicit_convolve_sgemm"].iloc[0]
    assert gemm["flops_fp32"] == flops and gemm["op"] == "aten::conv2d"
    bias = t[t["kernel"] == "elementwise_kernel_add"].iloc[0]
    assert math.isnan(bias["flops"]) and math.isnan(bias["alg_bytes"])  # a helper: missing, not 0
    by_kernel = kernel_table([trace(tmp_path / "conv.json", events)]).set_index("kernel")
    assert math.isnan(by_kernel.at["elementwise_kernel_add", "flops"])
    assert by_kernel.at["implicit_convolve_sgemm", "flops"] == flops


def test_busy_time_is_per_gpu_and_summed(tmp_path):
    """One process driving two GPUs at the same time (DataParallel): 10 us busy on each, 20 GPU-us."""
    events = [x("kernel", "a", 0, 10, pid=0, tid=7, correlation=1, device=0),
              x("kernel", "a", 0, 10, pid=1, tid=7, correlation=2, device=1)]
    assert kernel_table([trace(tmp_path / "dp.json", events)]).attrs["busy_s"] == pytest.approx(20e-6)


def test_an_op_and_its_same_length_child_nest_by_external_id(tmp_path):
    """Integer-microsecond traces give a parent and child the same ts and dur: the smaller External id is the
    parent, whatever the file order."""
    events = [x("cpu_op", "aten::mul", 0, 10, **{"External id": 8}),
              x("cpu_op", "reducer::mul_out", 0, 10, **{"External id": 7}),
              x("cuda_runtime", "cudaLaunchKernel", 5, 1, correlation=1),
              x("kernel", "mul_kernel", 20, 3, pid=0, tid=7, correlation=1)]
    t = read_profile(trace(tmp_path / "tie.json", events))
    assert t.iloc[0]["op"] == "aten::mul"


def test_a_launch_inside_more_than_64_ranges_keeps_the_innermost_and_is_counted(tmp_path):
    """70 record_function ranges opened at 0..69 us and lasting past the launch at 100 us, then an op around
    it: the kernel keeps the op (innermost) and the last 63 ranges opened, and a note counts it."""
    events = [x("user_annotation", f"range{i}", i, 1000) for i in range(70)]
    events += [x("cpu_op", "aten::relu", 90, 20),
               x("cuda_runtime", "cudaLaunchKernel", 100, 5, correlation=7),
               x("kernel", "relu_kernel", 200, 10, pid=0, tid=7, correlation=7, device=0)]
    df = read_profile(trace(tmp_path / "t.json", events))
    assert df["op"].tolist() == ["aten::relu"]
    assert df["nvtx"].tolist() == [tuple(f"range{i}" for i in range(7, 70))]
    assert any(n.startswith("1 kernel(s) launched inside more than 64 nested") for n in df.attrs["notes"])


def test_a_trace_is_recognised_from_its_opening_before_formats_found_anywhere(tmp_path):
    """JSON may break lines between tokens: this trace's second line reads like an ncu CSV header
    ('"ID",...,"Kernel Name",...'), which the CSV formats look for anywhere in a file. The trace's opening
    decides: it is read as the trace it is."""
    events = [x("cpu_op", "aten::relu", 90, 20), x("cuda_runtime", "cudaLaunchKernel", 100, 5, correlation=7),
              x("kernel", "relu_kernel", 200, 10, pid=0, tid=7, correlation=7, device=0)]
    text = json.dumps({"schemaVersion": 1, "deviceProperties": [A100], "traceEvents": events})
    path = tmp_path / "t.json"
    path.write_text(text[:-1] + ', "x": [\n"ID","Kernel Name","Metric Name","Metric Value"]}')
    df = read_profile(path)
    assert df.attrs["format"] == "torch.profiler trace" and df["kernel"].tolist() == ["relu_kernel"]


@pytest.mark.parametrize("concrete", [["", "[" * 100_000 + "]" * 100_000, "False", ""], ["", [1], 2, None]])
def test_a_damaged_concrete_input_is_an_unknown_value_not_a_traceback(tmp_path, concrete):
    """Concrete Inputs nested past the JSON parser, or not text at all (a profiler writes strings): the op's
    values are not known, its kernel is read all the same."""
    op = {"External id": 1, "Input Dims": [[4, 8], [], [], []], "Input type": ["float", "ScalarList", "bool", ""],
          "Concrete Inputs": concrete}
    events = [x("cpu_op", "aten::sum", 0, 100, **op), x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("kernel", "reduce_kernel", 20, 4, pid=0, tid=7, correlation=1)]
    table = kernel_table([trace(tmp_path / "damaged.json", events)])
    assert table["launches"].sum() == 1 and table["time_s"].sum() == pytest.approx(4e-6)


@pytest.mark.parametrize("field,value,said", [
    ("correlation", "abc", "args['correlation'] = 'abc', not an integer"),
    ("External id", [1], "args['External id'] = '[1]', not an integer"),
    ("device", True, "args['device'] = 'True', not an integer"),
    ("Input Dims", "[[4, 8]]", "args['Input Dims'] = '[[4, 8]]', not a list"),
    ("Input type", {"a": 1}, "args['Input type'] = \"{'a': 1}\", not a list"),
])
def test_an_argument_of_the_wrong_type_is_one_line_naming_the_event(tmp_path, capsys, field, value, said):
    events = [x("cpu_op", "aten::mm", 0, 100, **{"External id": 1, "Input Dims": [[M, K], [K, N]],
                                                "Input type": ["float", "float"]}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("kernel", "gemm", 20, 4, pid=0, tid=7, correlation=1)]
    events[0 if field.startswith("Input") else 2]["args"][field] = value
    f = trace(tmp_path / "typed.json", events)
    assert main([str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0] and said in err[0] and "traceEvents[" in err[0]


def test_a_nameless_device_with_a_warp_of_64_is_amd(tmp_path, capsys):
    """Some vLLM traces of MI300X leave the device's name empty; its warp of 64 lanes says AMD (NVIDIA's is 32)."""
    from analysis.ncu import main as ncu_main

    path = trace(tmp_path / "mi300.json", [x("kernel", "k", 0, 5, pid=0, tid=1, correlation=1)],
                 device={"id": 0, "name": "", "warpSize": 64, "computeMajor": 9, "computeMinor": 4})
    assert ncu_main([str(path)]) == 2
    assert "a trace from an AMD GPU (a warp of 64 lanes)" in capsys.readouterr().err

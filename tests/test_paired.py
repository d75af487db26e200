"""A torch.profiler trace paired with an ncu profile of the same step (analysis.runs.paired): kernels no shape
reaches (a torch.compile graph's) take the profile's measured FLOPs and bytes, measured counters replace the
shape models, the trace keeps its times. Expected values are the counters written in each test, turned into
FLOPs (2 FFMA + FADD + FMUL) and bytes (32 x sectors) by hand."""

from __future__ import annotations

import math

import pytest

from analysis.ncu import kernel_table
from analysis.roofline.__main__ import main as roofline_main
from analysis.runs import name_key
from tests.test_torch_trace import trace, x

N = 1 << 20
PRECISIONS = {"fp32": ("ffma", "fadd", "fmul"), "fp64": ("dfma", "dadd", "dmul"), "fp16": ("hfma", "hadd", "hmul")}
COUNTERS = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for ops in PRECISIONS.values() for op in ops]
HEADER = ["ID", "Kernel Name", "gpu__time_duration.sum", "launch__grid_size", "launch__block_size",
          "device__attribute_compute_capability_major", "device__attribute_compute_capability_minor",
          "dram__sectors_read.sum", "dram__sectors_write.sum", "sm__inst_executed_pipe_tensor.sum", *COUNTERS]
UNITS = ["", "", "nsecond", "", "", "", "", "sector", "sector", "inst", *["inst"] * len(COUNTERS)]


def ncu_csv(path, launches, cc=(8, 0)):
    """launches: (name, grid blocks, block threads, sectors read, sectors written, ffma, fadd, fmul) each."""
    rows = [HEADER, UNITS]
    for i, (name, grid, block, read, written, ffma, fadd, fmul) in enumerate(launches):
        rows.append([str(i), name, "50000", str(grid), str(block), str(cc[0]), str(cc[1]), str(read), str(written),
                     "0", str(ffma), str(fadd), str(fmul), *["0"] * 6])
    path.write_text("\n".join(",".join(f'"{c}"' for c in r) for r in rows) + "\n")
    return path


TRITON = "triton_poi_fused_add_mul_0"
FILL_TRACE = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
              "at::detail::Array<char *, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char *, 1>)")
FILL_NCU = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1>>(int, T2, T3)")


def step(path):
    """A compiled graph's Triton kernel launched twice (grid 1024, then 2048), a fill modelled from its shape
    (4 MiB written), and a kernel the profile never measured."""
    kernel = dict(pid=0, tid=9, device=0)
    events = [x("cpu_op", "CompiledFunction", 0, 50, **{"External id": 1}),
              x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
              x("cuda_runtime", "cudaLaunchKernel", 20, 5, correlation=2),
              x("cuda_runtime", "cudaLaunchKernel", 30, 5, correlation=4),
              x("cpu_op", "aten::fill_", 100, 50, **{"External id": 2, "Input Dims": [[N], []],
                                                      "Input type": ["float", "Scalar"]}),
              x("cuda_runtime", "cudaLaunchKernel", 110, 5, correlation=3),
              x("kernel", TRITON, 1000, 40, correlation=1, grid=[1024, 1, 1], block=[128, 1, 1], **kernel),
              x("kernel", TRITON, 1100, 80, correlation=2, grid=[2048, 1, 1], block=[128, 1, 1], **kernel),
              x("kernel", "triton_red_fused_sum_1", 1200, 30, correlation=4, grid=[64, 1, 1], block=[256, 1, 1],
                **kernel),
              x("kernel", FILL_TRACE, 1300, 20, correlation=3, grid=[1024, 1, 1], block=[128, 1, 1], **kernel)]
    return trace(path, events)


def test_a_compiled_graph_takes_the_profile_counters_per_grid(tmp_path):
    profile = ncu_csv(tmp_path / "step.csv", [
        (TRITON, 1024, 128, 32768, 32768, 1000, 0, 10),  # 2 x 1000 + 10 FLOPs, 32 x 65536 bytes
        (TRITON, 2048, 128, 65536, 65536, 3000, 0, 20),  # measured twice: the mean per launch counts
        (TRITON, 2048, 128, 65536, 65536, 1000, 0, 20),
        (FILL_NCU, 1024, 128, 0, 131072, 0, 0, 0),  # the fill: 4 MiB written, as its shape says
        ("kernel_of_another_step", 1, 32, 1, 1, 1, 1, 1)])
    table = kernel_table([step(tmp_path / "t.json"), profile], per_launch=True)
    triton = table[table["kernel"] == TRITON].sort_values("time_s")
    assert list(triton["flops"]) == [2 * 1000 + 10, (2 * 3000 + 20 + 2 * 1000 + 20) / 2]
    assert list(triton["flops_fp32"]) == list(triton["flops"])
    assert list(triton["dram_bytes"]) == [32 * 65536, 32 * 131072]
    assert list(triton["time_s"]) == pytest.approx([40e-6, 80e-6])  # the trace's times, not ncu's 50 us
    fill = table[table["kernel"] == FILL_TRACE].iloc[0]
    assert fill["flops"] == 0 and fill["dram_bytes"] == 32 * 131072 == 4 * N
    unmeasured = table[table["kernel"] == "triton_red_fused_sum_1"].iloc[0]
    assert math.isnan(unmeasured["flops"])
    said = [w for w in table.attrs["warnings"] if "takes its FLOPs and bytes from" in w]
    assert said and said[0].startswith(f"{(40 + 80 + 20) / (40 + 80 + 30 + 20):.0%} of the trace's kernel time")
    assert "1 kernel(s) it measured are not in the trace" in said[0] and "kernel_of_another_step" in said[0]


def test_measured_counters_replace_the_shape_model_and_the_budget_places_them(tmp_path, capsys):
    profile = ncu_csv(tmp_path / "step.csv", [(TRITON, 1024, 128, 32768, 32768, 1000, 0, 10),
                                              (TRITON, 2048, 128, 65536, 65536, 1000, 0, 20),
                                              (FILL_NCU, 1024, 128, 0, 131072, 7, 0, 0)])
    table = kernel_table([step(tmp_path / "t.json"), profile], per_launch=True)
    fill = table[table["kernel"] == FILL_TRACE].iloc[0]
    assert fill["flops"] == 14  # measured (2 x 7 FFMA), not the model's 0
    out = tmp_path / "roofline.json"
    assert roofline_main([str(tmp_path / "t.json"), str(profile), "--roofs", "A100 SXM4 80GB", "--json",
                          str(out)]) == 0
    import json
    budget = json.loads(out.read_text())["time_budget"]
    unplaced = {p["cause"]: p["time_s"] for p in budget if p["class"] == "unplaced"}
    assert unplaced == {"compiled graph": pytest.approx(30e-6)}  # only the kernel ncu did not measure


def test_names_match_across_the_two_demanglers():
    assert name_key(FILL_TRACE) == name_key(FILL_NCU)
    assert name_key("void f<(anonymous namespace)::Op>(float *)") == name_key("f<(anonymous namespace)::Op>(T1)")
    assert name_key("kernel_a") != name_key("kernel_b")


def test_a_pair_from_two_gpus_is_refused(tmp_path, capsys):
    profile = ncu_csv(tmp_path / "h100.csv", [(TRITON, 1024, 128, 1, 1, 1, 1, 1)], cc=(9, 0))
    assert roofline_main([str(step(tmp_path / "t.json")), str(profile), "--roofs", "A100 SXM4 80GB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CC 8.0" in err[0] and "CC 9.0" in err[0] and "same GPU" in err[0]


def test_a_flop_pass_and_a_byte_pass_each_give_what_they_measured(tmp_path):
    """ncu run twice over the step, once for the FLOP counters, once for DRAM: the launches take the FLOPs of one
    and the bytes of the other, each the mean over the launches that measured it (not over all of them)."""
    flops = ncu_csv(tmp_path / "flops.csv", [(TRITON, 1024, 128, 0, 0, 1000, 0, 10)])
    dram = tmp_path / "dram.csv"
    rows = [["ID", "Kernel Name", "gpu__time_duration.sum", "launch__grid_size", "launch__block_size",
             "dram__sectors_read.sum", "dram__sectors_write.sum"], ["", "", "nsecond", "", "", "sector", "sector"],
            ["0", TRITON, "50000", "1024", "128", "100", "100"]]
    dram.write_text("\n".join(",".join(f'"{c}"' for c in r) for r in rows) + "\n")
    # the FLOP pass has DRAM counters of 0 sectors too: only the DRAM pass's launches measured bytes here
    flops.write_text(flops.read_text().replace(',"0","0","0","1000"', ',"","","0","1000"'))
    table = kernel_table([step(tmp_path / "t.json"), flops, dram], per_launch=True)
    first = table[(table["kernel"] == TRITON)].sort_values("time_s").iloc[0]
    assert first["flops"] == 2 * 1000 + 10 and first["dram_bytes"] == 32 * 200


def test_kernels_measured_at_other_grids_are_said_apart(tmp_path):
    profile = ncu_csv(tmp_path / "other.csv", [(TRITON, 4096, 128, 1, 1, 1, 1, 1)])
    table = kernel_table([step(tmp_path / "t.json"), profile], per_launch=True)
    said = next(w for w in table.attrs["warnings"] if "takes its FLOPs and bytes from" in w)
    assert "1 kernel(s) it measured only at grids or blocks the trace does not run them at" in said
    assert "not in the trace" not in said

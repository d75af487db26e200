"""analysis.ncu on the cases real profiles bring: tensor FLOP counters, HFMA2.MMA moves, ranks and passes,
time sources, nsys runs and cut names, summaries, nvprof, GPU names, NVTX and kernel filters.

Fixtures are written in ncu's exact CSV layout (every cell quoted, base units as `--csv` prints them);
every expected value is worked out by hand in the test from the numbers written into the fixture.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis.metrics import tensor_ops_columns
from analysis.ncu import kernel_table, main, read_profile
from analysis.readers.contract import Source
from analysis.readers.registry import detect
from common.errors import CeilingsError

DATA = Path(__file__).parent / "data" / "ncu"
SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "ncu-samples"
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/ncu-samples is absent")

HEADER = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
          "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
FFMA, FADD, FMUL, HFMA, HADD, HMUL = (f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
                                      for op in ("ffma", "fadd", "fmul", "hfma", "hadd", "hmul"))
PIPE = "sm__inst_executed_pipe_tensor.sum"
TIME = "gpu__time_duration.sum"


def details_csv(path: Path, launches: list[tuple], cc: str = "8.0") -> Path:
    """launches: (id, pid, kernel, {metric: (unit, value)}) in ncu's details-page layout."""
    def quoted(cells):
        return ",".join(f'"{c}"' for c in cells)

    lines = ["==PROF== Connected to process 1 (/usr/bin/app)", quoted(HEADER)]
    for lid, pid, kernel, metrics in launches:
        for name, (unit, value) in metrics.items():
            lines.append(quoted([lid, pid, "app", "node7", kernel, 1, 7, "(256, 1, 1)", "(1024, 1, 1)", 0, cc,
                                 "Command line profiler metrics", name, unit, value]))
    path.write_text("\n".join(lines) + "\n")
    return path


def only(table, prefix: str):
    hits = table[table["kernel"].str.startswith(prefix)]
    assert len(hits) == 1, list(table["kernel"])
    return hits.iloc[0]


def test_a_launch_whose_rows_come_back_after_another_is_one_launch_keeping_its_first_values(tmp_path):
    """ncu writes a launch's rows together, in increasing ID; an edited or concatenated file may not: still
    one row per launch in order of first appearance, and a metric written twice keeps its first value."""
    dram = "dram__bytes_read.sum"
    f = details_csv(tmp_path / "back.csv", [(5, 1, "k_a", {TIME: ("usecond", "2.00")}),
                                            (3, 1, "k_b", {TIME: ("usecond", "7.00")}),
                                            (5, 1, "k_a", {TIME: ("usecond", "9.00"), dram: ("Kbyte", "4.00")})])
    p = read_profile(f)
    assert list(p["id"]) == [5, 3] and list(p["kernel"]) == ["k_a", "k_b"]
    assert list(p[TIME]) == pytest.approx([2e-6, 7e-6])
    assert p[dram].iloc[0] == pytest.approx(4_000) and math.isnan(p[dram].iloc[1])


# ------------------------------------------------------------------------------------ tensor FLOPs
SGEMM = "ampere_sgemm_128x64_nn"
T = 67_108_864  # tensor-pipe warp instructions: every one an HFMA2.MMA register move


def test_an_sgemm_with_hfma2_mma_moves_has_no_phantom_fp16_or_tensor_flops(tmp_path):
    """The A100 SGEMM signature: hfma thread instructions = 32 x tensor-pipe warp instructions exactly."""
    f = details_csv(tmp_path / "sgemm.csv", [(0, 1, SGEMM, {
        FFMA: ("inst", f"{34_359_738_368:,}"), FADD: ("inst", "0"), FMUL: ("inst", "1,024"),
        HFMA: ("inst", f"{32 * T:,}"), HADD: ("inst", "0"), HMUL: ("inst", "0"),
        PIPE: ("inst", f"{T:,}"), TIME: ("nsecond", "12,500,000")})])
    k = kernel_table([f]).iloc[0]
    assert k["flops_fp32"] == 2 * 34_359_738_368 + 1024
    assert k["flops_fp16"] == 0  # 2 x (32T - 32T) + 0 + 0
    assert k["flops_tensor"] == 0  # the tensor-pipe instructions were the moves
    assert k["flops"] == 2 * 34_359_738_368 + 1024
    (w,) = [w for w in kernel_table([f]).attrs["warnings"] if "HFMA2.MMA" in w]
    assert w.startswith(f"flops_fp16/flops_tensor: {2 * 32 * T:.4g} FLOPs of 1 launch(es) of 1 kernel(s) left out")


def test_with_the_mma_sub_counters_only_the_non_mma_tensor_instructions_are_moves(tmp_path):
    """pipe 1000 = 600 HMMA + 400 others; hfma = 32 x 400: those 400 are HFMA2.MMA. CC 7.0 (HMMA.884 only):
    600 x 512 tensor FLOPs; fp16 = 2 x (12800 - 12800) + 5 hadd."""
    f = details_csv(tmp_path / "parts.csv", [(0, 1, "volta_h884gemm", {
        HFMA: ("inst", "12,800"), HADD: ("inst", "5"), HMUL: ("inst", "0"), PIPE: ("inst", "1,000"),
        "sm__inst_executed_pipe_tensor_op_hmma.sum": ("inst", "600"), TIME: ("usecond", "2.00")})], cc="7.0")
    k = kernel_table([f]).iloc[0]
    assert k["flops_tensor"] == 600 * 512 and k["flops_fp16"] == 5


def test_nersc_v100_rule_x512_per_tensor_instruction_still_holds(tmp_path):
    """NERSC's V100 recipe: tensor FLOPs = 512 x sm__inst_executed_pipe_tensor.sum; time = cycles / rate."""
    f = details_csv(tmp_path / "v100.csv", [(0, 1, "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", {
        PIPE: ("inst", "2,097,152"), HFMA: ("inst", "0"), HADD: ("inst", "0"), HMUL: ("inst", "0"),
        "sm__cycles_elapsed.avg": ("cycle", "153,000"), "sm__cycles_elapsed.avg.per_second": ("cycle/nsecond", "1.53"),
        "dram__bytes.sum": ("Mbyte", "25.17")})], cc="7.0")
    k = kernel_table([f]).iloc[0]
    assert k["flops_tensor"] == 512 * 2_097_152 and k["flops"] == 512 * 2_097_152
    assert k["time_s"] == pytest.approx(153_000 / 1.53e9)
    assert k["ai_dram"] == pytest.approx(512 * 2_097_152 / 25.17e6)


def test_tensor_ops_counters_are_flops_and_are_used_first(tmp_path):
    """H100: the bf16 total beside its hgmma sparsity split (same FLOPs, not thrice), a _realtime copy, and
    int8 ops (not FLOPs); the instruction count (no rule for CC 9.0) is not needed."""
    ops = "sm__ops_path_tensor"
    f = details_csv(tmp_path / "h100.csv", [(0, 1, "sm90_xmma_gemm_bf16bf16_bf16f32", {
        f"{ops}_src_bf16_dst_fp32.sum": ("", "68,719,476,736"),
        f"{ops}_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum": ("", "68,719,476,736"),
        f"{ops}_op_hgmma_src_bf16_dst_fp32_sparsity_on.sum": ("", "0"),
        f"{ops}_src_bf16_dst_fp32_realtime.sum": ("", "68,719,476,736"),
        f"{ops}_src_int8_dst_int32.sum": ("", "1,000"),
        PIPE: ("inst", "262,144"), TIME: ("msecond", "0.10")})], cc="9.0")
    k = kernel_table([f]).iloc[0]
    assert k["flops_tensor"] == 68_719_476_736 and k["flops"] == 68_719_476_736
    assert k["ops_tensor_int"] == 1000
    assert k["flop_per_s"] == pytest.approx(68_719_476_736 / 1e-4)


def test_the_least_split_ops_counters_of_each_type_are_chosen():
    ops = "sm__ops_path_tensor"
    names = [f"{ops}_op_hmma_src_fp16_dst_fp32_sparsity_off.sum", f"{ops}_op_hmma_src_fp16_dst_fp32_sparsity_on.sum",
             f"{ops}_op_hgmma_src_fp16_dst_fp32_sparsity_off.sum", f"{ops}_src_fp8_realtime.sum",
             f"{ops}_op_hmma_src_tf32_dst_fp32.sum", f"{ops}_op_hgmma_src_tf32_dst_fp32.sum", "dram__bytes.sum"]
    chosen = tensor_ops_columns(names)
    assert sorted(chosen["fp16"]) == sorted(names[:3])  # no total: every (op, sparsity) part
    assert chosen["fp8"] == [names[3]]  # a _realtime name alone is used
    assert sorted(chosen["tf32"]) == sorted(names[4:6])
    assert set(chosen) == {"fp16", "fp8", "tf32"}


def test_tensor_instructions_on_hopper_without_ops_counters_are_missing_with_the_remedy(tmp_path):
    f = details_csv(tmp_path / "h.csv", [(0, 1, "gemm", {PIPE: ("inst", "100"), TIME: ("usecond", "1.0")})],
                    cc="9.0")
    t = kernel_table([f])
    assert math.isnan(t.iloc[0]["flops_tensor"])
    (w,) = [w for w in t.attrs["warnings"] if w.startswith("flops_tensor")]
    assert "(CC 9.0)" in w and "sm__ops_path_tensor_*" in w and "python -m analysis.profile" in w


def test_a_rate_above_the_gpus_clock_derived_peak_is_impossible(tmp_path):
    """CC 8.0 does 128 fp32 FLOPs per SM per clock: 108 SMs x 128 x 1 GHz (the max clock, printed in kHz
    without a unit, as ncu's 2019 raw page does) = 13.824 TFLOP/s, 14.515 with the 5 % margin. 8e6 FFMAs in
    1 us are 16 TFLOP/s: impossible; 7e6 are 14 TFLOP/s: above the peak, inside the margin."""
    facts = {"device__attribute_multiprocessor_count": ("", "108"),
             "device__attribute_max_gpu_frequency_khz": ("", "1,000,000"), TIME: ("usecond", "1.0"),
             FADD: ("inst", "0"), FMUL: ("inst", "0")}
    f = details_csv(tmp_path / "bad.csv", [(0, 1, "bad", {FFMA: ("inst", "8,000,000"), **facts}),
                                           (1, 1, "fine", {FFMA: ("inst", "7,000,000"), **facts})])
    t = kernel_table([f])
    assert t.attrs["gpus"][0]["max_sm_clock_hz"] == 1e9  # kHz made Hz by the reader
    (w,) = [w for w in t.attrs["warnings"] if w.startswith("IMPOSSIBLE RATE:")]
    assert "1 launch(es) report more fp32 FLOP/s" in w and "'bad' at 16 TFLOP/s" in w and "'fine'" not in w
    assert "limit 14.5 TFLOP/s: CC 8.0 units x 108 SMs x 1 GHz, +5%" in w


def test_one_impossible_launch_is_not_averaged_away_by_its_kernels_others(tmp_path):
    """Launch 0 of 'k': 8e6 FFMAs in 1 us (16 TFLOP/s, above the 14.5 limit of the test above); launch 1: no
    FFMA in 1 ms. The kernel's 16 MFLOP over 1.001 ms is 16 GFLOP/s, yet its launch 0 is impossible."""
    facts = {"device__attribute_multiprocessor_count": ("", "108"),
             "device__attribute_max_gpu_frequency_khz": ("", "1,000,000"), FADD: ("inst", "0"), FMUL: ("inst", "0")}
    f = details_csv(tmp_path / "k.csv", [(0, 1, "k", {FFMA: ("inst", "8,000,000"), TIME: ("usecond", "1.0"), **facts}),
                                         (1, 1, "k", {FFMA: ("inst", "0"), TIME: ("msecond", "1.0"), **facts})])
    t = kernel_table([f])
    assert t.iloc[0]["launches"] == 2 and t.iloc[0]["flop_per_s"] == pytest.approx(16e6 / 1.001e-3)
    (w,) = [w for w in t.attrs["warnings"] if w.startswith("IMPOSSIBLE RATE:")]
    assert "1 launch(es) report more fp32 FLOP/s" in w and "'k' at 16 TFLOP/s" in w


def test_a_gpu_whose_facts_only_some_launches_carry_is_one_gpu(tmp_path):
    facts = {"device__attribute_multiprocessor_count": ("", "108"), TIME: ("usecond", "1.0")}
    f = details_csv(tmp_path / "k.csv", [(0, 1, "a", facts), (1, 1, "b", {TIME: ("usecond", "1.0")})])
    (gpu,) = kernel_table([f]).attrs["gpus"]
    assert gpu["sm_count"] == 108


def test_dram_bytes_above_the_datasheet_peak_are_impossible_and_an_unknown_gpu_is_said(tmp_path):
    """H100 SXM: 3350 GB/s on its datasheet, 4187.5 with the 25 % margin; 5 GB in 1 ms is 5000 GB/s."""
    launch = {"device__attribute_display_name": ("", "NVIDIA H100 80GB HBM3"), "dram__bytes.sum": ("Gbyte", "5"),
              TIME: ("msecond", "1.0")}
    t = kernel_table([details_csv(tmp_path / "h.csv", [(0, 1, "copy", launch)], cc="9.0")])
    (w,) = [w for w in t.attrs["warnings"] if w.startswith("IMPOSSIBLE RATE:")]
    assert "'copy' at 5 TB/s (limit 4.19 TB/s: NVIDIA H100 SXM5 80GB" in w and "datasheet, +25%" in w
    del launch["device__attribute_display_name"]
    t = kernel_table([details_csv(tmp_path / "u.csv", [(0, 1, "copy", launch)], cc="")])
    assert not any(w.startswith("IMPOSSIBLE") for w in t.attrs["warnings"])
    assert "DRAM B/s not checked against a physical peak: the profile does not say which GPU it ran on" in \
        t.attrs["warnings"][0]


# --------------------------------------------------------------------------------- runs and processes
def test_two_ranks_with_the_same_metrics_are_distinct_launches(tmp_path):
    launch = {FFMA: ("inst", "100"), FADD: ("inst", "0"), FMUL: ("inst", "0"), TIME: ("usecond", "2.0")}
    f = details_csv(tmp_path / "ranks.csv", [(0, 101, "k", launch), (1, 101, "k", launch),
                                             (0, 202, "k", launch), (1, 202, "k", launch)])
    k = kernel_table([f]).iloc[0]
    assert k["launches"] == 4 and k["time_s"] == pytest.approx(8e-6) and k["flops"] == 4 * 200
    per = kernel_table([f], per_process=True)
    assert sorted(per["process"]) == ["101 app@node7", "202 app@node7"]
    assert list(per["launches"]) == [2, 2] and list(per["flops"]) == [400, 400]
    assert any(w.startswith("2 runs measured the same metrics") for w in kernel_table([f]).attrs["warnings"])


def test_many_ranks_are_one_warning_naming_the_first_few(tmp_path):
    launch = {FFMA: ("inst", "100"), FADD: ("inst", "0"), FMUL: ("inst", "0"), TIME: ("usecond", "2.0")}
    f = details_csv(tmp_path / "ranks.csv", [(0, pid, "k", launch) for pid in range(100, 110)])
    said = [w for w in kernel_table([f]).attrs["warnings"] if "runs measured the same metrics" in w]
    assert len(said) == 1 and said[0].startswith("10 runs measured the same metrics")
    assert said[0].count("app@node7") == 3 and "; and 7 more; --per-process shows them apart" in said[0]


def test_many_disagreeing_groups_are_a_few_lines(tmp_path):
    """Five processes measured DRAM bytes in 10 us, five others the FLOPs of the same launch in 25 us: five
    groups of two passes, each disagreeing 2.5x: one line naming three, counting the other two."""
    dram = {"dram__bytes.sum": ("Kbyte", "64"), TIME: ("usecond", "10")}
    flop = {FFMA: ("inst", "1,000"), FADD: ("inst", "0"), FMUL: ("inst", "0"), TIME: ("usecond", "25")}
    f = details_csv(tmp_path / "passes.csv", [(0, pid, "k", dram) for pid in range(100, 105)]
                    + [(0, pid, "k", flop) for pid in range(105, 110)])
    t = kernel_table([f])
    assert t.iloc[0]["launches"] == 5 and t.iloc[0]["flops"] == 5 * 2000
    said = [w for w in t.attrs["warnings"] if "disagree" in w]
    assert len(said) == 1 and "on 5 kernel(s) of a group of runs" in said[0]
    assert said[0].count("'k' by 2.5x") == 3 and "; and 2 more;" in said[0]
    (groups,) = [w for w in t.attrs["warnings"] if "runs measured the same metrics" in w]
    assert groups.startswith("5 runs") and groups.count("with 1 more pass(es)") == 3 and "; and 2 more;" in groups


def test_two_passes_merge_and_disagreeing_times_are_reported_and_choosable(tmp_path, capsys):
    """Pass 1 (pid 1) DRAM bytes, timed 10 us; pass 2 (pid 2) FLOP counters, timed 25 us: 2.5x apart."""
    a = details_csv(tmp_path / "a.csv", [(0, 1, "k", {"dram__bytes.sum": ("Kbyte", "64"), TIME: ("usecond", "10")})])
    b = details_csv(tmp_path / "b.csv", [(0, 2, "k", {FFMA: ("inst", "1,000"), FADD: ("inst", "0"),
                                                      FMUL: ("inst", "0"), TIME: ("usecond", "25")})])
    t = kernel_table([a, b])
    k = t.iloc[0]
    assert k["launches"] == 1 and k["dram_bytes"] == 64_000 and k["flops"] == 2000
    assert k["time_s"] == pytest.approx(10e-6)  # the first run's
    (w,) = [w for w in t.attrs["warnings"] if "disagree" in w]
    assert "by 2.5x" in w and "run 1 (a.csv, process 1 app@node7) 0.01 ms" in w and "used run 1" in w
    assert kernel_table([a, b], time_run=2).iloc[0]["time_s"] == pytest.approx(25e-6)
    with pytest.raises(CeilingsError, match=r"--time-run 3: the ncu inputs hold 2 run\(s\)"):
        kernel_table([a, b], time_run=3)
    assert main([str(a), str(b), "--time-run", "2", "--csv", str(tmp_path / "out.csv")]) == 0
    assert kernel_table([tmp_path / "out.csv"]).iloc[0]["time_s"] == pytest.approx(25e-6)


def test_a_kernel_timed_only_by_smsp_cycles_gets_its_time(tmp_path):
    f = details_csv(tmp_path / "smsp.csv", [(0, 1, "k", {
        "smsp__cycles_elapsed.avg": ("cycle", "14,100"), "smsp__cycles_elapsed.avg.per_second": ("Ghz", "1.41"),
        "dram__bytes.sum": ("byte", "1,000")})])
    k = kernel_table([f]).iloc[0]
    assert k["time_s"] == pytest.approx(14_100 / 1.41e9) and k["sm_clock_hz"] == pytest.approx(1.41e9)


def test_gpc_elapsed_cycles_over_their_rate_are_a_time_source(tmp_path):
    f = details_csv(tmp_path / "gpc.csv", [(0, 1, "k", {
        "gpc__cycles_elapsed.max": ("cycle", "2,000"),
        "gpc__cycles_elapsed.avg.per_second": ("cycle/usecond", "1,000")})])
    assert kernel_table([f]).iloc[0]["time_s"] == pytest.approx(2000 / 1e9)


# ---------------------------------------------------------------------------------------------- nsys
def _nsys_table(rows: list[tuple[int, int, str]]) -> list[str]:
    """An nsys cuda_gpu_kern_sum text table: (total ns, instances, name); names over 100 chars are cut."""
    head = (" Time (%)  Total Time (ns)  Instances  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)  Name")
    dash = (" --------  ---------------  ---------  --------  --------  --------  --------  -----------  "
            + "-" * 100)
    out = [head, dash]
    for total, n, name in rows:
        shown = name if len(name) <= 100 else name[:99] + "…"
        avg = total / n
        out.append(f" {50.0:8.1f}  {total:15,}  {n:9}  {avg:8.1f}  {avg:8.1f}  {int(avg):8}  {int(avg):8}  "
                   f"{0.0:11.1f}  {shown}")
    return out


LONG = "void cutlass::Kernel<cutlass::gemm::kernel::DefaultGemm<cutlass::half_t, cutlass::layout::RowMajor, 8, "


def test_nsys_runs_cut_names_and_kernels_only_nsys_saw(tmp_path):
    a, b = LONG + "A>>(Params)", LONG + "B>>(Params)"  # distinct kernels, the same first 100 characters
    text = ["[6/8] Executing 'cuda_gpu_kern_sum' stats report", "",
            *_nsys_table([(9_000, 3, a), (4_000, 2, "copy(float*)")]), "",
            "[6/8] Executing 'cuda_gpu_kern_sum' stats report", "",
            *_nsys_table([(6_000, 3, b), (8_000, 2, "copy(float*)")]), ""]
    f = tmp_path / "nsys.txt"
    f.write_text("\n".join(text) + "\n")
    alone = kernel_table([f], per_process=True)
    # two runs: each kernel of each run is its own row; the two cut names stay apart
    assert sorted(alone["launches"]) == [2, 2, 3, 3]
    cut = alone[alone["kernel"].str.endswith("…")]
    assert len(cut) == 2 and sorted(cut["time_s"]) == pytest.approx([6e-6, 9e-6])
    summed = kernel_table([f])
    assert only(summed, "copy(")["time_s"] == pytest.approx(12e-6) and only(summed, "copy(")["launches"] == 4
    assert len(summed[summed["kernel"].str.endswith("…")]) == 2  # never merged by their cut name
    # ncu profiled both long kernels and not copy: the cut names are ambiguous, copy stays as a time-only row
    zero = {FADD: ("inst", "0"), FMUL: ("inst", "0")}
    ncu = details_csv(tmp_path / "ncu.csv", [(0, 1, a, {FFMA: ("inst", "10"), **zero}),
                                            (1, 1, b, {FFMA: ("inst", "20"), **zero})])
    t = kernel_table([ncu], nsys=[f])
    assert math.isnan(only(t, a)["time_s"]) and math.isnan(only(t, b)["time_s"])
    assert only(t, "copy(")["launches"] == 4 and math.isnan(only(t, "copy(")["flops"])
    assert any("begin several distinct kernels" in w for w in t.attrs["warnings"])
    assert any(w.startswith("1 kernel(s) only nsys saw") for w in t.attrs["warnings"])


def test_an_nsys_time_over_two_runs_is_total_time_over_total_launches(tmp_path):
    text = [*_nsys_table([(3_000, 1, "copy(float*)")]), "", *_nsys_table([(5_000, 3, "copy(float*)")]), ""]
    f = tmp_path / "nsys.txt"
    f.write_text("\n".join(text) + "\n")
    ncu = details_csv(tmp_path / "ncu.csv", [(0, 1, "copy(float*)", {"dram__bytes.sum": ("byte", "4,096")})])
    k = kernel_table([ncu], nsys=[f]).iloc[0]
    # one ncu launch x 2000 ns (nsys prints Avg to 0.1 ns: 1666.7 x 3)
    assert k["time_s"] == pytest.approx((3_000 + 5_000) / 4 * 1e-9, rel=1e-4)


# ---------------------------------------------------------------------------------- layouts, formats
def test_print_summary_per_gpu_new_layout():
    t = kernel_table([DATA / "summary_per_gpu.txt"], per_launch=True)
    m = only(t, "bitonic_merge")
    assert (m["launches"], m["grid"], m["block"], m["cc"], m["device"]) == (300, "(16384, 1, 1)", "(512, 1, 1)",
                                                                            "9.0", "0")
    assert m["time_s"] == pytest.approx(300 * 10e-6)  # Average x Invocations
    assert only(t, "fill_padding")["time_s"] == pytest.approx(20e-6)


def test_print_summary_per_gpu_old_layout_each_section_a_block_of_its_own():
    """ncu of about 2020-2021 (`--print-summary per-gpu`, here with raw metric names as `--details-all`
    prints them) writes every section of a kernel as a block of its own under the kernel line again. The
    layout follows two real logs in the public repository AlexisPerry/kitsune-1
    (kitsune/experiments/raytracer/prof-reports/raytrace-cuda-ncu.64.log @ 5365dd5, raytrace-kokkos-ncu.64.log
    @ 0aacf6b): `  Device 0` without CC; `    NAME, Block Size B, Grid Size G, N invocations ` (a trailing
    space); a header row, one dash row, left-aligned cells, no closing dash row; units `second`,
    `msecond`, `cycle/nsecond`, `cycle/usecond`; metrics printed in two sections (launch__block_size,
    launch__waves_per_multiprocessor); the closing "Note:" saying the averages are means over the launches.
    Values are made up. Each kernel is one row, launches = N, time = Average x N."""
    rows = read_profile(DATA / "summary_per_gpu_old_sections.txt")
    assert len(rows) == 2 and rows["launches"].tolist() == [1, 4] and rows["id"].tolist() == [0, 1]
    p = rows.iloc[0]
    assert p["kernel"] == "PathTracer(int, Pixel *, int)"
    assert p["gpu__time_duration.sum"] == 11.865617  # second: as written
    assert (p["block"], p["grid"]) == ("256", "8192")  # launch__block_size / launch__grid_size
    assert p["launch__waves_per_multiprocessor"] == 25.283951
    assert p["lts__t_sector_hit_rate.pct"] == 97.267316  # the last block's
    t = kernel_table([DATA / "summary_per_gpu_old_sections.txt"])
    r = only(t, "PathTracer")
    assert r["launches"] == 1 and r["time_s"] == pytest.approx(11.865617)
    assert r["sm_clock_hz"] == pytest.approx(1.096418e9)  # gpc__cycles_elapsed.avg.per_second, cycle/nsecond
    k = only(t, "void Kokkos::Impl::cuda_parallel_launch_local_memory<")
    assert k["launches"] == 4 and k["time_s"] == pytest.approx(4 * 4.625e-3)  # Average 4.625 msecond
    assert k["sm_clock_hz"] == pytest.approx(764.5e6)  # sm__cycles_elapsed.avg.per_second, cycle/usecond


def test_print_summary_per_gpu_new_layout_with_several_sections():
    """The newer per-gpu layout: `  Device 0, CC 8.9`, `    NAME (g, g, g)x(b, b, b), Invocations N`,
    tables with a dash row above and under the header and one closing them, as a public H100 log of
    `--print-summary per-gpu --metrics ...` shows (one section: the fixture summary_per_gpu.txt). Labels
    and units as ncu 2020-2023 prints its sections (`Duration usecond|nsecond`, `SM Frequency
    cycle/nsecond`: the shared samples einnet g2bmm and dd2360). Several sections in this layout were not
    seen in a real log, so both forms are here: heat_step repeats its line above each section as the older
    per-gpu layout does (and its time twice: `Duration` and `--metrics gpu__time_duration.sum`), reduce prints
    its sections under one line as per-kernel summaries do. Values are made up."""
    rows = read_profile(DATA / "summary_per_gpu_sections.txt")
    assert rows["kernel"].str.split("(").str[0].tolist() == ["heat_step", "void reduce<float, 256>",
                                                             "void reduce<float, 256>"]
    assert rows["device"].tolist() == ["0", "0", "1"] and rows["launches"].tolist() == [1, 3, 1]
    step = rows.iloc[0]
    assert (step["grid"], step["block"], step["cc"]) == ("(64, 1, 1)", "(256, 1, 1)", "8.9")
    assert step["gpu__time_duration.sum"] == pytest.approx(12.50e-6)
    assert step["sm__cycles_elapsed.avg.per_second"] == pytest.approx(1.98e9)
    assert step["Occupancy/Achieved Occupancy"] == 15.20 and step["Memory Workload Analysis/L2 Hit Rate"] == 50
    assert rows.iloc[1]["gpu__time_duration.sum"] == pytest.approx(1_000e-9)  # Average, nsecond
    assert rows.iloc[2]["gpu__time_duration.sum"] == pytest.approx(900e-9)
    t = kernel_table([DATA / "summary_per_gpu_sections.txt"])
    s = only(t, "heat_step")
    assert s["launches"] == 1 and s["time_s"] == pytest.approx(12.50e-6) and s["sm_clock_hz"] == pytest.approx(1.98e9)
    assert s["dram_bytes"] == pytest.approx(1.05e6) and s["flops"] == 2 * 16_384
    r = only(t, "void reduce")  # one kernel on two GPUs: 3 launches of 1,000 ns and one of 900 ns
    assert r["launches"] == 4 and r["time_s"] == pytest.approx(3 * 1_000e-9 + 900e-9)


def test_print_summary_per_kernel_text_with_several_sections():
    """`--print-summary per-kernel` as ncu 2024 prints it (the shared sample heat_eq_cc89_ncu2024_summary):
    `  NAME (g, g, g)x(b, b, b), Device 0, CC 8.9, Invocations N`, every section under that one heading,
    units `us` and `Ghz`. Values are made up: one row per kernel, time = Average x N."""
    rows = read_profile(DATA / "summary_per_kernel_sections.txt")
    assert len(rows) == 2 and rows["launches"].tolist() == [1, 250]
    a = rows.iloc[0]
    assert a["gpu__time_duration.sum"] == pytest.approx(1.80e-6) and a["launch__block_size"] == 256
    assert a["GPU and Memory Workload Distribution/Total SM Elapsed Cycles"] == 131_424
    t = kernel_table([DATA / "summary_per_kernel_sections.txt"])
    h = only(t, "add_heat_kernel_1d")
    assert h["launches"] == 1 and h["time_s"] == pytest.approx(1.80e-6) and h["sm_clock_hz"] == pytest.approx(2.25e9)
    s = only(t, "heat_kernel_1d_sim")
    assert s["launches"] == 250 and s["time_s"] == pytest.approx(250 * 1.92e-6)
    assert s["sm_clock_hz"] == pytest.approx(2.25e9)


def test_a_summary_section_printed_twice_under_one_heading_is_a_second_kernel(tmp_path):
    """A summary prints each section once per kernel, so a repeated heading above a section already printed
    under it is another kernel with the same name, grid and count (this layout was not seen in a real log:
    the rule's other side), and so is a repeated heading with no section under it. Launch headings (no
    `Invocations`) repeat for every launch: each is a launch."""
    text = (DATA / "summary_per_gpu.txt").read_text()
    heading = "    bitonic_merge(int *, int, int, int) (16384, 1, 1)x(512, 1, 1), Invocations 300\n"
    again = text.replace("\n    fill_padding", "\n" + text[text.index(heading):text.index("\n\n    fill_padding")]
                         + "\n\n    fill_padding")
    f = tmp_path / "twice.txt"
    f.write_text(again)
    rows = read_profile(f)
    assert rows["kernel"].str.split("(").str[0].tolist() == ["bitonic_merge", "bitonic_merge", "fill_padding"]
    assert rows["launches"].tolist() == [300, 300, 1]
    bare = tmp_path / "bare.txt"
    bare.write_text(text.replace("\n    fill_padding", "\n" + heading + "\n    fill_padding"))
    assert read_profile(bare)["launches"].tolist() == [300, 300, 1]
    launch = "  k(float *) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0\n"
    dash = "    ---------------- ----------- ------------\n"
    table = ("    Section: GPU Speed Of Light Throughput\n" + dash + "    Metric Name      Metric Unit Metric Value\n"
             + dash + "    Duration                  us          2.00\n" + dash + "\n")
    launches = tmp_path / "launches.txt"
    launches.write_text("[9] bench@node\n" + launch + table + launch + table)
    assert read_profile(launches)["launches"].tolist() == [1, 1]


def test_a_report_shifted_right_with_application_output_between_is_read(tmp_path):
    """A bot's log: ncu's report indented by 4 more spaces (kernel headings at 6), the application's own
    lines at the margin between them; the same launches as the report as ncu printed it."""
    plain = DATA / "text_new_sections.txt"
    lines = plain.read_text().split("\n")
    shifted = []
    for i, line in enumerate(lines):
        if line.startswith("  ") and ", CC " in line and i:
            shifted.append("step done: loss 0.25")
        shifted.append("    " + line if line.strip() and not line.startswith(("==", "[")) else line)
    f = tmp_path / "bot.txt"
    f.write_text("\n".join(shifted))
    expected = read_profile(plain)
    got = read_profile(f)
    assert len(got) == len(expected) > 0
    assert got["kernel"].tolist() == expected["kernel"].tolist()
    metric = [c for c in expected.columns if c.endswith("time_duration.sum")][0]
    assert got[metric].tolist() == expected[metric].tolist()


def test_print_details_named_tables_indented_with_application_output_are_read():
    """ncu 2025 `--print-details` as a bot prints it (the GPU MODE cluster bot on B200): kernel headings at 4
    spaces, no "Section:" lines, each table under a "Table Name :" line (one with a "Table Description :"),
    and the benchmark's own lines at the margin: between two kernels, between a table's first dash row and
    its header, and between two rows. Values read by hand from tests/data/ncu/text_print_details.txt."""
    rows = read_profile(DATA / "text_print_details.txt")
    assert rows["kernel"].str.split("<").str[0].tolist() == ["void gemv_kernel", "void copy_kernel", "void gemv_kernel"]
    assert rows["grid"].tolist() == ["(112, 1, 1)", "(64, 1, 1)", "(112, 4, 1)"] and set(rows["cc"]) == {"10.0"}
    assert rows["GPU Throughput/Memory [%]"].tolist() == [4.37, 2.39, 16.62]
    assert rows["Pipe Utilization (% of active cycles)/Tensor (All)"].tolist() == [0.55, 0, 1.65]
    # the header came after the benchmark's line; the last row after another one
    assert rows["Warp State (All Cycles)/Stall Long Scoreboard"].tolist() == [10.24, 11.74, 9.45]
    assert rows["Warp State (All Cycles)/Selected"].tolist() == [1, 1, 1]
    t = kernel_table([DATA / "text_print_details.txt"])
    assert t["launches"].tolist() == [2, 1] and t["time_s"].isna().all()  # these tables time nothing: said so
    assert any("no kernel has time_s, flops, dram_bytes" in w for w in t.attrs["warnings"])


def test_print_details_at_ncus_own_indent_and_inside_sections(tmp_path):
    """The same report as ncu prints it (headings at 2 spaces) reads the same; a named table inside a
    "Section:" (ncu 2025's default print) is keyed by its section, as the section's other tables."""
    text = (DATA / "text_print_details.txt").read_text()
    plain = tmp_path / "plain.txt"
    plain.write_text("\n".join(line[2:] if line.startswith("  ") else line for line in text.split("\n")))
    assert read_profile(plain).equals(read_profile(DATA / "text_print_details.txt"))
    dash = "    ---------------- ----------- ------------"
    sections = tmp_path / "sections.txt"
    sections.write_text("\n".join([
        "[9] bench@node", "  k(float *) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0", "",
        "    Section: GPU Speed Of Light Throughput", dash, "    Metric Name      Metric Unit Metric Value", dash,
        "    Duration                  us        606.56", dash, "", "    GPU Throughput Chart",
        "    Table Name : GPU Throughput", dash, "    Metric Name      Metric Unit Metric Value", dash,
        "    Memory [%]                 %        86.36", dash, ""]))
    row = read_profile(sections).iloc[0]
    assert row["gpu__time_duration.sum"] == pytest.approx(606.56e-6)
    assert row["GPU Speed Of Light Throughput/Memory [%]"] == 86.36


def test_print_summary_per_gpu_old_layout():
    """ncu of about 2020: `  Device 0` without CC, `NAME, Block Size B, Grid Size G, N invocations`, one dash
    row under the header and none closing the table."""
    t = kernel_table([DATA / "summary_per_gpu_old.txt"])
    r = only(t, "raytrace_kernel")
    assert r["launches"] == 4 and r["time_s"] == pytest.approx(4 * 2.5e-3) and r["sm_clock_hz"] == pytest.approx(1.40e9)
    k = only(t, "Kokkos::")
    assert k["launches"] == 1 and k["time_s"] == pytest.approx(4.10e-6)
    # the clock its kernels ran at: the median of their SM Frequency, 1.41 and 1.40 cycle/ns
    assert t.attrs["gpus"] == [{"gpu": None, "cc": None, "device": "0", "sm_clock_hz": pytest.approx(1.405e9)}]


def test_print_summary_per_kernel_csv():
    t = kernel_table([DATA / "summary_per_kernel.csv"])
    s = only(t, "void saxpy")
    assert s["launches"] == 10 and s["time_s"] == pytest.approx(10 * 10e-6)
    assert s["flops"] == 10 * 2 * 1_048_576 and s["dram_bytes"] == pytest.approx(10 * 12.58e6)
    r = only(t, "reduce(")
    assert r["launches"] == 2 and r["time_s"] == pytest.approx(2 * 3e-6) and r["dram_bytes"] == pytest.approx(2 * 160e3)


def test_nvprof_output_is_named_with_the_ncu_command(tmp_path):
    f = tmp_path / "nvprof.log"
    f.write_text("==4242== NVPROF is profiling process 4242, command: ./app\n==4242== Profiling application: ./app\n"
                 "==4242== Profiling result:\n            Type  Time(%)      Time     Calls       Avg  Name\n")
    with pytest.raises(CeilingsError, match=rf"^{f}:1: nvprof output, not Nsight Compute.*python -m analysis.profile"):
        read_profile(f)


def test_each_fixture_is_recognised_as_its_format():
    expected = {"summary_per_gpu.txt": "ncu text", "summary_per_kernel.csv": "ncu --print-summary per-kernel --csv",
                "details_12col.csv": "ncu --csv (details page)", "raw.csv": "ncu --csv --page raw",
                "nsys_kern_sum.csv": "nsys kernel summary (CSV)"}
    for name, fmt in expected.items():
        data = (DATA / name).read_bytes()
        assert detect(Source(data, name))[0].name == fmt, name


# ------------------------------------------------------------------------------- device, filters
def test_gpu_name_and_cc_from_the_device_attributes(tmp_path):
    f = details_csv(tmp_path / "dev.csv", [(0, 1, "k", {"device__attribute_display_name": ("", "NVIDIA A100-SXM4-80GB"),
                                                        TIME: ("usecond", "1.0")})])
    t = kernel_table([f])
    assert t.attrs["gpus"] == [{"gpu": "NVIDIA A100-SXM4-80GB", "cc": "8.0", "device": "0"}]
    assert t.iloc[0]["gpu"] == "NVIDIA A100-SXM4-80GB"


@needs_samples
def test_gpu_name_in_a_real_raw_page():
    t = kernel_table([SAMPLES / "microgpusim_gtx1080_ncu2019_raw/nsight_vectoradd_100_32_metrics_all.csv"])
    assert {g["gpu"] for g in t.attrs["gpus"]} == {"NVIDIA GeForce GTX 1080"}


@needs_samples
@pytest.mark.parametrize("sample", ["ai4materials_a100_ncu2020.2/metrics_713.txt",
                                    "ai4materials_a100_ncu2020.2/metrics_713_paddle_.csv"])
def test_nvtx_ranges_of_real_samples_filter_launches(sample):
    """Both samples ran every kernel inside the range `linear_nvtx` (read off their NVTX blocks/columns)."""
    everything = kernel_table([SAMPLES / sample], per_launch=True)
    inside = kernel_table([SAMPLES / sample], per_launch=True, nvtx="linear_nvtx")
    assert len(inside) == len(everything) > 0
    with pytest.raises(CeilingsError, match=r"--nvtx 'backward': no launch ran inside such a range; the profile's "
                                            r"ranges: linear_nvtx"):
        kernel_table([SAMPLES / sample], nvtx="backward")


def test_nvtx_filter_on_a_profile_without_ranges_says_how_to_get_them():
    with pytest.raises(CeilingsError, match=r"records no NVTX ranges; profile with ncu --nvtx"):
        kernel_table([DATA / "details_12col.csv"], nvtx="step")


def test_kernel_regex_keeps_matching_kernels_only(tmp_path):
    launch = {TIME: ("usecond", "1.0")}
    f = details_csv(tmp_path / "k.csv", [(0, 1, "gemm_a", launch), (1, 1, "copy_b", launch), (2, 1, "gemm_c", launch)])
    assert sorted(kernel_table([f], kernel_regex="^gemm")["kernel"]) == ["gemm_a", "gemm_c"]
    with pytest.raises(CeilingsError, match=r"--kernel 'nothing': no kernel name matches"):
        kernel_table([f], kernel_regex="nothing")
    with pytest.raises(CeilingsError, match=r"--kernel '\(': not a valid regular expression"):
        kernel_table([f], kernel_regex="(")


def test_missing_roofline_inputs_are_named_with_the_command_that_collects_them(tmp_path):
    f = details_csv(tmp_path / "t.csv", [(0, 1, "k", {TIME: ("usecond", "1.0")})])
    t = kernel_table([f])
    assert t.attrs["missing"] == ["flops", "dram_bytes", "l2_bytes", "l1_bytes"]
    (w,) = t.attrs["warnings"]
    assert w == (f"{f}: no kernel has flops, dram_bytes, so the roofline cannot place them; collect them with: "
                 f"python -m analysis.profile --out NAME -- APP ARGS (ncu with the roofline metrics)")


def test_a_total_ops_counter_beside_its_destination_split_is_counted_once(tmp_path):
    """A100 lists sm__ops_path_tensor_src_fp16 (all destinations) beside its _dst_fp16/_dst_fp32 parts."""
    ops = "sm__ops_path_tensor"
    f = details_csv(tmp_path / "a100.csv", [(0, 1, "gemm", {
        f"{ops}_src_fp16.sum": ("", "137,438,953,472"), f"{ops}_src_fp16_dst_fp16.sum": ("", "0"),
        f"{ops}_src_fp16_dst_fp32.sum": ("", "137,438,953,472"),
        f"{ops}_src_fp4_fp6_dst_fp32.sum": ("", "1,000"), TIME: ("msecond", "1.0")})])
    k = kernel_table([f]).iloc[0]
    assert k["flops_tensor"] == 137_438_953_472 + 1000  # the fp16 total once, and Blackwell's fp4/fp6 type


def test_hfma2_mma_moves_counted_inside_the_hmma_breakdown_are_found_too(tmp_path):
    """With the hmma/imma/dmma counters collected, the moves show up as HMMA (ncu breaks op_hmma down into
    ..._type_hfma2): hfma thread instructions = 32 x hmma exactly. Or ncu's own count says so."""
    parts = {FFMA: ("inst", "1,000,000"), FADD: ("inst", "0"), FMUL: ("inst", "0"), HFMA: ("inst", f"{32 * T:,}"),
             HADD: ("inst", "0"), HMUL: ("inst", "0"), PIPE: ("inst", f"{T:,}"),
             "sm__inst_executed_pipe_tensor_op_hmma.sum": ("inst", f"{T:,}"),
             "sm__inst_executed_pipe_tensor_op_imma.sum": ("inst", "0"),
             "sm__inst_executed_pipe_tensor_op_dmma.sum": ("inst", "0"), TIME: ("msecond", "1.0")}
    k = kernel_table([details_csv(tmp_path / "inside.csv", [(0, 1, SGEMM, parts)])]).iloc[0]
    assert k["flops_tensor"] == 0 and k["flops_fp16"] == 0 and k["flops"] == 2_000_000
    named = {**parts, HFMA: ("inst", f"{32 * T + 64:,}"),  # 2 real HFMA2 besides the moves
             "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum": ("inst", f"{T:,}")}
    k = kernel_table([details_csv(tmp_path / "named.csv", [(0, 1, SGEMM, named)])]).iloc[0]
    assert k["flops_tensor"] == 0 and k["flops_fp16"] == 2 * 64


def test_an_integer_ops_counter_alone_leaves_tensor_flops_to_the_instruction_rule(tmp_path):
    """CC 7.0: 1000 HMMA.884 x 512; the int8 ops counter holds integer operations, not FLOPs."""
    f = details_csv(tmp_path / "v100.csv", [(0, 1, "k", {
        PIPE: ("inst", "1,000"), "sm__ops_path_tensor_src_int8.sum": ("", "4,096"), TIME: ("usecond", "1.0")})],
        cc="7.0")
    k = kernel_table([f]).iloc[0]
    assert k["flops_tensor"] == 512_000 and k["ops_tensor_int"] == 4096


def test_tensor_work_of_a_known_type_is_judged_at_that_types_roof(tmp_path):
    """A DGEMM on an A100 (DMMA.884, 512 FLOPs each): 1e6 instructions in 27.7 us = 18.5 TFLOP/s. Against the
    A100 datasheet's FP64 tensor roof (19.5 TFLOP/s) that is 94.9 %, not 5.9 % of the FP16 tensor roof."""
    from analysis.roofline import roofline_table, target_roofs

    f = details_csv(tmp_path / "dgemm.csv", [(0, 1, "ampere_dgemm_64x32", {
        PIPE: ("inst", "1,000,000"), "sm__inst_executed_pipe_tensor_op_dmma.sum": ("inst", "1,000,000"),
        "sm__inst_executed_pipe_tensor_op_hmma.sum": ("inst", "0"),
        "sm__inst_executed_pipe_tensor_op_imma.sum": ("inst", "0"),
        TIME: ("usecond", "27.7"), "dram__bytes.sum": ("Mbyte", "10")})])
    kernels = kernel_table([f])
    assert kernels.iloc[0]["tensor_type"] == "fp64" and kernels.iloc[0]["flops"] == 512e6
    judged = roofline_table(target_roofs("A100 SXM4 80GB"), kernels).iloc[0]
    assert judged["roof"] == "tensor.fp64"
    assert judged["pct_of_roof"] == pytest.approx(100 * (512e6 / 19.5e12) / 27.7e-6, rel=1e-3)  # 94.8 %


def test_two_nsys_runs_alone_are_summed_with_a_warning(tmp_path):
    text = [*_nsys_table([(3_000, 1, "copy(float*)")]), "", *_nsys_table([(5_000, 3, "copy(float*)")]), ""]
    f = tmp_path / "nsys.txt"
    f.write_text("\n".join(text) + "\n")
    t = kernel_table([f])
    assert t.iloc[0]["launches"] == 4 and t.iloc[0]["time_s"] == pytest.approx(8_000e-9, rel=1e-4)
    assert any("2 nsys runs" in w and "summed" in w for w in t.attrs["warnings"])


def test_nvtx_with_an_nsys_summary_adds_no_kernel_from_outside_the_range(tmp_path):
    """The ncu kernel ran inside 'step'; nsys (no ranges) also saw 'other', which may have run anywhere."""
    ncu = tmp_path / "ncu.txt"
    ncu.write_text((DATA / "text_new_sections.txt").read_text().replace("<0,matmul>", "<0,step>"))
    nsys = tmp_path / "nsys.txt"
    nsys.write_text("\n".join([*_nsys_table([(9_000, 3, "other_kernel(float*)")]), ""]) + "\n")
    t = kernel_table([ncu], nsys=[nsys], nvtx="step")
    assert "other_kernel(float*)" not in set(t["kernel"])


def test_two_passes_that_both_carry_launch_facts_still_merge(tmp_path):
    """Both passes ran with LaunchStats (grid and block size as metrics): they are still one set of launches."""
    facts = {"launch__grid_size": ("", "1,024"), "launch__block_size": ("", "256")}
    a = details_csv(tmp_path / "a.csv", [(0, 1, "k", {**facts, "dram__bytes.sum": ("Kbyte", "64")})])
    b = details_csv(tmp_path / "b.csv", [(0, 2, "k", {**facts, FFMA: ("inst", "10"), FADD: ("inst", "0"),
                                                      FMUL: ("inst", "0")})])
    k = kernel_table([a, b]).iloc[0]
    assert k["launches"] == 1 and k["dram_bytes"] == 64_000 and k["flops"] == 20

"""Every shared sample (../shared/ncu-samples, ../shared/torch-traces) checked by value.

test_every_sample_parses only asks for rows; the tests in test_ncu.py, test_ncu_cases.py, test_nsys.py and
test_torch_trace.py check some numbers of some samples. These check what those leave out, per file: the
number of launches and kernels (counted with grep), kernel names, times, bytes and instruction counters as
written (units converted here by hand; every literal names the file line it was read off), and the derived
columns where they are plain arithmetic on those numbers (FLOPs = 2 x fma + add + mul, the ncu roofline
recipe; time = cycles / rate; rates = totals / time). Where a sample has another export of the same run (the
gene .ncu-rep beside its CSV) or of a like run (the gene concatenated CSV), the two are compared.

Nothing expected here comes from the code under test: the torch traces are counted with json/gzip below,
the ncu-rep is read off its bytes below, the nsys table is split with a regular expression below. Not here:
dd2360_cc89_ncu2023.2_failed (every value "(!) nan": test_ncu checks its one-line error) and the AMD and
CPU-only traces (declined: test_torch_trace).
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import re
import struct

import pytest

from analysis.ncu import kernel_table, read_profile
from tests.test_ncu import SAMPLES, needs_samples, row
from tests.test_torch_trace import TRACES, needs_traces

EINNET = SAMPLES / "einnet_a100_ncu2020.1_text"
GENE = SAMPLES / "gene_v100_ncu2020.1_csv"
AI4M = SAMPLES / "ai4materials_a100_ncu2020.2"
FFMA, FADD, FMUL = (f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("ffma", "fadd", "fmul"))


def lines_of(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def count(path, pattern: str) -> int:
    """grep -c: the lines of `path` that match `pattern`."""
    return sum(bool(re.search(pattern, line)) for line in lines_of(path))


# ------------------------------------------------------------------------ einnet (ncu of CUDA 11.0, text)
@needs_samples
def test_einnet_conv3x3_two_kernels_read_bytes_as_written_and_no_time():
    """conv3x3.origin.pro: `--metrics` layout, two kernels of one launch each (headings lines 20, 27), two
    metrics each in Mbyte; no Duration or gpu__time_duration anywhere, no DRAM write counter."""
    f = EINNET / "conv3x3.origin.pro"
    assert count(f, r"^==PROF== Profiling ") == 2 and count(f, r", Context \d+, Stream \d+$") == 2
    assert count(f, r"gpu__time_duration|Duration|dram__bytes_write") == 0
    p = read_profile(f)
    assert p["kernel"].tolist() == [
        "void cudnn::winograd::generateWinogradTilesKernel<(int)0, float, float>"  # line 20, before its timestamp
        "(cudnn::winograd::GenerateWinogradTilesParams<T2, T3>)",
        "ampere_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148n_nt_v1"]  # line 27
    assert set(p["process"]) == {"2264761 test_op_conv3x3@127.0.0.1"}  # line 19
    assert p["dram__bytes_read.sum"].tolist() == pytest.approx([9.45e6, 16.91e6])  # lines 23, 30: Mbyte
    lts = "lts__t_bytes_equiv_l1sectormiss_pipe_lsu_mem_global_op_ld.sum"
    assert p[lts].tolist() == pytest.approx([11.26e6, 18.24e6])  # lines 24, 31: Mbyte
    t = kernel_table([f])
    assert len(t) == 2 and t["launches"].tolist() == [1, 1]
    # reads alone are not the DRAM traffic (no write counter), and nothing times the launches: missing, not 0
    for column in ("time_s", "dram_bytes", "flops", "flop_per_s"):
        assert t[column].isna().all(), column
    assert {"time_s", "flops", "dram_bytes"} <= set(t.attrs["missing"])


@needs_samples
def test_einnet_conv5x5_ten_launches_of_six_kernels_kbyte_and_mbyte_rows():
    """conv5x5.origin.pro: ten headings (lines 21-84), units Kbyte on the first launch and Mbyte after."""
    f = EINNET / "conv5x5.origin.pro"
    assert count(f, r"^==PROF== Profiling ") == 10 and count(f, r", 2023-May-07 \d\d:\d\d:\d\d, Context 1") == 10
    p = read_profile(f)
    assert len(p) == 10
    # lines 24, 31, 38, 45, 52, 59, 66, 73, 80, 87
    assert p["dram__bytes_read.sum"].tolist() == pytest.approx(
        [32.13e3, 8.47e6, 102.79e6, 135.28e6, 135.28e6, 8.46e6, 143.73e6, 4.23e6, 4.24e6, 4.28e6])
    # lines 25, 32, ..., 88
    assert p["lts__t_bytes_equiv_l1sectormiss_pipe_lsu_mem_global_op_ld.sum"].tolist() == pytest.approx(
        [17.82e3, 8.47e6, 127.38e6, 134.92e6, 135.27e6, 8.45e6, 152.04e6, 4.23e6, 4.24e6, 4.24e6])
    assert p["kernel"].iloc[0] == ("void DSE::regular_fft_pad<(int)0, (int)1, (int)256, (int)16, (int)16, (int)1, "
                                   "float, float, float2>(T9 *, T7 *, int, int3, int3, int, int3, int3, int, int, "
                                   "int, int, int, bool)")  # line 21
    assert p["kernel"].iloc[6] == ("void gemv2T_kernel_val<int, int, float2, float2, float2, (int)128, (int)16, "
                                   "(int)2, (int)2, (bool)0, (bool)0, cublasGemvParams<cublasGemvTensorStridedBatched"
                                   "<const float2>, cublasGemvTensorStridedBatched<float2>, float2>>(T12, T5, T5)")
    t = kernel_table([f])
    # the same name on streams 7 and 19 is one kernel: fft_pad lines 21, 35; vector_fft<0> 28, 42; transpose 49,
    # 56, 70; the others once
    launches = {"void DSE::regular_fft_pad<(int)0": 2, "void DSE::vector_fft<(int)0": 2,
                "void transpose_readWrite_alignment_kernel<": 3, "void gemv2T_kernel_val<": 1,
                "void DSE::vector_fft<(int)1": 1, "void DSE::regular_fft_clip<(int)1": 1}
    assert len(t) == len(launches) and t["launches"].sum() == 10
    for prefix, n in launches.items():
        assert row(t, prefix)["launches"] == n, prefix
    assert t["time_s"].isna().all() and t["dram_bytes"].isna().all()  # no time; reads without writes


@needs_samples
def test_einnet_g2bmm_counters_of_both_runs_and_the_derived_rates():
    """g2bmm.origin.profile: run 1 (process 2613187, line 43) printed the default sections, run 2 (process
    2613819, line 115) the --metrics list; test_ncu checks the FLOPs, DRAM bytes, time and clock."""
    f = EINNET / "g2bmm.origin.profile"
    assert count(f, r"^\[\d+\] test_op_g2bmm@127\.0\.0\.1$") == 2 and count(f, r"^  infini::sg2bmm") == 2
    p = read_profile(f)
    assert p["process"].tolist() == ["2613187 test_op_g2bmm@127.0.0.1", "2613819 test_op_g2bmm@127.0.0.1"]
    first, second = p.iloc[0], p.iloc[1]
    assert first["dram__cycles_elapsed.avg.per_second"] == pytest.approx(1.21e9)  # line 47: 1.21 cycle/nsecond
    assert first["gpc__cycles_elapsed.max"] == 10_135_802  # line 49: Elapsed Cycles
    assert first["Launch Statistics/Threads"] == 1_334_000  # line 71 (= 667 x 2,000, lines 64-65)
    assert first["Launch Statistics/Static Shared Memory Per Block"] == pytest.approx(32.16e3)  # line 70: Kbyte
    assert second["dram__sectors_read.sum"] == 655_148  # line 121
    assert second["lts__t_sectors_op_read.sum"] == 661_449_355  # line 124
    assert second["lts__t_bytes_equiv_l1sectormiss_pipe_lsu_mem_global_op_ld.sum"] == pytest.approx(19.75e9)  # 122
    assert second[FFMA] == 5_122_560_000 and second[FADD] == 0 and second[FMUL] == 0  # lines 126-128
    # two counters of the same reads agree: 655,148 sectors x 32 B = 20.96 MB (line 119, Mbyte to 2 decimals)
    assert 32 * 655_148 == pytest.approx(20.96e6, abs=0.005e6)
    k = row(kernel_table([f]), "infini::sg2bmm")
    flops = 2 * 5_122_560_000 + 0 + 0  # lines 126-128: the only precision counted
    dram = 20.96e6 + 311.37e6  # lines 119-120
    assert k["flops"] == pytest.approx(flops) and math.isnan(k["flops_fp64"]) and math.isnan(k["flops_fp16"])
    assert k["flop_per_s"] == pytest.approx(flops / 13.26e-3)  # line 52: Duration 13.26 msecond
    assert k["ai_dram"] == pytest.approx(flops / dram)
    assert k["dram_bytes_per_s"] == pytest.approx(dram / 13.26e-3)
    assert math.isnan(k["l2_bytes"])  # L2 read sectors without their write sectors: the traffic is unknown


# ------------------------------------------------------------------------------ gene (V100, ncu 2020.1 CSV)
# dram_ncuroof-time-0.csv, launches 0-7: dram__bytes.sum (lines 2, 5, ..., 23), sm__cycles_elapsed.avg
# (lines 3, 6, ..., 24), sm__cycles_elapsed.avg.per_second (lines 4, 7, ..., 25), all in base units
GENE_DRAM = [690_974_304, 891_811_744, 690_909_440, 891_985_120, 690_954_112, 891_844_576, 690_998_592,
             891_866_400]
GENE_CYCLES = [1_209_826.20, 1_385_067.65, 1_208_313.35, 1_385_552.20, 1_208_466.30, 1_385_316.32, 1_210_692.80,
               1_385_915.25]
GENE_RATE = [1_309_471_763.30, 1_310_148_138.83, 1_309_648_730.14, 1_310_090_960.67, 1_309_496_580.15,
             1_310_105_772.80, 1_309_276_049.42, 1_310_275_656.88]
IJ, ADD = "ij_deriv_kernel(int, int, int,", "add_i_col_times_ij_block_kernel("  # even and odd launch IDs


@needs_samples
def test_gene_dram_csv_every_launch_and_both_kernels():
    f = GENE / "dram_ncuroof-time-0.csv"
    assert count(f, r'^"\d+","85800",') == 24  # 8 launches x 3 metrics, one process
    p = read_profile(f)
    assert p["id"].tolist() == list(range(8))
    assert [k[:len(IJ)] if i % 2 == 0 else k[:len(ADD)] for i, k in enumerate(p["kernel"])] == [IJ, ADD] * 4
    assert p["dram__bytes.sum"].tolist() == GENE_DRAM
    assert p["sm__cycles_elapsed.avg"].tolist() == pytest.approx(GENE_CYCLES)
    assert p["sm__cycles_elapsed.avg.per_second"].tolist() == pytest.approx(GENE_RATE)
    t = kernel_table([f])
    for name, ids in ((IJ, [0, 2, 4, 6]), (ADD, [1, 3, 5, 7])):
        k = row(t, name)
        time = sum(GENE_CYCLES[i] / GENE_RATE[i] for i in ids)  # no gpu__time_duration: cycles over their rate
        dram = sum(GENE_DRAM[i] for i in ids)
        assert k["launches"] == 4 and k["dram_bytes"] == dram
        assert k["time_s"] == pytest.approx(time) and k["dram_bytes_per_s"] == pytest.approx(dram / time)
        assert k["sm_clock_hz"] == pytest.approx(sum(GENE_RATE[i] for i in ids) / 4)  # the launches' mean
        assert math.isnan(k["flops"])  # no instruction counter in this run
    assert row(t, ADD)["time_s"] == pytest.approx(4.2303e-3, rel=1e-4)  # 4 x ~1,385,000 cycles at ~1.31 GHz


def _rep_doubles(data: bytes) -> list[tuple[int, float]]:
    """The double-valued metric records of an ncu-rep, in file order: (metric id, value). Read off the bytes of
    dram_ncuroof-time-0.ncu-rep by hand: protobuf field 13 (0x6a) of length 14, holding field 1 (a two-byte
    varint: the metric's id) and field 2 (length 9: a field-3 fixed64 double, tag 0x19)."""
    out = []
    for m in re.finditer(rb"j\x0e\x08([\x80-\xff][\x00-\x7f])\x12\t\x19(.{8})", data, re.S):
        low, high = m.group(1)
        out.append(((low & 0x7F) | (high << 7), struct.unpack("<d", m.group(2))[0]))
    return out


@needs_samples
def test_gene_ncu_rep_holds_the_same_launches_as_its_csv():
    """The .ncu-rep behind dram_ncuroof-time-0.csv, read without ncu_report: each launch's record holds the
    three metrics of the CSV's section (listed after it as dram__bytes.sum, sm__cycles_elapsed.avg,
    sm__cycles_elapsed.avg.per_second) as doubles with ids 159, 160, 161, unrounded; the CSV prints two
    decimals. The CSV's reading is the report's: same launches, same values."""
    data = (GENE / "dram_ncuroof-time-0.ncu-rep").read_bytes()
    assert data[:4] == b"NVR\0"
    records = _rep_doubles(data)
    by_id = {mid: [v for i, v in records if i == mid] for mid in (159, 160, 161)}
    assert by_id[159] == GENE_DRAM  # exact: whole bytes
    assert by_id[160] == pytest.approx(GENE_CYCLES, abs=0.0051)  # e.g. 1,385,316.325 printed 1,385,316.32
    assert by_id[161] == pytest.approx(GENE_RATE, abs=0.0051)
    assert data.count(b"Tesla V100-SXM2-16GB") > 0  # the GPU, which the CSV does not name
    p = read_profile(GENE / "dram_ncuroof-time-0.csv")
    assert p["dram__bytes.sum"].tolist() == by_id[159]
    assert p["sm__cycles_elapsed.avg"].tolist() == pytest.approx(by_id[160], abs=0.0051)
    assert p["sm__cycles_elapsed.avg.per_second"].tolist() == pytest.approx(by_id[161], abs=0.0051)


@needs_samples
def test_gene_ncu_rep_through_ncu_report_reads_as_its_csv():
    from analysis.readers import ncu_rep

    if ncu_rep._import_ncu_report() is None:
        pytest.skip("NVIDIA's ncu_report module (Nsight Compute's extras/python) is not installed")
    rep = kernel_table([GENE / "dram_ncuroof-time-0.ncu-rep"], per_launch=True)
    assert len(rep) == 8
    assert rep["dram_bytes"].tolist() == GENE_DRAM
    assert rep["time_s"].tolist() == pytest.approx([c / r for c, r in zip(GENE_CYCLES, GENE_RATE)], rel=1e-8)


# flops_ncuroof-time-0.csv, launches 0-7 (process 127604): cycles (lines 2, 7, ..., 37), rate (3, 8, ..., 38);
# dadd, dfma, dmul (lines 4-6, 9-11, ...): ij_deriv 0 / 137,625,600 / 55,050,240; add_i_col 27,525,120 each
GENE_FLOPS_CYCLES = [179_638_319.62, 184_640_196.68, 185_523_016.75, 197_215_176.20, 187_295_887.82,
                     198_829_059.05, 185_940_802.12, 196_384_803.43]
GENE_FLOPS_RATE = [1_312_168_927.90, 1_312_213_200.10, 1_312_171_062.55, 1_312_220_384.16, 1_311_374_866.25,
                   1_312_218_990.24, 1_312_167_140.64, 1_311_666_475.81]
IJ_FP64 = 2 * 137_625_600 + 0 + 55_050_240  # per launch: 2 x dfma + dadd + dmul
ADD_FP64 = 2 * 27_525_120 + 27_525_120 + 27_525_120


@needs_samples
def test_gene_flops_csv_alone():
    f = GENE / "flops_ncuroof-time-0.csv"
    assert count(f, r'^"\d+","127604",') == 40  # 8 launches x 5 metrics
    p = read_profile(f)
    assert len(p) == 8
    assert p["sm__sass_thread_inst_executed_op_dfma_pred_on.sum"].tolist() == [137_625_600, 27_525_120] * 4
    assert p["sm__sass_thread_inst_executed_op_dmul_pred_on.sum"].tolist() == [55_050_240, 27_525_120] * 4
    assert p["sm__sass_thread_inst_executed_op_dadd_pred_on.sum"].tolist() == [0, 27_525_120] * 4
    t = kernel_table([f])
    for name, ids, fp64 in ((IJ, [0, 2, 4, 6], IJ_FP64), (ADD, [1, 3, 5, 7], ADD_FP64)):
        k = row(t, name)
        time = sum(GENE_FLOPS_CYCLES[i] / GENE_FLOPS_RATE[i] for i in ids)
        assert k["launches"] == 4 and k["flops_fp64"] == 4 * fp64
        assert k["flops"] == 4 * fp64 and math.isnan(k["flops_fp32"])  # fp64 is all this run counted
        assert k["time_s"] == pytest.approx(time) and k["flop_per_s"] == pytest.approx(4 * fp64 / time)
        assert math.isnan(k["dram_bytes"])
    # the counting run is ~150x slower than the DRAM run: 179,638,319.62 cycles at 1.312 GHz is 0.137 s (lines 2-3)
    assert GENE_FLOPS_CYCLES[0] / GENE_FLOPS_RATE[0] == pytest.approx(0.1369, rel=1e-3)


@needs_samples
def test_gene_dram_and_flops_runs_merged_take_the_dram_runs_time():
    """The two runs are passes over the same launches; their times disagree (the FLOP run's ~150x longer):
    the first run's count, and that is said."""
    t = kernel_table([GENE / "dram_ncuroof-time-0.csv", GENE / "flops_ncuroof-time-0.csv"])
    for name, ids, fp64 in ((IJ, [0, 2, 4, 6], IJ_FP64), (ADD, [1, 3, 5, 7], ADD_FP64)):
        k = row(t, name)
        time = sum(GENE_CYCLES[i] / GENE_RATE[i] for i in ids)
        assert k["time_s"] == pytest.approx(time)
        assert k["flop_per_s"] == pytest.approx(4 * fp64 / time)
        assert k["ai_dram"] == pytest.approx(4 * fp64 / sum(GENE_DRAM[i] for i in ids))
    (said,) = [w for w in t.attrs["warnings"] if "runs disagree" in w]
    assert "used run 1 (dram_ncuroof-time-0.csv" in said


# out_nvroof_ncuroof_region-dgdxy-1.csv: process 85801 (lines 2-25: dram bytes, cycles, rate) then 127605
# (lines 26-49: dadd, dfma, dmul): the same run style as the two CSVs, but other processes and other bytes
OUT_DRAM = [690_960_320, 891_760_416, 690_967_264, 891_751_648, 690_976_576, 891_826_656, 690_937_088,
            891_799_648]  # lines 2, 5, ..., 23
OUT_CYCLES = [1_209_252.43, 1_385_238.75, 1_207_965.73, 1_386_700.23, 1_208_856.12, 1_387_888.55, 1_208_692.07,
              1_388_231]  # lines 3, 6, ..., 24 (line 24 has no decimals)
OUT_RATE = [1_309_394_950.84, 1_309_992_765.55, 1_309_635_335.35, 1_309_908_168.53, 1_309_328_778.12,
            1_309_763_761.17, 1_309_241_849.00, 1_309_928_701.91]  # lines 4, 7, ..., 25


@needs_samples
def test_gene_concatenated_csv_is_two_passes_of_its_own():
    f = GENE / "out_nvroof_ncuroof_region-dgdxy-1.csv"
    assert count(f, r'^"\d+","85801",') == 24 and count(f, r'^"\d+","127605",') == 24 and count(f, r'^"ID"') == 1
    p = read_profile(f)
    assert len(p) == 16 and p["process"].str.startswith("85801 ").sum() == 8
    t = kernel_table([f])
    for name, ids, fp64 in ((IJ, [0, 2, 4, 6], IJ_FP64), (ADD, [1, 3, 5, 7], ADD_FP64)):
        k = row(t, name)
        time = sum(OUT_CYCLES[i] / OUT_RATE[i] for i in ids)
        dram = sum(OUT_DRAM[i] for i in ids)
        assert k["launches"] == 4 and k["dram_bytes"] == dram and k["flops_fp64"] == 4 * fp64
        assert k["time_s"] == pytest.approx(time) and k["flop_per_s"] == pytest.approx(4 * fp64 / time)
    # against the two CSVs: the instruction counts are the same numbers; the DRAM bytes are another run's
    # (MANIFEST.md calls this file their concatenation: line 2 has 690,960,320 where dram_ncuroof-time-0.csv
    # line 2 has 690,974,304), within 0.05 %
    pair = kernel_table([GENE / "dram_ncuroof-time-0.csv", GENE / "flops_ncuroof-time-0.csv"])
    for name in (IJ, ADD):
        assert row(t, name)["flops_fp64"] == row(pair, name)["flops_fp64"]
        assert row(t, name)["dram_bytes"] != row(pair, name)["dram_bytes"]
        assert row(t, name)["dram_bytes"] == pytest.approx(row(pair, name)["dram_bytes"], rel=5e-4)


# -------------------------------------------------------------------------- torchops (A100, ncu 2021 CSV)
@needs_samples
def test_torchops_csv_both_launches_every_derived_column():
    """nsight_virtual.csv: 5 lines before the header (line 6), 21 metrics per launch; launch 0 lines 7-27,
    launch 1 lines 28-48. test_ncu checks the SGEMM's fp32 FLOPs, time and L2 bytes."""
    f = SAMPLES / "torchops_a100_ncu2021_csv/nsight_virtual.csv"
    assert lines_of(f)[5].startswith('"ID",') and count(f, r'^"[01]","91941",') == 42
    p = read_profile(f)
    assert len(p) == 2 and set(p["process"]) == {"91941 python3.6@127.0.0.1"}  # line 7: pid, name, host
    assert p["sm__cycles_elapsed.avg"].tolist() == pytest.approx([7_556.52, 4_038.70])  # lines 15, 36
    t = kernel_table([f])
    s = row(t, "ampere_sgemm_32x32_sliced1x4_tn")
    assert s["dram_bytes"] == 512 and s["l1_bytes"] == 384  # lines 7, 11
    assert s["flops_fp64"] == 0 and s["flops_fp16"] == 0  # lines 18-20, 24-26: all 0
    assert s["flops"] == 2 * 65_536 + 6_144 + 8_192  # lines 21-23 (fp64, fp16, tensor: 0)
    assert s["ai_dram"] == pytest.approx((2 * 65_536 + 6_144 + 8_192) / 512)
    assert s["flop_per_s"] == pytest.approx((2 * 65_536 + 6_144 + 8_192) / 7_488e-9)  # line 10: nsecond
    assert s["sm_clock_hz"] == pytest.approx(1_009_150_443.18)  # line 16
    # the cycle count agrees with the duration the reader uses: 7,556.52 cycles / 1.009 GHz = 7.488 us
    assert 7_556.52 / 1_009_150_443.18 == pytest.approx(7_488e-9, rel=1e-3)
    k = row(t, "void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<float>")
    assert k["launches"] == 1 and k["time_s"] == pytest.approx(4_224e-9)  # line 31: nsecond
    assert (k["dram_bytes"], k["l1_bytes"], k["l2_bytes"]) == (256, 96, 142_208)  # lines 28, 32, 34
    assert k["flops_fp32"] == 2 * 0 + 12 + 4 and k["flops"] == 16  # lines 42-44
    assert k["flops_tensor"] == 0  # line 38: no tensor-pipe instruction
    assert k["ai_l2"] == pytest.approx(16 / 142_208) and k["dram_bytes_per_s"] == pytest.approx(256 / 4_224e-9)
    assert k["sm_clock_hz"] == pytest.approx(956_132_505.61)  # line 37


# ------------------------------------------------------------------------- superbench (B200, ncu 2025 CSV)
@needs_samples
def test_superbench_b200_one_launch_and_its_section_values():
    """cublaslt_ncu.log: 20 columns, every row of launch 0 (58 of them, lines 5-62); test_ncu checks the
    time, clock, CC, grid and block."""
    f = SAMPLES / "superbench_b200_ncu2025_csv/cublaslt_ncu.log"
    assert count(f, r'^"0","371693",') == 58 and count(f, r'^"[1-9]') == 0
    name = ("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_tnn_align4_1sm_bias_"
            "f16_relu_aux_scalemax")  # line 5
    p = read_profile(f)
    assert p["kernel"].tolist() == [name] and p["process"].tolist() == ["371693 cublaslt_gemm@127.0.0.1"]
    launch = p.iloc[0]
    assert launch["dram__cycles_elapsed.avg.per_second"] == pytest.approx(3_995_313_115.40)  # line 5: hz
    assert launch["gpc__cycles_elapsed.max"] == 508_757  # line 7: Elapsed Cycles
    assert launch["launch__grid_size"] == 288 == 9 * 32  # line 20; the grid (9, 32, 1)
    assert launch["launch__block_size"] == 384  # line 16
    assert launch["Launch Statistics/Registers Per Thread"] == 168  # line 21
    assert launch["Launch Statistics/Shared Memory Configuration Size"] == 233_472  # line 22: byte
    assert launch["Launch Statistics/Dynamic Shared Memory Per Block"] == 205_696  # line 24: byte/block
    assert launch["launch__sm_count"] == 152  # line 26: "# SMs", read as ncu's launch__sm_count
    assert launch["Occupancy/Achieved Occupancy"] == pytest.approx(15.53)  # line 46
    k = kernel_table([f]).iloc[0]
    assert k["kernel"] == name and k["launches"] == 1 and k["device"] == "0"
    for column in ("flops", "dram_bytes", "l2_bytes", "flop_per_s"):  # --set full without roofline counters
        assert math.isnan(k[column]), column


# ---------------------------------------------------------------------------------- ai4materials (A100)
@needs_samples
def test_ai4materials_text_both_launches():
    """metrics_713.txt: two kernels (headings lines 10, 29, each with an NVTX block); test_ncu checks
    gemmSN's time."""
    f = AI4M / "metrics_713.txt"
    lines = lines_of(f)
    assert count(f, r"^==PROF== Profiling ") == 2 and count(f, r", Context 1, Stream 7$") == 2
    p = read_profile(f)
    # the names as line 10 and line 29 write them, before their timestamps
    assert p["kernel"].tolist() == [lines[9].strip().split(", 2024-Jul-13 17:53:32")[0],
                                    lines[28].strip().split(", 2024-Jul-13 17:53:34")[0]]
    assert len(p["kernel"].iloc[0]) > 800  # lambdas and all
    assert p["gpu__time_duration.sum"].tolist() == pytest.approx([3.55e-6, 4.74e-6])  # lines 19, 38: usecond
    assert p["launch__registers_per_thread"].tolist() == [16, 32]  # lines 22, 41
    assert p["launch__shared_mem_per_block_static"].tolist() == pytest.approx([0, 6.14e3])  # 24, 43: Kbyte/block
    assert (p["grid"].tolist(), p["block"].tolist()) == (["1", "1"], ["128", "128"])  # lines 20-21, 39-40
    t = kernel_table([f])
    assert t["launches"].tolist() == [1, 1]
    assert t["time_s"].sum() == pytest.approx(3.55e-6 + 4.74e-6)
    assert row(t, "void at::native::elementwise_kernel<128, 2,")["time_s"] == pytest.approx(3.55e-6)
    assert t["flops"].isna().all() and t["dram_bytes"].isna().all()


@needs_samples
def test_ai4materials_paddle_csv_after_its_tensor_printout():
    """metrics_713_paddle_.csv: the header is line 108, after 105 lines of tensor printout and two ==PROF==
    lines; launch 0 lines 109-118, launch 1 lines 119-128."""
    f = AI4M / "metrics_713_paddle_.csv"
    lines = lines_of(f)
    assert lines[107].startswith('"ID","Process ID"') and count(f, r'^"[01]","93785",') == 20
    p = read_profile(f)
    assert p["kernel"].tolist() == [
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x10_nn_align4>"
        "(cutlass_80_tensorop_s1688gemm_64x64_16x10_nn_align4::Params)",  # line 109
        "void phi::funcs::VectorizedBroadcastKernel<phi::funcs::AddFunctor<float>, float, 2, 1, 4, 1>(common::"
        "Array<char const* restrict, 2>, common::Array<float*, 1>, common::Array<bool, 2>, unsigned int, common::"
        "Array<phi::kps::details::BroadcastConfig, 2>, int, int, int, phi::funcs::AddFunctor<float>)"]  # line 119
    assert set(p["process"]) == {"93785 python3.8@127.0.0.1"}
    assert p["gpu__time_duration.sum"].tolist() == pytest.approx([8_192e-9, 3_584e-9])  # lines 111, 121
    assert p["launch__registers_per_thread"].tolist() == [104, 24]  # lines 114, 124
    assert p["launch__shared_mem_per_block_dynamic"].tolist() == [81_920, 0]  # lines 115, 125
    assert (p["grid"].tolist(), p["block"].tolist()) == (["2", "2"], ["128", "64"])  # lines 112-113, 122-123
    t = kernel_table([f])
    assert row(t, "void cutlass::Kernel<")["time_s"] == pytest.approx(8_192e-9)
    assert row(t, "void phi::funcs::")["time_s"] == pytest.approx(3_584e-9)
    assert t["flops"].isna().all()


NSYS_ROW = re.compile(r"^\s+([\d.]+)\s+([\d,]+)\s+(\d+)\s+([\d,.]+)\s+([\d,.]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,.]+)"
                      r"\s\s(.+)$")


@needs_samples
def test_ai4materials_nsys_every_kernel_row():
    """torch_gcn_profile_nsys.txt: the cuda_gpu_kern_sum table, lines 70-88, split by hand here (Time (%),
    Total Time, Instances, Avg, Med, Min, Max, StdDev, Name); test_nsys checks the SGEMM row."""
    f = AI4M / "torch_gcn_profile_nsys.txt"
    lines = lines_of(f)
    assert lines[65] == "[6/8] Executing 'cuda_gpu_kern_sum' stats report"
    table = [NSYS_ROW.match(line) for line in lines[69:88]]
    assert all(table) and lines[88] == ""
    expected = [(m.group(9), int(m.group(3)), int(m.group(2).replace(",", ""))) for m in table]
    assert len(expected) == 19
    assert sum(n for _, n, _ in expected) == 69  # = cudaLaunchKernel's Num Calls (line 56)
    assert sum(ns for _, _, ns in expected) == 277_215
    t = kernel_table([f])
    got = list(zip(t["kernel"], t["launches"], t["time_s"]))
    assert [(name, n) for name, n, _ in got] == [(name, n) for name, n, _ in expected]
    assert [s for _, _, s in got] == pytest.approx([ns * 1e-9 for _, _, ns in expected])
    # lines 74, 79, 80: three kernels cut to the same 100 characters stay three rows (6, 3 and 3 launches)
    cut = "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl<at::native::…"
    same = t[t["kernel"] == cut]
    assert same["launches"].tolist() == [6, 3, 3]
    assert same["time_s"].tolist() == pytest.approx([17_857e-9, 10_111e-9, 9_344e-9])
    assert row(t, "void gemv2T_kernel_val<int, int, float, float, float,")["time_s"] == pytest.approx(3_263e-9)


# ------------------------------------------------------------------------------ heat_eq (CC 8.9 summary)
@needs_samples
def test_heat_eq_summary_every_kernel():
    """ncu_summary_1D.txt: --print-summary per-kernel, three headings (lines 300, 364, 428); the reader takes
    the Average column and the Invocations count; test_ncu checks heat_kernel_1d_sim's launches and time."""
    f = SAMPLES / "heat_eq_cc89_ncu2024_summary/ncu_summary_1D.txt"
    assert count(f, r", Device 0, CC 8\.9, Invocations \d+$") == 3
    # 14 + 25 + 250 invocations = the 289 launches ncu profiled (lines 2-290, IDs 0-288)
    assert count(f, r'^==PROF== Profiling "add_heat_kernel_1d"') == 14
    assert count(f, r'^==PROF== Profiling "heat_kernel_1d_color"') == 25
    assert count(f, r'^==PROF== Profiling "heat_kernel_1d_sim"') == 250
    p = read_profile(f)
    assert p["launches"].tolist() == [14, 25, 250]
    assert p["gpc__cycles_elapsed.max"].tolist() == pytest.approx([3_939.50, 4_181.84, 4_327.23])  # 307, 371, 435
    assert p["Launch Statistics/Registers Per Thread"].tolist() == [16, 16, 18]  # lines 339, 403, 467
    assert (p["grid"].tolist(), p["block"].tolist()) == (["(1, 1, 1)", "(2, 1, 1)", "(2, 1, 1)"],
                                                         ["(256, 1, 1)", "(512, 1, 1)", "(512, 1, 1)"])
    t = kernel_table([f])
    assert t["launches"].sum() == 289
    add, color = row(t, "add_heat_kernel_1d("), row(t, "heat_kernel_1d_color(")
    assert add["launches"] == 14 and add["time_s"] == pytest.approx(14 * 1.75e-6)  # line 310: Average, us
    assert color["launches"] == 25 and color["time_s"] == pytest.approx(25 * 1.86e-6)  # line 374
    assert add["sm_clock_hz"] == pytest.approx(2.25e9) and color["sm_clock_hz"] == pytest.approx(2.24e9)  # 306, 370
    assert row(t, "heat_kernel_1d_sim(")["sm_clock_hz"] == pytest.approx(2.25e9)  # line 434
    assert set(t["cc"]) == {"8.9"} and t["flops"].isna().all()


# ------------------------------------------------------------------------- microgpusim (GTX 1080, raw page)
@needs_samples
def test_microgpusim_raw_page_every_launch():
    """nsight_vectoradd_100_32_metrics_all.csv: header (line 1), units (line 2), launches 0-2 (lines 3-5),
    400 columns; values by column name. test_ncu checks the kernel's launches, time and DRAM total."""
    f = SAMPLES / "microgpusim_gtx1080_ncu2019_raw/nsight_vectoradd_100_32_metrics_all.csv"
    assert len(lines_of(f)) == 5
    read = [7_552, 3_264, 2_176]  # dram__read_bytes, lines 3-5 (byte)
    written = [384, 256, 256]  # dram__write_bytes
    # the sector counts say the same: dram__read_sectors 236, 102, 68 and dram__write_sectors 12, 8, 8 x 32 B
    assert [32 * s for s in (236, 102, 68)] == read and [32 * s for s in (12, 8, 8)] == written
    p = read_profile(f)
    assert p["dram__sectors_read.sum"].tolist() == [236, 102, 68]
    assert p["dram__sectors_write.sum"].tolist() == [12, 8, 8]
    assert p["smsp__inst_executed_sum"].tolist() == [344, 344, 344]  # inst
    assert p["gpu__time_duration.sum"].tolist() == pytest.approx([2_720e-9] * 3)  # nsecond
    t = kernel_table([f], per_launch=True)
    assert t["dram_bytes"].tolist() == [r + w for r, w in zip(read, written)]
    # ncu's own dram__bytes_per_sec column (byte/second): 2,917,647,058.82, 1,294,117,647.06, 894,117,647.06
    assert t["dram_bytes_per_s"].tolist() == pytest.approx([2_917_647_058.82, 1_294_117_647.06, 894_117_647.06])
    # gpc__frequency (hz), the only clock of the 2019 page
    assert t["sm_clock_hz"].tolist() == pytest.approx([2_122_518_382.35, 2_118_014_705.88, 2_132_444_852.94])
    (gpu,) = t.attrs["gpus"]
    # device__attribute_multiprocessor_count 20, _max_gpu_frequency_khz 1,759,000 (kHz), _total_memory
    # 8,504,934,400, compute capability 6.1 (major 6.00, minor 1.00)
    assert (gpu["sm_count"], gpu["max_sm_clock_hz"], gpu["memory_bytes"], gpu["cc"]) == (20, 1.759e9,
                                                                                        8_504_934_400, "6.1")
    k = kernel_table([f]).iloc[0]
    assert k["sm_clock_hz"] == pytest.approx((2_122_518_382.35 + 2_118_014_705.88 + 2_132_444_852.94) / 3)
    assert k["dram_bytes_per_s"] == pytest.approx((7_936 + 3_520 + 2_432) / (3 * 2_720e-9))


# ------------------------------------------------------------------------------------------- torch traces
def _kernels(name: str) -> tuple[list[dict], int]:
    """The trace's `cat: kernel` events, and the correlation id of its first runtime call (by ts)."""
    events = json.load(gzip.open(TRACES / name))["traceEvents"]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    first = min(launches, key=lambda e: e["ts"])["args"]["correlation"]
    launched = {e["args"].get("correlation") for e in launches}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    for k in kernels:  # launched before the trace began: no launch in it, a correlation id older than its first
        k["early"] = k["args"]["correlation"] not in launched and k["args"]["correlation"] < first
    return kernels, first


@needs_traces
def test_a100_trace_kernel_count_and_time_with_and_without_the_early_kernels():
    """a100_80gb_shapes_rank0.json.gz: 6,080 kernel events, 401,445 us in all; 705 of them (56,350 us) have
    no launch in the trace and correlation ids below its first runtime call's: left out unless include_early."""
    kernels, _ = _kernels("a100_80gb_shapes_rank0.json.gz")
    early = [k for k in kernels if k["early"]]
    assert len(kernels) == 6_080 and sum(k["dur"] for k in kernels) == 401_445
    assert len(early) == 705 and sum(k["dur"] for k in early) == 56_350
    t = kernel_table([TRACES / "a100_80gb_shapes_rank0.json.gz"])
    assert t["launches"].sum() == 6_080 - 705
    assert t["time_s"].sum() == pytest.approx((401_445 - 56_350) * 1e-6)
    (said,) = [w for w in t.attrs["warnings"] if "launched before the trace began" in w]
    assert "705 kernel(s) (56.35 ms, 14% of the kernel time)" in said  # 56,350 / 401,445 = 14.04 %
    everything = kernel_table([TRACES / "a100_80gb_shapes_rank0.json.gz"], include_early=True)
    assert everything["launches"].sum() == 6_080
    assert everything["time_s"].sum() == pytest.approx(401_445e-6)


@needs_traces
@pytest.mark.parametrize("name", ["a100_80gb_shapes_rank0.json.gz", "alexnet_a100_kernels.json.gz"])
def test_trace_kernels_per_name_counted_by_hand(name):
    """Per kernel name: the launches and summed dur of its events, the early ones under their own name
    (test_torch_trace checks alexnet's totals and the one Triton kernel)."""
    kernels, _ = _kernels(name)
    launches, dur = collections.Counter(), collections.Counter()
    for k in kernels:
        key = k["name"] + (" [launched before the trace began]" if k["early"] else "")
        launches[key] += 1
        dur[key] += k["dur"]
    t = kernel_table([TRACES / name], include_early=True)
    assert sorted(t["kernel"]) == sorted(launches)
    for r in t.itertuples():
        assert r.launches == launches[r.kernel], r.kernel
        assert r.time_s == pytest.approx(dur[r.kernel] * 1e-6), r.kernel


@needs_traces
def test_cupti_counter_trace_per_kernel_name_counted_by_hand():
    """cupti_counters_a100.json.gz: no kernel events; 77 cuda_profiler_range events, 16 names, each with the
    nine f/h/d add/fma/mul thread-instruction counters in its args. Per name: launches and the FLOPs of each
    precision (2 x fma + add + mul) summed here; test_torch_trace checks the launch and fp32 totals."""
    events = json.load(gzip.open(TRACES / "cupti_counters_a100.json.gz"))["traceEvents"]
    assert not [e for e in events if e.get("cat") == "kernel"]
    ranges = [e for e in events if e.get("cat") == "cuda_profiler_range"]
    expected: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in ranges:
        op = {name: e["args"][f"smsp__sass_thread_inst_executed_op_{name}_pred_on.sum"]
              for name in ("dfma", "dadd", "dmul", "ffma", "fadd", "fmul", "hfma", "hadd", "hmul")}
        sums = expected[e["name"]]
        sums["launches"] += 1
        sums["fp64"] += 2 * op["dfma"] + op["dadd"] + op["dmul"]
        sums["fp32"] += 2 * op["ffma"] + op["fadd"] + op["fmul"]
        sums["fp16"] += 2 * op["hfma"] + op["hadd"] + op["hmul"]
    assert len(ranges) == 77 and len(expected) == 16
    assert sum(s["fp64"] for s in expected.values()) == 0 and sum(s["fp16"] for s in expected.values()) > 0
    t = kernel_table([TRACES / "cupti_counters_a100.json.gz"])
    assert sorted(t["kernel"]) == sorted(expected)
    for r in t.itertuples():
        s = expected[r.kernel]
        assert (r.launches, r.flops_fp64, r.flops_fp32, r.flops_fp16) == (s["launches"], s["fp64"], s["fp32"],
                                                                          s["fp16"]), r.kernel
        assert r.flops == s["fp64"] + s["fp32"] + s["fp16"], r.kernel  # the trace counts no tensor instruction

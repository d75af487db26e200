"""analysis.ncu: every format, hand-read expected values, error paths.

Expected numbers were read off the files by hand (units converted by hand), never from the code.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from analysis.metrics import OUTPUT_COLUMNS
from analysis.ncu import kernel_table, main, read_profile
from ceilings import inputs
from common.errors import CeilingsError

DATA = Path(__file__).parent / "data" / "ncu"
SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "ncu-samples"
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/ncu-samples is absent")
SAXPY = "void saxpy<float>(int, float, float const*, float*)"


def row(table: pd.DataFrame, prefix: str) -> pd.Series:
    hits = table[table["kernel"].str.startswith(prefix)]
    assert len(hits) == 1, f"{prefix!r}: {list(table['kernel'])}"
    return hits.iloc[0]


# ------------------------------------------------------------------------------------ own fixtures
def test_text_old_heading_metrics_layout():
    t = kernel_table([DATA / "text_old_metrics.txt"])
    assert list(t.columns) == OUTPUT_COLUMNS
    s = row(t, "void saxpy")
    assert s["launches"] == 2
    assert s["dram_bytes"] == pytest.approx(8.39e6 + 419.43e3 + 8.40e6 + 1.05e6)
    assert s["time_s"] == pytest.approx(12.35e-6 + 12.50e-6)
    assert s["flops_fp32"] == pytest.approx(2 * 2 * 1_048_576)
    assert math.isnan(s["flops_fp64"]) and math.isnan(s["l2_bytes"]) and math.isnan(s["sm_clock_hz"])
    r = row(t, "reduce(")
    assert math.isnan(r["flops_fp32"])  # ffma was "(!) n/a": missing, not 0
    assert math.isnan(r["flops"]) and math.isnan(r["flop_per_s"])
    assert r["dram_bytes"] == pytest.approx(4104) and r["time_s"] == pytest.approx(3.2e-6)


def test_text_new_heading_sections_tensor_fp16():
    t = kernel_table([DATA / "text_new_sections.txt"], per_launch=True)
    g = row(t, "gemm_kernel")
    assert (g["grid"], g["block"], g["device"], g["cc"]) == ("(128, 1, 1)", "(256, 1, 1)", "0", "9.0")
    assert g["time_s"] == pytest.approx(19.97e-6)
    assert g["sm_clock_hz"] == pytest.approx(1.59e9)
    assert g["flops_fp16"] == pytest.approx(2 * 1000 + 10)
    # CC 9.0: one tensor instruction is 2048 or 4096 FLOPs (HMMA) or any HGMMA shape: unknown, not a guess
    assert math.isnan(g["flops_tensor"]) and math.isnan(g["flops"])
    assert g["dram_bytes"] == pytest.approx(67.11e6)
    c = row(t, "copy_kernel")
    assert c["time_s"] == pytest.approx(1.25e-3) and math.isnan(c["sm_clock_hz"])  # "(!) nan"


def test_summary_uses_average_and_invocations():
    t = kernel_table([DATA / "summary.txt"])
    s = row(t, "step(")
    assert s["launches"] == 10
    assert s["time_s"] == pytest.approx(10 * 2.00e-6)
    assert s["dram_bytes"] == pytest.approx(10 * 2.00e3)
    assert s["sm_clock_hz"] == pytest.approx(2.25e9)
    assert s["cc"] == "8.9"


def test_details_csv_12_columns_sectors_and_cycles():
    t = kernel_table([DATA / "details_12col.csv"], per_launch=True)
    assert list(t["dram_bytes"]) == pytest.approx([32 * 1500, 32 * 2500])
    assert list(t["time_s"]) == pytest.approx([1e-6, 1e-6])  # 1,400 cycles / 1.40 cycle/ns
    assert list(t["flops_fp64"]) == pytest.approx([250, 250])
    assert t["l2_bytes"].isna().all()  # "n/a"
    k = kernel_table([DATA / "details_12col.csv"]).iloc[0]
    assert k["flop_per_s"] == pytest.approx(500 / 2e-6)


def test_details_csv_20_columns_rules_and_short_rows():
    t = kernel_table([DATA / "details_20col.csv"], per_launch=True)
    g = t.iloc[0]
    assert (g["kernel"], g["grid"], g["block"], g["cc"]) == ("cutlass_gemm", "(64, 2, 1)", "(128, 1, 1)", "8.0")
    assert g["time_s"] == pytest.approx(406_240e-9)
    assert g["sm_clock_hz"] == pytest.approx(1.41e9)
    assert g["dram_bytes"] == pytest.approx(1_024_000)
    assert math.isnan(g["flops_tensor"])  # CC 8.0 HMMA: 2048 (.1688) or 4096 (.16816) FLOPs: unknown


def test_details_csv_quoted_fields_spanning_lines(tmp_path, capsys):
    """Rule descriptions over several lines (some of them starting with a quote) among application output:
    no row is lost or cut, and no line of a description becomes a launch."""
    t = kernel_table([DATA / "details_multiline.csv"], per_launch=True)
    assert list(t["time_s"]) == pytest.approx([12.50e-6, 10.00e-6])
    assert list(t["dram_bytes"]) == pytest.approx([3.20e6, 1_600.00e3])
    # Launch 1 alone, without application output: every line starts with a quote (read_csv reads it as is).
    lines = (DATA / "details_multiline.csv").read_text().splitlines()
    first = next(i for i, x in enumerate(lines) if x.startswith('"1",'))
    only_csv = tmp_path / "only_csv.csv"
    only_csv.write_text("\n".join([lines[1], *lines[first:-1]]) + "\n")
    t = kernel_table([only_csv], per_launch=True)
    assert list(t["time_s"]) == pytest.approx([10.00e-6])
    assert list(t["dram_bytes"]) == pytest.approx([1_600.00e3])
    # A quoted field left open at the end of the file is a truncated file, not a field to close.
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(lines[:4]) + "\n")
    line = _error_line(capsys, [str(cut)])
    assert str(cut) in line and "truncated" in line


def test_non_csv_line_found_wherever_it_falls_against_the_scan_steps(monkeypatch):
    """The scan for lines that are no CSV rows goes a step at a time: a line of application output is found
    with its newline the last byte of one step and its first byte the first of the next, at the end of the
    file too; blank lines and a final newline are no such line."""
    from analysis.readers import ncu_csv

    monkeypatch.setattr(ncu_csv, "SCAN_STEP", 8)
    for pad in range(17):  # every position of the line against steps of 8 bytes
        head = b'"ID","' + b"x" * pad + b'"\n'
        assert ncu_csv._only_csv_rows(head + b'"1","a"\n\n"2","b"\n', 0)
        assert not ncu_csv._only_csv_rows(head + b'app output\n"1","a"\n', 0)
        assert not ncu_csv._only_csv_rows(head + b'"1","a"\nx', 0)
        assert ncu_csv._only_csv_rows(b"app output\n" + head, len(b"app output\n"))  # before the header: not read


def test_read_profile_types_the_launch_columns_as_the_contract_says():
    """Every reader's frame holds META_COLUMNS typed as META_DTYPES (text may be objects, None where missing),
    so the frame of no launches, concatenated to one, leaves its types as they are."""
    from analysis.readers.contract import META_DTYPES, no_launches

    for f in [*sorted(DATA.iterdir()), *sorted((DATA.parent / "nsys").iterdir())]:
        p = read_profile(f)
        for col, dtype in META_DTYPES.items():
            assert str(p[col].dtype) == dtype or (dtype == "str" and p[col].dtype == object), (f.name, col)
        assert dict(pd.concat([no_launches(), p], ignore_index=True).dtypes) == dict(p.dtypes), f.name


def test_raw_csv_units_row_and_lists():
    p = read_profile(DATA / "raw.csv")
    assert p["inst_executed"].isna().all()  # "a; b; c" per-instance lists are not one value
    t = kernel_table([DATA / "raw.csv"])
    v = row(t, "vecAdd")
    assert v["launches"] == 2
    assert v["dram_bytes"] == pytest.approx(12.29e3 + 8.00e3)
    assert v["time_s"] == pytest.approx(4.72e-6)
    assert v["l2_bytes"] == pytest.approx(32 * (1024 + 512))
    assert v["flops_fp32"] == pytest.approx(400)
    assert v["cc"] == "6.1"


def test_nsys_csv_and_text_give_times_joined_by_prefix():
    t = kernel_table([DATA / "text_no_time.txt"], nsys=[DATA / "nsys_stats.txt"])
    k = t.iloc[0]
    assert k["time_s"] == pytest.approx(4_000e-9)  # nsys Avg x 1 ncu launch; name cut at 100 chars
    assert k["flop_per_s"] == pytest.approx(1e6 / 4e-6)
    t2 = kernel_table([DATA / "text_old_metrics.txt"], nsys=DATA / "nsys_kern_sum.csv")
    assert row(t2, "reduce(")["time_s"] == pytest.approx(3.2e-6)  # ncu time wins over nsys
    alone = kernel_table([DATA / "nsys_kern_sum.csv"])
    assert row(alone, SAXPY)["time_s"] == pytest.approx(2000e-9)
    assert row(alone, SAXPY)["launches"] == 4
    # copy(float*) ran (nsys saw it) but ncu did not profile it: a row with its time and no counters
    copy = row(t, "copy(float*)")
    assert copy["launches"] == 2 and copy["time_s"] == pytest.approx(4_000e-9) and math.isnan(copy["flops"])
    # the profile names no GPU: its rates cannot be held against a physical peak, and that is said first
    assert t.attrs["warnings"] == ["fp32 FLOP/s, DRAM B/s not checked against a physical peak: the profile does not "
                                   "say which GPU it ran on (collect device__attribute_display_name with ncu)",
                                   "1 kernel(s) only nsys saw (not profiled by ncu) are rows with times and no "
                                   "counters (first: 'copy(float*)')"]


def test_ncu_kernels_no_nsys_name_matches_are_warned_about():
    """nsys_kern_sum.csv names reduce and saxpy; text_no_time.txt's kernel is neither: no time, and a warning."""
    t = kernel_table([DATA / "text_no_time.txt"], nsys=DATA / "nsys_kern_sum.csv")
    profiled = t[t["flops"].notna()]
    assert len(profiled) == 1 and profiled["time_s"].isna().all()
    # the nsys kernels stay, as rows with times only: reduce 3000 ns / 2, saxpy 2000 ns / 4
    assert row(t, "reduce(")["time_s"] == pytest.approx(3000e-9) and row(t, SAXPY)["launches"] == 4
    assert t.attrs["warnings"][0].startswith("time_s: 1 kernel(s) without an ncu time match no nsys kernel name")


def test_runs_in_several_files_merge_by_name_and_order(tmp_path):
    a = tmp_path / "a.csv"
    b = tmp_path / "b.csv"
    lines = (DATA / "details_12col.csv").read_text().splitlines()
    header = lines[3]
    a.write_text("\n".join([header] + [x for x in lines[4:] if "dram__" in x]) + "\n")
    b.write_text("\n".join([header] + [x for x in lines[4:] if "dram__" not in x]) + "\n")
    merged = kernel_table([a, b], per_launch=True)
    assert list(merged["dram_bytes"]) == pytest.approx([48_000, 80_000])
    assert list(merged["flops_fp64"]) == pytest.approx([250, 250])


def test_kernel_total_is_what_its_launches_have_and_no_intensity_across_launches(tmp_path, capsys):
    """The DRAM run saw launch 0 only: the kernel's DRAM total is launch 0's (the same in every view), its DRAM
    rate over launch 0's time; its FLOPs are on both launches, so no intensity pairs them and no coverage."""
    a, b = tmp_path / "dram.csv", tmp_path / "rest.csv"
    lines = (DATA / "details_12col.csv").read_text().splitlines()
    header = lines[3]
    a.write_text("\n".join([header] + [x for x in lines[4:] if "dram__" in x and x.startswith('"0"')]) + "\n")
    b.write_text("\n".join([header] + [x for x in lines[4:] if "dram__" not in x]) + "\n")
    assert list(kernel_table([a, b], per_launch=True)["dram_bytes"].fillna(-1)) == [32 * (1_000 + 500), -1]
    k = kernel_table([a, b]).iloc[0]
    assert k["launches"] == 2 and k["dram_bytes"] == 32 * (1_000 + 500)
    assert math.isnan(k["ai_dram"]) and math.isnan(k["coverage"])
    assert k["dram_bytes_per_s"] == pytest.approx(32 * (1_000 + 500) / 1e-6)
    # each launch: 1,400 cycles at 1.40 cycle/ns = 1 us; 2 x 100 dfma + 50 dadd + 0 dmul = 250 FLOPs
    assert k["time_s"] == pytest.approx(2e-6) and k["flops_fp64"] == pytest.approx(500)
    assert k["flop_per_s"] == pytest.approx(500 / 2e-6)
    assert main([str(a), str(b), "--csv", str(tmp_path / "out.csv"), "-v"]) == 0
    warned = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    # rates are judged per launch: launch 0's DRAM bytes are a rate too, left unchecked for want of the GPU
    assert warned == ["warning: fp64 FLOP/s, DRAM B/s not checked against a physical peak: the profile does not say "
                      "which GPU it ran on (collect device__attribute_display_name with ncu)",
                      f"warning: flops and bytes are known on different launches of 1 row(s) (first: {k['kernel']!r}), "
                      "or FLOPs on launches without a time: their totals are kept, their coverage and intensities "
                      "are not given (no set of launches holds both), so the roofline cannot place them; "
                      "--per-launch shows each launch"]


def _raw_csv(path: Path, rows: list[list[str]]) -> Path:
    path.write_text("\n".join(",".join(f'"{cell}"' for cell in r) for r in rows) + "\n")
    return path


def test_flops_missing_when_a_precision_in_the_input_is_missing(tmp_path):
    ops = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("ffma", "fadd", "fmul", "dfma", "dadd",
                                                                            "dmul")]
    f = _raw_csv(tmp_path / "raw.csv", [["ID", "Kernel Name", "gpu__time_duration.sum", *ops],
                                        ["", "", "nsecond", *["inst"] * 6],
                                        ["0", "k", "1000", "n/a", "0", "0", "0", "0", "0"],
                                        ["1", "k", "1000", "10", "20", "30", "1", "2", "3"]])
    t = kernel_table([f], per_launch=True)
    assert math.isnan(t["flops"][0]) and math.isnan(t["flops_fp32"][0]) and t["flops_fp64"][0] == 0
    assert t["flops"][1] == 2 * 10 + 20 + 30 + 2 * 1 + 2 + 3  # no fp16 counters in the input: not needed
    # the kernel: launch 1's FLOPs, over launch 1's time (half the kernel's)
    k = kernel_table([f]).iloc[0]
    assert k["flops"] == t["flops"][1] and k["coverage"] == 0.5 and k["flops_fp64"] == 2 * 1 + 2 + 3
    assert k["flop_per_s"] == pytest.approx(t["flops"][1] / 1e-6)


def test_raw_csv_without_its_units_row_names_file_and_line(tmp_path, capsys):
    lines = (DATA / "raw.csv").read_text().splitlines()
    f = tmp_path / "nounits.csv"
    f.write_text("\n".join([lines[0], *lines[2:]]) + "\n")
    assert f"{f}:2: ncu raw CSV without its units row" in _error_line(capsys, [str(f)])
    f.write_text("\n".join(["==PROF== Connected to process 55 (/tmp/vadd)", lines[0], *lines[2:]]) + "\n")
    assert f"{f}:3: ncu raw CSV without its units row" in _error_line(capsys, [str(f)])


FAILED_TEXT = """==PROF== Connected to process 1 (/tmp/app)
==ERROR== LaunchFailed
==ERROR== An error occurred while trying to profile.
[1] app@127.0.0.1
  k(float *) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 8.9
    Section: GPU Speed Of Light Throughput
    ----------------------- ------------ ------------
    Metric Name              Metric Unit Metric Value
    ----------------------- ------------ ------------
    Duration                     nsecond      (!) nan
    SM Frequency            cycle/second      (!) n/a
    ----------------------- ------------ ------------
"""


def test_profile_without_any_metric_value_is_an_error(tmp_path, capsys):
    f = tmp_path / "failed.txt"
    f.write_text(FAILED_TEXT)
    line = _error_line(capsys, [str(f)])
    assert f"{f}: every metric of every launch is missing" in line
    assert line.endswith("its first error, at line 2: ==ERROR== LaunchFailed")
    f.write_text(FAILED_TEXT.replace("==ERROR==", "==PROF=="))
    line = _error_line(capsys, [str(f)])
    assert f"{f}: every metric of every launch is missing" in line and "error, at line" not in line


def test_cli_csv_json_and_readback(tmp_path, capsys):
    out_csv, out_json = tmp_path / "k.csv", tmp_path / "k.json"
    assert main([str(DATA / "text_old_metrics.txt"), "--csv", str(out_csv), "--json", str(out_json)]) == 0
    header = out_csv.read_text().splitlines()[0]
    assert header == ",".join(OUTPUT_COLUMNS)
    records = json.loads(out_json.read_text())
    reduce = next(r for r in records if r["kernel"].startswith("reduce"))
    assert reduce["flops_fp32"] is None and reduce["flops"] is None
    back = kernel_table([out_csv])
    s = row(back, "void saxpy")
    assert s["launches"] == 2 and s["dram_bytes"] == pytest.approx(8.39e6 + 419.43e3 + 8.40e6 + 1.05e6)
    assert main([str(DATA / "summary.txt")]) == 0
    printed = capsys.readouterr().out
    assert "time ms" in printed and "step(float *, int)" in printed


# --------------------------------------------------------------------------------------- errors
def _error_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize("content,needle", [
    (b"", "empty"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00binary", "binary"),
    (b"hello world\nthis is a README\n", "not Nsight"),
    (b"==PROF== Connected to process 1 (/bin/x)\n==ERROR== LaunchFailed\n==PROF== Disconnected\n", "without any"),
])
def test_bad_inputs_exit_2_with_one_line(tmp_path, capsys, content, needle):
    f = tmp_path / "in.txt"
    f.write_bytes(content)
    line = _error_line(capsys, [str(f)])
    assert str(f) in line and needle in line


def test_negative_top_is_a_usage_error(capsys):
    # pandas head(-1) would print all rows but the last and call it "top -1"
    line = _error_line(capsys, [str(DATA / "summary.txt"), "--top", "-1"])
    assert line.startswith("python -m analysis.ncu: error:") and "--top -1" in line
    assert capsys.readouterr().out == ""


def test_roofs_file_given_as_profile_says_to_pass_it_with_roofs(tmp_path, capsys):
    roofs = tmp_path / "h100.json"
    roofs.write_text(json.dumps({"schema_version": 1, "device": {"name": "X"}, "ceilings": [], "sweeps": []}))
    line = _error_line(capsys, [str(roofs)])
    assert f"{roofs} is a roofs file (ceilings.measure output); pass it with --roofs" in line
    other = tmp_path / "other.json"  # JSON that is not a roofs document stays "not profiler output"
    other.write_text(json.dumps({"ceilings": []}))
    assert "not Nsight Compute" in _error_line(capsys, [str(other)])


def test_truncated_mid_table_names_file_and_line(tmp_path, capsys):
    text = (DATA / "text_old_metrics.txt").read_text().splitlines()
    cut = next(i for i, x in enumerate(text) if "gpu__time_duration" in x)
    f = tmp_path / "cut.txt"
    f.write_text("\n".join(text[:cut + 1]) + "\n")
    line = _error_line(capsys, [str(f)])
    assert f"{f}:" in line and "inside the metrics table" in line


def test_ncu_rep_without_ncu_report_says_how_to_convert(tmp_path, capsys, monkeypatch):
    from analysis.readers import ncu_rep

    monkeypatch.setattr(ncu_rep, "_import_ncu_report", lambda: None)
    f = tmp_path / "r.ncu-rep"
    f.write_bytes(b"NVR\0\x02\x00\x00\x00junk")
    line = _error_line(capsys, [str(f)])
    assert f"ncu --import {f} --csv --page raw" in line


def test_ncu_rep_through_ncu_report_module(tmp_path, monkeypatch):
    from analysis.readers import ncu_rep

    class Metric:
        def __init__(self, v, u):
            self.v, self.u = v, u

        def as_double(self):
            return self.v

        def unit(self):
            return self.u

    class Action:
        values: ClassVar[dict] = {"dram__bytes.sum": Metric(2.0, "Mbyte"),
                                  "gpu__time_duration.sum": Metric(5.0, "usecond"),
                  "device__attribute_compute_capability_major": Metric(8, ""),
                  "device__attribute_compute_capability_minor": Metric(0, "")}

        def name(self):
            return "k"

        def metric_names(self):
            return list(self.values)

        def metric_by_name(self, n):
            return self.values[n]

    class Range:
        def num_actions(self):
            return 1

        def action_by_idx(self, i):
            return Action()

    class Context:
        def num_ranges(self):
            return 1

        def range_by_idx(self, i):
            return Range()

    class Module:
        @staticmethod
        def load_report(path):
            return Context()

    monkeypatch.setattr(ncu_rep, "_import_ncu_report", lambda: Module)
    f = tmp_path / "r.ncu-rep"
    f.write_bytes(b"NVR\0rest")
    t = kernel_table([f], per_launch=True).iloc[0]
    assert t["dram_bytes"] == pytest.approx(2e6) and t["time_s"] == pytest.approx(5e-6) and t["cc"] == "8.0"


# -------------------------------------------------------------------------------- real samples
FAILED_SAMPLE = "dd2360_cc89_ncu2023.2_failed/ncu_report.txt"  # the launch failed: every value "(!) nan"


@needs_samples
@pytest.mark.parametrize("name", sorted(
    str(p.relative_to(SAMPLES)) for p in SAMPLES.rglob("*") if p.is_file() and p.suffix != ".md"
    and not p.name.endswith(".ncu-rep") and str(p.relative_to(SAMPLES)) != FAILED_SAMPLE)
    if SAMPLES.is_dir() else [])
def test_every_sample_parses(name):
    table = kernel_table([SAMPLES / name])
    assert len(table) > 0 and table["kernel"].str.len().min() > 0


@needs_samples
def test_sample_gene_csv_dram_and_cycles():
    t = kernel_table([SAMPLES / "gene_v100_ncu2020.1_csv/dram_ncuroof-time-0.csv"], per_launch=True)
    assert len(t) == 8
    first = t.iloc[0]
    assert first["kernel"].startswith("ij_deriv_kernel(int, int, int, thrust::complex<double> const*")
    assert first["dram_bytes"] == pytest.approx(690_974_304)
    assert first["time_s"] == pytest.approx(1_209_826.20 / 1_309_471_763.30)


@needs_samples
def test_sample_gene_dram_and_flops_runs_merge():
    t = kernel_table([SAMPLES / "gene_v100_ncu2020.1_csv/dram_ncuroof-time-0.csv",
                      SAMPLES / "gene_v100_ncu2020.1_csv/flops_ncuroof-time-0.csv"])
    k = row(t, "ij_deriv_kernel")
    assert k["launches"] == 4
    assert k["flops_fp64"] == pytest.approx(4 * (2 * 137_625_600 + 0 + 55_050_240))
    assert k["dram_bytes"] == pytest.approx(690_974_304 + 690_909_440 + 690_954_112 + 690_998_592)
    concatenated = kernel_table([SAMPLES / "gene_v100_ncu2020.1_csv/out_nvroof_ncuroof_region-dgdxy-1.csv"])
    c = row(concatenated, "add_i_col_times_ij_block_kernel")
    assert c["flops_fp64"] == pytest.approx(4 * (2 * 27_525_120 + 27_525_120 + 27_525_120))


@needs_samples
def test_sample_einnet_text():
    t = kernel_table([SAMPLES / "einnet_a100_ncu2020.1_text/g2bmm.origin.profile"])
    k = row(t, "infini::sg2bmm")
    assert k["launches"] == 1  # two runs of the same launch, merged
    assert k["flops_fp32"] == pytest.approx(2 * 5_122_560_000)
    assert k["dram_bytes"] == pytest.approx(20.96e6 + 311.37e6)
    assert k["time_s"] == pytest.approx(13.26e-3)
    assert k["sm_clock_hz"] == pytest.approx(764.14e6)
    # the old heading has no launch dimensions; the Launch Statistics rows do (Block Size 667, Grid Size 2,000)
    launch = read_profile(SAMPLES / "einnet_a100_ncu2020.1_text/g2bmm.origin.profile").iloc[0]
    assert (launch["grid"], launch["block"]) == ("2000", "667")
    p = read_profile(SAMPLES / "einnet_a100_ncu2020.1_text/conv5x5.origin.pro")
    assert len(p) == 10
    assert p["dram__bytes_read.sum"].iloc[0] == pytest.approx(32.13e3)  # Kbyte row
    assert p["dram__bytes_read.sum"].iloc[1] == pytest.approx(8.47e6)  # Mbyte row


@needs_samples
def test_sample_torchops_superbench_paddle_csv():
    t = kernel_table([SAMPLES / "torchops_a100_ncu2021_csv/nsight_virtual.csv"])
    s = row(t, "ampere_sgemm_32x32_sliced1x4_tn")
    assert s["flops_fp32"] == pytest.approx(2 * 65_536 + 6_144 + 8_192)
    assert s["time_s"] == pytest.approx(7_488e-9) and s["l2_bytes"] == pytest.approx(233_856)
    assert s["flops_tensor"] == 0 and math.isnan(s["flops_fp16"]) is False
    b = kernel_table([SAMPLES / "superbench_b200_ncu2025_csv/cublaslt_ncu.log"], per_launch=True).iloc[0]
    assert b["time_s"] == pytest.approx(406_240e-9) and b["sm_clock_hz"] == pytest.approx(1_239_496_049.13)
    assert (b["cc"], b["grid"], b["block"]) == ("10.0", "(9, 32, 1)", "(384, 1, 1)")
    p = kernel_table([SAMPLES / "ai4materials_a100_ncu2020.2/metrics_713_paddle_.csv"], per_launch=True)
    assert len(p) == 2 and p.iloc[0]["kernel"].startswith("void cutlass::Kernel<cutlass_80_tensorop")


@needs_samples
def test_sample_summary_failed_nvtx_raw_nsys(capsys):
    h = kernel_table([SAMPLES / "heat_eq_cc89_ncu2024_summary/ncu_summary_1D.txt"])
    sim = row(h, "heat_kernel_1d_sim")
    assert sim["launches"] == 250 and sim["time_s"] == pytest.approx(250 * 1.92e-6)
    failed = _error_line(capsys, [str(SAMPLES / FAILED_SAMPLE)])  # line 7 of the file is its first ==ERROR==
    assert f"{SAMPLES / FAILED_SAMPLE}: every metric of every launch is missing" in failed
    assert failed.endswith("line 7: ==ERROR== LaunchFailed")
    nvtx = kernel_table([SAMPLES / "ai4materials_a100_ncu2020.2/metrics_713.txt"])
    assert row(nvtx, "void gemmSN_TN_kernel_64addr")["time_s"] == pytest.approx(4.74e-6)
    raw = kernel_table([SAMPLES / "microgpusim_gtx1080_ncu2019_raw/nsight_vectoradd_100_32_metrics_all.csv"])
    v = row(raw, "vecAdd")
    assert v["launches"] == 3 and v["time_s"] == pytest.approx(3 * 2_720e-9)
    assert v["dram_bytes"] == pytest.approx(7_552 + 384 + 3_264 + 256 + 2_176 + 256)
    nsys = kernel_table([SAMPLES / "ai4materials_a100_ncu2020.2/torch_gcn_profile_nsys.txt"])
    g = row(nsys, "ampere_sgemm_64x32_sliced1x4_tn")
    assert g["launches"] == 3 and g["time_s"] == pytest.approx(42_720e-9)


def test_a_gzipped_ncu_rep_reaches_ncu_report_decompressed(tmp_path, monkeypatch):
    from analysis.readers import ncu_rep

    seen = []

    class Module:
        @staticmethod
        def load_report(path):
            seen.append(Path(path).read_bytes())
            raise RuntimeError("stop here")

    monkeypatch.setattr(ncu_rep, "_import_ncu_report", lambda: Module)
    f = tmp_path / "r.ncu-rep"
    f.write_bytes(gzip.compress(b"NVR\0rest"))
    with pytest.raises(CeilingsError, match="ncu_report could not read it"):
        read_profile(f)
    assert seen == [b"NVR\0rest"]


@needs_samples
def test_sample_ncu_rep_without_module(capsys, monkeypatch):
    from analysis.readers import ncu_rep

    monkeypatch.setattr(ncu_rep, "_import_ncu_report", lambda: None)
    f = SAMPLES / "gene_v100_ncu2020.1_csv/dram_ncuroof-time-0.ncu-rep"
    line = _error_line(capsys, [str(f)])
    assert "ncu --import" in line


@pytest.mark.parametrize("preamble, eol", [
    ("", "\n"),
    ("==PROF== Connected to process 1\n\n==PROF== Profiling \"k\": 0%....\n\napp output\n", "\n"),  # quotes
    ("==PROF== Connected to process 1\n\n", "\r\n"),
])
def test_details_csv_after_any_preamble_and_line_ending(tmp_path, preamble, eol):
    """read_csv reads a details CSV straight from the file, skipping the lines before its header: the same
    values as from memory whatever precedes the header and however lines end."""
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
    rows = [f'"{i}","1","app","h","k(int)","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","gpu__time_duration.sum","usecond","{t}"' for i, t in ((0, "2.50"),
                                                                                                  (1, "1,000.00"))]
    f = tmp_path / "p.csv"
    f.write_bytes("\n".join([*preamble.splitlines(), header, *rows, ""]).replace("\n", eol).encode()
                  if preamble else (eol.join([header, *rows]) + eol).encode())
    df = read_profile(f)
    assert df["kernel"].tolist() == ["k(int)", "k(int)"]
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([2.5e-6, 1e-3])  # usecond, thousands separator


def test_an_unreadable_nsys_csv_row_is_named_by_its_line(tmp_path):
    f = tmp_path / "kern_sum.csv"
    f.write_text('Generating report\n\n'
                 '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)",'
                 '"StdDev (ns)","Name"\n'
                 '"60.0","600","2","300","300","200","400","10","kernA"\n'
                 '"40.0","400","x","","","","","","kernB"\n')  # line 5: no instance count
    with pytest.raises(CeilingsError, match=rf"^{re.escape(str(f))}:5: unreadable row in the nsys kernel summary"):
        read_profile(f)


def _same_kernels(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return a.drop(columns=["id"], errors="ignore").equals(b.drop(columns=["id"], errors="ignore"))


@pytest.mark.parametrize("name, make", [
    ("progress.csv", lambda csv: b"epoch [==  ]\repoch [====]\r\n" + csv),  # lone CRs before the header
    ("crcrlf.csv", lambda csv: b"==PROF== Connected to process 1\r\r\n" + csv),
    ("bom.csv", lambda csv: b"\xef\xbb\xbf" + csv),  # Windows Out-File -Encoding utf8
    ("profile.csv.gz", lambda csv: csv),  # a plain-text file whose name looks compressed
])
def test_details_csv_read_the_same_whatever_surrounds_it(tmp_path, name, make):
    plain = read_profile(DATA / "details_12col.csv")
    f = tmp_path / name
    f.write_bytes(make((DATA / "details_12col.csv").read_bytes()))
    assert _same_kernels(read_profile(f), plain)


DETAILS_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
                  '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')
BIG_LAUNCHES = 600  # rows of ~150 bytes: past HEAD_BYTES, the part of a file read before a reader asks for more


def _details_row(i: int) -> str:
    """Launch i of a details CSV: one time metric, (i + 1) microseconds."""
    return (f'"{i}","1","app","h","k{i % 3}(int)","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","gpu__time_duration.sum","usecond","{i + 1}.00"')


def _pad(before: int) -> str:
    """Lines of application output, `before` bytes in all."""
    return "".join(f"app output {i:06d}\n" for i in range(before // 18)).ljust(before, "x")[:before - 1] + "\n"


@pytest.mark.parametrize("name, make", [
    ("plain", lambda rows: "\n".join([DETAILS_HEADER, *rows]) + "\n"),
    # a line read_csv would refuse (more fields than the header), were it handed the file
    ("output among the rows past the head", lambda rows: "\n".join([DETAILS_HEADER, *rows[:-9], "app:" + "," * 20,
                                                                    *rows[-9:]]) + "\n"),
    ("a field over two lines past the head", lambda rows: "\n".join([DETAILS_HEADER, *rows[:-1],
                                                                     rows[-1].replace('"h"', '"h\nost"')]) + "\n"),
    ("header past the head", lambda rows: _pad(70_000) + "\n".join([DETAILS_HEADER, *rows]) + "\n"),
    # the header's line cut at HEAD_BYTES before "Metric Name": a raw page's header, were it taken as a line
    ("header across the head's end", lambda rows: _pad(65_536 - 100) + "\n".join([DETAILS_HEADER, *rows]) + "\n"),
    ("CRLF past the head", lambda rows: "\n".join([DETAILS_HEADER, *rows[:-9]]) + "\r\n".join(["", *rows[-9:]])
     + "\r\n"),
    ("CRLF", lambda rows: "\r\n".join([DETAILS_HEADER, *rows]) + "\r\n"),
    ("progress past the head", lambda rows: "\n".join([DETAILS_HEADER, *rows[:-9], "app: 50%\r100%",
                                                       *rows[-9:]]) + "\n"),  # a lone CR
    ("BOM", lambda rows: "\ufeff" + "\n".join([DETAILS_HEADER, *rows]) + "\n"),
    ("CRLF, output before the header and among the rows", lambda rows: (_pad(70_000) + "\n".join(
        [DETAILS_HEADER, *rows[:-9], "app:" + "," * 20, *rows[-9:]]) + "\n").replace("\n", "\r\n")),
    ("BOM, output among the rows", lambda rows: "\ufeff" + "\n".join([DETAILS_HEADER, *rows[:-9], "app:" + "," * 20,
                                                                     *rows[-9:]]) + "\n"),
    # quotes before the header: read_csv's idea of the lines to skip is not ours (the content is read instead)
    ('==PROF== Profiling "k" lines before the header', lambda rows: "".join(
        f'==PROF== Profiling "k{i}": 0%....50%....100%\n' for i in range(1_600)) + "\n".join([DETAILS_HEADER, *rows])
     + "\n"),
])
def test_a_details_csv_past_the_head_reads_every_launch(tmp_path, monkeypatch, name, make):
    """A details CSV larger than the head read first: its header found wherever it lies (even across the head's
    end), every launch read once with its own time whatever follows the head (application output, a field over
    two lines, CRs), as written in the file. The file is scanned in steps of 4 kB here (several steps, over
    threads), not 4 MB."""
    from analysis.readers import ncu_csv
    from analysis.readers.contract import HEAD_BYTES

    monkeypatch.setattr(ncu_csv, "SCAN_STEP", 4096)

    f = tmp_path / "big.csv"
    f.write_bytes(make([_details_row(i) for i in range(BIG_LAUNCHES)]).encode())
    assert f.stat().st_size > HEAD_BYTES
    df = read_profile(f)
    assert df.attrs["format"] == "ncu --csv (details page)"
    assert df["id"].tolist() == list(range(BIG_LAUNCHES))
    assert df["kernel"].tolist() == [f"k{i % 3}(int)" for i in range(BIG_LAUNCHES)]
    assert df["gpu__time_duration.sum"].tolist() == pytest.approx([(i + 1) * 1e-6 for i in range(BIG_LAUNCHES)])


def test_a_details_csv_read_csv_can_read_as_written_is_never_read_whole_into_memory(tmp_path, monkeypatch):
    """Only its head is read into memory (the rest is scanned from the file, then read by read_csv): a 100 MB CSV is
    not also held as 100 MB of bytes. With application output among its rows it is (csv_records drops it)."""
    from analysis.readers import launches

    whole = []
    monkeypatch.setattr(launches, "read_bytes", lambda p, what, limit=None: whole.append(limit is None) or
                        inputs.read_bytes(p, what, limit))
    f = tmp_path / "big.csv"
    rows = [_details_row(i) for i in range(BIG_LAUNCHES)]
    f.write_text("\n".join([DETAILS_HEADER, *rows]) + "\n")
    assert len(read_profile(f)) == BIG_LAUNCHES and whole == [False]
    f.write_text("\n".join([DETAILS_HEADER, *rows[:-1], "app: done", rows[-1]]) + "\n")
    whole.clear()
    assert len(read_profile(f)) == BIG_LAUNCHES and whole == [False, True]


def test_a_file_whose_head_only_is_blank_is_read_not_called_empty(tmp_path):
    """Whitespace filling the head and a profile after it: not an empty file."""
    f = tmp_path / "late.csv"
    f.write_text(" " * 70_000 + "\n" + "\n".join([DETAILS_HEADER, _details_row(0)]) + "\n")
    assert read_profile(f)["gpu__time_duration.sum"].tolist() == pytest.approx([1e-6])
    f.write_text(" \n" * 40_000)
    with pytest.raises(CeilingsError, match="empty file"):
        read_profile(f)


def test_a_parse_error_past_a_crlf_at_the_heads_end_names_the_files_line(tmp_path, capsys):
    """A CRLF whose CR is the head's last byte: the head is not the content's first bytes (CRLF is made LF), so
    the file is read whole, and a row read_csv refuses is named by its line in the file."""
    from analysis.readers.contract import HEAD_BYTES

    pad = _pad(HEAD_BYTES)[:-1] + "\r\n"  # its CR the head's last byte, its LF the next
    rows = [_details_row(i) for i in range(5)]
    f = tmp_path / "crlf_at_the_end.csv"
    f.write_text(pad + "\n".join([DETAILS_HEADER, *rows[:3], rows[3] + ',"one too many"', rows[4]]) + "\n")
    bad_line = pad.count("\n") + 1 + 4  # the header, then three rows
    assert f"{f}:{bad_line}: unreadable ncu CSV" in _error_line(capsys, [str(f)])


def test_a_kernel_table_csv_after_a_head_of_blanks_is_read(tmp_path):
    """This tool's own CSV is recognised by its header, its first line that is not blank: even one that begins in
    the head's last bytes, or past it."""
    from analysis.readers.contract import HEAD_BYTES

    table = "kernel,launches,time_s,flops_fp64,flops_fp32,flops_fp16\nk,1,2e-06,0,0,0\n"
    for blanks in (HEAD_BYTES - 10, HEAD_BYTES + 10):
        f = tmp_path / f"own_{blanks}.csv"
        f.write_text(" " * (blanks - 1) + "\n" + table)
        df = read_profile(f)
        assert df.attrs["format"] == "ceilings kernel table (CSV)" and df["time_s"].tolist() == [2e-6]


def test_a_pipe_is_refused_not_waited_on(tmp_path):
    """A FIFO nobody writes would block the read forever: only regular files are read."""
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(CeilingsError, match=r"pipe.csv: a pipe \(FIFO\), not a regular file"):
        read_profile(fifo)


def test_raw_csv_with_a_trailing_comma_on_every_line(tmp_path):
    f = tmp_path / "raw.csv"
    f.write_text("".join(line + ",\n" for line in (DATA / "raw.csv").read_text().splitlines()))
    assert _same_kernels(read_profile(f), read_profile(DATA / "raw.csv"))


NSYS_HEADER = ('"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)",'
               '"StdDev (ns)","Name"\n')


@pytest.mark.parametrize("rows, line", [
    ('"60.0","600","2","300","300","200","400","10","kernA"\n40.0,4000,2\n', 3),  # cut short
    ('"60.0","600","0","","","","","","kernA"\n', 2),  # no instances, no average
    ('"60.0","600","2","300","300","200","400","10","kern\nA"\n"40.0","400","x","","","","","","kernB"\n', 4),
])
def test_bad_nsys_csv_rows_are_one_line_errors_naming_their_line(tmp_path, rows, line):
    f = tmp_path / "kern_sum.csv"
    f.write_text(NSYS_HEADER + rows)
    with pytest.raises(CeilingsError, match=rf"^{re.escape(str(f))}:{line}: unreadable row in the nsys"):
        read_profile(f)


def test_tensor_instructions_without_a_compute_capability_are_warned_about(tmp_path):
    """A details CSV without a CC column: 1000 tensor-pipe instructions, no rule to turn them into FLOPs."""
    header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
              '"Metric Name","Metric Unit","Metric Value"\n')
    rows = "".join(f'"0","1","app","h","gemm_tc","1","7","Command line profiler metrics","{m}","{u}","{v}"\n'
                   for m, u, v in (("sm__inst_executed_pipe_tensor.sum", "inst", "1,000"),
                                   ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "0"),
                                   ("gpu__time_duration.sum", "usecond", "10.0")))
    f = tmp_path / "tc.csv"
    f.write_text(header + rows)
    t = kernel_table([f])
    assert math.isnan(t.iloc[0]["flops_tensor"]) and math.isnan(t.iloc[0]["flops"])
    assert any(w.startswith("flops_tensor: missing for 1 launch(es) with tensor instructions (CC unknown)")
               for w in t.attrs["warnings"])


def test_rows_longer_than_the_header_are_a_one_line_error(tmp_path):
    """Every data row one field longer than the header: read_csv would drop a cell per row and warn."""
    lines = (DATA / "details_12col.csv").read_text().splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith('"ID"'))
    f = tmp_path / "long.csv"
    f.write_text("\n".join(line + ',"x"' if n > header else line for n, line in enumerate(lines)) + "\n")
    with pytest.raises(CeilingsError, match=rf"^{re.escape(str(f))}: unreadable ncu CSV"):
        read_profile(f)


BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum"
_COLUMNS = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Section Name",
            "Metric Name", "Metric Unit", "Metric Value"]
_ROWS = [("35", "dram__bytes.sum", "Mbyte", "1.50"), ("35", "gpu__time_duration.sum", "usecond", "10.00"),
         ("35", BANK_CONFLICTS, "", "-159"), ("36", "dram__bytes.sum", "Kbyte", "-3.00"),
         ("36", "gpu__time_duration.sum", "usecond", "20.00"), ("36", BANK_CONFLICTS, "", "-1,234")]
# an ncu details CSV (lines 3-8 the rows above) after a ==PROF== line, as ncu --csv writes it
NEGATIVE_CSV = "\n".join(["==PROF== Connected to process 1 (/tmp/attn)", ",".join(f'"{c}"' for c in _COLUMNS),
                          *(",".join(f'"{c}"' for c in (i, "1", "attn", "h", "ampere_sgemm_128x64_tn", "1", "7",
                                                         "Command line profiler metrics", m, u, v))
                            for i, m, u, v in _ROWS)]) + "\n"


def test_a_value_no_counter_can_have_is_missing_for_its_launch_not_the_file(tmp_path, capsys):
    """ncu writes negative values for some sampled counters (bank conflicts of LDGSTS): that counter, and a
    negative DRAM count, are missing for their launches (never 0), each named once; the rest is read."""
    f = tmp_path / "attn.csv"
    f.write_text(NEGATIVE_CSV)
    launches = kernel_table([f], per_launch=True)
    assert list(launches["time_s"]) == pytest.approx([10e-6, 20e-6])
    assert launches["dram_bytes"][0] == 1.5e6 and math.isnan(launches["dram_bytes"][1])
    raw = read_profile(f)
    assert raw[BANK_CONFLICTS].isna().all()
    assert main([str(f), "-v"]) == 0
    warned = [ln for ln in capsys.readouterr().err.splitlines() if "no counter can have" in ln]
    # one line per metric, with the count, the first kernel and ID, its value in base units and its line
    assert len(warned) == 2
    dram, = (w for w in warned if "dram__bytes.sum:" in w)
    assert "1 launch(es)" in dram and "ampere_sgemm_128x64_tn (ID 36) = -3000 (line 6)" in dram
    bank, = (w for w in warned if "ldgsts.sum:" in w)
    assert "2 launch(es)" in bank and "(ID 35) = -159 (line 5)" in bank


def test_a_file_of_only_impossible_values_is_refused(tmp_path, capsys):
    f = tmp_path / "bad.csv"
    f.write_text("\n".join(ln.replace('"10.00"', '"-10"').replace('"20.00"', '"-2"').replace('"1.50"', '"-1"')
                           for ln in NEGATIVE_CSV.splitlines()) + "\n")
    assert "every metric of every launch is missing" in _error_line(capsys, [str(f)])

"""nsys stats reports (analysis.readers.nsys): each recognised by its header, read from CSV and text, old and new.

Expected values are read off the fixtures in tests/data/nsys by hand (times in ns there, seconds here).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from analysis.readers import nsys
from analysis.readers.contract import Format, Source
from analysis.readers.registry import detect
from common.errors import CeilingsError

DATA = Path(__file__).parent / "data" / "nsys"
NCU_DATA = Path(__file__).parent / "data" / "ncu"
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "ncu-samples" / "ai4materials_a100_ncu2020.2" / \
    "torch_gcn_profile_nsys.txt"
NSYS_FORMATS = (nsys.CSV, nsys.TEXT, nsys.EXEC_CSV, nsys.EXEC_TEXT, nsys.TRACE_CSV, nsys.TRACE_TEXT)
T = "gpu__time_duration.sum"
SCALE = "void scale<float>(float *, int)"
ROWTILE = "void rowtile4<float>(const float *, float *, int, int)"


def read(path: Path) -> tuple[Format, pd.DataFrame]:
    source = Source(path.read_bytes(), str(path))
    found = detect(source)
    assert found is not None, f"{path.name} is not recognised"
    fmt, where = found
    return fmt, fmt.read(source, where)


def rows(df: pd.DataFrame, *columns: str) -> list[tuple]:
    return [tuple(r) for r in df[list(columns)].itertuples(index=False)]


@pytest.mark.parametrize("path, fmt", [
    (DATA / "stats_two_runs.txt", nsys.TEXT),
    (DATA / "kern_sum_old.txt", nsys.TEXT),
    (DATA / "kern_sum_two_runs.csv", nsys.CSV),
    (NCU_DATA / "nsys_stats.txt", nsys.TEXT),
    (NCU_DATA / "nsys_kern_sum.csv", nsys.CSV),
    (DATA / "kern_exec_sum.csv", nsys.EXEC_CSV),
    (DATA / "kern_exec_sum.txt", nsys.EXEC_TEXT),
    (DATA / "gpu_trace.csv", nsys.TRACE_CSV),
    (DATA / "gpu_trace.txt", nsys.TRACE_TEXT),
    (DATA / "gputrace_2020.txt", nsys.TRACE_TEXT),
], ids=lambda v: v.name if isinstance(v, (Path, Format)) else None)
def test_each_report_is_recognised_by_its_own_format_only(path, fmt):
    source = Source(path.read_bytes(), str(path))
    found = detect(source)
    assert found is not None and found[0] is fmt
    assert [f.name for f in NSYS_FORMATS if f.find(source) is not None] == [fmt.name]


def test_two_stats_logs_in_one_text_file_are_two_runs():
    """Two `nsys profile --stats=true` logs, one after the other: the same kernel with its time in each; the
    osrt, cuda_api, mem_time and mem_size tables around them (also ending in Name/Operation) are no kernels."""
    _, df = read(DATA / "stats_two_runs.txt")
    assert rows(df, "run", "id", "kernel", "launches", "name_truncated") == [
        (0, 0, SCALE, 3, False), (0, 1, "copy(float*)", 2, False),
        (1, 0, SCALE, 3, False),
        (1, 1, "void very_long_namespace::detail::reduce_impl<float, 256, 8, very_long_namespace::plus<float>, "
               "(int", 1, True)]  # 99 characters and "…": nsys cut the name at 100
    assert df[T].tolist() == pytest.approx([4_000.0e-9, 2_512.0e-9, 13_504e-9 / 3, 9_216.0e-9])  # Total / Instances
    assert (df["source"] == "nsys").all() and df["grid"].isna().all() and df["device"].isna().all()


def test_kern_sum_csv_of_nsys_2022_with_grids_and_of_2024_without_are_two_runs():
    _, df = read(DATA / "kern_sum_two_runs.csv")
    assert rows(df, "run", "id", "kernel", "launches") == [
        (0, 0, ROWTILE, 4), (0, 1, ROWTILE, 2), (1, 0, ROWTILE, 6), (1, 1, "copy(float*)", 2)]
    assert df[T].tolist() == pytest.approx([10_264.0e-9, 3_104.0e-9, 7_936.0e-9, 2_516.0e-9])
    assert df["grid"].tolist()[:2] == ["(896, 1, 1)", "(256, 1, 1)"]  # GridXYZ ' 896    1    1'
    assert df["block"].tolist()[:2] == ["(256, 1, 1)", "(256, 1, 1)"]
    assert df["grid"].iloc[2:].isna().all()  # cuda_gpu_kern_sum has no GridXYZ


def test_kern_sum_text_of_nsys_2020_and_2021():
    """'Average'/'Minimum' without units and without thousands separators (2020), 'Average (ns)' with them
    (2021); names padded with trailing spaces."""
    _, df = read(DATA / "kern_sum_old.txt")
    assert rows(df, "run", "kernel", "launches") == [
        (0, "initWith(float, float*, int)", 3), (0, "addVectorsInto(float*, float*, float*, int)", 1),
        (1, "void add_kernel<double>(const T1 *, const T1 *, T1 *)", 100),
        (1, "void dot_kernel<double>(const T1 *, const T1 *, T1 *)", 100)]
    assert df[T].tolist() == pytest.approx([621_166.7e-9, 1_700_000.0e-9, 584_000.0e-9, 436_000.5e-9])


@pytest.mark.parametrize("name", ["kern_exec_sum.csv", "kern_exec_sum.txt"])
def test_kern_exec_sum_time_is_the_kernel_execution_not_the_api_or_queue_time(name):
    """Rows per process, thread, device and API: KAvg is the time (TAvg 7,026, AAvg 3,500, QAvg 2,000 in the
    first row are not); the second row's queue cells are empty (QCount 0)."""
    _, df = read(DATA / name)
    assert rows(df, "run", "id", "kernel", "launches", "device", "process") == [
        (0, 0, SCALE, 4, "0", "4242"), (0, 1, SCALE, 1, "1", "4242"), (0, 2, "copy(float*)", 2, "0", "4242")]
    assert df[T].tolist() == pytest.approx([2_500.0e-9, 3_100.0e-9, 1_250.0e-9])


def test_kern_exec_sum_reads_the_same_from_csv_and_text():
    assert read(DATA / "kern_exec_sum.csv")[1].equals(read(DATA / "kern_exec_sum.txt")[1])


def test_gpu_trace_csv_one_row_per_launch_without_memory_operations():
    """nsys 2024: memcpy HtoD, two scale launches, a memset, copy on device 1, memcpy DtoH."""
    _, df = read(DATA / "gpu_trace.csv")
    assert rows(df, "run", "id", "kernel", "launches", "grid", "block", "device", "gpu") == [
        (0, 0, SCALE, 1, "(4096, 1, 1)", "(256, 1, 1)", "0", "NVIDIA H100 80GB HBM3"),
        (0, 1, SCALE, 1, "(4096, 1, 1)", "(256, 1, 1)", "0", "NVIDIA H100 80GB HBM3"),
        (0, 2, "copy(float*)", 1, "(128, 2, 1)", "(32, 8, 1)", "1", "NVIDIA H100 80GB HBM3")]
    assert df[T].tolist() == pytest.approx([2_048e-9, 2_112e-9, 5_120e-9])  # Duration (ns)
    assert df.attrs["memory_operations"] == 3


@pytest.mark.parametrize("name, kernel, seconds, grid, block, gpu", [
    ("gpu_trace.txt", "vectorAdd(const float *, const float *, float *, int)", 1_027_584e-9, "(195313, 1, 1)",
     "(256, 1, 1)", "NVIDIA A100-SXM4-40GB"),  # nsys 2023: 'Duration (ns)', GrdX '195,313'
    ("gputrace_2020.txt", "__omp_offloading_fd00_1a2b3c_main_l42", 221_984e-9, "(1, 1, 1)", "(33, 1, 1)",
     "A100-PCIE-40GB"),  # nsys 2020.4: 'Start(sec)', 'Duration(nsec)'
])
def test_gpu_trace_text_of_old_and_new_versions(name, kernel, seconds, grid, block, gpu):
    _, df = read(DATA / name)
    assert rows(df, "kernel", "launches", "grid", "block", "device", "gpu") == [(kernel, 1, grid, block, "0", gpu)]
    assert df[T].tolist() == pytest.approx([seconds])
    assert df.attrs["memory_operations"] == 3


def test_a_file_with_several_reports_is_read_as_the_first_format_that_recognises_it(tmp_path):
    f = tmp_path / "stats.txt"
    f.write_bytes((DATA / "gpu_trace.txt").read_bytes() + (DATA / "stats_two_runs.txt").read_bytes())
    fmt, df = read(f)
    assert fmt is nsys.TEXT and df["run"].tolist() == [0, 0, 1, 1]


@pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/ncu-samples is absent")
def test_real_stats_log_of_nsys_2023():
    fmt, df = read(SAMPLE)
    assert fmt is nsys.TEXT and len(df) == 19 and (df["run"] == 0).all()
    sgemm = df[df["kernel"] == "ampere_sgemm_64x32_sliced1x4_tn"].iloc[0]
    assert sgemm["launches"] == 3 and sgemm[T] == pytest.approx(14_240.0e-9)
    assert df["name_truncated"].sum() == 17  # all but the two ampere_sgemm names end in "…"


def _error(path: Path) -> str:
    source = Source(path.read_bytes(), str(path))
    fmt, where = detect(source)
    with pytest.raises(CeilingsError) as info:
        fmt.read(source, where)
    return str(info.value)


def _edit(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (DATA / name).read_text()
    assert text.count(old) == 1
    f = tmp_path / name
    f.write_text(text.replace(old, new))
    return f


@pytest.mark.parametrize("name, old, new, line, why", [
    ("kern_sum_two_runs.csv", "9.6,5032,2,", "9.6,5032,,", 17, "Instances '' is not a count"),
    ("kern_sum_two_runs.csv", "9.6,5032,2,2516.0,", "9.6,5032,2,2616.0,", 17,
     "Avg (ns) 2616 is not Total Time 5032 / Instances 2"),
    ("kern_sum_two_runs.csv", ",copy(float*)", ",copy(float*),x", 17, "10 cells under a header of 9 columns"),
    ("gpu_trace.csv", "283882305,2112,", "283882305,,", 6, "Duration (ns) '' is not a time"),
    ("gpu_trace.csv", "283882305,2112,122,4096,1,1,", "283882305,2112,122,4096,,1,", 6, "grid '4096  1'"),
    ("kern_exec_sum.csv", "4242,4242,0,2,2,", "4242,4242,0,0,2,", 6, "Count '0' is not a count"),
    ("stats_two_runs.txt", "      9,216          1   9,216.0", "      9,216               9,216.0", 70,
     "cells out of place"),  # a cell missing: the row's tokens no longer line up with the columns
])
def test_a_bad_row_is_an_error_naming_its_line(tmp_path, name, old, new, line, why):
    f = _edit(tmp_path, name, old, new)
    message = _error(f)
    assert re.match(rf"{re.escape(str(f))}:{line}: unreadable row in the nsys ", message), message
    assert why in message and "nsys stats --report" in message and "\n" not in message


def test_a_text_trace_row_cut_short_is_an_error_naming_its_line(tmp_path):
    text = (DATA / "gpu_trace.txt").read_text()
    start = text.index(" 62,042,901,760")
    f = tmp_path / "cut.txt"
    f.write_text(text[:start] + " 62,042,901,760\n")  # the kernel's row ends after its Start; line 16
    assert _error(f).startswith(f"{f}:16: unreadable row in the nsys GPU trace (cuda_gpu_trace): no Name")


def test_a_text_header_that_does_not_match_its_dash_row_is_an_error(tmp_path):
    f = _edit(tmp_path, "kern_exec_sum.txt", "  ----------------  ", "------------------  ")  # KStdDev+API Name
    assert _error(f).startswith(f"{f}:5: unreadable table in the nsys kernel launch & exec summary "
                                "(cuda_kern_exec_sum): the header names 27 columns, the dash row below it 26")


def test_kern_sum_text_rows_are_tokens_so_a_shifted_row_keeps_its_name_and_ellipsis_lines_are_skipped(tmp_path):
    """The 2023- cuda_gpu_kern_sum text layout (docs/ncu-ingestion.md), pasted: the second row, with a
    one-digit Time (%), sits one column left of the dash row; a "..." line stands for rows left out. The
    time per launch is Total Time / Instances (Avg is rounded: 3,333.3 x 3 is not 10,000)."""
    f = tmp_path / "pasted.txt"
    f.write_text(
        " Time (%)  Total Time (ns)  Instances  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)     Name\n"
        " --------  ---------------  ---------  --------  --------  --------  --------  -----------  -----------\n"
        "     90.0           10,000          3   3,333.3   3,300.0     3,200     3,500        152.8  "
        "sm90_xmma_gemm_bf16\n"
        "    9.0            1,000          2     500.0     500.0       490       510         14.1  "
        "void vllm::act_and_mul(float*)\n"
        "...\n"
        "      1.0              111          1     111.0     111.0       111       111          0.0  copy(float*)\n")
    fmt, df = read(f)
    assert fmt is nsys.TEXT
    assert rows(df, "kernel", "launches") == [("sm90_xmma_gemm_bf16", 3), ("void vllm::act_and_mul(float*)", 2),
                                              ("copy(float*)", 1)]
    assert df[T].tolist() == pytest.approx([10_000e-9 / 3, 500e-9, 111e-9])
    assert df.attrs["notes"] == ["1 '...' line(s) (first: line 5) stand for rows left out of a pasted "
                                 "cuda_gpu_kern_sum report: their kernels are not in the table; use the report "
                                 "as nsys wrote it"]


def test_a_span_cut_text_row_shifted_left_keeps_the_first_letter_of_its_name(tmp_path):
    text = (DATA / "kern_exec_sum.txt").read_text()
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines) if line.rstrip().endswith(")") and line[:1] == " ")
    name = lines[row].split("  ")[-1]
    lines[row] = lines[row][1:]  # the whole row one column left of the dash row
    f = tmp_path / "shifted.txt"
    f.write_text("\n".join(lines))
    _, df = read(f)
    assert name in set(df["kernel"])

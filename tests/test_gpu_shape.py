"""Another GPU than the roofs' told by its shape (SM count, max SM clock, memory, the clock kernels ran at), in
every format that records it, and the same warning from analysis.roofline, analysis.whatif and analysis.llm
--calibrate.

Profiles are written here (or in tests/data/ncu/h20_sections.txt) with an H20's facts: CC 9.0, 78 SMs,
102,000,000,000 B of memory, kernels at 1.83 GHz; the roofs are the H100 SXM datasheet row (132 SMs, 1980 MHz,
80 GiB) or tests/data/roofs/h100.json (132 SMs, 1.98 GHz, 85,030,158,336 B). Every expected value is one of
those numbers. The real samples of ../shared are checked for false alarms against their own GPU.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from analysis import roofline, whatif
from analysis.llm.__main__ import main as llm_main
from analysis.ncu import kernel_table
from analysis.roofline.__main__ import main as roofline_main
from tests.test_nsys_sqlite import make_export

DATA = Path(__file__).parent / "data"
H20_TEXT = DATA / "ncu" / "h20_sections.txt"
H100_ROOFS = DATA / "roofs" / "h100.json"
SHARED = Path(__file__).resolve().parents[2] / "shared"
needs_samples = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared is absent")

SMS = "78 SMs, the roofs' 132"  # what every warning below says of the H20 against an H100
H20_MEMORY = 102e9


def first_warning(capsys) -> str:
    return capsys.readouterr().err.splitlines()[0]


# ---- each format's facts reach kernel_table's attrs["gpus"] -----------------------------------------------

def test_ncu_text_sections_give_the_sm_count_cc_and_clock():
    """Launch Statistics' `# SMs 78`, the heading's `CC 9.0`, GPU Speed Of Light's `SM Frequency 1.83 Ghz`."""
    (gpu,) = kernel_table([H20_TEXT]).attrs["gpus"]
    assert gpu == {"gpu": None, "cc": "9.0", "device": "0", "sm_count": 78.0, "sm_clock_hz": pytest.approx(1.83e9)}


def test_ncu_details_csv_gives_the_sm_count_of_its_launch_statistics(tmp_path):
    """`--csv` (details page) writes the section label: "Launch Statistics","# SMs","SM","78"."""
    header = ["ID", "Kernel Name", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
    rows = [["0", "k", "0", "9.0", "GPU Speed Of Light Throughput", "Duration", "usecond", "2.00"],
            ["0", "k", "0", "9.0", "Launch Statistics", "# SMs", "SM", "78"]]
    f = tmp_path / "h20.csv"
    f.write_text("\n".join(",".join(f'"{c}"' for c in r) for r in [header, *rows]) + "\n")
    (gpu,) = kernel_table([f]).attrs["gpus"]
    assert gpu == {"gpu": None, "cc": "9.0", "device": "0", "sm_count": 78.0}


def test_ncu_raw_csv_gives_launch_sm_count_memory_and_max_clock(tmp_path):
    """`--page raw`: launch__sm_count, device__attribute_total_memory, _max_gpu_frequency_khz (kHz, no unit)."""
    columns = ["ID", "Kernel Name", "gpu__time_duration.sum", "launch__sm_count", "device__attribute_total_memory",
               "device__attribute_max_gpu_frequency_khz", "device__attribute_compute_capability_major",
               "device__attribute_compute_capability_minor"]
    rows = [columns, ["", "", "usecond", "SM", "byte", "", "", ""], ["0", "k", "2.00", "78", "102,000,000,000",
                                                                     "1,980,000", "9", "0"]]
    f = tmp_path / "raw.csv"
    f.write_text("\n".join(",".join(f'"{c}"' for c in r) for r in rows) + "\n")
    (gpu,) = kernel_table([f]).attrs["gpus"]
    assert gpu == {"gpu": None, "cc": "9.0", "device": None, "sm_count": 78.0, "max_sm_clock_hz": 1.98e9,
                   "memory_bytes": H20_MEMORY}


def test_a_torch_trace_gives_its_device_properties(tmp_path):
    device = {"id": 0, "name": "", "computeMajor": 9, "computeMinor": 0, "numSms": 78, "totalGlobalMem": H20_MEMORY}
    doc = {"schemaVersion": 1, "deviceProperties": [device], "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 3, "args": {"device": 0}}]}
    f = tmp_path / "h20.json.gz"
    f.write_bytes(gzip.compress(json.dumps(doc).encode()))
    gpus = kernel_table([f]).attrs["gpus"]
    assert gpus == [{"gpu": None, "cc": "9.0", "device": "0", "sm_count": 78.0, "memory_bytes": H20_MEMORY}]
    warning = roofline.device_warning(roofline.load(H100_ROOFS), gpus, "remedy")
    assert f"(the profile's GPU: {SMS}; memory 102 GB, the roofs' 85 GB)" in warning


def test_an_nsys_export_gives_target_info_gpu(tmp_path):
    """TARGET_INFO_GPU with the columns of NVIDIA's SQLite schema reference (nsys 2026.4): smCount, totalMemory
    (B), clockRate (Hz), computeMajor/Minor; no name."""
    f = make_export(tmp_path / "h20.sqlite", drop=["TARGET_INFO_GPU"])
    with closing(sqlite3.connect(f)) as con:
        con.execute("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, "
                    "totalMemory INTEGER, clockRate INTEGER, smCount INTEGER, computeMajor INTEGER, "
                    "computeMinor INTEGER)")
        con.executemany("INSERT INTO TARGET_INFO_GPU VALUES (0, ?, NULL, ?, ?, ?, 9, 0)",
                        [(0, int(H20_MEMORY), 1_980_000_000, 78), (1, int(H20_MEMORY), 1_980_000_000, 78)])
        con.commit()
    gpus = kernel_table([f]).attrs["gpus"]
    assert {g["device"]: g for g in gpus}["0"] == {"gpu": None, "cc": "9.0", "device": "0", "sm_count": 78.0,
                                                   "max_sm_clock_hz": 1.98e9, "memory_bytes": H20_MEMORY}
    warning = roofline.device_warning(roofline.target_roofs("H100 SXM"), gpus, "remedy")
    assert SMS in warning and "memory 102 GB, the roofs' 85.9 GB" in warning and "max SM clock" not in warning


# ---- the three commands say it first -----------------------------------------------------------------------

def test_roofline_warns_first_about_an_h20_profile_against_h100_roofs(capsys):
    assert roofline_main(["--roofs", "H100 SXM", str(H20_TEXT), "-v"]) == 0
    first = first_warning(capsys)
    assert first.startswith("warning: PROFILE FROM ANOTHER GPU: the profile ran on unknown GPU (CC 9.0, device 0), "
                            "the roofs are of NVIDIA H100 SXM5 80GB (CC 9.0) (the profile's GPU: 78 SMs, the "
                            "roofs' 132): ")


def test_whatif_warns_first_about_an_h20_profile_against_h100_roofs(capsys):
    assert whatif.main([str(H20_TEXT), "--roofs", "H100 SXM", "--on", "H200 SXM", "-v"]) == 0
    first = first_warning(capsys)
    assert first.startswith("warning: PROFILE FROM ANOTHER GPU") and SMS in first


def test_llm_calibrate_warns_about_an_h20_profile_against_h100_roofs(tmp_path, capsys):
    """The decode-step profile of tests/data/llm, nameless and on CC 9.0 with Launch Statistics' # SMs 78."""
    lines = (DATA / "llm" / "decode-step.ncu.csv").read_text().splitlines()
    kept = [line.replace('"8.0","Command line', '"9.0","Command line') for line in lines
            if "device__attribute_display_name" not in line]
    sms = [line.split('"Command line')[0] + '"Launch Statistics","# SMs","SM","78"' for line in kept
           if "gpu__time_duration.sum" in line]
    profile = tmp_path / "h20-decode.ncu.csv"
    profile.write_text("\n".join(kept + sms) + "\n")
    assert llm_main(["--model", str(DATA / "llm" / "tiny-llama"), "--roofs", "H100 SXM", "--prompt", "100", "--gen",
                     "4", "--calibrate", str(profile), "-v"]) == 0
    (warning,) = [w for w in capsys.readouterr().err.splitlines() if "PROFILE FROM ANOTHER GPU" in w]
    assert SMS in warning and "give --calibrate-on the roofs of the profiled GPU" in warning


def test_a_profile_that_gives_its_shape_only_is_checked_not_called_unknown():
    roofs = roofline.load(H100_ROOFS)
    assert roofline.unknown_device_warning(roofs, [{"gpu": None, "cc": None, "device": None, "sm_count": 78.0}]) is None
    # the clock its kernels ran at is no fact of the GPU: a profile with that alone says nothing of which it is
    assert roofline.unknown_device_warning(roofs, [{"gpu": None, "cc": None, "device": None, "sm_clock_hz": 1.8e9}])


# ---- no false alarm on real profiles -----------------------------------------------------------------------

@needs_samples
@pytest.mark.parametrize("trace, spec", [("a100_80gb_shapes_rank0.json.gz", "A100 SXM 80GB"),
                                         ("alexnet_a100_kernels.json.gz", "A100 SXM 40GB"),
                                         ("cupti_counters_a100.json.gz", "A100 SXM 40GB")])
def test_real_a100_traces_have_the_shape_of_their_datasheet_row(trace, spec):
    """108 SMs and CUDA's 84,990,623,744 / 42,297,524,224 / 42,505,273,344 B (under the rows' 80 and 40 GiB),
    their names set aside (A100-PG509-200 is no datasheet name)."""
    gpus = kernel_table([SHARED / "torch-traces" / trace]).attrs["gpus"]
    assert gpus and all(g["sm_count"] == 108 for g in gpus)
    nameless = [{**g, "gpu": None} for g in gpus]
    assert roofline.device_warning(roofline.target_roofs(spec), nameless, "remedy") is None


@needs_samples
def test_a_real_geforce_boosting_past_its_max_clock_is_its_own_gpu():
    """The GTX 1080 raw page: 20 SMs, max clock 1,759,000 kHz, 8,504,934,400 B; its kernel ran at 2.12 GHz
    (gpc__frequency), 21 % above that max: GPU Boost, not another GPU."""
    gpus = kernel_table([SHARED / "ncu-samples" / "microgpusim_gtx1080_ncu2019_raw" /
                         "nsight_vectoradd_100_32_metrics_all.csv"]).attrs["gpus"]
    assert gpus[0]["sm_clock_hz"] == pytest.approx(2.1225e9, rel=1e-3)
    own = replace(roofline.target_roofs("T4"), device="NVIDIA GeForce GTX 1080", compute_capability="6.1",
                  sm_count=20, max_sm_clock_hz=1.759e9, memory_bytes=8504934400)
    assert roofline.device_warning(own, gpus, "remedy") is None


@needs_samples
def test_a_real_ncu_summary_gives_its_sm_count_and_is_not_an_l4():
    """heat_eq's per-kernel summary: `# SMs 34.00` in every Launch Statistics, CC 8.9; the L4 row has 58."""
    (gpu,) = kernel_table([SHARED / "ncu-samples" / "heat_eq_cc89_ncu2024_summary" / "ncu_summary_1D.txt"]
                          ).attrs["gpus"]
    assert (gpu["cc"], gpu["sm_count"]) == ("8.9", 34)
    assert "(the profile's GPU: 34 SMs, the roofs' 58)" in roofline.device_warning(roofline.target_roofs("L4"), [gpu],
                                                                                  "remedy")

"""scripts/benchmarks_md.py on a hand-made device-check folder (tests/data/device_check/).

Every number in that fixture is FAKE (device "Fixture GPU (fake numbers, not a measurement)"): these tests
check the formatting and the arithmetic of the fragment, not any measurement.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "data" / "device_check"




bmd = importlib.import_module("scripts.benchmarks_md")


def row(text: str, first_cell: str) -> list[str]:
    """The cells of the Markdown table row whose first cell is `first_cell`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row starting with {first_cell!r}")


@pytest.fixture(scope="module")
def fragment(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("md") / "fragment.md"
    assert bmd.main([str(FIXTURE), "--out", str(out)]) == 0
    return out.read_text()


def test_header_names_the_device_date_and_command(fragment):
    assert fragment.startswith("## Fixture GPU (fake numbers, not a measurement): device check of "
                               "2000-01-01T00:00:00+00:00\n")
    assert "Command: `scripts/device_check.sh /fake/outdir`" in fragment
    assert row(fragment, "driver (NVML)")[1] == "999.99"
    assert row(fragment, "ECC")[1] == "on"
    assert row(fragment, "L2")[1] == "50 MiB"  # 52428800 B
    assert row(fragment, "SM clock at probe (NVML)")[1] == "1500 MHz"


def test_ceiling_rows_show_default_quick_and_both_peaks(fragment):
    # fixture: 1.0e12 B/s default, 9.0e11 quick, clock-derived (run) 1.25e12, datasheet 2.0e12
    assert row(fragment, "dram.copy") == ["dram.copy", "cuda-c", "`dram_copy`", "1 TB/s", "900 GB/s", "-",
                                          "1.25 TB/s", "80.0%", "2 TB/s", "50.0%", "ok"]
    fp32 = row(fragment, "fp32.fma")
    assert fp32[5] == "1500 MHz" and fp32[6] == "24 TFLOP/s" and fp32[7] == "125.0%"
    assert fp32[-1] == "INVALID: suspect: fake value above the clock-derived peak"


def test_run_times_of_quick_and_default(fragment):
    assert "- `python -m ceilings.measure --quick`: 12.5 s (ok)" in fragment
    assert "- `python -m ceilings.measure`: 150.0 s (timeout)" in fragment
    assert row(fragment, "peers")[1:3] == ["skipped: budget spent", "0.0"]


def test_peers_flag_a_peer_above_our_ceiling(fragment):
    assert row(fragment, "cupy.copyto")[2:] == ["1.1 TB/s", "dram.copy (cuda-c)", "1 TB/s", "1.10",
                                                "**peer above our ceiling**"]
    assert row(fragment, "cupy.matmul.fp32")[-1] == "INVALID: launch failed: fake failure"
    assert "\n- torch.matmul.bf16: skipped, torch is not installed\n" in fragment


def test_selfcheck_counts_and_rows(fragment):
    assert "1 failing rows (MISMATCH: 1, ok: 1, ok*: 1)." in fragment
    lines = [ln for ln in fragment.splitlines() if "| flops_fp32" in ln]
    assert [c.strip() for c in lines[0].strip("|").split("|")] == ["fp32.fma", "cuda-c", "flops_fp32", "2000",
                                                                   "1000.0", "0.5000", "MISMATCH"]


def test_apps_without_pictures_point_at_their_logs(fragment):
    assert "- resnet50: no picture (see `logs/resnet50.log` and `logs/resnet50-roofline.log`)" in fragment


def test_pictures_are_linked_when_present(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "out")
    (tmp_path / "out" / "decode-roofline.png").write_bytes(b"")
    (tmp_path / "out" / "decode-report.md").write_text("")
    text = bmd.render(tmp_path / "out")
    assert "- decode: ![decode roofline](decode-roofline.png) — report: [decode-report.md](decode-report.md)" in text


def test_empty_folder_says_what_is_missing(tmp_path):
    text = bmd.render(tmp_path)
    for missing in ("No roofs file was produced", "No summary.txt", "No peers.json", "No selfcheck.csv"):
        assert missing in text


def test_simulated_roofs_carry_the_banner(tmp_path):
    shutil.copy(Path(__file__).parent / "data" / "roofs" / "simulated.json", tmp_path / "roofs-simulated.json")
    text = bmd.render(tmp_path)
    assert "**SIMULATED: Numba's CUDA simulator ran these kernels; every number below is meaningless.**" in text
    assert row(text, "roofs file")[1] == "roofs-simulated.json"


def test_a_bad_summary_line_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "summary.txt").write_text("# step\tstatus\tseconds\tlimit_s\tcommand\nmeasure ok 3.0\n")
    assert bmd.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "summary.txt:2: expected 5 tab-separated fields" in err

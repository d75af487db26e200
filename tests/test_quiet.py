"""Quiet by default, defaults from the profile: a few short warning lines (every one whole with -v and in the
report), progress without carriage returns in a log, --roofs found from the profile's GPU, the datasheet rows
listed, every profile reader's --help naming the formats it reads."""

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.roofline.__main__ import main as roofline_main
from common.warn import print_warnings
from tests.test_roofline import A100, A100_ROOFS, H100, KERNELS, fixture_reader  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[1]
A100_TRACE = ROOT.parent / "shared" / "torch-traces" / "a100_80gb_shapes_rank0.json.gz"  # as tests/test_floors.py
DATASHEETS = ROOT / "ceilings" / "data" / "datasheets.csv"


def warning_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("warning: ")]


def test_many_long_warnings_are_five_short_lines_and_verbose_prints_them_whole():
    said = [f"warning number {i}: " + " ".join(["word"] * (10 + 40 * (i % 2))) for i in range(12)]
    out = io.StringIO()
    print_warnings(said, file=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 5 and all(len(ln) < 160 for ln in lines)
    assert lines[-1].startswith("warning: 8 more warnings: run with -v")  # 12 less the 4 shown
    for line, whole in zip(lines[:4], said):
        text = line.removeprefix("warning: ")
        if text == whole:
            continue
        # cut: ends with "…", after a whole word of the warning
        assert text.endswith("…") and whole.startswith(text[:-1]) and whole[len(text) - 1] == " "
    assert sum(ln.endswith("…") for ln in lines[:4]) == 2  # the long ones (odd i)
    out = io.StringIO()
    print_warnings(said, verbose=True, file=out)
    assert out.getvalue().splitlines() == [f"warning: {w}" for w in said]


def test_a_terminal_line_names_a_file_not_its_folders():
    from common.warn import short_line

    assert short_line("/work/runs/a b/../x/trace.json.gz: 9 kernel(s) of https://host/a/b at 3 FLOP/s (fp16/bf16)") \
        == "warning: a b/../x/trace.json.gz: 9 kernel(s) of https://host/a/b at 3 FLOP/s (fp16/bf16)"  # a space ends it
    assert short_line("~/p/q.csv: and runs/r.csv") == "warning: q.csv: and runs/r.csv"


@pytest.mark.skipif(not A100_TRACE.exists(), reason="the shared A100 trace is absent")
def test_a_roofline_of_the_shared_trace_prints_five_short_lines_and_the_report_holds_them_all(tmp_path, capsys):
    md = tmp_path / "r.md"
    assert roofline_main(["--roofs", "a100-sxm4-80gb", str(A100_TRACE), "--report", str(md)]) == 0
    quiet = warning_lines(capsys.readouterr().err)
    assert 0 < len(quiet) <= 5 and all(len(ln) < 160 for ln in quiet)
    assert roofline_main(["--roofs", "a100-sxm4-80gb", str(A100_TRACE), "--report", str(md), "--force", "-v"]) == 0
    verbose = warning_lines(capsys.readouterr().err)
    report = md.read_text().split("## Warnings\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(verbose) > 5 and [f"- {ln.removeprefix('warning: ')}" for ln in verbose] == report
    assert quiet[-1].startswith(f"warning: {len(verbose) - 4} more warnings")
    # the datasheet roofs are said before what the judgement and the reader found
    assert quiet[0].startswith("warning: the roofs are datasheet figures for NVIDIA A100 SXM4 80GB")


def test_progress_writes_plain_lines_in_a_log_and_a_few(monkeypatch):
    from ceilings import measure

    log = io.StringIO()  # not a terminal, as Slurm's output file
    monkeypatch.setattr(sys, "stderr", log)
    progress = measure._progress(1000, "GPU 0")
    progress.set_description("dram.read (cupy)")
    for _ in range(1000):
        progress.update(1)
    progress.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 10  # one a tenth
    assert lines[-1] == "python -m ceilings.measure: [GPU 0 1000/1000] dram.read (cupy)"


def test_a_terminal_gets_a_bar(monkeypatch):
    pytest.importorskip("tqdm")
    from ceilings import measure

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert type(measure._progress(3, "GPU 0")).__name__ == "tqdm"


def test_without_roofs_the_profiles_gpu_gives_them(tmp_path, fixture_reader, capsys, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    fixture_reader.gpus = [A100]
    md = tmp_path / "r.md"
    assert roofline_main([str(KERNELS), "--no-datasheet", "--report", str(md)]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if "no --roofs" in ln]
    assert len(said) == 1 and "the datasheet figures of NVIDIA A100 SXM4 80GB" in said[0]
    assert "datasheet figures for NVIDIA A100 SXM4 80GB" in md.read_text()
    # a measured roofs file of that GPU in the working folder wins over the datasheet; the newest of two
    shutil.copy(A100_ROOFS, tmp_path / "roofs-old.json")
    shutil.copy(A100_ROOFS, tmp_path / "roofs-new.json")
    os.utime(tmp_path / "roofs-old.json", (1e9, 1e9))
    (tmp_path / "roofs-broken.json").write_text("{")  # not a roofs file: passed over
    assert roofline_main([str(KERNELS), "--no-datasheet", "--report", str(md), "--force"]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if "no --roofs" in ln]
    assert len(said) == 1 and "roofs-new.json" in said[0]
    assert "measured roofs (roofs-new.json)" in md.read_text()
    # another GPU's roofs file is not the profile's
    fixture_reader.gpus = [H100]
    assert roofline_main([str(KERNELS), "--no-datasheet"]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if "no --roofs" in ln]
    assert len(said) == 1 and "the datasheet figures of NVIDIA H100" in said[0]


def test_without_roofs_a_profile_that_names_no_gpu_is_refused(tmp_path, fixture_reader, capsys,  # noqa: F811
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert roofline_main([str(KERNELS), "--no-datasheet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not say which GPU it ran on: give --roofs ROOFS.json" in err
    fixture_reader.gpus = [{"gpu": "NVIDIA Mystery 9000", "cc": "12.0"}]
    assert roofline_main([str(KERNELS), "--no-datasheet"]) == 2
    assert "'NVIDIA Mystery 9000' has no datasheet row" in capsys.readouterr().err


def test_whatif_takes_its_home_from_the_profile(tmp_path, fixture_reader, capsys, monkeypatch):  # noqa: F811
    from analysis import whatif

    monkeypatch.chdir(tmp_path)
    fixture_reader.gpus = [A100]
    assert whatif.main([str(KERNELS), "--on", "H100 SXM"]) == 0
    out, err = capsys.readouterr()
    assert "NVIDIA A100 SXM4 80GB (profiled)" in out and "needs --roofs" not in out
    assert "no --roofs: the datasheet figures of NVIDIA A100 SXM4 80GB" in err
    fixture_reader.gpus = []  # no GPU named: the projection at the roofs only, said
    assert whatif.main([str(KERNELS), "--on", "H100 SXM"]) == 0
    out, err = capsys.readouterr()
    assert "(needs --roofs)" in out and "only the time at the roof is projected" in err


def test_datasheets_lists_every_row(capsys):
    from ceilings.__main__ import main as ceilings_main

    with DATASHEETS.open() as f:
        rows = list(csv.DictReader(f))
    assert ceilings_main(["datasheets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(rows)
    for line, row in zip(lines[1:], rows):
        assert line.split()[0] == row["key"] and row["display_name"] in line
        assert row["memory_bandwidth_gbs"] in line.split()


def test_the_reader_names_are_the_registrys_and_every_profile_help_says_them():
    from analysis.readers.registry import NAMES, formats

    assert NAMES == tuple(f.name for f in formats())
    for command in ("analysis.ncu", "analysis.roofline", "analysis.whatif", "analysis.llm"):
        help_text = subprocess.run([sys.executable, "-m", command, "--help"], capture_output=True, text=True,
                                   check=True, cwd=ROOT, env={**os.environ, "COLUMNS": "10000"}).stdout
        assert all(name in help_text for name in NAMES), command

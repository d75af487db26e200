"""ceilings.compare on hand-made roofs files (tests/data/roofs, values read off the JSON by hand)."""

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pytest
from matplotlib.figure import Figure

from ceilings.compare import VERSUS_FIRST, compare_table, format_table, main, path_labels, plot_compare, value_columns
from ceilings.datasheet import CLOSE_NAMES, find_datasheet
from ceilings.roofs import load_record
from tests.text_extents import pictures_of, problems

ROOFS = Path(__file__).parent / "data" / "roofs"
H100, A100, SIM = "H100 run", "A100 run", "sim run"


def _docs():
    return {label: load_record(ROOFS / name)
            for label, name in ((H100, "h100.json"), (A100, "a100.json"), (SIM, "simulated.json"))}


def test_table_best_valid_value_ratios_and_datasheet():
    t = compare_table(_docs(), [find_datasheet("H100 SXM")])
    assert list(t.index) == ["dram.read", "dram.copy", "fp32.fma", "tensor.fp16", "cublas.fp16"]
    assert t.loc["fp32.fma", H100] == 6.0e13  # best of 5.0e13 and 6.0e13
    assert math.isnan(t.loc["tensor.fp16", H100])  # only an invalid measurement
    assert math.isnan(t.loc["dram.copy", A100])  # not measured there
    assert t.loc["dram.read", A100 + VERSUS_FIRST] == pytest.approx(1.5e12 / 3.0e12)
    assert t.loc["cublas.fp16", A100 + VERSUS_FIRST] == pytest.approx(2.8e14 / 7.0e14)
    ds = "datasheet NVIDIA H100 SXM5 80GB"
    assert t.loc["dram.read", ds] == pytest.approx(3350e9)
    assert t.loc["cublas.fp16", ds] == pytest.approx(989.4e12)  # via peak_key tensor.fp16
    assert t.loc["fp32.fma", "unit"] == "FLOP/s" and t.loc["dram.read", "peak_key"] == "dram"
    assert value_columns(t) == [H100, A100, SIM, ds]


def test_text_marks_simulated_and_scales_units():
    docs = _docs()
    text = format_table(compare_table({f"{k} (SIMULATED)" if k == SIM else k: v for k, v in docs.items()}))
    assert "[3] sim run (SIMULATED)" in text
    fp32_line = next(line for line in text.splitlines() if line.startswith("fp32.fma"))
    assert fp32_line.split()[1:5] == ["TFLOP/s", "60", "19", "2e-06"]
    dram_line = next(line for line in text.splitlines() if line.startswith("dram.read"))
    assert dram_line.split()[1:4] == ["GB/s", "3000", "1500"]
    assert "0.50x" in dram_line


def test_chart_has_one_bar_per_series_and_ceiling():
    t = compare_table(_docs(), [find_datasheet("H100 SXM")])
    ax = Figure().subplots()
    plot_compare(ax, t, "FLOP/s")
    assert len(ax.containers) == 4  # three runs + one datasheet
    assert [len(c.patches) for c in ax.containers] == [3, 3, 3, 3]  # fp32.fma, tensor.fp16, cublas.fp16
    h100_bars = [p.get_height() for p in ax.containers[0].patches]
    assert h100_bars[0] == pytest.approx(60) and math.isnan(h100_bars[1]) and h100_bars[2] == pytest.approx(700)
    assert [p.get_height() for p in ax.containers[3].patches] == pytest.approx([66.9, 989.4, 989.4])
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "TFLOP/s"
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["fp32.fma", "tensor.fp16", "cublas.fp16"]
    bw = Figure().subplots()
    plot_compare(bw, t, "B/s")
    assert bw.containers[1].patches[0].get_height() == pytest.approx(1500)  # A100 dram.read in GB/s


def test_cli_writes_table_csv_and_chart(tmp_path, capsys):
    png, csv = tmp_path / "c.png", tmp_path / "c.csv"
    rc = main([str(ROOFS / "h100.json"), str(ROOFS / "simulated.json"), "--datasheet", "A100 80GB SXM",
               "-o", str(png), "--csv", str(csv)])
    out = capsys.readouterr()
    assert rc == 0
    assert "Numba CUDA simulator (not a GPU) [simulated] (SIMULATED)" in out.out
    assert "datasheet NVIDIA A100 SXM4 80GB" in out.out
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "cublas.fp16" in csv.read_text()


def test_the_picture_of_many_files_has_every_value_and_no_text_over_another(tmp_path, monkeypatch, capsys):
    """Five files and two datasheets: seven bars a ceiling, values from the simulator's 1 MB/s to 16 TB/s (ten
    decades); every bar's value written, none over another, none out of its panel or the picture."""
    pictures = pictures_of(monkeypatch)
    files = [ROOFS / "a100.json", ROOFS / "h100.json", ROOFS / "simulated.json",
             ROOFS.parent.parent.parent / "examples" / "published" / "roofs.json",
             ROOFS.parent / "roofline" / "roofs.json"]
    assert main([*map(str, files), "--datasheet", "H100 SXM", "--datasheet", "A100 80GB SXM",
                 "-o", str(tmp_path / "c.png")]) == 0
    (_, fig, kwargs), = pictures
    assert problems(fig, **kwargs) == []
    table = compare_table({str(f): load_record(f) for f in files},
                          [find_datasheet("H100 SXM"), find_datasheet("A100 80GB SXM")])
    values = table[value_columns(table)]
    written = [t for ax in fig.axes for t in ax.texts if t.get_text()]
    assert len(written) == values.notna().sum().sum() and len(written) > 40


def test_cli_missing_file_exit_2_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "nope.json"), "-o", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.json" in err


def test_cli_bad_json_exit_2_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main([str(bad), "-o", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json:1: not valid JSON" in err
    assert not (tmp_path / "c.png").exists()


def test_cli_ambiguous_datasheet_exit_2(tmp_path, capsys):
    assert main([str(ROOFS / "h100.json"), "--datasheet", "A100", "-o", str(tmp_path / "c.png")]) == 2
    assert "ambiguous" in capsys.readouterr().err


def test_cli_unknown_datasheet_lists_a_few_close_names(tmp_path, capsys):
    assert main([str(ROOFS / "h100.json"), "--datasheet", "bogus", "-o", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m ceilings.compare: error: no datasheet row matches")
    assert len(err.split("closest: ")[1].split(", ")) == CLOSE_NAMES
    assert not (tmp_path / "c.png").exists()


def test_two_runs_of_one_gpu_with_the_same_file_name_are_told_apart_by_folder(tmp_path, capsys):
    for run in ("run1", "run2"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "roofs.json").write_text((ROOFS / "h100.json").read_text())
    rc = main([str(tmp_path / "run1" / "roofs.json"), str(tmp_path / "run2" / "roofs.json"),
               "-o", str(tmp_path / "c.png")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "[1] NVIDIA H100 80GB HBM3 [run1/roofs]" in out and "[2] NVIDIA H100 80GB HBM3 [run2/roofs]" in out


def test_path_labels_use_the_shortest_distinguishing_end_of_each_path():
    assert path_labels(["/r/a/x/roofs.json", "/r/b/x/roofs.json", "/r/c/roofs.json", "/r/h100.json"]) == \
        ["a/x/roofs", "b/x/roofs", "c/roofs", "h100"]
    assert path_labels(["/r/roofs.json", "/r/roofs.js"]) == ["/r/roofs.json", "/r/roofs.js"]


def test_the_same_file_twice_is_one_line_exit_2(tmp_path, capsys):
    h100 = str(ROOFS / "h100.json")
    assert main([h100, str(ROOFS / "." / "h100.json"), "-o", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "given twice" in err


@pytest.mark.parametrize("option", ["-o", "--csv"])
def test_an_output_folder_that_does_not_exist_is_refused_before_any_work(tmp_path, capsys, option):
    outputs = {"-o": tmp_path / "c.png", "--csv": tmp_path / "c.csv"}
    outputs[option] = tmp_path / "no-such-folder" / outputs[option].name
    assert main([str(ROOFS / "h100.json"), *(x for o, path in outputs.items() for x in (o, str(path)))]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert f"folder {tmp_path / 'no-such-folder'} does not exist" in captured.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sim
def test_compare_reads_what_measure_simulate_writes(tmp_path, capsys):
    """A file written by `ceilings.measure --simulate` (not a hand-made one) beside a real-GPU file."""
    from ceilings import measure

    sim = tmp_path / "sim.json"
    assert measure.main(["--simulate", "--quick", "--only", "dram.copy,fp32.fma", "--out", str(sim)]) == 0
    capsys.readouterr()
    csv = tmp_path / "c.csv"
    assert main([str(ROOFS / "h100.json"), str(sim), "--csv", str(csv), "-o", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr()
    assert "[sim] (SIMULATED)" in out.out and "meaningless" in out.err
    rows = {line.split(",")[0] for line in csv.read_text().splitlines()[1:]}
    assert {"dram.copy", "fp32.fma"} <= rows


@pytest.mark.parametrize("value", [1e-300, 1.8e19])
def test_a_value_at_the_end_of_float64_is_drawn_within_float_range(value, tmp_path):
    """The panel's limits are taken in decades and kept within 1e-300..1e300: a ceiling of 1e-300 in a file (a
    roofs file takes 0 to 2^64) once made tallest / bottom overflow and the axis top infinite (matplotlib: 'Axis
    limits cannot be NaN or Inf')."""
    import json

    doc = json.loads((ROOFS / "h100.json").read_text())
    next(c for c in doc["ceilings"] if c["name"] == "cublas.fp16")["value"] = value  # the only one of its name
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(doc))
    assert main([str(path), "-o", str(tmp_path / "c.png")]) == 0

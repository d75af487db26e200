"""Conservation: every view of one profile holds the same launches, kernel time, FLOPs and bytes.

The per-launch table is one view; the rows per kernel, op, nn.Module and annotation are others, and so are
the CSV and JSON that analysis.ncu writes and the roofline's table. A launch a view cannot place (no op, no
module) stays in a named row, and a row whose launches only partly have FLOPs holds the sum of what they
have: no total may differ between views. Checked on every real profile of ../shared (skipped where absent)
and every readable profile among the project's own test files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis import ncu, roofline
from analysis.ncu import kernel_table, read_profile
from analysis.roofline.__main__ import main as roofline_main
from common.errors import CeilingsError
from tests.test_torch_trace import model_events, trace

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DATA = ROOT / "tests" / "data"
# what a view sums; launches are counts (exact), the rest sums of floats in another order (to 1e-9)
TOTALS = ("time_s", "flops", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "dram_bytes", "l2_bytes",
          "l1_bytes", "alg_bytes")
BYS = ("kernel", "op", "module", "annotation")
# files of ../shared that hold no readable launches, each refused in one line for its own reason
REFUSED = {"dd2360_cc89_ncu2023.2_failed/ncu_report.txt": "every metric of every launch is missing",
           "gene_v100_ncu2020.1_csv/dram_ncuroof-time-0.ncu-rep": "needs",
           "cpu_only.pt.trace.json.gz": "without GPU kernels",
           "mi250_rocm_minitoy.json.gz": "AMD GPU"}


def _shared() -> list[Path]:
    return sorted(p for folder in ("ncu-samples", "torch-traces") for p in (SHARED / folder).rglob("*")
                  if p.is_file() and p.suffix != ".md")


def _own() -> list[Path]:
    return sorted(p for folder in ("ncu", "nsys") for p in (DATA / folder).iterdir())


def _name(path: Path) -> str:
    for folder in ("ncu-samples", "torch-traces"):
        if (SHARED / folder) in path.parents:
            return str(path.relative_to(SHARED / folder))
    return path.name


def _sums(table: pd.DataFrame) -> dict[str, float]:
    out = {"launches": int(table["launches"].sum())}
    for col in TOTALS:
        out[col] = float(table[col].sum(min_count=1)) if col in table.columns else math.nan
    return out


def _same(a: dict, b: dict, what: str) -> None:
    assert a["launches"] == b["launches"], f"{what}: launches {a['launches']} != {b['launches']}"
    for col in TOTALS:
        if math.isnan(a[col]) or math.isnan(b[col]):
            assert math.isnan(a[col]) and math.isnan(b[col]), f"{what}: {col} {a[col]} vs {b[col]}"
        else:
            assert a[col] == pytest.approx(b[col], rel=1e-9, abs=1e-300), f"{what}: {col} {a[col]} != {b[col]}"


def _recorded(path: Path, by: str) -> bool:
    """Whether some launch of the profile, as its reader gives them, has what `--by` groups by."""
    launches = read_profile(path, ranges=True)
    if by == "module":
        return bool(launches["module"].notna().any())
    if by == "annotation":
        return any(isinstance(r, tuple) and len(r) > 0 for r in launches["nvtx"])
    return True


def _conserved(path: Path, tmp_path: Path) -> None:
    expected = _sums(kernel_table([path], per_launch=True))
    for by in BYS:
        if _recorded(path, by):
            _same(_sums(kernel_table([path], by=by)), expected, f"{_name(path)} --by {by}")
        else:  # a view of one "(no module)" row would say nothing: refused
            with pytest.raises(CeilingsError, match=f"--by {by}: .*no launch"):
                kernel_table([path], by=by)
    _same(_sums(kernel_table([path], per_process=True)), expected, f"{_name(path)} --per-process")
    for by in ("kernel", "op"):
        csv, js = tmp_path / f"{by}.csv", tmp_path / f"{by}.json"
        assert ncu.main([str(path), "--by", by, "--csv", str(csv), "--json", str(js), "--force"]) == 0
        _same(_sums(pd.read_csv(csv)), expected, f"{_name(path)} --by {by} CSV")
        _same(_sums(pd.DataFrame(json.loads(js.read_text()))), expected, f"{_name(path)} --by {by} JSON")
    # the roofline keeps every row, judged or not, with the kernel table's time and FLOPs: as a table and CSV
    judged = roofline.roofline_table(roofline.target_roofs("H100 SXM"), kernel_table([path], by="op"))
    written, by = tmp_path / "roofline.csv", "module" if _recorded(path, "module") else "kernel"
    assert roofline_main(["--roofs", "H100 SXM", str(path), "--by", by, "--csv", str(written)]) == 0
    for table, what in ((judged, "roofline --by op"), (pd.read_csv(written), f"roofline --by {by} CSV")):
        assert int(table["launches"].sum()) == expected["launches"], what
        for col in ("time_s", "flops"):
            got = float(table[col].sum(min_count=1))
            assert (math.isnan(got) and math.isnan(expected[col])) or got == pytest.approx(expected[col], rel=1e-9), \
                f"{_name(path)} {what}: {col} {got} != {expected[col]}"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared is absent")
@pytest.mark.parametrize("path", _shared() if SHARED.is_dir() else [], ids=_name)
def test_every_view_of_a_real_profile_holds_the_same_totals(path, tmp_path):
    if _name(path) in REFUSED:
        with pytest.raises(CeilingsError, match=REFUSED[_name(path)]):
            kernel_table([path])
        return
    _conserved(path, tmp_path)


def _readable_own() -> list[Path]:
    readable = []
    for path in _own():
        try:
            kernel_table([path])
        except CeilingsError:  # a fixture of a refused input: its test says why
            continue
        readable.append(path)
    return readable


@pytest.mark.parametrize("path", _readable_own(), ids=_name)
def test_every_view_of_a_test_profile_holds_the_same_totals(path, tmp_path):
    _conserved(path, tmp_path)


def test_every_view_of_a_traced_model_holds_the_same_totals(tmp_path):
    """A torch trace whose launches ran in an nn.Module and a record_function range (some of them): its module
    and annotation views are drawn, the launches outside under "(no module)" / "(no annotation)"."""
    path = trace(tmp_path / "step.json.gz", model_events())
    assert _recorded(path, "module") and _recorded(path, "annotation")
    _conserved(path, tmp_path)


def test_most_test_profiles_are_checked():
    """The test above is not vacuous: nearly all the readers' fixtures are read."""
    assert len(_readable_own()) >= len(_own()) - 2


def _partly_counted(tmp_path: Path) -> Path:
    """Two launches of one kernel, FLOPs and DRAM bytes counted on the first (3 ms) only: the second (1 ms)
    came from a run that collected no counters. (Milliseconds: far above any launch floor.)"""
    header = ('"ID","Kernel Name","gpu__time_duration.sum","dram__bytes.sum",'
              '"sm__sass_thread_inst_executed_op_dfma_pred_on.sum","sm__sass_thread_inst_executed_op_dadd_pred_on.sum",'
              '"sm__sass_thread_inst_executed_op_dmul_pred_on.sum"')
    f = tmp_path / "raw.csv"
    f.write_text("\n".join([header, '"","","msecond","Gbyte","inst","inst","inst"',
                            '"0","k","3","6","100","10","0"', '"1","k","1","n/a","n/a","n/a","n/a"']) + "\n")
    return f


def test_a_row_whose_launches_partly_have_flops_keeps_them(tmp_path):
    """The kernel row and the one-group view hold the first launch's FLOPs and bytes and say they cover 3 of
    its 4 ms; rates are over those 3 ms."""
    f = _partly_counted(tmp_path)
    for by in ("kernel", "op"):
        row = kernel_table([f], by=by).iloc[0]
        assert row["flops"] == 2 * 100 + 10 and row["flops_fp64"] == 210 and row["dram_bytes"] == 6e9
        assert row["time_s"] == pytest.approx(4e-3) and row["coverage"] == pytest.approx(3 / 4)
        assert row["flop_per_s"] == pytest.approx(210 / 3e-3)  # over the launch that has them, not all 4 ms
        assert row["dram_bytes_per_s"] == pytest.approx(6e9 / 3e-3) and row["ai_dram"] == pytest.approx(210 / 6e9)


def test_the_roofline_and_whatif_judge_a_partly_counted_row_on_its_counted_time(tmp_path):
    kernels = kernel_table([_partly_counted(tmp_path)])
    home = roofline.target_roofs("H100 SXM")
    row = roofline.roofline_table(home, kernels).iloc[0]
    assert row["time_s"] == pytest.approx(4e-3) and row["coverage"] == pytest.approx(0.75)
    assert row["flop_per_s"] == pytest.approx(210 / 3e-3) and row["bound"] == "memory"
    assert row["pct_of_roof"] == pytest.approx(100 * row["time_at_roof_s"] / 3e-3)
    assert row["time_saved_s"] == pytest.approx(3e-3 - row["time_at_roof_s"])
    assert roofline.totals(roofline.roofline_table(home, kernels))["judged_time_s"] == pytest.approx(3e-3)
    from analysis import whatif
    projected = whatif.whatif_table(kernels, [home], home=home)
    assert projected["time_s"].iloc[0] == pytest.approx(3e-3)
    assert projected["speedup"].iloc[0] == pytest.approx(1.0)  # home: the projection is the measured time


def test_a_row_whose_flops_and_bytes_are_on_different_launches_is_not_judged(tmp_path):
    f = _partly_counted(tmp_path)
    # the second launch's DRAM bytes known, its FLOPs not
    f.write_text(f.read_text().replace('"1","k","1","n/a"', '"1","k","1","2"'))
    kernels = kernel_table([f])
    row = kernels.iloc[0]
    assert row["dram_bytes"] == 8e9 and row["flops"] == 210 and math.isnan(row["coverage"])
    assert math.isnan(row["ai_dram"]) and row["flop_per_s"] == pytest.approx(210 / 3e-3)
    judged = roofline.roofline_table(roofline.target_roofs("H100 SXM"), kernels)
    assert math.isnan(judged["pct_of_roof"].iloc[0])
    assert any("FLOPs and bytes are known on different launches" in w for w in judged.attrs["warnings"])


def test_a_partly_counted_row_read_back_keeps_its_rates(tmp_path):
    """This tool's own CSV read back: the row's FLOPs and DRAM bytes cover 3 of its 4 ms, so its rates are over
    those 3 ms again, not over all 4."""
    written = tmp_path / "table.csv"
    assert ncu.main([str(_partly_counted(tmp_path)), "--csv", str(written)]) == 0
    row = kernel_table([written]).iloc[0]
    assert row["coverage"] == pytest.approx(0.75) and row["time_s"] == pytest.approx(4e-3)
    assert row["flop_per_s"] == pytest.approx(210 / 3e-3)
    assert row["dram_bytes_per_s"] == pytest.approx(6e9 / 3e-3)

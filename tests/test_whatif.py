"""What-if projections onto other roofs (fixtures: tests/data/roofline; see test_roofline.py for their numbers)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from analysis import roofline, whatif
from analysis.roofline import Roofs
from tests.test_roofline import FixtureProfiles

DATA = Path(__file__).parent / "data" / "roofline"
ROOFS = DATA / "roofs.json"
KERNELS = DATA / "kernels.csv"


@pytest.fixture
def kernels() -> pd.DataFrame:
    return pd.read_csv(KERNELS)


def twice_as_fast(tmp_path) -> Path:
    """The fixture roofs with every value doubled, as another GPU."""
    doc = json.loads(ROOFS.read_text())
    doc["device"]["name"] = "Test GPU X200"
    for c in doc["ceilings"]:
        c["value"] *= 2
    path = tmp_path / "x200.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def fixture_reader(monkeypatch) -> FixtureProfiles:
    return FixtureProfiles.install(monkeypatch)


def pick(table, gpu, name):
    return table[(table["gpu"] == gpu) & (table["short_name"] == name)].iloc[0]


def test_whatif_arithmetic(tmp_path, kernels):
    home = roofline.load(ROOFS)
    x200 = roofline.target_roofs(str(twice_as_fast(tmp_path)))
    t = whatif.whatif_table(kernels, [x200], home=home)
    g = pick(t, "Test GPU X200", "gemm_kernel fp32")  # 5e9 FLOPs on 2e13 = 0.25 ms; 50 % of roof at home
    assert g["time_at_roof_s"] == pytest.approx(5e9 / 2e13)
    assert g["pct_of_roof"] == pytest.approx(50.0)
    assert g["time_at_efficiency_s"] == pytest.approx(2.5e-4 / 0.5)
    assert g["speedup"] == pytest.approx(1e-3 / 5e-4)
    e = pick(t, "Test GPU X200", "elementwise")  # 1.6e8 B on 2e12 B/s = 80 us; 80 % at home
    assert e["time_at_efficiency_s"] == pytest.approx(1.6e8 / 2e12 / 0.8)
    c = pick(t, "Test GPU X200", "copy_kernel")  # no FLOPs: bytes / bandwidth
    assert c["time_at_roof_s"] == pytest.approx(4e8 / 2e12)
    # the profiled GPU's own rows: at its own efficiency a kernel takes its measured time
    home_rows = t[t["gpu"] == "Test GPU X100 (profiled)"].dropna(subset=["time_at_efficiency_s"])
    assert list(home_rows["time_at_efficiency_s"]) == pytest.approx(list(home_rows["time_s"]))
    totals = whatif.whatif_totals(t).set_index("gpu")
    # judged kernels on X100 take 7.2 ms measured and 3.66 ms at roof; on X200 half of each
    assert totals.loc["Test GPU X100 (profiled)", "time_at_roof_s"] == pytest.approx(3.66e-3)
    assert totals.loc["Test GPU X200", "time_at_roof_s"] == pytest.approx(3.66e-3 / 2)
    assert totals.loc["Test GPU X200", "time_at_efficiency_s"] == pytest.approx(7.2e-3 / 2)
    assert totals.loc["Test GPU X200", "kernels"] == 6
    # a target's kernels it cannot judge: one warning that counts and names them
    assert [w for w in t.attrs["warnings"] if w.startswith("Test GPU X200: ")] == \
        ["Test GPU X200: 1 kernel(s) not judged: mystery_kernel: not judged (no FLOP counters)"]
    # the targets' times are projections: no "above their roof" warnings against times measured elsewhere
    assert not any("above their roof" in w for w in t.attrs["warnings"])


def test_totals_cover_the_kernels_judged_on_every_gpu(kernels):
    """Home roofs without a tensor ceiling; the target is the same GPU with one: hgemm_tensor is judged on the
    target only, mystery_kernel nowhere. Both stay out of every GPU's totals, so the same GPU shows 1.00x."""
    doc = json.loads(ROOFS.read_text())
    doc["ceilings"] = [c for c in doc["ceilings"] if c["name"] not in ("cublas.fp16", "tensor.fp16")]
    home, same = Roofs.from_doc(doc), roofline.load(ROOFS)
    totals = whatif.whatif_totals(whatif.whatif_table(kernels, [same], home=home))
    # gemm 1 ms, elementwise 0.2 ms, copy 0.5 ms, dgemm 0.5 ms, stencil 1 ms
    assert list(totals["kernels"]) == [5, 5] and list(totals["time_s"]) == pytest.approx([3.2e-3, 3.2e-3])
    assert list(totals["speedup"]) == pytest.approx([1.0, 1.0])
    assert totals.attrs["left_out"] == 2
    assert "2 kernel(s) left out of the totals" in whatif.render_totals(totals, [home, same])


def test_a_kernel_without_work_stays_out_of_the_totals(kernels):
    """0 bytes and 0 FLOPs: time at the roof 0, so no efficiency (0/0); summing its measured time without an
    efficiency time made the same GPU look faster than itself."""
    idle = kernels.iloc[:1].assign(kernel="void idle_kernel()", time_s=1e-3, flops_fp32=0.0, flops=0.0,
                                   dram_bytes=0.0, l2_bytes=0.0, l1_bytes=0.0)
    home = roofline.load(ROOFS)
    totals = whatif.whatif_totals(whatif.whatif_table(pd.concat([kernels, idle]), [home], home=home))
    assert list(totals["speedup"]) == pytest.approx([1.0])
    # mystery_kernel is not judged; idle_kernel is held to the launch floor (no launch beats it), so it has an
    # efficiency (floor / time) and stays in
    assert totals.attrs["left_out"] == 1


def test_whatif_without_home_has_no_efficiency(tmp_path, kernels):
    t = whatif.whatif_table(kernels, [roofline.target_roofs(str(twice_as_fast(tmp_path)))])
    assert set(t["gpu"]) == {"Test GPU X200"} and t["time_at_efficiency_s"].isna().all()


def test_datasheet_target(kernels):
    datasheet = pytest.importorskip("ceilings.datasheet")
    row = datasheet.find_datasheet("A100 SXM4 80GB")
    target = roofline.target_roofs("A100 SXM4 80GB", like=roofline.load(ROOFS))
    assert isinstance(target, Roofs) and not target.measured and target.device == row.display_name
    t = whatif.whatif_table(kernels, [target])
    c = pick(t, row.display_name, "copy_kernel")
    assert c["time_at_roof_s"] == pytest.approx(4e8 / row.peaks()["dram"])
    h = pick(t, row.display_name, "hgemm_tensor")  # home tensor roof is a tensor.fp16 ceiling
    assert h["time_at_roof_s"] == pytest.approx(max(2e11 / row.peaks()["tensor.fp16"], 1e9 / row.peaks()["dram"]))




def test_cli(tmp_path, fixture_reader, capsys):
    target = twice_as_fast(tmp_path)
    rc = whatif.main([str(KERNELS), "--roofs", str(ROOFS), "--on", str(target), "--csv", str(tmp_path / "w.csv")])
    out = capsys.readouterr().out
    assert rc == 0 and "Test GPU X200" in out and "2.00x" in out
    assert len(pd.read_csv(tmp_path / "w.csv")) == 2 * 7


def test_cli_bad_target_is_one_line(tmp_path, fixture_reader, capsys):
    assert whatif.main([str(KERNELS), "--on", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "missing.json" in err and err.count("\n") == 1


def test_cli_folder_target_is_one_line(tmp_path, fixture_reader, capsys):
    assert whatif.main([str(KERNELS), "--on", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--on {tmp_path}: a folder, not a roofs file" in err
    assert "closest" not in err


def test_cli_unknown_datasheet_lists_a_few_close_names(fixture_reader, capsys):
    from ceilings.datasheet import CLOSE_NAMES, load_datasheets

    assert whatif.main([str(KERNELS), "--on", "H1000 SMX"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no datasheet row matches 'H1000 SMX'; closest: h100-sxm" in err
    listed = err.split("closest: ")[1].strip().split(", ")
    assert len(listed) == CLOSE_NAMES < len(load_datasheets())


def test_cli_roofs_file_as_profile(capsys):
    assert whatif.main([str(ROOFS), "--on", str(ROOFS)]) == 2
    err = capsys.readouterr().err
    assert err == (f"python -m analysis.whatif: error: {ROOFS} is a roofs file (ceilings.measure output); "
                   f"pass it with --roofs\n")


A100_ROOFS = Path(__file__).parent / "data" / "roofs" / "a100.json"  # NVIDIA A100-SXM4-80GB, CC 8.0
H100 = {"gpu": "NVIDIA H100 80GB HBM3", "cc": "9.0", "device": "0"}


def test_target_roofs_is_the_one_of_roofline():
    assert whatif.target_roofs is roofline.target_roofs


def test_home_roofs_can_be_a_datasheet_name(kernels, fixture_reader, capsys):
    from ceilings.datasheet import find_datasheet

    sheet = find_datasheet("A100 SXM4 80GB")
    assert whatif.main([str(KERNELS), "--roofs", "A100 SXM4 80GB", "--on", str(ROOFS)]) == 0
    out, err = capsys.readouterr()
    assert f"{sheet.display_name} (profiled)" in out
    assert f"{sheet.display_name} (CC {sheet.compute_capability}): datasheet figures for {sheet.display_name} " \
           f"(not measured here)" in out
    assert f"warning: {sheet.display_name}: datasheet figures" in err


def test_csv_is_kept_without_force_and_checked_before_any_work(tmp_path, fixture_reader, capsys):
    old = tmp_path / "w.csv"
    old.write_text("old\n")
    args = [str(KERNELS), "--roofs", str(ROOFS), "--on", str(twice_as_fast(tmp_path)), "--csv", str(old)]
    assert whatif.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--csv {old} exists; pass --force" in err
    assert old.read_text() == "old\n" and fixture_reader.calls == []
    assert whatif.main([*args, "--force"]) == 0
    assert len(pd.read_csv(old)) == 2 * 7
    capsys.readouterr()
    assert whatif.main([str(KERNELS), "--on", str(ROOFS), "--csv", "-"]) == 0  # standard output: no --force
    out, err = capsys.readouterr()
    assert len(pd.read_csv(io.StringIO(out))) == 7 and "speedup" in err  # one CSV; the totals on stderr


def test_kernel_nvtx_and_time_run_reach_the_kernel_table(fixture_reader):
    assert whatif.main([str(KERNELS), "--on", str(ROOFS), "--kernel", "gemm", "--nvtx", "step", "--time-run", "2"]) == 0
    call = fixture_reader.calls[-1]
    assert (call["kernel_regex"], call["nvtx"], call["time_run"]) == ("gemm", "step", 2)


def test_home_roofs_of_another_gpu_are_the_first_warning(tmp_path, fixture_reader, capsys):
    fixture_reader.gpus = [H100]
    csv = tmp_path / "w.csv"
    assert whatif.main([str(KERNELS), "--roofs", str(A100_ROOFS), "--on", str(ROOFS), "--csv", str(csv), "-v"]) == 0
    out, err = capsys.readouterr()
    first = err.splitlines()[0]
    assert first.startswith("warning: PROFILE FROM ANOTHER GPU: the profile ran on NVIDIA H100 80GB HBM3 (CC 9.0, "
                            "device 0), the roofs are of NVIDIA A100-SXM4-80GB (CC 8.0)")
    assert f"--roofs {A100_ROOFS} must be the roofs of the GPU the profile ran on" in first
    assert out.splitlines()[-1] == "Profile: profiled on NVIDIA H100 80GB HBM3 (CC 9.0, device 0)"
    assert set(pd.read_csv(csv)["profile_gpu"]) == {"NVIDIA H100 80GB HBM3 (CC 9.0, device 0)"}


def test_targets_are_other_gpus_by_design(fixture_reader, capsys):
    fixture_reader.gpus = [H100]
    assert whatif.main([str(KERNELS), "--on", str(A100_ROOFS)]) == 0
    assert "ANOTHER GPU" not in capsys.readouterr().err


def test_totals_name_an_unknown_profile_gpu_and_print_no_nan(kernels):
    home = roofline.load(ROOFS)
    table = whatif.whatif_table(kernels.assign(time_s=float("nan")), [home], home=home)
    text = whatif.render_totals(whatif.whatif_totals(table), [home])
    assert text.splitlines()[-1] == f"Profile: profiled on unknown GPU; {roofline.GPU_NAME_HINT}"
    assert "nan" not in text.lower().split()

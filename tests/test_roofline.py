"""Roofline arithmetic, plot content and CLI, on hand-made fixtures (tests/data/roofline).

Fixture roofs (roofs.json): dram.read 1e12 B/s (beats dram.copy 0.9e12), l2 4e12, l1 1.6e13; fp64 5e12,
fp32 1e13 (an INVALID fp32 ceiling of 5e13 must be ignored), fp16x2 2e13, tensor: cublas.fp16 1e14 (beats
tensor.fp16 8e13); SM clock 1.5 GHz on every ceiling that has one. Kernels (kernels.csv) run at 1.2 GHz.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis import roofline
from analysis.roofline import Roofs, clocks, roofline_table, totals
from analysis.roofline import inputs as roofline_inputs
from analysis.roofline import report as roofline_report
from analysis.roofline.__main__ import main as roofline_main
from common.errors import CeilingsError, listed

DATA = Path(__file__).parent / "data" / "roofline"
ROOFS = DATA / "roofs.json"
KERNELS = DATA / "kernels.csv"
EXAMPLES = Path(__file__).parents[1] / "examples" / "published"


@pytest.fixture
def roofs() -> Roofs:
    return roofline.load(ROOFS)


@pytest.fixture
def kernels() -> pd.DataFrame:
    return pd.read_csv(KERNELS)


def doc_without(*names: str) -> dict:
    doc = json.loads(ROOFS.read_text())
    doc["ceilings"] = [c for c in doc["ceilings"] if c["name"] not in names]
    return doc


def row(table: pd.DataFrame, name: str) -> pd.Series:
    return table[table["short_name"] == name].iloc[0]


def test_roofs_take_the_best_valid_ceilings(roofs):
    assert roofs.bandwidth("dram").value == 1.0e12 and roofs.bandwidth("dram").ceiling == "dram.read"
    assert roofs.bandwidth("l2").value == 4.0e12 and roofs.bandwidth("l1").value == 1.6e13
    assert roofs.flat("fp32").value == 1.0e13  # the invalid 5e13 is ignored
    assert (roofs.flat("fp16").value, roofs.flat("fp16").ceiling) == (2.0e13, "fp16x2.fma")
    assert (roofs.flat("tensor").value, roofs.flat("tensor").ceiling) == (1.0e14, "cublas.fp16")
    assert roofs.sm_clock_hz == 1.5e9
    assert roofs.device == "Test GPU X100" and roofs.measured
    assert [s.name for s in roofs.sweeps] == ["intensity.fp32"]  # bandwidth.working_set is not an intensity


def test_ridges(roofs):
    assert roofs.ridge("fp64") == pytest.approx(5e12 / 1e12)  # 5 FLOP/B
    assert roofs.ridge("fp32") == pytest.approx(1e13 / 1e12)  # 10
    assert roofs.ridge("tensor") == pytest.approx(1e14 / 1e12)  # 100
    assert roofs.ridge("fp32", "l2") == pytest.approx(1e13 / 4e12)  # 2.5


def test_table_arithmetic_at_dram(roofs, kernels):
    t = roofline_table(roofs, kernels)
    g = row(t, "gemm_kernel fp32")  # 5e9 fp32 FLOPs, 1e8 B, 1 ms: AI 50 >= ridge 10
    assert (g["precision"], g["bound"]) == ("fp32", "compute")
    assert g["ai"] == pytest.approx(5e9 / 1e8)
    assert g["roof_flop_per_s"] == pytest.approx(1e13)  # min(1e12 * 50, 1e13)
    assert g["time_at_roof_s"] == pytest.approx(5e9 / 1e13)  # 0.5 ms
    assert g["pct_of_roof"] == pytest.approx(100 * (5e9 / 1e-3) / 1e13)  # 50 %
    assert g["time_saved_s"] == pytest.approx(1e-3 - 5e-4)
    e = row(t, "elementwise")  # 1e8 FLOPs, 1.6e8 B, 0.2 ms: AI 0.625 < 10
    assert e["bound"] == "memory"
    assert e["roof_flop_per_s"] == pytest.approx(1e12 * 0.625)
    assert e["time_at_roof_s"] == pytest.approx(1.6e8 / 1e12)
    assert e["pct_of_roof"] == pytest.approx(100 * (1e8 / 2e-4) / 6.25e11)  # 80 %
    c = row(t, "copy_kernel")  # no FLOPs: AI 0, memory-bound, bytes / bandwidth
    assert (c["precision"], c["bound"], c["ai"]) == ("none", "memory", 0.0)
    assert c["time_at_roof_s"] == pytest.approx(4e8 / 1e12)
    assert c["pct_of_roof"] == pytest.approx(100 * 4e-4 / 5e-4)
    h = row(t, "hgemm_tensor")  # tensor: 2e11 FLOPs, 1e9 B, AI 200 >= 100
    assert (h["precision"], h["bound"]) == ("tensor", "compute")
    assert h["time_at_roof_s"] == pytest.approx(2e11 / 1e14)
    d = row(t, "dgemm fp64")  # fp64: AI 10 >= 5
    assert (d["precision"], d["bound"]) == ("fp64", "compute")
    assert d["time_at_roof_s"] == pytest.approx(1e9 / 5e12)
    m = row(t, "mystery_kernel")  # no FLOP counters: kept, not judged, warned about
    assert math.isnan(m["time_at_roof_s"]) and m["time_s"] == 1e-4
    assert any("mystery_kernel" in w for w in t.attrs["warnings"])
    # ranked by time saved: hgemm 2 ms, stencil 0.6 ms, gemm 0.5 ms, dgemm 0.3, copy 0.1, elementwise 0.04
    assert list(t["short_name"]) == ["hgemm_tensor", "stencil", "gemm_kernel fp32", "dgemm fp64", "copy_kernel",
                                     "elementwise", "mystery_kernel"]
    assert row(t, "hgemm_tensor")["share"] == pytest.approx(4e-3 / 7.3e-3)


def test_totals(roofs, kernels):
    t = totals(roofline_table(roofs, kernels))
    assert t["time_s"] == pytest.approx(1e-3 + 2e-4 + 5e-4 + 4e-3 + 5e-4 + 1e-4 + 1e-3)
    assert t["time_at_roof_s"] == pytest.approx(5e-4 + 1.6e-4 + 4e-4 + 2e-3 + 2e-4 + 4e-4)
    assert t["time_saved_s"] == pytest.approx(5e-4 + 4e-5 + 1e-4 + 2e-3 + 3e-4 + 6e-4)
    assert (t["kernels"], t["judged"]) == (7, 6)


def test_hierarchical_takes_the_slowest_level(roofs, kernels):
    t = roofline_table(roofs, kernels, level="all")
    s = row(t, "stencil")  # dram 2e8/1e12 = 0.2 ms, l2 2e9/4e12 = 0.5 ms, l1 4e9/1.6e13 = 0.25, fp32 4e9/1e13 = 0.4
    assert (s["level"], s["bound"]) == ("l2", "memory")
    assert s["time_at_roof_s"] == pytest.approx(5e-4)
    assert s["ai"] == pytest.approx(4e9 / 2e9)
    assert row(roofline_table(roofs, kernels), "stencil")["bound"] == "compute"  # at DRAM alone: 0.4 > 0.2 ms
    g = row(t, "gemm_kernel fp32")  # l2 1e9/4e12 = 0.25 ms, l1 0.25 ms, compute 0.5 ms
    assert (g["bound"], g["time_at_roof_s"]) == ("compute", pytest.approx(5e-4))


def test_precision_override(roofs, kernels):
    t = roofline_table(roofs, kernels, precision="fp64")
    g = row(t, "gemm_kernel fp32")  # against fp64 5e12: 5e9 / 5e12 = 1 ms = its time
    assert (g["precision"], g["pct_of_roof"]) == ("fp64", pytest.approx(100.0))
    assert row(t, "copy_kernel")["precision"] == "none"


def test_missing_flat_and_missing_levels(kernels):
    no_tensor = Roofs.from_doc(doc_without("cublas.fp16", "tensor.fp16"))
    t = roofline_table(no_tensor, kernels)
    assert math.isnan(row(t, "hgemm_tensor")["time_at_roof_s"])
    assert any("hgemm_tensor" in w and "tensor" in w for w in t.attrs["warnings"])
    with pytest.raises(CeilingsError, match="l2"):
        roofline_table(Roofs.from_doc(doc_without("l2.read")), kernels, level="l2")
    with pytest.raises(CeilingsError, match="DRAM"):
        Roofs.from_doc(doc_without("dram.read", "dram.copy"))


def test_valid_ceiling_of_zero_is_rejected(tmp_path, fixture_reader, capsys):
    doc = json.loads(ROOFS.read_text())
    i = [c["name"] for c in doc["ceilings"]].index("dram.read")
    doc["ceilings"][i]["value"] = 0
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(doc))
    assert roofline_main(["--roofs", str(path), str(KERNELS), "--no-datasheet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: roofs.ceilings[{i}] (dram.read).value: 0 in a valid ceiling" in err
    doc["ceilings"][i]["valid"] = False  # an invalid ceiling may record 0; the roofs then use dram.copy
    path.write_text(json.dumps(doc))
    assert roofline.load(path).bandwidth("dram").ceiling == "dram.copy"


@pytest.mark.parametrize("value, text", [(999.7e-6, "1 ms"), (999.4e-6, "999 µs"), (0.9997, "1 s"),
                                         (999.7e-9, "1 µs"), (1.2345e-3, "1.23 ms"), (0.0, "0 ns")])
def test_seconds_picks_the_unit_after_rounding(value, text):
    assert roofline.seconds(value) == text


def test_clock_check_and_scaling(roofs, kernels):
    clock = clocks.profile_sm_clock(kernels)
    assert clock == 1.2e9  # every kernel with a clock ran at 1.2 GHz
    assert "1.200 GHz" in clocks.clock_warning(roofs, clock)  # 20 % off
    assert clocks.clock_warning(roofs, 1.5e9 * 1.04) is None  # within 5 %
    scaled = roofs.scaled_to_clock(clock)
    assert scaled.flat("fp32").value == pytest.approx(1e13 * 1.2 / 1.5)
    assert scaled.bandwidth("dram").value == 1e12
    g = row(roofline_table(scaled, kernels), "gemm_kernel fp32")
    assert g["time_at_roof_s"] == pytest.approx(5e9 / 8e12)


def test_clock_warning_says_which_way_and_why(roofs):
    slower = clocks.clock_warning(roofs, 1.2e9)  # 1.2 / 1.5: 20 % below
    assert "1.200 GHz (median over kernels), 20% below the roofs' 1.500 GHz" in slower
    for cause in ("`--clock-control base` locks the SM clock to base", "`--clock-control none`",
                  "python -m analysis.profile", "throttled"):
        assert cause in slower
    faster = clocks.clock_warning(roofs, 1.8e9)  # 1.8 / 1.5: 20 % above
    assert "1.800 GHz (median over kernels), 20% above the roofs' 1.500 GHz" in faster
    assert "measured at a lower clock" in faster and "python -m ceilings.measure" in faster
    assert "compute roofs are low" in faster and "--clock-control" not in faster
    for warning in (slower, faster):
        assert "--scale-clock scales the compute roofs" in warning and "bandwidth roofs are not scaled" in warning


def test_provenance_never_claims_a_measurement(roofs):
    doc = json.loads(ROOFS.read_text())
    doc["simulated"] = True
    assert Roofs.from_doc(doc).provenance.startswith("SIMULATED — not a measurement")
    published = roofline.load(EXAMPLES / "roofs.json")
    assert not published.simulated and "not measured here" in published.provenance
    assert roofs.provenance.startswith("measured roofs")


# ---- the plot ---------------------------------------------------------------------------------------------

def draw(roofs, table, **kw):
    from analysis.plot import roofline_figure

    fig = roofline_figure(roofs, table, **kw)
    return fig, fig.axes[0]


def by_gid(artists, prefix):
    return [a for a in artists if (a.get_gid() or "").startswith(prefix)]


def legend(ax) -> list[tuple[str, str, str]]:
    """(label, marker, line style) of every legend entry; a colour swatch is ("label", "patch", "patch")."""
    out = []
    for handle, text in zip(ax.get_legend().legend_handles, ax.get_legend().get_texts()):
        if hasattr(handle, "get_marker"):
            out.append((text.get_text(), str(handle.get_marker()), handle.get_linestyle()))
        else:
            out.append((text.get_text(), "patch", "patch"))
    return out


def drawn_levels(ax) -> set[str]:
    """The levels of the kernel markers drawn in a hierarchical plot (gid kernels:<precision>:<level>)."""
    return {c.get_gid().split(":")[2] for c in by_gid(ax.collections, "kernels:")}


def test_plot_has_roofs_ridges_and_kernels(roofs, kernels):
    table = roofline_table(roofs, kernels)
    datasheet = Roofs(device="Sheet X100", bandwidths=(roofline.Roof("dram", 1.2e12, "datasheet"),),
                      flats=(roofline.Roof("fp32", 1.2e13, "datasheet"),), sm_clock_hz=None)
    _, ax = draw(roofs, table, datasheet=datasheet, top=3, sweep=True)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    lines = {a.get_gid(): a for a in ax.lines}
    for gid in ("roof:dram", "roof:l2", "roof:l1", "roof:fp64", "roof:fp32", "roof:fp16", "roof:tensor"):
        assert gid in lines
    # the fp32 flat starts at its ridge (10 FLOP/B) at 1e13 FLOP/s
    x, y = lines["roof:fp32"].get_data()
    assert (x[0], y[0], y[-1]) == (pytest.approx(10), 1e13, 1e13)
    assert tuple(lines["ridge:tensor"].get_data()) == ([100.0], [1e14])
    texts = [t.get_text() for t in ax.texts]
    assert "fp32 ridge 10 FLOP/B" in texts and "tensor ridge 100 FLOP/B" in texts and "fp64 ridge 5 FLOP/B" in texts
    assert lines["datasheet:fp32"].get_linestyle() == "--" and lines["datasheet:fp32"].get_ydata()[0] == 1.2e13
    assert len(lines["sweep:intensity.fp32"].get_xdata()) == 4
    fp32 = by_gid(ax.collections, "kernels:fp32")[0]
    # gemm (50, 5e12), elementwise (0.625, 5e11), stencil (20, 4e12); copy (AI 0) and mystery cannot be drawn
    assert sorted(map(tuple, fp32.get_offsets().tolist())) == [(0.625, 5e11), (20.0, 4e12), (50.0, 5e12)]
    tensor = by_gid(ax.collections, "kernels:tensor")[0]
    assert tensor.get_sizes()[0] == pytest.approx(16 + 4e-3 / 7.3e-3 * 1400)  # area by share of time
    labels = [t.get_text() for t in by_gid(ax.texts, "kernel-label")]
    assert sorted(labels) == ["gemm_kernel fp32 (14%)", "hgemm_tensor (55%)", "stencil (14%)"]  # 4, 1, 1 ms
    note = by_gid(ax.texts, "note:not-drawn")[0].get_text()
    assert "1 kernel(s) without FLOPs" in note and "1 kernel(s) whose FLOPs, bytes or time are unknown" in note
    assert "Test GPU X100" in ax.get_title(loc="left")
    # drawn: fp64 (dgemm), fp32 and tensor kernels as circles, ridge points, datasheet dashes, the sweep
    assert legend(ax) == [("fp64", "o", "None"), ("fp32", "o", "None"), ("tensor", "o", "None"),
                          ("marker area ∝ share of time", "None", "-"), ("roof ridge point", "D", "None"),
                          ("datasheet: Sheet X100", "None", "--"), ("measured intensity sweep", ".", ":")]


def test_hierarchical_plot_joins_levels(roofs, kernels):
    _, ax = draw(roofs, roofline_table(roofs, kernels, level="all"), level="all", top=0)
    joins = {a.get_gid(): a for a in by_gid(ax.lines, "hier:")}
    stencil = joins["hier:void stencil<3>(float const*, float*)"]
    # L1 AI 4e9/4e9 = 1, L2 4e9/2e9 = 2, DRAM 4e9/2e8 = 20, all at 4e12 FLOP/s
    assert list(stencil.get_xdata()) == [1.0, 2.0, 20.0] and set(stencil.get_ydata()) == {4e12}
    assert by_gid(ax.collections, "kernels:fp32:l2") and by_gid(ax.collections, "kernels:fp32:l1")
    assert not by_gid(ax.texts, "kernel-label")
    assert [entry[:2] for entry in legend(ax)[3:6]] == [("DRAM intensity", "o"), ("L2 intensity", "s"),
                                                        ("L1 intensity", "^")]


def test_hierarchical_legend_shows_the_level_markers_drawn_and_no_other(kernels):
    """Roofs without an L1 ceiling: no L1 points, no L1 entry (kernels with L2 bytes: gemm, elementwise,
    stencil, all fp32). Then full roofs but only kernels without L2/L1 bytes (hgemm, dgemm): DRAM only."""
    no_l1 = Roofs.from_doc(doc_without("l1.read"))
    _, ax = draw(no_l1, roofline_table(no_l1, kernels, level="all"), level="all", top=0)
    assert drawn_levels(ax) == {"dram", "l2"}
    assert legend(ax) == [("fp64", "patch", "patch"), ("fp32", "patch", "patch"), ("tensor", "patch", "patch"),
                          ("DRAM intensity", "o", "None"), ("L2 intensity", "s", "None"),
                          ("marker area ∝ share of time", "None", "-"), ("roof ridge point", "D", "None")]
    full = Roofs.from_doc(json.loads(ROOFS.read_text()))
    dram_only = kernels[kernels["kernel"].isin(["hgemm_tensor", "void dgemm<double>(double const*, double*, int)"])]
    _, ax = draw(full, roofline_table(full, dram_only, level="all"), level="all", top=0)
    assert drawn_levels(ax) == {"dram"}
    assert [label for label, *_ in legend(ax)] == ["fp64", "tensor", "DRAM intensity", "marker area ∝ share of time",
                                                   "roof ridge point"]


def test_level_all_names_the_levels_the_roofs_lack(kernels):
    no_caches = Roofs.from_doc(doc_without("l1.read", "l2.read"))
    warned = [w for w in roofline_table(no_caches, kernels, level="all").attrs["warnings"] if "--level all" in w]
    assert len(warned) == 1
    assert "no valid l2 or l1 bandwidth ceiling" in warned[0] and "against dram only" in warned[0]
    assert "l2.read/l1.read with `python -m ceilings.measure`" in warned[0]
    full = Roofs.from_doc(json.loads(ROOFS.read_text()))
    assert not any("--level all" in w for w in roofline_table(full, kernels, level="all").attrs["warnings"])


def test_plot_with_dram_roof_only_and_no_kernel_on_it(kernels):
    """Nothing but the DRAM slope to place (copy: no FLOPs; mystery: no counters): the slope sets the range."""
    dram_only = Roofs(device="X", bandwidths=(roofline.Roof("dram", 1e12, "dram.read"),), flats=(), sm_clock_hz=None)
    off_plot = kernels[kernels["kernel"].isin(["copy_kernel", "mystery_kernel"])]
    _, ax = draw(dram_only, roofline_table(dram_only, off_plot))
    (x_lo, x_hi), (y_lo, y_hi) = ax.get_xlim(), ax.get_ylim()
    assert y_lo <= 1e12 * x_lo < 1e12 * x_hi <= y_hi  # the whole slope is inside
    assert by_gid(ax.lines, "roof:dram") and not by_gid(ax.collections, "kernels:")
    assert legend(ax) == []  # no kernel marker, no ridge point (no flats), no datasheet, no sweep


def test_legend_has_no_sweep_entry_without_sweeps(kernels):
    doc = json.loads(ROOFS.read_text())
    doc["sweeps"] = []
    bare = Roofs.from_doc(doc)
    _, ax = draw(bare, roofline_table(bare, kernels), sweep=True)
    assert not by_gid(ax.lines, "sweep:") and "measured intensity sweep" not in [e[0] for e in legend(ax)]


def label_boxes(fig, ax):
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    out = {}
    for t in ax.texts:
        t.get_window_extent(renderer)  # positions an annotation
        out[(t.get_gid(), t.get_text())] = Text.get_window_extent(t, renderer)
    return out


def marker_boxes(fig, ax):
    from matplotlib.transforms import Bbox

    boxes = []
    for c in by_gid(ax.collections, "kernels:"):
        centers = ax.transData.transform(c.get_offsets())
        radii = (c.get_sizes() ** 0.5) / 2 * fig.dpi / 72
        boxes += [Bbox.from_extents(x - r, y - r, x + r, y + r) for (x, y), r in zip(centers, radii)]
    return boxes


def overlap(a, b) -> float:
    w, h = min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


@pytest.mark.parametrize("case", ["fixture", "published", "hierarchical"])
def test_labels_do_not_overprint_each_other_and_stay_inside(case, roofs, kernels):
    if case == "published":
        roofs = roofline.load(EXAMPLES / "roofs.json")
        kernels = roofline_inputs.read_kernels([EXAMPLES / "profile.csv"])
    level = "all" if case == "hierarchical" else "dram"
    fig, ax = draw(roofs, roofline_table(roofs, kernels, level=level), level=level, top=10,
                   datasheet=roofline.datasheet_roofs(roofs))
    boxes = label_boxes(fig, ax)
    inside = ax.get_window_extent()
    labels = {k: b for k, b in boxes.items() if k[0] != "note:not-drawn"}
    flat_labels = [t for t in by_gid(ax.texts, "roof-label:") if t.get_gid().split(":")[1] in roofline.PRECISIONS]
    assert len(by_gid(ax.texts, "ridge-label:")) == len(roofs.flats) == len(flat_labels)
    keys = list(labels)
    for i, a in enumerate(keys):
        box = labels[a]
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1, a
        for b in keys[i + 1:]:
            assert overlap(box, labels[b]) == 0, (a, b)
    # ridge and roof labels do not sit on a kernel marker (beyond a sliver of its edge) and are drawn above them
    markers = marker_boxes(fig, ax)
    for key, box in labels.items():
        if key[0].startswith(("ridge-label", "roof-label")):
            assert sum(overlap(box, m) for m in markers) < 0.1 * box.width * box.height, key
    assert min(t.get_zorder() for t in ax.texts if t.get_gid() != "note:not-drawn") > \
        max(c.get_zorder() for c in ax.collections)


def test_roof_label_sits_just_above_the_left_end_of_its_flat(roofs, kernels):
    fig, ax = draw(roofs, roofline_table(roofs, kernels), top=0)
    label = by_gid(ax.texts, "roof-label:fp16")[0]
    assert label.get_text() == "fp16 20 TFLOP/s (fp16x2.fma)"
    assert label.xy == (pytest.approx(20), 2e13)  # anchored at the flat's left end: its ridge (2e13 / 1e12)
    box = label_boxes(fig, ax)[("roof-label:fp16", label.get_text())]
    x, y = ax.transData.transform((20, 2e13))
    assert box.x0 > x and 0 < box.y0 - y < 10  # right of the ridge point, just above the line


def test_simulated_title(kernels):
    doc = json.loads(ROOFS.read_text())
    doc["simulated"] = True
    sim = Roofs.from_doc(doc)
    _, ax = draw(sim, roofline_table(sim, kernels))
    assert "SIMULATED — not a measurement" in ax.get_title(loc="left")


# ---- the CLI ----------------------------------------------------------------------------------------------

class FixtureProfiles:
    """Stands in for analysis.ncu.kernel_table: reads a kernel-table CSV (KERNEL_COLUMNS) and sets the attrs
    kernel_table sets (`gpus`, `warnings`: give them before the call); records the keywords of every call."""

    def __init__(self):
        self.gpus: list[dict] = []
        self.warnings: list[str] = []
        self.calls: list[dict] = []
        self.empty = False  # return no kernels (as a --kernel that matches nothing would)

    def __call__(self, paths, nsys=None, per_launch=False, **options):
        self.calls.append({"paths": paths, "nsys": nsys, **options})
        table = pd.read_csv(paths[0])
        table = table.iloc[:0] if self.empty else table
        table.attrs.update(gpus=list(self.gpus), warnings=list(self.warnings))
        return table

    @classmethod
    def install(cls, monkeypatch) -> FixtureProfiles:
        from analysis import ncu

        reader = cls()
        monkeypatch.setattr(ncu, "kernel_table", reader)
        return reader


@pytest.fixture
def fixture_reader(monkeypatch) -> FixtureProfiles:
    """The CLIs read profiles through analysis.roofline.inputs.read_kernels and analysis.ncu.kernel_table; here
    the fixture kernel table stands in for the latter."""
    return FixtureProfiles.install(monkeypatch)


def test_cli_writes_picture_report_and_table(tmp_path, fixture_reader, capsys):
    out = tmp_path / "r.svg"
    rc = roofline_main(["--roofs", str(ROOFS), str(KERNELS), "-o", str(out), "--report", str(tmp_path / "r.md"),
                        "--csv", str(tmp_path / "k.csv"), "--no-datasheet", "--level", "all", "--sweep"])
    assert rc == 0 and out.read_text().startswith("<?xml")
    table = pd.read_csv(tmp_path / "k.csv")
    assert len(table) == 7 and {"kernel", "short_name", "share", "pct_of_roof", "time_saved_s"} <= set(table.columns)
    report = (tmp_path / "r.md").read_text()
    assert "## Kernels by potential saving" in report and "without floating-point work" in report
    assert "1.200 GHz" in capsys.readouterr().err  # clock warning on stderr ...
    assert "1.200 GHz" in report  # ... and in the report


def test_cli_scale_clock_and_stdout_table(fixture_reader, capsys):
    assert roofline_main(["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet", "--scale-clock"]) == 0
    out, err = capsys.readouterr()
    assert "gemm_kernel" in out and "GHz" not in err


@pytest.mark.parametrize("args, needle", [
    (["-o", "x.jpg"], "x.jpg"),
    (["--level", "l2", "--roofs", str(DATA / "nope.json")], "nope.json"),
])
def test_cli_errors_are_one_line(args, needle, fixture_reader, capsys):
    rc = roofline_main(["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet", *args])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and err.count("\n") == 1


def test_cli_level_without_its_roof(tmp_path, fixture_reader, capsys):
    path = tmp_path / "roofs.json"
    path.write_text(json.dumps(doc_without("l2.read")))
    assert roofline_main(["--roofs", str(path), str(KERNELS), "--no-datasheet", "--level", "l2"]) == 2
    assert "no valid l2 bandwidth ceiling" in capsys.readouterr().err


def test_cli_stdout_table_is_readable_and_csv_stays_in_base_units(tmp_path, fixture_reader, capsys):
    assert roofline_main(["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet"]) == 0
    head, budget, lines = capsys.readouterr().out.split("\n\n", 2)
    assert head.splitlines() == [f"roofs: Test GPU X100 (CC unknown): measured roofs ({ROOFS.name})",
                                 f"profiled on unknown GPU; {roofline.GPU_NAME_HINT}"]
    # the time budget: every second of kernel time (tests/data/roofline/kernels.csv's time_s sum to 7.3 ms)
    assert budget.splitlines()[0] == "time budget (all 7.3 ms of kernel time):"
    shares = [next(w for w in line.split() if w.endswith("%")) for line in budget.splitlines()[1:]]
    assert sum(float(w.rstrip("%")) for w in shares) == pytest.approx(100, abs=0.3)
    lines = lines.splitlines()
    assert lines[0].split() == ["#", "kernel", "precision", "bound", "AI", "(FLOP/B)", "achieved", "roof", "%", "of",
                                "roof", "time", "at", "roof", "saved", "share"]
    assert len({len(line) for line in lines[:6]}) == 1  # fixed width (rows with every column filled)
    # gemm: 5e9 FLOP in 1 ms = 5 TFLOP/s; AI 50 > fp32 ridge 10: roof 1e13; at roof 5e9 / 1e13 = 0.5 ms;
    # share 1 ms of 7.3 ms
    gemm = next(line for line in lines if "gemm_kernel" in line).split()
    assert gemm[1:] == ["gemm_kernel", "fp32", "fp32", "compute", "50", "5", "TFLOP/s", "10", "TFLOP/s", "50.0%", "1",
                        "ms", "500", "µs", "500", "µs", "13.7%"]
    assert roofline_main(["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet", "--csv", str(tmp_path / "k.csv")]) == 0
    csv = pd.read_csv(tmp_path / "k.csv").set_index("short_name")
    assert csv.loc["gemm_kernel fp32", "time_at_roof_s"] == pytest.approx(5e-4)
    assert csv.loc["gemm_kernel fp32", "flop_per_s"] == pytest.approx(5e12)


def test_kernel_without_flops_is_shown_as_bandwidth(roofs, kernels, fixture_reader, capsys):
    # copy_kernel: 4e8 DRAM bytes in 0.5 ms = 800 GB/s against the DRAM roof 1 TB/s (dram.read): 80 %
    expected = ["copy_kernel", "none", "memory", "0", "800 GB/s", "1 TB/s", "80.0%", "500 µs", "400 µs", "100 µs",
                "6.8%"]
    report = roofline_report.render_report(roofs, roofline_table(roofs, kernels))
    row_md = next(line for line in report.splitlines() if "`copy_kernel`" in line)
    assert [c.strip().strip("`") for c in row_md.strip("|").split("|")][1:] == expected
    assert roofline_main(["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet"]) == 0
    row_text = next(line for line in capsys.readouterr().out.splitlines() if "copy_kernel" in line)
    assert " ".join(row_text.split()[1:]) == " ".join(expected)
    # against L2 (4e8 bytes / 4e12 B/s = 100 µs): 800 GB/s of 4 TB/s, 20 %
    at_l2 = roofline_report.kernel_rows(roofs, roofline_table(roofs, kernels, level="l2"))
    assert next(r for r in at_l2 if r[1] == "copy_kernel")[5:8] == ["800 GB/s", "4 TB/s", "20.0%"]


def test_sweep_without_sweeps_is_warned_about(tmp_path, fixture_reader, capsys):
    doc = json.loads(ROOFS.read_text())
    doc["sweeps"] = []
    path = tmp_path / "nosweep.json"
    path.write_text(json.dumps(doc))
    args = ["--roofs", str(path), str(KERNELS), "--no-datasheet", "--scale-clock", "--sweep"]
    assert roofline_main([*args, "--report", str(tmp_path / "r.md")]) == 0
    warned = [ln for ln in capsys.readouterr().err.splitlines() if "--sweep" in ln]
    assert len(warned) == 1 and warned[0].startswith(f"warning: --sweep: {path.name} has no intensity sweeps")
    assert f"--sweep: {path} has no intensity sweeps" in (tmp_path / "r.md").read_text()
    assert roofline_main(["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet", "--scale-clock", "--sweep"]) == 0
    assert "--sweep" not in capsys.readouterr().err  # the fixture has intensity.fp32


def test_cli_passes_on_the_kernel_table_warnings(tmp_path, fixture_reader, capsys):
    lost = "dram_bytes: missing for 1 kernel(s) because only some of their launches have it"
    fixture_reader.warnings = [lost]
    report = tmp_path / "r.md"
    assert roofline_main(["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet", "--report", str(report)]) == 0
    assert f"warning: {lost}" in capsys.readouterr().err.splitlines()
    assert f"- {lost}" in report.read_text()


def test_cli_roofs_file_as_profile(capsys):
    assert roofline_main(["--roofs", str(ROOFS), str(ROOFS), "--no-datasheet"]) == 2
    assert capsys.readouterr().err == (f"python -m analysis.roofline: error: {ROOFS} is a roofs file "
                                       f"(ceilings.measure output); pass it with --roofs\n")


# ---- with the real parser and datasheet (the example of examples/published) --------------------------------

def test_published_example_end_to_end(tmp_path, capsys):
    pytest.importorskip("analysis.ncu")
    pytest.importorskip("ceilings.datasheet")
    out = tmp_path / "r.png"
    rc = roofline_main(["--roofs", str(EXAMPLES / "roofs.json"), str(EXAMPLES / "profile.csv"), "-o", str(out),
                        "--report", str(tmp_path / "r.md")])
    assert rc == 0 and out.stat().st_size > 10_000
    report = (tmp_path / "r.md").read_text()
    assert "not measured here" in report
    # ampere_sgemm: 2 x 68,719,476,736 FFMA + 16,777,216 FMUL in 2.79 ms against 66.9 TFLOP/s
    flops = 2 * 68_719_476_736 + 16_777_216
    assert f"{100 * flops / 2.79e-3 / 66.9e12:.1f}%" in report


def _one_kernel(**values) -> pd.DataFrame:
    """One row shaped like the kernel table (analysis.metrics.OUTPUT_COLUMNS), unknown values NaN."""
    base = pd.read_csv(KERNELS).iloc[:1].copy()
    for col in base.columns:
        if col not in ("kernel", "launches"):
            base[col] = math.nan
    base["kernel"] = "mixed_kernel"
    for col, value in values.items():
        base[col] = value
    return base


def test_a_mixed_precision_kernel_needs_the_time_of_each_precision_at_its_flat(roofs):
    # 1e9 fp64 FLOPs at 5e12 (0.2 ms) + 1e9 fp32 at 1e13 (0.1 ms) = 0.3 ms; 1e6 B at 1e12 B/s: 1 us
    k = _one_kernel(time_s=6e-4, flops_fp64=1e9, flops_fp32=1e9, flops_fp16=0.0, flops_tensor=0.0, flops=2e9,
                    dram_bytes=1e6)
    r = roofline_table(roofs, k).iloc[0]
    assert r["bound"] == "compute"
    assert r["time_at_roof_s"] == pytest.approx(1e9 / 5e12 + 1e9 / 1e13)
    assert r["pct_of_roof"] == pytest.approx(100 * 3e-4 / 6e-4)
    # a forced --precision judges every FLOP against that one flat
    forced = roofline_table(roofs, k, precision="fp32").iloc[0]
    assert forced["time_at_roof_s"] == pytest.approx(2e9 / 1e13)


def test_negative_counts_are_not_judged(roofs):
    k = _one_kernel(time_s=1e-3, flops_fp32=-5e9, flops=-5e9, dram_bytes=1e6)
    t = roofline_table(roofs, k)
    assert math.isnan(t.iloc[0]["time_at_roof_s"])
    assert any("negative FLOP or byte counts" in w for w in t.attrs["warnings"])


def test_a_minor_precision_without_a_roof_is_charged_at_the_main_one():
    """4e9 fp32 FLOPs and 16 fp64 ones (a stray double literal), against roofs with no fp64 ceiling."""
    roofs = Roofs.from_doc(doc_without("fp64.fma"))
    k = _one_kernel(time_s=1e-3, flops_fp64=16.0, flops_fp32=4e9, flops_fp16=0.0, flops_tensor=0.0,
                    flops=4e9 + 16, dram_bytes=1e6)
    t = roofline_table(roofs, k)
    assert t.iloc[0]["time_at_roof_s"] == pytest.approx((4e9 + 16) / 1e13)
    assert any(w.startswith("mixed_kernel: fp64 (0.0% of its FLOPs) charged at the fp32 roof")
               for w in t.attrs["warnings"])


def test_unknown_total_flops_say_which_precision_is_missing(roofs):
    k = _one_kernel(time_s=1e-3, flops_fp64=0.0, flops_fp32=4e9, flops_fp16=0.0, dram_bytes=1e6)  # tensor NaN
    t = roofline_table(roofs, k)
    assert any("not judged (total FLOPs unknown: flops_tensor missing" in w for w in t.attrs["warnings"])


def test_unknown_total_with_no_known_flops_is_not_called_flop_free(roofs):
    """fp32 counted 0, the other precisions missing (tensor instructions without FLOPs): not 'none' (no FLOPs)."""
    k = _one_kernel(time_s=1e-3, flops_fp32=0.0, dram_bytes=1e6)
    t = roofline_table(roofs, k)
    assert t.iloc[0]["precision"] is None and roofline_report.kernel_rows(roofs, t)[0][2] == "unknown"
    assert any("total FLOPs unknown" in w for w in t.attrs["warnings"])


# ---- roofs from a datasheet row ---------------------------------------------------------------------------

A100_NAME = "A100 SXM4 80GB"
A100_ROOFS = Path(__file__).parent / "data" / "roofs" / "a100.json"  # NVIDIA A100-SXM4-80GB, CC 8.0


def test_roofs_can_be_a_datasheet_row_labelled_as_such_everywhere(tmp_path, fixture_reader, capsys):
    from analysis.plot import WARNING_COLOR
    from ceilings.datasheet import find_datasheet

    sheet = find_datasheet(A100_NAME)
    provenance = f"datasheet figures for {sheet.display_name} (not measured here)"
    png, md, csv = tmp_path / "r.png", tmp_path / "r.md", tmp_path / "k.csv"
    assert roofline_main(["--roofs", A100_NAME, str(KERNELS), "-o", str(png), "--report", str(md),
                          "--csv", str(csv)]) == 0
    assert f"the roofs are {provenance}" in capsys.readouterr().err
    report = md.read_text()
    assert report.startswith(f"# Roofline: {sheet.display_name}\n\n**{provenance}.**")
    assert f"- Roofs: {sheet.display_name} (CC {sheet.compute_capability}): {provenance}" in report
    table = pd.read_csv(csv)
    assert set(table["roofs_source"]) == {provenance}
    assert set(table["roofs_gpu"]) == {f"{sheet.display_name} (CC {sheet.compute_capability})"}
    copy = table.set_index("short_name").loc["copy_kernel"]
    assert copy["time_at_roof_s"] == pytest.approx(4e8 / 2039e9)  # the A100 SXM4 80GB's published 2,039 GB/s
    roofs = roofline.target_roofs(A100_NAME, option="--roofs")
    assert roofs.compute_capability == sheet.compute_capability and roofs.from_datasheet_row
    assert roofline.datasheet_roofs(roofs) is None  # the default overlay would be the roofs themselves
    _, ax = draw(roofs, roofline_table(roofs, pd.read_csv(KERNELS)))
    assert f"roofs: {provenance}" in ax.get_title(loc="left") and ax._left_title.get_color() == WARNING_COLOR


@pytest.mark.parametrize("spec, needle", [
    ("{tmp}", "--roofs {tmp}: a folder, not a roofs file"),
    ("H1000 SMX", "--roofs H1000 SMX: no such roofs file, and no datasheet row matches 'H1000 SMX'; closest:"),
])
def test_roofs_that_are_neither_file_nor_datasheet_name_are_one_line(spec, needle, tmp_path, fixture_reader,
                                                                       capsys):
    assert roofline_main(["--roofs", spec.format(tmp=tmp_path), str(KERNELS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle.format(tmp=tmp_path) in err
    assert fixture_reader.calls == []  # before reading any profile


def test_roofs_carry_the_compute_capability(roofs):
    assert roofline.load(A100_ROOFS).compute_capability == "8.0"  # device.compute_capability of the file
    assert roofs.compute_capability is None and roofs.label == "Test GPU X100 (CC unknown)"


# ---- outputs are not overwritten without --force ----------------------------------------------------------

ROOFLINE_ARGS = ["--roofs", str(ROOFS), str(KERNELS), "--no-datasheet"]


@pytest.mark.parametrize("option, name", [("-o", "r.png"), ("--report", "r.md"), ("--csv", "k.csv")])
def test_outputs_are_kept_without_force_and_checked_before_any_work(option, name, tmp_path, fixture_reader,
                                                                     capsys):
    old = tmp_path / name
    old.write_text("old\n")
    other = tmp_path / ("k.csv" if option != "--csv" else "r.md")  # a second output: not written either
    other_option = "--csv" if option != "--csv" else "--report"
    args = [*ROOFLINE_ARGS, option, str(old), other_option, str(other)]
    assert roofline_main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{option} {old} exists; pass --force" in err
    assert old.read_text() == "old\n" and not other.exists() and fixture_reader.calls == []
    assert roofline_main([*args, "--force"]) == 0
    assert old.read_bytes() != b"old\n" and other.exists()


def test_stdout_outputs_need_no_force_and_two_outputs_cannot_share_a_file(tmp_path, monkeypatch, fixture_reader,
                                                                           capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("a file named -\n")  # '-' is standard output, never this file
    assert roofline_main([*ROOFLINE_ARGS, "--csv", "-"]) == 0
    assert capsys.readouterr().out.startswith("kernel,short_name,")
    assert (tmp_path / "-").read_text() == "a file named -\n"
    assert roofline_main([*ROOFLINE_ARGS, "--csv", "same.txt", "--report", "./same.txt"]) == 2
    assert "--report ./same.txt and --csv same.txt are the same file" in capsys.readouterr().err
    assert not (tmp_path / "same.txt").exists()


# ---- which kernels: --kernel, --nvtx, --time-run, --by --------------------------------------------------

def test_kernel_nvtx_and_time_run_reach_the_kernel_table(fixture_reader):
    assert roofline_main([*ROOFLINE_ARGS, "--kernel", "gemm", "--nvtx", "step 3", "--time-run", "1", "--by", "op",
                          "--include-early", "--max-inflated", "20"]) == 0
    assert fixture_reader.calls[-1] | {"paths": None} == {"paths": None, "nsys": None, "kernel_regex": "gemm",
                                                          "nvtx": "step 3", "time_run": 1, "by": "op",
                                                          "include_early": True, "flops": "executed",
                                                          "max_inflated": 20.0}
    assert roofline_main(ROOFLINE_ARGS) == 0
    assert fixture_reader.calls[-1] == {"paths": [str(KERNELS)], "nsys": None, "kernel_regex": None, "nvtx": None,
                                        "time_run": None, "by": "kernel", "include_early": False,
                                        "flops": "executed", "max_inflated": None}


def test_no_kernel_left_names_the_filters(fixture_reader, capsys):
    fixture_reader.empty = True
    assert roofline_main([*ROOFLINE_ARGS, "--kernel", "nomatch", "--nvtx", "step"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{KERNELS}: no kernels found with --kernel 'nomatch' and --nvtx 'step'" in err


# ---- which GPU the profile came from ----------------------------------------------------------------------

H100 = {"gpu": "NVIDIA H100 80GB HBM3", "cc": "9.0", "device": "0"}
A100 = {"gpu": "NVIDIA A100-SXM4-80GB", "cc": "8.0", "device": "0"}


def test_gpu_labels():
    assert roofline.profile_device([]) == "unknown GPU"
    assert roofline.profile_device([A100, {**H100, "device": "1"}]) == \
        "NVIDIA A100-SXM4-80GB (CC 8.0, device 0); NVIDIA H100 80GB HBM3 (CC 9.0, device 1)"
    assert roofline.gpu_label({"gpu": None, "cc": None, "device": None}) == "unknown GPU (CC unknown)"


@pytest.mark.parametrize("roofs_spec, gpu, foreign", [
    (A100_ROOFS, A100, False),
    (A100_ROOFS, H100, True),
    (A100_ROOFS, {"gpu": None, "cc": "9.0"}, True),  # the compute capability alone tells them apart
    (A100_ROOFS, {"gpu": "NVIDIA A100-SXM4-40GB", "cc": "8.0"}, True),  # same CC, another part
    (A100_ROOFS, {"gpu": "NVIDIA A100-SXM4-80GB", "cc": None}, False),
    (A100_ROOFS, {"gpu": None, "cc": "8.0"}, False),  # cannot be told apart
    ("A100 SXM4 80GB", A100, False),  # datasheet name "NVIDIA A100 SXM4 80GB" against the CUDA name
    ("H100 SXM", H100, False),  # another spelling of the same datasheet row
    ("H100 SXM", {"gpu": "NVIDIA H100 PCIe", "cc": "9.0"}, True),
])
def test_a_profile_from_another_gpu_is_told_apart(roofs_spec, gpu, foreign):
    roofs = roofline.target_roofs(str(roofs_spec))
    assert (roofline.foreign_gpus(roofs, [gpu]) == [gpu]) is foreign


# the roofs' GPU (tests/data/roofs/h100.json): 132 SMs, max SM clock 1.98 GHz, 85,030,158,336 B (85 GB)
H100_FACTS = {"gpu": None, "cc": "9.0", "device": "0", "sm_count": 132.0, "max_sm_clock_hz": 1.98e9,
              "memory_bytes": 85030158336.0}
# an H20 profile that names no GPU: 78 SMs, 102e9 B (96 GB), its kernels at 1.83 GHz
H20 = {"gpu": None, "cc": "9.0", "device": "0", "sm_count": 78.0, "memory_bytes": 102e9, "sm_clock_hz": 1.83e9}


@pytest.mark.parametrize("gpu, said", [
    # a clock below the max (1.83 GHz) is no sign of another GPU: not named
    (H20, "(the profile's GPU: 78 SMs, the roofs' 132; memory 102 GB, the roofs' 85 GB)"),
    ({**H100_FACTS, "sm_count": 131.0}, "(the profile's GPU: 131 SMs, the roofs' 132)"),  # any other SM count
    ({**H100_FACTS, "max_sm_clock_hz": 1.7e9}, "(the profile's GPU: max SM clock 1.7 GHz, the roofs' 1.98 GHz)"),
    ({**H100_FACTS, "memory_bytes": 70e9}, "(the profile's GPU: memory 70 GB, the roofs' 85 GB)"),  # 18 % under
    # 2.6 GHz is 31 % above the roofs' max: no GPU Boost goes that far
    ({**H100_FACTS, "sm_clock_hz": 2.6e9},
     "(the profile's GPU: SM clock 2.6 GHz while profiled (median), above the roofs' max 1.98 GHz)"),
])
def test_a_nameless_profile_is_told_apart_by_its_shape(gpu, said):
    roofs = roofline.load(Path(__file__).parent / "data" / "roofs" / "h100.json")
    assert roofline.foreign_gpus(roofs, [gpu]) == [gpu]
    warning = roofline.device_warning(roofs, [gpu], "remedy")
    assert warning == (f"PROFILE FROM ANOTHER GPU: the profile ran on unknown GPU (CC 9.0, device 0), the roofs are "
                       f"of NVIDIA H100 80GB HBM3 (CC 9.0) {said}: remedy")


@pytest.mark.parametrize("gpu", [
    H100_FACTS,
    {**H100_FACTS, "memory_bytes": 80e9},  # 6 % under: CUDA reports less than the marketed size
    {**H100_FACTS, "max_sm_clock_hz": 2.0e9},  # 1 % over
    {**H100_FACTS, "sm_clock_hz": 1.1e9},  # locked to a base clock, or throttled
    {**H100_FACTS, "sm_clock_hz": 2.4e9},  # 21 % over: as far as GPU Boost takes a GeForce part
    {"gpu": None, "cc": None, "device": None, "sm_count": 132.0},  # one fact alone: it agrees
])
def test_a_nameless_profile_of_the_roofs_gpu_is_not_another(gpu):
    roofs = roofline.load(Path(__file__).parent / "data" / "roofs" / "h100.json")
    assert roofline.foreign_gpus(roofs, [gpu]) == [] and roofline.device_warning(roofs, [gpu], "remedy") is None


def test_a_profile_of_the_roofs_datasheet_row_is_not_another_gpu():
    """Roofs measured on an H100 SXM whose file names the GPU as its host did ("lab-7"): its datasheet row,
    matched when the roofs were read, is what a profile's GPU name is held against, not the name."""
    from dataclasses import replace

    roofs = replace(roofline.load(Path(__file__).parent / "data" / "roofs" / "h100.json"), device="lab-7")
    gpu = {"gpu": "NVIDIA H100 80GB HBM3", "cc": None, "device": "0"}
    assert roofline.foreign_gpus(roofs, [gpu]) == []
    assert roofline.foreign_gpus(roofs, [{**gpu, "gpu": "NVIDIA A100-SXM4-80GB"}]) != []


def test_a_datasheet_row_has_its_gpus_shape():
    """The H100 SXM row: 132 SMs, 1980 MHz boost clock, 80 GiB; the H20's facts differ in SMs and memory."""
    roofs = roofline.target_roofs("H100 SXM")
    assert (roofs.sm_count, roofs.max_sm_clock_hz, roofs.memory_bytes) == (132, 1980e6, 80 * 2**30)
    warning = roofline.device_warning(roofs, [H20], "remedy")
    assert "(the profile's GPU: 78 SMs, the roofs' 132; memory 102 GB, the roofs' 85.9 GB)" in warning


def test_a_profile_from_another_gpu_is_the_first_and_loud_warning(tmp_path, fixture_reader, capsys):
    from analysis.plot import WARNING_COLOR

    fixture_reader.gpus = [H100]
    md, csv = tmp_path / "r.md", tmp_path / "k.csv"
    assert roofline_main(["--roofs", str(A100_ROOFS), str(KERNELS), "--no-datasheet", "--report", str(md),
                          "--csv", str(csv)]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("warning: PROFILE FROM ANOTHER GPU: the profile ran on NVIDIA H100 80GB HBM3 (CC 9.0, "
                            "device 0), the roofs are of NVIDIA A100-SXM4-80GB (CC 8.0)")
    assert len(first) < 160 and first.endswith("…")  # the terminal's line is cut; the report holds it whole
    report = md.read_text().splitlines()
    assert report[2].startswith("**PROFILE FROM ANOTHER GPU: profiled on NVIDIA H100 80GB HBM3 (CC 9.0, device 0), "
                                "not on the roofs' NVIDIA A100-SXM4-80GB (CC 8.0).**")
    whole = report[report.index("## Warnings") + 2]
    assert whole.startswith(f"- {first.removeprefix('warning: ').removesuffix('…')}")
    assert whole.endswith(f"`python -m analysis.whatif {KERNELS} --on {A100_ROOFS} --roofs <roofs of the profiled "
                          f"GPU>`")
    assert set(pd.read_csv(csv)["profile_gpu"]) == {"NVIDIA H100 80GB HBM3 (CC 9.0, device 0)"}
    roofs, kernels = roofline.load(A100_ROOFS), pd.read_csv(KERNELS)
    kernels.attrs["gpus"] = [H100]
    _, ax = draw(roofs, roofline_table(roofs, kernels))
    title = ax.get_title(loc="left")
    assert "PROFILE FROM ANOTHER GPU: profiled on NVIDIA H100 80GB HBM3" in title
    assert ax._left_title.get_color() == WARNING_COLOR


def test_the_profiled_gpu_is_named_in_table_report_and_plot(tmp_path, fixture_reader, capsys):
    fixture_reader.gpus = [A100]
    md = tmp_path / "r.md"
    assert roofline_main(["--roofs", str(A100_ROOFS), str(KERNELS), "--no-datasheet", "--report", str(md)]) == 0
    err = capsys.readouterr().err
    assert "ANOTHER GPU" not in err and "does not say which GPU" not in err
    assert "; profiled on NVIDIA A100-SXM4-80GB (CC 8.0, device 0)\n" in md.read_text()
    assert roofline_main(["--roofs", str(A100_ROOFS), str(KERNELS), "--no-datasheet"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "profiled on NVIDIA A100-SXM4-80GB (CC 8.0, device 0)"
    roofs, kernels = roofline.load(A100_ROOFS), pd.read_csv(KERNELS)
    kernels.attrs["gpus"] = [A100]
    _, ax = draw(roofs, roofline_table(roofs, kernels))
    assert ax.get_title(loc="left").endswith("\nprofiled on NVIDIA A100-SXM4-80GB (CC 8.0, device 0)")


def test_a_profile_that_does_not_name_its_gpu_says_how_to(tmp_path, fixture_reader, capsys):
    md, csv = tmp_path / "r.md", tmp_path / "k.csv"
    assert roofline_main([*ROOFLINE_ARGS, "--report", str(md), "--csv", str(csv), "-v"]) == 0
    hint = "collect device__attribute_display_name with ncu"
    assert any("does not say which GPU it ran on" in w and hint in w for w in capsys.readouterr().err.splitlines())
    assert f"profiled on unknown GPU; {hint}" in md.read_text()
    assert set(pd.read_csv(csv)["profile_gpu"]) == {"unknown GPU"}


# ---- nothing is printed as "nan" --------------------------------------------------------------------------

def test_without_kernel_times_the_report_says_n_a_not_nan(roofs, kernels):
    timeless = kernels.assign(time_s=math.nan)
    table = roofline_table(roofs, timeless)
    assert math.isnan(totals(table)["time_s"])  # unknown, not 0
    report = roofline_report.render_report(roofs, table)
    assert "- Potential saving: n/a: no kernel has a time" in report
    assert "- Total kernel time: n/a\n" in report and "Kernels without floating-point work (1, n/a of time" in report
    _, ax = draw(roofs, table)
    texts = [report, roofline_report.render_kernels(roofs, table), *(t.get_text() for t in ax.texts)]
    assert not any(re.search(r"\bnan\b", text, re.IGNORECASE) for text in texts)


def test_without_a_judged_kernel_the_saving_is_n_a(kernels):
    dram_only = Roofs(device="X", bandwidths=(roofline.Roof("dram", 1e12, "dram.read"),), flats=(), sm_clock_hz=None)
    flops_only = kernels[kernels["kernel"].str.contains("gemm")]  # every one needs a flat the roofs lack
    report = roofline_report.render_report(dram_only, roofline_table(dram_only, flops_only))
    assert "- Potential saving: n/a: no kernel could be judged (see the warnings)" in report


# ---- analytic work at the roofs, tensor roofs per type ------------------------------------------------------

def test_time_at_roofs_of_analytic_work_by_hand():
    """The H100 datasheet row: 3.35 TB/s, bf16 tensor 989.4 TFLOP/s, fp32 66.9 TFLOP/s."""
    roofs = roofline.target_roofs("H100 SXM")
    gemm = roofline.time_at_roofs(roofs, {"tensor.bf16": 2 * 4096**3}, {"dram": 3 * 2 * 4096**2})
    assert gemm.compute_s == pytest.approx(2 * 4096**3 / 989.4e12)
    assert gemm.memory_s == pytest.approx(3 * 2 * 4096**2 / 3.35e12)
    assert gemm.bound == "compute" and gemm.time_s == gemm.compute_s and gemm.level == "dram"
    decode = roofline.time_at_roofs(roofs, {"tensor.bf16": 2 * 8e9}, {"dram": 16e9})  # batch 1: all weights once
    assert decode.bound == "memory" and decode.time_s == pytest.approx(16e9 / 3.35e12)
    mixed = roofline.time_at_roofs(roofs, {"tensor.fp8": 1e12, "fp32": 1e11}, {"dram": 1.0})
    assert mixed.compute_s == pytest.approx(1e12 / 1978.9e12 + 1e11 / 66.9e12)


def test_each_tensor_type_has_its_own_roof_and_none_borrows_another():
    roofs = roofline.target_roofs("H100 SXM")
    assert roofs.flat("tensor.fp8").value == pytest.approx(1978.9e12)
    assert roofs.flat("tensor.tf32").value == pytest.approx(494.7e12)
    assert roofs.flat("tensor").value == pytest.approx(989.4e12)  # the drawn flat: the FP16 peak key
    measured = roofline.load(Path(__file__).parent / "data" / "roofs" / "h100.json")
    assert measured.flat("tensor.fp16").ceiling == "cublas.fp16"  # tensor.fp16 (mma.sync) is invalid there
    assert measured.flat("tensor.bf16") is None
    assert roofline.time_at_roofs(measured, {"tensor.bf16": 1e9}, {"dram": 1e6}) == \
        "the roofs have no valid tensor.bf16 ceiling"


def test_a_warning_names_the_first_few_and_counts_the_rest():
    assert listed(["a", "b", "c", "d", "e", "f", "g", "h"], roofline.NAMES_SHOWN, sep=", ") == \
        "a, b, c, d, e, and 3 more"
    assert listed([1, 2, 3, 4], 3, show=lambda n: f"k{n}") == "k1; k2; k3; and 1 more"
    assert listed(["a", "b"], 3) == "a; b"


def test_kernels_above_their_roof_are_one_warning(roofs, kernels):
    """The first three kernels with their times cut to a tenth: the gemm (5e9 fp32 FLOPs, 0.5 ms at the 1e13
    flat) then takes 0.1 ms, 500 % of its roof; the elementwise (1.6e8 B, 0.16 ms at 1e12 B/s) 0.02 ms, 800 %;
    the copy (4e8 B, 0.4 ms) 0.05 ms, 800 %. One line names them all."""
    fast = kernels.head(3).assign(time_s=kernels["time_s"].head(3) / 10)
    said = [w for w in roofline_table(roofs, fast).attrs["warnings"] if "above their roof" in w]
    assert said == ["3 kernel(s) run above their roof (gemm_kernel fp32 at 500%, elementwise at 800%, copy_kernel at "
                    "800% of it); the roofs may be low (clock, incomplete run) or the counters wrong: their % of roof "
                    "and saving are not given"]
    # no row is shown above 100 % of a roof: the roof or the counters are wrong there
    judged = roofline_table(roofs, fast)
    assert judged["pct_of_roof"].isna().all() and judged["time_saved_s"].isna().all()
    assert judged["time_at_roof_s"].notna().all()
    assert not any("above their roof" in w for w in roofline_table(roofs, kernels).attrs["warnings"])

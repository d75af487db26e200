"""The roofline's time budget (analysis.roofline.budget): all of a profile's kernel time, by class and cause,
summing to the kernel time the profile holds; the timeline (busy, window, overlap) of traces; --json.

Expected times are read off the inputs (the trace's JSON events, the hand-written launches), never from the
code under test."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from analysis.roofline import inputs, roofline_table, target_roofs
from analysis.roofline.__main__ import main as roofline_main
from analysis.roofline.budget import CLASSES, COLLECTIVES, COMMUNICATION, PLACED, UNPLACED, application, time_budget
from tests.test_torch_trace import A100, trace, x

SHARED = Path(__file__).resolve().parents[2] / "shared"
TRACES = SHARED / "torch-traces"
SAMPLES = SHARED / "ncu-samples"
A100_TRACE = TRACES / "a100_80gb_shapes_rank0.json.gz"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/torch-traces is absent")
ROOFS = "A100 SXM4 80GB"


def trace_kernels(path: Path) -> list[dict]:
    """The kernel events of a trace as its JSON holds them."""
    doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]


def budget_of(paths, roofs=ROOFS):
    table = roofline_table(target_roofs(roofs), inputs.read_kernels(list(paths)))
    return table, time_budget(table)


def shared_profiles() -> list[Path]:
    found = sorted(TRACES.glob("*.json.gz")) if TRACES.is_dir() else []
    found += sorted(p for p in SAMPLES.rglob("*") if p.is_file() and p.suffix in (".csv", ".txt", ".pro", ".profile",
                                                                                  ".log")) \
        if SAMPLES.is_dir() else []
    return found


@pytest.mark.parametrize("path", shared_profiles(), ids=lambda p: p.name)
def test_the_budget_sums_to_all_of_the_kernel_time_of_every_shared_profile(path):
    from common.errors import CeilingsError

    try:
        table, budget = budget_of([path])
    except CeilingsError as e:  # not a profile with kernels (a failed run, a CPU-only trace): said in one line
        pytest.skip(f"{path.name}: {e}")
    kernel_time = float(table["time_s"].sum()) + (table.attrs["timeline"]["early_s"] or 0.0)
    assert float(budget["time_s"].sum()) == pytest.approx(kernel_time, rel=1e-6, abs=1e-12)
    if len(budget):
        assert set(budget["class"]) <= set(CLASSES) and (budget["time_s"] > 0).all()
    if path.suffix == ".gz" and "cpu_only" not in path.name:  # every kernel event of a trace is in the budget
        assert float(budget["time_s"].sum()) == pytest.approx(sum(e["dur"] for e in trace_kernels(path)) * 1e-6,
                                                              rel=1e-6)
    app = application(table, budget)
    if app["busy_time_s"] is not None:
        assert app["busy_time_s"] <= float(table["time_s"].sum()) * (1 + 1e-9)
        assert app["busy_time_s"] <= app["window_s"] * (1 + 1e-9)
        assert 0 <= app["overlap_s"] <= app["busy_time_s"]


@needs_traces
def test_the_a100_training_step_names_where_its_time_goes():
    """Read off the JSON: the NCCL kernels' time is communication; the kernels whose correlation id is older
    than the trace's first runtime call were launched before it began."""
    events = trace_kernels(A100_TRACE)
    doc = json.loads(gzip.decompress(A100_TRACE.read_bytes()))
    first = min(e["args"]["correlation"] for e in doc["traceEvents"]
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}))
    early = sum(e["dur"] for e in events if e["args"]["correlation"] < first) * 1e-6
    nccl = sum(e["dur"] for e in events if "nccl" in e["name"].lower() and e["args"]["correlation"] >= first) * 1e-6
    _, budget = budget_of([A100_TRACE])
    by = budget.groupby("class")["time_s"].sum()
    assert by[COMMUNICATION] == pytest.approx(nccl, rel=1e-6)
    assert budget.set_index("cause").at["launched before the trace began", "time_s"] == pytest.approx(early, rel=1e-6)
    placed = by[list(PLACED)].sum() / budget["time_s"].sum()
    assert 0.02 < placed < 0.2  # a training step whose NCCL and compiled graphs take most of the time
    assert by[UNPLACED] > by[list(PLACED)].sum()


def test_causes_of_a_hand_written_trace(tmp_path):
    """An mm with shapes (placed, at the launch floor), its split-K helper, an op without a model, a kernel without
    an op, a Triton kernel of a compiled graph, and an NCCL all-reduce overlapping the GEMM by 10 us."""
    events = [
        x("cpu_op", "aten::mm", 0, 100, **{"External id": 1, "Input Dims": [[256, 128], [128, 512]],
                                           "Input type": ["float", "float"]}),
        x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
        x("cuda_runtime", "cudaLaunchKernel", 20, 5, correlation=2),
        x("cpu_op", "aten::frobnicate", 200, 50, **{"External id": 2, "Input Dims": [[4]], "Input type": ["float"]}),
        x("cuda_runtime", "cudaLaunchKernel", 210, 5, correlation=3),
        x("cpu_op", "CompiledFunction", 300, 50, **{"External id": 3}),
        x("cuda_runtime", "cudaLaunchKernel", 310, 5, correlation=4),
        x("cpu_op", "c10d::allreduce_", 400, 50, **{"External id": 4}),
        x("cuda_runtime", "cudaLaunchKernel", 410, 5, correlation=5),
        x("cuda_runtime", "cudaLaunchKernel", 500, 5, correlation=6),
        x("kernel", "sgemm_128x64", 1000, 40, pid=0, tid=7, correlation=1, device=0),
        x("kernel", "splitK_reduce", 1040, 5, pid=0, tid=7, correlation=2, device=0),
        x("kernel", "frobnicate_kernel", 1050, 7, pid=0, tid=7, correlation=3, device=0),
        x("kernel", "triton_poi_fused_add_0", 1060, 9, pid=0, tid=7, correlation=4, device=0),
        x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1030, 20, pid=0, tid=8, correlation=5, device=0),
        x("kernel", "stray_kernel", 1100, 11, pid=0, tid=7, correlation=6, device=0),
    ]
    path = trace(tmp_path / "causes.pt.trace.json", events, device=A100)
    table, budget = budget_of([path])
    by_cause = budget.groupby("cause")["time_s"].sum() * 1e6
    # the mm's 2 x 256 x 128 x 512 FLOPs take 1.7 us at the A100's 19.5 TFLOP/s fp32: under the 3 us floor
    assert by_cause.to_dict() == pytest.approx({"at the launch floor": 40,
        "op helper": 5, "no op model": 7, "compiled graph": 9, "no op": 11,
        COLLECTIVES: 20})  # the all-reduce records no message size
    app = application(table, budget)
    # kernels in [1000, 1057], [1060, 1069], [1100, 1111] and the all-reduce in [1030, 1050]
    assert app["busy_time_s"] == pytest.approx((57 + 9 + 11) * 1e-6)
    assert app["window_s"] == pytest.approx(111e-6)
    # the all-reduce ran beside the GEMM [1000, 1040] and its helper [1040, 1045]: 15 us; then alone to 1050
    assert app["overlap_s"] == pytest.approx(15e-6)


@needs_traces
def test_json_holds_the_budget_and_the_application(tmp_path, capsys):
    out = tmp_path / "roofline.json"
    assert roofline_main(["--roofs", ROOFS, str(A100_TRACE), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "ceilings.roofline" and doc["version"] == 1
    rows = doc["time_budget"]
    assert {tuple(sorted(r)) for r in rows} == {("cause", "class", "remedy", "share", "time_s")}
    total = sum(e["dur"] for e in trace_kernels(A100_TRACE)) * 1e-6
    assert sum(r["time_s"] for r in rows) == pytest.approx(total, rel=1e-6)
    app = doc["application"]
    assert app["kernel_time_s"] == pytest.approx(total, rel=1e-6)
    assert app["flops"] is None and app["bytes"] is None  # most kernels' work is unknown: no total, not a guess
    assert app["busy_time_s"] <= app["window_s"]
    assert len(doc["kernels"]) == 85
    said = "of the kernel time is on the roofline, 41% on the interconnect; not placed: compiled graph 26%"
    assert said in capsys.readouterr().err
    assert roofline_main(["--roofs", ROOFS, str(A100_TRACE), "--json", str(out)]) == 2  # not overwritten


@needs_traces
def test_the_csv_gives_each_rows_part_of_the_budget(tmp_path):
    """Summed over the rows, placed + communication + unplaced is the table's kernel time (the trace's kernels
    but those launched before it began), and the NCCL row is all communication."""
    import pandas as pd

    out = tmp_path / "k.csv"
    assert roofline_main(["--roofs", ROOFS, str(A100_TRACE), "--csv", str(out)]) == 0
    rows = pd.read_csv(out)
    parts = rows[["placed_s", "communication_s", "unplaced_s"]].sum(axis=1)
    assert parts.to_numpy() == pytest.approx(rows["time_s"].to_numpy(), rel=1e-9, abs=1e-15)
    nccl = rows[rows["kernel"].str.contains("nccl", case=False)]
    assert len(nccl) and (nccl["communication_s"] == nccl["time_s"]).all()
    assert set(rows.loc[rows["unplaced_s"] > 0, "unplaced_cause"]) <= {"compiled graph", "no op", "no op model",
                                                                        "op helper"}


@needs_traces
def test_no_row_is_said_to_be_judged_on_none_of_its_time():
    """Rows of no known work held to the floor alone (a Triton kernel, a CUB sort) are latency-bound by their
    time; the warning of rows judged on part of their time names only those with some of it known."""
    table, _ = budget_of([A100_TRACE])
    partly = [w for w in table.attrs["warnings"] if "judged on the part of their time" in w]
    assert len(partly) == 1 and "(0%)" not in partly[0]


@needs_traces
def test_the_png_has_all_of_the_time_in_a_bar_under_the_roofline():
    """The bar's segments span 0 to 1 (all of the kernel time); the title says the share the roofline shows, the
    budget's placed share."""
    from analysis.plot import roofline_figure

    table, budget = budget_of([A100_TRACE])
    fig = roofline_figure(target_roofs(ROOFS), table)
    roofline, bar = fig.axes[0], fig.axes[-1]
    widths = [p.get_width() for p in bar.patches if (p.get_gid() or "").startswith("budget:")]
    assert sum(widths) == pytest.approx(1.0, abs=1e-9)
    placed = budget.loc[budget["class"].isin(PLACED), "share"].sum()
    assert f"({placed:.0%} of the kernel time" in roofline.get_title(loc="left")
    assert "communication on the link" in bar.get_xlabel()


@needs_traces
def test_the_png_names_its_rows_as_by_made_them_and_each_bar_name_fits_its_segment():
    """--by op: the legend says operators, not kernels. A segment's name stays inside the bar only where it fits
    once the layout is final: the legend beside the roofline narrows the bar after the bar is drawn (a
    30 % segment's 'launched before the trace began 30%' ran past it)."""
    from matplotlib.text import Text

    from analysis.plot import roofline_figure

    table = roofline_table(target_roofs(ROOFS), inputs.read_kernels([A100_TRACE], by="op"))
    fig = roofline_figure(target_roofs(ROOFS), table)
    assert fig.axes[0].get_legend().get_title().get_text() == "operators (dominant precision)"
    bar = fig.axes[-1]
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    segments = {p.get_gid()[len("budget:"):]: p.get_window_extent(renderer) for p in bar.patches}
    names = [t for t in bar.texts if t.get_gid() == "budget-label"]
    assert names  # the widest segment, communication on the link (41 %), is named
    for t in names:
        box, segment = Text.get_window_extent(t, renderer), segments[t.get_text().rsplit(" ", 1)[0]]
        assert segment.x0 <= box.x0 and box.x1 <= segment.x1, t.get_text()


def test_a_bar_name_is_measured_where_the_final_layout_puts_the_bar():
    """A name that fits the bar as first drawn but not once a legend outside the axes above narrows it: gone."""
    from types import SimpleNamespace

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from analysis.figure import Segment
    from analysis.plot import draw_budget, fit_budget_labels

    fig = Figure(figsize=(10, 3), layout="constrained")
    FigureCanvasAgg(fig)
    top, bar = fig.subplots(2, 1)
    draw_budget(bar, SimpleNamespace(budget=(Segment("compute-bound", 0.6, "#d95f02", True),
                                             Segment("launched before the trace began", 0.4, "#888888", False)),
                                     budget_note="a note"))
    top.plot([0, 1], label="x" * 80)
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fit_budget_labels(bar)
    fig.draw_without_rendering()
    names = [t.get_text() for t in bar.texts if t.get_gid() == "budget-label"]
    assert names == ["compute-bound 60%"]

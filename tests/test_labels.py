"""Labels on the roofline of the shared real profiles (../shared): they go to the kernels that take the most
time, and no two texts overlap, in the PNG (matplotlib text extents) and in the HTML page (element boxes in
headless Chromium, tests/cdp.py). The fixture's own checks are in test_roofline.py and test_html.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analysis import roofline
from analysis.roofline import inputs as roofline_inputs
from analysis.roofline.__main__ import main as roofline_main
from common.errors import CeilingsError
from tests.cdp import Browser, find_chromium

SHARED = Path(__file__).resolve().parents[2] / "shared"
ROOFS = "A100 SXM4 80GB"  # the GPU of most shared profiles; the others are drawn against it all the same
TOP = 10
# the profiles with kernels on the plot (FLOPs and bytes known for some); the others show roofs, legend and
# the note of what is not drawn
PLACED = ["torch-traces/a100_80gb_shapes_rank0.json.gz", "ncu-samples/einnet_a100_ncu2020.1_text/g2bmm.origin.profile",
          "ncu-samples/gene_v100_ncu2020.1_csv/out_nvroof_ncuroof_region-dgdxy-1.csv",
          "ncu-samples/torchops_a100_ncu2021_csv/nsight_virtual.csv"]
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared is absent")


def _profiles() -> list[str]:
    traces = sorted((SHARED / "torch-traces").glob("*.json.gz"))
    samples = sorted(p for p in (SHARED / "ncu-samples").glob("*/*") if p.suffix not in (".ncu-rep", ".md"))
    return [str(p.relative_to(SHARED)) for p in traces + samples]


def table_of(name: str):
    try:
        kernels = roofline_inputs.read_kernels([SHARED / name])
    except CeilingsError as e:  # an AMD or a CPU-only trace, a failed ncu run
        pytest.skip(f"{name}: {e}")
    roofs = roofline.target_roofs(ROOFS)
    return roofs, roofline.roofline_table(roofs, kernels)


def overlapping(boxes: list[tuple[str, tuple[float, float, float, float]]]) -> list[tuple[str, str]]:
    """The pairs of (name, (x0, y0, x1, y1)) boxes that share an area."""
    out = []
    for i, (a, (ax0, ay0, ax1, ay1)) in enumerate(boxes):
        for b, (bx0, by0, bx1, by1) in boxes[i + 1:]:
            if min(ax1, bx1) - max(ax0, bx0) > 0.5 and min(ay1, by1) - max(ay0, by0) > 0.5:
                out.append((a, b))
    return out


@pytest.mark.parametrize("name", _profiles() if SHARED.is_dir() else [])
def test_no_two_texts_of_the_png_overlap(name):
    from matplotlib.text import Text

    from analysis.plot import roofline_figure

    roofs, table = table_of(name)
    fig = roofline_figure(roofs, table, top=TOP)
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    legend = ax.get_legend()
    texts = [*(c for c in ax.get_children() if isinstance(c, Text)), ax.xaxis.label, ax.yaxis.label,
             *(legend.get_texts() if legend else []), *([legend.get_title()] if legend else []),
             *ax.get_xticklabels(), *ax.get_yticklabels()]
    boxes = []
    for t in texts:
        if not t.get_visible() or not t.get_text().strip():
            continue
        t.get_window_extent(renderer)  # positions an annotation's text
        e = Text.get_window_extent(t, renderer)
        boxes.append((f"{t.get_gid() or ''}:{t.get_text()[:40]}", (e.x0, e.y0, e.x1, e.y1)))
    assert overlapping(boxes) == []
    inside = ax.get_window_extent(renderer)
    for key, (x0, y0, x1, y1) in boxes:
        if key.startswith(("kernel-label", "roof-label", "ridge-label", "application-label")):
            assert inside.x0 <= x0 and x1 <= inside.x1 and inside.y0 <= y0 and y1 <= inside.y1, key
    # the labels go to the kernels that take the most time among those drawn: the largest always
    labels = {t.get_text().rsplit(" (", 1)[0] for t in ax.texts if t.get_gid() == "kernel-label"}
    drawn = table[table["flop_per_s"] > 0].nlargest(TOP, "time_s")
    assert labels <= set(drawn["short_name"]) and (name not in PLACED or drawn["short_name"].iloc[0] in labels)
    # the note of kernels not drawn covers no kernel marker
    note = [t for t in ax.texts if t.get_gid() == "note:not-drawn"]
    if note:
        e = Text.get_window_extent(note[0], renderer)
        for c in ax.collections:
            for x, y in ax.transData.transform(c.get_offsets()):
                assert not (e.x0 <= x <= e.x1 and e.y0 <= y <= e.y1)


@pytest.mark.parametrize("name", PLACED)
def test_no_roof_line_runs_through_a_kernel_label(name):
    """A roof line through a kernel label's text (its box lets the line show) reads as a strike-through: a
    kernel label has none (the line's drawn segments, sampled every pixel, against the label's text box)."""
    from matplotlib.text import Text

    from analysis.plot import roofline_figure

    roofs, table = table_of(name)
    fig = roofline_figure(roofs, table, top=TOP)
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    points = []
    for line in ax.lines:
        if (line.get_gid() or "").startswith("roof") and line.get_marker() in (None, "None", "none", ""):
            xy = ax.transData.transform(np.column_stack(line.get_data()))
            for a, b in zip(xy[:-1], xy[1:]):
                points += list(a + np.linspace(0, 1, int(np.hypot(*(b - a))) + 2)[:, None] * (b - a))
    assert points
    labels = [t for t in ax.texts if t.get_gid() == "kernel-label"]
    assert labels
    for label in labels:
        label.get_window_extent(renderer)
        e = Text.get_window_extent(label, renderer)
        through = [(x, y) for x, y in points if e.x0 < x < e.x1 and e.y0 < y < e.y1]
        assert through == [], label.get_text()


def test_the_a100_trace_names_its_rows_apart():
    """Eight rows read `vectorized_elementwise_kernel` before: now each row of the table has its own name."""
    _, table = table_of(PLACED[0])
    assert table["short_name"].is_unique
    assert "elementwise mul fp32 (scalar first vec4)" in set(table["short_name"])  # the largest drawn, 2.1 %


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if find_chromium() is None:
        pytest.skip("headless Chromium not found")
    with Browser(tmp_path_factory.mktemp("chromium") / "profile") as b:
        for domain in ("Runtime.enable", "Page.enable"):
            b.send(domain)
        yield b


BOXES = """(() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const name = (e) => `${e.getAttribute('class') || e.tagName}:${e.textContent.slice(0, 40)}`;
  const chart = document.querySelector('.chart svg');
  const texts = [...chart.querySelectorAll('text'), ...document.querySelectorAll('.legend-item, .legend-title')];
  const frame = box(chart.querySelector('.frame'));
  return { texts: texts.map((e) => [name(e), box(e)]), frame,
           labels: [...chart.querySelectorAll('.roof-label, .ridge-label, .kernel-label, .application-label')]
                   .map((e) => [name(e), box(e)]) };
})()"""


@pytest.mark.parametrize("name", PLACED[:3])
def test_no_two_texts_of_the_html_roofline_overlap(browser, tmp_path, name):
    """Roof, ridge, kernel and axis labels, ticks and legend entries: no two share an area, and no label
    leaves the plot (where it would be clipped, as "tensor 312 TFLOP/s (d" was)."""
    out = tmp_path / "r.html"
    assert roofline_main(["--roofs", ROOFS, str(SHARED / name), "--html", str(out)]) == 0
    browser.events.clear()  # this load's events only
    browser.send("Page.navigate", url=out.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.evaluate("document.body.dataset.ready") == "1"
    got = browser.evaluate(BOXES)
    assert overlapping([(n, tuple(b)) for n, b in got["texts"]]) == []
    x0, y0, x1, y1 = got["frame"]
    for n, (a0, b0, a1, b1) in got["labels"]:
        assert x0 <= a0 and a1 <= x1 and y0 <= b0 and b1 <= y1, n
    assert any(n.startswith("roof-label") for n, _ in got["labels"])
    doc = json.loads(out.read_text().split('id="report-data">', 1)[1].split("</script>", 1)[0])
    chart = next(s for s in doc["sections"] if s["kind"] == "chart")
    byte_cells = [row[11][0] for row in chart["table"]["rows"] if row[11][0]]
    if name.startswith("torch-traces/a100"):  # bytes from the ops' shapes: algorithmic, not DRAM counted
        # (the NCCL row's are its collectives' bus bytes)
        assert byte_cells and all(c.endswith(("(algorithmic)", "(bus)")) for c in byte_cells)
        assert sum(c.endswith("(bus)") for c in byte_cells) == 1

"""The HTML reports (common.html renders every command's pages), read as a file and opened in a real headless
Chromium (tests/cdp.py).

Fixtures: tests/data/roofline (see test_roofline.py): roofs dram 1e12 B/s, fp64 5e12, fp32 1e13, tensor 1e14
FLOP/s; seven kernels, five with FLOPs and DRAM bytes (gemm AI 50 at 5e12 FLOP/s, elementwise 0.625, hgemm
200, dgemm 10, stencil 20), copy_kernel without FLOPs and mystery_kernel without counters (both off the plot).
The stencil kernel is renamed to a hostile name: markup that would run a script if it ever became HTML.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from analysis.roofline.__main__ import main as roofline_main
from tests.cdp import Browser, find_chromium

DATA = Path(__file__).parent / "data" / "roofline"
GEMM = "void gemm_kernel<float, 128>(float const*, float*, int)"
HOSTILE = "</script><script>window.pwned=1</script><img src=x onerror=window.pwned=2>stencil<3>&amp;"
POINTS = 5
ROWS = 7
NO_CHROMIUM = ("headless Chromium not found (install Debian's chromium, e.g. `apt-get install chromium "
               "chromium-driver`, as .ci/run does, or point $CHROMIUM at one)")


def profile(tmp: Path) -> Path:
    text = (DATA / "kernels.csv").read_text().replace('"void stencil<3>(float const*, float*)"', HOSTILE)
    path = tmp / "kernels.csv"
    path.write_text(text)
    return path


def report(tmp: Path, *extra: str) -> Path:
    out = tmp / "report.html"
    assert roofline_main(["--roofs", str(DATA / "roofs.json"), str(profile(tmp)), "--html", str(out), *extra]) == 0
    return out


def data_of(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def facts_of(section: dict, row: int) -> dict:
    """A table row's cells by column label: what its point's tooltip shows."""
    return {c["label"]: cell[0] for c, cell in zip(section["table"]["columns"], section["table"]["rows"][row])}


def test_report_is_one_offline_file_and_its_data_cannot_break_out(tmp_path):
    html = report(tmp_path).read_text()
    # the hostile name ends no script and opens no tag: two scripts only, and no <img anywhere
    assert html.count("</script>") == 2 and html.count("<script") == 2 and "<img" not in html
    assert "://" not in html and "Content-Security-Policy" in html and "default-src 'none'" in html
    # the script makes no markup of text: no sink that parses HTML
    assert not any(sink in html for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"))
    doc = data_of(html)
    (sec,) = [s for s in doc["sections"] if s["kind"] == "chart"]
    names = [cells[0][0] for cells in sec["table"]["rows"]]
    assert HOSTILE in names and len(names) == ROWS  # the whole name, unchanged
    points = {names[p[0]]: p for m in sec["marks"] for p in m["points"]}
    assert len(points) == POINTS and "copy_kernel" not in points and "mystery_kernel" not in points
    assert points[GEMM][1:3] == [pytest.approx(50), pytest.approx(5e12)]  # 5e9 FLOP / 1e8 B, 5e9 FLOP / 1 ms
    facts = facts_of(sec, points[GEMM][0])
    assert (facts["launches"], facts["time"], facts["% of roof"], facts["bound"]) == ("2", "1 ms", "50.0%",
                                                                                      "compute")
    assert [r["label"] for r in sec["roofs"] if not r["slope"]] == [
        "fp64 5 TFLOP/s (fp64.fma)", "fp32 10 TFLOP/s (fp32.fma)", "fp16 20 TFLOP/s (fp16x2.fma)",
        "tensor 100 TFLOP/s (cublas.fp16)"]
    assert any("Not on the plot: 1 kernel(s) without FLOPs" in n for n in sec["notes"])


def test_plain_makes_json_values_and_rounds_floats_only_when_asked():
    import numpy as np

    from common.atomic import plain

    doc = {1: [np.float64(2 / 3), float("nan"), (np.int64(7), np.bool_(True), "x", None)], "low": -math.inf}
    assert plain(doc) == {"1": [2 / 3, None, [7, True, "x", None]], "low": None}
    assert [type(v) for v in plain(doc)["1"][2]] == [int, bool, str, type(None)]  # no numpy scalar left
    assert plain(doc, 3)["1"][0] == 0.667 and plain(12345.678, 3) == 12300.0 and plain(5, 3) == 5


def test_an_existing_report_needs_force(tmp_path, capsys):
    out = report(tmp_path)
    before = out.read_bytes()
    args = ["--roofs", str(DATA / "roofs.json"), str(tmp_path / "kernels.csv"), "--html", str(out)]
    assert roofline_main(args) == 2
    assert "--force" in capsys.readouterr().err and out.read_bytes() == before
    assert roofline_main([*args[:3], "--html", str(tmp_path / "kernels.csv"), "--force"]) == 2  # an input
    assert roofline_main([*args, "--force", "--level", "l2"]) == 0 and out.read_bytes() != before


# --- in a browser -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if find_chromium() is None:
        pytest.skip(NO_CHROMIUM)
    with Browser(tmp_path_factory.mktemp("chromium") / "profile") as b:
        for domain in ("Runtime.enable", "Log.enable", "Network.enable", "Page.enable"):
            b.send(domain)
        yield b


def load(browser: Browser, path: Path) -> Browser:
    """`path` freshly loaded; browser.events holds this load's events only."""
    browser.events.clear()
    browser.send("Page.navigate", url=path.as_uri())
    browser.wait_event("Page.loadEventFired")
    assert browser.evaluate("document.body.dataset.ready") == "1"
    return browser


@pytest.fixture
def opened(browser, tmp_path):
    """The fixture's roofline report, freshly loaded."""
    return load(browser, report(tmp_path))


def center(b: Browser, selector: str) -> tuple[float, float]:
    """The centre of the element in the viewport (scrolled into it: input events land only there)."""
    r = b.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                   f" e.scrollIntoView({{block: 'nearest'}});"
                   f" const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
    return r[0], r[1]


def row_of(b: Browser, name: str) -> int:
    return b.evaluate(f"JSON.parse(document.getElementById('report-data').textContent).sections[0].table.rows"
                      f".findIndex(r => r[0][0] === {json.dumps(name)})")


def problems(b: Browser) -> list[str]:
    """Console errors, exceptions, dialogs, and every request for anything but a file: or data: URL."""
    out = []
    for e in b.events:
        m, p = e["method"], e["params"]
        if m == "Runtime.exceptionThrown" or m == "Page.javascriptDialogOpening":
            out.append(f"{m}: {p}")
        elif m == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert", "warning"):
            out.append(f"console {p['type']}: {p['args']}")
        elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            out.append(f"log: {p['entry']}")
        elif m == "Network.requestWillBeSent" and not p["request"]["url"].startswith(("file:", "data:")):
            out.append(f"request: {p['request']['url']}")
    return out


def test_renders_offline_without_errors_and_saves_a_screenshot(opened, tmp_path):
    b = opened
    assert b.evaluate("document.querySelectorAll('svg .point').length") == POINTS
    assert b.evaluate("document.querySelectorAll('#roofline tbody tr').length") == ROWS
    assert b.evaluate("window.pwned === undefined && !document.querySelector('img')")
    urls = [e["params"]["request"]["url"] for e in b.events if e["method"] == "Network.requestWillBeSent"]
    assert urls and all(u.startswith("file:") for u in urls)
    assert problems(b) == []
    shot = b.screenshot(tmp_path / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_a_point_sits_at_its_intensity_and_hovering_it_names_its_kernel(opened):
    b = opened
    row = row_of(b, GEMM)
    x, y = center(b, f'svg .point[data-row="{row}"]')
    # the x axis is logarithmic: AI 50 lies log10(5) of the way from the "10" tick to the "100" tick
    ticks = b.evaluate("Object.fromEntries([...document.querySelectorAll('.axes text')].map(t => "
                       "[t.textContent, t.getBoundingClientRect().x + t.getBoundingClientRect().width / 2]))")
    assert x == pytest.approx(ticks["10"] + math.log10(5) * (ticks["100"] - ticks["10"]), abs=1.5)
    assert b.evaluate("document.querySelector('.tip').hidden")
    b.mouse("mouseMoved", x, y)
    assert not b.evaluate("document.querySelector('.tip').hidden")
    assert b.evaluate("document.querySelector('.tip-name').textContent") == GEMM
    tip = b.evaluate("document.querySelector('.tip dl').textContent")
    assert "launches2" in tip and "% of roof50.0%" in tip and "boundcompute" in tip
    # a small marker (elementwise: 2.7 % of the time, radius 3.7 px) answers a little beside it too
    small = row_of(b, "void elementwise<4>(int, float*)")
    sx, sy = center(b, f'svg .point[data-row="{small}"]')
    b.mouse("mouseMoved", sx + 5, sy)
    assert b.evaluate("document.querySelector('.tip-name').textContent") == "void elementwise<4>(int, float*)"
    hostile = row_of(b, HOSTILE)
    b.mouse("mouseMoved", *center(b, f'svg .point[data-row="{hostile}"]'))
    assert b.evaluate("document.querySelector('.tip-name').textContent") == HOSTILE
    assert problems(b) == []


def test_a_table_row_marks_its_point_and_a_point_its_row(opened):
    b = opened
    row = row_of(b, GEMM)
    b.click(*center(b, f'#roofline tbody tr[data-row="{row}"] td'))
    assert b.evaluate(f"document.querySelector('svg .point[data-row=\"{row}\"]').classList.contains('selected')")
    assert b.evaluate("document.querySelectorAll('svg .point.selected').length") == 1
    ring = center(b, "svg .ring")
    assert ring == pytest.approx(center(b, f'svg .point[data-row="{row}"]'), abs=1)
    other = row_of(b, "hgemm_tensor")
    b.click(*center(b, f'svg .point[data-row="{other}"]'))
    assert b.evaluate("[...document.querySelectorAll('#roofline tbody tr.sel')].map(r => +r.dataset.row)") == [other]
    assert problems(b) == []


def test_legend_filters_search_sorts_and_wheel_zooms(opened):
    b = opened
    tensor = row_of(b, "hgemm_tensor")
    labels = "[...document.querySelectorAll('.kernel-label')].map(t => t.textContent)"
    assert any(t.startswith("dgemm") for t in b.evaluate(labels))
    b.click(*center(b, "button.legend-item"))  # the first precision drawn: fp64 (dgemm)
    assert b.evaluate("document.querySelectorAll('svg .point').length") == POINTS - 1
    assert not any(t.startswith("dgemm") for t in b.evaluate(labels))  # its label goes with it
    assert b.evaluate(f"!!document.querySelector('svg .point[data-row=\"{tensor}\"]')")
    b.evaluate("(() => { const s = document.querySelector('input[type=search]'); s.value = 'GEMM';"
               " s.dispatchEvent(new Event('input')); })()")
    names = b.evaluate("[...document.querySelectorAll('#roofline tbody tr td:first-child')].map(t => t.textContent)")
    assert sorted(names) == sorted([GEMM, "hgemm_tensor", "void dgemm<double>(double const*, double*, int)"])
    b.click(*center(b, "th:nth-child(3)"))  # time, numeric: largest first
    times = b.evaluate("[...document.querySelectorAll('#roofline tbody tr td:nth-child(3)')].map(t => t.textContent)")
    assert times == ["4 ms", "1 ms", "500 µs"]
    before = center(b, f'svg .point[data-row="{tensor}"]')
    b.mouse("mouseWheel", 500, 400, deltaX=0, deltaY=-300)
    assert center(b, f'svg .point[data-row="{tensor}"]') != pytest.approx(before, abs=1)
    assert problems(b) == []


# --- the other commands' reports: one skeleton, other sections -------------------------------------------

def fleet_report(tmp: Path) -> Path:
    from ceilings import fleet
    from tests.test_fleet import docs_with_faults, write

    folder = tmp / "fleet"
    folder.mkdir()
    write(folder, docs_with_faults())
    out = tmp / "fleet.html"
    assert fleet.main([str(folder), "--html", str(out)]) == 1  # GPUs fall short
    return out


def test_fleet_report_names_the_outliers_and_shows_every_gpu(tmp_path):
    # tests/test_fleet.py: node1 GPUs 0-4 dram.read 3.00 3.10 2.90 3.05 2.00 TB/s, median 3.00: GPU 4 at 0.667
    doc = data_of(fleet_report(tmp_path).read_text())
    (strip,) = [s for s in doc["sections"] if s["kind"] == "strip"]
    row = next(r for r in strip["rows"] if r["label"].startswith("dram.read · G1"))
    assert sorted(p[0] for p in row["points"]) == pytest.approx(sorted([1.0, 3.1 / 3, 2.9 / 3, 3.05 / 3, 2 / 3]))
    assert [(p[2], p[1]) for p in row["points"] if p[4]] == [("node1:4", 1)]  # named, in the failing series
    assert strip["threshold"] == 0.9
    (outliers,) = [s for s in doc["sections"] if s["id"] == "outliers"]
    assert len(outliers["table"]["rows"]) == 5  # the five outliers of test_groups_medians_ratios_and_every_outlier


def test_fleet_report_in_the_browser(browser, tmp_path):
    b = load(browser, fleet_report(tmp_path))
    assert b.evaluate("[...document.querySelectorAll('.outlier-label')].map(t => t.textContent)") == [
        "node1:4", "node1:3", "node2:0"]
    named = b.evaluate("[...document.querySelectorAll('circle.dot.named')].map(c => c.dataset.dot)")
    b.mouse("mouseMoved", *center(b, f'circle.dot[data-dot="{named[0]}"]'))
    tips = b.evaluate("[...document.querySelectorAll('.tip')].filter(t => !t.hidden).map(t => t.textContent)")
    assert len(tips) == 1 and tips[0].startswith("node1:4") and "ratio0.667" in tips[0]
    assert problems(b) == []


def test_whatif_and_compare_reports(browser, tmp_path, capsys):
    from analysis import whatif
    from ceilings import compare

    w = tmp_path / "whatif.html"
    assert whatif.main([str(DATA / "kernels.csv"), "--roofs", str(DATA / "roofs.json"), "--on", "H100 SXM",
                        "--html", str(w)]) == 0
    doc = data_of(w.read_text())
    totals = doc["sections"][0]["table"]["rows"]
    # at home (profiled) the six judged kernels: 1 + 0.2 + 0.5 + 4 + 0.5 + 1 ms = 7.2 ms, at current efficiency too
    assert [c[0] for c in totals[0]][2::2] == ["7.2 ms", "7.2 ms"] and totals[0][5][0] == "1.00x"
    b = load(browser, w)
    assert b.evaluate("document.querySelectorAll('#kernels tbody tr').length") == 2 * ROWS
    b.evaluate("(() => { const s = document.querySelector('#kernels input[type=search]'); s.value = 'mystery';"
               " s.dispatchEvent(new Event('input')); })()")
    assert b.evaluate("document.querySelectorAll('#kernels tbody tr').length") == 2  # home and H100
    assert problems(b) == []

    c = tmp_path / "compare.html"
    assert compare.main([str(DATA / "roofs.json"), "--datasheet", "H100 SXM", "-o", str(tmp_path / "c.png"),
                         "--html", str(c)]) == 0
    doc = data_of(c.read_text())
    bandwidth = doc["sections"][0]
    dram = next(r for r in bandwidth["rows"] if r["label"] == "dram.read")
    assert [p[0] for p in dram["points"]] == [1e12, 3.35e12]  # the fixture's dram.read, the H100 SXM datasheet
    b = load(browser, c)
    assert b.evaluate("document.querySelectorAll('circle.dot').length") == sum(
        len(r["points"]) for s in doc["sections"] if s["kind"] == "strip" for r in s["rows"])
    assert problems(b) == []


def test_llm_report_ops_by_class_and_the_batch_sweep(browser, tmp_path, capsys):
    from analysis.llm.__main__ import main as llm

    out = tmp_path / "llm.html"
    assert llm(["--model", "llama-3.1-8b", "--roofs", "H100 SXM", "--batch", "1", "--sweep", "--sweep-max", "8",
                "--html", str(out)]) == 0
    doc = data_of(out.read_text())
    ops, sweep = doc["sections"][0], doc["sections"][1]
    # Llama-3.1-8B prefill embedding: 2048 tokens x 4096 hidden x 2 B (bf16) read, and as much written
    rows = [facts_of(ops, i) for i in range(len(ops["table"]["rows"]))]
    emb = next(r for r in rows if (r["op"], r["phase"]) == ("embedding", "prefill"))
    assert (emb["bytes"], emb["FLOPs"]) == ("33.6 MB", "0 FLOP")
    assert {m["filter"] for m in ops["marks"]} <= {"gemm", "attention", "norm", "elementwise"}
    assert [(r["GPU"], r["batch"]) for r in (facts_of(sweep, i) for i in range(4))] == [
        ("NVIDIA H100 SXM5 80GB (CC 9.0)", b) for b in ("1", "2", "4", "8")]
    b = load(browser, out)
    gemms = sum(len(m["points"]) for m in ops["marks"] if m["filter"] == "gemm")
    shown = b.evaluate("document.querySelectorAll('#ops-0 svg .point').length")
    b.click(*center(b, "#ops-0 button.legend-item"))  # the first op class drawn: gemm
    assert b.evaluate("document.querySelectorAll('#ops-0 svg .point').length") == shown - gemms > 0
    b.mouse("mouseMoved", *center(b, '#sweep svg .point[data-row="0"]'))
    tips = b.evaluate("[...document.querySelectorAll('.tip')].filter(t => !t.hidden).map(t => t.textContent)")
    assert len(tips) == 1 and tips[0].startswith("NVIDIA H100 SXM5 80GB (CC 9.0)batch1step time")
    assert problems(b) == []


def test_compare_axis_ticks_stand_apart(browser, tmp_path, capsys):
    """The simulator's 1 MB/s and 2 MFLOP/s beside an A100 and the H100 SXM datasheet: ten decades on each axis,
    a tick a decade, labels like "100 GFLOP/s"; the labels drawn stand apart (every few decades), and a grid
    line stays at every tick."""
    from ceilings import compare

    roofs = Path(__file__).parent / "data" / "roofs"
    c = tmp_path / "compare.html"
    assert compare.main([str(roofs / "simulated.json"), str(roofs / "a100.json"), "--datasheet", "H100 SXM",
                         "-o", str(tmp_path / "c.png"), "--html", str(c)]) == 0
    b = load(browser, c)
    shown = {}
    for sid, decades in (("compare-B/s", range(6, 13)), ("compare-FLOP/s", range(6, 16))):
        section = f"document.getElementById({json.dumps(sid)})"
        boxes = b.evaluate(f"[...{section}.querySelectorAll('.axes text:not(.axis-label)')].map(t => {{"
                           " const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right]; })")
        grid = b.evaluate(f"{section}.querySelectorAll('.axes line.grid').length")
        assert grid >= len(decades) and len(boxes) >= 3, (sid, boxes)
        assert all(a[2] < b_[1] for a, b_ in zip(boxes, boxes[1:])), boxes  # left to right, none over the next
        shown[sid] = (len(boxes), grid)
    # "1 MB/s" .. "1 TB/s" fit in full; ten "1 MFLOP/s"-wide labels do not, so only some are written
    (bw_labels, bw_ticks), (compute_labels, compute_ticks) = shown["compare-B/s"], shown["compare-FLOP/s"]
    assert bw_labels == bw_ticks and compute_labels < compute_ticks
    assert problems(b) == []


def test_the_time_budget_is_a_bar_of_all_of_the_time(opened):
    """The budget's segments span the whole bar (their widths, shares of all of the kernel time, sum to 100 %),
    each named with its share in the key under it."""
    b = opened
    widths = b.evaluate("[...document.querySelectorAll('#budget .shares-seg')].map(e => parseFloat(e.style.width))")
    assert widths and sum(widths) == pytest.approx(100, abs=1e-3)
    keys = b.evaluate("[...document.querySelectorAll('#budget .shares-item')].map(e => e.textContent)")
    assert len(keys) == len(widths) and all(k.endswith("%") for k in keys)

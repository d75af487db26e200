"""Regenerate the README's screenshot of the HTML report (docs/img/roofline-html.png).

    python scripts/html_screenshot.py [--trace ../shared/torch-traces/a100_80gb_shapes_rank0.json.gz]
                                      [--out docs/img/roofline-html.png] [--force]

The report of the same command as the PNG beside it (docs/img/torch-kernels.png, docs/torch.md section 3):
`python -m analysis.roofline --roofs 'A100 SXM4 80GB' TRACE --by kernel --html ...`, opened in headless Chromium
(tests/cdp.py), the pointer on the kernel that takes the most time (its tooltip open) and that kernel's table
row selected; the plot, legend and the first table rows are captured.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.roofline.__main__ import main as roofline_main  # noqa: E402
from common.atomic import atomic_path, check_target  # noqa: E402
from tests.cdp import Browser  # noqa: E402

TRACE = ROOT.parent / "shared" / "torch-traces" / "a100_80gb_shapes_rank0.json.gz"
WIDTH, HEIGHT = 1300, 900  # CSS pixels of the captured top of the page


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "roofline-html.png")
    p.add_argument("--force", action="store_true", help="overwrite --out")
    args = p.parse_args()
    check_target(args.out, force=args.force)  # before the work: an existing picture needs --force
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        if roofline_main(["--roofs", "A100 SXM4 80GB", str(args.trace), "--by", "kernel", "--html", str(html)]):
            return 2  # its error is printed
        with Browser(Path(tmp) / "profile", width=WIDTH, height=HEIGHT) as b:
            b.send("Page.enable")
            b.send("Page.navigate", url=html.as_uri())
            b.wait_event("Page.loadEventFired")
            # the drawn kernel with the most time: its point's centre, and its row
            row, x, y = b.evaluate("""(() => {
                const s = JSON.parse(document.getElementById('report-data').textContent).sections[0];
                const pts = s.marks.flatMap(m => m.points);
                const top = pts.reduce((a, p) => (p[3] > a[3] ? p : a));
                const r = document.querySelector(`svg .point[data-row="${top[0]}"]`).getBoundingClientRect();
                return [top[0], r.x + r.width / 2, r.y + r.height / 2];
            })()""")
            b.evaluate(f"document.querySelector('tbody tr[data-row=\"{row}\"]').click()")
            b.mouse("mouseMoved", x, y)
            shot = b.send("Page.captureScreenshot", format="png",
                          clip={"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT, "scale": 1})
    with atomic_path(args.out, force=args.force) as tmp:
        tmp.write_bytes(base64.b64decode(shot["data"]))
    print(json.dumps({"wrote": str(args.out), "row": row}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Same numbers out: the kernel tables of every real torch trace, test profile and generated nsys export, saved
once and compared byte for byte after a change to a reader.

    python scripts/same_numbers.py save DIR [--shared ../shared]    # before the change
    python scripts/same_numbers.py check DIR [--shared ../shared]   # after: every CSV byte-identical, else exit 1

Inputs: SHARED/torch-traces/* (--shared: ../shared by default), tests/data/ncu/* and tests/data/nsys/*, a small
synthetic torch trace (scripts/bench_torch.py's, two copies of a real one), and nsys exports built here
(tests/test_nsys_sqlite.py's export; scripts/bench_nsys.py's, balanced and unbalanced). Views: `analysis.ncu FILE
--csv`, with --per-launch, and --by op, module and annotation; and read_profile's NVTX / annotation ranges of every
launch (a view of its own: the CSVs show only the innermost). What is compared: each view's bytes (or its one-line
error); the warnings are compared and their differences listed, not failed on (a new warning is allowed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.ncu import main as ncu_main  # noqa: E402
from analysis.ncu import read_profile  # noqa: E402
from common.errors import CeilingsError  # noqa: E402
from scripts.bench_nsys import write_export  # noqa: E402
from scripts.bench_torch import write_trace  # noqa: E402
from tests.test_nsys_sqlite import make_export  # noqa: E402

VIEWS = {"kernel": [], "launch": ["--per-launch"], "op": ["--by", "op"], "module": ["--by", "module"],
         "annotation": ["--by", "annotation"]}


def inputs(folder: Path, shared: Path) -> dict[str, Path]:
    found = {}
    seed = shared / "torch-traces" / "a100_80gb_shapes_rank0.json.gz"
    for group in (shared / "torch-traces", ROOT / "tests" / "data" / "ncu", ROOT / "tests" / "data" / "nsys"):
        for p in sorted(group.glob("*")):
            if p.name != "MANIFEST.md":
                found[f"{group.name}/{p.name}"] = p
    if seed.is_file():
        write_trace(folder / "twice.json", 26, seed)  # the seed (25.8 MB of JSON), then one copy
        found["generated/twice.json"] = folder / "twice.json"
    found["generated/test_export.sqlite"] = make_export(folder / "test_export.sqlite")
    found["generated/bench_5k.sqlite"] = write_export(folder / "bench_5k.sqlite", 5000)
    # fewer leaked ranges than the reader keeps a launch, and more
    found["generated/unbalanced_40.sqlite"] = write_export(folder / "unbalanced_40.sqlite", 40, unbalanced=True)
    found["generated/unbalanced_200.sqlite"] = write_export(folder / "unbalanced_200.sqlite", 200, unbalanced=True)
    return found


def tables(folder: Path, shared: Path) -> dict[str, dict]:
    out = {}
    for name, path in inputs(folder, shared).items():
        for view, options in VIEWS.items():
            csv = folder / "out.csv"
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    ncu_main([str(path), "--csv", str(csv), "--force", *options])
                table = csv.read_text()
            except CeilingsError as exc:
                table = f"error: {exc}"
            said = err.getvalue().replace(str(folder), "TMP").replace(str(ROOT), "ROOT")
            out[f"{name} [{view}]"] = {"csv": table, "warnings": said}
        try:
            ranges = "\n".join(map(repr, read_profile(path)["nvtx"]))
        except CeilingsError as exc:
            ranges = f"error: {exc}"
        out[f"{name} [ranges]"] = {"csv": ranges, "warnings": ""}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "check"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    args = parser.parse_args()
    saved = args.folder / "tables.json"
    with tempfile.TemporaryDirectory() as folder:
        now = tables(Path(folder), args.shared)
    if args.action == "save":
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(now, indent=1))
        print(f"{len(now)} tables saved to {saved}")
        return 0
    before = json.loads(saved.read_text())
    differ = [k for k in before if now.get(k, {}).get("csv") != before[k]["csv"]]
    new = [k for k in now if k not in before]
    for k in before:
        if k in now and now[k]["warnings"] != before[k]["warnings"]:
            print(f"warnings differ: {k}\n  before: {before[k]['warnings']!r}\n  now:    {now[k]['warnings']!r}")
    for k in differ:
        print(f"TABLE DIFFERS: {k}")
    for k in new:
        print(f"NEW TABLE: {k}")
    print(f"{len(before) - len(differ)} of {len(before)} tables byte-identical, {len(new)} new")
    return 1 if differ or new else 0


if __name__ == "__main__":
    sys.exit(main())

"""Side by side with TraceLens: how much of a torch.profiler trace's kernel time each tool can place.

    python scripts/tracelens_compare.py TRACE... --tracelens-python TLVENV/bin/python --saved DIR

For every NVIDIA trace given (AMD ones are listed as skipped), one table row:
- ours: `python -m analysis.roofline --roofs 'H100 SXM' TRACE --json`: the time budget's compute-, memory-
  and latency-bound shares, of all of the kernel time (the JSON's `time_budget`);
- TraceLens (github.com/AMD-AGI/TraceLens, MIT): the share of the trace's `kernel` events' time (memcpy and
  memset left out) launched by an op whose row of `build_df_unified_perf_table()` has both GFLOPS and
  data moved; each kernel counted once;
- per op event TraceLens models, both FLOP and byte counts of the same event (ours from
  analysis.ops.op_work on its recorded arguments): the op with the largest ratio of each.

TraceLens is never a dependency of this project: it runs in its own virtual environment, through
--tracelens-python, once per trace; its results are saved in --saved DIR (`<trace name>.tracelens.json`) and
read from there on the next run, so re-running after our op models change takes only our side's time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.roofline.budget import ON_LINK, PLACED
from ceilings.report import format_rate
from common.atomic import write_text
from common.errors import CeilingsError, MissingDependency, cli_entry
from common.text import markdown_table
from scripts.outdir_cli import doc_parser

PROG = "tracelens_compare"
ROOFS = "H100 SXM"
INSTALL = ("install TraceLens in its own venv (python3 -m venv tlvenv && tlvenv/bin/pip install "
           "git+https://github.com/AMD-AGI/TraceLens) and pass --tracelens-python tlvenv/bin/python")

# Run by TraceLens's own interpreter (argv[1]: the trace): prints one JSON object. Uses its public API only.
TRACELENS_SIDE = r"""
import json, subprocess, sys
from pathlib import Path
import TraceLens
from TraceLens.TreePerf import TreePerfAnalyzer

analyzer = TreePerfAnalyzer.from_file(sys.argv[1])
table = analyzer.build_df_unified_perf_table()
if "GFLOPS" not in table:  # no op of the trace has a model (no shapes recorded): none placed
    table = table.iloc[0:0].assign(GFLOPS=[], **{"Data Moved (MB)": []})
event = analyzer.tree.get_UID2event
kernel_us = sum(e.get("dur", 0) for e in analyzer.tree.events if e.get("cat") == "kernel")
placed, ops = {}, {}
for _, row in table.iterrows():
    if not (row["GFLOPS"] == row["GFLOPS"] and row["Data Moved (MB)"] == row["Data Moved (MB)"]):
        continue  # NaN: no model, or a model that failed on this event's arguments
    for k in row["kernel_details"] or []:
        if event(k["gpu_op_uid"]).get("cat") == "kernel":
            placed[k["gpu_op_uid"]] = k["dur"]
    a = event(row["UID"]).get("args") or {}
    key = json.dumps([row["name"], a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs"),
                      a.get("Input Strides")])
    ops.setdefault(key, [row["GFLOPS"] * 1e9, row["Data Moved (MB)"] * 2**20, 0])[2] += 1
source = Path(TraceLens.__file__).resolve().parents[1]
commit = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
print(json.dumps({"commit": commit.strip() or None, "kernel_s": kernel_us * 1e-6,
                  "placed_s": sum(placed.values()) * 1e-6,
                  "ops": [json.loads(k) + v for k, v in ops.items()]}))
"""


def _parser() -> argparse.ArgumentParser:
    p = doc_parser(f"scripts/{PROG}.py", __doc__)
    p.add_argument("traces", nargs="+", metavar="TRACE", help="torch.profiler traces (.json or .json.gz)")
    p.add_argument("--tracelens-python", metavar="PYTHON",
                   help="the python of a virtual environment with TraceLens installed")
    p.add_argument("--saved", metavar="DIR", help="where TraceLens's results are saved and read again")
    return p


def tracelens_side(trace: Path, python: str | None, saved: Path | None) -> dict:
    """TraceLens's results for `trace`: saved ones when `saved` holds them for this file's size, else a run."""
    cached = saved / f"{trace.name}.tracelens.json" if saved else None
    if cached and cached.is_file():
        result = json.loads(cached.read_text())
        if result.get("size") == trace.stat().st_size:
            return result
    if python is None:
        raise MissingDependency(f"{trace.name}: no saved TraceLens result: {INSTALL}")
    probe = subprocess.run([python, "-c", "import TraceLens"], capture_output=True, text=True)
    if probe.returncode:
        raise MissingDependency(f"{python} cannot import TraceLens: {INSTALL}")
    run = subprocess.run([python, "-c", TRACELENS_SIDE, str(trace)], capture_output=True, text=True)
    if run.returncode:
        lines = run.stderr.strip().splitlines() or ["no message"]
        return {"error": f"TraceLens failed: {lines[-1][:160]}"}
    result = {"size": trace.stat().st_size, **json.loads(run.stdout.strip().splitlines()[-1])}
    if cached:
        write_text(cached, json.dumps(result) + "\n")
    return result


def our_side(trace: Path) -> dict:
    """Our time budget of `trace` (the roofline's --json), or the one-line reason the roofline refused it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "roofline.json"
        run = subprocess.run([sys.executable, "-m", "analysis.roofline", "--roofs", ROOFS, str(trace),
                              "--json", str(out)], capture_output=True, text=True)
        if run.returncode:
            return {"error": (run.stderr.strip().splitlines() or ["no message"])[-1][:160]}
        doc = json.loads(out.read_text())
    budget = doc["time_budget"]
    profiled = {k["profile_gpu"] for k in doc["kernels"] if k.get("profile_gpu")}
    return {"gpu": "; ".join(sorted(profiled)) or None, "kernel_s": sum(r["time_s"] for r in budget),
            "placed": sum(r["share"] for r in budget if r["class"] in PLACED),
            "linked": sum(r["share"] for r in budget if r["cause"] == ON_LINK)}


def _ratio(ours: float, theirs: float) -> float:
    """ours / theirs as a factor of at least 1 either way (both positive)."""
    return max(ours / theirs, theirs / ours)


def op_differences(ops: list[list]) -> dict[str, tuple | list]:
    """Per quantity (flops, bytes): (op name, ours, TraceLens's) of the op event TraceLens models whose count
    differs most from ours on the same recorded arguments, both counts above 0; ops without a model of ours
    are left out. "zero": the op names one side counts 0 FLOPs of and the other not, with the side of the 0."""
    from analysis.ops import op_work

    worst: dict = {"zero": set()}
    for name, dims, types, concrete, strides, flops, nbytes, _calls in ops:
        work = op_work(name, dims or [], types or [], concrete, strides=strides)
        if work is None:
            continue
        if (work.flops == 0) != (flops == 0):
            worst["zero"].add(f"`{name}` ({'ours' if work.flops == 0 else 'TraceLens'} 0)")
        for quantity, ours, theirs in (("flops", work.flops, flops), ("bytes", work.bytes, nbytes)):
            if not (ours and theirs):
                continue
            best = worst.get(quantity)
            if best is None or _ratio(ours, theirs) > _ratio(best[1], best[2]):
                worst[quantity] = (name, ours, theirs)
    worst["zero"] = sorted(worst["zero"])
    return worst


def _difference(worst: tuple | None, unit: str) -> str:
    if worst is None:
        return "—"
    name, ours, theirs = worst
    if _ratio(ours, theirs) == 1.0:
        return "equal on every op"
    return f"`{name}` {format_rate(ours, unit)} vs {format_rate(theirs, unit)} (×{ours / theirs:.3g})"


def table(rows: list[dict]) -> str:
    """One markdown row per trace of `rows` ({name, gpu, ours: our_side, tracelens: tracelens_side})."""
    cells = []
    for r in rows:
        ours, theirs = r["ours"], r["tracelens"]
        worst = op_differences(theirs["ops"]) if "ops" in theirs else {}
        cells.append([
            r["name"], r["gpu"] or "—", f"{ours['kernel_s'] * 1e3:.2f}", f"{ours['placed']:.1%}",
            f"{ours['linked']:.1%}" if ours["linked"] else "—",
            theirs.get("error") or (f"{theirs['placed_s'] / theirs['kernel_s']:.1%}" if theirs["kernel_s"]
                                    else "0% (reads no `kernel` event)"),
            _difference(worst.get("flops"), "FLOP"), _difference(worst.get("bytes"), "B"),
            ", ".join(worst.get("zero", [])) or "—"])
    return markdown_table(["trace", "GPU", "kernels (ms)", "placed, ours", "+ on the interconnect, ours",
                           "placed, TraceLens", "largest FLOP difference (ours vs TraceLens, one call)",
                           "largest byte difference", "0 FLOPs on one side"], cells)


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    saved = Path(args.saved) if args.saved else None
    if saved and not saved.is_dir():
        raise CeilingsError(f"--saved {saved}: no such folder; create it first")
    rows, skipped, commits = [], [], set()
    for path in map(Path, args.traces):
        if not path.is_file():
            raise CeilingsError(f"{path}: no such file; give torch.profiler traces")
        ours = our_side(path)
        if "error" in ours or not ours["kernel_s"]:  # an AMD or CPU-only trace, one of hardware counters only
            skipped.append(f"{path.name}: {ours.get('error', 'no kernel time')}")
            continue
        theirs = tracelens_side(path, args.tracelens_python, saved)
        commits.add(theirs.get("commit"))
        rows.append({"name": path.name, "gpu": ours["gpu"], "ours": ours, "tracelens": theirs})
    print(table(rows))
    print(f"\nTraceLens commit: {', '.join(sorted(c for c in commits if c)) or 'unknown'}; ours at '{ROOFS}'")
    for s in skipped:
        print(f"skipped: {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Turn a device-check OUTDIR into a Markdown fragment for BENCHMARKS.md.

    python scripts/benchmarks_md.py OUTDIR [--out FILE]     # default OUTDIR/BENCHMARKS.fragment.md

Reads what scripts/device_check.sh leaves there: roofs.json (else roofs-quick.json, else the simulator's
roofs-simulated.json), roofs-quick.json, versions.json, peers.json, selfcheck.csv, summary.txt and the
application rooflines (NAME-roofline.png, NAME-report.md). Every ceiling is shown against its datasheet and
clock-derived peaks (the `peaks` that ceilings.measure recorded). A missing file becomes a line saying so.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ceilings.report import ceiling_status, format_rate
from ceilings.roofs import run_sm_hz
from common.atomic import STDOUT, write_text
from common.errors import CeilingsError, cli_entry
from common.text import markdown_table
from scripts.outdir_cli import existing_folder, script_parser

PROG = "benchmarks_md"
ROOFS_FILES = ("roofs.json", "roofs-quick.json", "roofs-simulated.json")
APPS = ("resnet50", "decode")
TIMED_STEPS = ("measure-quick", "measure", "measure-simulate")
FAILING_VERDICTS = ("MISMATCH", "MISSING", "NOT RUN", "CHECK FAILED")


def pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.1%}"


def mhz(hz: float | None) -> str:
    return "-" if not hz else f"{hz / 1e6:.0f} MHz"


def read_json(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CeilingsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def read_summary(path: Path) -> tuple[list[str], list[dict]]:
    """(comment lines, steps) of summary.txt: tab-separated step, status, seconds, limit_s, command."""
    if not path.exists():
        return [], []
    comments, steps = [], []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("#"):
            comments.append(line[1:].strip())
            continue
        fields = line.split("\t")
        if len(fields) < 5:
            raise CeilingsError(f"{path}:{n}: expected 5 tab-separated fields (step, status, seconds, limit_s, "
                                f"command), got {len(fields)}")
        steps.append({"step": fields[0], "status": fields[1], "seconds": float(fields[2]),
                      "limit_s": fields[3], "command": fields[4]})
    return comments, steps


def load_roofs(outdir: Path) -> tuple[str | None, dict | None]:
    from ceilings.roofs import load_roofs as load

    for name in ROOFS_FILES:
        if (outdir / name).exists():
            return name, load(outdir / name)
    return None, None


# ------------------------------------------------------------------------------------------------ sections
def header(roofs_name: str | None, roofs: dict | None, comments: list[str], versions: dict | None) -> list[str]:
    lines = []
    device = (roofs or {}).get("device", {})
    title = device.get("name") or "unknown device"
    lines.append(f"## {title}: device check of {((roofs or {}).get('meta') or {}).get('started', 'unknown date')}")
    lines.append("")
    if roofs and roofs.get("simulated"):
        lines += ["**SIMULATED: Numba's CUDA simulator ran these kernels; every number below is meaningless.**", ""]
    command = next((c for c in comments if c.startswith("command:")), None)
    if command:
        lines.append(f"Command: `{command.split(':', 1)[1].strip()}` (run from the repository root).")
    started = next((c for c in comments if c.startswith("started")), None)
    if started:
        lines.append(f"Run {started}.")
    nvml = device.get("nvml") or {}
    facts = [("GPU", device.get("name")), ("compute capability", device.get("compute_capability")),
             ("SMs", device.get("sm_count")), ("L2", _mib(device.get("l2_bytes"))),
             ("memory", _gib(device.get("memory_bytes"))), ("driver (NVML)", nvml.get("driver_version")),
             ("CUDA driver API", device.get("driver_version")), ("CUDA runtime", device.get("runtime_version")),
             ("max SM clock", mhz(device.get("max_sm_clock_hz"))), ("memory clock", mhz(device.get("memory_clock_hz"))),
             ("SM clock at probe (NVML)", mhz(nvml.get("sm_clock_hz"))),
             ("ECC", None if nvml.get("ecc_enabled") is None else ("on" if nvml["ecc_enabled"] else "off")),
             ("power limit", None if nvml.get("power_limit_w") is None else f"{nvml['power_limit_w']:.0f} W"),
             ("roofs file", roofs_name)]
    if versions:
        facts += [(k, v) for k, v in versions.items() if v and k != "platform"]
    lines += ["", markdown_table(["what", "value"], [[k, str(v)] for k, v in facts if v not in (None, "-")]), ""]
    return lines


def _mib(b):
    return None if not b else f"{b / 2**20:.0f} MiB"


def _gib(b):
    return None if not b else f"{b / 2**30:.1f} GiB"


def ceilings_section(roofs: dict | None, quick: dict | None) -> list[str]:
    if roofs is None:
        return ["### Ceilings", "", "No roofs file was produced: see `logs/measure.log`.", ""]
    # a ceiling's launch variants differ by kernel label (dram_copy[waves]): each row its own quick figure
    quick_by = ({(c["name"], c["backend"], c["kernel"]): c for c in (quick or {}).get("ceilings", [])}
                if quick is not roofs else {})
    rows = []
    for c in roofs["ceilings"]:
        peaks = c.get("peaks") or {}
        clock = peaks.get("clock_derived_run") or peaks.get("clock_derived_max")
        q = quick_by.get((c["name"], c["backend"], c["kernel"]))
        status = ceiling_status(c)
        rows.append([c["name"], c["backend"], f"`{c['kernel']}`", format_rate(c["value"], c["unit"]),
                     "-" if q is None else format_rate(q["value"], q["unit"]),
                     mhz(run_sm_hz(c.get("clocks"))),
                     format_rate(clock, c["unit"]), pct(peaks.get("of_clock_derived")),
                     format_rate(peaks.get("datasheet"), c["unit"]), pct(peaks.get("of_datasheet")), status])
    table = markdown_table(["ceiling", "backend", "kernel", "measured", "--quick", "SM clock", "clock-derived",
                            "% of clock-derived", "datasheet", "% of datasheet", "status"], rows)
    return ["### Ceilings", "",
            ("Measured = median launch; clock-derived = SM count x per-SM rate x the SM clock NVML saw during the "
             "run (memory clock for DRAM); datasheet = the vendor figure."), "", table, ""]


def sweeps_section(roofs: dict | None) -> list[str]:
    if not roofs or not roofs.get("sweeps"):
        return []
    from ceilings.report import sweeps_summary

    return ["### Sweeps", "", *(f"- {line}" for line in sweeps_summary(roofs).splitlines()), ""]


def timings_section(steps: list[dict]) -> list[str]:
    if not steps:
        return ["### Steps", "", "No summary.txt: the device check did not run to its end.", ""]
    timed = {s["step"]: s for s in steps if s["step"] in TIMED_STEPS}
    lines = ["### Steps and run times", ""]
    for name in TIMED_STEPS:
        if name in timed:
            s = timed[name]
            lines.append(f"- `python -m ceilings.{'measure --quick' if name == 'measure-quick' else 'measure'}"
                         f"{' --simulate --quick' if name == 'measure-simulate' else ''}`: {s['seconds']:.1f} s "
                         f"({s['status']})")
    rows = [[s["step"], s["status"], f"{s['seconds']:.1f}", s["limit_s"]] for s in steps]
    return [*lines, "", markdown_table(["step", "status", "seconds", "limit (s)"], rows), ""]


def peers_section(peers: dict | None) -> list[str]:
    if peers is None:
        return ["### Peers", "", "No peers.json: see `logs/peers.log`.", ""]
    rows = []
    for p in peers["peers"]:
        ours = p.get("ours")
        flag = ("**peer above our ceiling**" if p.get("beats_ours")
                else "ok" if p["valid"] else "INVALID: " + "; ".join(p.get("notes", [])[:1]))
        rows.append([p["name"], p["call"], format_rate(p["value"], p["unit"]),
                     "-" if not ours else f"{ours['name']} ({ours['backend']})",
                     "-" if not ours else format_rate(ours["value"], p["unit"]),
                     "-" if p.get("ratio_to_ours") is None else f"{p['ratio_to_ours']:.2f}", flag])
    lines = ["### Peers (other libraries, timed by our harness)", "",
             markdown_table(["peer", "call", "measured", "our best ceiling", "ours", "peer/ours", "status"], rows), ""]
    lines += [f"- {note}" for note in peers.get("skipped", [])]
    return [*lines, ""]


def selfcheck_section(path: Path) -> list[str]:
    if not path.exists():
        return ["### ncu self-check", "", "No selfcheck.csv: see `logs/selfcheck.log`.", ""]
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    failing = [r for r in rows if r["verdict"] in FAILING_VERDICTS]
    verdict = "every declared quantity matched" if not failing else f"{len(failing)} failing rows"
    table = markdown_table(
        ["benchmark", "backend", "quantity", "declared", "ncu", "ncu/declared", "verdict"],
        [[r["benchmark"], r["backend"], r["quantity"], r["declared"] or "-", r["counted"] or "-",
          "-" if not r["ratio"] else f"{float(r['ratio']):.4f}", r["verdict"]] for r in rows])
    summary = ", ".join(f"{v}: {n}" for v, n in sorted(counts.items()))
    return ["### ncu self-check (declared work vs Nsight Compute counters)", "",
            (f"{verdict} ({summary}). FLOPs must match exactly; DRAM bytes within 2% (writes may fall short by "
             f"up to the L2 size: `ok*`)."), "", table, ""]


def apps_section(outdir: Path) -> list[str]:
    lines = ["### Applications against the measured roofs", ""]
    for name in APPS:
        picture, report = outdir / f"{name}-roofline.png", outdir / f"{name}-report.md"
        if picture.exists():
            lines.append(f"- {name}: ![{name} roofline]({picture.name})"
                         + (f" — report: [{report.name}]({report.name})" if report.exists() else ""))
        else:
            lines.append(f"- {name}: no picture (see `logs/{name}.log` and `logs/{name}-roofline.log`)")
    return [*lines, ""]


def render(outdir: Path) -> str:
    roofs_name, roofs = load_roofs(outdir)
    quick = read_json(outdir / "roofs-quick.json") if roofs_name != "roofs-quick.json" else roofs
    comments, steps = read_summary(outdir / "summary.txt")
    sections = [header(roofs_name, roofs, comments, read_json(outdir / "versions.json")),
                ceilings_section(roofs, quick), sweeps_section(roofs), timings_section(steps),
                peers_section(read_json(outdir / "peers.json")), selfcheck_section(outdir / "selfcheck.csv"),
                apps_section(outdir)]
    return "\n".join(line for section in sections for line in section).rstrip() + "\n"


def _parser() -> argparse.ArgumentParser:
    p = script_parser(PROG, __doc__, "a folder written by scripts/device_check.sh")
    p.add_argument("--out", metavar="FILE", help="default OUTDIR/BENCHMARKS.fragment.md ('-' for stdout)")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    outdir = existing_folder(args.outdir)
    out = write_text(args.out or outdir / "BENCHMARKS.fragment.md", render(outdir))
    print(f"{PROG}: wrote {'stdout' if str(out) == STDOUT else out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Profile the project's own microbenchmarks under Nsight Compute and compare what ncu counts with what
each kernel declares (its `Work`): FLOPs exactly, DRAM bytes within 2%.

    python scripts/ncu_selfcheck.py OUTDIR              # on a GPU machine with ncu (about a minute)
    python scripts/ncu_selfcheck.py --dry-run OUTDIR    # no GPU: plan, print the ncu command and the rules
    python scripts/ncu_selfcheck.py --from-files OUTDIR # compare the files an earlier run left in OUTDIR

ncu runs `scripts/selfcheck_runner.py` with `--profile-from-start off`, clocks left running, caches flushed
before each replay pass (`--cache-control all`, so every read of a streaming kernel comes from DRAM). The
runner launches each benchmark once (after an unprofiled warm-up) right after a marker kernel
`ceilings_selfcheck_marker<i>`, so launches are attributed by position, not by name.

Rules, per profiled entry (OUTDIR/selfcheck.csv, one row per quantity; exit 1 on any failure):
- fp64/fp32/fp16/bf16 on the CUDA cores: 2 x FMA + ADD + MUL thread instructions of the matching family
  (dfma.., ffma.., hfma..; bf16 HFMA2.BF16 counts as hfma) x lanes (2 for packed half2 plans: ncu counts a
  packed HFMA2 once per thread) must EQUAL the declared FLOPs.
- tensor pipe (mma.sync): tensor-pipe warp instructions (the hmma sub-counter when the device has it)
  x 2mnk of the plan's shape must EQUAL the declared FLOPs; so must the tensor FLOP counters
  (sm__ops_path_tensor_*), where this ncu offers them.
- wgmma (plans with params.instruction "wgmma"): judged by the tensor FLOP counters alone, which must EQUAL the
  declared FLOPs (and must be collected). HGMMA/QGMMA are not counted by the ..._tensor_op_hmma/imma counters
  the way mma.sync is, and whether they count per warp or per warpgroup is unknown until a real run shows it:
  the instruction rule is shown as `info`, never as a mismatch.
- int32, and cuBLAS (its kernels and instruction shapes are its own): shown as `info`, not judged.
- DRAM (level dram, or a footprint of at least 4x L2): 32 x dram sectors read (written) within 2% of the
  launch's declared bytes of the declared bytes read (written). Writes may also fall short by up to the L2
  size: lines still dirty in L2 when the kernel ends are written back after it (`ok*`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.metrics import FMA_FLOPS, PRECISIONS, SECTOR_BYTES
from analysis.profile import query_metrics, split_available, tensor_ops_metrics
from common.atomic import write_text
from common.errors import CeilingsError, cli_entry
from scripts.outdir_cli import existing_folder, script_parser

PROG = "ncu_selfcheck"
RUNNER = Path(__file__).resolve().parent / "selfcheck_runner.py"
MARKER_RE = re.compile(r"ceilings_selfcheck_marker<\s*(\d+)\s*>")

# the counters of analysis.metrics (what users' profiles are read with); bf16 FMAs are counted as hfma
COUNTERS = {**PRECISIONS, "bf16": PRECISIONS["fp16"]}
OPS = tuple(op for precision in ("fp32", "fp64", "fp16") for op in PRECISIONS[precision])
REQUIRED_METRICS = (*(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in OPS),
                    "dram__sectors_read.sum", "dram__sectors_write.sum", "gpu__time_duration.sum")
# Requested only where `ncu --query-metrics` lists them: an unknown metric makes ncu refuse the whole run.
OPTIONAL_METRICS = ("sm__inst_executed_pipe_tensor.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum",
                    "sm__inst_executed_pipe_tensor_op_imma.sum", "sm__inst_executed_pipe_tensor_op_dmma.sum")
NCU_OPTIONS = ("--clock-control", "none", "--target-processes", "all", "--profile-from-start", "off",
               "--cache-control", "all", "--csv", "--page", "raw")

LANES = {"fp16x2": 2, "bf16x2": 2}  # plan.params["lane"] -> values per counted thread instruction
TENSOR_SUBCOUNTER = {"fp16": "hmma", "bf16": "hmma", "tf32": "hmma", "fp8": "imma", "int8": "imma",
                     "fp64": "dmma"}
DRAM_TOLERANCE = 0.02  # of the launch's declared bytes (read + written)
DRAM_MIN_L2_MULTIPLE = 4  # a footprint this many times L2 streams from DRAM
FAILING = ("MISMATCH", "MISSING", "NOT RUN", "CHECK FAILED")
COLUMNS = ["index", "benchmark", "backend", "plan", "kernel", "launches", "time_s", "quantity", "declared",
           "counted", "ratio", "verdict", "note"]

WORK_FILE, NCU_FILE, CSV_FILE, TABLE_FILE = ("selfcheck-work.json", "selfcheck-ncu.csv", "selfcheck.csv",
                                             "selfcheck.md")


def metric_col(metric: str) -> str:
    from analysis.metrics import canonical_metric

    return canonical_metric(metric)


def choose_metrics(available: set[str] | None) -> list[str]:
    """The required metrics, and the optional ones this ncu lists (none when the listing is unknown)."""
    return (list(REQUIRED_METRICS) + split_available(OPTIONAL_METRICS, available or set())[0]
            + tensor_ops_metrics(available))


def ncu_command(ncu: str, metrics: Sequence[str], outdir: Path, extra: Sequence[str] = ()) -> list[str]:
    return [ncu, *NCU_OPTIONS, "--metrics", ",".join(metrics), "--log-file", str(outdir / NCU_FILE),
            sys.executable, str(RUNNER), "--out", str(outdir / WORK_FILE), *extra]


# --------------------------------------------------------------------------------------------- comparison
def segments(launches) -> tuple[dict[int, list[dict]], int]:
    """Profiled launches by entry index (what follows marker i up to the next marker); and how many
    launches came before any marker."""
    out: dict[int, list[dict]] = {}
    current, stray = None, 0
    for row in launches.sort_values(["run", "id"]).to_dict("records"):
        m = MARKER_RE.search(str(row["kernel"]))
        if m:
            current = int(m.group(1))
            out[current] = []
        elif current is None:
            stray += 1
        else:
            out[current].append(row)
    return out, stray


def _sum(rows: list[dict], metric: str) -> float | None:
    col = metric_col(metric)
    values = [r.get(col) for r in rows]
    if not rows or any(v is None or math.isnan(v) for v in values):
        return None
    return float(sum(values))


def _thread_inst(rows: list[dict], op: str) -> float | None:
    return _sum(rows, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum")


def compare_entry(e: dict, rows: list[dict] | None, l2_bytes: int) -> list[dict]:
    """The selfcheck rows of one entry (see the module docstring for the rules)."""
    base = {"index": e["index"], "benchmark": e["benchmark"], "backend": e["backend"],
            "plan": e["plan_index"], "kernel": e["kernel_match"] or "(library)", "launches": 0,
            "time_s": None, "declared": None, "counted": None, "ratio": None, "note": ""}
    if e["status"].startswith("skipped"):
        return [{**base, "quantity": "-", "verdict": "skipped", "note": e["status"]}]
    if e["status"] != "launched":
        return [{**base, "quantity": "-", "verdict": "NOT RUN", "note": e["status"]}]
    if not rows:
        return [{**base, "quantity": "-", "verdict": "MISSING",
                 "note": "ncu recorded no launch after this entry's marker"}]
    base.update(launches=len(rows), time_s=_sum(rows, "gpu__time_duration.sum"))
    out = []
    if e.get("check"):
        out.append({**base, "quantity": "output", "verdict": "CHECK FAILED", "note": e["check"]})
    match = e["kernel_match"]
    if match and not any(match in str(r["kernel"]) for r in rows):
        out.append({**base, "quantity": "kernel name", "verdict": "MISMATCH",
                    "note": f"no profiled kernel name contains {match!r}: "
                            + "; ".join(str(r["kernel"])[:80] for r in rows[:3])})
    for precision, declared in e["work"]["flops"].items():
        out.append({**base, **_flops_row(e, precision, declared, rows)})
        if e["pipe"] == "tensor" and e["backend"] != "library":
            out.append({**base, **_tensor_ops_row(precision, declared, rows, required=_is_wgmma(e))})
    if _dram_rule_applies(e, l2_bytes):
        total = e["work"]["bytes_read"] + e["work"]["bytes_written"]
        for direction, key in (("read", "bytes_read"), ("write", "bytes_written")):
            sectors = _sum(rows, f"dram__sectors_{direction}.sum")
            out.append({**base, **_dram_row(direction, e["work"][key], sectors, total, l2_bytes)})
    if not out:
        out.append({**base, "quantity": "launch", "verdict": "info", "note": "no FLOP or DRAM rule for this kernel"})
    return out


def _flops_row(e: dict, precision: str, declared: int, rows: list[dict]) -> dict:
    row = {"quantity": f"flops_{precision}", "declared": declared}
    if e["pipe"] == "tensor" and e["backend"] != "library":
        shape = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", str(e["params"].get("shape", "")))
        sub = TENSOR_SUBCOUNTER.get(precision)
        inst = _sum(rows, f"sm__inst_executed_pipe_tensor_op_{sub}.sum") if sub else None
        counter = f"tensor_op_{sub}"
        if inst is None:
            inst, counter = _sum(rows, "sm__inst_executed_pipe_tensor.sum"), "pipe_tensor"
        if shape is None or inst is None:
            why = "plan has no mma shape" if shape is None else "no tensor-pipe counter was collected"
            return {**row, "verdict": "MISSING", "note": why}
        per_inst = 2 * int(shape[1]) * int(shape[2]) * int(shape[3])
        row = {**row, "note": f"{counter} warp instructions x {per_inst} ({shape[0]})"}
        if _is_wgmma(e):
            return {**row, "counted": inst * per_inst, "ratio": _ratio(inst * per_inst, declared), "verdict": "info",
                    "note": row["note"] + "; wgmma: shown, not judged (how HGMMA/QGMMA are counted is "
                                          "unconfirmed; the tensor ops counters judge it)"}
        return _exact(row, inst * per_inst)
    counters = COUNTERS.get(precision)
    if counters is None:
        return {**row, "verdict": "info", "note": f"ncu has no {precision} FLOP counter in this metric set"}
    fma, add, mul = (_thread_inst(rows, op) for op in counters)
    if fma is None or add is None or mul is None:
        return {**row, "verdict": "MISSING", "note": f"{'/'.join(counters)} counters not collected"}
    lanes = LANES.get(str(e["params"].get("lane")), 1)
    counted = (FMA_FLOPS * fma + add + mul) * lanes
    note = f"(2 {counters[0]} + {counters[1]} + {counters[2]}) x {lanes}"
    if e["backend"] == "library":
        return {**row, "counted": counted, "ratio": _ratio(counted, declared), "verdict": "info",
                "note": note + "; cuBLAS: not judged (its epilogue and tensor paths are its own)"}
    return _exact({**row, "note": note}, counted)


def _is_wgmma(e: dict) -> bool:
    return e["params"].get("instruction") == "wgmma"


def _tensor_ops_row(precision: str, declared: int, rows: list[dict], *, required: bool) -> dict:
    """What `analysis.ncu` reports for this kernel from the tensor FLOP counters (sm__ops_path_tensor_*),
    against the declared 2mnk per mma: judged exactly, since one op is taken to be one FLOP (the evidence in
    docs/ncu-ingestion.md); a first GPU run confirms or refutes it. `required`: the only rule that judges this
    kernel (wgmma), so counters not collected are MISSING, not information."""
    import pandas as pd

    from analysis.metrics import tensor_ops_columns, tensor_work

    row = {"quantity": f"flops_{precision} (tensor ops counters)", "declared": declared}
    frame = pd.DataFrame(rows)
    if not tensor_ops_columns(frame.columns):
        return {**row, "verdict": "MISSING" if required else "info",
                "note": "no sm__ops_path_tensor_* counter collected (not offered by this ncu?)"
                        + ("; wgmma is judged by them alone" if required else "")}
    work = tensor_work(frame)
    column = "ops_tensor_int" if precision.startswith("int") else "flops_tensor"
    counted = work[column].sum(min_count=len(frame))
    if pd.isna(counted):
        return {**row, "verdict": "MISSING", "note": "a launch lacks the tensor ops counters"}
    return _exact({**row, "note": "sum of sm__ops_path_tensor_* (analysis.metrics.tensor_work)"}, float(counted))


def _exact(row: dict, counted: float) -> dict:
    ok = counted == row["declared"]
    return {**row, "counted": counted, "ratio": _ratio(counted, row["declared"]),
            "verdict": "ok" if ok else "MISMATCH"}


def _dram_rule_applies(e: dict, l2_bytes: int) -> bool:
    if e["backend"] == "library":
        return False
    footprint = e["params"].get("array_bytes")
    return e["level"] == "dram" or (isinstance(footprint, (int, float)) and l2_bytes > 0
                                    and footprint >= DRAM_MIN_L2_MULTIPLE * l2_bytes)


def _dram_row(direction: str, declared: int, sectors: float | None, total: int, l2_bytes: int) -> dict:
    row = {"quantity": f"dram_{direction}_bytes", "declared": declared}
    if sectors is None:
        return {**row, "verdict": "MISSING", "note": f"dram__sectors_{direction}.sum not collected"}
    counted = SECTOR_BYTES * sectors
    row.update(counted=counted, ratio=_ratio(counted, declared))
    allowed = DRAM_TOLERANCE * total
    if abs(counted - declared) <= allowed:
        return {**row, "verdict": "ok", "note": f"within {DRAM_TOLERANCE:.0%} of the declared bytes"}
    if direction == "write" and declared - l2_bytes <= counted < declared:
        return {**row, "verdict": "ok*", "note": f"short by {declared - counted:.3g} B, within the L2 size "
                f"({l2_bytes} B) still dirty at kernel end"}
    return {**row, "verdict": "MISMATCH", "note": f"off by {counted - declared:+.3g} B; allowed ±{allowed:.3g} B"}


def _ratio(counted: float, declared: float) -> float | None:
    return counted / declared if declared else None


def compare(work: dict, launches) -> tuple[list[dict], list[str]]:
    """All rows, and warnings about the profile as a whole."""
    by_entry, stray = segments(launches)
    warnings = [f"{stray} profiled launch(es) before the first marker were ignored"] if stray else []
    rows = []
    for e in work["entries"]:
        rows.extend(compare_entry(e, by_entry.get(e["index"]), work.get("l2_bytes") or 0))
    return rows, warnings


def render(rows: list[dict]) -> str:
    from common.text import markdown_table

    def num(v):
        return "-" if v is None else f"{v:.6g}" if isinstance(v, float) and not float(v).is_integer() else f"{int(v)}"

    table = [[r["benchmark"], r["backend"], str(r["plan"]), r["quantity"], num(r["declared"]), num(r["counted"]),
              "-" if r["ratio"] is None else f"{r['ratio']:.4f}", r["verdict"], r["note"]] for r in rows]
    return markdown_table(["benchmark", "backend", "plan", "quantity", "declared", "ncu", "ncu/declared",
                           "verdict", "note"], table)


def write_results(outdir: Path, rows: list[dict]) -> None:
    import pandas as pd

    write_text(outdir / CSV_FILE, pd.DataFrame(rows, columns=COLUMNS).to_csv(index=False))
    write_text(outdir / TABLE_FILE, render(rows) + "\n")


# ---------------------------------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    p = script_parser(PROG, __doc__, "folder for selfcheck-ncu.csv, selfcheck-work.json, "
                   "selfcheck.csv and selfcheck.md")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="no GPU: plan, print the ncu command, launch nothing")
    mode.add_argument("--from-files", action="store_true", help="compare the files already in OUTDIR")
    p.add_argument("--only", metavar="PATTERN", help="benchmark globs (as ceilings.measure --only)")
    p.add_argument("--ncu", metavar="PATH", help="ncu executable (default: ncu on PATH)")
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    outdir = existing_folder(args.outdir)
    extra = ["--only", args.only] if args.only else []
    if args.dry_run:
        return dry_run(outdir, extra)
    if not args.from_files:
        profile(outdir, extra, args.ncu)
    work, launches = load_outputs(outdir)
    rows, warnings = compare(work, launches)
    write_results(outdir, rows)
    print(render(rows))
    for w in warnings:
        log(f"warning: {w}")
    failed = [r for r in rows if r["verdict"] in FAILING]
    log(f"{len(rows)} rows, {len(failed)} failing; wrote {outdir / CSV_FILE} and {outdir / TABLE_FILE}")
    return 1 if failed else 0


def dry_run(outdir: Path, extra: list[str]) -> int:
    subprocess.run([sys.executable, str(RUNNER), "--dry-run", "--out", str(outdir / WORK_FILE), *extra], check=True)
    work = json.loads((outdir / WORK_FILE).read_text())
    cmd = ncu_command("ncu", [*REQUIRED_METRICS, *OPTIONAL_METRICS], outdir, extra)
    print("would run (optional tensor metrics only where `ncu --query-metrics` lists them):")
    print("  " + shlex.join(cmd))
    l2 = work.get("l2_bytes") or 0
    print(f"{sum(e['status'] == 'planned' for e in work['entries'])} launches planned "
          f"(each after a marker kernel); rules:")
    for e in work["entries"]:
        rules = [f"flops_{p}" for p in (e["work"] or {}).get("flops", {})]
        if e["work"] and _dram_rule_applies(e, l2):
            rules.append("dram bytes")
        print(f"  {e['index']:3d} {e['benchmark']:<22} {e['backend']:<7} plan {e['plan_index']}: "
              f"{e['status']}; kernel ~ {e['kernel_match']}; checks {', '.join(rules) or '-'}")
    return 0


def profile(outdir: Path, extra: list[str], ncu_path: str | None) -> None:
    from analysis.profile import check_ncu_output, find_ncu, run_ncu

    ncu = find_ncu(ncu_path)
    metrics = choose_metrics(query_metrics(ncu, REQUIRED_METRICS))
    missing = [m for m in OPTIONAL_METRICS if m not in metrics]
    if missing:
        log(f"not collected (not offered by this device's ncu): {', '.join(missing)}")
    (outdir / NCU_FILE).unlink(missing_ok=True)
    cmd = ncu_command(ncu, metrics, outdir, extra)
    log(f"running {shlex.join(cmd)}")
    rc, output = run_ncu(cmd)
    log_text = (outdir / NCU_FILE).read_text(errors="replace") if (outdir / NCU_FILE).exists() else ""
    check_ncu_output(rc, output + log_text)


def load_outputs(outdir: Path):
    from analysis.ncu import read_profile

    work_path = outdir / WORK_FILE
    if not work_path.exists():
        raise CeilingsError(f"{work_path}: missing; the runner did not finish (see the ncu output above)")
    work = json.loads(work_path.read_text())
    if work.get("dry_run"):
        raise CeilingsError(f"{work_path}: written by a --dry-run; profile on a GPU first")
    return work, read_profile(outdir / NCU_FILE)


def log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

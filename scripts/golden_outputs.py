"""Same numbers out: save the outputs of `analysis.ncu --csv` (per kernel, --per-launch and --per-process) on every real
Nsight Compute sample and every ncu test file, of `ceilings.fleet --json` on the test roofs files and a
synthetic cluster, of `analysis.roofline --csv` and `--json` on every real torch trace (and those of --traces
folders), of `analysis.llm --json` (a step, a serving run) and of `analysis.predict --json` (with torch), then
compare a later tree's outputs with them byte for byte.

    python scripts/golden_outputs.py save DIR [--traces FOLDER]     # before a change
    python scripts/golden_outputs.py check DIR [--traces FOLDER]    # after: exit 1 naming every output that differs

A file the tools refuse is recorded as its one-line error (the refusal must stay the same too). Warnings
are not compared (their wording may change); the CSV and JSON are.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

SHARED = ROOT.parent / "shared"  # ../shared, as the tests find it
SAMPLES = SHARED / "ncu-samples"
TRACES = SHARED / "torch-traces"
TRACE_ROOFS = "A100 SXM4 80GB"  # one roofs for every trace: the numbers compared are the same either way
LLM_RUNS = {"step": ["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--roofs", "A100 SXM4 80GB"],
            "serve": ["--model", "Llama-3.1-8B", "--roofs", "H100 SXM", "--serve", "--rate", "2", "--rate", "8",
                      "--requests", "300", "--seed", "3"]}
NCU_SUFFIXES = (".csv", ".txt", ".log", ".pro", ".profile")
MULTI_RUNS = 12  # processes in the synthetic multi-run ncu text
FLEET_CLUSTER = 40  # synthetic roofs files (bench_fleet's) with a slow GPU or two: outliers in the JSON


def ncu_inputs() -> list[Path]:
    samples = sorted(p for p in SAMPLES.rglob("*") if p.is_file() and p.suffix in NCU_SUFFIXES)
    tests = sorted(p for p in (ROOT / "tests" / "data" / "ncu").iterdir())
    return samples + tests + [ROOT / "tests" / "data" / "llm" / "decode-step.ncu.csv"]


def multi_run_text(path: Path) -> Path:
    """An ncu text log of RUNS processes: the first half measured the DRAM bytes, the second half the FLOPs of
    the same launches (passes to merge), each run timing them differently (runs that disagree)."""
    from bench_ncu import DASH, KERNELS

    sets = ([("dram__bytes_read.sum", "Mbyte", "12.58"), ("gpu__time_duration.sum", "usecond", "10.50")],
            [("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "4,194,304"),
             ("gpu__time_duration.sum", "usecond", "13.25")])
    with path.open("w") as f:
        for run in range(MULTI_RUNS):
            metrics = sets[run >= MULTI_RUNS // 2]
            f.write(f"==PROF== Connected to process {100 + run} (/usr/bin/app)\n[{100 + run}] app@node{run % 3}\n")
            for launch in range(7 + run % 2):
                f.write(f"  {KERNELS[launch % 3]} (1024, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 8.0\n"
                        f"    Section: Command line profiler metrics\n{DASH}")
                f.write("".join(f"    {m:<70} {u:>15} {v:>30}\n" for m, u, v in metrics))
                f.write(DASH + "\n")
    return path


def fleet_inputs(tmp: Path) -> dict[str, list[str]]:
    from bench_fleet import GPUS_PER_NODE, roofs_doc

    from ceilings.roofs import save_roofs

    roofs = ROOT / "tests" / "data" / "roofs"
    check = ROOT / "tests" / "data" / "device_check"
    rng = random.Random(21)
    cluster = tmp / "cluster"
    cluster.mkdir()
    for i in range(FLEET_CLUSTER):
        node, gpu = divmod(i, GPUS_PER_NODE)
        save_roofs(roofs_doc(rng, node, gpu, 5), cluster / f"roofs-{node:04d}-{gpu}.json")
    return {"a100+h100": [str(roofs / "a100.json"), str(roofs / "h100.json")],
            "a100": [str(roofs / "a100.json")], "simulated": [str(roofs / "simulated.json")],
            "h100": [str(roofs / "h100.json")], "device_check": [str(check / "roofs.json")],
            "device_check_quick": [str(check / "roofs-quick.json")],
            "cluster": [str(cluster)]}


def _run(main, argv: list[str], out: Path) -> bytes:
    """The file `main(argv)` writes to `out`, or its one-line refusal."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main([*argv, "--force"])
        except SystemExit as exc:  # argparse's refusal of the command line
            rc = exc.code
    if out.exists():
        data = out.read_bytes()
        out.unlink()
    else:
        data = f"exit {rc}: {err.getvalue().strip().splitlines()[-1:]}\n".encode()
    # the same inputs in another checkout (a worktree of the tree before) are the same inputs
    for place, name in ((SHARED, b"SHARED"), (SHARED.resolve(), b"SHARED"), (ROOT, b"ROOT")):
        data = data.replace(str(place).encode(), name)
    return data


def trace_inputs(folders: Sequence[Path]) -> list[Path]:
    return sorted(p for folder in (TRACES, *folders) for p in folder.glob("*.json*"))


def model_outputs(tmp: Path, out: Path) -> dict[str, bytes]:
    """analysis.llm's JSON (a step on two GPUs, a serving run) and, with torch, analysis.predict's."""
    from analysis import predict
    from analysis.llm import __main__ as llm

    found = {f"llm/{name}.json": _run(llm.main, [*argv, "--json", str(out)], out) for name, argv in LLM_RUNS.items()}
    try:
        import torch  # noqa: F401  (predict needs it)
    except ImportError:
        return found
    models = ROOT / "tests" / "data" / "predict" / "models.py"
    for name in ("cnn", "encoder"):
        found[f"predict/{name}.json"] = _run(predict.main, [f"{models}:{name}", "--roofs", "H100 SXM", "--json",
                                                            str(out)], out).replace(str(tmp).encode(), b"TMP")
    return found


def outputs(trace_folders: Sequence[Path] = ()) -> dict[str, bytes]:
    from analysis import ncu
    from analysis.roofline import __main__ as roofline
    from ceilings import fleet

    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out = tmp / "out"
        gene = SAMPLES / "gene_v100_ncu2020.1_csv"
        cases = [[p] for p in ncu_inputs()] + [
            [gene / "dram_ncuroof-time-0.csv", gene / "flops_ncuroof-time-0.csv"],  # two passes, two files
            [multi_run_text(tmp / "multi_run.txt")]]
        for paths in cases:
            label = "+".join(str(p.relative_to(SAMPLES) if p.is_relative_to(SAMPLES) else
                                 p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name) for p in paths)
            for mode, extra in (("kernel", []), ("launch", ["--per-launch"]), ("process", ["--per-process"])):
                found[f"ncu/{label}.{mode}.csv"] = _run(ncu.main, [*map(str, paths), *extra, "--csv", str(out)], out)
        for name, inputs in fleet_inputs(tmp).items():
            found[f"fleet/{name}.json"] = _run(fleet.main, [*inputs, "--json", str(out)], out).replace(
                str(tmp).encode(), b"TMP")  # the cluster's folder: a new temporary name each time
        for trace in trace_inputs(trace_folders):
            for suffix in ("csv", "json"):
                found[f"roofline/{trace.name}.{suffix}"] = _run(
                    roofline.main, [str(trace), "--roofs", TRACE_ROOFS, f"--{suffix}", str(out)], out)
        found.update(model_outputs(tmp, out))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("save", "check"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--traces", type=Path, action="append", default=[], metavar="FOLDER",
                        help="more torch traces (*.json, *.json.gz) to draw rooflines of")
    args = parser.parse_args()
    now = outputs(args.traces)
    if args.action == "save":
        for name, data in now.items():
            target = args.folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        print(f"saved {len(now)} outputs under {args.folder}")
        return 0
    saved = {str(p.relative_to(args.folder)): p.read_bytes() for p in args.folder.rglob("*") if p.is_file()}
    differ = sorted(n for n in saved.keys() | now.keys() if saved.get(n) != now.get(n))
    for name in differ:
        print(f"differs: {name}" if name in saved and name in now else f"only {'before' if name in saved else 'now'}: "
              f"{name}")
    print(f"{len(now) - len(differ)} of {len(saved.keys() | now.keys())} outputs byte-identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

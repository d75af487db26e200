"""Benchmark the torch.profiler trace reader against plain json + pandas (and HTA where installed), whole
processes side by side.

    python scripts/bench_torch.py [--mb 500] [--repeat 3] [--seed-trace PATH] [--hta-python PATH]

Writes a synthetic trace of about `--mb` MB to a temporary folder (deleted afterwards): the events of a real
trace (../shared/torch-traces/a100_80gb_shapes_rank0.json.gz by default: 6,080 kernels, 25,185 cpu_op with
shapes, 33,924 runtime calls, 41,671 flow events) repeated, each copy shifted past the previous one in time
and in its correlation, External id and flow ids, so every copy links as the original does. Then times
`python -m analysis.ncu TRACE --csv OUT` and the baseline (json.load, the kernel events in a DataFrame,
groupby name: count and total duration), alternating, as separate processes, and prints the median seconds
and peak RSS of each and their ratios. Target (this project's own goal for the reader): <= 1.2x the baseline,
never slower than HTA.

HTA (HolisticTraceAnalysis) is timed beside them where it can be imported, by this interpreter or by the one
--hta-python names (HTA lives in its own virtual environment): `TraceAnalysis(trace_dir=FOLDER)` (it finds the
trace in the folder and its rank in the file; without one it takes rank 0) and then
`get_gpu_kernel_breakdown(visualize=False)` over every kernel (`duration_ratio=1`, `num_kernels` past any
count): HTA's table per kernel name (sum, max, min, mean, stddev of the durations, kernel type), the
equivalent of our kernel table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED_TRACE = ROOT.parent / "shared" / "torch-traces" / "a100_80gb_shapes_rank0.json.gz"
BASELINE = """
import json, sys
import pandas as pd
with open(sys.argv[1]) as f:
    doc = json.load(f)
kernels = pd.DataFrame([e for e in doc["traceEvents"] if e.get("cat") == "kernel"])
kernels.groupby("name")["dur"].agg(["count", "sum"]).to_csv(sys.argv[2])
"""
HTA = """
import sys
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0,
                                                               num_kernels=2**62)
"""
IDS = ("correlation", "External id")  # the args that link a kernel to its launch and op


def write_trace(path: Path, mb: float, seed: Path = SEED_TRACE) -> int:
    """A trace of about `mb` MB made of shifted copies of `seed`'s events (module docstring); returns the
    number of kernels."""
    doc = json.loads(gzip.decompress(seed.read_bytes()) if seed.suffix == ".gz" else seed.read_bytes())
    events = doc.pop("traceEvents")
    times = [e["ts"] for e in events if "ts" in e]
    span = max(times) - min(times) + 1000
    ids = [e["args"][k] for e in events for k in IDS if isinstance(e.get("args"), dict) and k in e["args"]]
    ids += [e["id"] for e in events if "id" in e]
    id_span = max(ids) + 1
    repeated = [e for e in events if e.get("ph") != "M"]  # process and thread names once
    kernels = 0
    with path.open("w") as f:
        f.write(json.dumps(doc)[:-1] + ', "traceEvents": [')
        f.write(json.dumps(events)[1:-1])
        kernels += sum(e.get("cat") == "kernel" for e in events)
        while f.tell() < mb * 1e6:
            for e in repeated:
                if "ts" in e:
                    e["ts"] += span
                if "id" in e:
                    e["id"] += id_span
                args = e.get("args")
                for k in IDS:
                    if isinstance(args, dict) and k in args:
                        args[k] += id_span
            f.write(", " + json.dumps(repeated)[1:-1])
            kernels += sum(e.get("cat") == "kernel" for e in repeated)
        f.write("]}")
    return kernels


# Runs a command and prints its peak RSS. Started from this small process, not from the benchmark (which holds
# the generated input): Linux counts a process's memory before exec, a copy of its parent's, in its peak.
LAUNCHER = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.write(done.stderr.decode(errors="replace")[-2000:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(done.returncode)
"""


def run(command: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Wall seconds and peak RSS (GB) of one process running `command` to completion; an exit status not in
    `ok` stops the benchmark."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *command], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in ok:
        raise SystemExit(f"{command[:3]}... failed ({done.returncode}): {done.stderr}")
    return seconds, int(done.stdout) / 1e6  # ru_maxrss: KiB on Linux


def compare(commands: dict[str, list[str]], repeat: int, baseline: str | None = None) -> dict:
    """Each command `repeat` times, alternating; prints and returns name -> (median s, max peak RSS GB)."""
    seen = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            seen[name].append(run(command))
    out = {name: (statistics.median(s for s, _ in runs), max(m for _, m in runs)) for name, runs in seen.items()}
    for name, (seconds, rss) in out.items():
        ratio = ""
        if baseline and name != baseline:
            ratio = f"  ({seconds / out[baseline][0]:.2f}x the time, {rss / out[baseline][1]:.2f}x the memory)"
        runs = ", ".join(f"{s:.2f}" for s, _ in seen[name])
        print(f"{name}: {seconds:.2f} s (runs {runs}), peak RSS {rss:.2f} GB{ratio}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed-trace", type=Path, default=SEED_TRACE)
    parser.add_argument("--hta-python", type=Path, metavar="PATH",
                        help="a Python with HTA installed (e.g. its own venv's bin/python); default: this one, "
                             "where it has HTA")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "bench.pt.trace.json"
        kernels = write_trace(trace, args.mb, args.seed_trace)
        print(f"{trace.stat().st_size / 1e6:.0f} MB trace, {kernels} kernels", file=sys.stderr)
        commands = {"analysis.ncu": [sys.executable, "-m", "analysis.ncu", str(trace), "--csv",
                                     f"{folder}/out.csv", "--force"],
                    "json + pandas": [sys.executable, "-c", BASELINE, str(trace), f"{folder}/base.csv"]}
        hta_python = args.hta_python or sys.executable
        found = subprocess.run([str(hta_python), "-c", "import hta"], capture_output=True).returncode == 0
        if found:
            commands["HTA"] = [str(hta_python), "-c", HTA, folder]
        else:
            print(f"HTA (HolisticTraceAnalysis) cannot be imported by {hta_python}: not compared", file=sys.stderr)
        compare(commands, args.repeat, baseline="json + pandas")
    return 0


if __name__ == "__main__":
    sys.exit(main())

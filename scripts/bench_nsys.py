"""Benchmark the nsys .sqlite reader against a plain sqlite3 + pandas baseline, whole processes side by side.

    python scripts/bench_nsys.py [--kernels 1000000] [--unbalanced 20000] [--repeat 3]

Writes a synthetic export (tables and columns as tests/test_nsys_sqlite.py builds them, NVIDIA's schema) to a
temporary folder: 2 processes of 2 launching threads each, steps of 500 launches in push/pop ranges (step,
forward/backward, a layer range per 12 launches: ~88k ranges at 1M kernels), an epoch start/end range per
process. Then times `python -m analysis.ncu FILE --csv OUT` and the baseline (sqlite3, pandas.read_sql of
the kernels joined to their names, groupby name: count and total time), alternating, as separate processes,
and prints the median seconds and peak RSS of each and their ratios; also `--by annotation`, the view that reads
every launch's NVTX ranges (the kernel table needs none, and reads none). `--unbalanced N` also times an export of
N kernels whose every launch pushes a range never popped (end NULL): linear in N, or quadratic.
Target (this project's own goal for the reader): <= 1.5x the baseline in time and memory at 1M kernels with NVTX.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.bench_torch import compare  # noqa: E402
from tests.test_nsys_sqlite import make_export  # noqa: E402

PROCESSES, THREADS = 2, 2
STEP, LAYER = 500, 12  # launches per step range and per layer range
NAMES = 300  # distinct kernel names
BASELINE = """
import sqlite3, sys
import pandas as pd
con = sqlite3.connect(sys.argv[1])
df = pd.read_sql("SELECT k.start, k.end, s.value AS name FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
                 "JOIN StringIds AS s ON s.id = k.demangledName", con)
df["time"] = (df["end"] - df["start"]) * 1e-9
df.groupby("name")["time"].agg(["count", "sum"]).to_csv(sys.argv[2])
"""


def write_export(path: Path, kernels: int, unbalanced: bool = False, seed: int = 1) -> Path:
    """An export of `kernels` launches (module docstring); `unbalanced`: every launch also pushes a range
    that is never popped (end NULL), and there are no other ranges."""
    rng = random.Random(seed)
    strings = {i + 1: f"void kernel_{i}<float, {i % 7}>(float const*, float*, int, at::native::Array<char*, 3>)"
               for i in range(NAMES)}
    launch_id = len(strings) + 1
    strings[launch_id] = "cudaLaunchKernel_v7000"
    rows, runtime, nvtx = [], [], []
    per_thread = kernels // (PROCESSES * THREADS)
    for p in range(PROCESSES):
        gpid = (1 << 48) | ((1000 + p) << 24)
        nvtx.append((0, 10**15, 60, f"epoch of process {p}", None, gpid | (1000 + p)))
        for t in range(THREADS):
            tid = gpid | (1000 + p + t)
            clock, corr = 1000 + t * 7, 1 + t * per_thread  # correlation ids from 1 (0: none)
            for i in range(per_thread):
                if not unbalanced and i % STEP == 0:  # a step: forward then backward, layers inside each
                    step_end = clock + STEP * 10_000 - 100
                    half = clock + STEP // 2 * 10_000 - 50
                    nvtx += [(clock, step_end, 59, f"ProfilerStep#{i // STEP}", None, tid),
                             (clock + 1, half, 59, "forward", None, tid),
                             (half + 1, step_end - 1, 59, "backward", None, tid)]
                if not unbalanced and i % LAYER == 0:
                    nvtx.append((clock + 2, clock + LAYER * 10_000 - 200, 59, f"layer{i // LAYER % 48}", None, tid))
                if unbalanced:
                    nvtx.append((clock + 1, None, 59, f"leaked range {i}", None, tid))
                call = clock + 100
                runtime.append((call, call + 3000, tid, corr))
                start = call + rng.randrange(2000, 9000)
                dims = rng.choice([((64, 1, 1), (256, 1, 1)), ((1024, 2, 1), (128, 1, 1)), ((1, 1, 1), (32, 1, 1))])
                name = rng.randrange(1, NAMES + 1)
                rows.append((start, start + rng.randrange(1000, 200_000), p, corr, gpid, name, name, *dims))
                clock += 10_000
                corr += 1
    gpus = [(p, "NVIDIA H100 80GB HBM3", 9, 0) for p in range(PROCESSES)]
    return make_export(path, kernels=rows, runtime=runtime, nvtx=nvtx, gpus=gpus, strings=strings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--unbalanced", type=int, default=20_000, help="kernels of the unbalanced export (0: none)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = write_export(Path(folder) / "bench.sqlite", args.kernels)
        print(f"{db.stat().st_size / 1e6:.0f} MB export, {args.kernels} kernels", file=sys.stderr)
        ncu = [sys.executable, "-m", "analysis.ncu", str(db), "--csv", f"{folder}/out.csv", "--force"]
        compare({"analysis.ncu": ncu, "analysis.ncu --by annotation (every launch's NVTX ranges)": [
                     *ncu, "--by", "annotation"],
                 "sqlite3 + pandas": [sys.executable, "-c", BASELINE, str(db), f"{folder}/base.csv"]},
                args.repeat, baseline="sqlite3 + pandas")
        if args.unbalanced:
            for n in (args.unbalanced // 2, args.unbalanced):
                db = write_export(Path(folder) / f"unbalanced{n}.sqlite", n, unbalanced=True)
                compare({f"analysis.ncu --by annotation, unbalanced, {n} kernels": [
                    sys.executable, "-m", "analysis.ncu", str(db), "--csv", f"{folder}/u.csv", "--force", "--by",
                    "annotation"]}, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

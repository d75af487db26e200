"""Benchmark `--help` of every command against a bare interpreter (`python -c pass`): whole processes,
alternating with the bare one, medians.

    python scripts/bench_help.py [--repeat 7]

Target: every command <= 0.2 s over the bare interpreter (heavy packages are imported after argparse;
tests/test_lazy_imports.py checks which modules a `--help` loads).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ceilings.__main__ import COMMANDS as CONSOLE_COMMANDS

ROOT = Path(__file__).resolve().parents[1]
# every command of the console script, as `python -m` runs it
COMMANDS = [module.removesuffix(".__main__") for module, _ in CONSOLE_COMMANDS.values()]
TARGET_S = 0.2


def seconds(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one process: on a loaded machine the CPU time is the steadier."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (default 7)")
    args = parser.parse_args()
    bare, runs = [], {c: [] for c in COMMANDS}
    for _ in range(args.repeat):
        for command in COMMANDS:  # each run next to a bare one: the machine's load hits both alike
            bare.append(seconds([sys.executable, "-c", "pass"]))
            runs[command].append(seconds([sys.executable, "-m", command, "--help"]))
    base = [statistics.median(t[i] for t in bare) for i in (0, 1)]
    print(f"python -c pass: wall {base[0]:.3f} s, CPU {base[1]:.3f} s (medians of {len(bare)})")
    worst = [0.0, 0.0]
    for command, times in runs.items():
        median = [statistics.median(t[i] for t in times) for i in (0, 1)]
        over = [m - b for m, b in zip(median, base)]
        worst = [max(w, o) for w, o in zip(worst, over)]
        print(f"  python -m {command:<18} --help  wall {median[0]:.3f} s (+{over[0]:.3f}), CPU {median[1]:.3f} s "
              f"(+{over[1]:.3f})")
    print(f"worst over the bare interpreter: wall +{worst[0]:.3f} s, CPU +{worst[1]:.3f} s (target <= {TARGET_S} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

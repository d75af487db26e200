"""Benchmark analysis.ncu on synthetic large inputs: an ncu --csv details page and an ncu text log.

    python scripts/bench_ncu.py [--mb 100] [--repeat 3]

Files are generated in a temporary folder (deleted afterwards). Prints seconds for our parse + aggregation
and for plain `pandas.read_csv` of the same CSV (and plain reading of the text log), and their ratios.
Targets: CSV ratio <= 1.5; text >= 40 MB/s whatever the number of runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.ncu import kernel_table, read_profile

KERNELS = [f"void kernel_{i}<float, {i}>(float const*, float*, int)" for i in range(50)]
METRICS = [  # (name, unit, value)
    ("dram__bytes_read.sum", "Mbyte", "12.58"), ("dram__bytes_write.sum", "Kbyte", "512.00"),
    ("gpu__time_duration.sum", "usecond", "10.50"), ("lts__t_bytes.sum", "Mbyte", "20.10"),
    ("l1tex__t_bytes.sum", "Mbyte", "40.33"), ("sm__cycles_elapsed.avg.per_second", "cycle/nsecond", "1.41"),
    ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", "1,048,576"),
    ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "4,194,304"),
    ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "inst", "0"),
    ("sm__inst_executed_pipe_tensor.sum", "inst", "0"),
]
CSV_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
              '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n')
DASH = "    " + "-" * 70 + " " + "-" * 15 + " " + "-" * 30 + "\n"


def write_csv(path: Path, target_bytes: int) -> int:
    rows = 0
    with path.open("w") as f:
        f.write(CSV_HEADER)
        launch = 0
        while f.tell() < target_bytes:
            kernel = KERNELS[launch % len(KERNELS)]
            prefix = (f'"{launch}","4242","app","127.0.0.1","{kernel}","1","7","(256, 1, 1)","(1024, 1, 1)",'
                      f'"0","8.0","Command line profiler metrics",')
            f.write("".join(f'{prefix}"{m}","{u}","{v}"\n' for m, u, v in METRICS))
            rows += len(METRICS)
            launch += 1
    return rows


def write_text(path: Path, target_bytes: int, runs: int = 1) -> int:
    """A log of `runs` profiled processes (`--target-processes all`, say) measuring the same metrics."""
    launches = 0
    with path.open("w") as f:
        for run in range(runs):
            f.write(f"==PROF== Connected to process {4242 + run} (/usr/bin/app)\n[{4242 + run}] app@127.0.0.1\n")
            launches += _write_launches(f, launches, target_bytes * (run + 1) // runs)
    return launches


def _write_launches(f, first: int, until: int) -> int:
    """Launches from number `first` until the file is `until` bytes long; how many."""
    launches = first
    while f.tell() < until:
        kernel = KERNELS[launches % len(KERNELS)]
        f.write(f"  {kernel} (1024, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 8.0\n"
                f"    Section: Command line profiler metrics\n{DASH}")
        f.write("".join(f"    {m:<70} {u:>15} {v:>30}\n" for m, u, v in METRICS))
        f.write(DASH + "\n")
        launches += 1
    return launches - first


def best_of(repeat: int, *fns) -> list[float]:
    """The best of `repeat` timings of each of `fns`, taken in turn (one after another, then again): a load that
    comes and goes slows each alike, where timing one `repeat` times, then the next, would not."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, seen in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            seen.append(time.perf_counter() - t0)
    return [min(seen) for seen in times]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=100.0, help="size of each synthetic file in MB")
    parser.add_argument("--repeat", type=int, default=3,
                        help="best of N timings (default 3: shared machines are noisy)")
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 100, 1000],
                        help="profiled processes in the text log, one log per count (default 1 100 1000)")
    args = parser.parse_args()
    target = int(args.mb * 1e6)
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "details.csv"
        rows = write_csv(csv_path, target)
        size_csv = csv_path.stat().st_size / 1e6
        t_pandas, t_csv_read, t_csv_table = best_of(args.repeat, lambda: pd.read_csv(csv_path),
                                                    lambda: read_profile(csv_path), lambda: kernel_table([csv_path]))
        print(f"details CSV: {size_csv:.0f} MB, {rows:,} metric rows")
        print(f"  pandas.read_csv           {t_pandas:7.2f} s")
        print(f"  read_profile              {t_csv_read:7.2f} s   ratio {t_csv_read / t_pandas:.2f}x")
        print(f"  kernel_table              {t_csv_table:7.2f} s   ratio {t_csv_table / t_pandas:.2f}x")
        for runs in args.runs:
            text_path = Path(tmp) / f"log{runs}.txt"
            launches = write_text(text_path, target, runs)
            size = text_path.stat().st_size / 1e6
            t_plain, t_read, t_table = best_of(args.repeat, lambda p=text_path: p.read_text().split("\n"),
                                               lambda p=text_path: read_profile(p),
                                               lambda p=text_path: kernel_table([p]))
            text_path.unlink()
            print(f"text log: {size:.0f} MB, {runs} run(s), {launches:,} launches, {launches * len(METRICS):,} "
                  f"metric rows")
            print(f"  read + split lines        {t_plain:7.2f} s")
            print(f"  read_profile              {t_read:7.2f} s   {size / t_read:5.1f} MB/s")
            print(f"  kernel_table              {t_table:7.2f} s   {size / t_table:5.1f} MB/s (target >= 40); "
                  f"{t_table / t_pandas:.2f}x read_csv of the CSV (steadier on a loaded machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

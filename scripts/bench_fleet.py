"""Benchmark ceilings.fleet on a synthetic cluster: N roofs files as `ceilings.measure --quick` writes them on a
GPU (30 ceilings with their raw launch times, two sweeps, NVML facts and clocks, schema 1.1 launch).

    python scripts/bench_fleet.py [--files 10000] [--samples 150] [--repeat 3]

Files are written to a temporary folder (deleted afterwards), fast enough for 50,000 of them (7.9 GB): one
template per GPU index of a node, made by roofs_doc and validated (save_roofs's check), with the node's host
name, the GPU's UUID and rank and every ceiling's value left as slots that each file fills with plain text
(the values drawn per file as roofs_doc draws them), so each file is a distinct valid roofs file.
Prints the seconds to read and validate them (load), to group and judge them (analyze), for the Markdown and
the JSON, and for the picture, best of --repeat. Target: 10,000 files aggregated in seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ceilings import fleet
from ceilings.roofs import validate
from scripts.bench_torch import run

ROOT = Path(__file__).resolve().parents[1]
GPUS_PER_NODE = 8
# (name, kind, level, precision, pipe, peak_key, backend, value): an H100's figures, roughly
CEILINGS = [
    *[(f"dram.{op}", "bandwidth", "dram", None, "memory", "dram", backend, 3.0e12)
      for op in ("read", "write", "copy", "triad", "dot") for backend in ("cuda-c", "numba")],
    ("l2.read", "bandwidth", "l2", None, "memory", "l2", "cuda-c", 1.1e13),
    ("l1.read", "bandwidth", "l1", None, "memory", "l1", "cuda-c", 3.0e13),
    *[(f"{p}.fma", "compute", None, p.removesuffix("x2"), "cuda-core", p.removesuffix("x2"), backend, v)
      for p, v in (("fp64", 3.3e13), ("fp32", 6.6e13), ("fp16x2", 1.3e14), ("bf16x2", 1.3e14))
      for backend in ("cuda-c", "numba")],
    ("int32.mad", "compute", None, "int32", "cuda-core", "int32", "cuda-c", 3.3e13),
    *[(f"tensor.{t}", "compute", None, t, "tensor", f"tensor.{t}", "cuda-c", v)
      for t, v in (("fp16", 6.0e14), ("bf16", 6.0e14), ("tf32", 3.0e14))],
    *[(f"cublas.{t}", "compute", None, t, "tensor" if t != "fp32" else "cuda-core",
       f"tensor.{t}" if t != "fp32" else "fp32", "library", v)
      for t, v in (("fp64", 5.5e13), ("fp32", 5.0e13), ("tf32", 4.0e14), ("fp16", 7.0e14))],
]


def roofs_doc(rng: random.Random, node: int, gpu: int, samples: int) -> dict:
    slow = rng.random() < 0.01  # about one GPU in a hundred falls short
    ceilings = []
    for name, kind, level, precision, pipe, peak_key, backend, value in CEILINGS:
        value *= rng.gauss(1.0, 0.01) * (0.8 if slow else 1.0)
        times = [rng.uniform(1e-4, 2e-4) for _ in range(samples)]
        ceilings.append({
            "name": name, "kind": kind, "level": level, "precision": precision, "pipe": pipe, "peak_key": peak_key,
            "value": value, "unit": "B/s" if kind == "bandwidth" else "FLOP/s", "backend": backend,
            "kernel": f"{name}.{backend}", "work": {"bytes_read": 2**30, "bytes_written": 2**30, "flops": {}},
            "params": {"grid": 1056, "block": 256, "array_bytes": 2**30},
            "stats": {"samples_s": times, "n": samples, "min_s": min(times), "median_s": sorted(times)[samples // 2],
                      "max_s": max(times), "rel_iqr": 0.01, "noisy": False, "noise_remedy": None},
            "clocks": {"samples": 12, "sm_hz_median": 1.98e9, "sm_hz_min": 1.965e9, "mem_hz_median": 2.619e9,
                       "power_w_median": 540.0, "temperature_c_max": 61, "throttle_reasons": ["gpu_idle"]},
            "peaks": {"datasheet": None, "clock_derived_max": None, "clock_derived_run": None,
                      "of_datasheet": None, "of_clock_derived": None},
            "valid": True, "notes": []})
    sweep = {"x": {"name": "working set", "unit": "B"}, "y": {"name": "bandwidth", "unit": "B/s"},
             "points": [[2.0**k, rng.uniform(1e12, 3e13)] for k in range(12, 52)], "plateaus": [], "knee": None,
             "backend": "cuda-c", "kernel": "sweep", "notes": []}
    host = f"gpu{node:04d}"
    return {
        "schema_version": 1, "schema_minor": 1, "simulated": False, "complete": True,
        "meta": {"tool": "ceilings", "version": "0.1.0", "git_sha": None, "argv": ["--quick"],
                 "started": "2026-12-01T00:00:00+00:00", "finished": "2026-12-01T00:00:30+00:00", "host": host,
                 "python": "3.11.7"},
        "device": {"index": 0, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": 132,
                   "max_sm_clock_hz": 1.98e9, "memory_clock_hz": 2.619e9, "memory_bus_width_bits": 5120,
                   "memory_bytes": 85_520_809_984, "l2_bytes": 52_428_800, "driver_version": "12.4",
                   "runtime_version": "12.4", "uuid": f"GPU-{node:08x}-{gpu:04x}-0000-0000-000000000000",
                   "pci_bus_id": f"0000:{0x17 + 0x20 * gpu:02x}:00.0",
                   "nvml": {"sm_clock_hz": 1.98e9, "power_limit_w": 700.0, "ecc_enabled": True,
                            "driver_version": "550.54.15", "persistence_mode": True},
                   "probe_errors": {}},
        "launch": {"launcher": "slurm", "job_id": "4242", "node": host, "rank": node * GPUS_PER_NODE + gpu,
                   "local_rank": gpu, "world_size": None, "local_size": GPUS_PER_NODE, "cuda_visible_devices": "0",
                   "gpu_index": gpu, "mode": "concurrent", "gpus_at_once": GPUS_PER_NODE},
        "ceilings": ceilings,
        "sweeps": [{**sweep, "name": "bandwidth.working_set"}, {**sweep, "name": "intensity.fp32"}],
    }


SLOT = "@slot@"  # where a template takes a file's own text


def templates(rng: random.Random, samples: int) -> list[list[str]]:
    """For each GPU index of a node, its roofs file's text (roofs_doc's, validated) cut at the slots write()
    fills: the host name (meta.host, launch.node), the UUID, the rank, then each ceiling's value."""
    cut = []
    for gpu in range(GPUS_PER_NODE):
        doc = roofs_doc(rng, 0, gpu, samples)
        validate(doc)  # with its own values where the slots will be
        doc["meta"]["host"] = doc["launch"]["node"] = doc["device"]["uuid"] = SLOT
        doc["launch"]["rank"] = SLOT
        for c in doc["ceilings"]:
            c["value"] = SLOT
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"  # as dumps writes it
        parts = text.split(f'"{SLOT}"')
        assert len(parts) == 5 + len(CEILINGS), "a slot's text also occurs elsewhere in the template"
        cut.append(parts)
    return cut


def write(folder: Path, files: int, rng: random.Random, samples: int) -> None:
    """`files` roofs files in `folder`, GPUS_PER_NODE a node; about one GPU in a hundred 20 % slow (roofs_doc)."""
    cut = templates(rng, samples)
    for i in range(files):
        node, gpu = divmod(i, GPUS_PER_NODE)
        host = json.dumps(f"gpu{node:04d}")
        slow = 0.8 if rng.random() < 0.01 else 1.0
        values = [repr(c[-1] * rng.gauss(1.0, 0.01) * slow) for c in CEILINGS]
        # the slots in the order json.dumps met them: meta.host, device.uuid, launch.node, launch.rank, values
        fills = [host, json.dumps(f"GPU-{node:08x}-{gpu:04x}-0000-0000-000000000000"), host,
                 str(node * GPUS_PER_NODE + gpu), *values]
        parts = cut[gpu]
        text = "".join(part + fill for part, fill in zip(parts, fills)) + parts[-1]
        (folder / f"roofs-gpu{node:04d}-{gpu}.json").write_text(text)


# what a user would write instead: every file parsed whole, the median of each ceiling per GPU model
BASELINE = """
import json, pathlib, sys
import pandas as pd
rows = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    doc = json.loads(path.read_bytes())
    rows += [(doc["device"]["name"], c["name"], c["value"]) for c in doc["ceilings"]]
frame = pd.DataFrame(rows, columns=["gpu", "ceiling", "value"])
print(frame.groupby(["gpu", "ceiling"])["value"].median().to_string())
"""


def compare(folder: Path, repeat: int) -> None:
    """`python -m ceilings.fleet FOLDER --json` against BASELINE, whole processes alternating, medians."""
    ours, theirs = [], []
    for _ in range(repeat):
        # whole processes from a small launcher (bench_torch.run: a process started from this one would count
        # this one's memory, copied before its exec, in its peak); fleet's exit 1: some GPU falls short, as the
        # synthetic cluster has
        ours.append(run([sys.executable, "-m", "ceilings.fleet", str(folder), "--json",
                         str(folder.parent / "fleet.json"), "--force"], ok=(0, 1)))
        theirs.append(run([sys.executable, "-c", BASELINE, str(folder)]))
    (t_ours, m_ours), (t_base, m_base) = ([statistics.median(r[i] for r in runs) for i in (0, 1)]
                                          for runs in (ours, theirs))
    print(f"whole processes, medians of {repeat}: ceilings.fleet --json {t_ours:.2f} s, {m_ours:.2f} GB; json.load "
          f"+ pandas median {t_base:.2f} s, {m_base:.2f} GB; ratio {t_ours / t_base:.2f}x time, "
          f"{m_ours / m_base:.2f}x memory (targets <= 1.3x, <= 1.5x)")


def best_of(repeat: int, fn):
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="roofs files (GPUs) to aggregate")
    parser.add_argument("--samples", type=int, default=150, help="raw launch times per ceiling (--quick: ~50-200)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--compare", action="store_true",
                        help="only the whole-process comparison with json.load + pandas median (time, memory)")
    args = parser.parse_args()
    rng = random.Random(15)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "roofs"
        folder.mkdir()
        t0 = time.perf_counter()
        write(folder, args.files, rng, args.samples)
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"wrote {args.files} files, {size / 1e6:.0f} MB, in {time.perf_counter() - t0:.1f} s")
        if args.compare:
            compare(folder, args.repeat)
            return 0
        load_s, gpus = best_of(args.repeat, lambda: fleet.load_gpus(fleet.collect([str(folder)])))
        analyze_s, result = best_of(args.repeat, lambda: fleet.analyze(gpus))
        markdown_s, _ = best_of(args.repeat, lambda: fleet.markdown(result))
        json_s, _ = best_of(args.repeat, lambda: fleet.json_text(result))
        picture_s, _ = best_of(1, lambda: fleet.draw(result).savefig(folder / "fleet.png", dpi=120))
    failing = len({o.gpu.path for o in result.outliers})
    print(f"{args.files} GPUs in {len(result.groups)} group(s), {failing} falling short")
    print(f"load {load_s:.2f} s, analyze {analyze_s:.2f} s, markdown {markdown_s:.2f} s, json {json_s:.2f} s "
          f"(aggregate: {load_s + analyze_s + markdown_s + json_s:.2f} s); picture {picture_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

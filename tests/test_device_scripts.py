"""The device-check scripts without a GPU: the self-check's comparison on a hand-written ncu raw CSV, the
runner's and the apps' dry runs, the peers' bookkeeping, and device_check.sh's budget and summary."""

from __future__ import annotations

import csv
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"




selfcheck = importlib.import_module("scripts.ncu_selfcheck")
runner = importlib.import_module("scripts.selfcheck_runner")
peers = importlib.import_module("scripts.peers")

L2 = 50 * 2**20
OPS = ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul", "hfma", "hadd", "hmul")
METRICS = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in OPS] + [
    "dram__sectors_read.sum", "dram__sectors_write.sum", "gpu__time_duration.sum",
    "sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor.sum",
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum"]
UNITS = ["inst"] * 9 + ["sector", "sector", "ns", "inst", "inst", ""]
META = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
        "Grid Size", "Device", "CC"]


def write_raw_csv(path: Path, launches: list[tuple[str, dict]]) -> None:
    """An ncu `--csv --page raw` file: header, units row, one row per launch (metrics absent -> 0)."""
    with path.open("w", newline="") as f:
        f.write("==PROF== Connected to process 4242 (python)\n")
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(META + METRICS)
        w.writerow([""] * len(META) + UNITS)
        for i, (kernel, values) in enumerate(launches):
            w.writerow([i, 4242, "python", "127.0.0.1", kernel, 1, 13, "(256, 1, 1)", "(1, 1, 1)", 0, "9.0"]
                       + [values.get(m, 0) for m in METRICS])


def entry(index, name, backend, *, status="launched", kernel="k", level=None, pipe="cuda-core", params=None,
          br=0, bw=0, flops=None):
    return {"index": index, "benchmark": name, "backend": backend, "kind": "compute", "level": level,
            "precision": None, "pipe": pipe, "sweep": False, "plan_index": 0, "kernel_match": kernel,
            "grid": 1, "block": 256, "params": params or {}, "status": status, "check": None,
            "work": {"bytes_read": br, "bytes_written": bw, "flops": flops or {}}}


def marker(i: int) -> tuple[str, dict]:
    return (f"void ceilings_selfcheck_marker<{i}>()", {"gpu__time_duration.sum": 1000})


FFMA, FADD, HFMA = (f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("ffma", "fadd", "hfma"))
READ, WRITE, HMMA = "dram__sectors_read.sum", "dram__sectors_write.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum"
PIPE = "sm__inst_executed_pipe_tensor.sum"
TENSOR_OPS = "sm__ops_path_tensor_src_fp16_dst_fp32.sum"


@pytest.fixture
def outdir(tmp_path):
    """Eight entries and the launches ncu would have recorded for them (values chosen by hand)."""
    entries = [
        # 2 x 1000 FFMA + 10 FADD = 2010 FLOPs: exact
        entry(0, "fp32.fma", "cuda-c", kernel="fma_peak", flops={"fp32": 2010}, params={"lane": "fp32"}),
        # packed half2: 500 HFMA2 thread instructions x 2 FLOPs x 2 lanes = 2000
        entry(1, "fp16x2.fma", "numba", kernel="fma_peak_fp16x2", flops={"fp16": 2000}, params={"lane": "fp16x2"}),
        # 10 MiB read, 10 MiB written; writes 1 MiB short (< L2): ok*; reads 32 B x 327680 sectors = 10 MiB
        entry(2, "dram.copy", "cuda-c", kernel="dram_copy", level="dram", br=10 * 2**20, bw=10 * 2**20),
        # mma m16n8k16: 2*16*8*16 = 4096 FLOPs per instruction; declared 3 instructions' worth + 1
        entry(3, "tensor.fp16", "cuda-c", kernel="tensor_mma", pipe="tensor", params={"shape": "m16n8k16"},
              flops={"fp16": 3 * 4096 + 1}),
        entry(4, "cublas.fp32", "library", kernel=None, flops={"fp32": 2000}),
        entry(5, "l1.read", "cuda-c", status="failed to prepare: out of memory", kernel="cache_read"),
        entry(6, "tensor.fp8", "cuda-c", status="skipped: not supported on sm_90", kernel=None),
        entry(7, "dram.read", "numba", kernel="dram_read", level="dram", br=2**20),  # no launch after its marker
    ]
    launches = [
        ("stray_kernel_before_any_marker", {}),
        marker(0), ("void fma_peak<float, 8, 64, 8>(unsigned int *)", {FFMA: 1000, FADD: 10}),
        marker(1), ("cudapy::kernels::numba_fma::fma_peak_fp16x2_k8_n64[abi:v1](Array<float>)", {HFMA: 500}),
        marker(2), ("void dram_copy<256, 4, 8>(float4 const*, float4*)", {READ: 327680, WRITE: 294912}),
        marker(3), ("void tensor_mma<Fp16, 4, 8>(unsigned const*)", {HMMA: 3, PIPE: 3, TENSOR_OPS: 3 * 4096}),
        marker(4), ("sm90_xmma_gemm_f32f32", {FFMA: 990}), ("splitKreduce_kernel", {FFMA: 0, FADD: 10}),
        marker(7),
    ]
    work = {"dry_run": False, "arch": "sm_90", "l2_bytes": L2, "entries": entries}
    (tmp_path / selfcheck.WORK_FILE).write_text(json.dumps(work))
    write_raw_csv(tmp_path / selfcheck.NCU_FILE, launches)
    return tmp_path


def verdicts(path: Path) -> dict[tuple[str, str, str], str]:
    with (path / selfcheck.CSV_FILE).open() as f:
        return {(r["benchmark"], r["backend"], r["quantity"]): r["verdict"] for r in csv.DictReader(f)}


def test_selfcheck_compares_counted_with_declared(outdir, capsys):
    assert selfcheck.main(["--from-files", str(outdir)]) == 1
    v = verdicts(outdir)
    assert v[("fp32.fma", "cuda-c", "flops_fp32")] == "ok"
    assert v[("fp16x2.fma", "numba", "flops_fp16")] == "ok"
    assert v[("dram.copy", "cuda-c", "dram_read_bytes")] == "ok"
    assert v[("dram.copy", "cuda-c", "dram_write_bytes")] == "ok*"  # 9 MiB of 10: short by 1 MiB < L2
    assert v[("tensor.fp16", "cuda-c", "flops_fp16")] == "MISMATCH"  # 12288 counted vs 12289 declared
    assert v[("cublas.fp32", "library", "flops_fp32")] == "info"
    assert v[("l1.read", "cuda-c", "-")] == "NOT RUN"
    assert v[("tensor.fp8", "cuda-c", "-")] == "skipped"
    assert v[("dram.read", "numba", "-")] == "MISSING"
    err = capsys.readouterr().err
    assert "1 profiled launch(es) before the first marker were ignored" in err


def test_tensor_rows_also_judge_the_tensor_ops_counters(outdir):
    """The FLOP counter sm__ops_path_tensor_* (what analysis.ncu reads) against the declared 2mnk work: the
    fixture's kernel counted 3 x 4096 ops where 3 x 4096 + 1 FLOPs were declared: a mismatch, exactly."""
    selfcheck.main(["--from-files", str(outdir)])
    with (outdir / selfcheck.CSV_FILE).open() as f:
        row = next(r for r in csv.DictReader(f) if r["quantity"] == "flops_fp16 (tensor ops counters)")
    assert row["verdict"] == "MISMATCH" and float(row["counted"]) == 3 * 4096
    assert float(row["ratio"]) == pytest.approx(3 * 4096 / (3 * 4096 + 1))


def test_library_rows_sum_every_launch_between_markers(outdir):
    selfcheck.main(["--from-files", str(outdir)])
    with (outdir / selfcheck.CSV_FILE).open() as f:
        cublas = next(r for r in csv.DictReader(f) if r["benchmark"] == "cublas.fp32")
    assert cublas["launches"] == "2"
    assert float(cublas["counted"]) == 2 * 990 + 10  # gemm's FFMA and the reduction's FADD


def test_a_write_short_by_more_than_l2_is_a_mismatch():
    # arguments: direction, declared bytes, counted SECTORS (32 B), the launch's declared bytes, L2 bytes
    row = selfcheck._dram_row("write", 10 * L2, 8 * L2 // 32, 10 * L2, L2)  # short by 2 x L2
    assert row["verdict"] == "MISMATCH"
    assert selfcheck._dram_row("read", 32000, 1010, 32000, L2)["verdict"] == "ok"  # 32320 B: +1%
    assert selfcheck._dram_row("read", 32000, 1030, 32000, L2)["verdict"] == "MISMATCH"  # +3%
    assert selfcheck._dram_row("read", 32000, 970, 32000, L2)["verdict"] == "MISMATCH"  # reads: no L2 allowance


def test_kernel_name_must_match(outdir):
    work = json.loads((outdir / selfcheck.WORK_FILE).read_text())
    work["entries"][0]["kernel_match"] = "some_other_kernel"
    (outdir / selfcheck.WORK_FILE).write_text(json.dumps(work))
    selfcheck.main(["--from-files", str(outdir)])
    assert verdicts(outdir)[("fp32.fma", "cuda-c", "kernel name")] == "MISMATCH"


def test_all_matching_exits_0(tmp_path):
    work = {"dry_run": False, "l2_bytes": L2,
            "entries": [entry(0, "fp32.fma", "cuda-c", kernel="fma_peak", flops={"fp32": 2010})]}
    (tmp_path / selfcheck.WORK_FILE).write_text(json.dumps(work))
    write_raw_csv(tmp_path / selfcheck.NCU_FILE, [marker(0), ("void fma_peak<float>()", {FFMA: 1000, FADD: 10})])
    assert selfcheck.main(["--from-files", str(tmp_path)]) == 0
    assert "| fp32.fma " in (tmp_path / selfcheck.TABLE_FILE).read_text()


WGMMA_FLOPS = 2 * 64 * 256 * 16  # one m64n256k16 wgmma: 524288 FLOPs


@pytest.mark.parametrize("ops, verdict, rc", [(10 * WGMMA_FLOPS, "ok", 0), (10 * WGMMA_FLOPS - 1, "MISMATCH", 1),
                                              (None, "MISSING", 1)])
def test_wgmma_is_judged_by_the_tensor_ops_counters_and_its_instruction_count_is_information(tmp_path, ops,
                                                                                               verdict, rc):
    """10 wgmma m64n256k16 declared; the instruction counter reads 40 (one per warp of the warpgroup: 4x the
    declared work by the mma.sync rule), which is shown, never a mismatch; the FLOP counters decide."""
    e = entry(0, "wgmma.fp16", "cuda-c", kernel="tensor_wgmma", pipe="tensor", flops={"fp16": 10 * WGMMA_FLOPS},
              params={"shape": "m64n256k16", "instruction": "wgmma"})
    counters = {HMMA: 40, PIPE: 40, **({TENSOR_OPS: ops} if ops is not None else {})}
    (tmp_path / selfcheck.WORK_FILE).write_text(json.dumps({"dry_run": False, "l2_bytes": L2, "entries": [e]}))
    write_raw_csv(tmp_path / selfcheck.NCU_FILE, [marker(0), ("void tensor_wgmma<Fp16, 16, 1>()", counters)])
    if ops is None:  # this ncu offered no tensor ops counter: the column is absent, not 0
        text = (tmp_path / selfcheck.NCU_FILE).read_text().replace(f'"{TENSOR_OPS}"', '"gpu__time_duration.max"')
        (tmp_path / selfcheck.NCU_FILE).write_text(text)
    assert selfcheck.main(["--from-files", str(tmp_path)]) == rc
    v = verdicts(tmp_path)
    assert v[("wgmma.fp16", "cuda-c", "flops_fp16")] == "info"
    assert v[("wgmma.fp16", "cuda-c", "flops_fp16 (tensor ops counters)")] == verdict


def test_query_parse_trusts_only_a_complete_listing():
    from analysis.profile import base_name, parse_query

    listing = "Device NVIDIA H200 (GH100)\n---- ----\nMetric Name   Metric Description\n" + "".join(
        f"{base_name(m)}   something\n" for m in selfcheck.REQUIRED_METRICS)
    names = parse_query(listing + "sm__inst_executed_pipe_tensor_op_hmma   # of HMMA\n", selfcheck.REQUIRED_METRICS)
    assert selfcheck.choose_metrics(names) == [*selfcheck.REQUIRED_METRICS, "sm__inst_executed_pipe_tensor_op_hmma.sum"]
    assert parse_query("dram__sectors_read   # of sectors\n", selfcheck.REQUIRED_METRICS) is None
    assert selfcheck.choose_metrics(None) == list(selfcheck.REQUIRED_METRICS)


def test_runner_dry_run_plans_every_benchmark(tmp_path):
    out = tmp_path / "work.json"
    assert runner.main(["--dry-run", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    from kernels.registry import all_benchmarks

    names = {(b.name, b.backend) for b in all_benchmarks()}
    assert {(e["benchmark"], e["backend"]) for e in doc["entries"]} == names
    for e in doc["entries"]:
        if e["status"] == "planned":
            assert e["work"] is not None
            assert (e["kernel_match"] is None) == (e["backend"] == "library")
    per_sweep: dict = {}
    for e in doc["entries"]:
        if e["sweep"]:
            per_sweep.setdefault(e["benchmark"], []).append(e["plan_index"])
    assert all(len(v) <= runner.DEFAULT_SWEEP_PLANS and v[0] == 0 for v in per_sweep.values())


class _Sweep:
    is_sweep = True


def test_choose_plans_takes_the_ends_of_a_sweep():
    plans = list(range(34))
    assert [i for i, _ in runner.choose_plans(_Sweep(), plans, 2)] == [0, 33]
    assert [i for i, _ in runner.choose_plans(_Sweep(), plans, 3)] == [0, 16, 33]  # round(16.5) == 16
    assert [i for i, _ in runner.choose_plans(_Sweep(), plans[:2], 3)] == [0, 1]


def test_selfcheck_dry_run_prints_the_ncu_command(tmp_path, capsys):
    assert selfcheck.main(["--dry-run", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    cmd = next(line for line in out.splitlines() if line.startswith("  ncu "))
    for option in ("--profile-from-start off", "--clock-control none", "--target-processes all", "--page raw"):
        assert option in cmd
    assert "selfcheck_runner.py --out" in cmd


def test_profile_range_option_and_unknown_metrics_left_out(capsys):
    from analysis import profile

    assert profile.main(["--dry-run", "--range", "--out", "x", "--launch-count", "7", "--", "python", "app.py",
                         "-v"]) == 0
    cmd = capsys.readouterr().out.split()
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[-3:] == ["python", "app.py", "-v"] and cmd[cmd.index("--launch-count") + 1] == "7"
    metrics = ["dram__sectors_read.sum", "sm__inst_executed_pipe_tensor.sum", "sm__cycles_elapsed.avg.per_second"]
    kept, dropped = profile.split_available(metrics, {"dram__sectors_read", "sm__cycles_elapsed"})
    assert kept == ["dram__sectors_read.sum", "sm__cycles_elapsed.avg.per_second"]
    assert dropped == ["sm__inst_executed_pipe_tensor.sum"]
    assert profile.split_available(metrics, None) == (metrics, [])
    built = profile.ncu_command(["app"], log_file="x.csv", available={"dram__sectors_read", "sm__cycles_elapsed"})
    assert "sm__inst_executed_pipe_tensor.sum" not in built[built.index("--metrics") + 1]


# ------------------------------------------------------------------------------------------------- peers
def test_peer_sizes():
    assert peers.copy_bytes(50 * 2**20, 100 * 2**30) == 512 * 2**20  # 8 x 50 MiB = 400 MiB < 512 MiB floor
    assert peers.copy_bytes(100 * 2**20, 100 * 2**30) == 800 * 2**20  # 8 x L2
    assert peers.copy_bytes(100 * 2**20, 1000 * 2**20) == 250 * 2**20  # two buffers in half of 1000 MiB
    assert peers.gemm_n(4, 100 * 2**30) == 8192
    assert peers.gemm_n(4, 2**30) == 4096  # 3 x 8192^2 x 4 B = 768 MiB > 512 MiB; 3 x 4096^2 x 4 B = 192 MiB


def test_peer_judged_against_our_best_ceiling_of_the_same_key():
    from ceilings.roofs import load_roofs

    roofs = load_roofs(ROOT / "tests" / "data" / "roofs" / "h100.json")
    # tensor.fp16 (990 T) is invalid there: the best valid tensor.fp16 ceiling is cublas.fp16 at 700 T
    rec = peers.judge({"name": "p", "peak_key": "tensor.fp16", "value": 7.7e14}, roofs)
    assert rec["ours"]["name"] == "cublas.fp16" and rec["ratio_to_ours"] == pytest.approx(1.1)
    assert rec["beats_ours"]
    assert not peers.judge({"name": "p", "peak_key": "tensor.fp16", "value": 7.14e14}, roofs)["beats_ours"]  # +2%
    assert peers.judge({"name": "p", "peak_key": "fp64", "value": 1.0}, roofs)["ours"] is None


def test_gemm_check_catches_a_wrong_entry():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (64, 64)), rng.uniform(-1, 1, (64, 64))
    c = (a @ b).astype(np.float32)
    assert peers.gemm_problem(a.astype(np.float32), b.astype(np.float32), c, "fp32") is None
    c[63, 63] += 0.5
    assert "sampled entry off by" in peers.gemm_problem(a.astype(np.float32), b.astype(np.float32), c, "fp32")


def test_peers_dry_run_names_what_it_compares_with(capsys):
    assert peers.main(["--dry-run", "--roofs", str(ROOT / "tests/data/roofs/h100.json"), "."]) == 0
    out = capsys.readouterr().out
    assert "cupy.matmul.fp16" in out and "vs cublas.fp16 (library)" in out


# --------------------------------------------------------------------------------------- device_check.sh
def test_device_check_rejects_a_missing_outdir():
    proc = subprocess.run(["bash", str(SCRIPTS / "device_check.sh"), "--dry-run"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def test_device_check_dry_run_keeps_to_its_budget(tmp_path):
    """A 20 s budget less the 10 s reserve leaves 10 s: env runs (about 1 s; 5 s left would be the least a
    step starts with, missed by a loaded machine or a second's tick); once a step finds the budget spent,
    every later step is skipped too, and the whole run stays within the budget; summary.txt and the fragment
    are written all the same."""
    env = {**os.environ, "PYTHON": sys.executable, "DEVICE_CHECK_BUDGET_S": "20"}
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(SCRIPTS / "device_check.sh"), "--dry-run", str(tmp_path)], env=env, check=False,
                          capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - t0
    lines = [ln.split("\t") for ln in (tmp_path / "summary.txt").read_text().splitlines() if not ln.startswith("#")]
    statuses = {ln[0]: ln[1] for ln in lines}
    assert statuses["env"] == "ok"
    assert all(s in ("ok", "timeout") or s.startswith(("failed", "skipped")) for s in statuses.values())
    order = [s for s in statuses.values() if not s.startswith("skipped: Python module")]
    first_spent = next(i for i, s in enumerate(order) if s == "skipped: budget spent")
    assert all(s.startswith("skipped") for s in order[first_spent:])
    assert elapsed < 20 + 10 + 5  # budget + one step's kill grace + the fragment
    assert proc.returncode == (1 if any(s == "timeout" or s.startswith("failed") for s in statuses.values()) else 0)
    assert (tmp_path / "BENCHMARKS.fragment.md").exists()
    ran = [name for name, s in statuses.items() if not s.startswith("skipped")]
    assert all((tmp_path / "logs" / f"{name}.log").exists() for name in ran)
    # the env step records what every later step depends on; null where this machine cannot say (no GPU)
    versions = json.loads((tmp_path / "versions.json").read_text())
    for key in ("driver (NVML)", "CUDA driver API", "CUDA runtime", "NVRTC", "NVVM (Numba)", "cuBLAS", "ncu", "nsys",
                "nvcc", "ptxas", "cuobjdump", "cupy-cuda13x", "torch", "torchvision"):
        assert key in versions
    log = (tmp_path / "logs" / "env.log").read_text()
    assert all(f"{key}: not known here (" in log for key, v in versions.items() if v is None and key in
               ("driver (NVML)", "CUDA driver API", "cuBLAS", "ncu", "nsys"))


# ---------------------------------------------------------------------------------------- device_run.sh
FILES_BACK = 8  # what the device machine returns from $OUT: at most 8 files, at most 2 folders deep


def device_run(out: Path, scratch: Path, budget_s: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHON": sys.executable, "DEVICE_CHECK_BUDGET_S": str(budget_s),
           "DEVICE_RUN_SCRATCH": str(scratch), "DEVICE_RUN_PACK_S": "1"}
    return subprocess.Popen(["bash", str(SCRIPTS / "device_run.sh"), "--dry-run", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def returned(out: Path) -> dict[str, Path]:
    files = {str(p.relative_to(out)): p for p in out.rglob("*") if p.is_file()}
    assert len(files) <= FILES_BACK and all(name.count("/") <= 2 for name in files), sorted(files)
    return files


def archive(path: Path) -> dict[str, str]:
    import tarfile

    with tarfile.open(path) as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def steps_of(summary: str) -> dict[str, str]:
    return {row[0]: row[1] for row in (line.split("\t") for line in summary.splitlines() if not line.startswith("#"))}


def test_device_run_packs_every_log_into_the_few_files_that_come_back(tmp_path):
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    scratch.mkdir()
    (scratch / "decode.ncu-rep").write_bytes(b"large binary report")  # left out of the archive
    proc = device_run(out, scratch, budget_s=15)
    log, _ = proc.communicate(timeout=120)
    files = returned(out)
    assert {"summary.txt", "BENCHMARKS.fragment.md", "results.tgz"} <= set(files), log  # no roofs in 15 s
    packed = archive(out / "results.tgz")
    steps = steps_of(packed["summary.txt"])
    ran = [name for name, status in steps.items() if not status.startswith("skipped")]
    assert ran and all(f"logs/{name}.log" in packed for name in ran)
    assert "decode.ncu-rep" not in packed and "device-check.log" in packed
    assert (out / "summary.txt").read_text() == (scratch / "summary.txt").read_text() == packed["summary.txt"]


def test_device_run_killed_half_way_returns_what_had_finished(tmp_path):
    """SIGTERM while the simulated measure runs: what the packer had already brought back holds a ceiling, and
    after the kill the roofs file, the summary and the archive hold what had finished."""
    import signal

    from ceilings.roofs import load_roofs

    scratch, out = tmp_path / "scratch", tmp_path / "out"
    proc = device_run(out, scratch, budget_s=600)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "roofs.json").exists() and load_roofs(out / "roofs.json")["ceilings"]:
                break  # packed while the run goes on
            time.sleep(0.2)
        assert proc.poll() is None and (out / "roofs.json").exists(), "no roofs packed while measure ran"
        proc.send_signal(signal.SIGTERM)
        log, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    returned(out)
    roofs = load_roofs(out / "roofs.json")
    assert roofs["complete"] is False and roofs["meta"]["stopped"] == "SIGTERM" and roofs["ceilings"], log
    steps = steps_of((out / "summary.txt").read_text())
    assert steps["env"] == "ok" and steps["measure-simulate"] == "stopped by SIGTERM (exit 130)"
    after = list(steps)[list(steps).index("measure-simulate") + 1:]
    assert after and all(steps[name] == "skipped: stopped by SIGTERM" for name in after)
    packed = archive(out / "results.tgz")
    assert "interrupted (SIGTERM)" in packed["logs/measure-simulate.log"] and "logs/env.log" in packed
    assert proc.returncode == 1

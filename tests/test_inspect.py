"""kernels.inspect / kernels.sass: SASS counting, the loop model, verdicts and the CLI.

Expected counts were taken from the fixtures independently of the code under test, e.g.
  awk '/Function : fma4x64$/{on=1;next} /Function :/{on=0} on' tiny.sm_90.sass | grep -c 'FFMA'
(tiny.sm_90.sass, bypass.sm_90.sass: NVRTC 13.0 -arch=sm_90 of tiny.cu, bypass.cu;
mma.sm_90.sass: mma.sync f16/bf16/tf32/e4m3, f64, s8).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernels import inspect as insp
from kernels import sass
from kernels.base import REFERENCE_LIMITS, Benchmark, CudaSource, Plan, Work

ROOT = Path(__file__).parents[1]
DATA = Path(__file__).parent / "data" / "inspect"
TINY = str(DATA / "tiny.cu")  # absolute: CudaSource joins it onto kernels/cuda, an absolute path wins


def _functions(name: str) -> dict[str, list[sass.Instruction]]:
    return sass.parse_cuobjdump((DATA / name).read_text())


def _ins(text: str) -> sass.Instruction:
    fn = sass.parse_cuobjdump(f"Function : k\n        /*0000*/ {text} ;\n")["k"]
    return fn[0]


# --- parsing and counting (no tools needed) -------------------------------------------------------------


@pytest.mark.parametrize("function, skipped_at", [("behind_flag", 0x30), ("half_warp", 0xa0)])
def test_a_loop_some_threads_skip_is_unprovable(function, skipped_at):
    """bypass.cu: the loop behind a flag (SASS: `@!P0 EXIT` on flag == 0) and behind threadIdx.x < 16
    (`ISETP.GT.U32.OR P0, PT, R0, 0xf, !P0`, folded into the zero-trip test). Counting the body for every
    thread would claim work the timed launch does not do."""
    a = sass.analyse(function, _functions("bypass.sm_90.sass")[function])
    assert a.body.flops == {"fp32": 16 * 4 * 2}  # the loop itself is found: 64 FFMA per trip
    assert len(a.problems) == 1
    assert a.problems[0].startswith(f"threads may skip the loop at /*{skipped_at:04x}*/")


def test_the_zero_trip_guard_alone_is_accepted():
    """bypass.cu `guarded`: the only way around the loop is `ISETP.GE.AND P0, PT, R5, 0x1` on trips, the
    launch constant the back branch (`ISETP.LE.AND P0, PT, R5, UR4`) compares with."""
    a = sass.analyse("guarded", _functions("bypass.sm_90.sass")["guarded"])
    assert a.problems == () and a.body.flops == {"fp32": 16 * 4 * 2}


def test_fma_chain_loop_and_once_counts():
    a = sass.analyse("fma4x64", _functions("tiny.sm_90.sass")["fma4x64"])
    assert a.problems == ()
    assert a.body.work == {"FFMA": 256}  # grep: 256 FFMA.FTZ, all in the loop
    assert a.body.flops == {"fp32": 512}
    assert a.once.flops == {"fp32": 3}  # the 3 FADD.FTZ summing the chains
    assert a.conditional.work == {"IMAD": 1, "STG.E": 1}  # the guarded store and its index: not counted
    assert a.once.write_bytes == 0


def test_copy_counts_128_bit_accesses():
    a = sass.analyse("copy4", _functions("tiny.sm_90.sass")["_Z5copy4IfEvPK6float4PS0_i"])
    assert a.problems == ()
    assert a.body.work == {"LDG.E.128.CONSTANT": 1, "STG.E.128": 1}
    assert (a.body.read_bytes, a.body.write_bytes) == (16, 16)
    assert a.global_widths == {"LDG.E.128.CONSTANT": 1, "STG.E.128": 1}


def test_unrolled_main_plus_remainder_is_unprovable():
    a = sass.analyse("fma_unrolled", _functions("tiny.sm_90.sass")["fma_unrolled"])
    assert a.problems and "remainder" in a.problems[0]


def test_straight_line_kernel_has_no_loop():
    a = sass.analyse("scale1", _functions("tiny.sm_90.sass")["scale1"])
    assert a.loop is None and a.problems == ()
    assert a.once.work == {"FMUL": 1, "IMAD": 1, "LDG.E.CONSTANT": 1, "STG.E": 1}  # IMAD: the index
    assert (a.once.read_bytes, a.once.write_bytes, a.once.flops) == (4, 4, {"fp32": 1, "int32": 2})


def test_mma_opcodes_and_sm90_fp8_emulation():
    fns = _functions("mma.sm_90.sass")
    counts = {}
    for ins in fns["mma_f16"]:
        counts[ins.opcode] = counts.get(ins.opcode, 0) + 1
    assert counts["HMMA.16816.F32"] == 9 and counts["HMMA.1688.F32.TF32"] == 5
    assert counts["F2FP.F16.E4M3.UNPACK_B"] == 24 and not any(op.startswith("QMMA") for op in counts)
    assert sass.emulates_fp8(fns["mma_f16"]) and not sass.emulates_fp8(fns["mma_misc"])


@pytest.mark.parametrize(("text", "key", "precision", "flops"), [
    ("HMMA.16816.F32 R8, R4, R2, R8", "HMMA.16816.F32", "fp16", 2 * 16 * 8 * 16 // 32),
    ("HMMA.16816.F32.BF16 R8, R4, R2, R8", "HMMA.16816.F32.BF16", "bf16", 128),
    ("HMMA.1688.F32.TF32 R8, R4, R2, R8", "HMMA.1688.F32.TF32", "tf32", 2 * 16 * 8 * 8 // 32),
    ("DMMA.8x8x4 R16, R30, R28, R16", "DMMA.8x8x4", "fp64", 2 * 8 * 8 * 4 // 32),
    ("DMMA.884 R16, R22, R20, R16", "DMMA.884", "fp64", 16),
    ("IMMA.16832.S8.S8 R12, R8.ROW, R2.COL, R12", "IMMA.16832.S8.S8", "int8", 2 * 16 * 8 * 32 // 32),
    ("QMMA.16832.F32.E4M3.E4M3 R8, R4, R2, R8", "QMMA.16832.F32.E4M3.E4M3", "fp8", 256),
    # wgmma: per thread of the warpgroup, 2*64*N*K / 128 with N from the mnemonic (the shapes NVRTC 13.0 emits)
    ("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24, gsb0", "HGMMA.64x256x16.F32.BF16", "bf16", 4096),
    ("HGMMA.64x256x16.F32 R24, gdesc[UR8], R24", "HGMMA.64x256x16.F32", "fp16", 4096),
    ("HGMMA.64x8x16.F32.BF16 R24, gdesc[UR8], R24", "HGMMA.64x8x16.F32.BF16", "bf16", 2 * 64 * 8 * 16 // 128),
    ("HGMMA.64x96x8.F32.TF32 R24, gdesc[UR8], R24", "HGMMA.64x96x8.F32.TF32", "tf32", 2 * 64 * 96 * 8 // 128),
    ("QGMMA.64x256x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24", "QGMMA.64x256x32.F32.E4M3.E4M3", "fp8", 8192),
    ("FFMA.FTZ R4, R4, R2, R3", "FFMA", "fp32", 2),
    ("DFMA R4, R4, R2, R6", "DFMA", "fp64", 2),
    ("HFMA2 R6, R6, R4, R5", "HFMA2", "fp16", 4),
    ("HFMA2.MMA R9, R9, R4, R5", "HFMA2.MMA", "fp16", 4),
    ("HFMA2.BF16_V2 R11, R11, R4, R4", "HFMA2.BF16_V2", "bf16", 4),
    ("HFMA2.MMA.BF16_V2 R11, R11, 1, 1, R4", "HFMA2.MMA.BF16_V2(add)", "bf16", 2),
    ("HFMA2.MMA.BF16_V2 R11, R11, R4, -RZ", "HFMA2.MMA.BF16_V2(mul)", "bf16", 2),
    ("HADD2 R9, R9, R5", "HADD2", "fp16", 2),
    ("IMAD R0, R0, UR4, R3", "IMAD", "int32", 2),
])
def test_flop_classes(text, key, precision, flops):
    op = sass.classify(_ins(text))
    assert (op.key, op.precision, op.flops) == (key, precision, flops)


@pytest.mark.parametrize(("text", "key"), [
    ("HFMA2.MMA R5, -RZ, RZ, 0, 0", "HFMA2.MMA(mov)"),  # ptxas' constant/zero idiom
    ("IMAD.MOV.U32 R19, RZ, RZ, RZ", "IMAD.MOV"),
    ("IMAD.WIDE R4, R0, 0x10, R8", "IMAD.WIDE"),
    ("IMAD.IADD R0, R9, 0x1, -R28", "IMAD.IADD"),
    ("IMAD.SHL.U32 R0, R0, 0x4, RZ", "IMAD.SHL"),
    ("HADD2.F32 R0, -RZ, R2.H0_H0", "HADD2.F32"),
])
def test_not_work(text, key):
    op = sass.classify(_ins(text))
    assert not op.is_work and op.key.startswith(key.split("(")[0])


@pytest.mark.parametrize(("text", "read", "write"), [
    ("LDG.E R26, desc[UR4][R2.64+0x10]", 4, 0), ("LDG.E.64 R2, desc[UR4][R2.64]", 8, 0),
    ("LDG.E.128.CONSTANT R12, desc[UR6][R4.64]", 16, 0), ("STG.E.U8 desc[UR4][R2.64], R5", 0, 1),
    ("STG.E.128 desc[UR6][R2.64], R12", 0, 16), ("LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64]", 16, 0),
    ("LDS.128 R4, [R2]", 0, 0),
])
def test_global_bytes(text, read, write):
    op = sass.classify(_ins(text))
    assert (op.read_bytes, op.write_bytes) == (read, write)


def test_a_source_may_name_the_arch_specific_variant_of_its_planned_arch():
    assert insp.source_arch(("-std=c++17",), "sm_90") == "sm_90"
    assert insp.source_arch(("-std=c++17", "-arch=sm_90a"), "sm_90") == "sm_90a"
    assert insp.source_arch(("--gpu-architecture=sm_90",), "sm_90") == "sm_90"
    with pytest.raises(insp.CeilingsError, match="a plan for sm_80 compiles for sm_80 or sm_80a"):
        insp.source_arch(("-arch=sm_90a",), "sm_80")  # sm_90a code does not run on an A100
    with pytest.raises(insp.CeilingsError, match="once"):
        insp.source_arch(("-arch=sm_90a", "-arch=sm_90"), "sm_90")


# --- compile, prove, CLI (NVRTC, cuobjdump, ptxas) ------------------------------------------------------


def _tools_or_skip():
    try:
        insp.find_tool("cuobjdump")
        insp.find_tool("ptxas")
        insp._nvrtc()
    except insp.MissingDependency as exc:
        pytest.skip(str(exc))


GRID, BLOCK, TRIPS = 4, 128, 10
THREADS = GRID * BLOCK


def _bench(name, expr, work, loop_trips=TRIPS, level=None, kind="compute"):
    plan = Plan(GRID, BLOCK, work, params={"trips": loop_trips}, loop_trips=loop_trips)
    return Benchmark(name=name, backend="cuda-c", kind=kind, kernel=expr, description="test kernel",
                     plans=lambda limits, quick: [plan], prepare=lambda plan, rt: None,
                     source=lambda plan: CudaSource(TINY, expr), level=level, precision="fp32")


FMA_OK = _bench("test.fma", "fma4x64", Work(flops={"fp32": THREADS * (512 * TRIPS + 3)}))
FMA_WRONG = _bench("test.fma_wrong", "fma4x64", Work(flops={"fp32": THREADS * 512 * TRIPS}))  # forgot 3 FADD
COPY = _bench("test.copy", "copy4<float>", Work(bytes_read=16 * THREADS * TRIPS, bytes_written=16 * THREADS * TRIPS),
              level="dram", kind="bandwidth")
UNROLLED = _bench("test.unrolled", "fma_unrolled", Work(flops={"fp32": THREADS * 2 * TRIPS}))
NOT_PROVEN = _bench("test.not_proven", "fma_unrolled", Work(flops={"fp32": 1}), loop_trips=None)


@pytest.mark.nvcc
def test_verdicts_on_both_archs():
    _tools_or_skip()
    results = insp.inspect_benchmarks([FMA_OK, FMA_WRONG, COPY, UNROLLED, NOT_PROVEN], ("sm_80", "sm_90"))
    verdicts = {(r.benchmark, r.arch): r.verdict for r in results}
    for arch in ("sm_80", "sm_90"):
        assert verdicts[("test.fma", arch)] == "ok"
        assert verdicts[("test.copy", arch)] == "ok"
        assert verdicts[("test.fma_wrong", arch)] == "MISMATCH"
        assert verdicts[("test.unrolled", arch)] == "unprovable"
        assert verdicts[("test.not_proven", arch)] == "not proven"
    wrong = next(r for r in results if r.benchmark == "test.fma_wrong")
    assert any(f"(+{3 * THREADS})" in reason for reason in wrong.reasons)
    ok = next(r for r in results if r.benchmark == "test.fma")
    assert ok.modes == ("full", "quick") and ok.loop_work == {"FFMA": 256}
    frame = insp.results_frame(results)
    assert len(frame) == len(results) and "sass_fp32" in frame


@pytest.mark.nvcc
def test_cli_mismatch_json_keep(tmp_path, monkeypatch, capsys):
    _tools_or_skip()
    monkeypatch.setattr("kernels.registry.all_benchmarks", lambda: [FMA_OK, FMA_WRONG])
    out = tmp_path / "inspect.json"
    code = insp.main(["--arch", "sm_90", "--json", str(out), "--keep", str(tmp_path / "keep")])
    assert code == 1
    table = capsys.readouterr().out
    assert "MISMATCH" in table and "test.fma_wrong" in table
    rows = json.loads(out.read_text())
    assert {r["verdict"] for r in rows} == {"ok", "MISMATCH"}
    assert all(r["arch"] == "sm_90" and r["loop_counts"]["FFMA"] == 256 for r in rows)
    kept = sorted(p.suffix for p in (tmp_path / "keep" / "sm_90").iterdir())
    assert kept == [".cubin", ".sass"]  # one program for both (same file): one cubin


@pytest.mark.nvcc
def test_cli_ok_exits_zero(monkeypatch):
    _tools_or_skip()
    monkeypatch.setattr("kernels.registry.all_benchmarks", lambda: [FMA_OK, NOT_PROVEN])
    assert insp.main(["--arch", "sm_80"]) == 0


def test_missing_tool_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(insp.TOOLS_ENV, str(tmp_path))
    monkeypatch.setattr("kernels.registry.all_benchmarks", lambda: [FMA_OK])
    assert insp.main(["--arch", "sm_90"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cuobjdump" in err[0] and "nvidia-cuda-cuobjdump" in err[0]


@pytest.mark.nvcc
def test_whole_registry_is_green_at_sm80_and_sm90(tmp_path):
    """The issue's acceptance test: every kernel proven (or explicitly not proven) at sm_80 and sm_90."""
    _tools_or_skip()
    # its own process: conftest turns Numba's simulator on, which cannot compile to PTX
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = tmp_path / "registry.json"
    run = subprocess.run([sys.executable, "-m", "kernels.inspect", "--json", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode in (0, 1), run.stderr
    results = json.loads(out.read_text())
    assert {r["arch"] for r in results} == {"sm_80", "sm_90"}
    bad = [f"{r['benchmark']}:{r['backend']} {r['arch']} {r['params']}: {r['verdict']}: {'; '.join(r['reasons'])}"
           for r in results if r["verdict"] not in ("ok", "not proven")]
    assert not bad, "\n".join(bad)
    # every hand-written kernel the issues ask for was proven on both architectures (fp8 mma.sync has no
    # plan on sm_80/sm_90; cuBLAS has no source): a family that stopped planning would show up here
    both = {f"{op}:{backend}" for op in ("dram.read", "dram.write", "dram.copy", "dram.triad", "dram.dot",
                                        "fp64.fma",
                                        "fp32.fma", "fp16x2.fma", "bf16x2.fma", "int32.mad")
            for backend in ("cuda-c", "numba")}
    cuda_c = {f"{name}:cuda-c" for name in ("l1.read", "l2.read", "l2.read.near", "bandwidth.working_set",
                                           "intensity.fp32",
                                           "intensity.fp64", "tensor.fp16", "tensor.bf16", "tensor.tf32",
                                           "sfu.ex2", "sfu.rsqrt", "sfu.sin", "launch.stream", "launch.sync",
                                           "launch.graph", "launch.gap", "latency.l1", "latency.l2", "latency.dram")}
    hopper = {f"wgmma.{t}:cuda-c" for t in ("bf16", "fp16", "fp8")}  # sm_90a wgmma: planned on CC 9.0 only
    for arch, extra in (("sm_80", set()), ("sm_90", hopper)):
        assert {f"{r['benchmark']}:{r['backend']}" for r in results if r["arch"] == arch} == both | cuda_c | extra


# --- occupancy: the planned grid must fit on the SMs at once ---------------------------------------------

RESOURCE_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function _Z8fma_peakIfLi8ELi64ELi8EEvPN4LaneIT_E4BitsES3_S3_S3_iii:
  REG:31 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function dram_triad:
  REG:94 STACK:0 SHARED:4096 LOCAL:0 CONSTANT[0]:600 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_resource_usage_is_read_per_function():
    usage = insp.parse_resource_usage(RESOURCE_USAGE)
    assert usage["_Z8fma_peakIfLi8ELi64ELi8EEvPN4LaneIT_E4BitsES3_S3_S3_iii"]["REG"] == 31
    assert usage["dram_triad"]["REG"] == 94 and usage["dram_triad"]["SHARED"] == 4096


def test_blocks_that_fit_by_hand():
    sm80 = REFERENCE_LIMITS["sm_80"]
    # 94 registers x 32 lanes = 3008 -> 3072 per warp (units of 256); 8 warps = 24576; 65536 // 24576 = 2
    assert insp.blocks_that_fit(sm80, 256, 94, 0) == 2
    # 32 registers: 1024 per warp, 8192 per block -> 8; threads 2048 // 256 = 8
    assert insp.blocks_that_fit(sm80, 256, 32, 0) == 8
    # shared memory, each block's plus the 1 KiB the system reserves: 164 KiB // 49 KiB = 3; 164 // 21 = 7
    assert insp.blocks_that_fit(sm80, 128, 16, 48 * 1024) == 3
    assert insp.blocks_that_fit(sm80, 256, 32, 20 * 1024) == 7
    # registers per scheduler: 40 x 32 -> 1280 per warp; 16384 // 1280 = 12 warps x 4 = 48; 2 per block -> 24
    assert insp.blocks_that_fit(REFERENCE_LIMITS["sm_90"], 64, 40, 0) == 24
    # sm_89: 1536 threads per SM -> 6 blocks of 256 however few registers
    assert insp.blocks_that_fit(REFERENCE_LIMITS["sm_89"], 256, 16, 0) == 6


def test_a_grid_larger_than_one_wave_is_a_problem():
    sm80 = REFERENCE_LIMITS["sm_80"]
    job = insp._Job(None, Plan(grid=4 * sm80.sm_count, block=256, work=Work()), "sm_80", None, ["full"])
    assert insp.occupancy_problem(job, {"REG": 64, "SHARED": 0}) is None  # 64 x 32 x 8 x 4 = 65536: fits
    problem = insp.occupancy_problem(job, {"REG": 94, "SHARED": 0})
    assert problem.startswith("occupancy: 94 registers/thread and 0 B shared/block fit 2 blocks of 256 threads "
                              "per SM; the grid plans 4 per SM on 108 SMs")


def test_an_oversubscribed_grid_runs_in_exactly_its_declared_waves():
    sm90 = REFERENCE_LIMITS["sm_90"]
    job = insp._Job(None, Plan(grid=8 * 8 * sm90.sm_count, block=256, work=Work(), waves=8), "sm_90", None,
                    ["full"])
    assert insp.occupancy_problem(job, {"REG": 32, "SHARED": 0}) is None  # 8 fit: 8 waves of 132 x 8
    # 40 registers: 6 fit, so 8448 blocks run in ceil(8448 / 792) = 11 waves
    assert insp.occupancy_problem(job, {"REG": 40, "SHARED": 0}).endswith(
        "fit 6 blocks of 256 threads per SM; the grid of 8448 blocks runs in 11 waves on 132 SMs, not the 8 its "
        "plan declares")
    # fewer blocks than fit, declared as one wave, are one wave
    one = insp._Job(None, Plan(grid=3 * sm90.sm_count, block=256, work=Work()), "sm_90", None, ["full"])
    assert insp.occupancy_problem(one, {"REG": 32, "SHARED": 0}) is None


def test_numba_stream_kernels_are_capped_to_their_planned_occupancy():
    """64 K registers / (256 threads x planned blocks per SM), in units of 8: read and write plan 8 blocks
    (32 registers), copy and triad 4 (64), the triad only 2 on sm_80 (128: ptxas wants 94 there)."""
    from kernels import stream

    def caps(arch):
        return {op: stream.numba_source(stream.OPS[op], stream.dram_plan(stream.OPS[op], "numba",
                                                                         REFERENCE_LIMITS[arch], False)).max_registers
                for op in ("read", "write", "copy", "triad")}

    assert caps("sm_90") == {"read": 32, "write": 32, "copy": 64, "triad": 64}
    assert caps("sm_80") == {"read": 32, "write": 32, "copy": 64, "triad": 128}

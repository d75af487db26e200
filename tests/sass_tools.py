"""Offline SASS for the kernel tests: one CUDA C kernel compiled as CuPy compiles it (NVRTC, its name
expression and options, an explicit arch) and disassembled, and the opcodes of its single loop counted by a
plain reading of the text (independent of kernels.sass, whose model these tests check)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from common.errors import MissingDependency
from kernels.base import CudaSource

_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9._]*)([^;]*);")


def cuobjdump() -> Path:
    from kernels.inspect import find_tool

    try:
        return find_tool("cuobjdump")
    except MissingDependency as exc:
        pytest.skip(str(exc))


def sass_of(source: CudaSource, arch: str = "sm_90") -> str:
    """`cuobjdump -sass` of the cubin NVRTC makes of `source` for `arch`."""
    pytest.importorskip("cupy")
    from cupy.cuda import nvrtc

    tool = cuobjdump()
    try:
        prog = nvrtc.createProgram(source.code, source.file, [], [])
    except (OSError, RuntimeError) as exc:  # the NVRTC library itself is missing
        pytest.skip(f"NVRTC unavailable ({exc}): pip install 'nvidia-cuda-nvrtc==13.0.*'")
    try:
        nvrtc.addNameExpression(prog, source.name_expression)
        try:
            nvrtc.compileProgram(prog, [*source.options, f"-arch={arch}"])
        except nvrtc.NVRTCError:
            raise AssertionError(nvrtc.getProgramLog(prog)) from None
        cubin = nvrtc.getCUBIN(prog) + b"\0"  # cupy 14.2 returns it one byte short
    finally:
        nvrtc.destroyProgram(prog)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True,
                              check=True).stdout


def loop_counts(sass: str) -> tuple[Counter, Counter]:
    """Opcode counts inside the kernel's only backward branch's loop, and outside it."""
    code = [(int(a, 16), op, rest) for a, _, op, rest in _INSTRUCTION.findall(sass)]
    loops = [(int(rest.split("0x")[1].split()[0], 16), addr) for addr, op, rest in code
             if op == "BRA" and "0x" in rest and int(rest.split("0x")[1].split()[0], 16) < addr]
    assert len(loops) == 1, f"expected one loop, found {len(loops)}"
    (start, end), = loops
    inside = Counter(op for addr, op, _ in code if start <= addr <= end)
    outside = Counter(op for addr, op, _ in code if not start <= addr <= end)
    return inside, outside

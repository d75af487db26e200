"""Numba CUDA peak-FMA kernels (imported lazily by kernels.fma: this module imports numba).

Same design as kernels/cuda/fma.cu: K chains x N FMAs written out in the source (NVVM only partly unrolls
a constant `range` loop, which would leave a second, inner loop), one runtime loop of `trips` iterations,
values stored as raw bits only when `store_all` is set.

numba-cuda 0.30 has no packed half2 / bfloat162 type, and its scalar `cuda.fp16.hfma` / `cuda.bf16.hfma`
lower to calls into a CUDA C shim that is not inlined without LTO. The packed kernels therefore keep the
pair in a uint32 and issue one `fma.rn.f16x2` / `fma.rn.bf16x2` through a Numba intrinsic (inline PTX):
the same HFMA2 the CUDA C kernel runs. fp32, fp64 and int32 issue `fma.rn.f32` / `fma.rn.f64` /
`mad.lo.s32` the same way: one call per FMA keeps Numba's compile time down. On the simulator the
intrinsics are replaced by numpy emulation.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import config, cuda, float32, float64, int32, uint32, uint64  # noqa: F401  (used by kernel code)

# Raw-bits <-> value casts and the one multiply-add per precision, as device functions.
if config.ENABLE_CUDASIM:
    def _view(value, dtype):
        return np.array([value]).view(dtype)[0]

    def _packed_fma(dtype):
        def mad(x, a, c):
            lanes = [_view(v, np.uint32) for v in (x, a, c)]
            if dtype is np.float16:
                xs, as_, cs = (np.array([v], np.uint32).view(np.float16) for v in lanes)
                return np.array(xs * as_ + cs, np.float16).view(np.uint32)[0]
            # bf16: the high 16 bits of a float32; the test values are exact, so float32 arithmetic matches
            xs, as_, cs = ((np.array([v], np.uint32).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
                           for v in lanes)
            bits = np.float32(xs * as_ + cs).view(np.uint32).astype(np.uint64)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # to nearest even, as fma.rn.bf16x2
            return rounded.astype(np.uint16).view(np.uint32)[0]
        return mad

    F16X2_FMA = _packed_fma(np.float16)
    BF16X2_FMA = _packed_fma("bf16")

    def I32_MAD(x, a, c):
        return np.int32(int(x) * int(a) + int(c))

    def F32_FMA(x, a, c):  # exact for the values used, so no fused rounding to emulate
        return np.float32(x * a + c)

    def F64_FMA(x, a, c):
        return np.float64(x * a + c)

    def bits_to_f64(b):
        return _view(np.uint64(b), np.float64)

    def bits_to_f32(b):
        return _view(np.uint32(b), np.float32)

    def f64_to_bits(x):
        return _view(np.float64(x), np.uint64)

    def f32_to_bits(x):
        return _view(np.float32(x), np.uint32)
else:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    # Numba type -> (LLVM type, PTX register constraint)
    _REGISTERS = {types.uint32: (ir.IntType(32), "r"), types.int32: (ir.IntType(32), "r"),
                  types.float32: (ir.FloatType(), "f"), types.float64: (ir.DoubleType(), "d")}

    def _mad_intrinsic(ptx_op, value_type):
        """One PTX multiply-add instruction on `value_type` registers, as a single call (inline PTX)."""
        llvm_type, reg = _REGISTERS[value_type]

        @intrinsic
        def mad(typingctx, x, a, c):
            sig = value_type(value_type, value_type, value_type)

            def codegen(context, builder, signature, args):
                fnty = ir.FunctionType(llvm_type, [llvm_type] * 3)
                asm = ir.InlineAsm(fnty, f"{ptx_op} $0, $1, $2, $3;", f"={reg},{reg},{reg},{reg}")
                return builder.call(asm, args)

            return sig, codegen

        return mad

    def _bitcast_intrinsic(src, dst, llvm_dst):
        @intrinsic
        def cast(typingctx, value):
            def codegen(context, builder, signature, args):
                return builder.bitcast(args[0], llvm_dst)

            return dst(src), codegen

        return cast

    F16X2_FMA = _mad_intrinsic("fma.rn.f16x2", types.uint32)
    BF16X2_FMA = _mad_intrinsic("fma.rn.bf16x2", types.uint32)
    I32_MAD = _mad_intrinsic("mad.lo.s32", types.int32)
    F32_FMA = _mad_intrinsic("fma.rn.f32", types.float32)
    F64_FMA = _mad_intrinsic("fma.rn.f64", types.float64)
    bits_to_f64 = _bitcast_intrinsic(types.uint64, types.float64, ir.DoubleType())
    bits_to_f32 = _bitcast_intrinsic(types.uint32, types.float32, ir.FloatType())
    f64_to_bits = _bitcast_intrinsic(types.float64, types.uint64, ir.IntType(64))
    f32_to_bits = _bitcast_intrinsic(types.float32, types.uint32, ir.IntType(32))


# precision -> (bits type name, value type name, expression of one FMA on x, from-bits, to-bits)
_OPS = {
    "fp64": ("uint64", "float64", "F64_FMA({x}, a, c)", "bits_to_f64", "f64_to_bits"),
    "fp32": ("uint32", "float32", "F32_FMA({x}, a, c)", "bits_to_f32", "f32_to_bits"),
    "fp16x2": ("uint32", "uint32", "F16X2_FMA({x}, a, c)", "", ""),
    "bf16x2": ("uint32", "uint32", "BF16X2_FMA({x}, a, c)", "", ""),
    # one PTX instruction per statement (inline PTX, opaque to NVVM: nothing to fold): `cuda.fma(x, a, c)` and
    # `int32(x * a + c)` gave the same FFMA/IMAD, but Numba's typing and IR passes took 1.6 s and 3.2 s for
    # the 512 of them (now ~0.9 s)
    "int32": ("uint32", "int32", "I32_MAD({x}, a, c)", "int32", "uint32"),
}


def signature(lane: str) -> str:
    bits, value, *_ = _OPS[lane]
    return f"void({bits}[::1], {value}, {value}, {bits}, int32, int32, int32)"


@functools.cache
def fma_kernel(lane: str, chains: int, unroll: int, log2_block: int):
    """The kernel's Python function for `lane` ("fp32", "fp16x2", ...) with K, N and the block written in."""
    bits, _value, mad, from_bits, to_bits = _OPS[lane]
    lines = [f"def fma_peak_{lane}_k{chains}_n{unroll}(out, a, c, seed, shift, trips, store_all):",
             "    lane = uint32(cuda.threadIdx.x) & uint32(3)"]
    lines += [f"    x{k} = {from_bits}({bits}(seed + ({bits}(uint32({k << 2}) | lane) << {bits}(shift))))"
              for k in range(chains)]
    lines.append("    for _ in range(trips):")
    lines += [f"        x{k} = {mad.format(x=f'x{k}')}" for _n in range(unroll) for k in range(chains)]
    lines += ["    if store_all:",
              f"        stride = uint32(cuda.gridDim.x) << uint32({log2_block})",
              f"        i = (uint32(cuda.blockIdx.x) << uint32({log2_block})) | uint32(cuda.threadIdx.x)"]
    for k in range(chains):  # a running index: no multiply-add outside the loop
        lines += [f"        out[i] = {to_bits}(x{k})", "        i += stride"][: 2 if k < chains - 1 else 1]
    namespace = dict(globals())
    # generated source is how a Numba kernel gets compile-time unrolling
    exec(compile("\n".join(lines) + "\n", f"<numba_fma {lane} K={chains} N={unroll}>", "exec"), namespace)  # noqa: S102
    return namespace[f"fma_peak_{lane}_k{chains}_n{unroll}"]

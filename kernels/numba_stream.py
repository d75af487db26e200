"""Numba CUDA kernels for the DRAM benchmarks (imported lazily by kernels.stream: this imports numba).

Numba has no float4, so each thread moves UNROLL scalar float32 per array per trip: load u of thread t
is element u * blockDim + t of the block's part of the chunk (each warp access is 128 contiguous bytes:
LDG.E / STG.E), and every load of a trip is issued before the first store or use, keeping UNROLL loads in
flight per array. The layout is the CUDA C one (kernels/cuda/stream.cu) with 4-byte elements. The unroll
factors live in kernels.stream_shape (the planner needs them without importing numba); read and write use 16
because NVVM unrolls the trip loop twice (with a remainder loop) when its body holds only 8 accesses.
"""

from __future__ import annotations

from numba import cuda, float32

from .stream_shape import BLOCK, NUMBA_UNROLL

READ_UNROLL = NUMBA_UNROLL["read"]
WRITE_UNROLL = NUMBA_UNROLL["write"]
COPY_UNROLL = NUMBA_UNROLL["copy"]
TRIAD_UNROLL = NUMBA_UNROLL["triad"]
DOT_UNROLL = NUMBA_UNROLL["dot"]


def dram_read(src, partial, trips, store):
    block = cuda.blockDim.x
    i = cuda.blockIdx.x * block * READ_UNROLL + cuda.threadIdx.x
    stride = cuda.gridDim.x * block * READ_UNROLL
    v = cuda.local.array(READ_UNROLL, float32)
    acc = float32(0)
    for _ in range(trips):
        for u in range(READ_UNROLL):
            v[u] = src[i + u * block]
        for u in range(READ_UNROLL):
            acc += v[u]
        i += stride
    # store is 0 in timed launches: the sum is needed, so no load can be removed, and nothing is written
    if store != 0:
        partial[cuda.grid(1)] = acc


def dram_write(dst, value, trips):
    block = cuda.blockDim.x
    i = cuda.blockIdx.x * block * WRITE_UNROLL + cuda.threadIdx.x
    stride = cuda.gridDim.x * block * WRITE_UNROLL
    for _ in range(trips):
        for u in range(WRITE_UNROLL):
            dst[i + u * block] = value
        i += stride


def dram_copy(src, dst, trips):
    block = cuda.blockDim.x
    i = cuda.blockIdx.x * block * COPY_UNROLL + cuda.threadIdx.x
    stride = cuda.gridDim.x * block * COPY_UNROLL
    v = cuda.local.array(COPY_UNROLL, float32)
    for _ in range(trips):
        for u in range(COPY_UNROLL):
            v[u] = src[i + u * block]
        for u in range(COPY_UNROLL):
            dst[i + u * block] = v[u]
        i += stride


def dram_triad(a, b, c, scalar, trips):
    """a = b + scalar * c"""
    block = cuda.blockDim.x
    i = cuda.blockIdx.x * block * TRIAD_UNROLL + cuda.threadIdx.x
    stride = cuda.gridDim.x * block * TRIAD_UNROLL
    vb = cuda.local.array(TRIAD_UNROLL, float32)
    vc = cuda.local.array(TRIAD_UNROLL, float32)
    for _ in range(trips):
        for u in range(TRIAD_UNROLL):
            vb[u] = b[i + u * block]
            vc[u] = c[i + u * block]
        for u in range(TRIAD_UNROLL):
            a[i + u * block] = vb[u] + scalar * vc[u]
        i += stride


def dram_dot(a, b, block_sums, trips):
    """BabelStream's Dot: sum of a * b, one partial sum per block (the host adds the blocks)."""
    block = cuda.blockDim.x
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * block * DOT_UNROLL + tid
    stride = cuda.gridDim.x * block * DOT_UNROLL
    va = cuda.local.array(DOT_UNROLL, float32)
    vb = cuda.local.array(DOT_UNROLL, float32)
    acc = float32(0)
    for _ in range(trips):
        for u in range(DOT_UNROLL):
            va[u] = a[i + u * block]
            vb[u] = b[i + u * block]
        for u in range(DOT_UNROLL):
            acc += va[u] * vb[u]
        i += stride
    # The block's sum in shared memory: each step the lower half adds the upper (a step wider than the
    # block, a power of two of at most BLOCK threads, does nothing). Written out step by step: NVVM does
    # unroll a loop over the steps, but on sm_90 into a branch around each step instead of predicated
    # instructions (29 more instructions; 4 more on sm_80), and a device-function helper would need a
    # driver to compile offline.
    sums = cuda.shared.array(BLOCK, float32)
    sums[tid] = acc
    cuda.syncthreads()
    if 128 < block and tid < 128:
        sums[tid] += sums[tid + 128]
    cuda.syncthreads()
    if 64 < block and tid < 64:
        sums[tid] += sums[tid + 64]
    cuda.syncthreads()
    if 32 < block and tid < 32:
        sums[tid] += sums[tid + 32]
    cuda.syncthreads()
    if 16 < block and tid < 16:
        sums[tid] += sums[tid + 16]
    cuda.syncthreads()
    if 8 < block and tid < 8:
        sums[tid] += sums[tid + 8]
    cuda.syncthreads()
    if 4 < block and tid < 4:
        sums[tid] += sums[tid + 4]
    cuda.syncthreads()
    if 2 < block and tid < 2:
        sums[tid] += sums[tid + 2]
    cuda.syncthreads()
    if tid < 1:
        sums[tid] += sums[tid + 1]
    if tid == 0:
        block_sums[cuda.blockIdx.x] = sums[0]


def fill(dst, value):
    """Poison: dst[:] = value (grid-stride; not measured)."""
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        dst[i] = value


_ARRAY = "float32[::1]"
SIGNATURES = {
    "read": f"void({_ARRAY}, {_ARRAY}, int32, int32)",
    "write": f"void({_ARRAY}, float32, int32)",
    "copy": f"void({_ARRAY}, {_ARRAY}, int32)",
    "triad": f"void({_ARRAY}, {_ARRAY}, {_ARRAY}, float32, int32)",
    "dot": f"void({_ARRAY}, {_ARRAY}, {_ARRAY}, int32)",
    "fill": f"void({_ARRAY}, float32)",
}
KERNELS = {"read": dram_read, "write": dram_write, "copy": dram_copy, "triad": dram_triad, "dot": dram_dot,
           "fill": fill}
# dram_dot's halving steps start at 128: they sum blocks of at most 256 threads
assert BLOCK <= 256

// DRAM bandwidth kernels (kernels/stream.py plans them; docs/bandwidth.md explains the design).
//
// Layout shared by every kernel: one trip of the grid covers a contiguous chunk of
// gridDim.x * BLOCK * UNROLL float4; block b owns BLOCK * UNROLL float4 of it and, inside that, load u
// of thread t is float4 number u * BLOCK + t, so every warp access is 512 contiguous bytes. The host
// sizes the arrays to exactly `trips` chunks: no tail, no bounds test, and the only loop with memory
// accesses is the trip loop (`#pragma unroll 1`), holding UNROLL 16-byte accesses per array.
// __launch_bounds__(BLOCK, MIN_BLOCKS) caps registers so that MIN_BLOCKS blocks are resident per SM. The
// host plans the grid as a whole number of waves of SMs x MIN_BLOCKS blocks: one wave (each block a fixed
// share, the static layout) or several (a block that ends early makes room for the next one, so a slow SM
// takes fewer blocks); the same kernels serve both, only the grid and the trip count differ.

template <int BLOCK, int MIN_BLOCKS, int UNROLL>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
dram_read(const float4* __restrict__ in, float* __restrict__ partial, int trips, int store)
{
    const size_t stride = (size_t)gridDim.x * BLOCK * UNROLL;
    const float4* p = in + (size_t)blockIdx.x * BLOCK * UNROLL + threadIdx.x;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = p[u * BLOCK];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            acc.x += v[u].x; acc.y += v[u].y; acc.z += v[u].z; acc.w += v[u].w;
        }
        p += stride;
    }
    // `store` is 0 in timed launches: the sum must be computable, so no load can be removed, yet
    // nothing is written. The check launch passes 1 and compares the per-thread sums with the host.
    if (store) partial[blockIdx.x * BLOCK + threadIdx.x] = (acc.x + acc.y) + (acc.z + acc.w);
}

template <int BLOCK, int MIN_BLOCKS, int UNROLL>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
dram_write(float4* __restrict__ out, float value, int trips)
{
    const size_t stride = (size_t)gridDim.x * BLOCK * UNROLL;
    float4* p = out + (size_t)blockIdx.x * BLOCK * UNROLL + threadIdx.x;
    const float4 v = make_float4(value, value, value, value);
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) p[u * BLOCK] = v;
        p += stride;
    }
}

template <int BLOCK, int MIN_BLOCKS, int UNROLL>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
dram_copy(const float4* __restrict__ in, float4* __restrict__ out, int trips)
{
    const size_t stride = (size_t)gridDim.x * BLOCK * UNROLL;
    const size_t first = (size_t)blockIdx.x * BLOCK * UNROLL + threadIdx.x;
    const float4* src = in + first;
    float4* dst = out + first;
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        float4 v[UNROLL];  // every load is issued before the first store
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = src[u * BLOCK];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) dst[u * BLOCK] = v[u];
        src += stride;
        dst += stride;
    }
}

// a = b + scalar * c
template <int BLOCK, int MIN_BLOCKS, int UNROLL>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
dram_triad(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c,
           float scalar, int trips)
{
    const size_t stride = (size_t)gridDim.x * BLOCK * UNROLL;
    const size_t first = (size_t)blockIdx.x * BLOCK * UNROLL + threadIdx.x;
    float4* pa = a + first;
    const float4* pb = b + first;
    const float4* pc = c + first;
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        float4 vb[UNROLL], vc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            vb[u] = pb[u * BLOCK];
            vc[u] = pc[u * BLOCK];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            pa[u * BLOCK] = make_float4(vb[u].x + scalar * vc[u].x, vb[u].y + scalar * vc[u].y,
                                        vb[u].z + scalar * vc[u].z, vb[u].w + scalar * vc[u].w);
        }
        pa += stride;
        pb += stride;
        pc += stride;
    }
}

// BabelStream's Dot: sum of a * b, one partial sum per block (the host adds the blocks). Each thread keeps
// four FMA chains (one per float4 component), folds them, and the block adds its threads' sums in shared
// memory, halving BLOCK down to 1 (unrolled: BLOCK is a constant), so the only loop is the trip loop.
template <int BLOCK, int MIN_BLOCKS, int UNROLL>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
dram_dot(const float4* __restrict__ a, const float4* __restrict__ b, float* __restrict__ block_sums, int trips)
{
    const size_t stride = (size_t)gridDim.x * BLOCK * UNROLL;
    const size_t first = (size_t)blockIdx.x * BLOCK * UNROLL + threadIdx.x;
    const float4* pa = a + first;
    const float4* pb = b + first;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        float4 va[UNROLL], vb[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            va[u] = pa[u * BLOCK];
            vb[u] = pb[u * BLOCK];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            acc.x = fmaf(va[u].x, vb[u].x, acc.x);
            acc.y = fmaf(va[u].y, vb[u].y, acc.y);
            acc.z = fmaf(va[u].z, vb[u].z, acc.z);
            acc.w = fmaf(va[u].w, vb[u].w, acc.w);
        }
        pa += stride;
        pb += stride;
    }
    __shared__ float sums[BLOCK];
    sums[threadIdx.x] = (acc.x + acc.y) + (acc.z + acc.w);
#pragma unroll
    for (int half = BLOCK / 2; half > 0; half /= 2) {
        __syncthreads();
        if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    }
    if (threadIdx.x == 0) block_sums[blockIdx.x] = sums[0];
}

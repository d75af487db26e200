// Cache bandwidth kernels: the working-set sweep, l2.read and l1.read (kernels/cache.py plans them;
// docs/bandwidth.md explains the design).
//
// The data is read in chunks of 32 * UNROLL float4 (one warp, UNROLL coalesced 512-byte accesses).
// Every block reads a ring of `chunks` chunks starting at `set + blockIdx.x * region`:
//   region == 0: all blocks share one ring (the set); blocks start evenly spaced around it, so a chunk
//                is re-read (by the same SM or by any other) only after the whole set has been read:
//                the set is the reuse distance seen by L1 and by L2;
//   region  > 0: each block has its own ring (per-block buffers: l1.read, and large sweep points where a
//                shared ring could let blocks that drift together hit in L2).
// Warp w of a block reads chunk (start + w), then moves on by the number of warps in the block, so a
// block walks its ring contiguously. The trip loop is the only loop with memory accesses (UNROLL loads
// per trip); its trip count is fixed by the host.

template <int BLOCK, int MIN_BLOCKS, int UNROLL, bool BYPASS_L1>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
cache_read(const float4* __restrict__ set, float* __restrict__ partial, int trips, int chunks,
           long long region, int store)
{
    constexpr int WARPS = BLOCK / 32;
    constexpr int CHUNK = 32 * UNROLL;  // float4 per chunk
    const int warp = threadIdx.x / 32;
    const float4* base = set + blockIdx.x * region + threadIdx.x % 32;
    int c = (int)(((long long)blockIdx.x * chunks / gridDim.x + warp) % chunks);
    const int step = WARPS % chunks;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        const float4* p = base + (size_t)c * CHUNK;
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = BYPASS_L1 ? __ldcg(p + u * 32) : p[u * 32];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            acc.x += v[u].x; acc.y += v[u].y; acc.z += v[u].z; acc.w += v[u].w;
        }
        c += step;
        if (c >= chunks) c -= chunks;
    }
    // `store` is 0 in timed launches (no write, yet no load can be removed); 1 in the check launch.
    if (store) partial[blockIdx.x * BLOCK + threadIdx.x] = (acc.x + acc.y) + (acc.z + acc.w);
}

// Loops some threads may skip, for tests/test_inspect.py (compiled offline; never launched). The loop model
// counts the body loop_trips times for every thread, so both must be unprovable; `guarded` (the same loop
// behind only its own zero-trip guard) is the accepted case.

// The loop under test, the same in every kernel: four FMA chains, 16 steps a trip; only the guards differ.
struct Chains {
    float x0, x1, x2, x3;
    __device__ Chains() : x0(threadIdx.x), x1(x0 + 1), x2(x0 + 2), x3(x0 + 3) {}
    __device__ __forceinline__ void run(float a, float c, int trips) {
#pragma unroll 1
        for (int t = 0; t < trips; ++t) {
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                x0 = fmaf(x0, a, c); x1 = fmaf(x1, a, c); x2 = fmaf(x2, a, c); x3 = fmaf(x3, a, c);
            }
        }
    }
    __device__ __forceinline__ float sum() const { return x0 + x1 + x2 + x3; }
};

// The loop runs only when a flag is set: a timed launch with flag = 0 does no work.
extern "C" __global__ void behind_flag(float* out, float a, float c, int trips, int flag) {
    if (flag) {
        Chains x;
        x.run(a, c, trips);
        out[threadIdx.x] = x.sum();
    }
}

// Only half of each warp runs the loop.
extern "C" __global__ void half_warp(float* out, float a, float c, int trips, int flag) {
    Chains x;
    if (threadIdx.x < 16) x.run(a, c, trips);
    if (flag) out[threadIdx.x] = x.sum();
}

// Every thread runs the loop `trips` times; the only way around it is trips < 1.
extern "C" __global__ void guarded(float* out, float a, float c, int trips, int flag) {
    Chains x;
    x.run(a, c, trips);
    if (flag) out[threadIdx.x] = x.sum();
}

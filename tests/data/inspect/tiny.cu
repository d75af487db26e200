// Test kernels for tests/test_inspect.py (compiled offline by kernels.inspect; never launched).

// 4 independent FMA chains x 64, in a run-time loop kept rolled. Per thread: 256 FFMA per trip, plus the
// 3 FADDs summing the chains once. The store is guarded by a value no run produces.
extern "C" __global__ void fma4x64(float* out, float a, float b, int trips, float never) {
    float x0 = threadIdx.x, x1 = threadIdx.x + 1, x2 = threadIdx.x + 2, x3 = threadIdx.x + 3;
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int i = 0; i < 64; ++i) {
            x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        }
    }
    float s = (x0 + x1) + (x2 + x3);
    if (s == never) out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// The same chains in a run-time loop the compiler may unroll: main loop + remainder loop.
extern "C" __global__ void fma_unrolled(float* out, float a, float b, int trips, float never) {
    float x0 = threadIdx.x;
    for (int t = 0; t < trips; ++t) x0 = fmaf(x0, a, b);
    if (x0 == never) out[blockIdx.x * blockDim.x + threadIdx.x] = x0;
}

// A float4 grid-stride copy: one LDG.E.128 and one STG.E.128 per trip.
template <typename T>
__global__ void copy4(const float4* __restrict__ in, float4* __restrict__ out, int n) {
#pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i];
}

// Straight-line code: one thread, one element, no loop.
extern "C" __global__ void scale1(const float* __restrict__ in, float* __restrict__ out, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i] * a;
}

// Loops some threads may skip, for tests/test_inspect.py (compiled offline; never launched). The loop model
// counts the body loop_trips times for every thread, so both must be unprovable; `guarded` (the same loop
// behind only its own zero-trip guard) is the accepted case.

// The loop runs only when a flag is set: a timed launch with flag = 0 does no work.
extern "C" __global__ void behind_flag(float* out, float a, float c, int trips, int flag) {
    float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;
    if (flag) {
#pragma unroll 1
        for (int t = 0; t < trips; ++t) {
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                x0 = fmaf(x0, a, c); x1 = fmaf(x1, a, c); x2 = fmaf(x2, a, c); x3 = fmaf(x3, a, c);
            }
        }
        out[threadIdx.x] = x0 + x1 + x2 + x3;
    }
}

// Only half of each warp runs the loop.
extern "C" __global__ void half_warp(float* out, float a, float c, int trips, int flag) {
    float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;
    if (threadIdx.x < 16) {
#pragma unroll 1
        for (int t = 0; t < trips; ++t) {
#pragma unroll
            for (int n = 0; n < 16; ++n) {
                x0 = fmaf(x0, a, c); x1 = fmaf(x1, a, c); x2 = fmaf(x2, a, c); x3 = fmaf(x3, a, c);
            }
        }
    }
    if (flag) out[threadIdx.x] = x0 + x1 + x2 + x3;
}

// Every thread runs the loop `trips` times; the only way around it is trips < 1.
extern "C" __global__ void guarded(float* out, float a, float c, int trips, int flag) {
    float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int n = 0; n < 16; ++n) {
            x0 = fmaf(x0, a, c); x1 = fmaf(x1, a, c); x2 = fmaf(x2, a, c); x3 = fmaf(x3, a, c);
        }
    }
    if (flag) out[threadIdx.x] = x0 + x1 + x2 + x3;
}

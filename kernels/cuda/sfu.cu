// Special-function unit throughput (kernels/sfu.py): each thread iterates CHAINS independent chains
// x <- f(x) of one MUFU function, UNROLL steps per trip of a rolled loop of `trips`. Every f contracts to a
// fixed point the output check knows (x = 2^-x, x = 1/sqrt(x), x = 2 sin x), so a chain that did not run, or
// ran a different function, is seen; PTX's .approx.ftz forms are exactly one MUFU instruction each (plus the
// FMUL.RZ by 1/(2 pi) that sm_70 and later put before MUFU.SIN). `x` holds the start values on entry and the
// results on exit: CHAINS floats per thread, chain c of thread t at x[c * threads + t].

template <int FN>
__device__ __forceinline__ float step(float x);

template <>  // 2^-x: fixed point 0.6412 (the negation is an operand modifier of MUFU.EX2)
__device__ __forceinline__ float step<0>(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(-x));
    return y;
}

template <>  // 1/sqrt(x): fixed point 1
__device__ __forceinline__ float step<1>(float x) {
    float y;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <>  // 2 sin x: fixed point 1.8955 (sin x alone creeps to 0, too slowly to check)
__device__ __forceinline__ float step<2>(float x) {
    float y;
    asm("sin.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y + y;
}

template <int FN, int CHAINS, int UNROLL, int MIN_BLOCKS>
__global__ void __launch_bounds__(256, MIN_BLOCKS) sfu(float* x, int trips) {
    const int threads = gridDim.x * blockDim.x;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    float v[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        v[c] = x[c * threads + t];
    }
#pragma unroll 1
    for (int i = 0; i < trips; ++i) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int c = 0; c < CHAINS; ++c) {
                v[c] = step<FN>(v[c]);
            }
        }
    }
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        x[c * threads + t] = v[c];
    }
}

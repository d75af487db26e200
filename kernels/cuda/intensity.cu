// Arithmetic-intensity sweep (ERT / mixbench style): stream 16-byte vectors from DRAM, apply N dependent
// FMAs x <- x * a + c to every element, write the vector back. N is a template parameter (fully unrolled),
// so the only runtime loop is the grid stride: N = 0 is a copy, large N is compute bound.
// a, c at run time (the compiler cannot fold them): timed launches a = -1, c = 3 (x alternates with 3 - x),
// the check launch a = 1, c = 1/64 (x ends at x + N/64, exact: every FMA counts).
template <typename V> struct Vec;
template <> struct Vec<float4> {
    using Scalar = float;
    static constexpr int LANES = 4;
    static __device__ __forceinline__ float& at(float4& v, int i) { return (&v.x)[i]; }
};
template <> struct Vec<double2> {
    using Scalar = double;
    static constexpr int LANES = 2;
    static __device__ __forceinline__ double& at(double2& v, int i) { return (&v.x)[i]; }
};

// n_vec is a multiple of the grid's thread count: every thread runs exactly n_vec / threads trips.
template <typename V, int N>
__global__ void intensity(const V* __restrict__ in, V* __restrict__ out, unsigned long long n_vec,
                          typename Vec<V>::Scalar a, typename Vec<V>::Scalar c) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
#pragma unroll 1
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
         i < n_vec; i += stride) {
        V v = in[i];
#pragma unroll
        for (int n = 0; n < N; ++n) {
#pragma unroll
            for (int l = 0; l < Vec<V>::LANES; ++l) {
                Vec<V>::at(v, l) = fma(Vec<V>::at(v, l), a, c);
            }
        }
        out[i] = v;
    }
}

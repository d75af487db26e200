// Peak FMA throughput on the CUDA cores: K independent chains per thread, N dependent FMAs per chain,
// all in registers. One runtime loop of `trips` iterations whose body is fully unrolled (K x N FMAs);
// nothing else runs per iteration but the loop counter (IADD3 + ISETP + BRA).
//
// Every chain is x <- x * a + c with run-time a, c and trips (the compiler cannot fold them). Timed launches:
// a = -1, c = 3, the value alternates between x0 and 3 - x0 (bounded for any trip count). The check launch:
// a = 1, c = 1/64 (int: 1) and a few trips, so x ends at x0 + steps x c, exact in every precision for the
// seeds used: the host reference counts every FMA. Values are passed and stored as raw bits (Bits) so one kernel serves every type.
// No CUDA headers (NVRTC finds none without an include path): the packed 16-bit FMAs are one PTX
// instruction each, on their raw 32-bit register, exactly what __hfma2 compiles to.

template <typename To, typename From>
__device__ __forceinline__ To bits_as(From from) {
    static_assert(sizeof(To) == sizeof(From), "bit cast between types of different size");
    To to;
    memcpy(&to, &from, sizeof(To));
    return to;
}

struct F16x2 {};   // two fp16 lanes in one 32-bit register (__half2)
struct BF16x2 {};  // two bf16 lanes in one 32-bit register (__nv_bfloat162)

// Lane<T>: the register type, its raw-bits type and the one multiply-add instruction under test.
template <typename T> struct Lane;
template <> struct Lane<double> {
    using Value = double;
    using Bits = unsigned long long;
    static __device__ __forceinline__ Value mad(Value x, Value a, Value c) { return fma(x, a, c); }
};
template <> struct Lane<float> {
    using Value = float;
    using Bits = unsigned int;
    static __device__ __forceinline__ Value mad(Value x, Value a, Value c) { return fmaf(x, a, c); }
};
template <> struct Lane<F16x2> {
    using Value = unsigned int;
    using Bits = unsigned int;
    static __device__ __forceinline__ Value mad(Value x, Value a, Value c) {
        Value d;
        asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(a), "r"(c));
        return d;
    }
};
template <> struct Lane<BF16x2> {
    using Value = unsigned int;
    using Bits = unsigned int;
    static __device__ __forceinline__ Value mad(Value x, Value a, Value c) {
        Value d;
        asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(a), "r"(c));
        return d;
    }
};
template <> struct Lane<int> {
    using Value = int;
    using Bits = unsigned int;
    static __device__ __forceinline__ Value mad(Value x, Value a, Value c) { return x * a + c; }
};

// out: K x threads raw values (chain-major, coalesced), written only when store_all != 0 (the timed
// launches pass 0: no memory traffic, but the compiler cannot know, so no chain is dead code).
// Chain k of thread t starts from the bits seed + ((4k + (t & 3)) << shift); the host picks seed/shift so
// that every start value, 3 - start and start + steps/64 are exact. Indexing uses only shifts, ORs and adds
// (BLOCK is a power of two): no plain IMAD outside the loop (ptxas still forms 64-bit addresses with
// IMAD.WIDE.U32 and may move registers with IMAD.MOV; neither is multiply-add work).
template <typename T, int K, int N, int LOG2_BLOCK>
__global__ void __launch_bounds__(1 << LOG2_BLOCK)
fma_peak(typename Lane<T>::Bits* __restrict__ out, typename Lane<T>::Bits a_bits,
         typename Lane<T>::Bits c_bits, typename Lane<T>::Bits seed, int shift, int trips, int store_all) {
    using Bits = typename Lane<T>::Bits;
    using Value = typename Lane<T>::Value;
    const Value a = bits_as<Value>(a_bits);
    const Value c = bits_as<Value>(c_bits);
    Value x[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const unsigned vary = (k << 2) | (threadIdx.x & 3u);
        x[k] = bits_as<Value>(static_cast<Bits>(seed + (static_cast<Bits>(vary) << shift)));
    }
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
#pragma unroll
        for (int n = 0; n < N; ++n) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                x[k] = Lane<T>::mad(x[k], a, c);
            }
        }
    }
    if (store_all) {
        const unsigned stride = gridDim.x << LOG2_BLOCK;
        Bits* p = out + ((blockIdx.x << LOG2_BLOCK) | threadIdx.x);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            *p = bits_as<Bits>(x[k]);
            p += stride;
        }
    }
}

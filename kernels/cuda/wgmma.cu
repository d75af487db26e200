// Tensor-core throughput through Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only), operands resident in
// shared memory, accumulators in registers.
//
// One block is one warpgroup (128 threads, 4 consecutive warps: the unit wgmma runs on). It copies the operand
// image (A 64xK, B NxK, both K-major, already in the core-matrix layout the descriptors below describe) from
// global to shared memory once, then runs `trips` iterations of one runtime loop: wgmma.fence, UNROLL
// wgmma.mma_async m64n256k<K> accumulating into the same 128 fp32 registers per thread, commit_group,
// wait_group 0. Waiting each trip drains this warpgroup's queue; the other warpgroups on the SM keep the
// tensor cores busy meanwhile, so the kernel runs several blocks per SM.
// `store` is a run-time flag: timed launches pass 0, the verification launch 1 (every thread writes its
// 128 accumulators to out[thread][0..127]).
//
// Shared-memory layout (PTX ISA "Shared Memory Matrix Layout", K-major, no swizzle): a row holds K elements
// = 32 bytes = two 16-byte chunks; a core matrix is 8 rows x 16 bytes, contiguous (rows 16 bytes apart).
// Byte of (row r, chunk c) = (r / 8) * SBO + c * LBO + (r % 8) * 16, with LBO = 128 (the two K chunks of an
// 8-row group side by side) and SBO = 256 (the next 8 rows). kernels/wgmma.py builds the same image.

constexpr int N = 256;            // wgmma n: the largest shape, the most work per shared-memory byte read
constexpr int ACC = N / 2;        // fp32 accumulators per thread: 64 x N over 128 threads
constexpr int ROW_BYTES = 32;     // K elements of one row: 16 bf16/fp16 or 32 e4m3
constexpr int A_BYTES = 64 * ROW_BYTES;
constexpr int B_BYTES = N * ROW_BYTES;
constexpr int IMAGE_WORDS = (A_BYTES + B_BYTES) / 16;  // uint4 words
constexpr int THREADS = 128;
constexpr unsigned LBO = 128, SBO = 256;
static_assert(IMAGE_WORDS % THREADS == 0, "every thread copies the same number of words: no predicated load");

// The 128 accumulator operands of one wgmma, as "+f" constraints (%0..%127).
#define ACC4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define ACC16(i) ACC4(i), ACC4(i + 4), ACC4(i + 8), ACC4(i + 12)
#define ACC128 ACC16(0), ACC16(16), ACC16(32), ACC16(48), ACC16(64), ACC16(80), ACC16(96), ACC16(112)
#define ACC_LIST                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                    \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "           \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "           \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "           \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "           \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "           \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// D = A * B + D (scale-d true, no negation; both operands K-major: imm-trans 0 where the type has it).
struct Bf16 {  // m64n256k16
    static __device__ __forceinline__ void mma(float (&d)[ACC], unsigned long long a, unsigned long long b) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " ACC_LIST ", %128, %129, p, 1, 1, 0, 0;\n}"
                     : ACC128 : "l"(a), "l"(b));
    }
};

struct Fp16 {  // m64n256k16
    static __device__ __forceinline__ void mma(float (&d)[ACC], unsigned long long a, unsigned long long b) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " ACC_LIST ", %128, %129, p, 1, 1, 0, 0;\n}"
                     : ACC128 : "l"(a), "l"(b));
    }
};

struct Fp8 {  // m64n256k32 e4m3 x e4m3 (fp8 wgmma has no transpose arguments: K-major only)
    static __device__ __forceinline__ void mma(float (&d)[ACC], unsigned long long a, unsigned long long b) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " ACC_LIST ", %128, %129, p, 1, 1;\n}"
                     : ACC128 : "l"(a), "l"(b));
    }
};

// The 64-bit shared-memory matrix descriptor: start address, LBO and SBO in 16-byte units, no swizzle.
__device__ __forceinline__ unsigned long long descriptor(const void* smem) {
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    return static_cast<unsigned long long>((address & 0x3FFFF) >> 4)
           | static_cast<unsigned long long>(LBO >> 4) << 16
           | static_cast<unsigned long long>(SBO >> 4) << 32;
}

// Pins the accumulators behind the wait: the compiler must not read them while a wgmma may still write them.
__device__ __forceinline__ void settle(float (&d)[ACC]) {
#pragma unroll
    for (int i = 0; i < ACC; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <class Op, int UNROLL, int BLOCKS_PER_SM>
__global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
tensor_wgmma(const uint4* __restrict__ image, float* __restrict__ out, int trips, int store)
{
    __shared__ __align__(128) uint4 tile[IMAGE_WORDS];
#pragma unroll
    for (int i = 0; i < IMAGE_WORDS / THREADS; ++i) tile[i * THREADS + threadIdx.x] = image[i * THREADS + threadIdx.x];
    // The tensor cores read shared memory through the async proxy: make the ordinary stores visible to it.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const unsigned long long a = descriptor(tile), b = descriptor(tile + A_BYTES / 16);

    float d[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) d[i] = 0.0f;

    // The one runtime loop, kept rolled so its SASS body is exactly UNROLL wgmma.
#pragma unroll 1
    for (int t = 0; t < trips; ++t) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) Op::mma(d, a, b);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    settle(d);

    if (store) {
        float4* dst = reinterpret_cast<float4*>(out) + (static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x) * (ACC / 4);
#pragma unroll
        for (int i = 0; i < ACC / 4; ++i) dst[i] = make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]);
    }
}

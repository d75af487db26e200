"""Readable kernel names (analysis.names) on the names real profilers wrote: the shared A100 torch traces, the
ncu and nsys samples (../shared). Each expected name is written from reading the full name: op or functor,
data type, tile, library."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.names import SHORT_NAME_MAX, readable_names, short_name

SHARED = Path(__file__).resolve().parents[2] / "shared"
ELEMENTWISE_MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
                   "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
                   "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
                   "at::detail::Array<char*, 3>)")
SCALAR_MUL_4 = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
                "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, "
                "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
                "at::detail::Array<char*, 2>)")
SCALAR_MUL_2 = SCALAR_MUL_4.replace("vectorized_elementwise_kernel<4,", "vectorized_elementwise_kernel<2,")
CUTLASS = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_{0}_align1>(cutlass_80_tensorop_s1688gemm_" \
          "256x128_32x3_{0}_align1::Params)"

REAL = [
    (ELEMENTWISE_MUL, "elementwise mul fp32"),
    (SCALAR_MUL_4, "elementwise mul fp32"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, "
     "3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", "elementwise add fp32"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<long>, at::detail::Array<"
     "char*, 2> >(int, at::native::CUDAFunctorOnSelf_add<long>, at::detail::Array<char*, 2>)", "elementwise add int64"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, at::detail::Array<char*, 1> >"
     "(int, at::native::FillFunctor<int>, at::detail::Array<char*, 1>)", "elementwise fill int32"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<double>, at::detail::Array<char*, 2> >"
     "(int, at::native::AbsFunctor<double>, at::detail::Array<char*, 2>)", "elementwise abs fp64"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::exp_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, "
     "2> >(int, at::native::exp_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}"
     "::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)", "elementwise exp fp32"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
     "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
     "const::{lambda()#6}::operator()() const::{lambda(double)#1}, at::detail::Array<char*, 2> >(int, at::native::("
     "anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail"
     "::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(double)#1}, "
     "at::detail::Array<char*, 2>)", "elementwise clamp fp64"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<bool, bool, bool, at::native::"
     "logical_and_kernel_cuda(at::TensorIterator&)::{lambda()#2}::operator()() const::{lambda()#9}::operator()() const"
     "::{lambda(bool, bool)#1}>, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<bool, bool, bool, "
     "at::native::logical_and_kernel_cuda(at::TensorIterator&)::{lambda()#2}::operator()() const::{lambda()#9}::"
     "operator()() const::{lambda(bool, bool)#1}>, at::detail::Array<char*, 3>)", "elementwise logical_and bool"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::(anonymous namespace)::"
     "where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
     "{lambda(bool, float, float)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::where_kernel_impl("
     "at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(bool, float, "
     "float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<...>)", "elementwise where fp32"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
     "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, at::detail::Array<char*, "
     "2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::"
     "LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, ...)", "elementwise copy int64"),
    # ncu's text output cuts names short
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::mse_kernel_cuda(at::TensorIterat…",
     "elementwise mse"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::batch_norm_calc_invst…",
     "elementwise batch_norm_calc_invst…"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
     "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<"
     "float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)",
     "reduce sum fp32"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
     "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
     "unsigned int, float, 4>)", "reduce mean fp32"),
    ("void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<float, at::native::func_wrapp…",
     "reduce fp32"),
    ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, "
     "float, float, float, adamMode_t, float, int, int, int>(int, int volatile*, TensorListMetadata<4>, "
     "AdamFunctor<float>, float, float, float, float, float, float, float, float, adamMode_t, float, int, int, int)",
     "multi-tensor adam fp32"),
    ("void phi::funcs::VectorizedBroadcastKernel<phi::funcs::AddFunctor<float>, float, 2, 1, 4, 1>(common::Array<"
     "char const* restrict, 2>, common::Array<float*, 1>, common::Array<bool, 2>, unsigned int, common::Array<"
     "phi::kps::details::BroadcastConfig, 2>, int, int, int, phi::funcs::AddFunctor<float>)", "elementwise add fp32"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     "nccl SendRecv RING SIMPLE int8"),
    (CUTLASS.format("nn"), "cutlass 256x128 tf32 gemm"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align1>(cutlass_80_tensorop_s1688gemm_64x64_"
     "32x6_tn_align1::Params)", "cutlass 64x64 tf32 gemm"),
    ("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_tnn_align4_1sm_bias_f16_relu_aux_"
     "scalemax", "cutlass 64x256 fp8 gemm"),
    ("ampere_sgemm_128x64_nn", "cublas 128x64 fp32 gemm"),
    ("ampere_sgemm_32x32_sliced1x4_tn", "cublas 32x32 fp32 gemm"),
    ("ampere_gcgemm_64x64_nt", "cublas 64x64 complex64 gemm"),
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, cublasGemvParams<"
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<...>, float, float)", "cublas gemv fp32"),
    ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "cudnn 128x64 fp32 conv"),
    ("ampere_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148n_nt_v1", "cudnn 128x128 fp32 winograd conv"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_"
     "g1_tensor16x8x8_alignc4_execute_kernel_cudnn", "cudnn 128x128 tf32 conv fprop"),
    ("void xmma_new::gemm::kernel<xmma_new::implicit_gemm::fprop::Kernel_traits<xmma_new::Ampere_hmma_tf32_traits<"
     "unsigned int, float>, xmma_new::Cta_tile<xmma_new::Ampere, 128, 128, 16, 2, 2, 1, 1, 1>, ...>::Params)",
     "cudnn 128x128 tf32 conv fprop"),
    ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, true, true>(int, int, int, float "
     "const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, "
     "float const*, bool, int, int)", "cudnn fp32 implicit-gemm conv"),
    ("triton_poi_fused_add_cos_sin_0", "triton pointwise add cos sin"),
    ("triton__0d1d2d3d", "triton__0d1d2d3d"),  # an older Triton's name says only its arguments: kept as it is
    # no pattern: the function's own name and the type of its first template argument
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<long, unsigned int, 2, 128, 1>(long*, at::native::("
     "anonymous namespace)::CatArrInputTensorMetadata<long, unsigned int, 128, 1>, at::native::(anonymous namespace)::"
     "TensorSizeStride<unsigned int, 4u>, int, unsigned int)", "CatArrayBatchedCopy int64"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, long, "
     "int, int, int, int, int, int, int, int, int, int, float*, long*)", "max_pool_forward_nchw fp32"),
    ("void cunn_SoftMaxForward<4, float, float, float, Epilogue>(float*, float const*, int)",
     "cunn_SoftMaxForward fp32"),
    ("add_heat_kernel_1d(float *, int)", "add_heat_kernel_1d"),
    ("vecAdd", "vecAdd"),
    ("void f<decltype(x->y)>(int)", "f"),  # "->" closes no bracket
    ("aten::mm", "mm"),  # a --by op row
]


@pytest.mark.parametrize("full, readable", REAL, ids=[r for _, r in REAL])
def test_a_real_kernel_name_reads_as_its_op_type_and_library(full, readable):
    assert short_name(full) == readable


def test_a_long_name_is_cut_with_an_ellipsis():
    name = "void split_embedding_codegen_forward_unweighted_kernel<float, float, float, false, long, 1ul, 16ul>(int)"
    assert short_name(name) == "split_embedding_codegen_forward_unweighted_…"  # 43 characters and "…"
    assert len(short_name(name)) == SHORT_NAME_MAX


def test_kernels_that_read_the_same_say_their_detail_only_where_needed():
    names = readable_names([ELEMENTWISE_MUL, SCALAR_MUL_4, SCALAR_MUL_2, CUTLASS.format("nn"), CUTLASS.format("tn"),
                            "ampere_sgemm_128x64_nn"])
    # the three Mul kernels differ in a scalar operand (AUnaryFunctor: the first) and the vector width; the two
    # CUTLASS ones in their layout; the cuBLAS one reads as no other, so it says nothing more
    assert names == ["elementwise mul fp32 (vec4)", "elementwise mul fp32 (scalar first vec4)",
                     "elementwise mul fp32 (scalar first vec2)", "cutlass 256x128 tf32 gemm (nn 32x3 align1)",
                     "cutlass 256x128 tf32 gemm (tn 32x3 align1)", "cublas 128x64 fp32 gemm"]


def test_kernels_whose_detail_is_the_same_too_are_numbered_in_table_order():
    # two launches of one template in different namespaces: the same name, the same (empty) detail
    a = "void at::native::(anonymous namespace)::adaptive_average_pool<float>(float const*, float*, int)"
    b = "void adaptive_average_pool<float>(float*, float*, int)"
    assert readable_names([a, b, "vecAdd"]) == ["adaptive_average_pool fp32 [1]", "adaptive_average_pool fp32 [2]",
                                                "vecAdd"]


def _profiles() -> list[Path]:
    traces = sorted((SHARED / "torch-traces").glob("*.json.gz"))
    samples = sorted(p for p in (SHARED / "ncu-samples").glob("*/*") if p.suffix not in (".ncu-rep", ".md"))
    return traces + samples


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared is absent")
@pytest.mark.parametrize("path", _profiles() if SHARED.is_dir() else [], ids=lambda p: p.name)
def test_every_row_of_a_shared_profile_has_a_name_of_its_own(path):
    """Every kernel of every shared profile that reads: a name of its own within the table, no template or
    parameter list, and none of the wrappers' names that said nothing (eight rows read
    `vectorized_elementwise_kernel` before)."""
    from analysis.ncu import kernel_table
    from common.errors import CeilingsError

    try:
        kernels = kernel_table(path)
    except CeilingsError:  # a profile the readers refuse (an AMD trace, a CPU-only trace, a failed ncu run)
        pytest.skip(f"{path.name} is refused by the readers")
    names = readable_names([str(k) for k in kernels["kernel"]])
    for name in names:
        assert "<" not in name and "::" not in name and len(name) <= SHORT_NAME_MAX, name
        assert name.split(" (")[0] not in ("vectorized_elementwise_kernel", "unrolled_elementwise_kernel",
                                           "elementwise_kernel", "reduce_kernel", "Kernel"), name

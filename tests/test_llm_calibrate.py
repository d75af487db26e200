"""analysis.llm.calibrate: kernel names to op classes, and efficiencies from a hand-written ncu profile.

tests/data/llm/decode-step.ncu.csv (ncu's details-page layout, as tests/test_ncu_cases.py `details_csv`
writes it), one decode step on an NVIDIA A100-SXM4-80GB: two cuBLAS GEMM launches of 1,500 ns and a gemv of
1,000 ns (gemm 4,000 ns), FlashAttention 800 ns, an RMSNorm 300 ns, a PyTorch add 200 ns, an NCCL all-reduce
5,000 ns (communication, not modelled) and an argmax reduce 400 ns (no class). The model is tiny-llama at
batch 1, context 100: its decode step at the A100 datasheet's 2,039 GB/s is memory-bound in every op, moving
2,887,120 B in GEMMs, 105,472 B in attention, 7,680 B in norms and 18,688 B in elementwise ops
(test_llm_work.py has the arithmetic).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.llm.calibrate import calibrate, kernel_class
from analysis.llm.models import load_model
from analysis.llm.place import evaluate, gpu_of, place
from analysis.llm.work import Setup, step_ops
from analysis.ncu import kernel_table

DATA = Path(__file__).parent / "data" / "llm"
PROFILE = DATA / "decode-step.ncu.csv"
A100_BW, H100_BW = 2039e9, 3350e9
AT_ROOF = {"gemm": 2_887_120 / A100_BW, "attention": 105_472 / A100_BW, "norm": 7_680 / A100_BW,
           "elementwise": 18_688 / A100_BW}
MEASURED = {"gemm": 4000e-9, "attention": 800e-9, "norm": 300e-9, "elementwise": 200e-9}


@pytest.mark.parametrize("name, cls", [
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off", "gemm"),
    ("nvjet_tst_128x64_64x8_1x2_h_bz_coopA_NTN", "gemm"),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false>", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align8>", "gemm"),
    ("void marlin::Marlin<256, 1, 8, 8, 4, 8>(int4 const*, int4 const*, int4*, int4 const*, int, int, int)", "gemm"),
    ("fused_moe_kernel", "gemm"),
    ("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>>",
     "attention"),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4>>", "attention"),
    ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "attention"),
    ("void vllm::paged_attention_v2_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128>", "attention"),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 11, false>", "attention"),
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, int)", "norm"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>", "norm"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "norm"),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*)", "elementwise"),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>",
     "elementwise"),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>", "elementwise"),
    ("void vllm::moe::topkGatingSoftmax<8, 8, 4, 16, long>(float const*, bool const*, float*, int, int*)",
     "elementwise"),
    ("void at::native::index_elementwise_kernel<128, 4>", "elementwise"),
    ("triton_poi_fused_add_mul_silu_1", "elementwise"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>", "communication"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>", "other"),
])
def test_kernel_names_sort_into_op_classes(name, cls):
    assert kernel_class(name) == cls


@pytest.fixture
def tiny():
    return load_model(str(DATA / "tiny-llama"))[0]


def predicted(model, roofs):
    return place(roofs, step_ops(model, Setup(prompt=100), 1, 100), "decode")


def test_efficiency_is_time_at_the_roofs_over_measured_time(tiny):
    a100 = gpu_of("A100 SXM4 80GB")
    cal = calibrate(kernel_table([PROFILE]), predicted(tiny, a100.roofs), "decode", a100.label)
    rows = cal.table.set_index("op_class")
    for cls in MEASURED:
        assert rows.loc[cls, "measured_s"] == pytest.approx(MEASURED[cls])
        assert rows.loc[cls, "at_roof_s"] == pytest.approx(AT_ROOF[cls])
        assert cal.efficiency[cls] == pytest.approx(AT_ROOF[cls] / MEASURED[cls])
    assert cal.efficiency["gemm"] == pytest.approx(2_887_120 / 2039e9 / 4e-6)  # 35.4%
    assert rows.loc["communication", "measured_s"] == pytest.approx(5e-6)
    assert not rows.loc["communication", "applied"] and "not modelled" in rows.loc["communication", "note"]
    assert not rows.loc["other", "applied"] and rows.loc["other", "kernels"] == 1
    assert set(cal.efficiency) == set(MEASURED)


def test_a_profile_of_several_steps_is_divided_by_them(tiny):
    a100 = gpu_of("A100 SXM4 80GB")
    cal = calibrate(kernel_table([PROFILE]), predicted(tiny, a100.roofs), "decode", a100.label, steps=2)
    assert cal.efficiency["gemm"] == pytest.approx(AT_ROOF["gemm"] / (MEASURED["gemm"] / 2))


def test_the_measured_efficiency_projects_onto_another_gpu(tiny):
    """Every decode op is memory-bound on both GPUs, so a class's projected time on the H100 is its measured A100
    time x 2,039 / 3,350; on the profiled A100 itself, the measured time."""
    a100, h100 = gpu_of("A100 SXM4 80GB"), gpu_of("H100 SXM")
    cal = calibrate(kernel_table([PROFILE]), predicted(tiny, a100.roofs), "decode", a100.label)
    setup = Setup(prompt=100, gen=1)
    on_a100 = evaluate(tiny, setup, a100, {"decode": cal.efficiency})
    on_h100 = evaluate(tiny, setup, h100, {"decode": cal.efficiency})
    assert on_a100.first_step_s == pytest.approx(sum(MEASURED.values()))
    assert on_h100.first_step_s == pytest.approx(sum(MEASURED.values()) * A100_BW / H100_BW)
    gemm = on_h100.decode[on_h100.decode["op_class"] == "gemm"]
    assert gemm["time_s"].sum() == pytest.approx(4e-6 * A100_BW / H100_BW)
    assert gemm["time_at_roof_s"].sum() == pytest.approx(2_887_120 / H100_BW)
    # the prefill was not profiled: it stays at the roofs
    assert (on_h100.prefill["efficiency"] == 1).all()


def test_classes_the_profile_lacks_or_cannot_time_stay_at_the_roof(tiny):
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = pd.DataFrame({"kernel": ["ampere_bf16_s16816gemm_bf16_64x64_tn", "rms_norm_kernel", "rms_norm_kernel2"],
                            "time_s": [4e-6, 3e-7, float("nan")]})
    cal = calibrate(kernels, predicted(tiny, a100.roofs), "decode", a100.label)
    rows = cal.table.set_index("op_class")
    assert set(cal.efficiency) == {"gemm"}
    assert rows.loc["attention", "note"] == "the profile has no kernel of this class: stays at the roof"
    assert rows.loc["norm", "note"] == "1 of its kernels have no time: stays at the roof"


def test_a_class_measured_faster_than_its_roof_says_so(tiny):
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = pd.DataFrame({"kernel": ["ampere_bf16_s16816gemm_bf16_64x64_tn"], "time_s": [1e-6]})
    cal = calibrate(kernels, predicted(tiny, a100.roofs), "decode", a100.label)
    assert cal.efficiency["gemm"] == pytest.approx(AT_ROOF["gemm"] / 1e-6) and cal.efficiency["gemm"] > 1
    assert "faster than the roofs allow" in cal.table.set_index("op_class").loc["gemm", "note"]

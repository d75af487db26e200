"""analysis.llm.calibrate: kernel names to op classes, floors and efficiencies from a hand-written ncu profile
and from synthetic profiles built as floor + work / roof a kernel, and the refusals and warnings of a profile
that is not this model's.

tests/data/llm/decode-step.ncu.csv (ncu's details-page layout, as tests/test_ncu_cases.py `details_csv`
writes it), one decode step on an NVIDIA A100-SXM4-80GB: two cuBLAS GEMM launches of 1,500 ns and a gemv of
1,000 ns (gemm 4,000 ns), FlashAttention 800 ns, an RMSNorm 300 ns, a PyTorch add 200 ns, an NCCL all-reduce
5,000 ns (communication, not modelled) and an argmax reduce 400 ns (no class). The model is tiny-llama at
batch 1, context 100: its decode step at the A100 datasheet's 2,039 GB/s is memory-bound in every op, moving
2,887,120 B in GEMMs, 105,472 B in attention, 7,680 B in norms and 18,688 B in elementwise ops
(test_llm_work.py has the arithmetic).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.llm.calibrate import Profile, calibrate, kernel_class
from analysis.llm.models import load_model
from analysis.llm.place import evaluate, gpu_of, place, step_time
from analysis.llm.work import Setup, step_ops
from analysis.ncu import kernel_table
from analysis.roofline import Roof, Roofs
from analysis.roofline.inputs import read_kernels
from common.errors import CeilingsError

DATA = Path(__file__).parent / "data" / "llm"
PROFILE = DATA / "decode-step.ncu.csv"
A100_BW, H100_BW = 2039e9, 3350e9
AT_ROOF = {"gemm": 2_887_120 / A100_BW, "attention": 105_472 / A100_BW, "norm": 7_680 / A100_BW,
           "elementwise": 18_688 / A100_BW}
MEASURED = {"gemm": 4000e-9, "attention": 800e-9, "norm": 300e-9, "elementwise": 200e-9}
KERNELS = {"gemm": 3, "attention": 1, "norm": 1, "elementwise": 1}  # launches a class has in the profile
# the model's ops: 4 GEMMs a layer x 2 + the LM head; attention a layer; 2 norms a layer + the final one;
# embedding, 2 x (rotary, KV-cache write, 2 residual adds, act_mul)
EXPECTED = {"gemm": 9, "attention": 2, "norm": 5, "elementwise": 11}
SMALLEST = 200e-9  # the PyTorch add: the profile's smallest kernel
TRACES = Path(__file__).resolve().parents[2] / "shared" / "torch-traces"
# a kernel name of each class (KERNEL_CLASSES), for synthetic profiles
NAMES = {"gemm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn", "attention": "flash_fwd_splitkv_kernel",
         "norm": "vllm::rms_norm_kernel", "elementwise": "vectorized_elementwise_kernel"}



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


DECODE_100 = Setup(prompt=100)


def predicted(model, roofs, setup=DECODE_100):
    return place(roofs, step_ops(model, setup, 1, setup.prompt), "decode")


def hand_profile(model, roofs, steps=1):
    return Profile(kernel_table([PROFILE]), predicted(model, roofs), steps)


def test_floor_is_the_smallest_kernel_and_efficiency_the_rest(tiny):
    """Per class: floor = min(the smallest kernel, 200 ns; (measured - at roofs) / kernels), efficiency = at
    roofs / (measured - kernels x floor). Elementwise: its one 200 ns kernel leaves 200 - 9.17 ns of floor and
    is at the roof; GEMMs: 3 kernels of 200 ns floor, 1,416 ns of work in the 3,400 ns left: 41.6 %."""
    a100 = gpu_of("A100 SXM4 80GB")
    cal = calibrate([hand_profile(tiny, a100.roofs)], "decode", a100.label)
    rows = cal.table.set_index("op_class")
    for cls in MEASURED:
        assert rows.loc[cls, "measured_s"] == pytest.approx(MEASURED[cls])
        assert rows.loc[cls, "at_roof_s"] == pytest.approx(AT_ROOF[cls])
        assert (rows.loc[cls, "kernels"], rows.loc[cls, "expected"]) == (KERNELS[cls], EXPECTED[cls])
        floor = min(SMALLEST, (MEASURED[cls] - AT_ROOF[cls]) / KERNELS[cls])
        assert rows.loc[cls, "floor_s"] == pytest.approx(floor)
        assert rows.loc[cls, "efficiency"] == pytest.approx(AT_ROOF[cls] / (MEASURED[cls] - KERNELS[cls] * floor))
    assert rows.loc["gemm", "efficiency"] == pytest.approx(2_887_120 / 2039e9 / 3400e-9)  # 41.6 %
    assert rows.loc["elementwise", "efficiency"] == pytest.approx(1.0)
    assert rows.loc["communication", "measured_s"] == pytest.approx(5e-6)
    assert not rows.loc["communication", "applied"] and "not modelled" in rows.loc["communication", "note"]
    assert not rows.loc["other", "applied"] and rows.loc["other", "kernels"] == 1
    assert set(cal.costs) == set(MEASURED)
    # 3 GEMM kernels where the model counts 9 ops, 1 norm for 5, 1 elementwise for 11: named; attention's 1 of 2 not
    named = " ".join(cal.warnings)
    assert "gemm: the profile has 3 kernels" in named and "expects 9 ops" in named
    assert "norm:" in named and "elementwise:" in named and "attention: the profile" not in named


def test_a_profile_of_several_steps_is_divided_by_them(tiny):
    """The hand profile twice over, given as 2 steps: a step holds the hand profile's kernels and times."""
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = kernel_table([PROFILE])
    twice = Profile(pd.concat([kernels, kernels], ignore_index=True), predicted(tiny, a100.roofs), steps=2)
    rows = calibrate([twice], "decode", a100.label).table.set_index("op_class")
    assert rows.loc["gemm", "kernels"] == KERNELS["gemm"] and rows.loc["gemm", "measured_s"] == pytest.approx(4000e-9)


def test_the_calibration_reproduces_the_profile_and_projects_onto_another_gpu(tiny):
    """On the profiled A100 each class takes kernels x floor + at roofs / efficiency = what it measured; on the
    H100 (every decode op memory-bound on both) the floors stay and the work shrinks by 2,039 / 3,350."""
    a100, h100 = gpu_of("A100 SXM4 80GB"), gpu_of("H100 SXM")
    cal = calibrate([hand_profile(tiny, a100.roofs)], "decode", a100.label)
    setup = Setup(prompt=100, gen=2)
    on_a100 = evaluate(tiny, setup, a100, {"decode": cal.costs})
    on_h100 = evaluate(tiny, setup, h100, {"decode": cal.costs})
    assert on_a100.first_step_s == pytest.approx(sum(MEASURED.values()))
    floors = {c: KERNELS[c] * min(SMALLEST, (MEASURED[c] - AT_ROOF[c]) / KERNELS[c]) for c in MEASURED}
    assert on_h100.first_step_s == pytest.approx(sum(floors[c] + (MEASURED[c] - floors[c]) * A100_BW / H100_BW
                                                     for c in MEASURED))
    gemm = on_h100.decode[on_h100.decode["op_class"] == "gemm"]
    assert gemm["time_at_roof_s"].sum() == pytest.approx(2_887_120 / H100_BW)
    # the prefill was not profiled: it stays at the roofs
    assert (on_h100.prefill["efficiency"] == 1).all() and (on_h100.prefill["floor_s"] == 0).all()


# A one-layer model small enough to count by hand (hidden 64, MLP 128, one head and one KV head of 64, vocabulary
# 128, bf16) on hand roofs: DRAM 1e12 B/s, CUDA cores and bf16 tensor cores 1e13 FLOP/s (ridge 10 FLOP/B).
SMALL = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
         "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 128,
         "max_position_embeddings": 4096}
HAND = Roofs(device="Hand GPU", bandwidths=(Roof("dram", 1e12, "hand"),), flats=(Roof("fp32", 1e13, "hand"),),
             tensor_flats=(Roof("tensor.bf16", 1e13, "hand"),), sm_clock_hz=None)
CONTEXT = 15  # cached tokens: a decode step's query sees 16 keys


def hand_ops(batch):
    """(op class, FLOPs, bytes) of each op of SMALL's decode step at `batch`, one kernel each, counted by hand
    (B rows of 64, 2 B an element): GEMMs 2 B in out FLOPs and in out x 2 weight bytes + B (in + out) x 2;
    norms 4 FLOPs (3 + the weight) an element, the weight and B x 64 read and written."""
    b = batch
    norm = ("norm", b * 64 * 4, 64 * 2 + 2 * b * 64 * 2)
    residual = ("elementwise", b * 64, 3 * b * 64 * 2)  # 1 add: two read, one written

    def gemm(n_in, n_out):
        return "gemm", 2 * b * n_in * n_out, n_in * n_out * 2 + b * (n_in + n_out) * 2

    return {"embedding": ("elementwise", 0, b * 64 * 2 + b * 64 * 2),  # a table row a sequence, written
            "attn_norm": norm,
            "qkv_proj": gemm(64, 3 * 64),
            "rotary": ("elementwise", 3 * b * 2 * 64, 2 * b * 2 * 64 * 2 + b * 64 * 2),  # q, k and cos/sin
            "kv_cache_write": ("elementwise", 0, b * 2 * 64 * 2 + b * 2 * 64 * 2),  # read K V, write the cache
            # 16 keys: 4 x 64 FLOPs a key on tensor cores (QK, PV) + 5 for the softmax; K V read, Q read, O written
            "attention": ("attention", b * 16 * (4 * 64 + 5), 2 * b * 16 * 64 * 2 + 2 * b * 64 * 2),
            "o_proj": gemm(64, 64),
            "attn_residual": residual,
            "mlp_norm": norm,
            "gate_up_proj": gemm(64, 2 * 128),
            "act_mul": ("elementwise", b * 128 * 5, 3 * b * 128 * 2),  # silu 4 + the product; gate, up, out
            "down_proj": gemm(128, 64),
            "mlp_residual": residual,
            "final_norm": norm,
            "lm_head": gemm(64, 128)}


def hand_at_roof(batch):
    """op -> (class, its time at HAND's roofs): FLOPs / 1e13 or bytes / 1e12, whichever is longer."""
    return {op: (cls, max(flops / 1e13, nbytes / 1e12)) for op, (cls, flops, nbytes) in hand_ops(batch).items()}


def small_profile(small, batch, floor, efficiency=None):
    """A profile of one decode step of SMALL at `batch`: a kernel an op, each `floor` + its time at the roofs
    (by hand) / its class's efficiency (1 where not given)."""
    efficiency = efficiency or {}
    times = hand_at_roof(batch)
    kernels = pd.DataFrame({"kernel": [f"{NAMES[cls]}_{i}" for i, (cls, _) in enumerate(times.values())],
                            "time_s": [floor + t / efficiency.get(cls, 1.0) for cls, t in times.values()]})
    return Profile(kernels, predicted(small, HAND, Setup(batch=batch, prompt=CONTEXT)), label=f"batch {batch}")


@pytest.fixture
def small(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    return load_model(str(tmp_path))[0]


def test_the_hand_count_is_the_small_models_step(small):
    """Batch 1 is memory-bound in every op (a GEMM's intensity under 1 FLOP/B), batch 512 compute-bound in its
    GEMMs (qkv: 12,582,912 FLOPs over 286,720 B, 44 FLOP/B, over the ridge of 10) and nowhere else."""
    for batch in (1, 512):
        placed = predicted(small, HAND, Setup(batch=batch, prompt=CONTEXT)).set_index("op")
        ops = hand_ops(batch)
        assert list(placed.index) == list(ops)
        assert list(placed["flops"]) == [f for _, f, _ in ops.values()]
        assert list(placed["bytes"]) == [n for _, _, n in ops.values()]
    assert hand_ops(512)["qkv_proj"][1:] == (12_582_912, 286_720)
    assert set(predicted(small, HAND, Setup(batch=1, prompt=CONTEXT))["bound"]) == {"memory"}
    big = predicted(small, HAND, Setup(batch=512, prompt=CONTEXT))
    assert list(big[big["bound"] == "compute"]["op"]) == ["qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"]


def test_a_batch_1_profile_predicts_batch_512(small):
    """A batch-1 profile of 3 us + work / roof a kernel calibrates to a 3 us floor at the roof (every class's
    measured time less 3 us a kernel is its time at the roofs), so batch 512 is 15 kernels x 3 us + its GEMMs'
    FLOPs (98,304 x 512 over 1e13) + every other op's bytes over 1e12, exactly (the issue's bar is 10 %), and never
    below the roofs. The old multiplier (efficiency = at roofs / measured at batch 1) made the norms a few percent
    efficient and batch 512 a multiple of its roof."""
    cal = calibrate([small_profile(small, 1, 3e-6)], "decode", HAND.label)
    assert all(cost.floor_s == pytest.approx(3e-6, rel=1e-9) and cost.efficiency == pytest.approx(1.0)
               for cost in cal.costs.values())
    gemm_flops = (2 * 64 * 192 + 2 * 64 * 64 + 2 * 64 * 256 + 2 * 128 * 64 + 2 * 64 * 128) * 512
    assert gemm_flops == 98_304 * 512
    other_bytes = 512 * (256 + 640 + 512 + 4352 + 2 * 384 + 768) + 3 * (128 + 256 * 512)  # then the 3 norms
    at_roof = gemm_flops / 1e13 + other_bytes / 1e12
    assert at_roof == pytest.approx(sum(t for _, t in hand_at_roof(512).values()), rel=1e-12)
    ops_512 = step_ops(small, Setup(batch=512, prompt=CONTEXT), 1, CONTEXT)
    predicted_512 = step_time(HAND, ops_512, cal.costs)
    assert predicted_512 == pytest.approx(15 * 3e-6 + at_roof, rel=1e-9)
    assert step_time(HAND, ops_512) == pytest.approx(at_roof, rel=1e-12)
    assert predicted_512 > at_roof


def test_two_profiles_fit_floor_and_efficiency_of_each_class(small):
    """Profiles at batch 1 and 64 built with a 4 us floor and GEMMs at 60 % of the roof (the rest at it): the
    two-point fit recovers both, which one profile cannot separate for the GEMMs."""
    profiles = [small_profile(small, b, 4e-6, {"gemm": 0.6}) for b in (1, 64)]
    rows = calibrate(profiles, "decode", HAND.label).table.set_index("op_class")
    assert rows.loc["gemm", "floor_s"] == pytest.approx(4e-6, rel=1e-6)
    assert rows.loc["gemm", "efficiency"] == pytest.approx(0.6, rel=1e-6)
    assert rows.loc["norm", "floor_s"] == pytest.approx(4e-6, rel=1e-6)
    assert rows.loc["norm", "efficiency"] == pytest.approx(1.0, rel=1e-6)


def test_classes_the_profile_lacks_or_cannot_time_stay_at_the_roof(tiny):
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = pd.DataFrame({"kernel": [NAMES["gemm"]] * 3 + [NAMES["attention"], "rms_norm_kernel", "rms_norm_kernel2"],
                            "time_s": [4e-6] * 3 + [8e-7, 3e-7, float("nan")]})
    cal = calibrate([Profile(kernels, predicted(tiny, a100.roofs))], "decode", a100.label)
    rows = cal.table.set_index("op_class")
    assert set(cal.costs) == {"gemm", "attention"}
    assert rows.loc["elementwise", "note"] == "the profile has no kernel of this class: stays at the roof"
    assert rows.loc["norm", "note"] == "1 of its kernels have no time: stays at the roof"


def test_a_class_measured_faster_than_its_roof_is_held_at_the_roof(tiny):
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = pd.DataFrame({"kernel": [NAMES["gemm"]] * 3 + [NAMES["attention"]], "time_s": [1e-6 / 3] * 3 + [8e-7]})
    cal = calibrate([Profile(kernels, predicted(tiny, a100.roofs))], "decode", a100.label)
    assert AT_ROOF["gemm"] > 1e-6
    assert (cal.costs["gemm"].floor_s, cal.costs["gemm"].efficiency) == (0.0, 1.0)
    assert "faster than the roofs allow" in cal.table.set_index("op_class").loc["gemm", "note"]


def test_efficiencies_under_one_percent_are_named(tiny):
    """A 1 ms GEMM where tiny-llama's 9 GEMMs need 1.4 us at the roofs: 0.14 % after a 200 ns floor."""
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = pd.DataFrame({"kernel": ["ampere_bf16_s16816gemm_bf16_64x64_tn"] * 9 + ["vectorized_elementwise",
                                                                                     NAMES["attention"]],
                            "time_s": [1e-3 / 9] * 9 + [200e-9, 800e-9]})
    cal = calibrate([Profile(kernels, predicted(tiny, a100.roofs))], "decode", a100.label)
    assert any(w.startswith("gemm: efficiency 0.14%") and "under 1%" in w for w in cal.warnings)


@pytest.mark.skipif(not (TRACES / "a100_80gb_shapes_rank0.json.gz").exists(), reason="shared traces absent")
def test_a_training_trace_is_refused(tiny):
    """HolisticTraceAnalysis's rank-0 trace runs AdamFunctor and embedding-backward kernels: training."""
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = read_kernels([str(TRACES / "a100_80gb_shapes_rank0.json.gz")])
    with pytest.raises(CeilingsError, match="training trace"):
        calibrate([Profile(kernels, predicted(tiny, a100.roofs), label="rank0")], "decode", a100.label)


def test_a_profile_without_attention_or_with_far_too_many_gemms_is_refused(small):
    """SMALL's step is one kernel an op: 5 GEMMs and 1 attention. Without its attention kernel it is not the
    model's step; 5 steps given as one are 25 GEMM kernels where it runs 5 (5x, past 4x): refused, naming
    --calibrate-steps; given as 5 steps they calibrate to what one step does."""
    one = small_profile(small, 1, 3e-6)
    kernels = one.kernels
    no_attention = kernels[~kernels["kernel"].str.startswith(NAMES["attention"])]
    assert len(no_attention) == len(kernels) - 1
    with pytest.raises(CeilingsError, match=r"--calibrate batch 1: not a decode step of this model: no attention "
                                            r"kernel \(names matching flash\|.*\) where the model runs 1 attention"):
        calibrate([Profile(no_attention, one.predicted, label="batch 1")], "decode", HAND.label)
    five = pd.concat([kernels] * 5, ignore_index=True)
    with pytest.raises(CeilingsError, match=r"25 gemm kernels a step where the model runs 5 gemm ops, more than 4x "
                                            r"off \(found a step: elementwise 30, gemm 25, norm 15, attention 5 "
                                            r"kernels\).*--calibrate-steps N"):
        calibrate([Profile(five, one.predicted)], "decode", HAND.label)
    as_five = calibrate([Profile(five, one.predicted, steps=5)], "decode", HAND.label).table
    pd.testing.assert_frame_equal(as_five, calibrate([one], "decode", HAND.label).table)


@pytest.mark.skipif(not (TRACES / "alexnet_a100_kernels.json.gz").exists(), reason="shared traces absent")
@pytest.mark.parametrize("model", ["tiny", "Llama-3.1-8B"])
def test_a_non_llm_trace_is_refused(model, tiny):
    """AlexNet's kernels (79 in the trace's kernel events, 20 of them GEMMs by name, no attention) are no LLM's
    decode step: for tiny-llama it lacks attention; for Llama-3.1-8B also its 20 GEMMs are 6.45x under 129."""
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = read_kernels([str(TRACES / "alexnet_a100_kernels.json.gz")])
    llm = tiny if model == "tiny" else load_model(model)[0]
    said = r"no attention kernel .* where the model runs (2|32) attention ops a step"
    if model != "tiny":
        said += r"; 20 gemm kernels a step where the model runs 129 gemm ops, more than 4x off"
    with pytest.raises(CeilingsError, match=said):
        calibrate([Profile(kernels, predicted(llm, a100.roofs, Setup(prompt=2048)))], "decode", a100.label)


@pytest.mark.skipif(not (TRACES / "triton_a100.json.gz").exists(), reason="shared traces absent")
def test_a_single_triton_kernel_is_refused(tiny):
    """The Triton sample is one elementwise kernel: no GEMM and no attention, so no floor of 188 ns either."""
    a100 = gpu_of("A100 SXM4 80GB")
    kernels = read_kernels([str(TRACES / "triton_a100.json.gz")])
    with pytest.raises(CeilingsError, match=r"no gemm kernel .* where the model runs 9 gemm ops a step; no attention "
                                            r"kernel .*found a step: elementwise 1 kernels"):
        calibrate([Profile(kernels, predicted(tiny, a100.roofs))], "decode", a100.label)

"""analysis.llm.work and its placement on roofs: FLOPs and bytes worked out by hand from the fixture configs.

tiny-llama (tests/data/llm/tiny-llama): hidden 256, intermediate 512, 2 layers, 4 heads and 2 KV heads of 64,
vocab 1000, untied. Hand roofs: DRAM 1e12 B/s, fp32 1e13, tensor.bf16 1e14, tensor.fp8 2e14 FLOP/s.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from analysis.llm.models import load_model
from analysis.llm.place import place, step_time
from analysis.llm.work import Setup, check_setup, experts_touched, kv_bytes_per_token, step_ops, weights_bytes
from analysis.roofline import Roof, Roofs
from common.errors import CeilingsError

DATA = Path(__file__).parent / "data" / "llm"
BW = 1e12
ROOFS = Roofs(device="Hand GPU", bandwidths=(Roof("dram", BW, "hand"),), flats=(Roof("fp32", 1e13, "hand"),),
              tensor_flats=(Roof("tensor.bf16", 1e14, "hand"), Roof("tensor.fp8", 2e14, "hand")), sm_clock_hz=None)


@pytest.fixture
def tiny():
    return load_model(str(DATA / "tiny-llama"))[0]


def op(ops, name):
    (hit,) = [o for o in ops if o.name == name]
    return hit


def test_a_decode_step_at_batch_1_reads_every_weight_once_plus_the_kv_cache(tiny):
    """Context 100: the new token attends over 101 keys. All memory-bound, so time = bytes / bandwidth."""
    ops = step_ops(tiny, Setup(batch=1), tokens=1, context=100)
    layer_weights = (256 * (256 + 128 + 128) + 256 * 256 + 256 * 2 * 512 + 512 * 256) * 2  # q k v, o, gate up, down
    weights = (2 * layer_weights + 256 * 1000 * 2  # the LM head
               + 5 * 256 * 2  # two RMSNorm weights a layer and the final one
               + 256 * 2)  # the embedding: one row, not the table
    kv_read = 2 * 101 * 2 * 2 * 64 * 2  # layers x keys x (K, V) x KV heads x head_dim x 2 bytes
    kv_write = 2 * 1 * 2 * 2 * 64 * 2
    activations = (2 * ((256 + 512) + (256 + 256) + (256 + 1024) + (512 + 256)) * 2 + (256 + 1000) * 2  # GEMMs in, out
                   + 2 * 2 * 4 * 64 * 2  # attention: read Q, write O
                   + 5 * 2 * 256 * 2  # norms: read, write
                   + 256 * 2  # embedding: write its row (the row read is weights)
                   + 2 * (2 * 6 * 64 * 2 + 64 * 2)  # rotary: q and k read and written, cos/sin read
                   + 2 * 2 * 2 * 64 * 2  # KV-cache write: read K, V
                   + 2 * 2 * 3 * 256 * 2  # two residual adds: read two, write one
                   + 2 * 3 * 512 * 2)  # act(gate) * up: read two, write one
    placed = place(ROOFS, ops, "decode")
    assert placed["weights_bytes"].sum() == weights == 2_874_368
    assert placed["kv_read_bytes"].sum() == kv_read and placed["kv_write_bytes"].sum() == kv_write
    assert placed["activation_bytes"].sum() == activations == 40_144
    assert set(placed["bound"]) == {"memory"}
    total = weights + kv_read + kv_write + activations
    assert placed["time_s"].sum() == pytest.approx(total / BW, rel=1e-12)
    assert step_time(ROOFS, ops) == pytest.approx(total / BW, rel=1e-12)


def test_gemm_flops_and_roofs(tiny):
    ops = step_ops(tiny, Setup(batch=3), tokens=1, context=0)
    assert op(ops, "qkv_proj").flops == {"tensor.bf16": 2 * 2 * 3 * 256 * 512}  # layers x 2 x rows x in x out
    assert op(ops, "lm_head").flops == {"tensor.bf16": 2 * 3 * 256 * 1000}
    assert op(ops, "attn_norm").flops == {"fp32": 2 * 3 * 256 * 4}  # square, sum, scale, weight
    assert op(ops, "embedding").flops == {}


def test_prefill_attention_counts_the_causal_pairs_flash_skips_and_naive_computes(tiny):
    """Prompt 8 at batch 2: FlashAttention 8 x 9 / 2 = 36 pairs a head, naive the whole 8 x 8 = 64."""
    flash = op(step_ops(tiny, Setup(batch=2), tokens=8, context=0), "attention")
    assert flash.flops == {"tensor.bf16": 2 * 4 * 2 * 4 * 64 * 36, "fp32": 2 * 5 * 2 * 4 * 36}
    assert flash.nbytes == {"kv_read": 2 * 2 * 2 * 8 * 2 * 64 * 2, "activations": 2 * 2 * 2 * 8 * 4 * 64 * 2}
    naive = step_ops(tiny, Setup(batch=2, attention="naive"), tokens=8, context=0)
    scores = 2 * 4 * 8 * 8  # batch x heads x queries x keys
    assert op(naive, "attn_scores").flops == {"tensor.bf16": 2 * 2 * scores * 64}
    assert op(naive, "attn_scores").op_class == op(naive, "attn_values").op_class == "gemm"  # cuBLAS kernels
    assert op(naive, "softmax").nbytes == {"activations": 2 * 2 * scores * 2}  # scores read, probabilities written
    assert op(naive, "softmax").op_class == "attention"


def test_gqa_shrinks_the_kv_cache_by_heads_per_kv_head():
    llama, _ = load_model("Llama-3.1-8B")
    assert kv_bytes_per_token(llama, Setup()) == 32 * 2 * 8 * 128 * 2  # 8 KV heads, not 32
    assert kv_bytes_per_token(llama, Setup(kv_cache="fp8")) == 32 * 2 * 8 * 128 * 1
    decode = op(step_ops(llama, Setup(batch=1), 1, 2047), "attention")
    assert decode.nbytes["kv_read"] == 32 * 2048 * 2 * 8 * 128 * 2


def test_moe_reads_the_experts_a_batch_touches():
    """tiny-mixtral: 8 experts, top-2, hidden 128, intermediate 256, 1 layer. One token touches 2 experts;
    4 tokens 8 x (1 - (6/8)^4) = 5.46875 on average under uniform routing."""
    mixtral, _ = load_model(str(DATA / "tiny-mixtral.json"))
    assert experts_touched(mixtral, 1) == 2
    assert experts_touched(mixtral, 4) == pytest.approx(8 * (1 - 0.75 ** 4))
    expert_gate_up = 2 * 128 * 256 * 2
    one = op(step_ops(mixtral, Setup(batch=1), 1, 10), "experts_gate_up_proj")
    assert one.nbytes["weights"] == 2 * expert_gate_up
    assert one.flops == {"tensor.bf16": 2 * (1 * 2) * 128 * 512}  # every token runs k experts
    four = op(step_ops(mixtral, Setup(batch=4), 1, 10), "experts_down_proj")
    assert four.nbytes["weights"] == pytest.approx(8 * (1 - 0.75 ** 4) * 256 * 128 * 2)
    prefill = op(step_ops(mixtral, Setup(batch=1), 512, 0), "experts_gate_up_proj")
    assert prefill.nbytes["weights"] == pytest.approx(8 * expert_gate_up)  # all of them
    router = op(step_ops(mixtral, Setup(batch=1, weights="int4", group_size=64), 1, 10), "router")
    assert router.nbytes["weights"] == 128 * 8 * 2  # left in 16 bits


def test_int4_weights_with_their_scales_run_on_the_activation_types_roof(tiny):
    """Group 128: a 256 x 512 matrix is 256 x 512 / 2 bytes + 2 groups x 512 columns x (2-byte scale + half-byte
    zero). The GEMM dequantises to bf16: the tensor.bf16 roof, not an int roof."""
    setup = Setup(weights="int4", group_size=128)
    qkv = op(step_ops(tiny, setup, 1, 0), "qkv_proj")
    per_layer = 256 * 512 / 2 + 256 // 128 * 512 * 2.5
    assert qkv.nbytes["weights"] == 2 * per_layer
    assert list(qkv.flops) == ["tensor.bf16"]
    assert op(step_ops(tiny, setup, 1, 0), "lm_head").nbytes["weights"] == 256 * 1000 * 2  # kept 16-bit
    # every stored byte: int4 layers, 16-bit norms, table and head
    o, gate_up, down = 256 * 256 / 2 + 2 * 256 * 2.5, 256 * 1024 / 2 + 2 * 1024 * 2.5, 512 * 256 / 2 + 4 * 256 * 2.5
    assert weights_bytes(tiny, setup) == 2 * (per_layer + o + gate_up + down + 2 * 256 * 2) + 256 * 2 + 2 * 256000 * 2


def test_int8_and_fp8_scales_and_roofs(tiny):
    int8 = op(step_ops(tiny, Setup(weights="int8"), 1, 0), "down_proj")
    assert int8.nbytes["weights"] == 2 * (512 * 256 + 256 * 2)  # a 2-byte scale per output channel
    assert list(int8.flops) == ["tensor.bf16"]
    fp8 = step_ops(tiny, Setup(weights="fp8"), 1, 0)
    assert op(fp8, "down_proj").nbytes["weights"] == 2 * (512 * 256 + 4)  # one fp32 scale a matrix
    assert list(op(fp8, "down_proj").flops) == ["tensor.fp8"]
    assert list(op(fp8, "lm_head").flops) == ["tensor.bf16"]  # the 16-bit head stays on its own roof


def test_fp8_work_is_never_charged_at_another_types_roof(tiny):
    """Roofs without a tensor.fp8 ceiling cannot place fp8 GEMMs: their time and the total are missing."""
    no_fp8 = replace(ROOFS, tensor_flats=(Roof("tensor.bf16", 1e14, "hand"),))
    placed = place(no_fp8, step_ops(tiny, Setup(weights="fp8", batch=512), 1, 0), "decode")
    gemms = placed[placed["roof"] == "tensor.fp8"]
    assert len(gemms) == 4 and gemms["time_s"].isna().all()
    assert set(gemms["why"]) == {"the roofs have no valid tensor.fp8 ceiling"}
    assert math.isnan(step_time(no_fp8, step_ops(tiny, Setup(weights="fp8"), 1, 0)))
    # with an fp8 roof (2e13 here: ridge 20 FLOP/B, under this GEMM's 170), the fp8 GEMM takes its FLOPs / 2e13
    slow_fp8 = replace(ROOFS, tensor_flats=(Roof("tensor.bf16", 1e14, "hand"), Roof("tensor.fp8", 2e13, "hand")))
    at_512 = place(slow_fp8, step_ops(tiny, Setup(weights="fp8", batch=512), 1, 0), "decode")
    gate_up = at_512[at_512["op"] == "gate_up_proj"].iloc[0]
    assert gate_up["bound"] == "compute" and gate_up["time_s"] == pytest.approx(2 * 2 * 512 * 256 * 1024 / 2e13)


def test_cuda_core_and_tensor_work_of_one_op_add_up(tiny):
    """Prefill attention of 1024 tokens: compute-bound; its tensor FLOPs at 1e14 plus its softmax at 1e13."""
    attention = op(step_ops(tiny, Setup(), 1024, 0), "attention")
    pairs = 1024 * 1025 / 2
    placed = place(ROOFS, [attention], "prefill").iloc[0]
    assert placed["bound"] == "compute"
    assert placed["time_s"] == pytest.approx(2 * 4 * 4 * 64 * pairs / 1e14 + 2 * 5 * 4 * pairs / 1e13)


@pytest.mark.parametrize("setup, needle", [
    (Setup(weights="bf16", activations="fp16"), "give the same type to both"),
    (Setup(weights="int4", group_size=96), "qkv_proj has 256 input features, not a multiple of the group"),
    (Setup(batch=0), "--batch 0: must be 1 or more"),
])
def test_setups_that_cannot_be_modelled(tiny, setup, needle):
    with pytest.raises(CeilingsError, match=needle):
        check_setup(tiny, setup)


# Mistral-7B-v0.1's config.json (huggingface.co/mistralai/Mistral-7B-v0.1): a sliding_window and no layer_types,
# which transformers' MistralAttention applies in every layer
MISTRAL_V01 = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
               "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
               "max_position_embeddings": 32768, "sliding_window": 4096}


def test_a_window_on_every_layer_caps_its_cache_and_its_attention():
    """Mistral-7B-v0.1: every one of 32 layers holds at most 4,096 tokens of K and V (8 KV heads of 128, bf16)
    and a query reads at most 4,096 keys, so a decode step at context 8,192 does the attention of one at 4,096."""
    from analysis.llm.models import model_from_config
    from analysis.llm.work import context_fit, kv_cache_bytes

    model = model_from_config(MISTRAL_V01, "m", "test")
    assert (model.window_layers, model.sliding_window) == (32, 4096)
    check_setup(model, Setup(prompt=8000, gen=192))  # past the window: modelled, not refused
    assert kv_cache_bytes(model, Setup(), 8192) == 32 * 4096 * 2 * 8 * 128 * 2 == 536_870_912
    assert kv_cache_bytes(model, Setup(batch=3), 1000) == 3 * 32 * 1000 * 2 * 8 * 128 * 2  # within: every token
    assert context_fit(model, Setup(), 1e12) == 32768  # the cache stops growing: max_position_embeddings bounds it
    long, at_window = (step_ops(model, Setup(batch=1), 1, c) for c in (8192, 4096))
    assert [o.name for o in long if o.op_class == "attention"] == ["attention_sliding"]
    assert op(long, "attention_sliding").flops == op(at_window, "attention_sliding").flops
    assert op(long, "attention_sliding").flops["tensor.bf16"] == 32 * 4 * 32 * 128 * 4096  # 4 nh d FLOPs a pair
    assert op(long, "attention_sliding").nbytes["kv_read"] == 32 * 4096 * 2 * 8 * 128 * 2
    below = op(step_ops(model, Setup(batch=1), 1, 1000), "attention_sliding")
    assert below.flops["tensor.bf16"] == 32 * 4 * 32 * 128 * 1001  # within the window: every cached key and itself


@pytest.mark.parametrize("model_type", ["llama", "qwen3_moe"])
def test_a_window_on_layers_not_known_is_refused_past_it(model_type):
    """Llama's attention has no window in transformers; Qwen3-MoE's covered layers changed between versions:
    their sliding_window is kept, and refused past its length, naming the field and the remedy."""
    from analysis.llm.models import model_from_config

    config = {**MISTRAL_V01, "model_type": model_type, "use_sliding_window": True, "num_experts": 8,
              "num_experts_per_tok": 2, "moe_intermediate_size": 256}
    model = model_from_config(config, "m", "test")
    assert (model.window_layers, model.sliding_window) == (0, 4096)
    check_setup(model, Setup(prompt=4000, gen=96))  # within the window: what it computes is full attention
    with pytest.raises(CeilingsError, match=r"--prompt 4000 \+ --gen 97: 4097 tokens is past m's sliding_window "
                                            rf".4096., and which layers it covers is not known for a {model_type} "
                                            r"config without layer_types; give layer_types"):
        check_setup(model, Setup(prompt=4000, gen=97))

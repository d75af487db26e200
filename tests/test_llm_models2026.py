"""The models of 2026 in analysis.llm: DeepSeek-V3 (MLA, shared experts, dense first layers), Qwen3-30B-A3B (q/k
norms, 128 experts) and gpt-oss (sliding-window layers, sinks, biases), and expert parallelism (--ep).

Every expected value is hand arithmetic from the published config.json (the numbers written out below) and
the model cards' counts: DeepSeek-V3 671 B total, 37 B active; Qwen3-30B-A3B 30.5 B total; gpt-oss-120b
116.83 B total, 5.13 B active; gpt-oss-20b 20.91 B, 3.61 B.
"""

from __future__ import annotations

import json

import pytest

from analysis.llm.__main__ import main
from analysis.llm.models import SHIPPED, load_model, model_from_config
from analysis.llm.work import (
    Setup,
    check_setup,
    context_fit,
    kv_bytes_per_token,
    kv_cache_bytes,
    parameters,
    step_ops,
    weights_bytes,
)
from common.errors import CeilingsError

BF16 = "tensor.bf16"


def op(ops, name):
    (hit,) = [o for o in ops if o.name == name]
    return hit


# DeepSeek-V3 (huggingface.co/deepseek-ai/DeepSeek-V3 config.json)
DS = dict(h=7168, V=129280, L=61, nh=128, q=1536, c=512, r=64, nope=128, v=128, E=256, k=8, fm=2048, fd=18432,
          dense=3)


def _deepseek_params(per_layer_experts: int, tables: int) -> int:
    h, q, c, r, nh, nope, v = DS["h"], DS["q"], DS["c"], DS["r"], DS["nh"], DS["nope"], DS["v"]
    attention = h * q + h * (c + r) + q * nh * (nope + r) + c * nh * (nope + v) + nh * v * h
    norms = 2 * h + q + c  # input and post-attention norms, q_a_layernorm, kv_a_layernorm
    moe = h * DS["E"] + 3 * h * DS["fm"] + per_layer_experts * 3 * h * DS["fm"]  # router, shared expert, routed
    return (tables * DS["V"] * h + DS["L"] * (attention + norms) + DS["dense"] * 3 * h * DS["fd"]
            + (DS["L"] - DS["dense"]) * moe + h)


def test_deepseek_v3_parameters_and_latent_kv_cache():
    model = load_model("DeepSeek-V3")[0]
    assert (model.mla.q_rank, model.mla.kv_rank, model.mla.rope, model.dense_layers) == (1536, 512, 64, 3)
    total = parameters(model)
    assert total == _deepseek_params(DS["E"], 2)
    assert round(total / 1e9) == 671
    active = parameters(model, active=True)
    assert active == _deepseek_params(DS["k"], 1)
    assert round(active / 1e9) == 37  # 36.6 B: the LM head and 8 of 256 experts, not the embedding table
    # the latent and the rope key, not 2 x 128 heads x 192: (512 + 64) x 2 bytes a layer, whole on every GPU of --tp
    assert kv_bytes_per_token(model, Setup()) == 61 * (512 + 64) * 2 == 70_272
    assert kv_bytes_per_token(model, Setup(tp=8, kv_cache="fp8")) == 61 * (512 + 64) * 1


def test_deepseek_v3_decode_attention_is_the_absorbed_form():
    """One token at context 4096: 128 heads score 4097 latent keys of 576 and sum 4097 latents of 512."""
    model = load_model("DeepSeek-V3")[0]
    ops = step_ops(model, Setup(batch=1), 1, 4096)
    L, nh, keys = 61, 128, 4097
    attention = op(ops, "attention")
    assert attention.flops[BF16] == L * 2 * nh * (576 + 512) * keys
    assert attention.flops["fp32"] == L * 5 * nh * keys  # softmax
    assert attention.nbytes["kv_read"] == L * keys * 576 * 2  # the latent read once for all heads
    assert attention.nbytes["activations"] == L * nh * (576 + 512) * 2  # q in the latent, o in the latent
    w_uk, w_uv = op(ops, "w_uk"), op(ops, "w_uv")
    assert w_uk.flops[BF16] == L * 2 * nh * 128 * 512 and w_uk.nbytes["weights"] == L * 512 * nh * 128 * 2
    assert w_uv.flops[BF16] == L * 2 * nh * 512 * 128 and w_uv.nbytes["weights"] == L * 512 * nh * 128 * 2
    assert op(ops, "qkv_a_proj").flops[BF16] == L * 2 * 7168 * (1536 + 512 + 64)
    assert op(ops, "kv_cache_write").nbytes["kv_write"] == L * 576 * 2


def test_deepseek_v3_decode_moe_ops():
    """Batch 1: 58 MoE layers each run the shared expert and 8 routed experts of 2048; 3 dense layers of 18432."""
    model = load_model("DeepSeek-V3")[0]
    ops = step_ops(model, Setup(batch=1), 1, 4096)
    h, fm = 7168, 2048
    experts = op(ops, "experts_gate_up_proj")
    assert experts.count == 58
    assert experts.flops[BF16] == 58 * 2 * 8 * h * 2 * fm
    assert experts.nbytes["weights"] == pytest.approx(58 * 8 * h * 2 * fm * 2, rel=1e-12)  # exactly 8 touched
    assert op(ops, "experts_down_proj").flops[BF16] == 58 * 2 * 8 * fm * h
    assert op(ops, "shared_gate_up_proj").flops[BF16] == 58 * 2 * h * 2 * fm
    assert op(ops, "shared_down_proj").nbytes["weights"] == 58 * fm * h * 2
    assert op(ops, "router").flops[BF16] == 58 * 2 * h * 256
    dense = op(ops, "gate_up_proj")
    assert dense.count == 3 and dense.flops[BF16] == 3 * 2 * h * 2 * 18432


# Qwen3-30B-A3B (huggingface.co/Qwen/Qwen3-30B-A3B config.json)
def _qwen3_params(per_layer_experts: int, tables: int) -> int:
    h, V, L, nh, nkv, d, E, f = 2048, 151936, 48, 32, 4, 128, 128, 768
    attention = h * (nh + 2 * nkv) * d + nh * d * h
    norms = 2 * h + 2 * d  # input, post-attention; q_norm and k_norm of a head's width
    return tables * V * h + L * (attention + norms + h * E + per_layer_experts * 3 * h * f) + h


def test_qwen3_moe_parameters_kv_and_decode_ops():
    model = load_model("Qwen3-30B-A3B")[0]
    assert parameters(model) == _qwen3_params(128, 2)
    assert float(f"{parameters(model):.3g}") == 30.5e9
    # 3.04 B multiplied a token; the card's 3.3 B counts the embedding table too (3.35 B)
    assert parameters(model, active=True) == _qwen3_params(8, 1)
    assert 3.3e9 <= parameters(model, active=True) + 151936 * 2048 < 3.4e9  # with the embedding table
    assert kv_bytes_per_token(model, Setup()) == 48 * 2 * 4 * 128 * 2 == 98_304
    ops = step_ops(model, Setup(batch=1), 1, 2048)
    attention = op(ops, "attention")
    assert attention.flops[BF16] == 48 * 4 * 32 * 128 * 2049
    assert attention.nbytes["kv_read"] == 48 * 2 * 2049 * 4 * 128 * 2
    experts = op(ops, "experts_gate_up_proj")
    assert experts.flops[BF16] == 48 * 2 * 8 * 2048 * 2 * 768
    assert experts.nbytes["weights"] == pytest.approx(48 * 8 * 2048 * 2 * 768 * 2, rel=1e-12)
    assert op(ops, "qk_norm").nbytes["weights"] == 48 * 2 * 128 * 2


def test_qwen3_moe_dense_layers_from_the_config():
    """decoder_sparse_step 2: layers 1, 3, ... are MoE (layer i is when (i + 1) % 2 == 0); mlp_only_layers [1] makes
    one more dense: 4 layers, 3 dense of intermediate_size, 1 MoE."""
    config = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 4,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
              "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "decoder_sparse_step": 2,
              "mlp_only_layers": [1]}
    model = model_from_config(config, "t", "t")
    assert (model.dense_layers, model.dense_intermediate, model.intermediate) == (3, 256, 32)
    attention = 64 * (4 + 4) * 16 + 4 * 16 * 64
    expected = 2 * 100 * 64 + 4 * (attention + 2 * 64 + 2 * 16) + 3 * 3 * 64 * 256 + (64 * 8 + 8 * 3 * 64 * 32) + 64
    assert parameters(model) == expected


# gpt-oss (huggingface.co/openai/gpt-oss-120b and gpt-oss-20b config.json)
def _gpt_oss_params(L: int, per_layer_experts: int, E: int, tables: int) -> int:
    h, V, nh, nkv, d, f = 2880, 201088, 64, 8, 64, 2880
    attention = h * (nh + 2 * nkv) * d + (nh + 2 * nkv) * d + nh * d * h + h  # q k v o with their biases
    router = h * E + E
    expert = 2 * (h * f + f) + f * h + h  # gate, up, down with biases
    return tables * V * h + L * (attention + 2 * h + nh + router + per_layer_experts * expert) + h  # + sinks


@pytest.mark.parametrize("name, L, E, total, active", [("gpt-oss-120b", 36, 128, 116.83e9, 5.13e9),
                                                      ("gpt-oss-20b", 24, 32, 20.91e9, 3.61e9)])
def test_gpt_oss_parameters(name, L, E, total, active):
    model = load_model(name)[0]
    assert parameters(model) == _gpt_oss_params(L, E, E, 2)
    assert round(parameters(model) / 1e7) * 1e7 == pytest.approx(total)
    assert parameters(model, active=True) == _gpt_oss_params(L, 4, E, 1)
    assert round(parameters(model, active=True) / 1e7) * 1e7 == pytest.approx(active)


def test_gpt_oss_sliding_layers_cap_the_kv_cache_and_the_attention_span():
    """18 of 36 layers slide over a window of 128: past it they hold 128 tokens and read 128 keys."""
    model = load_model("gpt-oss-120b")[0]
    assert (model.window_layers, model.sliding_window) == (18, 128)
    layer_token = 2 * 8 * 64 * 2  # K and V of 8 KV heads of 64, bf16
    assert kv_bytes_per_token(model, Setup()) == 36 * layer_token == 73_728
    assert kv_cache_bytes(model, Setup(batch=2), 4096) == 2 * (18 * 4096 + 18 * 128) * layer_token
    assert kv_cache_bytes(model, Setup(), 100) == 36 * 100 * layer_token  # within the window: every layer
    room = (18 * 10_000 + 18 * 128) * layer_token
    assert context_fit(model, Setup(), room) == 10_000
    check_setup(model, Setup(prompt=8192, gen=256))  # past the window: modelled, not refused

    decode = step_ops(model, Setup(batch=1), 1, 4096)
    full, sliding = op(decode, "attention"), op(decode, "attention_sliding")
    assert full.count == sliding.count == 18
    assert full.flops[BF16] == 18 * 4 * 64 * 64 * 4097
    assert sliding.flops[BF16] == 18 * 4 * 64 * 64 * 128
    assert full.nbytes["kv_read"] == 18 * 4097 * layer_token
    assert sliding.nbytes["kv_read"] == 18 * 128 * layer_token
    # the sinks' one logit a head in the denominator is not counted: the softmax's 5 FLOPs a score only
    assert sliding.flops["fp32"] == 18 * 5 * 64 * 128
    prefill = op(step_ops(model, Setup(batch=1), 4096, 0), "attention_sliding")
    pairs = 128 * 129 // 2 + (4096 - 128) * 128  # query n sees min(n, 128) keys
    assert prefill.flops[BF16] == 18 * 4 * 64 * 64 * pairs


def test_gpt_oss_decode_moe_ops_carry_the_expert_biases():
    model = load_model("gpt-oss-120b")[0]
    ops = step_ops(model, Setup(batch=1), 1, 4096)
    h = f = 2880
    experts = op(ops, "experts_gate_up_proj")
    assert experts.flops[BF16] == 36 * 2 * 4 * h * 2 * f
    assert experts.flops["fp32"] == 36 * 4 * 2 * f  # the bias adds
    assert experts.nbytes["weights"] == pytest.approx(36 * 4 * 2 * (h * f + f) * 2, rel=1e-12)
    assert op(ops, "experts_down_proj").nbytes["weights"] == pytest.approx(36 * 4 * (f * h + h) * 2, rel=1e-12)
    assert op(ops, "router").nbytes["weights"] == 36 * (h * 128 + 128) * 2


def test_expert_parallelism_holds_whole_experts_and_dispatches_routed_tokens():
    """DeepSeek-V3 over 8 GPUs, attention unsplit (8 attention groups of 16 sequences each): a GPU holds 32
    experts whole, computes 16 x 8 routed rows on average, and sends each of its tokens' 8 copies to the GPUs of
    their experts (7/8 of them leave) and back."""
    model = load_model("DeepSeek-V3")[0]
    setup = Setup(batch=16, ep=8, weights="fp8")
    check_setup(model, setup)
    h, fm, B = 7168, 2048, 16
    ops = step_ops(model, setup, 1, 1024)
    dispatch = op(ops, "ep_dispatch")
    assert dispatch.op_class == "communication" and dispatch.count == 58
    assert dispatch.nbytes["interconnect"] == pytest.approx(58 * B * 8 * 7 / 8 * h * 2)
    assert op(ops, "ep_combine").nbytes["interconnect"] == dispatch.nbytes["interconnect"]
    experts = op(ops, "experts_gate_up_proj")
    assert experts.flops["tensor.fp8"] == pytest.approx(58 * 2 * B * 8 * h * 2 * fm)
    touched = 32 * (1 - (1 - 8 / 256) ** (8 * B))  # of this GPU's 32, by the 8 groups' 128 tokens
    assert experts.nbytes["weights"] == pytest.approx(58 * touched * (2 * h * fm + 2 * 4), rel=1e-12)  # + fp8 scales
    all_local = weights_bytes(model, Setup(weights="fp8"))
    expert_bytes = 58 * 256 * (3 * h * fm + 3 * 4)
    assert weights_bytes(model, setup) == pytest.approx(all_local - expert_bytes * 7 / 8)


def test_expert_parallelism_over_the_tensor_parallel_gpus_needs_no_all_to_all():
    """--tp 8 --ep 8: the tokens are on every GPU already; each computes 1/8 of the routed rows on whole
    experts, and the all-reduce after the MLP sums them."""
    model = load_model("Qwen3-30B-A3B")[0]
    ops = step_ops(model, Setup(batch=64, tp=8, ep=8), 1, 1024)
    assert not [o for o in ops if o.name.startswith("ep_")]
    experts = op(ops, "experts_gate_up_proj")
    assert experts.flops[BF16] == pytest.approx(48 * 2 * 64 * 8 / 8 * 2048 * 2 * 768)
    touched = 16 * (1 - (1 - 8 / 128) ** 64)
    assert experts.nbytes["weights"] == pytest.approx(48 * touched * 2048 * 2 * 768 * 2)


@pytest.mark.parametrize("name, setup, needle", [
    ("Llama-3.1-8B", Setup(ep=2), "has no experts"),
    ("Qwen3-30B-A3B", Setup(tp=8, ep=4), "multiple of --tp 8"),
    ("DeepSeek-V3", Setup(attention="naive"), "FlashMLA"),
])
def test_setups_that_cannot_be_modelled(name, setup, needle):
    with pytest.raises(CeilingsError, match=needle):
        check_setup(load_model(name)[0], setup)


@pytest.mark.parametrize("change, needle", [
    ({"q_lora_rank": "drop"}, "q_lora_rank is missing"),
    ({"layer_types": ["sliding_attention"]}, "layer_types must list 36"),
    ({"first_k_dense_replace": -1}, "first_k_dense_replace = -1"),
])
def test_config_errors_name_the_field(change, needle):
    name = "gpt-oss-120b" if "layer_types" in change else "DeepSeek-V3"
    config = dict(SHIPPED[name][1])
    for key, value in change.items():
        if value == "drop":
            del config[key]
        else:
            config[key] = value
    with pytest.raises(CeilingsError, match=needle):
        model_from_config(config, name, "c.json")


def test_mla_without_a_q_bottleneck():
    """q_lora_rank null (DeepSeek-V2-Lite): q comes straight from the hidden state, no q_b_proj."""
    config = {**SHIPPED["DeepSeek-V3"][1], "q_lora_rank": None}
    model = model_from_config(config, "lite", "c.json")
    ops = step_ops(model, Setup(), 1, 10)
    assert not [o for o in ops if o.name == "q_b_proj"]
    assert op(ops, "qkv_a_proj").flops[BF16] == 61 * 2 * 7168 * (128 * 192 + 512 + 64)


def test_the_cli_takes_ep_and_reports_it(capsys):
    """gpt-oss-20b over --ep 4 --tp 2: two attention groups, 8 experts a GPU, the all-to-all in the ops."""
    assert main(["--model", "gpt-oss-20b", "--roofs", "H100 SXM", "--tp", "2", "--ep", "4", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["setup"]["ep"] == 4 and doc["model"]["active_parameters"] == _gpt_oss_params(24, 4, 32, 1)
    names = {o["op"] for o in doc["gpus"][0]["ops"] if o["phase"] == "decode"}
    assert {"ep_dispatch", "ep_combine", "attention_sliding"} <= names


def test_int4_groups_are_checked_against_the_experts_a_gpu_holds():
    """Qwen3-30B-A3B's experts of 768: split by --tp 8 their down_proj has 96 inputs (no group of 256 fits);
    held whole by --ep 8 it has 768."""
    model = load_model("Qwen3-30B-A3B")[0]
    check_setup(model, Setup(weights="int4", tp=8, ep=8, group_size=256))
    with pytest.raises(CeilingsError, match="experts_down_proj has 96 input features"):
        check_setup(model, Setup(weights="int4", tp=8, group_size=256))
